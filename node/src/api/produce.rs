//! Produce: each partition's records go through `PartitionLog::append_as_leader` (CLIENT origin: one batch, CRC,
//! record checks, producer-state rules), are made as durable as the storage config says, and only then move the
//! high watermark and get acknowledged.

use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::*;
use kafka_types::{KafkaError, TransactionVersion};
use partition_log::LogError;
use producer_state::AppendOrigin;
use record_format::{BatchIter, DecodeError};

use crate::node::Node;

/// Appends every partition's batch and answers each partition's offset or error.
pub async fn produce(node: &Node, request: ProduceRequest, _version: i16) -> ProduceResponse {
    let mut response = ProduceResponse::default();
    let mut appended = false;
    for topic in request.topic_data {
        let mut topic_response = TopicProduceResponse::default();
        topic_response.name = topic.name.clone();
        for partition in topic.partition_data {
            let mut answer = PartitionProduceResponse::default();
            answer.index = partition.index;
            answer.base_offset = -1;
            answer.log_append_time_ms = -1;
            answer.log_start_offset = -1;
            match append(node, topic.name.as_str(), partition.index, partition.records).await {
                Ok((base_offset, log_start_offset)) => {
                    answer.base_offset = base_offset;
                    answer.log_start_offset = log_start_offset;
                    appended = true;
                }
                Err(error) => answer.error_code = error.code(),
            }
            topic_response.partition_responses.push(answer);
        }
        response.responses.push(topic_response);
    }
    if appended {
        node.notify_appended();
    }
    response
}

/// One partition's append: `(base offset, log start offset)` or the Kafka error to answer.
async fn append(
    node: &Node,
    topic: &str,
    partition: i32,
    records: Option<bytes::Bytes>,
) -> Result<(i64, i64), KafkaError> {
    let slot = node
        .partition(topic, partition)
        .await
        .ok_or(KafkaError::UnknownTopicOrPartition)?;
    let records = records.ok_or(KafkaError::InvalidRecord)?;
    let mut batches = Vec::new();
    // Length and magic here; the CRC and record checks are `append_as_leader`'s (once).
    for batch in BatchIter::unverified(records) {
        match batch {
            Ok(batch) => batches.push(batch.batch),
            Err(record_format::SegmentError::Corrupt { error, .. }) => {
                return Err(decode_error(Some(&error)))
            }
            Err(_) => return Err(KafkaError::UnknownServerError),
        }
    }
    let mut guard = slot.lock().await;
    let replicas = guard.as_mut().ok_or(KafkaError::KafkaStorageError)?;
    let outcome = replicas
        .leader
        .append_as_leader(batches, AppendOrigin::Client, TransactionVersion::V0)
        .await
        .map_err(|error| log_error(&error))?;
    if !outcome.duplicate {
        replicas
            .leader
            .flush_acknowledged()
            .await
            .map_err(|error| log_error(&error))?;
        // acks=all: the followers (if any) catch up, and the high watermark follows the slowest.
        replicas
            .replicate(node.now_ms())
            .await
            .map_err(|error| log_error(&error))?;
    }
    Ok((outcome.first_offset, replicas.leader.log_start_offset()))
}

/// The Kafka error of a refused append or read.
pub(crate) fn log_error(error: &LogError) -> KafkaError {
    match error {
        LogError::CorruptBatch { source, .. } => decode_error(Some(source)),
        LogError::Storage(_) | LogError::Offline { .. } | LogError::Recovery { .. } => {
            KafkaError::KafkaStorageError
        }
        LogError::OffsetOutOfRange { .. } => KafkaError::OffsetOutOfRange,
        other => other.kafka_error().unwrap_or(KafkaError::UnknownServerError),
    }
}

/// CORRUPT_MESSAGE for a checksum mismatch (Kafka's `CorruptRecordException`), INVALID_RECORD otherwise.
fn decode_error(error: Option<&DecodeError>) -> KafkaError {
    match error {
        Some(DecodeError::CrcMismatch { .. }) => KafkaError::CorruptMessage,
        _ => KafkaError::InvalidRecord,
    }
}
