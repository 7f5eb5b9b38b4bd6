//! Topics' configs through the node: recorded with the topic, applied to produce, kept across a restart.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use node::{Node, NodeConfig};
use record_format::BatchBuilder;
use storage_config::{Backend, StorageConfig};
use topic_config::{ConfigSource, Overrides};

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

async fn open(dir: &std::path::Path) -> Node {
    let config = NodeConfig::new(StorageConfig::for_backend(Backend::Fs, dir));
    Node::open(config, ("localhost".to_owned(), 9092)).await.unwrap()
}

fn create(name: &str, configs: &[(&str, Option<&str>)]) -> CreateTopicsRequest {
    let mut topic = create_topics_request::CreatableTopic::default();
    topic.name = TopicName(s(name));
    topic.num_partitions = 1;
    topic.replication_factor = 1;
    topic.configs = configs
        .iter()
        .map(|&(name, value)| {
            let mut config = create_topics_request::CreatableTopicConfig::default();
            config.name = s(name);
            config.value = value.map(s);
            config
        })
        .collect();
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![topic];
    request
}

fn produce(topic: &str, value_bytes: usize) -> ProduceRequest {
    let mut builder = BatchBuilder::new();
    let value = vec![b'x'; value_bytes];
    builder.add(0, None, Some(&value), &[]);
    let mut partition = produce_request::PartitionProduceData::default();
    partition.records = Some(builder.build().unwrap().as_bytes().clone());
    let mut data = produce_request::TopicProduceData::default();
    data.name = TopicName(s(topic));
    data.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.topic_data = vec![data];
    request
}

async fn produce_error(node: &Node, topic: &str, value_bytes: usize) -> i16 {
    let response = node.produce(produce(topic, value_bytes), 8).await;
    response.responses[0].partition_responses[0].error_code
}

#[tokio::test]
async fn a_topics_configs_are_applied_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let node = open(dir.path()).await;
    let answer = node
        .create_topics(
            create(
                "small",
                &[
                    ("max.message.bytes", Some("200")),
                    ("retention.ms", Some("60000")),
                ],
            ),
            4,
        )
        .await;
    assert_eq!(answer.topics[0].error_code, 0);
    assert_eq!(produce_error(&node, "small", 10).await, 0);
    assert_eq!(
        produce_error(&node, "small", 500).await,
        10,
        "MESSAGE_TOO_LARGE under the topic's limit"
    );
    node.close().await.unwrap();

    let node = open(dir.path()).await;
    assert_eq!(
        produce_error(&node, "small", 500).await,
        10,
        "the limit is durable"
    );
    let described = node
        .describe_topic_configs("small", Some(&["retention.ms", "max.message.bytes"]))
        .await
        .unwrap();
    let values: Vec<(&str, &str, ConfigSource)> = described
        .iter()
        .map(|d| (d.def.name, d.value.value.as_str(), d.value.source))
        .collect();
    assert_eq!(
        values,
        [
            ("max.message.bytes", "200", ConfigSource::Topic),
            ("retention.ms", "60000", ConfigSource::Topic)
        ]
    );
    node.alter_topic_configs("small", |_| Ok(Overrides::default()), false)
        .await
        .unwrap();
    assert_eq!(
        produce_error(&node, "small", 500).await,
        0,
        "back to the broker's limit"
    );
    node.close().await.unwrap();
}

#[tokio::test]
async fn a_refused_config_creates_nothing_and_names_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let node = open(dir.path()).await;
    for (configs, error, needle) in [
        (vec![("cleanup.policy", Some("bogus"))], 40, "cleanup.policy"),
        (vec![("retention.mss", Some("1"))], 40, "retention.mss"),
        (vec![("compression.type", Some("zstd"))], 40, "recompression"),
        (vec![("retention.ms", None)], 40, "retention.ms"),
    ] {
        let answer = node.create_topics(create("refused", &configs), 4).await;
        assert_eq!(answer.topics[0].error_code, error, "{configs:?}");
        let message = answer.topics[0].error_message.as_deref().unwrap_or_default();
        assert!(message.contains(needle), "{message}");
        assert!(!node.topic_partitions().await.contains_key("refused"));
    }
    node.close().await.unwrap();
}

#[tokio::test]
async fn a_log_append_time_topic_stamps_batches_with_the_brokers_clock() {
    let dir = tempfile::tempdir().unwrap();
    let node = open(dir.path()).await;
    let answer = node
        .create_topics(
            create("stamped", &[("message.timestamp.type", Some("LogAppendTime"))]),
            4,
        )
        .await;
    assert_eq!(answer.topics[0].error_code, 0);
    let before = node.now_ms();
    let response = node.produce(produce("stamped", 10), 8).await;
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!(partition.error_code, 0);
    assert!(
        partition.log_append_time_ms >= before,
        "{}",
        partition.log_append_time_ms
    );
    let slot = node.partition("stamped", 0).await.unwrap();
    let guard = slot.lock().await;
    let log = &guard.as_ref().unwrap().leader;
    let batches = log.read_for_replica(0, 1 << 20).await.unwrap();
    assert_eq!(batches.len(), 1);
    let batch = &batches[0];
    batch.verify_crc().unwrap();
    assert_eq!(
        batch.attributes().timestamp_type(),
        record_format::TimestampType::LogAppendTime
    );
    assert_eq!(batch.max_timestamp(), partition.log_append_time_ms);
    drop(guard);
    node.close().await.unwrap();
}

#[tokio::test]
async fn ten_thousand_configs_in_one_request_get_one_clear_answer_and_change_nothing_refused() {
    let dir = tempfile::tempdir().unwrap();
    let node = open(dir.path()).await;
    let unknown: Vec<String> = (0..10_000).map(|n| format!("no.such.config.{n}")).collect();
    let unknown: Vec<(&str, Option<&str>)> = unknown.iter().map(|name| (name.as_str(), Some("1"))).collect();
    let answer = node.create_topics(create("many", &unknown), 4).await;
    assert_eq!(answer.topics[0].error_code, 40, "INVALID_CONFIG");
    let message = answer.topics[0].error_message.as_deref().unwrap_or_default();
    assert!(
        message.contains("no.such.config.0"),
        "names the first unknown config: {message}"
    );
    assert!(
        message.len() < 1_000,
        "one config named, not ten thousand: {} bytes",
        message.len()
    );
    assert!(!node.topic_partitions().await.contains_key("many"));

    // The same config 10,000 times: created, as Kafka does (the differential suite checks the answer).
    let repeated = vec![("retention.ms", Some("3600000")); 10_000];
    let answer = node.create_topics(create("repeated", &repeated), 4).await;
    assert_eq!(answer.topics[0].error_code, 0);

    // An IncrementalAlterConfigs naming one config 10,000 times is refused whole (Kafka's INVALID_REQUEST), the
    // name said once.
    let mut resource = incremental_alter_configs_request::AlterConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = s("repeated");
    let mut set = incremental_alter_configs_request::AlterableConfig::default();
    set.name = s("retention.ms");
    set.value = Some(s("7200000"));
    resource.configs = vec![set; 10_000];
    let mut request = IncrementalAlterConfigsRequest::default();
    request.resources = vec![resource];
    let answer = node.incremental_alter_configs(request, 1).await;
    assert_eq!(answer.responses[0].error_code, 42, "INVALID_REQUEST");
    assert_eq!(
        answer.responses[0].error_message.as_deref(),
        Some("Error due to duplicate config keys : retention.ms")
    );
    let configs = node.topic_overrides("repeated").await.unwrap();
    assert_eq!(
        configs.get("retention.ms").map(String::as_str),
        Some("3600000"),
        "nothing changed"
    );
    node.close().await.unwrap();
}
