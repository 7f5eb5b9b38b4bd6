//! The authorization scenarios (`kafka-diff --authorization`): run as a principal that holds no ACL at all,
//! against a broker whose authorizer denies what no ACL allows (`serve --authorizer acl`, Kafka's
//! StandardAuthorizer), they call every advertised API at every version naming one existing topic
//! ([`TOPIC`], made by the harness), a group and a transactional id, and record the error codes of each answer
//! — the authorization errors per API and version, and where each answer puts them.
//!
//! They are a set of their own because they mean something only against an authorizing broker and only as a
//! principal without ACLs; the default set runs on a PLAINTEXT listener without one.

use kafka_protocol::messages::*;
use serde_json::{json, Value};

use super::{versions, Scenario};
use crate::error::DiffError;
use crate::requests::{self, s, topic_name, BatchSpec};
use crate::session::Session;

/// The topic the harness creates before the run (the principal may not create one).
pub const TOPIC: &str = "authz-orders";
const GROUP: &str = "authz-group";
const TXN: &str = "authz-txn";

/// The authorization scenarios.
pub const ALL: &[Scenario] = &[
    Scenario {
        name: "unauthorized_data_path_every_version",
        about: "without ACLs: Produce, Fetch, ListOffsets, Metadata (named, missing, all), DeleteRecords, DescribeProducers",
    },
    Scenario {
        name: "unauthorized_groups_every_version",
        about: "without ACLs: FindCoordinator, the group membership APIs, offsets committed, fetched and deleted, groups described, listed, deleted",
    },
    Scenario {
        name: "unauthorized_transactions_every_version",
        about: "without ACLs: InitProducerId (idempotent and transactional), AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, Describe/ListTransactions, WriteTxnMarkers",
    },
    Scenario {
        name: "unauthorized_administration_every_version",
        about: "without ACLs: topics created, deleted, grown; configs described and altered; the cluster, log dirs, SCRAM users and ACLs",
    },
];

/// Runs the authorization scenario `name`.
pub async fn run(name: &str, session: &mut Session) -> Result<(), DiffError> {
    match name {
        "unauthorized_data_path_every_version" => data_path(session).await,
        "unauthorized_groups_every_version" => groups(session).await,
        "unauthorized_transactions_every_version" => transactions(session).await,
        "unauthorized_administration_every_version" => administration(session).await,
        _ => Err(DiffError::UnknownScenario(name.to_owned())),
    }
}

/// Calls `$key` at every version with the request `$request` builds from `version`, and observes what `$seen`
/// extracts from the answer.
macro_rules! every_version {
    ($session:expr, $key:ident, $answer:ty, |$version:ident| $request:expr, |$a:ident| $seen:expr) => {
        for $version in versions(ApiKey::$key) {
            let request = $request;
            let $a: $answer = $session.call(ApiKey::$key, $version, &request).await?;
            let seen: Value = $seen;
            $session.observe(&format!("{} v{}", stringify!($key), $version), seen);
        }
    };
}

async fn data_path(session: &mut Session) -> Result<(), DiffError> {
    let batch = BatchSpec {
        count: 1,
        ..BatchSpec::default()
    }
    .build()?;
    every_version!(
        session,
        Produce,
        ProduceResponse,
        |version| requests::produce(None, -1, vec![(TOPIC, 0, batch.clone())]),
        |a| json!(a
            .responses
            .iter()
            .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code))
            .collect::<Vec<_>>())
    );
    every_version!(
        session,
        Fetch,
        FetchResponse,
        |version| {
            let mut r = requests::fetch(0, &[(TOPIC, 0, 0)]);
            r.max_wait_ms = 0;
            r
        },
        |a| json!({"error": a.error_code, "partitions": a.responses.iter().flat_map(|t| t.partitions.iter().map(|p| (p.error_code, p.records.as_ref().map_or(0, |r| r.len())))).collect::<Vec<_>>()})
    );
    every_version!(
        session,
        ListOffsets,
        ListOffsetsResponse,
        |version| requests::list_offsets(0, &[(TOPIC, 0, -1)]),
        |a| json!(a
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (p.error_code, p.offset)))
            .collect::<Vec<_>>())
    );
    every_version!(
        session,
        Metadata,
        MetadataResponse,
        |version| requests::metadata(Some(&[TOPIC, "authz-missing"]), true),
        |a| {
            let mut topics: Vec<(String, i16, usize)> = a
                .topics
                .iter()
                .map(|t| {
                    (
                        t.name.as_ref().map(|n| n.to_string()).unwrap_or_default(),
                        t.error_code,
                        t.partitions.len(),
                    )
                })
                .collect();
            topics.sort();
            json!(topics)
        }
    );
    every_version!(
        session,
        Metadata,
        MetadataResponse,
        |version| requests::metadata(None, version < 4),
        |a| json!(a
            .topics
            .iter()
            .filter(|t| t.name.as_ref().is_some_and(|n| n.starts_with("authz-")))
            .count())
    );
    every_version!(
        session,
        DeleteRecords,
        DeleteRecordsResponse,
        |version| requests::delete_records(&[(TOPIC, 0, -1)]),
        |a| json!(a
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (p.error_code, p.low_watermark)))
            .collect::<Vec<_>>())
    );
    every_version!(
        session,
        DescribeProducers,
        DescribeProducersResponse,
        |version| {
            let mut topic = describe_producers_request::TopicRequest::default();
            topic.name = topic_name(TOPIC);
            topic.partition_indexes = vec![0];
            let mut r = DescribeProducersRequest::default();
            r.topics = vec![topic];
            r
        },
        |a| json!(a
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect::<Vec<_>>())
    );
    Ok(())
}

async fn groups(session: &mut Session) -> Result<(), DiffError> {
    let group = GroupId(s(GROUP));
    every_version!(
        session,
        FindCoordinator,
        FindCoordinatorResponse,
        |version| requests::find_coordinator(GROUP, 0, version),
        |a| json!({"error": a.error_code, "keys": a.coordinators.iter().map(|c| c.error_code).collect::<Vec<_>>()})
    );
    every_version!(
        session,
        JoinGroup,
        JoinGroupResponse,
        |version| {
            let mut r = JoinGroupRequest::default();
            r.group_id = group.clone();
            r.session_timeout_ms = 10_000;
            if version >= 1 {
                r.rebalance_timeout_ms = 10_000;
            }
            r.protocol_type = s("consumer");
            let mut protocol = join_group_request::JoinGroupRequestProtocol::default();
            protocol.name = s("range");
            r.protocols = vec![protocol];
            r
        },
        |a| json!({"error": a.error_code, "generation": a.generation_id, "members": a.members.len()})
    );
    every_version!(
        session,
        SyncGroup,
        SyncGroupResponse,
        |version| {
            let mut r = SyncGroupRequest::default();
            r.group_id = group.clone();
            r.member_id = s("m");
            r.generation_id = 1;
            if version >= 5 {
                r.protocol_type = Some(s("consumer"));
                r.protocol_name = Some(s("range"));
            }
            r
        },
        |a| json!(a.error_code)
    );
    every_version!(
        session,
        Heartbeat,
        HeartbeatResponse,
        |version| {
            let mut r = HeartbeatRequest::default();
            r.group_id = group.clone();
            r.member_id = s("m");
            r.generation_id = 1;
            r
        },
        |a| json!(a.error_code)
    );
    every_version!(
        session,
        LeaveGroup,
        LeaveGroupResponse,
        |version| {
            let mut r = LeaveGroupRequest::default();
            r.group_id = group.clone();
            if version >= 3 {
                let mut member = leave_group_request::MemberIdentity::default();
                member.member_id = s("m");
                r.members = vec![member];
            } else {
                r.member_id = s("m");
            }
            r
        },
        |a| json!({"error": a.error_code, "members": a.members.iter().map(|m| m.error_code).collect::<Vec<_>>()})
    );
    every_version!(
        session,
        OffsetCommit,
        OffsetCommitResponse,
        |version| requests::offset_commit(GROUP, &[(TOPIC, 0, 0)]),
        |a| json!(a
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect::<Vec<_>>())
    );
    let asked: &[(&str, &[i32])] = &[(TOPIC, &[0])];
    every_version!(
        session,
        OffsetFetch,
        OffsetFetchResponse,
        |version| requests::offset_fetch(GROUP, Some(asked), false, version),
        |a| json!({
            "error": a.error_code,
            "partitions": a.topics.iter().flat_map(|t| t.partitions.iter().map(|p| (p.error_code, p.committed_offset))).collect::<Vec<_>>(),
            "groups": a.groups.iter().map(|g| (g.error_code, g.topics.len())).collect::<Vec<_>>(),
        })
    );
    every_version!(
        session,
        DescribeGroups,
        DescribeGroupsResponse,
        |version| {
            let mut r = DescribeGroupsRequest::default();
            r.groups = vec![group.clone()];
            r
        },
        |a| json!(a.groups.iter().map(|g| g.error_code).collect::<Vec<_>>())
    );
    every_version!(
        session,
        ListGroups,
        ListGroupsResponse,
        |version| ListGroupsRequest::default(),
        |a| json!({"error": a.error_code, "groups": a.groups.iter().filter(|g| g.group_id.starts_with("authz-")).count()})
    );
    every_version!(
        session,
        DeleteGroups,
        DeleteGroupsResponse,
        |version| {
            let mut r = DeleteGroupsRequest::default();
            r.groups_names = vec![group.clone()];
            r
        },
        |a| json!(a.results.iter().map(|g| g.error_code).collect::<Vec<_>>())
    );
    every_version!(
        session,
        OffsetDelete,
        OffsetDeleteResponse,
        |version| {
            let mut partition = offset_delete_request::OffsetDeleteRequestPartition::default();
            partition.partition_index = 0;
            let mut topic = offset_delete_request::OffsetDeleteRequestTopic::default();
            topic.name = topic_name(TOPIC);
            topic.partitions = vec![partition];
            let mut r = OffsetDeleteRequest::default();
            r.group_id = group.clone();
            r.topics = vec![topic];
            r
        },
        |a| json!({"error": a.error_code, "partitions": a.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.error_code)).collect::<Vec<_>>()})
    );
    Ok(())
}

async fn transactions(session: &mut Session) -> Result<(), DiffError> {
    every_version!(
        session,
        FindCoordinator,
        FindCoordinatorResponse,
        |version| requests::find_coordinator(TXN, 1, version),
        |a| json!({"error": a.error_code, "keys": a.coordinators.iter().map(|c| c.error_code).collect::<Vec<_>>()})
    );
    every_version!(
        session,
        InitProducerId,
        InitProducerIdResponse,
        |version| requests::init_producer_id(None, 60_000),
        |a| json!({"error": a.error_code, "producer": a.producer_id.0 >= 0})
    );
    every_version!(
        session,
        InitProducerId,
        InitProducerIdResponse,
        |version| requests::init_producer_id(Some(TXN), 60_000),
        |a| json!({"error": a.error_code, "producer": a.producer_id.0 >= 0})
    );
    every_version!(
        session,
        AddPartitionsToTxn,
        AddPartitionsToTxnResponse,
        |version| requests::add_partitions(TXN, (1, 0), &[(TOPIC, 0)]),
        |a| json!({"error": a.error_code, "partitions": a.results_by_topic_v3_and_below.iter().flat_map(|t| t.results_by_partition.iter().map(|p| p.partition_error_code)).collect::<Vec<_>>()})
    );
    every_version!(
        session,
        AddOffsetsToTxn,
        AddOffsetsToTxnResponse,
        |version| requests::add_offsets(TXN, (1, 0), GROUP),
        |a| json!(a.error_code)
    );
    every_version!(
        session,
        EndTxn,
        EndTxnResponse,
        |version| requests::end_txn(TXN, (1, 0), true),
        |a| json!(a.error_code)
    );
    every_version!(
        session,
        TxnOffsetCommit,
        TxnOffsetCommitResponse,
        |version| requests::txn_offset_commit(TXN, (1, 0), GROUP, &[(TOPIC, 0, 0)]),
        |a| json!(a
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect::<Vec<_>>())
    );
    every_version!(
        session,
        DescribeTransactions,
        DescribeTransactionsResponse,
        |version| {
            let mut r = DescribeTransactionsRequest::default();
            r.transactional_ids = vec![TransactionalId(s(TXN))];
            r
        },
        |a| json!(a
            .transaction_states
            .iter()
            .map(|t| t.error_code)
            .collect::<Vec<_>>())
    );
    every_version!(
        session,
        ListTransactions,
        ListTransactionsResponse,
        |version| ListTransactionsRequest::default(),
        |a| json!({"error": a.error_code, "listed": a.transaction_states.iter().filter(|t| t.transactional_id.starts_with("authz-")).count()})
    );
    every_version!(
        session,
        WriteTxnMarkers,
        WriteTxnMarkersResponse,
        |version| {
            let mut topic = write_txn_markers_request::WritableTxnMarkerTopic::default();
            topic.name = topic_name(TOPIC);
            topic.partition_indexes = vec![0];
            let mut marker = write_txn_markers_request::WritableTxnMarker::default();
            marker.producer_id = ProducerId(1);
            marker.topics = vec![topic];
            let mut r = WriteTxnMarkersRequest::default();
            r.markers = vec![marker];
            r
        },
        |a| json!(a
            .markers
            .iter()
            .flat_map(|m| m
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)))
            .collect::<Vec<_>>())
    );
    Ok(())
}

/// DescribeAcls with a filter matching every ACL.
pub fn describe_every_acl() -> DescribeAclsRequest {
    let mut r = DescribeAclsRequest::default();
    r.resource_type_filter = 1;
    r.resource_name_filter = None;
    r.pattern_type_filter = 1;
    r.principal_filter = None;
    r.host_filter = None;
    r.operation = 1;
    r.permission_type = 1;
    r
}

/// CreateAcls of one ACL: `User:someone` may READ `topic`.
pub fn create_read_acl(topic: &str) -> CreateAclsRequest {
    let mut creation = create_acls_request::AclCreation::default();
    creation.resource_type = 2;
    creation.resource_name = s(topic);
    creation.resource_pattern_type = 3;
    creation.principal = s("User:someone");
    creation.host = s("*");
    creation.operation = 3;
    creation.permission_type = 3;
    let mut r = CreateAclsRequest::default();
    r.creations = vec![creation];
    r
}

/// DeleteAcls with one filter matching every ACL.
pub fn delete_every_acl() -> DeleteAclsRequest {
    let mut filter = delete_acls_request::DeleteAclsFilter::default();
    filter.resource_type_filter = 1;
    filter.resource_name_filter = None;
    filter.pattern_type_filter = 1;
    filter.principal_filter = None;
    filter.host_filter = None;
    filter.operation = 1;
    filter.permission_type = 1;
    let mut r = DeleteAclsRequest::default();
    r.filters = vec![filter];
    r
}

async fn administration(session: &mut Session) -> Result<(), DiffError> {
    every_version!(
        session,
        CreateTopics,
        CreateTopicsResponse,
        |version| {
            let mut r = CreateTopicsRequest::default();
            r.topics = vec![requests::creatable("authz-new", 1, 1)];
            r.timeout_ms = 10_000;
            r
        },
        |a| json!(a.topics.iter().map(|t| t.error_code).collect::<Vec<_>>())
    );
    every_version!(
        session,
        DeleteTopics,
        DeleteTopicsResponse,
        |version| {
            let mut r = DeleteTopicsRequest::default();
            r.topic_names = vec![topic_name(TOPIC)];
            r.timeout_ms = 10_000;
            r
        },
        |a| json!(a.responses.iter().map(|t| t.error_code).collect::<Vec<_>>())
    );
    every_version!(
        session,
        CreatePartitions,
        CreatePartitionsResponse,
        |version| {
            let mut topic = create_partitions_request::CreatePartitionsTopic::default();
            topic.name = topic_name(TOPIC);
            topic.count = 3;
            let mut r = CreatePartitionsRequest::default();
            r.topics = vec![topic];
            r.timeout_ms = 10_000;
            r
        },
        |a| json!(a.results.iter().map(|t| t.error_code).collect::<Vec<_>>())
    );
    every_version!(
        session,
        DescribeConfigs,
        DescribeConfigsResponse,
        |version| {
            let resource = |kind: i8, name: &str| {
                let mut resource = describe_configs_request::DescribeConfigsResource::default();
                resource.resource_type = kind;
                resource.resource_name = s(name);
                resource.configuration_keys = None;
                resource
            };
            let mut r = DescribeConfigsRequest::default();
            r.resources = vec![resource(2, TOPIC), resource(4, "")];
            r
        },
        |a| {
            let mut seen: Vec<(i8, i16)> = a
                .results
                .iter()
                .map(|r| (r.resource_type, r.error_code))
                .collect();
            seen.sort();
            json!(seen)
        }
    );
    every_version!(
        session,
        AlterConfigs,
        AlterConfigsResponse,
        |version| {
            let mut config = alter_configs_request::AlterableConfig::default();
            config.name = s("retention.ms");
            config.value = Some(s("60000"));
            let mut resource = alter_configs_request::AlterConfigsResource::default();
            resource.resource_type = 2;
            resource.resource_name = s(TOPIC);
            resource.configs = vec![config];
            let mut r = AlterConfigsRequest::default();
            r.resources = vec![resource];
            r
        },
        |a| json!(a.responses.iter().map(|r| r.error_code).collect::<Vec<_>>())
    );
    every_version!(
        session,
        IncrementalAlterConfigs,
        IncrementalAlterConfigsResponse,
        |version| {
            let mut config = incremental_alter_configs_request::AlterableConfig::default();
            config.name = s("retention.ms");
            config.value = Some(s("60000"));
            let mut resource = incremental_alter_configs_request::AlterConfigsResource::default();
            resource.resource_type = 2;
            resource.resource_name = s(TOPIC);
            resource.configs = vec![config];
            let mut r = IncrementalAlterConfigsRequest::default();
            r.resources = vec![resource];
            r
        },
        |a| json!(a.responses.iter().map(|r| r.error_code).collect::<Vec<_>>())
    );
    every_version!(
        session,
        DescribeCluster,
        DescribeClusterResponse,
        |version| DescribeClusterRequest::default(),
        |a| json!({"error": a.error_code, "brokers": a.brokers.len()})
    );
    every_version!(
        session,
        DescribeLogDirs,
        DescribeLogDirsResponse,
        |version| {
            let mut r = DescribeLogDirsRequest::default();
            r.topics = None;
            r
        },
        |a| json!({"error": a.error_code, "dirs": a.results.len()})
    );
    every_version!(
        session,
        DescribeUserScramCredentials,
        DescribeUserScramCredentialsResponse,
        // A named user: Kafka 4.1 leaves a refused request for every user (null) unanswered.
        |version| {
            let mut user = describe_user_scram_credentials_request::UserName::default();
            user.name = s("authz-someone");
            let mut r = DescribeUserScramCredentialsRequest::default();
            r.users = Some(vec![user]);
            r
        },
        |a| json!({"error": a.error_code, "results": a.results.iter().map(|r| r.error_code).collect::<Vec<_>>()})
    );
    every_version!(
        session,
        AlterUserScramCredentials,
        AlterUserScramCredentialsResponse,
        |version| {
            let mut deletion = alter_user_scram_credentials_request::ScramCredentialDeletion::default();
            deletion.name = s("authz-someone");
            deletion.mechanism = 1;
            let mut r = AlterUserScramCredentialsRequest::default();
            r.deletions = vec![deletion];
            r
        },
        |a| json!(a.results.iter().map(|r| r.error_code).collect::<Vec<_>>())
    );
    every_version!(
        session,
        DescribeAcls,
        DescribeAclsResponse,
        |version| describe_every_acl(),
        |a| json!({"error": a.error_code, "resources": a.resources.len()})
    );
    every_version!(
        session,
        CreateAcls,
        CreateAclsResponse,
        |version| create_read_acl(TOPIC),
        |a| json!(a.results.iter().map(|r| r.error_code).collect::<Vec<_>>())
    );
    every_version!(
        session,
        DeleteAcls,
        DeleteAclsResponse,
        |version| delete_every_acl(),
        |a| json!(a
            .filter_results
            .iter()
            .map(|r| (r.error_code, r.matching_acls.len()))
            .collect::<Vec<_>>())
    );
    Ok(())
}
