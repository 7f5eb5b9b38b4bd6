//! Produce: each partition's records go through `PartitionLog::append_as_leader` (CLIENT origin: one batch, CRC,
//! record checks, producer-state rules), are made as durable as the storage config says, and only then move the
//! high watermark and get acknowledged.
//!
//! Every partition of a request is appended first, one after another; then the appended partitions are made
//! durable and replicated concurrently (one task each), so that their flushes overlap: on sled and RocksDB the
//! syncs of one request share a store-wide sync (`storage::flush_group`), on storage-fs the partitions' fsyncs run
//! side by side on the blocking pool.

use kafka_protocol::messages::produce_response::BatchIndexAndErrorMessage;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::*;
use kafka_types::{KafkaError, ProducerEpoch, ProducerId, TransactionalId};
use partition_log::LogError;
use producer_state::AppendOrigin;
use record_format::{BatchIter, DecodeError, TimestampType};
use storage::PartitionId;

use std::sync::Arc;

use crate::node::{Node, PartitionSlot};

/// Appends every partition's batch and answers each partition's offset or error.
pub async fn produce(node: &Node, request: ProduceRequest, version: i16) -> ProduceResponse {
    let mut response = ProduceResponse::default();
    // Kafka refuses the whole request, every partition, for an `acks` it does not know.
    let acks_known = matches!(request.acks, -1..=1);
    let transactional_id = request.transactional_id.as_ref().map(|id| id.as_str().to_owned());
    // Appended partitions still to be made durable: (topic's index, partition's index, slot).
    let mut unacknowledged = Vec::new();
    for topic in request.topic_data {
        let mut topic_response = TopicProduceResponse::default();
        topic_response.name = topic.name.clone();
        for partition in topic.partition_data {
            let mut answer = PartitionProduceResponse::default();
            answer.index = partition.index;
            answer.base_offset = -1;
            answer.log_append_time_ms = -1;
            answer.log_start_offset = -1;
            let target = (topic.name.as_str(), partition.index);
            let outcome = if acks_known {
                append(node, target, transactional_id.as_deref(), partition.records).await
            } else {
                Err(KafkaError::InvalidRequiredAcks.into())
            };
            match outcome {
                Ok(appended_at) => {
                    answer.base_offset = appended_at.base_offset;
                    answer.log_start_offset = appended_at.log_start_offset;
                    answer.log_append_time_ms = appended_at.log_append_time;
                    let position = (response.responses.len(), topic_response.partition_responses.len());
                    unacknowledged.push((position, appended_at.to_acknowledge));
                }
                Err(refusal) => refuse(&mut answer, refusal, version),
            }
            topic_response.partition_responses.push(answer);
        }
        response.responses.push(topic_response);
    }
    // Made durable and replicated concurrently; each answered with the log start after it, or refused.
    let acknowledgements: Vec<_> = unacknowledged
        .into_iter()
        .map(|(position, slot)| {
            let acknowledged = tokio::spawn(acknowledge(slot.clone(), node.now_ms()));
            (position, slot, acknowledged)
        })
        .collect();
    for ((topic, partition), slot, acknowledgement) in acknowledgements {
        let mut outcome = acknowledgement
            .await
            .unwrap_or_else(|_| Err(KafkaError::KafkaStorageError.into()));
        let Some((name, index)) = response.responses.get(topic).and_then(|answered| {
            let index = answered.partition_responses.get(partition)?.index;
            Some((answered.name.clone(), index))
        }) else {
            continue;
        };
        // Made durable and replicated (or refused): fetches waiting on the partition read it again.
        node.wake_fetches(name.as_str(), index);
        if let Err(refusal) = &mut outcome {
            // No log any more: the topic deleted since the append (its records went with it), or offline.
            if refusal.error == KafkaError::KafkaStorageError {
                refusal.error = node.missing_log_error(name.as_str(), index, &slot).await;
            }
        }
        let Some(answer) = response
            .responses
            .get_mut(topic)
            .and_then(|topic| topic.partition_responses.get_mut(partition))
        else {
            continue;
        };
        match outcome {
            Ok(log_start_offset) => answer.log_start_offset = log_start_offset,
            Err(refusal) => {
                answer.base_offset = -1;
                answer.log_append_time_ms = -1;
                refuse(answer, refusal, version);
            }
        }
    }
    response
}

/// Writes a refusal into a partition's answer.
fn refuse(answer: &mut PartitionProduceResponse, refusal: Refusal, version: i16) {
    answer.error_code = refusal.error.code();
    answer.log_start_offset = refusal.log_start_offset;
    if version >= 8 {
        // The field exists from v8; an older response that sets it does not encode.
        answer.record_errors = refusal
            .record_errors
            .iter()
            .map(|&index| {
                let mut error = BatchIndexAndErrorMessage::default();
                error.batch_index = index;
                error
            })
            .collect();
    }
}

/// Makes a partition's appended records as durable as the storage config says and, with acks=all, replicated
/// (the followers, if any, catch up and the high watermark follows the slowest). Answers the log start offset
/// after it.
async fn acknowledge(slot: Arc<PartitionSlot>, now_ms: i64) -> Result<i64, Refusal> {
    let mut guard = slot.lock().await;
    let replicas = guard.as_mut().ok_or(KafkaError::KafkaStorageError)?;
    let log_start_offset = replicas.leader.log_start_offset();
    replicas
        .leader
        .flush_acknowledged()
        .await
        .map_err(|error| stored_refusal(&error, log_start_offset))?;
    replicas
        .replicate(now_ms)
        .await
        .map_err(|error| stored_refusal(&error, log_start_offset))?;
    Ok(replicas.leader.log_start_offset())
}

/// A refusal of the log: Kafka answers the log start offset beside every refusal the log itself made (sequence,
/// epoch, record checks), and −1 beside a corrupt batch or a storage failure.
fn stored_refusal(error: &LogError, log_start_offset: i64) -> Refusal {
    let error = log_error(error);
    let reached_the_log = !matches!(error, KafkaError::CorruptMessage | KafkaError::KafkaStorageError);
    Refusal {
        error,
        log_start_offset: if reached_the_log { log_start_offset } else { -1 },
        record_errors: Vec::new(),
    }
}

/// Where an accepted batch went.
struct Appended {
    base_offset: i64,
    log_start_offset: i64,
    /// −1, or for a duplicate the original batch's max timestamp (as Kafka answers it).
    log_append_time: i64,
    /// The partition, whose records are still to be made durable and replicated: a duplicate's too, since the
    /// original it repeats may not be yet (its request may still be appending other partitions).
    to_acknowledge: Arc<PartitionSlot>,
}

/// A refused batch: the error, and the log start offset Kafka puts beside it (−1 when the batch never reached
/// the log: no such partition, too large, corrupt, storage down, not part of the transaction).
struct Refusal {
    error: KafkaError,
    log_start_offset: i64,
    /// The batch-relative indexes of the records that caused it (INVALID_TIMESTAMP, INVALID_RECORD), as Kafka
    /// lists them.
    record_errors: Vec<i32>,
}

impl From<KafkaError> for Refusal {
    fn from(error: KafkaError) -> Self {
        Refusal {
            error,
            log_start_offset: -1,
            record_errors: Vec::new(),
        }
    }
}

/// One partition's append, under its topic's settings (`max.message.bytes`, the timestamp bounds and type).
async fn append(
    node: &Node,
    (topic, partition): (&str, i32),
    transactional_id: Option<&str>,
    records: Option<bytes::Bytes>,
) -> Result<Appended, Refusal> {
    let slot = node
        .partition(topic, partition)
        .await
        .ok_or(KafkaError::UnknownTopicOrPartition)?;
    let settings = node.topic_settings(topic).await;
    let records = records.ok_or(KafkaError::InvalidRecord)?;
    let mut batches = Vec::new();
    // Length and magic here; the CRC and record checks are `append_as_leader`'s (once).
    for batch in BatchIter::unverified(records) {
        match batch {
            Ok(batch) => batches.push(batch.batch),
            Err(record_format::SegmentError::Corrupt { error, .. }) => {
                return Err(decode_error(Some(&error)).into())
            }
            Err(_) => return Err(KafkaError::UnknownServerError.into()),
        }
    }
    // Record format v2: exactly one batch per partition (Kafka refuses none or several before its log).
    if batches.len() != 1 {
        return Err(KafkaError::InvalidRecord.into());
    }
    if batches
        .iter()
        .any(|batch| batch.size() > settings.max_message_bytes)
    {
        return Err(KafkaError::MessageTooLarge.into());
    }
    if let (Some(first), Some(transactional_id)) = (batches.first(), transactional_id) {
        if first.is_transactional() {
            verify_transaction(node, transactional_id, first, (topic, partition)).await?;
        }
    }
    let mut guard = slot.lock().await;
    let Some(replicas) = guard.as_mut() else {
        drop(guard);
        return Err(node.missing_log_error(topic, partition, &slot).await.into());
    };
    let log_start_offset = replicas.leader.log_start_offset();
    replicas
        .leader
        .set_segment_policy(settings.segment_bytes, Some(settings.segment_ms));
    let mut log_append_time = None;
    if let Some(batch) = batches.first_mut() {
        // Kafka's record validation, each record's first error only: a key (compacted topics), then the
        // timestamp; INVALID_TIMESTAMP if any record's first error is its timestamp, else INVALID_RECORD.
        let keyless = if settings.compacted {
            records_without_key(batch)
        } else {
            Vec::new()
        };
        let far: Vec<i32> = if settings.log_append_time {
            Vec::new()
        } else {
            records_far_from_now(node, &settings, batch)
                .into_iter()
                .filter(|index| !keyless.contains(index))
                .collect()
        };
        if !keyless.is_empty() || !far.is_empty() {
            let error = if far.is_empty() {
                KafkaError::InvalidRecord
            } else {
                KafkaError::InvalidTimestamp
            };
            let mut record_errors: Vec<i32> = keyless.into_iter().chain(far).collect();
            record_errors.sort_unstable();
            return Err(Refusal {
                error,
                log_start_offset,
                record_errors,
            });
        }
        if settings.log_append_time {
            // The broker's clock replaces the producer's; the client's CRC is checked before the batch is
            // re-stamped (a corrupt batch stays corrupt, for the log to refuse).
            if !batch.is_control() && batch.verify_crc().is_ok() {
                let now = node.now_ms();
                batch.set_log_append_time(now);
                log_append_time = Some(now);
            }
        }
    }
    let outcome = replicas
        .leader
        .append_as_leader(batches, AppendOrigin::Client, crate::config::TRANSACTION_VERSION)
        .await
        .map_err(|error| stored_refusal(&error, log_start_offset))?;
    Ok(Appended {
        base_offset: outcome.first_offset,
        log_start_offset: replicas.leader.log_start_offset(),
        log_append_time: outcome.original_max_timestamp.or(log_append_time).unwrap_or(-1),
        to_acknowledge: slot.clone(),
    })
}

/// The indexes of a CreateTime batch's records whose timestamps lie further ahead of the node's clock than
/// `message.timestamp.after.max.ms` or further behind than `message.timestamp.before.max.ms` allow (Kafka's
/// record validation). Control batches and LogAppendTime batches carry no client timestamp to check; records that
/// do not decode are left to the log's own checks.
fn records_far_from_now(
    node: &Node,
    settings: &topic_config::TopicSettings,
    batch: &record_format::RecordBatch,
) -> Vec<i32> {
    let (ahead, behind) = (settings.timestamp_after_max_ms, settings.timestamp_before_max_ms);
    if batch.is_control() || batch.attributes().timestamp_type() != TimestampType::CreateTime {
        return Vec::new();
    }
    let now = node.now_ms();
    let too_far =
        |timestamp: i64| timestamp.saturating_sub(now) > ahead || now.saturating_sub(timestamp) > behind;
    // The batch's maximum bounds every record from above: with no lower limit, it alone decides.
    if behind == i64::MAX && !too_far(batch.max_timestamp()) {
        return Vec::new();
    }
    records_where(batch, |record| too_far(record.timestamp))
}

/// The indexes of `batch`'s records for which `refused` holds. Kafka checks the CRC first: a corrupt batch (or
/// one whose records do not decode) is left to the log, which answers CORRUPT_MESSAGE or INVALID_RECORD. The CRC
/// is checked here only when a record is refused — the common batch, all of whose records pass, has its CRC
/// checked once, by the log.
fn records_where(
    batch: &record_format::RecordBatch,
    mut refused: impl FnMut(&record_format::Record<'_>) -> bool,
) -> Vec<i32> {
    let Ok(records) = batch.records() else {
        return Vec::new();
    };
    let found: Vec<i32> = records
        .iter()
        .enumerate()
        .filter_map(|(index, record)| {
            let record = record.ok()?;
            refused(&record).then(|| i32::try_from(index).unwrap_or(i32::MAX))
        })
        .collect();
    if found.is_empty() || batch.verify_crc().is_err() {
        return Vec::new();
    }
    found
}

/// The indexes of a batch's records without a key: a compacted topic refuses them (Kafka's
/// "Compacted topic cannot accept message without key"). Control batches are not looked into (the log refuses a
/// client's); a batch whose CRC fails is left to the log (CORRUPT_MESSAGE).
fn records_without_key(batch: &record_format::RecordBatch) -> Vec<i32> {
    if batch.is_control() {
        return Vec::new();
    }
    records_where(batch, |record| record.key.is_none())
}

/// Kafka's transaction verification (KIP-890 part 1), before the log is touched: the coordinator's
/// [`txn_coordinator::Coordinator::verify_transactional_append`] decides.
async fn verify_transaction(
    node: &Node,
    transactional_id: &str,
    batch: &record_format::RecordBatch,
    (topic, partition): (&str, i32),
) -> Result<(), KafkaError> {
    let id = u32::try_from(partition)
        .ok()
        .and_then(|index| PartitionId::new(topic, index).ok())
        .ok_or(KafkaError::UnknownTopicOrPartition)?;
    let mut coordinator = node.coordinator.lock().await;
    coordinator.coordinator().verify_transactional_append(
        &TransactionalId(transactional_id.to_owned()),
        ProducerId(batch.producer_id()),
        ProducerEpoch(batch.producer_epoch()),
        &id,
    )
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
