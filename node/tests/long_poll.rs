//! Long-polling fetches (`max_wait_ms`, `min_bytes`): a fetch with nothing to read waits, and is answered as soon
//! as its own partition takes records — not woken by appends to other partitions (issue 54).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use node::{Node, NodeConfig};
use record_format::BatchBuilder;
use storage_config::{Backend, StorageConfig};

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

async fn produce(node: &Node, topic: &str, partition: i32) {
    let mut builder = BatchBuilder::new();
    builder.add(1_000, Some(b"k"), Some(b"v"), &[]);
    let mut data = produce_request::PartitionProduceData::default();
    data.index = partition;
    data.records = Some(builder.build().unwrap().as_bytes().clone());
    let mut topic_data = produce_request::TopicProduceData::default();
    topic_data.name = TopicName(s(topic));
    topic_data.partition_data = vec![data];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.topic_data = vec![topic_data];
    let answer = node.produce(request, 8).await;
    assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
}

/// Waits (up to 10 s) until a long poll is parked on `topic`'s `partition`.
async fn until_parked(node: &Node, topic: &str, partition: i32) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while node.long_polls_waiting_on(topic, partition) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no long poll parked on {topic}-{partition}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A long poll on `topic`'s `partition` from offset 0: up to 30 s for one byte.
fn long_poll(topic: &str, partition: i32) -> FetchRequest {
    let mut wanted_partition = fetch_request::FetchPartition::default();
    wanted_partition.partition = partition;
    wanted_partition.partition_max_bytes = 1 << 20;
    let mut wanted = fetch_request::FetchTopic::default();
    wanted.topic = TopicName(s(topic));
    wanted.partitions = vec![wanted_partition];
    let mut request = FetchRequest::default();
    request.max_wait_ms = 30_000;
    request.min_bytes = 1;
    request.max_bytes = 1 << 20;
    request.topics = vec![wanted];
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_waits_through_other_partitions_appends_and_is_answered_by_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = NodeConfig::new(StorageConfig::for_backend(Backend::Memory, dir.path()));
    config.topics = vec![("orders".to_owned(), 2)];
    let node = Arc::new(Node::open(config, ("localhost".to_owned(), 9092)).await.unwrap());
    let waiting = {
        let node = node.clone();
        tokio::spawn(async move { node.fetch(long_poll("orders", 0), 12).await })
    };
    until_parked(&node, "orders", 0).await;
    // The other partition's appends leave it waiting (that they do not even wake it is `wakeups`' unit test).
    for _ in 0..3 {
        produce(&node, "orders", 1).await;
    }
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(
        !waiting.is_finished(),
        "answered after another partition's append"
    );
    assert_eq!(node.long_polls_waiting_on("orders", 0), 1, "still parked");
    produce(&node, "orders", 0).await;
    let answer = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("answered when its partition took a record")
        .unwrap();
    let data = &answer.responses[0].partitions[0];
    assert_eq!(data.error_code, 0);
    assert_eq!(data.high_watermark, 1);
    assert!(data.records.as_ref().is_some_and(|records| !records.is_empty()));
}

/// As Kafka's `fetchMessages` and `DelayedFetch`: a partition that cannot be read answers the whole fetch at once —
/// an unknown topic at the first read, a topic deleted while the fetch waits when it goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_answers_at_once_when_a_partition_is_unknown_or_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = NodeConfig::new(StorageConfig::for_backend(Backend::Memory, dir.path()));
    config.topics = vec![("orders".to_owned(), 1)];
    config.auto_create_topics = false;
    let node = Arc::new(Node::open(config, ("localhost".to_owned(), 9092)).await.unwrap());
    let unknown = tokio::time::timeout(Duration::from_secs(10), node.fetch(long_poll("nowhere", 0), 12))
        .await
        .expect("answered at once, not after 30 s");
    assert_eq!(
        unknown.responses[0].partitions[0].error_code,
        kafka_types::KafkaError::UnknownTopicOrPartition.code()
    );
    let waiting = {
        let node = node.clone();
        tokio::spawn(async move { node.fetch(long_poll("orders", 0), 12).await })
    };
    until_parked(&node, "orders", 0).await;
    node.delete_topic("orders").await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("answered when its topic was deleted")
        .unwrap();
    assert_eq!(
        answer.responses[0].partitions[0].error_code,
        kafka_types::KafkaError::UnknownTopicOrPartition.code()
    );
}
