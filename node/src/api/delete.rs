//! DeleteRecords: each partition's log start offset moves up to the offset asked (−1: the high watermark), as
//! retention would move it; Kafka's Streams purges its repartition topics so. Refused beyond the high watermark
//! or below −1 (OFFSET_OUT_OF_RANGE); an offset at or below the current start changes nothing. Followers take the
//! new start when they next replicate.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::*;
use kafka_types::KafkaError;

use super::produce::log_error;
use crate::node::Node;

/// Kafka's `DeleteRecordsRequest.HIGH_WATERMARK`: delete everything below the high watermark.
const HIGH_WATERMARK: i64 = -1;

/// Moves every named partition's log start offset; answers each one's new start (its low watermark) or error.
pub async fn delete_records(
    node: &Node,
    request: DeleteRecordsRequest,
    _version: i16,
) -> DeleteRecordsResponse {
    let mut response = DeleteRecordsResponse::default();
    for topic in request.topics {
        let mut topic_result = DeleteRecordsTopicResult::default();
        topic_result.name = topic.name.clone();
        for partition in topic.partitions {
            let mut result = DeleteRecordsPartitionResult::default();
            result.partition_index = partition.partition_index;
            result.low_watermark = -1;
            match delete(
                node,
                topic.name.as_str(),
                partition.partition_index,
                partition.offset,
            )
            .await
            {
                Ok(log_start) => result.low_watermark = log_start,
                Err(error) => result.error_code = error.code(),
            }
            topic_result.partitions.push(result);
        }
        response.topics.push(topic_result);
    }
    response
}

async fn delete(node: &Node, topic: &str, partition: i32, offset: i64) -> Result<i64, KafkaError> {
    let slot = node
        .partition(topic, partition)
        .await
        .ok_or(KafkaError::UnknownTopicOrPartition)?;
    let mut guard = slot.lock().await;
    let replicas = guard.as_mut().ok_or(KafkaError::KafkaStorageError)?;
    let target = match offset {
        HIGH_WATERMARK => replicas.leader.high_watermark(),
        offset if offset < 0 => return Err(KafkaError::OffsetOutOfRange),
        offset => offset,
    };
    let log_start = replicas
        .leader
        .delete_records_before(target)
        .await
        .map_err(|error| log_error(&error))?;
    replicas
        .replicate(node.now_ms())
        .await
        .map_err(|error| log_error(&error))?;
    Ok(log_start)
}
