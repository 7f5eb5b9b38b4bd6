//! Authorization with Kafka's ACL model, through the broker's dispatch: with `--authorizer acl`, a caller without
//! an ACL is refused with Kafka's error at every advertised version of each API (and nothing it asked for
//! happens), ACLs managed with CreateAcls / DescribeAcls / DeleteAcls grant and take away access, DENY wins, super
//! users pass, a resource without ACLs opens to everyone only with `allow.everyone.if.no.acl.found`, the ACLs
//! outlive a restart, and (a property) Produce and Fetch succeed exactly when Kafka's decision allows them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use std::sync::Arc;

use broker::{Caller, Node, NodeConfig};
use bytes::Bytes;
use common::call_as;
use kafka_auth::acl::{AuthorizerConfig, Operation, Permission, ResourceType};
use kafka_auth::Principal;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use record_format::BatchBuilder;
use storage_config::StorageConfig;

const TOPIC: &str = "orders";
const GROUP: &str = "billing";
const TRANSACTIONAL_ID: &str = "payments-tx";
const TOPIC_DENIED: i16 = 29;
const GROUP_DENIED: i16 = 30;
const CLUSTER_DENIED: i16 = 31;
const ID_DENIED: i16 = 53;
const SECURITY_DISABLED: i16 = 54;
const INVALID_REQUEST: i16 = 42;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn versions(key: ApiKey) -> std::ops::RangeInclusive<i16> {
    let (min, max) = broker::versions::range(key).expect("advertised");
    min..=max
}

/// An in-process broker with `orders` (2 partitions) over `storage`.
async fn broker_on(storage: StorageConfig) -> Node {
    let mut config = NodeConfig::new(storage.clone());
    config.topics = vec![(TOPIC.to_owned(), 2)];
    config.auto_create_topics = true;
    // Joins answered at once: these tests check ACLs, not the initial rebalance delay.
    config.group_initial_rebalance_delay_ms = 0;
    Node::open_on(
        config,
        ("127.0.0.1".to_owned(), 9092),
        storage.open().expect("store"),
        Arc::new(node::SystemClock),
    )
    .await
    .expect("broker")
}

async fn broker() -> Node {
    broker_on(StorageConfig::for_backend(
        storage_config::Backend::Memory,
        std::path::Path::new(""),
    ))
    .await
}

/// `User:name` from 127.0.0.1 on a broker whose authorizer has `User:admin` as super user.
fn caller(node: &Node, name: &str, open_without_acls: bool) -> Caller {
    Caller {
        peer: Some(std::net::IpAddr::from([127, 0, 0, 1])),
        principal: Principal::user(name),
        authorizer: Some(Arc::new(AuthorizerConfig {
            super_users: ["User:admin".to_owned()].into(),
            allow_everyone_if_no_acl_found: open_without_acls,
        })),
        ..Caller::anonymous(node)
    }
}

fn records(count: usize) -> Bytes {
    let mut builder = BatchBuilder::new();
    for index in 0..count {
        builder.add(1_700_000_000_000 + index as i64, None, Some(b"value"), &[]);
    }
    builder.build().expect("batch").into_bytes()
}

fn produce_request(topic: &str, transactional_id: Option<&str>) -> ProduceRequest {
    let mut partition = produce_request::PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(records(1));
    let mut data = produce_request::TopicProduceData::default();
    data.name = TopicName(s(topic));
    data.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 5_000;
    request.transactional_id = transactional_id.map(|id| TransactionalId(s(id)));
    request.topic_data = vec![data];
    request
}

async fn produce_error(node: &Node, who: &Caller, version: i16, topic: &str) -> i16 {
    let response: ProduceResponse =
        call_as(node, who, ApiKey::Produce, version, &produce_request(topic, None))
            .await
            .expect("answer");
    response.responses[0].partition_responses[0].error_code
}

fn fetch_request(topic: &str) -> FetchRequest {
    let mut partition = fetch_request::FetchPartition::default();
    partition.partition = 0;
    partition.fetch_offset = 0;
    partition.partition_max_bytes = 1 << 20;
    let mut wanted = fetch_request::FetchTopic::default();
    wanted.topic = TopicName(s(topic));
    wanted.partitions = vec![partition];
    let mut request = FetchRequest::default();
    request.replica_id = (-1).into();
    request.max_wait_ms = 0;
    request.max_bytes = 1 << 20;
    request.topics = vec![wanted];
    request
}

/// (error, whether records came back) of a fetch of partition 0 from offset 0.
async fn fetch_outcome(node: &Node, who: &Caller, version: i16, topic: &str) -> (i16, bool) {
    let response: FetchResponse = call_as(node, who, ApiKey::Fetch, version, &fetch_request(topic))
        .await
        .expect("answer");
    let partition = &response.responses[0].partitions[0];
    (
        partition.error_code,
        partition
            .records
            .as_ref()
            .is_some_and(|records| !records.is_empty()),
    )
}

fn acl_creation(
    kind: ResourceType,
    name: &str,
    pattern: i8,
    principal: &str,
    operation: Operation,
    permission: Permission,
) -> create_acls_request::AclCreation {
    let mut creation = create_acls_request::AclCreation::default();
    creation.resource_type = kind.code();
    creation.resource_name = s(name);
    creation.resource_pattern_type = pattern;
    creation.principal = s(principal);
    creation.host = s("*");
    creation.operation = operation.code();
    creation.permission_type = permission.code();
    creation
}

async fn create_acls(
    node: &Node,
    who: &Caller,
    creations: Vec<create_acls_request::AclCreation>,
) -> Vec<i16> {
    let mut request = CreateAclsRequest::default();
    request.creations = creations;
    let response: CreateAclsResponse = call_as(node, who, ApiKey::CreateAcls, 3, &request)
        .await
        .expect("answer");
    response.results.iter().map(|result| result.error_code).collect()
}

async fn grant(node: &Node, kind: ResourceType, name: &str, principal: &str, operation: Operation) {
    let admin = caller(node, "admin", false);
    let creation = acl_creation(kind, name, 3, principal, operation, Permission::Allow);
    let mut request = CreateAclsRequest::default();
    request.creations = vec![creation];
    let response: CreateAclsResponse = call_as(node, &admin, ApiKey::CreateAcls, 3, &request)
        .await
        .expect("answer");
    assert_eq!(
        response.results[0].error_code, 0,
        "{:?}",
        response.results[0].error_message
    );
}

async fn log_end(node: &Node) -> i64 {
    let mut partition = list_offsets_request::ListOffsetsPartition::default();
    partition.partition_index = 0;
    partition.timestamp = -1;
    let mut topic = list_offsets_request::ListOffsetsTopic::default();
    topic.name = TopicName(s(TOPIC));
    topic.partitions = vec![partition];
    let mut request = ListOffsetsRequest::default();
    request.replica_id = (-1).into();
    request.topics = vec![topic];
    let response: ListOffsetsResponse = common::call(node, ApiKey::ListOffsets, 1, &request)
        .await
        .expect("answer");
    response.topics[0].partitions[0].offset
}

#[tokio::test]
async fn without_an_acl_the_data_path_is_refused_at_every_version_and_nothing_is_written() {
    let node = broker().await;
    let alice = caller(&node, "alice", false);
    for version in versions(ApiKey::Produce) {
        assert_eq!(
            produce_error(&node, &alice, version, TOPIC).await,
            TOPIC_DENIED,
            "Produce v{version}"
        );
    }
    assert_eq!(log_end(&node).await, 0, "a refused produce writes nothing");
    let admin = caller(&node, "admin", false);
    assert_eq!(
        produce_error(&node, &admin, 8, TOPIC).await,
        0,
        "a super user produces"
    );
    for version in versions(ApiKey::Fetch) {
        assert_eq!(
            fetch_outcome(&node, &alice, version, TOPIC).await,
            (TOPIC_DENIED, false),
            "Fetch v{version}"
        );
    }
    // READ is checked before the offset, as Kafka checks it: a mirror link's readability probe fetches past any
    // log end, so that an allowed topic answers OFFSET_OUT_OF_RANGE and no data.
    let mut past_the_end = fetch_request(TOPIC);
    past_the_end.topics[0].partitions[0].fetch_offset = i64::MAX;
    for (who, expected) in [(&alice, TOPIC_DENIED), (&admin, 1)] {
        let response: FetchResponse = call_as(&node, who, ApiKey::Fetch, 11, &past_the_end)
            .await
            .expect("answer");
        assert_eq!(response.responses[0].partitions[0].error_code, expected);
    }
    for version in versions(ApiKey::ListOffsets) {
        let mut partition = list_offsets_request::ListOffsetsPartition::default();
        partition.timestamp = -1;
        let mut topic = list_offsets_request::ListOffsetsTopic::default();
        topic.name = TopicName(s(TOPIC));
        topic.partitions = vec![partition];
        let mut request = ListOffsetsRequest::default();
        request.replica_id = (-1).into();
        request.topics = vec![topic];
        let response: ListOffsetsResponse = call_as(&node, &alice, ApiKey::ListOffsets, version, &request)
            .await
            .expect("answer");
        assert_eq!(
            response.topics[0].partitions[0].error_code, TOPIC_DENIED,
            "ListOffsets v{version}"
        );
    }
    // A transactional produce without WRITE on its id is refused whole, even on a writable topic.
    grant(&node, ResourceType::Topic, TOPIC, "User:alice", Operation::Write).await;
    let request = produce_request(TOPIC, Some(TRANSACTIONAL_ID));
    let response: ProduceResponse = call_as(&node, &alice, ApiKey::Produce, 8, &request)
        .await
        .expect("answer");
    assert_eq!(response.responses[0].partition_responses[0].error_code, ID_DENIED);
    assert_eq!(log_end(&node).await, 1);
}

fn all_topics() -> MetadataRequest {
    let mut request = MetadataRequest::default();
    request.topics = None;
    request
}

#[tokio::test]
async fn metadata_shows_only_described_topics_and_creates_none_without_create() {
    let node = broker().await;
    let alice = caller(&node, "alice", false);
    for version in versions(ApiKey::Metadata) {
        let mut all = MetadataRequest::default();
        all.topics = None;
        let response: MetadataResponse = call_as(&node, &alice, ApiKey::Metadata, version, &all)
            .await
            .expect("answer");
        assert!(
            response.topics.is_empty(),
            "Metadata v{version} lists no undescribed topic"
        );
        let mut named = MetadataRequest::default();
        let mut wanted = metadata_request::MetadataRequestTopic::default();
        wanted.name = Some(TopicName(s("fresh")));
        named.topics = Some(vec![wanted]);
        named.allow_auto_topic_creation = true;
        let response: MetadataResponse = call_as(&node, &alice, ApiKey::Metadata, version, &named)
            .await
            .expect("answer");
        assert_eq!(response.topics[0].error_code, TOPIC_DENIED, "Metadata v{version}");
        assert!(response.topics[0].partitions.is_empty());
    }
    let admin = caller(&node, "admin", false);
    let response: MetadataResponse = call_as(&node, &admin, ApiKey::Metadata, 8, &all_topics())
        .await
        .expect("answer");
    let names: Vec<_> = response
        .topics
        .iter()
        .filter_map(|topic| topic.name.as_ref())
        .map(|n| n.to_string())
        .collect();
    assert!(
        !names.contains(&"fresh".to_owned()),
        "no topic was auto-created for a caller without CREATE"
    );
    grant(&node, ResourceType::Topic, TOPIC, "User:alice", Operation::Read).await;
    let response: MetadataResponse = call_as(&node, &alice, ApiKey::Metadata, 8, &all_topics())
        .await
        .expect("answer");
    let names: Vec<_> = response
        .topics
        .iter()
        .filter_map(|topic| topic.name.as_ref())
        .map(|n| n.to_string())
        .collect();
    assert_eq!(names, vec![TOPIC.to_owned()], "READ implies DESCRIBE");
}

#[tokio::test]
async fn a_topic_asked_by_id_is_described_only_to_a_caller_who_may_describe_it() {
    let node = broker().await;
    let id = uuid::Uuid::from_bytes(node.topic_id(TOPIC).await.expect("the topic has an id"));
    let mut asked = metadata_request::MetadataRequestTopic::default();
    asked.topic_id = id;
    asked.name = None;
    let mut by_id = MetadataRequest::default();
    by_id.topics = Some(vec![asked]);
    let alice = caller(&node, "alice", false);
    let response: MetadataResponse = call_as(&node, &alice, ApiKey::Metadata, 12, &by_id)
        .await
        .expect("answer");
    let topic = &response.topics[0];
    // Kafka answers the id alone: neither the name nor the partitions of a topic the caller may not describe.
    assert_eq!(
        (
            topic.error_code,
            topic.name.as_ref(),
            topic.topic_id,
            topic.partitions.len()
        ),
        (TOPIC_DENIED, None, id, 0)
    );
    grant(
        &node,
        ResourceType::Topic,
        TOPIC,
        "User:alice",
        Operation::Describe,
    )
    .await;
    let response: MetadataResponse = call_as(&node, &alice, ApiKey::Metadata, 12, &by_id)
        .await
        .expect("answer");
    let topic = &response.topics[0];
    assert_eq!(topic.error_code, 0);
    assert_eq!(topic.name.as_ref().map(|name| name.as_str()), Some(TOPIC));
    assert!(!topic.partitions.is_empty());
}

#[tokio::test]
async fn a_topic_deleted_by_id_needs_delete_on_its_name_and_is_named_only_to_a_caller_who_may_describe_it() {
    let node = broker().await;
    let id = uuid::Uuid::from_bytes(node.topic_id(TOPIC).await.expect("the topic has an id"));
    let delete_by_id = |ids: &[uuid::Uuid]| {
        let mut request = DeleteTopicsRequest::default();
        request.topics = ids.iter().map(|id| deletion_by_id(*id)).collect();
        request
    };
    let alice = caller(&node, "alice", false);
    let answers = deletion_answers;
    let response: DeleteTopicsResponse =
        call_as(&node, &alice, ApiKey::DeleteTopics, 6, &delete_by_id(&[id]))
            .await
            .expect("answer");
    // Refused, and the id alone: the name is not told to a caller who may not describe the topic.
    assert_eq!(answers(response), vec![(None, id, TOPIC_DENIED)]);
    // An id given twice is INVALID_REQUEST whoever asks, as Kafka checks it before it authorizes; nothing goes.
    let response: DeleteTopicsResponse =
        call_as(&node, &alice, ApiKey::DeleteTopics, 6, &delete_by_id(&[id, id]))
            .await
            .expect("answer");
    assert_eq!(answers(response), vec![(None, id, INVALID_REQUEST)]);
    grant(
        &node,
        ResourceType::Topic,
        TOPIC,
        "User:alice",
        Operation::Describe,
    )
    .await;
    let response: DeleteTopicsResponse =
        call_as(&node, &alice, ApiKey::DeleteTopics, 6, &delete_by_id(&[id]))
            .await
            .expect("answer");
    assert_eq!(
        answers(response),
        vec![(Some(TOPIC.to_owned()), id, TOPIC_DENIED)]
    );
    assert!(node.partition(TOPIC, 0).await.is_some(), "nothing was deleted");
    grant(&node, ResourceType::Topic, TOPIC, "User:alice", Operation::Delete).await;
    let response: DeleteTopicsResponse =
        call_as(&node, &alice, ApiKey::DeleteTopics, 6, &delete_by_id(&[id]))
            .await
            .expect("answer");
    assert_eq!(answers(response), vec![(Some(TOPIC.to_owned()), id, 0)]);
    assert!(node.partition(TOPIC, 0).await.is_none());
}

/// Each DeleteTopics answer as (name, id, error code), sorted (Kafka shuffles its answers).
fn deletion_answers(response: DeleteTopicsResponse) -> Vec<(Option<String>, uuid::Uuid, i16)> {
    let mut answers: Vec<_> = response
        .responses
        .into_iter()
        .map(|answer| {
            (
                answer.name.map(|name| name.to_string()),
                answer.topic_id,
                answer.error_code,
            )
        })
        .collect();
    answers.sort();
    answers
}

fn deletion_by_name(name: &str) -> delete_topics_request::DeleteTopicState {
    let mut topic = delete_topics_request::DeleteTopicState::default();
    topic.name = Some(TopicName(s(name)));
    topic
}

fn deletion_by_id(id: uuid::Uuid) -> delete_topics_request::DeleteTopicState {
    let mut topic = delete_topics_request::DeleteTopicState::default();
    topic.topic_id = id;
    topic
}

#[tokio::test]
async fn a_deletion_mixing_allowed_denied_and_repeated_topics_deletes_only_the_allowed_one() {
    const UNKNOWN_TOPIC: i16 = 3;
    const UNKNOWN_TOPIC_ID: i16 = 100;
    for version in [5, 6] {
        let node = broker().await;
        for name in ["alpha", "beta", "gamma"] {
            node.create_topic(name, 1).await.unwrap();
        }
        grant(&node, ResourceType::Topic, TOPIC, "User:alice", Operation::Delete).await;
        // alice may describe "missing" (no such topic): told it is unknown, not refused.
        grant(
            &node,
            ResourceType::Topic,
            "missing",
            "User:alice",
            Operation::Describe,
        )
        .await;
        let alice = caller(&node, "alice", false);
        let names = ["alpha", TOPIC, "beta", "beta", "gamma", "missing"];
        let mut request = DeleteTopicsRequest::default();
        let stranger = uuid::Uuid::from_bytes([3; 16]);
        let beta = uuid::Uuid::from_bytes(node.topic_id("beta").await.unwrap());
        if version >= 6 {
            request.topics = names.iter().map(|name| deletion_by_name(name)).collect();
            let mut both = deletion_by_name("gamma");
            both.topic_id = beta;
            request.topics.extend([
                deletion_by_id(stranger),
                both,
                delete_topics_request::DeleteTopicState::default(),
            ]);
        } else {
            request.topic_names = names.iter().map(|name| TopicName(s(name))).collect();
        }
        let response: DeleteTopicsResponse = call_as(&node, &alice, ApiKey::DeleteTopics, version, &request)
            .await
            .expect("answer");
        let topic_id = |answers: &[(Option<String>, uuid::Uuid, i16)]| {
            answers
                .iter()
                .find(|answer| answer.0.as_deref() == Some(TOPIC))
                .map_or(uuid::Uuid::nil(), |answer| answer.1)
        };
        let answers = deletion_answers(response);
        let mut expected = vec![
            (Some("alpha".to_owned()), uuid::Uuid::nil(), TOPIC_DENIED),
            (Some(TOPIC.to_owned()), topic_id(&answers), 0),
            (Some("beta".to_owned()), uuid::Uuid::nil(), INVALID_REQUEST),
            (Some("gamma".to_owned()), uuid::Uuid::nil(), TOPIC_DENIED),
            (Some("missing".to_owned()), uuid::Uuid::nil(), UNKNOWN_TOPIC),
        ];
        if version >= 6 {
            assert!(
                !topic_id(&answers).is_nil(),
                "v6 answers carry the deleted topic's id"
            );
            expected.extend([
                (None, stranger, UNKNOWN_TOPIC_ID),
                (Some("gamma".to_owned()), beta, INVALID_REQUEST),
                (None, uuid::Uuid::nil(), INVALID_REQUEST),
            ]);
        }
        expected.sort();
        assert_eq!(answers, expected, "v{version}");
        assert!(
            node.partition(TOPIC, 0).await.is_none(),
            "v{version}: the allowed topic is gone"
        );
        for kept in ["alpha", "beta", "gamma"] {
            assert!(
                node.partition(kept, 0).await.is_some(),
                "v{version}: {kept} is kept"
            );
        }
    }
}

#[tokio::test]
async fn a_name_beside_its_own_id_tells_a_caller_who_may_not_delete_nothing_of_the_pairing() {
    let node = broker().await;
    let id = uuid::Uuid::from_bytes(node.topic_id(TOPIC).await.unwrap());
    let mut request = DeleteTopicsRequest::default();
    request.topics = vec![deletion_by_id(id), deletion_by_name(TOPIC)];
    let alice = caller(&node, "alice", false);
    let ask = || call_as(&node, &alice, ApiKey::DeleteTopics, 6, &request);
    let response: DeleteTopicsResponse = ask().await.expect("answer");
    // Two refusals, as for any two topics; INVALID_REQUEST would tell that the id is the name's.
    assert_eq!(
        deletion_answers(response),
        vec![
            (None, id, TOPIC_DENIED),
            (Some(TOPIC.to_owned()), uuid::Uuid::nil(), TOPIC_DENIED)
        ]
    );
    grant(
        &node,
        ResourceType::Topic,
        TOPIC,
        "User:alice",
        Operation::Describe,
    )
    .await;
    let response: DeleteTopicsResponse = ask().await.expect("answer");
    assert_eq!(
        deletion_answers(response),
        vec![
            (Some(TOPIC.to_owned()), uuid::Uuid::nil(), TOPIC_DENIED),
            (Some(TOPIC.to_owned()), id, TOPIC_DENIED)
        ]
    );
    assert!(node.partition(TOPIC, 0).await.is_some());
}

#[tokio::test]
async fn delete_on_the_cluster_deletes_any_topic_by_name_or_by_id() {
    let node = broker().await;
    node.create_topic("alpha", 1).await.unwrap();
    let id = uuid::Uuid::from_bytes(node.topic_id("alpha").await.unwrap());
    grant(
        &node,
        ResourceType::Cluster,
        "kafka-cluster",
        "User:alice",
        Operation::Delete,
    )
    .await;
    let alice = caller(&node, "alice", false);
    let mut request = DeleteTopicsRequest::default();
    request.topics = vec![deletion_by_name(TOPIC), deletion_by_id(id)];
    let response: DeleteTopicsResponse = call_as(&node, &alice, ApiKey::DeleteTopics, 6, &request)
        .await
        .expect("answer");
    let codes: Vec<i16> = deletion_answers(response)
        .into_iter()
        .map(|answer| answer.2)
        .collect();
    assert_eq!(codes, vec![0, 0]);
    assert!(node.partition(TOPIC, 0).await.is_none());
    assert!(node.partition("alpha", 0).await.is_none());
}

fn creation(name: &str) -> create_topics_request::CreatableTopic {
    let mut topic = create_topics_request::CreatableTopic::default();
    topic.name = TopicName(s(name));
    topic.num_partitions = 1;
    topic.replication_factor = 1;
    topic
}

#[tokio::test]
async fn a_topic_created_without_describe_configs_on_it_is_answered_without_its_configs() {
    let node = broker().await;
    for (topic, operation) in [
        ("plain", Operation::Create),
        ("described", Operation::Create),
        ("described", Operation::DescribeConfigs),
        ("altered", Operation::Create),
        ("altered", Operation::AlterConfigs),
    ] {
        grant(&node, ResourceType::Topic, topic, "User:alice", operation).await;
    }
    // DESCRIBE_CONFIGS on the cluster does not count: Kafka asks the topic's ACLs alone.
    grant(
        &node,
        ResourceType::Cluster,
        "kafka-cluster",
        "User:alice",
        Operation::DescribeConfigs,
    )
    .await;
    let alice = caller(&node, "alice", false);
    for version in [5, 7] {
        for (topic, describable) in [("plain", false), ("described", true), ("altered", true)] {
            let mut request = CreateTopicsRequest::default();
            request.topics = vec![creation(topic)];
            request.validate_only = true;
            let response: CreateTopicsResponse =
                call_as(&node, &alice, ApiKey::CreateTopics, version, &request)
                    .await
                    .expect("answer");
            let answer = &response.topics[0];
            assert_eq!(answer.error_code, 0, "v{version} {topic}");
            let configs = answer.configs.as_ref().map_or(0, Vec::len);
            if describable {
                assert_eq!(answer.topic_config_error_code, 0, "v{version} {topic}");
                assert_eq!(answer.num_partitions, 1, "v{version} {topic}");
                assert!(configs > 0, "v{version} {topic}");
            } else {
                assert_eq!(answer.topic_config_error_code, TOPIC_DENIED, "v{version} {topic}");
                assert_eq!(
                    (answer.num_partitions, answer.replication_factor, configs),
                    (-1, -1, 0),
                    "v{version} {topic}"
                );
            }
            if version >= 7 {
                assert!(!answer.topic_id.is_nil(), "v{version} {topic}");
            }
        }
    }
}

#[tokio::test]
async fn a_name_given_twice_or_the_metadata_log_is_refused_invalid_before_authorization() {
    let node = broker().await;
    let alice = caller(&node, "alice", false);
    for version in versions(ApiKey::CreateTopics) {
        let mut request = CreateTopicsRequest::default();
        request.topics = vec![
            creation("twice"),
            creation("denied"),
            creation("twice"),
            creation("__cluster_metadata"),
        ];
        let response: CreateTopicsResponse = call_as(&node, &alice, ApiKey::CreateTopics, version, &request)
            .await
            .expect("answer");
        let mut codes: Vec<(String, i16)> = response
            .topics
            .iter()
            .map(|answer| (answer.name.to_string(), answer.error_code))
            .collect();
        codes.sort();
        assert_eq!(
            codes,
            vec![
                ("__cluster_metadata".to_owned(), INVALID_REQUEST),
                ("denied".to_owned(), TOPIC_DENIED),
                ("twice".to_owned(), INVALID_REQUEST),
            ],
            "CreateTopics v{version}"
        );
    }
    assert!(node.partition("twice", 0).await.is_none());
}

#[tokio::test]
async fn groups_transactions_and_the_cluster_answer_their_own_authorization_errors() {
    let node = broker().await;
    let alice = caller(&node, "alice", false);
    for version in versions(ApiKey::JoinGroup) {
        let mut request = JoinGroupRequest::default();
        request.group_id = GroupId(s(GROUP));
        request.session_timeout_ms = 10_000;
        request.rebalance_timeout_ms = 10_000;
        request.protocol_type = s("consumer");
        let response: JoinGroupResponse = call_as(&node, &alice, ApiKey::JoinGroup, version, &request)
            .await
            .expect("answer");
        assert_eq!(response.error_code, GROUP_DENIED, "JoinGroup v{version}");
    }
    for version in versions(ApiKey::OffsetCommit) {
        let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
        partition.committed_offset = 1;
        let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
        topic.name = TopicName(s(TOPIC));
        topic.partitions = vec![partition];
        let mut request = OffsetCommitRequest::default();
        request.group_id = GroupId(s(GROUP));
        request.generation_id_or_member_epoch = -1;
        request.topics = vec![topic];
        let response: OffsetCommitResponse = call_as(&node, &alice, ApiKey::OffsetCommit, version, &request)
            .await
            .expect("answer");
        assert_eq!(
            response.topics[0].partitions[0].error_code, GROUP_DENIED,
            "OffsetCommit v{version}"
        );
    }
    for version in versions(ApiKey::OffsetFetch) {
        let mut request = OffsetFetchRequest::default();
        let mut topic = offset_fetch_request::OffsetFetchRequestTopic::default();
        topic.name = TopicName(s(TOPIC));
        topic.partition_indexes = vec![0];
        if version >= 8 {
            let mut group = offset_fetch_request::OffsetFetchRequestGroup::default();
            group.group_id = GroupId(s(GROUP));
            request.groups = vec![group];
        } else {
            request.group_id = GroupId(s(GROUP));
            request.topics = Some(vec![topic]);
        }
        let response: OffsetFetchResponse = call_as(&node, &alice, ApiKey::OffsetFetch, version, &request)
            .await
            .expect("answer");
        let error = match version {
            8.. => response.groups[0].error_code,
            2.. => response.error_code,
            _ => response.topics[0].partitions[0].error_code,
        };
        assert_eq!(error, GROUP_DENIED, "OffsetFetch v{version}");
    }
    for version in versions(ApiKey::FindCoordinator) {
        let mut request = FindCoordinatorRequest::default();
        request.key_type = 1;
        if version >= 4 {
            request.coordinator_keys = vec![s(TRANSACTIONAL_ID)];
        } else {
            request.key = s(TRANSACTIONAL_ID);
        }
        if version == 0 {
            request.key_type = 0;
        }
        let response: FindCoordinatorResponse =
            call_as(&node, &alice, ApiKey::FindCoordinator, version, &request)
                .await
                .expect("answer");
        let error = if version >= 4 {
            response.coordinators[0].error_code
        } else {
            response.error_code
        };
        let expected = if version == 0 { GROUP_DENIED } else { ID_DENIED };
        assert_eq!(error, expected, "FindCoordinator v{version}");
    }
    for version in versions(ApiKey::InitProducerId) {
        let mut idempotent = InitProducerIdRequest::default();
        idempotent.transactional_id = None;
        idempotent.producer_id = (-1).into();
        idempotent.producer_epoch = -1;
        idempotent.transaction_timeout_ms = 60_000;
        let response: InitProducerIdResponse =
            call_as(&node, &alice, ApiKey::InitProducerId, version, &idempotent)
                .await
                .expect("answer");
        assert_eq!(
            response.error_code, CLUSTER_DENIED,
            "InitProducerId v{version} (idempotent)"
        );
        let mut transactional = idempotent.clone();
        transactional.transactional_id = Some(TransactionalId(s(TRANSACTIONAL_ID)));
        let response: InitProducerIdResponse =
            call_as(&node, &alice, ApiKey::InitProducerId, version, &transactional)
                .await
                .expect("answer");
        assert_eq!(
            response.error_code, ID_DENIED,
            "InitProducerId v{version} (transactional)"
        );
    }
    for version in versions(ApiKey::DescribeCluster) {
        let response: DescribeClusterResponse = call_as(
            &node,
            &alice,
            ApiKey::DescribeCluster,
            version,
            &DescribeClusterRequest::default(),
        )
        .await
        .expect("answer");
        assert_eq!(
            response.error_code, 0,
            "DescribeCluster v{version}: Kafka answers it to everyone"
        );
    }
    for version in versions(ApiKey::CreateTopics) {
        let mut topic = create_topics_request::CreatableTopic::default();
        topic.name = TopicName(s("new-topic"));
        topic.num_partitions = 1;
        topic.replication_factor = 1;
        let mut request = CreateTopicsRequest::default();
        request.topics = vec![topic];
        let response: CreateTopicsResponse = call_as(&node, &alice, ApiKey::CreateTopics, version, &request)
            .await
            .expect("answer");
        assert_eq!(
            response.topics[0].error_code, TOPIC_DENIED,
            "CreateTopics v{version}"
        );
    }
    for version in versions(ApiKey::DeleteTopics) {
        let mut request = DeleteTopicsRequest::default();
        if version >= 6 {
            let mut by_name = delete_topics_request::DeleteTopicState::default();
            by_name.name = Some(TopicName(s(TOPIC)));
            request.topics = vec![by_name];
        } else {
            request.topic_names = vec![TopicName(s(TOPIC))];
        }
        let response: DeleteTopicsResponse = call_as(&node, &alice, ApiKey::DeleteTopics, version, &request)
            .await
            .expect("answer");
        assert_eq!(
            response.responses[0].error_code, TOPIC_DENIED,
            "DeleteTopics v{version}"
        );
    }
    for version in versions(ApiKey::DescribeConfigs) {
        let mut resource = describe_configs_request::DescribeConfigsResource::default();
        resource.resource_type = 4;
        resource.resource_name = s("0");
        let mut request = DescribeConfigsRequest::default();
        request.resources = vec![resource];
        let response: DescribeConfigsResponse =
            call_as(&node, &alice, ApiKey::DescribeConfigs, version, &request)
                .await
                .expect("answer");
        assert_eq!(
            response.results[0].error_code, CLUSTER_DENIED,
            "DescribeConfigs v{version}"
        );
    }
    // The idempotent producer is let in by WRITE on some topic (KIP-679), as Kafka lets it.
    grant(
        &node,
        ResourceType::Topic,
        "elsewhere",
        "User:alice",
        Operation::Write,
    )
    .await;
    let mut idempotent = InitProducerIdRequest::default();
    idempotent.transactional_id = None;
    idempotent.producer_id = (-1).into();
    idempotent.producer_epoch = -1;
    idempotent.transaction_timeout_ms = 60_000;
    let response: InitProducerIdResponse = call_as(&node, &alice, ApiKey::InitProducerId, 4, &idempotent)
        .await
        .expect("answer");
    assert_eq!(response.error_code, 0);
}

#[tokio::test]
async fn acls_are_managed_by_the_cluster_s_administrators_and_grant_deny_and_revoke_access() {
    let node = broker().await;
    let alice = caller(&node, "alice", false);
    let admin = caller(&node, "admin", false);
    // Without an authorizer the ACL APIs answer SECURITY_DISABLED, as Kafka's do.
    let open = Caller::anonymous(&node);
    for version in versions(ApiKey::CreateAcls) {
        let creation = acl_creation(
            ResourceType::Topic,
            TOPIC,
            3,
            "User:alice",
            Operation::Read,
            Permission::Allow,
        );
        assert_eq!(
            create_acls(&node, &open, vec![creation.clone()]).await,
            vec![SECURITY_DISABLED]
        );
        let mut request = CreateAclsRequest::default();
        request.creations = vec![creation];
        let response: CreateAclsResponse = call_as(&node, &alice, ApiKey::CreateAcls, version, &request)
            .await
            .expect("answer");
        assert_eq!(
            response.results[0].error_code, CLUSTER_DENIED,
            "CreateAcls v{version}"
        );
    }
    // A binding Kafka would refuse is refused alone; the valid one beside it is created.
    let invalid = acl_creation(
        ResourceType::Cluster,
        "not-the-cluster",
        3,
        "User:alice",
        Operation::Alter,
        Permission::Allow,
    );
    let prefixed = acl_creation(
        ResourceType::Topic,
        "ord",
        4,
        "User:alice",
        Operation::All,
        Permission::Allow,
    );
    assert_eq!(
        create_acls(&node, &admin, vec![invalid, prefixed]).await,
        vec![INVALID_REQUEST, 0]
    );
    assert_eq!(
        produce_error(&node, &alice, 8, TOPIC).await,
        0,
        "PREFIXED ord covers orders"
    );
    assert_eq!(fetch_outcome(&node, &alice, 11, TOPIC).await, (0, true));
    // DENY wins over the ALLOW.
    let deny = acl_creation(
        ResourceType::Topic,
        TOPIC,
        3,
        "User:*",
        Operation::Read,
        Permission::Deny,
    );
    assert_eq!(create_acls(&node, &admin, vec![deny]).await, vec![0]);
    assert_eq!(
        fetch_outcome(&node, &alice, 11, TOPIC).await,
        (TOPIC_DENIED, false)
    );
    assert_eq!(
        produce_error(&node, &alice, 8, TOPIC).await,
        0,
        "the DENY is on READ only"
    );
    // Every version describes them; a MATCH filter finds what applies to `orders`.
    for version in versions(ApiKey::DescribeAcls) {
        let mut request = DescribeAclsRequest::default();
        request.resource_type_filter = ResourceType::Topic.code();
        request.resource_name_filter = Some(s(TOPIC));
        request.pattern_type_filter = 2;
        request.principal_filter = None;
        request.host_filter = None;
        request.operation = 1;
        request.permission_type = 1;
        let response: DescribeAclsResponse = call_as(&node, &admin, ApiKey::DescribeAcls, version, &request)
            .await
            .expect("answer");
        assert_eq!(response.error_code, 0, "DescribeAcls v{version}");
        let patterns: Vec<(String, i8)> = response
            .resources
            .iter()
            .map(|r| (r.resource_name.to_string(), r.pattern_type))
            .collect();
        assert_eq!(
            patterns,
            vec![("ord".to_owned(), 4), (TOPIC.to_owned(), 3)],
            "DescribeAcls v{version}"
        );
        let response: DescribeAclsResponse = call_as(&node, &alice, ApiKey::DescribeAcls, version, &request)
            .await
            .expect("answer");
        assert_eq!(response.error_code, CLUSTER_DENIED);
    }
    // Deleting the DENY gives READ back; the deletion lists what it removed.
    let mut filter = delete_acls_request::DeleteAclsFilter::default();
    filter.resource_type_filter = 1;
    filter.pattern_type_filter = 1;
    filter.resource_name_filter = None;
    filter.principal_filter = None;
    filter.host_filter = None;
    filter.operation = 1;
    filter.permission_type = Permission::Deny.code();
    let mut request = DeleteAclsRequest::default();
    request.filters = vec![filter];
    let response: DeleteAclsResponse = call_as(&node, &admin, ApiKey::DeleteAcls, 3, &request)
        .await
        .expect("answer");
    assert_eq!(response.filter_results[0].error_code, 0);
    assert_eq!(response.filter_results[0].matching_acls.len(), 1);
    assert_eq!(
        response.filter_results[0].matching_acls[0].principal.as_str(),
        "User:*"
    );
    assert_eq!(fetch_outcome(&node, &alice, 11, TOPIC).await, (0, true));
}

#[tokio::test]
async fn mirror_administration_needs_alter_on_the_cluster_and_looking_needs_describe() {
    use broker::authorize::{admin::mirror, Access};
    use node::mirror::AdminRequest;
    let node = broker().await;
    let alice = caller(&node, "alice", false);
    let failover = AdminRequest::Failover {
        link: "from-prod".to_owned(),
        topics: Vec::new(),
    };
    let refused = mirror(&Access::of(&node, &alice).await, &failover).expect("refused");
    assert_eq!(
        refused.error.map(|error| error.category),
        Some("authorization".to_owned())
    );
    assert!(mirror(&Access::of(&node, &alice).await, &AdminRequest::List).is_some());
    grant(
        &node,
        ResourceType::Cluster,
        "kafka-cluster",
        "User:alice",
        Operation::Describe,
    )
    .await;
    assert!(mirror(&Access::of(&node, &alice).await, &AdminRequest::List).is_none());
    assert!(
        mirror(&Access::of(&node, &alice).await, &failover).is_some(),
        "DESCRIBE does not imply ALTER"
    );
    grant(
        &node,
        ResourceType::Cluster,
        "kafka-cluster",
        "User:alice",
        Operation::Alter,
    )
    .await;
    assert!(mirror(&Access::of(&node, &alice).await, &failover).is_none());
    let admin = caller(&node, "admin", false);
    let delete = AdminRequest::Delete {
        link: "from-prod".to_owned(),
    };
    assert!(
        mirror(&Access::of(&node, &admin).await, &delete).is_none(),
        "a super user administers mirrors"
    );
}

#[tokio::test]
async fn a_resource_without_acls_is_open_only_when_everyone_is_allowed_then() {
    let node = broker().await;
    let open = caller(&node, "alice", true);
    assert_eq!(produce_error(&node, &open, 8, TOPIC).await, 0);
    grant(&node, ResourceType::Topic, TOPIC, "User:bob", Operation::Write).await;
    assert_eq!(
        produce_error(&node, &open, 8, TOPIC).await,
        TOPIC_DENIED,
        "an ACL for bob closes it to alice"
    );
}

#[tokio::test]
async fn acls_outlive_a_restart() {
    let dir = tempfile::tempdir().expect("dir");
    let storage = StorageConfig::for_backend(storage_config::Backend::Fs, dir.path());
    let node = broker_on(storage.clone()).await;
    grant(&node, ResourceType::Topic, TOPIC, "User:alice", Operation::Write).await;
    node.close().await.expect("close");
    drop(node);
    let node = broker_on(storage).await;
    let alice = caller(&node, "alice", false);
    assert_eq!(produce_error(&node, &alice, 8, TOPIC).await, 0);
    assert_eq!(node.acls().await.len(), 1);
    node.close().await.expect("close");
}

mod decisions {
    use super::*;
    use kafka_auth::acl::{self, AclBinding, AclSet, PatternType};
    use proptest::prelude::*;

    fn any_binding() -> impl Strategy<Value = AclBinding> {
        (
            prop::sample::select(vec!["orders", "ord", "o", "*", "other"]),
            prop::sample::select(PatternType::ALL.to_vec()),
            prop::sample::select(vec!["User:alice", "User:bob", "User:*"]),
            prop::sample::select(vec![
                Operation::All,
                Operation::Read,
                Operation::Write,
                Operation::Describe,
            ]),
            prop::sample::select(Permission::ALL.to_vec()),
        )
            .prop_map(|(name, pattern, principal, operation, permission)| AclBinding {
                resource_type: ResourceType::Topic,
                resource_name: name.to_owned(),
                pattern_type: pattern,
                principal: principal.to_owned(),
                host: "*".to_owned(),
                operation,
                permission,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Whatever the ACLs, alice's produce and fetch are served exactly when Kafka's decision allows them, and
        /// a refused produce writes nothing.
        #[test]
        fn produce_and_fetch_are_served_exactly_when_the_decision_allows(
            bindings in prop::collection::btree_set(any_binding(), 0..8),
            open in any::<bool>(),
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let node = broker().await;
                let admin = caller(&node, "admin", open);
                let creations = bindings.iter().map(|b| {
                    acl_creation(b.resource_type, &b.resource_name, b.pattern_type.code(), &b.principal,
                        b.operation, b.permission)
                }).collect::<Vec<_>>();
                let created = create_acls(&node, &admin, creations).await;
                prop_assert!(created.iter().all(|&code| code == 0));
                let config = AuthorizerConfig { super_users: Default::default(), allow_everyone_if_no_acl_found: open };
                let acls: AclSet = bindings.clone();
                let may = |operation| {
                    acl::authorize(&acls, &config, "User:alice", "127.0.0.1", operation, ResourceType::Topic, TOPIC)
                };
                let alice = caller(&node, "alice", open);
                let before = log_end(&node).await;
                let produced = produce_error(&node, &alice, 8, TOPIC).await;
                prop_assert_eq!(produced == 0, may(Operation::Write));
                prop_assert_eq!(produced == TOPIC_DENIED, !may(Operation::Write));
                let after = log_end(&node).await;
                prop_assert_eq!(after - before, i64::from(produced == 0));
                let (fetched, _) = fetch_outcome(&node, &alice, 11, TOPIC).await;
                prop_assert_eq!(fetched == 0, may(Operation::Read));
                prop_assert_eq!(fetched == TOPIC_DENIED, !may(Operation::Read));
                node.close().await.unwrap();
                Ok(())
            })?;
        }
    }
}
