//! CreateTopics v5–v7 through the broker's dispatch, as Kafka's controller answers it: a topic created is answered
//! with its partition count, replication factor and every config it has (in name order, each with the value and
//! source DescribeConfigs gives it), and from v7 with the id Metadata then shows; a creation only validated makes
//! every check a creation makes and is answered the same way, with a fresh id no topic is given; a name given twice
//! creates nothing and is answered INVALID_REQUEST once; a request over Kafka's bounds (10,000 partitions asked for,
//! 10,000 metadata records made) creates nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use broker::Node;
use common::call;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_REQUEST: i16 = 42;
const INVALID_TOPIC: i16 = 17;
/// DescribeConfigs' source of a topic's own override, and of Kafka's default.
const TOPIC_CONFIG: i8 = 1;
const DEFAULT_CONFIG: i8 = 5;

/// An in-process broker over memory storage with `orders` (one partition).
async fn broker() -> Node {
    common::memory_broker(&[("orders", 1)]).await
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn creatable(name: &str, partitions: i32, configs: &[(&str, &str)]) -> create_topics_request::CreatableTopic {
    let mut topic = create_topics_request::CreatableTopic::default();
    topic.name = TopicName(s(name));
    topic.num_partitions = partitions;
    topic.replication_factor = -1;
    topic.configs = configs
        .iter()
        .map(|(name, value)| {
            let mut config = create_topics_request::CreatableTopicConfig::default();
            config.name = s(name);
            config.value = Some(s(value));
            config
        })
        .collect();
    topic
}

async fn create(
    node: &Node,
    version: i16,
    validate_only: bool,
    topics: Vec<create_topics_request::CreatableTopic>,
) -> Vec<CreatableTopicResult> {
    let mut request = CreateTopicsRequest::default();
    request.topics = topics;
    request.timeout_ms = 10_000;
    request.validate_only = validate_only;
    let response: CreateTopicsResponse = call(node, ApiKey::CreateTopics, version, &request)
        .await
        .expect("answered");
    response.topics
}

/// Each config of `answer` as (name, value, source).
fn configs_of(answer: &CreatableTopicResult) -> Vec<(String, Option<String>, i8)> {
    answer
        .configs
        .iter()
        .flatten()
        .map(|config| {
            (
                config.name.to_string(),
                config.value.as_ref().map(|value| value.to_string()),
                config.config_source,
            )
        })
        .collect()
}

/// The topic ids Metadata v12 shows for `topics`.
async fn metadata_ids(node: &Node, topics: &[&str]) -> Vec<(String, i16, Uuid)> {
    let mut request = MetadataRequest::default();
    request.topics = Some(
        topics
            .iter()
            .map(|name| {
                let mut topic = metadata_request::MetadataRequestTopic::default();
                topic.name = Some(TopicName(s(name)));
                topic
            })
            .collect(),
    );
    let response: MetadataResponse = call(node, ApiKey::Metadata, 12, &request)
        .await
        .expect("answered");
    response
        .topics
        .into_iter()
        .map(|topic| {
            (
                topic.name.map(|name| name.to_string()).unwrap_or_default(),
                topic.error_code,
                topic.topic_id,
            )
        })
        .collect()
}

#[tokio::test]
async fn a_created_topic_is_answered_with_its_counts_its_configs_and_the_id_metadata_shows() {
    let node = broker().await;
    let answers = create(
        &node,
        7,
        false,
        vec![creatable("payments", 3, &[("retention.ms", "3600000")])],
    )
    .await;
    assert_eq!(answers.len(), 1);
    let answer = &answers[0];
    assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
    assert_eq!((answer.num_partitions, answer.replication_factor), (3, 1));
    assert_eq!(answer.topic_config_error_code, 0);
    let configs = configs_of(answer);
    let names: Vec<&str> = configs.iter().map(|(name, _, _)| name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "configs are answered in name order");
    assert!(
        configs.contains(&(
            "retention.ms".to_owned(),
            Some("3600000".to_owned()),
            TOPIC_CONFIG
        )),
        "the override given, as the topic's own config: {configs:?}"
    );
    assert!(
        configs.contains(&(
            "cleanup.policy".to_owned(),
            Some("delete".to_owned()),
            DEFAULT_CONFIG
        )),
        "a config not given, as Kafka's default: {configs:?}"
    );
    assert!(answer
        .configs
        .iter()
        .flatten()
        .all(|config| !config.read_only && !config.is_sensitive));
    // Every config DescribeConfigs describes, with the same value and source.
    let mut describe = DescribeConfigsRequest::default();
    let mut resource = describe_configs_request::DescribeConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = s("payments");
    describe.resources = vec![resource];
    let described: DescribeConfigsResponse = call(&node, ApiKey::DescribeConfigs, 4, &describe)
        .await
        .expect("answered");
    let mut described: Vec<(String, Option<String>, i8)> = described.results[0]
        .configs
        .iter()
        .map(|config| {
            (
                config.name.to_string(),
                config.value.as_ref().map(|value| value.to_string()),
                config.config_source,
            )
        })
        .collect();
    described.sort();
    assert_eq!(configs, described);
    assert!(!answer.topic_id.is_nil());
    assert_eq!(
        metadata_ids(&node, &["payments"]).await,
        vec![("payments".to_owned(), 0, answer.topic_id)],
        "the id answered is the topic's"
    );
}

#[tokio::test]
async fn a_creation_only_validated_is_answered_like_one_made_with_an_id_no_topic_is_given() {
    let node = broker().await;
    let answers = create(&node, 7, true, vec![creatable("payments", 2, &[])]).await;
    assert_eq!(answers[0].error_code, 0, "{:?}", answers[0].error_message);
    assert_eq!((answers[0].num_partitions, answers[0].replication_factor), (2, 1));
    assert!(!configs_of(&answers[0]).is_empty());
    let validated_id = answers[0].topic_id;
    assert!(!validated_id.is_nil());
    assert_eq!(
        metadata_ids(&node, &["payments"]).await[0].1,
        3,
        "a creation only validated creates nothing"
    );
    let made = create(&node, 7, false, vec![creatable("payments", 2, &[])]).await;
    assert_eq!(made[0].error_code, 0);
    assert_ne!(made[0].topic_id, validated_id, "each answer draws its own id");
    let orders = metadata_ids(&node, &["orders"]).await[0].2;
    let again = create(&node, 7, true, vec![creatable("other", 1, &[])]).await;
    assert!(![orders, made[0].topic_id].contains(&again[0].topic_id));
}

#[tokio::test]
async fn a_creation_only_validated_refuses_what_the_creation_would_refuse() {
    let node = broker().await;
    let made = create(&node, 7, false, vec![creatable("metrics.daily", 1, &[])]).await;
    assert_eq!(made[0].error_code, 0);
    for validate_only in [true, false] {
        let answers = create(
            &node,
            7,
            validate_only,
            vec![
                creatable("orders", 1, &[]),
                creatable("no-partitions", 0, &[]),
                creatable("bad/name", 1, &[]),
                creatable("metrics_daily", 1, &[]),
            ],
        )
        .await;
        let codes: Vec<(String, i16, bool)> = answers
            .iter()
            .map(|answer| {
                (
                    answer.name.to_string(),
                    answer.error_code,
                    answer.topic_id.is_nil(),
                )
            })
            .collect();
        assert_eq!(
            codes,
            vec![
                ("orders".to_owned(), TOPIC_ALREADY_EXISTS, true),
                ("no-partitions".to_owned(), INVALID_PARTITIONS, true),
                ("bad/name".to_owned(), INVALID_TOPIC, true),
                // `.` and `_` collide, as in Kafka's metric names.
                ("metrics_daily".to_owned(), INVALID_TOPIC, true),
            ],
            "validate_only {validate_only}"
        );
        assert!(answers
            .iter()
            .all(|answer| answer.num_partitions == -1 && configs_of(answer).is_empty()));
        assert_eq!(
            answers[2].error_message.as_deref(),
            Some("Topic name is invalid: 'bad/name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
            "Kafka's words"
        );
    }
}

#[tokio::test]
async fn a_name_given_twice_creates_nothing_and_is_answered_invalid_once_at_every_version() {
    let node = broker().await;
    let (min, max) = broker::versions::range(ApiKey::CreateTopics).expect("advertised");
    for version in min..=max {
        let twice = format!("twice-v{version}");
        let single = format!("single-v{version}");
        let answers = create(
            &node,
            version,
            false,
            vec![
                creatable(&twice, 1, &[]),
                creatable(&single, 1, &[]),
                creatable(&twice, 2, &[]),
                creatable(&twice, 3, &[]),
            ],
        )
        .await;
        let codes: Vec<(String, i16)> = answers
            .iter()
            .map(|answer| (answer.name.to_string(), answer.error_code))
            .collect();
        assert_eq!(
            codes,
            vec![(single.clone(), 0), (twice.clone(), INVALID_REQUEST)],
            "v{version}"
        );
        assert_eq!(
            metadata_ids(&node, &[&twice]).await[0].1,
            3,
            "v{version}: a name given twice is created never"
        );
    }
}

#[tokio::test]
async fn a_request_over_kafka_s_bounds_on_partitions_or_records_creates_nothing() {
    const POLICY_VIOLATION: i16 = 44;
    let node = broker().await;
    let answered = |answers: Vec<CreatableTopicResult>| -> Vec<(String, i16, Option<String>)> {
        answers
            .into_iter()
            .map(|answer| {
                (
                    answer.name.to_string(),
                    answer.error_code,
                    answer.error_message.map(|message| message.to_string()),
                )
            })
            .collect()
    };
    for validate_only in [true, false] {
        // 10,001 partitions asked for in all: counted before any check, so even a taken name counts.
        let answers = create(
            &node,
            7,
            validate_only,
            vec![
                creatable("large", 5_000, &[]),
                creatable("orders", 5_000, &[]),
                creatable("small", 1, &[]),
            ],
        )
        .await;
        let partitions = Some("Excessively large number of partitions per request.".to_owned());
        assert_eq!(
            answered(answers),
            vec![
                ("large".to_owned(), POLICY_VIOLATION, partitions.clone()),
                ("orders".to_owned(), POLICY_VIOLATION, partitions.clone()),
                ("small".to_owned(), POLICY_VIOLATION, partitions),
            ],
            "validate_only {validate_only}"
        );
        // 9,999 partitions, the topic and a config: 10,001 records.
        let answers = create(
            &node,
            7,
            validate_only,
            vec![creatable("large", 9_999, &[("retention.ms", "1000")])],
        )
        .await;
        assert_eq!(
            answered(answers),
            vec![(
                "large".to_owned(),
                POLICY_VIOLATION,
                Some("Unable to perform excessively large batch operation.".to_owned())
            )],
            "validate_only {validate_only}"
        );
        assert_eq!(metadata_ids(&node, &["large", "small"]).await[0].1, 3);
        assert_eq!(metadata_ids(&node, &["small"]).await[0].1, 3);
    }
    // A name given twice is not counted (Kafka's controller is not passed it): 12,001 partitions asked for, 1
    // counted.
    let answers = create(
        &node,
        7,
        true,
        vec![
            creatable("twice", 6_000, &[]),
            creatable("twice", 6_000, &[]),
            creatable("small", 1, &[]),
        ],
    )
    .await;
    assert_eq!(
        answered(answers)
            .into_iter()
            .map(|(name, code, _)| (name, code))
            .collect::<Vec<_>>(),
        vec![("small".to_owned(), 0), ("twice".to_owned(), INVALID_REQUEST)]
    );
    // 9,998 partitions, the topic and a config: 10,000 records, within both bounds.
    let answers = create(
        &node,
        7,
        true,
        vec![creatable("large", 9_998, &[("retention.ms", "1000")])],
    )
    .await;
    assert_eq!(answers[0].error_code, 0, "{:?}", answers[0].error_message);
    assert_eq!(answers[0].num_partitions, 9_998);
}

#[tokio::test]
async fn names_alike_but_for_dot_and_underscore_collide_only_with_a_topic_that_existed_before() {
    let node = broker().await;
    // Two new names alike in one request are both created, as Kafka's controller checks existing topics only.
    let answers = create(
        &node,
        7,
        false,
        vec![
            creatable("daily.totals", 1, &[]),
            creatable("daily_totals", 1, &[]),
            creatable("hourly.totals.eu", 1, &[]),
        ],
    )
    .await;
    assert_eq!(
        answers.iter().map(|answer| answer.error_code).collect::<Vec<_>>(),
        vec![0, 0, 0]
    );
    // Afterwards another spelling collides, and each existing one is taken: TOPIC_ALREADY_EXISTS wins, as in
    // Kafka, so a client creating a topic if absent goes on.
    let answers = create(
        &node,
        7,
        true,
        vec![
            creatable("daily.totals", 1, &[]),
            creatable("daily_totals", 1, &[]),
            creatable("weekly.totals", 1, &[]),
            creatable("hourly_totals.eu", 1, &[]),
        ],
    )
    .await;
    let codes: Vec<(String, i16, Option<String>)> = answers
        .into_iter()
        .map(|answer| {
            (
                answer.name.to_string(),
                answer.error_code,
                answer.error_message.map(|message| message.to_string()),
            )
        })
        .collect();
    assert_eq!(codes[0].1, TOPIC_ALREADY_EXISTS, "{codes:?}");
    assert_eq!(codes[1].1, TOPIC_ALREADY_EXISTS, "{codes:?}");
    assert_eq!(codes[2].1, 0, "{codes:?}");
    assert_eq!(codes[3].1, INVALID_TOPIC, "{codes:?}");
    assert_eq!(
        codes[3].2.as_deref(),
        Some("Topic 'hourly_totals.eu' collides with existing topic: hourly.totals.eu")
    );
}
