//! The shape check every Kafka body passes before `kafka-protocol` decodes it: requests on the broker's side
//! ([`check`]), responses on a client's ([`check_response`]: the mirror link's answers from a source cluster,
//! which is as untrusted as a client).
//!
//! `kafka-protocol` 0.18 sizes each array with `Vec::with_capacity(count)` straight from the wire, before it has
//! decoded one element (upstream PRs #152/#161/#200, open): a 20-byte frame claiming two billion topics makes
//! the process ask for hundreds of gigabytes and abort. This module walks a body by the field layout of each
//! (API, version) the broker advertises — non-flexible versions, plus the two flexible requests that hold no
//! array (ApiVersions v3, InitProducerId v2+) — and refuses a body whose array count exceeds the bytes left
//! (every element takes at least one byte), whose strings or byte fields run past the end, that holds more than
//! [`MAX_ELEMENTS`] array elements in all (decoded structs cost more than their bytes: this bounds the
//! amplification), or that has bytes left over. Only a body that passes is decoded.
//!
//! The layouts are checked against `kafka-protocol`'s own encoder in the tests (every advertised version of
//! every request, encoded there, walks to exactly its last byte here).

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

#[derive(Debug, Clone, Copy)]
enum Kind {
    Fixed(usize),
    /// INT16 length, -1 for null.
    String {
        nullable: bool,
    },
    /// INT32 length, -1 for null.
    Bytes {
        nullable: bool,
    },
    /// INT32 count, -1 for null.
    Array {
        nullable: bool,
        of: &'static [Field],
    },
    /// Unsigned-varint length + 1, 0 for null.
    CompactString,
    /// Unsigned-varint count + 1, 0 for null.
    CompactArray {
        of: &'static [Field],
    },
    /// A tagged-field section.
    Tagged,
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
const STRING: Kind = Kind::String { nullable: false };
const NULLABLE_STRING: Kind = Kind::String { nullable: true };
const fn array(of: &'static [Field]) -> Kind {
    Kind::Array { nullable: false, of }
}
const fn nullable_array(of: &'static [Field]) -> Kind {
    Kind::Array { nullable: true, of }
}
const INT32_ARRAY: &[Field] = &[all(I32)];

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
    since(7, array(&[all(STRING), all(array(INT32_ARRAY))])), // forgotten topics
    since(11, STRING),                                        // rack_id
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
];

const METADATA: &[Field] = &[
    between(0, 0, array(&[all(STRING)])),
    since(1, nullable_array(&[all(STRING)])),
    since(4, I8),       // allow_auto_topic_creation
    between(8, 10, I8), // include_cluster_authorized_operations
    since(8, I8),       // include_topic_authorized_operations
];

const OFFSET_COMMIT: &[Field] = &[
    all(STRING),               // group_id
    since(1, I32),             // generation_id
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

const OFFSET_FETCH: &[Field] = &[
    between(0, 5, STRING),         // group_id
    since(6, Kind::CompactString), // (flexible from v6)
    between(0, 1, array(&[all(STRING), all(array(INT32_ARRAY))])),
    between(2, 5, nullable_array(&[all(STRING), all(array(INT32_ARRAY))])),
    since(
        6,
        Kind::CompactArray {
            of: &[
                all(Kind::CompactString),                    // name
                all(Kind::CompactArray { of: INT32_ARRAY }), // partition_indexes
                all(Kind::Tagged),
            ],
        },
    ),
    since(7, I8), // require_stable
    since(6, Kind::Tagged),
];

const FIND_COORDINATOR: &[Field] = &[all(STRING), since(1, I8)];

const JOIN_GROUP: &[Field] = &[
    all(STRING),               // group_id
    all(I32),                  // session_timeout_ms
    since(1, I32),             // rebalance_timeout_ms
    all(STRING),               // member_id
    since(5, NULLABLE_STRING), // group_instance_id
    all(STRING),               // protocol_type
    all(array(&[
        all(STRING),                          // name
        all(Kind::Bytes { nullable: false }), // metadata
    ])),
];

const SYNC_GROUP: &[Field] = &[
    all(STRING),               // group_id
    all(I32),                  // generation_id
    all(STRING),               // member_id
    since(3, NULLABLE_STRING), // group_instance_id
    all(array(&[
        all(STRING),                          // member_id
        all(Kind::Bytes { nullable: false }), // assignment
    ])),
];

const HEARTBEAT: &[Field] = &[
    all(STRING),               // group_id
    all(I32),                  // generation_id
    all(STRING),               // member_id
    since(3, NULLABLE_STRING), // group_instance_id
];

const DESCRIBE_GROUPS: &[Field] = &[
    all(array(&[all(STRING)])), // groups
    since(3, I8),               // include_authorized_operations
];

const LIST_GROUPS: &[Field] = &[];

const DELETE_GROUPS: &[Field] = &[all(array(&[all(STRING)]))]; // groups_names

const LEAVE_GROUP: &[Field] = &[
    all(STRING),           // group_id
    between(0, 2, STRING), // member_id
    since(
        3,
        array(&[
            all(STRING),          // member_id
            all(NULLABLE_STRING), // group_instance_id
        ]),
    ),
];

const CREATE_TOPICS: &[Field] = &[
    all(array(&[
        all(STRING), // name
        all(I32),    // num_partitions
        all(I16),    // replication_factor
        all(array(&[all(I32), all(array(INT32_ARRAY))])),
        all(array(&[all(STRING), all(NULLABLE_STRING)])),
    ])),
    all(I32),     // timeout_ms
    since(1, I8), // validate_only
];

const ADD_PARTITIONS_TO_TXN: &[Field] = &[
    all(STRING), // transactional_id
    all(I64),
    all(I16),
    all(array(&[all(STRING), all(array(INT32_ARRAY))])),
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

const END_TXN: &[Field] = &[all(STRING), all(I64), all(I16), all(I8)];

const TXN_OFFSET_COMMIT: &[Field] = &[
    between(0, 2, STRING),         // transactional_id
    since(3, Kind::CompactString), // (flexible from v3)
    between(0, 2, STRING),         // group_id
    since(3, Kind::CompactString), //
    all(I64),                      // producer_id
    all(I16),                      // producer_epoch
    since(3, I32),                 // generation_id (KIP-447)
    since(3, Kind::CompactString), // member_id
    since(3, Kind::CompactString), // group_instance_id (nullable)
    between(
        0,
        2,
        array(&[
            all(STRING),
            all(array(&[
                all(I32),
                all(I64),
                since(2, I32), // committed_leader_epoch
                all(NULLABLE_STRING),
            ])),
        ]),
    ),
    since(
        3,
        Kind::CompactArray {
            of: &[
                all(Kind::CompactString), // name
                all(Kind::CompactArray {
                    of: &[
                        all(I32),                 // partition_index
                        all(I64),                 // committed_offset
                        all(I32),                 // committed_leader_epoch
                        all(Kind::CompactString), // committed_metadata (nullable)
                        all(Kind::Tagged),
                    ],
                }),
                all(Kind::Tagged),
            ],
        },
    ),
    since(3, Kind::Tagged),
];

const INIT_PRODUCER_ID: &[Field] = &[
    between(0, 1, NULLABLE_STRING),
    since(2, Kind::CompactString),
    all(I32),      // transaction_timeout_ms
    since(3, I64), // producer_id
    since(3, I16), // producer_epoch
    since(2, Kind::Tagged),
];

const API_VERSIONS: &[Field] = &[
    since(3, Kind::CompactString),
    since(3, Kind::CompactString),
    since(3, Kind::Tagged),
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
        all(I16),     // error_code
        all(STRING),  // name
        since(1, I8), // is_internal
        all(array(&[
            all(I16),                     // error_code
            all(I32),                     // partition_index
            all(I32),                     // leader_id
            since(7, I32),                // leader_epoch
            all(array(INT32_ARRAY)),      // replica_nodes
            all(array(INT32_ARRAY)),      // isr_nodes
            since(5, array(INT32_ARRAY)), // offline_replicas
        ])),
        since(8, I32), // topic_authorized_operations
    ])),
    between(8, 10, I32), // cluster_authorized_operations
];

const FETCH_RESPONSE: &[Field] = &[
    since(1, I32), // throttle_time_ms
    since(7, I16), // error_code
    since(7, I32), // session_id
    all(array(&[
        all(STRING), // topic
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

/// The layout of a response body a client checks, for its non-flexible versions.
fn response_layout(key: ApiKey, version: i16) -> Option<&'static [Field]> {
    if key.response_header_version(version) >= 1 {
        return None;
    }
    Some(match key {
        ApiKey::ApiVersions => API_VERSIONS_RESPONSE,
        ApiKey::Metadata => METADATA_RESPONSE,
        ApiKey::Fetch => FETCH_RESPONSE,
        ApiKey::ListOffsets => LIST_OFFSETS_RESPONSE,
        _ => return None,
    })
}

/// Checks a response body (after its header) against the layout of `key` at `version`, as [`check`] checks a
/// request: ApiVersions, Metadata, Fetch and ListOffsets at their non-flexible versions; anything else is
/// [`ShapeError::Unsupported`].
pub fn check_response(key: ApiKey, version: i16, body: &[u8]) -> Result<(), ShapeError> {
    walk(
        response_layout(key, version).ok_or(ShapeError::Unsupported)?,
        version,
        body,
    )
}

/// The layout of a request body, for the versions the broker advertises.
fn layout(key: ApiKey, version: i16) -> Option<&'static [Field]> {
    let flexible_ok = matches!(
        key,
        ApiKey::ApiVersions | ApiKey::InitProducerId | ApiKey::TxnOffsetCommit | ApiKey::OffsetFetch
    );
    if !flexible_ok && key.request_header_version(version) >= 2 {
        return None;
    }
    Some(match key {
        ApiKey::Produce => PRODUCE,
        ApiKey::Fetch => FETCH,
        ApiKey::ListOffsets => LIST_OFFSETS,
        ApiKey::Metadata => METADATA,
        ApiKey::OffsetCommit => OFFSET_COMMIT,
        ApiKey::OffsetFetch => OFFSET_FETCH,
        ApiKey::FindCoordinator => FIND_COORDINATOR,
        ApiKey::JoinGroup => JOIN_GROUP,
        ApiKey::SyncGroup => SYNC_GROUP,
        ApiKey::Heartbeat => HEARTBEAT,
        ApiKey::LeaveGroup => LEAVE_GROUP,
        ApiKey::DescribeGroups => DESCRIBE_GROUPS,
        ApiKey::ListGroups => LIST_GROUPS,
        ApiKey::DeleteGroups => DELETE_GROUPS,
        ApiKey::CreateTopics => CREATE_TOPICS,
        ApiKey::InitProducerId => INIT_PRODUCER_ID,
        ApiKey::AddPartitionsToTxn => ADD_PARTITIONS_TO_TXN,
        ApiKey::AddOffsetsToTxn => ADD_OFFSETS_TO_TXN,
        ApiKey::DeleteRecords => DELETE_RECORDS,
        ApiKey::EndTxn => END_TXN,
        ApiKey::TxnOffsetCommit => TXN_OFFSET_COMMIT,
        ApiKey::ApiVersions => API_VERSIONS,
        _ => return None,
    })
}

/// Checks a request body (after its header) against the layout of `key` at `version`; see the module docs.
pub fn check(key: ApiKey, version: i16, body: &[u8]) -> Result<(), ShapeError> {
    walk(
        layout(key, version).ok_or(ShapeError::Unsupported)?,
        version,
        body,
    )
}

fn walk(fields: &[Field], version: i16, body: &[u8]) -> Result<(), ShapeError> {
    let mut walker = Walker {
        body,
        at: 0,
        elements: 0,
        version,
    };
    walker.fields(fields)?;
    match body.len() - walker.at {
        0 => Ok(()),
        left => Err(ShapeError::TrailingBytes(left)),
    }
}

/// Walks a tagged-field section at the start of `bytes` (a flexible request header's); returns its length.
pub fn tagged_section_len(bytes: &[u8]) -> Result<usize, ShapeError> {
    let mut walker = Walker {
        body: bytes,
        at: 0,
        elements: 0,
        version: 0,
    };
    walker.tagged()?;
    Ok(walker.at)
}

struct Walker<'a> {
    body: &'a [u8],
    at: usize,
    elements: usize,
    version: i16,
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

    fn length(&mut self, width: usize, nullable: bool) -> Result<Option<usize>, ShapeError> {
        let at = self.at;
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
            Kind::Array { nullable, of } => {
                let at = self.at;
                if let Some(count) = self.length(4, nullable)? {
                    self.elements(at, count)?;
                    for _ in 0..count {
                        self.fields(of)?;
                    }
                }
            }
            Kind::CompactString => {
                let at = self.at;
                let length = self.unsigned_varint()?;
                if length > 0 {
                    let length =
                        usize::try_from(length - 1).map_err(|_| ShapeError::BadLength { at, length: -1 })?;
                    self.take(length)?;
                }
            }
            Kind::CompactArray { of } => {
                let at = self.at;
                let count = self.unsigned_varint()?;
                if count > 0 {
                    let count =
                        usize::try_from(count - 1).map_err(|_| ShapeError::BadLength { at, length: -1 })?;
                    self.elements(at, count)?;
                    for _ in 0..count {
                        self.fields(of)?;
                    }
                }
            }
            Kind::Tagged => self.tagged()?,
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
