//! Request values the scenarios send, built the way a client builds them, and client batches.

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use record_format::{BatchBuilder, Compression};

use crate::error::DiffError;

/// The first record timestamp of every batch the driver builds (CreateTime, so both brokers keep it).
pub const BASE_TIMESTAMP: i64 = 1_700_000_000_000;

/// A protocol string.
pub fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// A topic name.
pub fn topic_name(text: &str) -> TopicName {
    TopicName(s(text))
}

/// `(topic, item)` pairs grouped by topic, topics and items in the order they first appear (the order a client
/// lays out a request in).
fn by_topic<'a, T>(parts: impl IntoIterator<Item = (&'a str, T)>) -> Vec<(&'a str, Vec<T>)> {
    let mut groups: Vec<(&'a str, Vec<T>)> = Vec::new();
    for (name, item) in parts {
        match groups.iter_mut().find(|(topic, _)| *topic == name) {
            Some((_, items)) => items.push(item),
            None => groups.push((name, vec![item])),
        }
    }
    groups
}

/// `parts` grouped by topic, in the order the topics first appear: each partition built by `partition`, each
/// topic by `topic` from its name and its partitions — the nesting every per-topic request has.
fn nested<'a, I, P, T>(
    parts: impl IntoIterator<Item = (&'a str, I)>,
    partition: impl Fn(I) -> P,
    topic: impl Fn(TopicName, Vec<P>) -> T,
) -> Vec<T> {
    by_topic(parts)
        .into_iter()
        .map(|(name, items)| topic(topic_name(name), items.into_iter().map(&partition).collect()))
        .collect()
}

/// What goes into a client batch.
#[derive(Debug, Clone, Default)]
pub struct BatchSpec {
    /// `(producer id, epoch, base sequence)` of an idempotent or transactional producer.
    pub producer: Option<(i64, i16, i32)>,
    /// The transactional attribute.
    pub transactional: bool,
    /// The codec of the records section.
    pub compression: Compression,
    /// Records in the batch.
    pub count: usize,
    /// A tag that goes into each record's key and value, so that batches tell apart.
    pub tag: String,
    /// Bytes of padding in each value (an oversized batch).
    pub padding: usize,
    /// The first record's timestamp (`None`: [`BASE_TIMESTAMP`]).
    pub base_timestamp: Option<i64>,
}

impl BatchSpec {
    /// `count` plain records tagged `tag`.
    pub fn plain(tag: &str, count: usize) -> Self {
        BatchSpec {
            count,
            tag: tag.to_owned(),
            ..BatchSpec::default()
        }
    }

    /// The same batch written by `producer` at `sequence`.
    pub fn by(mut self, producer: (i64, i16), sequence: i32) -> Self {
        self.producer = Some((producer.0, producer.1, sequence));
        self
    }

    /// The same batch, transactional.
    pub fn in_transaction(mut self) -> Self {
        self.transactional = true;
        self
    }

    /// Encodes the batch: record `i` has key `<tag>-k<i>` (none for every third record), value `<tag>-v<i>`
    /// padded (none for every fifth), a header `h` (null-valued for odd records) and timestamp
    /// `BASE_TIMESTAMP + i` (or from `base_timestamp`).
    pub fn build(&self) -> Result<Bytes, DiffError> {
        let mut builder = BatchBuilder::new().compression(self.compression);
        if let Some((id, epoch, sequence)) = self.producer {
            builder = builder.producer(id, epoch, sequence);
        }
        if self.transactional {
            builder = builder.transactional(true);
        }
        for index in 0..self.count {
            let key = format!("{}-k{index}", self.tag);
            let mut value = format!("{}-v{index}", self.tag).into_bytes();
            // Incompressible padding, so that a compressed batch is as large as asked.
            let mut state = 0x9e37_79b9_u32.wrapping_add(index as u32);
            value.extend((0..self.padding).map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                state as u8
            }));
            let header_value: Option<&[u8]> = if index % 2 == 0 { Some(b"even") } else { None };
            builder.add(
                self.base_timestamp.unwrap_or(BASE_TIMESTAMP) + index as i64,
                (index % 3 != 2).then_some(key.as_bytes()),
                (index % 5 != 4).then_some(value.as_slice()),
                &[("h", header_value)],
            );
        }
        builder
            .build()
            .map(|batch| batch.into_bytes())
            .map_err(|error| DiffError::Batch(error.to_string()))
    }
}

/// A control batch (an ABORT marker's key and value), which no client may send.
pub fn control_batch() -> Result<Bytes, DiffError> {
    let mut builder = BatchBuilder::new().control(true);
    builder.add(
        BASE_TIMESTAMP,
        Some(&[0, 0, 0, 0]),
        Some(&[0, 0, 0, 0, 0, 0]),
        &[],
    );
    builder
        .build()
        .map(|batch| batch.into_bytes())
        .map_err(|error| DiffError::Batch(error.to_string()))
}

/// A Produce request writing `records` to each `(topic, partition)`.
pub fn produce(transactional_id: Option<&str>, acks: i16, parts: Vec<(&str, i32, Bytes)>) -> ProduceRequest {
    let mut request = ProduceRequest::default();
    request.transactional_id = transactional_id.map(|id| TransactionalId(s(id)));
    request.acks = acks;
    request.timeout_ms = 10_000;
    request.topic_data = nested(
        parts
            .into_iter()
            .map(|(name, index, records)| (name, (index, records))),
        |(index, records)| {
            let mut data = produce_request::PartitionProduceData::default();
            data.index = index;
            data.records = Some(records);
            data
        },
        |name, partition_data| {
            let mut topic = produce_request::TopicProduceData::default();
            topic.name = name;
            topic.partition_data = partition_data;
            topic
        },
    );
    request
}

/// A Fetch request for `(topic, partition, offset)` each, at `isolation` (0 read_uncommitted, 1 read_committed).
pub fn fetch(isolation: i8, parts: &[(&str, i32, i64)]) -> FetchRequest {
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.max_wait_ms = 0;
    request.min_bytes = 0;
    request.max_bytes = 16 << 20;
    request.isolation_level = isolation;
    request.topics = nested(
        parts.iter().map(|&(name, index, offset)| (name, (index, offset))),
        |(index, offset)| {
            let mut partition = fetch_request::FetchPartition::default();
            partition.partition = index;
            partition.fetch_offset = offset;
            partition.partition_max_bytes = 8 << 20;
            partition
        },
        |name, partitions| {
            let mut topic = fetch_request::FetchTopic::default();
            topic.topic = name;
            topic.partitions = partitions;
            topic
        },
    );
    request
}

/// A ListOffsets request for `(topic, partition, timestamp)` each (−2 earliest, −1 latest).
pub fn list_offsets(isolation: i8, parts: &[(&str, i32, i64)]) -> ListOffsetsRequest {
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(-1);
    request.isolation_level = isolation;
    request.topics = nested(
        parts
            .iter()
            .map(|&(name, index, timestamp)| (name, (index, timestamp))),
        |(index, timestamp)| {
            let mut partition = list_offsets_request::ListOffsetsPartition::default();
            partition.partition_index = index;
            partition.timestamp = timestamp;
            partition
        },
        |name, partitions| {
            let mut topic = list_offsets_request::ListOffsetsTopic::default();
            topic.name = name;
            topic.partitions = partitions;
            topic
        },
    );
    request
}

/// A Metadata request naming `topics` (`None`: every topic).
pub fn metadata(topics: Option<&[&str]>, allow_auto_creation: bool) -> MetadataRequest {
    let mut request = MetadataRequest::default();
    request.allow_auto_topic_creation = allow_auto_creation;
    request.topics = topics.map(|names| {
        names
            .iter()
            .map(|name| {
                let mut topic = metadata_request::MetadataRequestTopic::default();
                topic.name = Some(topic_name(name));
                topic
            })
            .collect()
    });
    request
}

/// One topic of a CreateTopics request.
pub fn creatable(name: &str, partitions: i32, replication: i16) -> create_topics_request::CreatableTopic {
    let mut topic = create_topics_request::CreatableTopic::default();
    topic.name = topic_name(name);
    topic.num_partitions = partitions;
    topic.replication_factor = replication;
    topic
}

/// An InitProducerId request (`transactional_id` `None`: an idempotent producer).
pub fn init_producer_id(transactional_id: Option<&str>, timeout_ms: i32) -> InitProducerIdRequest {
    let mut request = InitProducerIdRequest::default();
    request.transactional_id = transactional_id.map(|id| TransactionalId(s(id)));
    request.transaction_timeout_ms = timeout_ms;
    request.producer_id = ProducerId(-1);
    request.producer_epoch = -1;
    request
}

/// An AddPartitionsToTxn request (versions 0–3 layout).
pub fn add_partitions(
    txn: &str,
    producer: (i64, i16),
    partitions: &[(&str, i32)],
) -> AddPartitionsToTxnRequest {
    let mut request = AddPartitionsToTxnRequest::default();
    request.v3_and_below_transactional_id = TransactionalId(s(txn));
    request.v3_and_below_producer_id = ProducerId(producer.0);
    request.v3_and_below_producer_epoch = producer.1;
    request.v3_and_below_topics = nested(
        partitions.iter().copied(),
        |index| index,
        |name, partitions| {
            let mut topic = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
            topic.name = name;
            topic.partitions = partitions;
            topic
        },
    );
    request
}

/// An EndTxn request.
pub fn end_txn(txn: &str, producer: (i64, i16), committed: bool) -> EndTxnRequest {
    let mut request = EndTxnRequest::default();
    request.transactional_id = TransactionalId(s(txn));
    request.producer_id = ProducerId(producer.0);
    request.producer_epoch = producer.1;
    request.committed = committed;
    request
}

/// An AddOffsetsToTxn request.
pub fn add_offsets(txn: &str, producer: (i64, i16), group: &str) -> AddOffsetsToTxnRequest {
    let mut request = AddOffsetsToTxnRequest::default();
    request.transactional_id = TransactionalId(s(txn));
    request.producer_id = ProducerId(producer.0);
    request.producer_epoch = producer.1;
    request.group_id = GroupId(s(group));
    request
}

/// A TxnOffsetCommit request committing `(topic, partition, offset)` each for `group`.
pub fn txn_offset_commit(
    txn: &str,
    producer: (i64, i16),
    group: &str,
    offsets: &[(&str, i32, i64)],
) -> TxnOffsetCommitRequest {
    let mut request = TxnOffsetCommitRequest::default();
    request.transactional_id = TransactionalId(s(txn));
    request.group_id = GroupId(s(group));
    request.producer_id = ProducerId(producer.0);
    request.producer_epoch = producer.1;
    request.generation_id = -1;
    request.topics = nested(
        offsets
            .iter()
            .map(|&(name, index, offset)| (name, (index, offset))),
        |(index, offset)| {
            let mut partition = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
            partition.partition_index = index;
            partition.committed_offset = offset;
            partition.committed_leader_epoch = -1;
            partition
        },
        |name, partitions| {
            let mut topic = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
            topic.name = name;
            topic.partitions = partitions;
            topic
        },
    );
    request
}

/// An OffsetCommit request of a group without members (generation −1), committing `(topic, partition,
/// offset)` each.
pub fn offset_commit(group: &str, offsets: &[(&str, i32, i64)]) -> OffsetCommitRequest {
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(s(group));
    request.generation_id_or_member_epoch = -1;
    request.retention_time_ms = -1;
    request.topics = nested(
        offsets
            .iter()
            .map(|&(name, index, offset)| (name, (index, offset))),
        |(index, offset)| {
            let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
            partition.partition_index = index;
            partition.committed_offset = offset;
            partition.committed_leader_epoch = -1;
            partition.committed_metadata = Some(s("meta"));
            partition
        },
        |name, partitions| {
            let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
            topic.name = name;
            topic.partitions = partitions;
            topic
        },
    );
    request
}

/// An OffsetFetch request at `version` for `group` naming `(topic, partitions)` each (`None`: every committed
/// offset); from v8 (KIP-709) the group is the one entry of the batched form.
pub fn offset_fetch(
    group: &str,
    topics: Option<&[(&str, &[i32])]>,
    require_stable: bool,
    version: i16,
) -> OffsetFetchRequest {
    let mut request = OffsetFetchRequest::default();
    request.require_stable = require_stable;
    if version >= 8 {
        let mut batched = offset_fetch_request::OffsetFetchRequestGroup::default();
        batched.group_id = GroupId(s(group));
        batched.topics = topics.map(|topics| {
            topics
                .iter()
                .map(|&(name, partitions)| {
                    let mut topic = offset_fetch_request::OffsetFetchRequestTopics::default();
                    topic.name = topic_name(name);
                    topic.partition_indexes = partitions.to_vec();
                    topic
                })
                .collect()
        });
        request.groups = vec![batched];
        return request;
    }
    request.group_id = GroupId(s(group));
    request.topics = topics.map(|topics| {
        topics
            .iter()
            .map(|&(name, partitions)| {
                let mut topic = offset_fetch_request::OffsetFetchRequestTopic::default();
                topic.name = topic_name(name);
                topic.partition_indexes = partitions.to_vec();
                topic
            })
            .collect()
    });
    request
}

/// A FindCoordinator request at `version` for `key` of `key_type` (0 group, 1 transaction); from v4 (KIP-699)
/// the key is the one entry of the batched form.
pub fn find_coordinator(key: &str, key_type: i8, version: i16) -> FindCoordinatorRequest {
    let mut request = FindCoordinatorRequest::default();
    if version >= 4 {
        request.coordinator_keys = vec![s(key)];
    } else {
        request.key = s(key);
    }
    if version >= 1 {
        request.key_type = key_type;
    }
    request
}

/// A DeleteRecords request moving each `(topic, partition)`'s log start to `offset` (−1: the high watermark).
pub fn delete_records(parts: &[(&str, i32, i64)]) -> DeleteRecordsRequest {
    let mut request = DeleteRecordsRequest::default();
    request.timeout_ms = 30_000;
    request.topics = nested(
        parts.iter().map(|&(name, index, offset)| (name, (index, offset))),
        |(index, offset)| {
            let mut partition = delete_records_request::DeleteRecordsPartition::default();
            partition.partition_index = index;
            partition.offset = offset;
            partition
        },
        |name, partitions| {
            let mut topic = delete_records_request::DeleteRecordsTopic::default();
            topic.name = name;
            topic.partitions = partitions;
            topic
        },
    );
    request
}
