//! WriteTxnMarkers: end-transaction markers a client writes itself — what `kafka-transactions abort` sends to
//! close a hanging transaction the coordinator no longer knows (its producer id, epoch and coordinator epoch taken
//! from DescribeProducers). Each marker goes through the partition's producer-state rules (an older coordinator
//! epoch is TRANSACTION_COORDINATOR_FENCED, a mirror partition READ_ONLY_TOPIC) and is acknowledged as the
//! coordinator's markers are: durable, replicated, the high watermark past it.

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::*;
use kafka_types::{KafkaError, NO_ERROR};

use super::produce::log_error;
use crate::node::Node;

/// WriteTxnMarkers: each marker written to each of its partitions, or why not.
pub async fn write_txn_markers(
    node: &Node,
    request: WriteTxnMarkersRequest,
    _version: i16,
) -> WriteTxnMarkersResponse {
    let mut response = WriteTxnMarkersResponse::default();
    for marker in request.markers {
        let mut result = WritableTxnMarkerResult::default();
        result.producer_id = marker.producer_id;
        for topic in &marker.topics {
            let mut topic_result = WritableTxnMarkerTopicResult::default();
            topic_result.name = topic.name.clone();
            for &index in &topic.partition_indexes {
                let written = write_one(node, &marker, topic.name.as_str(), index).await;
                let mut partition = WritableTxnMarkerPartitionResult::default();
                partition.partition_index = index;
                partition.error_code = written.err().map_or(NO_ERROR, KafkaError::code);
                topic_result.partitions.push(partition);
            }
            result.topics.push(topic_result);
        }
        response.markers.push(result);
    }
    response
}

async fn write_one(
    node: &Node,
    marker: &write_txn_markers_request::WritableTxnMarker,
    topic: &str,
    index: i32,
) -> Result<(), KafkaError> {
    let slot = node
        .partition(topic, index)
        .await
        .ok_or(KafkaError::UnknownTopicOrPartition)?;
    let mut guard = slot.lock().await;
    let replicas = guard.as_mut().ok_or(KafkaError::KafkaStorageError)?;
    let timestamp = node.now_ms();
    replicas
        .leader
        .write_marker(
            marker.transaction_result,
            marker.producer_id.0,
            marker.producer_epoch,
            marker.coordinator_epoch,
            timestamp,
        )
        .await
        .map_err(|error| log_error(&error))?;
    node.acknowledge_marker(replicas, timestamp)
        .await
        .map_err(|error| log_error(&error))
}
