//! What a client can observe in an answer, as a normalised JSON value (see [`crate::session`] for what is
//! normalised and why).

use kafka_protocol::messages::*;
use record_format::{BatchIter, RecordBatch};
use serde_json::{json, Value};

use crate::session::Session;

/// Bytes as a client sees them: text when they are UTF-8 and short, else their length and first bytes in hex.
pub fn bytes(value: Option<&[u8]>) -> Value {
    match value {
        None => Value::Null,
        Some(data) if data.len() <= 64 => match std::str::from_utf8(data) {
            Ok(text) => json!(text),
            Err(_) => json!(format!("hex:{}", hex(data))),
        },
        Some(data) => json!(format!("{} bytes, first hex:{}", data.len(), hex(&data[..16]))),
    }
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// One fetched batch with its records.
fn batch(session: &mut Session, batch: &RecordBatch) -> Value {
    let attributes = batch.attributes();
    let records: Vec<Value> = match batch.records() {
        Ok(records) => records
            .iter()
            .map(|record| match record {
                Ok(record) => json!({
                    "offset": record.offset,
                    "timestamp": record.timestamp,
                    "key": bytes(record.key),
                    "value": bytes(record.value),
                    "headers": record
                        .headers
                        .iter()
                        .map(|header| json!([bytes(Some(header.key)), bytes(header.value)]))
                        .collect::<Vec<_>>(),
                }),
                Err(error) => json!({ "undecodable record": error.to_string() }),
            })
            .collect(),
        Err(error) => vec![json!({ "undecodable records": error.to_string() })],
    };
    let mut records = records;
    let mut max_timestamp = json!(batch.max_timestamp());
    if batch.is_control() || attributes.timestamp_type() == record_format::TimestampType::LogAppendTime {
        // A marker, and a batch of a LogAppendTime topic, carry the broker's clock when it was written.
        max_timestamp = json!("broker clock");
        for record in &mut records {
            if let Some(timestamp) = record.get_mut("timestamp") {
                *timestamp = json!("broker clock");
            }
        }
    }
    json!({
        "base_offset": batch.base_offset(),
        "last_offset_delta": batch.last_offset_delta(),
        "partition_leader_epoch": batch.partition_leader_epoch(),
        "producer": session.producer(batch.producer_id()),
        "producer_epoch": batch.producer_epoch(),
        "base_sequence": batch.base_sequence(),
        "transactional": batch.is_transactional(),
        "control": batch.is_control(),
        "compression": format!("{:?}", attributes.compression()),
        "timestamp_type": format!("{:?}", attributes.timestamp_type()),
        "max_timestamp": max_timestamp,
        "records": records,
    })
}

/// The batches of a fetched records section, CRC-checked; a section that does not end on a batch boundary says
/// where it stopped.
pub fn records(session: &mut Session, section: Option<&bytes::Bytes>) -> Value {
    let Some(section) = section else {
        return Value::Null;
    };
    let mut out = Vec::new();
    for found in BatchIter::new(section.clone()) {
        match found {
            Ok(found) => out.push(batch(session, &found.batch)),
            Err(error) => {
                out.push(json!({ "undecodable batch": error.to_string() }));
                break;
            }
        }
    }
    json!(out)
}

/// A Fetch answer: the top-level error, and per partition its error, watermarks, aborted transactions and
/// batches.
pub fn fetch(session: &mut Session, answer: &FetchResponse) -> Value {
    let mut partitions = Vec::new();
    for topic in &answer.responses {
        for partition in &topic.partitions {
            let aborted: Value = match &partition.aborted_transactions {
                None => Value::Null,
                Some(list) => json!(list
                    .iter()
                    .map(|txn| json!({
                        "producer": session.producer(txn.producer_id.0),
                        "first_offset": txn.first_offset,
                    }))
                    .collect::<Vec<_>>()),
            };
            let records = records(session, partition.records.as_ref());
            partitions.push(json!({
                "topic": topic.topic.0.as_str(),
                "partition": partition.partition_index,
                "error": partition.error_code,
                "high_watermark": partition.high_watermark,
                "last_stable_offset": partition.last_stable_offset,
                "log_start_offset": partition.log_start_offset,
                "aborted_transactions": aborted,
                "preferred_read_replica": partition.preferred_read_replica.0,
                "batches": records,
            }));
        }
    }
    sort_by_partition(&mut partitions);
    json!({ "error": answer.error_code, "session_id": answer.session_id, "partitions": partitions })
}

/// A Produce answer: per partition its error, base offset, append time, log start and record errors.
pub fn produce(answer: &ProduceResponse) -> Value {
    let mut partitions = Vec::new();
    for topic in &answer.responses {
        for partition in &topic.partition_responses {
            partitions.push(json!({
                "topic": topic.name.0.as_str(),
                "partition": partition.index,
                "error": partition.error_code,
                "base_offset": partition.base_offset,
                "log_append_time": partition.log_append_time_ms,
                "log_start_offset": partition.log_start_offset,
                "record_errors": partition
                    .record_errors
                    .iter()
                    .map(|error| error.batch_index)
                    .collect::<Vec<_>>(),
            }));
        }
    }
    sort_by_partition(&mut partitions);
    json!(partitions)
}

/// Puts per-partition observations in (topic, partition) order: brokers answer in the order they like (Kafka
/// groups a request's partitions by topic in a hash map), and no client depends on it.
pub fn sort_by_partition(partitions: &mut [Value]) {
    partitions.sort_by(|a, b| {
        let key = |v: &Value| match v {
            Value::Array(fields) => (
                fields
                    .first()
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                fields.get(1).and_then(Value::as_i64).unwrap_or_default(),
            ),
            _ => (
                v["topic"].as_str().unwrap_or_default().to_owned(),
                v["partition"].as_i64().unwrap_or_default(),
            ),
        };
        key(a).cmp(&key(b))
    });
}

/// A ListOffsets answer: per partition its error, offset, timestamp and leader epoch.
pub fn list_offsets(answer: &ListOffsetsResponse) -> Value {
    let mut partitions = Vec::new();
    for topic in &answer.topics {
        for partition in &topic.partitions {
            partitions.push(json!({
                "topic": topic.name.0.as_str(),
                "partition": partition.partition_index,
                "error": partition.error_code,
                "offset": partition.offset,
                "timestamp": partition.timestamp,
                "leader_epoch": partition.leader_epoch,
            }));
        }
    }
    sort_by_partition(&mut partitions);
    json!(partitions)
}

/// A Metadata answer restricted to the topics `keep` accepts, sorted by name: errors, partition counts and
/// whether each partition has a leader and replicas; whether the answer names a controller and a cluster id.
pub fn metadata(answer: &MetadataResponse, keep: impl Fn(&str) -> bool) -> Value {
    let mut topics: Vec<Value> = answer
        .topics
        .iter()
        .filter(|topic| topic.name.as_ref().is_some_and(|name| keep(name.0.as_str())))
        .map(|topic| {
            json!({
                "name": topic.name.as_ref().map(|name| name.0.as_str()),
                "error": topic.error_code,
                // KIP-516 (v10+): the id itself is each broker's own draw.
                "has_topic_id": !topic.topic_id.is_nil(),
                "internal": topic.is_internal,
                "partitions": sorted(topic
                    .partitions
                    .iter()
                    .map(|partition| json!({
                        "partition": partition.partition_index,
                        "error": partition.error_code,
                        "has_leader": partition.leader_id.0 >= 0,
                        "leader_epoch": partition.leader_epoch,
                        "replicas": partition.replica_nodes.len(),
                        "isr": partition.isr_nodes.len(),
                        "offline": partition.offline_replicas.len(),
                    }))
                    .collect::<Vec<_>>()),
            })
        })
        .collect();
    topics.sort_by_key(|topic| topic["name"].as_str().unwrap_or_default().to_owned());
    json!({
        "brokers": answer.brokers.len(),
        "has_controller": answer.controller_id.0 >= 0,
        "has_cluster_id": answer.cluster_id.is_some(),
        "topics": topics,
    })
}

fn sorted(mut partitions: Vec<Value>) -> Vec<Value> {
    partitions.sort_by_key(|p| p["partition"].as_i64());
    partitions
}

/// A CreateTopics answer: per topic its error and (where the version has them: v5+, v7 for the id) its partition
/// count, replication factor, config error, whether it has an id, and every config it answered
/// (`[name, value, read_only, source, sensitive]`, in the order given).
pub fn create_topics(answer: &CreateTopicsResponse) -> Value {
    let mut topics: Vec<Value> = answer
        .topics
        .iter()
        .map(|topic| {
            let configs: Vec<Value> = topic
                .configs
                .iter()
                .flatten()
                .map(|config| {
                    json!([
                        config.name.as_str(),
                        config.value.as_deref(),
                        config.read_only,
                        config.config_source,
                        config.is_sensitive
                    ])
                })
                .collect();
            json!([
                topic.name.0.as_str(),
                topic.error_code,
                topic.num_partitions,
                topic.replication_factor,
                topic.topic_config_error_code,
                !topic.topic_id.is_nil(),
                configs
            ])
        })
        .collect();
    sort_by_partition(&mut topics);
    json!(topics)
}

/// An OffsetCommit answer: per partition its error.
pub fn offset_commit(answer: &OffsetCommitResponse) -> Value {
    per_partition(
        &answer.topics,
        |t| (t.name.0.as_str(), &t.partitions),
        |p| vec![json!(p.partition_index), json!(p.error_code)],
    )
}

/// A TxnOffsetCommit answer: per partition its error.
pub fn txn_offset_commit(answer: &TxnOffsetCommitResponse) -> Value {
    per_partition(
        &answer.topics,
        |t| (t.name.0.as_str(), &t.partitions),
        |p| vec![json!(p.partition_index), json!(p.error_code)],
    )
}

/// An OffsetFetch answer: the group error and per partition the committed offset, metadata and error, sorted.
pub fn offset_fetch(answer: &OffsetFetchResponse) -> Value {
    let (error, partitions) = fetched_offsets(answer);
    let mut partitions: Vec<Value> = partitions
        .into_iter()
        .map(|(topic, index, offset, metadata, error)| json!([topic, index, offset, metadata, error]))
        .collect();
    partitions.sort_by_key(|p| p.to_string());
    json!({ "error": error, "partitions": partitions })
}

/// One partition of an OffsetFetch answer: topic, partition, committed offset, metadata, error.
pub type FetchedOffset = (String, i32, i64, Option<String>, i16);

/// The partitions of an OffsetFetch answer's topics, for either response type (v1–7's and v8's).
macro_rules! fetched_partitions {
    ($topics:expr) => {
        $topics
            .iter()
            .flat_map(|topic| {
                topic.partitions.iter().map(move |p| {
                    (
                        topic.name.0.as_str().to_owned(),
                        p.partition_index,
                        p.committed_offset,
                        p.metadata.as_ref().map(|m| m.as_str().to_owned()),
                        p.error_code,
                    )
                })
            })
            .collect()
    };
}

/// An OffsetFetch answer's error and partitions, whatever its version: from v8 (KIP-709) those of its first
/// group, the only one the scenarios ask for.
pub fn fetched_offsets(answer: &OffsetFetchResponse) -> (i16, Vec<FetchedOffset>) {
    match answer.groups.first() {
        Some(group) => (group.error_code, fetched_partitions!(group.topics)),
        None => (answer.error_code, fetched_partitions!(answer.topics)),
    }
}

/// A FindCoordinator answer's error, whatever its version: from v4 (KIP-699) that of its first coordinator.
pub fn coordinator_error(answer: &FindCoordinatorResponse) -> i16 {
    answer
        .coordinators
        .first()
        .map_or(answer.error_code, |coordinator| coordinator.error_code)
}

/// A DeleteRecords answer: per partition its low watermark and error.
pub fn delete_records(answer: &DeleteRecordsResponse) -> Value {
    per_partition(
        &answer.topics,
        |t| (t.name.0.as_str(), &t.partitions),
        |p| {
            vec![
                json!(p.partition_index),
                json!(p.low_watermark),
                json!(p.error_code),
            ]
        },
    )
}

/// An AddPartitionsToTxn answer (versions 0–3): per partition its error.
pub fn add_partitions(answer: &AddPartitionsToTxnResponse) -> Value {
    per_partition(
        &answer.results_by_topic_v3_and_below,
        |t| (t.name.0.as_str(), &t.results_by_partition),
        |p| vec![json!(p.partition_index), json!(p.partition_error_code)],
    )
}

/// One row per partition of a per-topic answer — `[topic, fields of the partition…]`, the error code last —
/// sorted as [`sort_by_partition`] sorts.
fn per_partition<'a, T, P: 'a>(
    topics: &'a [T],
    parts: impl Fn(&'a T) -> (&'a str, &'a Vec<P>),
    fields: impl Fn(&P) -> Vec<Value>,
) -> Value {
    let rows: Vec<Value> = topics
        .iter()
        .flat_map(|topic| {
            let (name, partitions) = parts(topic);
            partitions.iter().map(move |partition| (name, partition))
        })
        .map(|(name, partition)| {
            let mut row = vec![json!(name)];
            row.extend(fields(partition));
            Value::Array(row)
        })
        .collect();
    json!(rows.sorted())
}

/// The first non-zero error code of an observation made of [`per_partition`] rows (error last), or 0: what a
/// retry loop waits on.
pub fn first_partition_error(rows: &Value) -> i16 {
    rows.as_array()
        .into_iter()
        .flatten()
        .filter_map(|row| row.as_array()?.last()?.as_i64())
        .find(|code| *code != 0)
        .and_then(|code| i16::try_from(code).ok())
        .unwrap_or(0)
}

/// [`sort_by_partition`] on an owned list.
trait Sorted {
    fn sorted(self) -> Self;
}

impl Sorted for Vec<Value> {
    fn sorted(mut self) -> Self {
        sort_by_partition(&mut self);
        self
    }
}
