//! The shape check every Kafka body passes before `kafka-protocol` decodes it: requests on the broker's side
//! ([`check`]), responses on a client's ([`check_response`]: the mirror link's answers from a source cluster,
//! which is as untrusted as a client — its fetches and the group offsets it copies).
//!
//! `kafka-protocol` 0.18 sizes each array with `Vec::with_capacity(count)` straight from the wire, before it has
//! decoded one element (upstream PRs #152/#161/#200, open): a 20-byte frame claiming two billion topics makes
//! the process ask for hundreds of gigabytes and abort. This module walks a body by the field layout of each
//! (API, version) the broker advertises — one layout per API for all its versions, read in the compact form
//! with tagged fields at flexible versions (KIP-482) — and refuses a body whose array count exceeds the bytes left
//! (every element takes at least one byte), whose strings or byte fields run past the end, that holds more than
//! [`MAX_ELEMENTS`] array elements in all (decoded structs cost more than their bytes: this bounds the
//! amplification), or that has bytes left over — but after a flexible request, whose extra bytes Kafka ignores and
//! librdkafka sends ([`check_request`] returns the length walked, and only that much is decoded). Only a body that
//! passes is decoded.
//!
//! The layouts are checked against `kafka-protocol`'s own encoder in the tests (every advertised version of
//! every request, encoded there, walks to exactly its last byte here: [`check_exact`]).

use kafka_protocol::messages::ApiKey;

/// The most array elements (over all arrays of a request) a request may hold.
pub const MAX_ELEMENTS: usize = 100_000;

/// Why a body was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// The body ended inside a field.
    #[error("the body ends inside a field at byte {at}")]
    Truncated {
        /// Where the field started.
        at: usize,
    },
    /// An array claims more elements than bytes remain, or a length is negative where null is not allowed.
    #[error("an array at byte {at} claims {count} elements with {remaining} bytes left")]
    ImpossibleCount {
        /// Where the count is.
        at: usize,
        /// The count.
        count: i64,
        /// Bytes after it.
        remaining: usize,
    },
    /// A length field is negative where only -1 (null) or a size is allowed.
    #[error("a length of {length} at byte {at}")]
    BadLength {
        /// Where the length is.
        at: usize,
        /// The length.
        length: i64,
    },
    /// More array elements in all than [`MAX_ELEMENTS`].
    #[error("the body holds more than {MAX_ELEMENTS} array elements")]
    TooManyElements,
    /// Bytes after the last field.
    #[error("{0} bytes after the last field")]
    TrailingBytes(usize),
    /// There is no layout for this API and version (a broker does not advertise it; a client does not send it).
    #[error("no layout for this API and version")]
    Unsupported,
}

/// One field of a layout, present in versions `since..=until`.
#[derive(Debug, Clone, Copy)]
struct Field {
    since: i16,
    until: i16,
    kind: Kind,
}

/// A field's type. A layout is written once for every version of its API: at a flexible version (KIP-482) the
/// walker reads strings, bytes and arrays in their compact form (unsigned-varint length + 1, 0 for null), a
/// tagged-field section after each struct element of an array and one after the body.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Fixed(usize),
    /// INT16 length (compact when flexible), null allowed if `nullable`.
    String {
        nullable: bool,
    },
    /// INT32 length (compact when flexible), null allowed if `nullable`.
    Bytes {
        nullable: bool,
    },
    /// INT32 count (compact when flexible), null allowed if `nullable`; `structs` says whether each element is a
    /// struct (with its own tagged fields when flexible) or a plain value.
    Array {
        nullable: bool,
        structs: bool,
        of: &'static [Field],
    },
}

const fn all(kind: Kind) -> Field {
    Field {
        since: 0,
        until: i16::MAX,
        kind,
    }
}

const fn since(version: i16, kind: Kind) -> Field {
    Field {
        since: version,
        until: i16::MAX,
        kind,
    }
}

const fn between(since: i16, until: i16, kind: Kind) -> Field {
    Field { since, until, kind }
}

const I8: Kind = Kind::Fixed(1);
const I16: Kind = Kind::Fixed(2);
const I32: Kind = Kind::Fixed(4);
const I64: Kind = Kind::Fixed(8);
const UUID: Kind = Kind::Fixed(16);
const STRING: Kind = Kind::String { nullable: false };
const NULLABLE_STRING: Kind = Kind::String { nullable: true };
const BYTES: Kind = Kind::Bytes { nullable: false };
/// An array of structs.
const fn array(of: &'static [Field]) -> Kind {
    Kind::Array {
        nullable: false,
        structs: true,
        of,
    }
}
const fn nullable_array(of: &'static [Field]) -> Kind {
    Kind::Array {
        nullable: true,
        structs: true,
        of,
    }
}
/// An array of plain values (INT32s, strings): no tagged fields per element.
const fn values(of: &'static Field) -> Kind {
    Kind::Array {
        nullable: false,
        structs: false,
        of: std::slice::from_ref(of),
    }
}
const INT32S: Kind = values(&all(I32));
const STRINGS: Kind = values(&all(STRING));
/// A nullable array of strings.
const NULLABLE_STRINGS: Kind = Kind::Array {
    nullable: true,
    structs: false,
    of: std::slice::from_ref(&all(STRING)),
};

const PRODUCE: &[Field] = &[
    since(3, NULLABLE_STRING), // transactional_id
    all(I16),                  // acks
    all(I32),                  // timeout_ms
    all(array(&[
        all(STRING), // topic
        all(array(&[all(I32), all(Kind::Bytes { nullable: true })])),
    ])),
];

const FETCH: &[Field] = &[
    all(I32),      // replica_id
    all(I32),      // max_wait_ms
    all(I32),      // min_bytes
    since(3, I32), // max_bytes
    since(4, I8),  // isolation_level
    since(7, I32), // session_id
    since(7, I32), // session_epoch
    all(array(&[
        all(STRING),
        all(array(&[
            all(I32),      // partition
            since(9, I32), // current_leader_epoch
            all(I64),      // fetch_offset
            since(5, I64), // log_start_offset
            all(I32),      // partition_max_bytes
        ])),
    ])),
    since(7, array(&[all(STRING), all(INT32S)])), // forgotten topics
    since(11, STRING),                            // rack_id
];

const LIST_OFFSETS: &[Field] = &[
    all(I32),     // replica_id
    since(2, I8), // isolation_level
    all(array(&[
        all(STRING),
        all(array(&[
            all(I32),           // partition_index
            since(4, I32),      // current_leader_epoch
            all(I64),           // timestamp
            between(0, 0, I32), // max_num_offsets
        ])),
    ])),
    since(10, I32), // timeout_ms
];

const METADATA: &[Field] = &[
    between(0, 0, STRINGS),
    since(
        1,
        nullable_array(&[
            since(10, UUID),            // topic_id
            between(0, 9, STRING),      // name
            since(10, NULLABLE_STRING), // name (null for a topic asked by id)
        ]),
    ),
    since(4, I8),       // allow_auto_topic_creation
    between(8, 10, I8), // include_cluster_authorized_operations
    since(8, I8),       // include_topic_authorized_operations
];

const OFFSET_COMMIT: &[Field] = &[
    all(STRING),               // group_id
    since(1, I32),             // generation_id_or_member_epoch
    since(1, STRING),          // member_id
    since(7, NULLABLE_STRING), // group_instance_id
    between(2, 4, I64),        // retention_time_ms
    all(array(&[
        all(STRING),
        all(array(&[
            all(I32),             // partition_index
            all(I64),             // committed_offset
            since(6, I32),        // committed_leader_epoch
            between(1, 1, I64),   // commit_timestamp
            all(NULLABLE_STRING), // committed_metadata
        ])),
    ])),
];

/// OffsetFetch's topics: a name and its partitions.
const OFFSET_FETCH_TOPICS: &[Field] = &[all(STRING), all(INT32S)];

const OFFSET_FETCH: &[Field] = &[
    between(0, 7, STRING), // group_id
    between(0, 1, array(OFFSET_FETCH_TOPICS)),
    between(2, 7, nullable_array(OFFSET_FETCH_TOPICS)),
    since(
        8,
        array(&[
            all(STRING),                              // group_id
            since(9, NULLABLE_STRING),                // member_id
            since(9, I32),                            // member_epoch
            all(nullable_array(OFFSET_FETCH_TOPICS)), // topics
        ]),
    ),
    since(7, I8), // require_stable
];

const FIND_COORDINATOR: &[Field] = &[
    between(0, 3, STRING), // key
    since(1, I8),          // key_type
    since(4, STRINGS),     // coordinator_keys
];

const JOIN_GROUP: &[Field] = &[
    all(STRING),               // group_id
    all(I32),                  // session_timeout_ms
    since(1, I32),             // rebalance_timeout_ms
    all(STRING),               // member_id
    since(5, NULLABLE_STRING), // group_instance_id
    all(STRING),               // protocol_type
    all(array(&[
        all(STRING), // name
        all(BYTES),  // metadata
    ])),
    since(8, NULLABLE_STRING), // reason
];

const SYNC_GROUP: &[Field] = &[
    all(STRING),               // group_id
    all(I32),                  // generation_id
    all(STRING),               // member_id
    since(3, NULLABLE_STRING), // group_instance_id
    since(5, NULLABLE_STRING), // protocol_type
    since(5, NULLABLE_STRING), // protocol_name
    all(array(&[
        all(STRING), // member_id
        all(BYTES),  // assignment
    ])),
];

const HEARTBEAT: &[Field] = &[
    all(STRING),               // group_id
    all(I32),                  // generation_id
    all(STRING),               // member_id
    since(3, NULLABLE_STRING), // group_instance_id
];

const DESCRIBE_GROUPS: &[Field] = &[
    all(STRINGS), // groups
    since(3, I8), // include_authorized_operations
];

const LIST_GROUPS: &[Field] = &[
    since(4, STRINGS), // states_filter
    since(5, STRINGS), // types_filter
];

const DELETE_GROUPS: &[Field] = &[all(STRINGS)]; // groups_names

const LEAVE_GROUP: &[Field] = &[
    all(STRING),           // group_id
    between(0, 2, STRING), // member_id
    since(
        3,
        array(&[
            all(STRING),               // member_id
            all(NULLABLE_STRING),      // group_instance_id
            since(5, NULLABLE_STRING), // reason
        ]),
    ),
];

const CREATE_TOPICS: &[Field] = &[
    all(array(&[
        all(STRING), // name
        all(I32),    // num_partitions
        all(I16),    // replication_factor
        all(array(&[all(I32), all(INT32S)])),
        all(array(&[all(STRING), all(NULLABLE_STRING)])),
    ])),
    all(I32),     // timeout_ms
    since(1, I8), // validate_only
];

const ADD_PARTITIONS_TO_TXN: &[Field] = &[
    all(STRING), // transactional_id
    all(I64),
    all(I16),
    all(array(&[all(STRING), all(INT32S)])),
];

const ADD_OFFSETS_TO_TXN: &[Field] = &[all(STRING), all(I64), all(I16), all(STRING)];

const DELETE_RECORDS: &[Field] = &[
    all(array(&[
        all(STRING), // name
        all(array(&[
            all(I32), // partition_index
            all(I64), // offset
        ])),
    ])),
    all(I32), // timeout_ms
];

const DESCRIBE_CONFIGS: &[Field] = &[
    all(array(&[
        all(I8),               // resource_type
        all(STRING),           // resource_name
        all(NULLABLE_STRINGS), // configuration_keys
    ])),
    since(1, I8), // include_synonyms
    since(3, I8), // include_documentation
];

const ALTER_CONFIGS: &[Field] = &[
    all(array(&[
        all(I8),                                          // resource_type
        all(STRING),                                      // resource_name
        all(array(&[all(STRING), all(NULLABLE_STRING)])), // configs: name, value
    ])),
    all(I8), // validate_only
];

const INCREMENTAL_ALTER_CONFIGS: &[Field] = &[
    all(array(&[
        all(I8),                                                   // resource_type
        all(STRING),                                               // resource_name
        all(array(&[all(STRING), all(I8), all(NULLABLE_STRING)])), // configs: name, operation, value
    ])),
    all(I8), // validate_only
];

const SASL_HANDSHAKE: &[Field] = &[all(STRING)]; // mechanism

const SASL_AUTHENTICATE: &[Field] = &[all(BYTES)]; // auth_bytes

const DESCRIBE_USER_SCRAM_CREDENTIALS: &[Field] = &[all(nullable_array(&[all(STRING)]))]; // users: name

/// An ACL filter (DescribeAcls's body, DeleteAcls's elements).
const ACL_FILTER: &[Field] = &[
    all(I8),              // resource type
    all(NULLABLE_STRING), // resource name
    since(1, I8),         // pattern type
    all(NULLABLE_STRING), // principal
    all(NULLABLE_STRING), // host
    all(I8),              // operation
    all(I8),              // permission type
];

const DESCRIBE_ACLS: &[Field] = ACL_FILTER;

const DELETE_ACLS: &[Field] = &[all(array(ACL_FILTER))]; // filters

const CREATE_ACLS: &[Field] = &[all(array(&[
    all(I8),      // resource type
    all(STRING),  // resource name
    since(1, I8), // pattern type
    all(STRING),  // principal
    all(STRING),  // host
    all(I8),      // operation
    all(I8),      // permission type
]))];

const ALTER_USER_SCRAM_CREDENTIALS: &[Field] = &[
    all(array(&[all(STRING), all(I8)])), // deletions: name, mechanism
    all(array(&[
        all(STRING), // name
        all(I8),     // mechanism
        all(I32),    // iterations
        all(BYTES),  // salt
        all(BYTES),  // salted_password
    ])),
];

const DESCRIBE_PRODUCERS: &[Field] = &[all(array(&[
    all(STRING), // name
    all(INT32S), // partition_indexes
]))];

const LIST_TRANSACTIONS: &[Field] = &[
    all(STRINGS),              // state_filters
    all(values(&all(I64))),    // producer_id_filters
    since(1, I64),             // duration_filter
    since(2, NULLABLE_STRING), // transactional_id_pattern
];

const DESCRIBE_TRANSACTIONS: &[Field] = &[all(STRINGS)]; // transactional_ids

const DELETE_TOPICS: &[Field] = &[
    between(0, 5, STRINGS),                              // topic_names
    since(6, array(&[all(NULLABLE_STRING), all(UUID)])), // topics: name, topic_id
    all(I32),                                            // timeout_ms
];

const CREATE_PARTITIONS: &[Field] = &[
    all(array(&[
        all(STRING),                         // name
        all(I32),                            // count
        all(nullable_array(&[all(INT32S)])), // assignments: broker_ids
    ])),
    all(I32), // timeout_ms
    all(I8),  // validate_only
];

const DESCRIBE_CLUSTER: &[Field] = &[
    all(I8),      // include_cluster_authorized_operations
    since(1, I8), // endpoint_type
    since(2, I8), // include_fenced_brokers
];

const DESCRIBE_LOG_DIRS: &[Field] = &[all(nullable_array(&[
    all(STRING), // topic
    all(INT32S), // partitions
]))];

const WRITE_TXN_MARKERS: &[Field] = &[all(array(&[
    all(I64), // producer_id
    all(I16), // producer_epoch
    all(I8),  // transaction_result
    all(array(&[
        all(STRING), // name
        all(INT32S), // partition_indexes
    ])),
    all(I32), // coordinator_epoch
]))];

const OFFSET_DELETE: &[Field] = &[
    all(STRING), // group_id
    all(array(&[
        all(STRING),             // name
        all(array(&[all(I32)])), // partitions: partition_index
    ])),
];

const END_TXN: &[Field] = &[all(STRING), all(I64), all(I16), all(I8)];

const TXN_OFFSET_COMMIT: &[Field] = &[
    all(STRING),               // transactional_id
    all(STRING),               // group_id
    all(I64),                  // producer_id
    all(I16),                  // producer_epoch
    since(3, I32),             // generation_id (KIP-447)
    since(3, STRING),          // member_id
    since(3, NULLABLE_STRING), // group_instance_id
    all(array(&[
        all(STRING), // name
        all(array(&[
            all(I32),             // partition_index
            all(I64),             // committed_offset
            since(2, I32),        // committed_leader_epoch
            all(NULLABLE_STRING), // committed_metadata
        ])),
    ])),
];

const INIT_PRODUCER_ID: &[Field] = &[
    all(NULLABLE_STRING), // transactional_id
    all(I32),             // transaction_timeout_ms
    since(3, I64),        // producer_id
    since(3, I16),        // producer_epoch
];

const API_VERSIONS: &[Field] = &[
    since(3, STRING), // client_software_name
    since(3, STRING), // client_software_version
];

// Responses a client decodes from an untrusted broker (the mirror link): non-flexible versions.

const API_VERSIONS_RESPONSE: &[Field] = &[
    all(I16),                                    // error_code
    all(array(&[all(I16), all(I16), all(I16)])), // api_key, min_version, max_version
    since(1, I32),                               // throttle_time_ms
];

const METADATA_RESPONSE: &[Field] = &[
    since(3, I32), // throttle_time_ms
    all(array(&[
        all(I32),                  // node_id
        all(STRING),               // host
        all(I32),                  // port
        since(1, NULLABLE_STRING), // rack
    ])),
    since(2, NULLABLE_STRING), // cluster_id
    since(1, I32),             // controller_id
    all(array(&[
        all(I16),                   // error_code
        between(0, 11, STRING),     // name
        since(12, NULLABLE_STRING), // name (null for a topic asked by id)
        since(10, UUID),            // topic_id
        since(1, I8),               // is_internal
        all(array(&[
            all(I16),         // error_code
            all(I32),         // partition_index
            all(I32),         // leader_id
            since(7, I32),    // leader_epoch
            all(INT32S),      // replica_nodes
            all(INT32S),      // isr_nodes
            since(5, INT32S), // offline_replicas
        ])),
        since(8, I32), // topic_authorized_operations
    ])),
    between(8, 10, I32), // cluster_authorized_operations
];

/// The highest Metadata response version [`check_response`] walks (flexible from 9: topic ids from 10, a
/// nullable topic name at 12).
const METADATA_RESPONSE_HIGHEST: i16 = 12;

/// The highest Fetch response version [`check_response`] walks (flexible from 12, topics by id from 13).
const FETCH_RESPONSE_HIGHEST: i16 = 13;

const FETCH_RESPONSE: &[Field] = &[
    since(1, I32), // throttle_time_ms
    since(7, I16), // error_code
    since(7, I32), // session_id
    all(array(&[
        between(0, 12, STRING), // topic
        since(13, UUID),        // topic_id
        all(array(&[
            all(I32),                                        // partition_index
            all(I16),                                        // error_code
            all(I64),                                        // high_watermark
            since(4, I64),                                   // last_stable_offset
            since(5, I64),                                   // log_start_offset
            since(4, nullable_array(&[all(I64), all(I64)])), // aborted_transactions
            since(11, I32),                                  // preferred_read_replica
            all(Kind::Bytes { nullable: true }),             // records
        ])),
    ])),
];

const LIST_OFFSETS_RESPONSE: &[Field] = &[
    since(2, I32), // throttle_time_ms
    all(array(&[
        all(STRING), // name
        all(array(&[
            all(I32),                          // partition_index
            all(I16),                          // error_code
            between(0, 0, array(&[all(I64)])), // old_style_offsets
            since(1, I64),                     // timestamp
            since(1, I64),                     // offset
            since(4, I32),                     // leader_epoch
        ])),
    ])),
];

const LIST_GROUPS_RESPONSE: &[Field] = &[
    since(1, I32), // throttle_time_ms
    all(I16),      // error_code
    all(array(&[
        all(STRING), // group_id
        all(STRING), // protocol_type
    ])),
];

const OFFSET_FETCH_RESPONSE: &[Field] = &[
    since(3, I32), // throttle_time_ms
    all(array(&[
        all(STRING), // name
        all(array(&[
            all(I32),             // partition_index
            all(I64),             // committed_offset
            since(5, I32),        // committed_leader_epoch
            all(NULLABLE_STRING), // metadata
            all(I16),             // error_code
        ])),
    ])),
    since(2, I16), // error_code
];

/// DescribeConfigs' answer (v0–v3): per resource its error, name and configs; a config's fourth field is
/// `is_default` at v0 and `config_source` from v1, one byte either way.
const DESCRIBE_CONFIGS_RESPONSE: &[Field] = &[
    all(I32), // throttle_time_ms
    all(array(&[
        all(I16),             // error_code
        all(NULLABLE_STRING), // error_message
        all(I8),              // resource_type
        all(STRING),          // resource_name
        all(array(&[
            all(STRING),          // name
            all(NULLABLE_STRING), // value
            all(I8),              // read_only
            all(I8),              // is_default (v0) / config_source (v1+)
            all(I8),              // is_sensitive
            since(
                1,
                array(&[
                    all(STRING),          // synonym name
                    all(NULLABLE_STRING), // synonym value
                    all(I8),              // synonym source
                ]),
            ), // synonyms
            since(3, I8),         // config_type
            since(3, NULLABLE_STRING), // documentation
        ])),
    ])),
];

/// DescribeAcls' answer (v0–v1, v1 adding each resource's pattern type).
const DESCRIBE_ACLS_RESPONSE: &[Field] = &[
    all(I32),             // throttle_time_ms
    all(I16),             // error_code
    all(NULLABLE_STRING), // error_message
    all(array(&[
        all(I8),      // resource_type
        all(STRING),  // resource_name
        since(1, I8), // pattern_type
        all(array(&[
            all(STRING), // principal
            all(STRING), // host
            all(I8),     // operation
            all(I8),     // permission_type
        ])),
    ])),
];

/// The layout of a response body a client checks, for its non-flexible versions (Metadata's and Fetch's flexible
/// ones too, up to [`METADATA_RESPONSE_HIGHEST`] and [`FETCH_RESPONSE_HIGHEST`]).
/// SaslHandshake's answer: error code, the mechanisms the broker offers.
const SASL_HANDSHAKE_RESPONSE: &[Field] = &[all(I16), all(STRINGS)];

/// SaslAuthenticate's answer (v0–v1): error code, message, the mechanism's token, the session's lifetime (v1).
const SASL_AUTHENTICATE_RESPONSE: &[Field] = &[all(I16), all(NULLABLE_STRING), all(BYTES), since(1, I64)];

fn response_layout(key: ApiKey, version: i16) -> Option<&'static [Field]> {
    if key == ApiKey::Metadata && (0..=METADATA_RESPONSE_HIGHEST).contains(&version) {
        return Some(METADATA_RESPONSE);
    }
    if key == ApiKey::Fetch && (0..=FETCH_RESPONSE_HIGHEST).contains(&version) {
        return Some(FETCH_RESPONSE);
    }
    if key.response_header_version(version) >= 1 {
        return None;
    }
    Some(match key {
        ApiKey::ApiVersions => API_VERSIONS_RESPONSE,
        ApiKey::Metadata => METADATA_RESPONSE,
        ApiKey::Fetch => FETCH_RESPONSE,
        ApiKey::ListOffsets => LIST_OFFSETS_RESPONSE,
        ApiKey::ListGroups => LIST_GROUPS_RESPONSE,
        ApiKey::OffsetFetch => OFFSET_FETCH_RESPONSE,
        ApiKey::DescribeConfigs => DESCRIBE_CONFIGS_RESPONSE,
        ApiKey::DescribeAcls => DESCRIBE_ACLS_RESPONSE,
        ApiKey::SaslHandshake => SASL_HANDSHAKE_RESPONSE,
        ApiKey::SaslAuthenticate => SASL_AUTHENTICATE_RESPONSE,
        _ => return None,
    })
}

/// Checks a response body (after its header) against the layout of `key` at `version`, as [`check`] checks a
/// request: ApiVersions, Metadata, Fetch, ListOffsets, ListGroups, OffsetFetch, DescribeConfigs, DescribeAcls,
/// SaslHandshake and SaslAuthenticate at
/// their non-flexible versions, Metadata up to v12 and Fetch up to v13; anything else is [`ShapeError::Unsupported`].
pub fn check_response(key: ApiKey, version: i16, body: &[u8]) -> Result<(), ShapeError> {
    walk(
        response_layout(key, version).ok_or(ShapeError::Unsupported)?,
        version,
        key.response_header_version(version) >= 1,
        body,
        Trailing::Refused,
    )
    .map(|_| ())
}

/// The layout of a request body and the highest version it describes (flexible versions included).
fn layout(key: ApiKey) -> Option<(&'static [Field], i16)> {
    Some(match key {
        ApiKey::Produce => (PRODUCE, 8),
        ApiKey::Fetch => (FETCH, 11),
        ApiKey::ListOffsets => (LIST_OFFSETS, 10),
        ApiKey::Metadata => (METADATA, 12),
        ApiKey::OffsetCommit => (OFFSET_COMMIT, 8),
        ApiKey::OffsetFetch => (OFFSET_FETCH, 8),
        ApiKey::FindCoordinator => (FIND_COORDINATOR, 4),
        ApiKey::JoinGroup => (JOIN_GROUP, 8),
        ApiKey::SyncGroup => (SYNC_GROUP, 5),
        ApiKey::Heartbeat => (HEARTBEAT, 4),
        ApiKey::LeaveGroup => (LEAVE_GROUP, 5),
        ApiKey::DescribeGroups => (DESCRIBE_GROUPS, 5),
        ApiKey::ListGroups => (LIST_GROUPS, 5),
        ApiKey::DeleteGroups => (DELETE_GROUPS, 2),
        ApiKey::CreateTopics => (CREATE_TOPICS, 7),
        ApiKey::InitProducerId => (INIT_PRODUCER_ID, 4),
        ApiKey::AddPartitionsToTxn => (ADD_PARTITIONS_TO_TXN, 2),
        ApiKey::AddOffsetsToTxn => (ADD_OFFSETS_TO_TXN, 2),
        ApiKey::DeleteRecords => (DELETE_RECORDS, 1),
        ApiKey::DescribeConfigs => (DESCRIBE_CONFIGS, 4),
        ApiKey::AlterConfigs => (ALTER_CONFIGS, 2),
        ApiKey::IncrementalAlterConfigs => (INCREMENTAL_ALTER_CONFIGS, 1),
        ApiKey::DeleteTopics => (DELETE_TOPICS, 6),
        ApiKey::CreatePartitions => (CREATE_PARTITIONS, 3),
        ApiKey::DescribeCluster => (DESCRIBE_CLUSTER, 2),
        ApiKey::DescribeLogDirs => (DESCRIBE_LOG_DIRS, 4),
        ApiKey::WriteTxnMarkers => (WRITE_TXN_MARKERS, 1),
        ApiKey::OffsetDelete => (OFFSET_DELETE, 0),
        ApiKey::DescribeProducers => (DESCRIBE_PRODUCERS, 0),
        ApiKey::ListTransactions => (LIST_TRANSACTIONS, 2),
        ApiKey::DescribeTransactions => (DESCRIBE_TRANSACTIONS, 0),
        ApiKey::EndTxn => (END_TXN, 2),
        ApiKey::TxnOffsetCommit => (TXN_OFFSET_COMMIT, 3),
        ApiKey::ApiVersions => (API_VERSIONS, 3),
        ApiKey::SaslHandshake => (SASL_HANDSHAKE, 1),
        ApiKey::SaslAuthenticate => (SASL_AUTHENTICATE, 2),
        ApiKey::DescribeUserScramCredentials => (DESCRIBE_USER_SCRAM_CREDENTIALS, 0),
        ApiKey::AlterUserScramCredentials => (ALTER_USER_SCRAM_CREDENTIALS, 0),
        ApiKey::DescribeAcls => (DESCRIBE_ACLS, 3),
        ApiKey::CreateAcls => (CREATE_ACLS, 3),
        ApiKey::DeleteAcls => (DELETE_ACLS, 3),
        _ => return None,
    })
}

/// Checks a request body (after its header) against the layout of `key` at `version`; see the module docs.
pub fn check(key: ApiKey, version: i16, body: &[u8]) -> Result<(), ShapeError> {
    check_request(key, version, body).map(|_| ())
}

/// [`check`], returning how many bytes of `body` the layout covers: what the decoder is given, so that bytes
/// after a flexible body, which are tolerated, are never read by it.
pub fn check_request(key: ApiKey, version: i16, body: &[u8]) -> Result<usize, ShapeError> {
    request_walk(key, version, body, Trailing::AfterFlexibleBodyTolerated)
}

/// [`check`] refusing any byte after the last field, flexible or not: the layouts' own test against
/// `kafka-protocol`'s encoder, which must walk each body to exactly its last byte.
pub fn check_exact(key: ApiKey, version: i16, body: &[u8]) -> Result<(), ShapeError> {
    request_walk(key, version, body, Trailing::Refused).map(|_| ())
}

fn request_walk(key: ApiKey, version: i16, body: &[u8], trailing: Trailing) -> Result<usize, ShapeError> {
    let (fields, highest) = layout(key).ok_or(ShapeError::Unsupported)?;
    if !(0..=highest).contains(&version) {
        return Err(ShapeError::Unsupported);
    }
    walk(
        fields,
        version,
        key.request_header_version(version) >= 2,
        body,
        trailing,
    )
}

/// What may follow the last field of a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trailing {
    /// Nothing.
    Refused,
    /// Bytes after a flexible body (requests: see [`walk`]).
    AfterFlexibleBodyTolerated,
}

/// Walks `body`; the bytes walked.
fn walk(
    fields: &[Field],
    version: i16,
    flexible: bool,
    body: &[u8],
    trailing: Trailing,
) -> Result<usize, ShapeError> {
    let mut walker = Walker {
        body,
        at: 0,
        elements: 0,
        version,
        flexible,
    };
    walker.fields(fields)?;
    if flexible {
        walker.tagged()?;
    }
    let rest = &body[walker.at..];
    // Bytes after a flexible request's last field are tolerated, as Kafka's parser ignores them: librdkafka 2.x
    // leaves some where it reserved room for a compact count — a second empty tagged-field section after
    // AlterUserScramCredentials, and after Metadata v12 for every topic (its null array written as four bytes:
    // `00 00 00 00 01 00 00` reads as null, false, false, no tags, then `01 00 00`). Every field was walked within
    // the body, so they cost nothing. Anything after a non-flexible request's last field is refused (no client
    // sends it), and so is anything after a response's (a source has no such excuse).
    let tolerated = trailing == Trailing::AfterFlexibleBodyTolerated && flexible;
    if rest.is_empty() || tolerated {
        Ok(walker.at)
    } else {
        Err(ShapeError::TrailingBytes(rest.len()))
    }
}

/// Walks a tagged-field section at the start of `bytes` (a flexible request header's); returns its length.
pub fn tagged_section_len(bytes: &[u8]) -> Result<usize, ShapeError> {
    let mut walker = Walker {
        body: bytes,
        at: 0,
        elements: 0,
        version: 0,
        flexible: true,
    };
    walker.tagged()?;
    Ok(walker.at)
}

struct Walker<'a> {
    body: &'a [u8],
    at: usize,
    elements: usize,
    version: i16,
    /// A flexible version: compact lengths and tagged fields.
    flexible: bool,
}

impl Walker<'_> {
    fn remaining(&self) -> usize {
        self.body.len() - self.at
    }

    fn take(&mut self, n: usize) -> Result<&[u8], ShapeError> {
        if self.remaining() < n {
            return Err(ShapeError::Truncated { at: self.at });
        }
        let bytes = &self.body[self.at..self.at + n];
        self.at += n;
        Ok(bytes)
    }

    fn int(&mut self, n: usize) -> Result<i64, ShapeError> {
        let bytes = self.take(n)?;
        Ok(match *bytes {
            [a, b] => i64::from(i16::from_be_bytes([a, b])),
            [a, b, c, d] => i64::from(i32::from_be_bytes([a, b, c, d])),
            _ => 0,
        })
    }

    fn unsigned_varint(&mut self) -> Result<u64, ShapeError> {
        let start = self.at;
        let mut value: u64 = 0;
        for shift in (0..35).step_by(7) {
            let [byte] = *self.take(1)? else {
                return Err(ShapeError::Truncated { at: start });
            };
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ShapeError::BadLength {
            at: start,
            length: -1,
        })
    }

    /// A length or count: INT16 or INT32 (`width`), or an unsigned varint + 1 at a flexible version; `None` for
    /// null.
    fn length(&mut self, width: usize, nullable: bool) -> Result<Option<usize>, ShapeError> {
        let at = self.at;
        if self.flexible {
            return match self.unsigned_varint()? {
                0 if nullable => Ok(None),
                0 => Err(ShapeError::BadLength { at, length: -1 }),
                length => usize::try_from(length - 1)
                    .map(Some)
                    .map_err(|_| ShapeError::BadLength { at, length: -1 }),
            };
        }
        match self.int(width)? {
            -1 if nullable => Ok(None),
            length if length >= 0 => Ok(Some(length as usize)),
            length => Err(ShapeError::BadLength { at, length }),
        }
    }

    fn fields(&mut self, fields: &[Field]) -> Result<(), ShapeError> {
        for field in fields {
            if (field.since..=field.until).contains(&self.version) {
                self.field(field.kind)?;
            }
        }
        Ok(())
    }

    fn field(&mut self, kind: Kind) -> Result<(), ShapeError> {
        match kind {
            Kind::Fixed(n) => {
                self.take(n)?;
            }
            Kind::String { nullable } => {
                if let Some(length) = self.length(2, nullable)? {
                    self.take(length)?;
                }
            }
            Kind::Bytes { nullable } => {
                if let Some(length) = self.length(4, nullable)? {
                    self.take(length)?;
                }
            }
            Kind::Array {
                nullable,
                structs,
                of,
            } => {
                let at = self.at;
                if let Some(count) = self.length(4, nullable)? {
                    self.elements(at, count)?;
                    for _ in 0..count {
                        self.fields(of)?;
                        if structs && self.flexible {
                            self.tagged()?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn elements(&mut self, at: usize, count: usize) -> Result<(), ShapeError> {
        if count > self.remaining() {
            return Err(ShapeError::ImpossibleCount {
                at,
                count: count as i64,
                remaining: self.remaining(),
            });
        }
        self.elements += count;
        if self.elements > MAX_ELEMENTS {
            return Err(ShapeError::TooManyElements);
        }
        Ok(())
    }

    fn tagged(&mut self) -> Result<(), ShapeError> {
        let at = self.at;
        let count = usize::try_from(self.unsigned_varint()?).unwrap_or(usize::MAX);
        // A tagged field is at least two bytes (tag and size).
        if count > self.remaining() / 2 {
            return Err(ShapeError::ImpossibleCount {
                at,
                count: count as i64,
                remaining: self.remaining(),
            });
        }
        self.elements(at, count)?;
        for _ in 0..count {
            self.unsigned_varint()?;
            let size = usize::try_from(self.unsigned_varint()?).unwrap_or(usize::MAX);
            self.take(size)?;
        }
        Ok(())
    }
}
