//! The node's answers to request values, without a socket.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_types::KafkaError;
use node::{Node, NodeConfig};
use record_format::BatchBuilder;
use storage_config::{Backend, StorageConfig};

async fn node() -> Node {
    let storage = StorageConfig::for_backend(Backend::Memory, std::path::Path::new(""));
    let mut config = NodeConfig::new(storage);
    config.topics = vec![("orders".to_owned(), 1)];
    Node::open(config, ("localhost".to_owned(), 9092)).await.unwrap()
}

fn produce_one() -> ProduceRequest {
    let mut builder = BatchBuilder::new().producer(7, 0, 0);
    builder.add(0, None, Some(b"value"), &[]);
    let mut partition = PartitionProduceData::default();
    partition.index = 0;
    partition.records = Some(builder.build().unwrap().as_bytes().clone());
    let mut topic = TopicProduceData::default();
    topic.name = TopicName(StrBytes::from_static_str("orders"));
    topic.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.topic_data = vec![topic];
    request
}

fn error_of(response: &kafka_protocol::messages::ProduceResponse) -> i16 {
    response.responses[0].partition_responses[0].error_code
}

#[tokio::test]
async fn a_produce_to_a_mirrored_partition_is_answered_read_only_topic() {
    let node = node().await;
    let slot = node.partition("orders", 0).await.unwrap();
    slot.lock()
        .await
        .as_mut()
        .unwrap()
        .leader
        .set_read_only(true)
        .await
        .unwrap();
    let response = node.produce(produce_one(), 8).await;
    assert_eq!(error_of(&response), KafkaError::ReadOnlyTopic.code());
    slot.lock()
        .await
        .as_mut()
        .unwrap()
        .leader
        .set_read_only(false)
        .await
        .unwrap();
    let response = node.produce(produce_one(), 8).await;
    assert_eq!(error_of(&response), 0);
    assert_eq!(response.responses[0].partition_responses[0].base_offset, 0);
}
