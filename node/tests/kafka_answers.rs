//! Answers the differential suite (`interop/tests/test_differential.py`) found Apache Kafka 4.1 giving, pinned
//! here without Kafka: the fields beside an error, a duplicate's append time, the size limit, and the
//! transaction verification of transactional batches (KIP-890 part 1).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_types::KafkaError;
use node::{Node, NodeConfig};
use record_format::BatchBuilder;
use storage_config::{Backend, StorageConfig};

const TOPIC: &str = "orders";

async fn node() -> Node {
    let storage = StorageConfig::for_backend(Backend::Memory, std::path::Path::new(""));
    let mut config = NodeConfig::new(storage);
    config.topics = vec![(TOPIC.to_owned(), 2)];
    Node::open(config, ("localhost".to_owned(), 9092)).await.unwrap()
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// A batch of `count` records (`padding` bytes each), written by `producer` at `sequence` when given.
fn batch(producer: Option<(i64, i16, i32)>, transactional: bool, count: usize, padding: usize) -> Bytes {
    let mut builder = BatchBuilder::new().transactional(transactional);
    if let Some((id, epoch, sequence)) = producer {
        builder = builder.producer(id, epoch, sequence);
    }
    let value = vec![7u8; padding];
    for index in 0..count {
        builder.add(1_700_000_000_000 + index as i64, None, Some(&value), &[]);
    }
    builder.build().unwrap().into_bytes()
}

fn produce_request(transactional_id: Option<&str>, partition: i32, records: Bytes) -> ProduceRequest {
    let mut data = produce_request::PartitionProduceData::default();
    data.index = partition;
    data.records = Some(records);
    let mut topic = produce_request::TopicProduceData::default();
    topic.name = TopicName(s(TOPIC));
    topic.partition_data = vec![data];
    let mut request = ProduceRequest::default();
    request.transactional_id = transactional_id.map(|id| TransactionalId(s(id)));
    request.acks = -1;
    request.timeout_ms = 10_000;
    request.topic_data = vec![topic];
    request
}

async fn produce(node: &Node, request: ProduceRequest) -> produce_response::PartitionProduceResponse {
    node.produce(request, 8).await.responses[0].partition_responses[0].clone()
}

async fn init(node: &Node, transactional_id: Option<&str>) -> (i64, i16) {
    let mut request = InitProducerIdRequest::default();
    request.transactional_id = transactional_id.map(|id| TransactionalId(s(id)));
    request.transaction_timeout_ms = 60_000;
    let mut answer = node.init_producer_id(request.clone(), 4).await;
    // An open transaction is aborted first: CONCURRENT_TRANSACTIONS until it is, as clients retry.
    for _retry in 0..10 {
        if answer.error_code != KafkaError::ConcurrentTransactions.code() {
            break;
        }
        answer = node.init_producer_id(request.clone(), 4).await;
    }
    assert_eq!(answer.error_code, 0);
    (answer.producer_id.0, answer.producer_epoch)
}

async fn add_partition(node: &Node, txn: &str, producer: (i64, i16), partition: i32) {
    let mut topic = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
    topic.name = TopicName(s(TOPIC));
    topic.partitions = vec![partition];
    let mut request = AddPartitionsToTxnRequest::default();
    request.v3_and_below_transactional_id = TransactionalId(s(txn));
    request.v3_and_below_producer_id = ProducerId(producer.0);
    request.v3_and_below_producer_epoch = producer.1;
    request.v3_and_below_topics = vec![topic];
    let answer = node.add_partitions_to_txn(request, 2).await;
    assert_eq!(
        answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        0
    );
}

#[tokio::test]
async fn a_batch_above_message_max_bytes_is_refused_message_too_large_and_one_below_is_appended() {
    let node = node().await;
    let too_large = produce(&node, produce_request(None, 0, batch(None, false, 1, 1_100_000))).await;
    assert_eq!(too_large.error_code, KafkaError::MessageTooLarge.code());
    assert_eq!((too_large.base_offset, too_large.log_start_offset), (-1, -1));
    let below = produce(&node, produce_request(None, 0, batch(None, false, 1, 900_000))).await;
    assert_eq!((below.error_code, below.base_offset), (0, 0));
}

#[tokio::test]
async fn a_duplicate_is_answered_with_the_original_batchs_offset_and_max_timestamp_as_its_append_time() {
    let node = node().await;
    let (id, epoch) = init(&node, None).await;
    let records = batch(Some((id, epoch, 0)), false, 3, 4);
    let first = produce(&node, produce_request(None, 0, records.clone())).await;
    assert_eq!(
        (first.error_code, first.base_offset, first.log_append_time_ms),
        (0, 0, -1)
    );
    let again = produce(&node, produce_request(None, 0, records)).await;
    assert_eq!((again.error_code, again.base_offset), (0, 0));
    assert_eq!(
        again.log_append_time_ms, 1_700_000_000_002,
        "the original batch's max timestamp"
    );
}

#[tokio::test]
async fn a_refusal_by_the_log_carries_the_log_start_offset_and_one_before_it_does_not() {
    let node = node().await;
    let (id, epoch) = init(&node, None).await;
    assert_eq!(
        produce(
            &node,
            produce_request(None, 0, batch(Some((id, epoch, 0)), false, 1, 4))
        )
        .await
        .error_code,
        0
    );
    let gap = produce(
        &node,
        produce_request(None, 0, batch(Some((id, epoch, 5)), false, 1, 4)),
    )
    .await;
    assert_eq!(gap.error_code, KafkaError::OutOfOrderSequenceNumber.code());
    assert_eq!(gap.log_start_offset, 0);
    let mut corrupt = batch(None, false, 1, 4).to_vec();
    *corrupt.last_mut().unwrap() ^= 0xff;
    let corrupt = produce(&node, produce_request(None, 0, Bytes::from(corrupt))).await;
    assert_eq!(corrupt.error_code, KafkaError::CorruptMessage.code());
    assert_eq!(corrupt.log_start_offset, -1);
}

#[tokio::test]
async fn a_partition_with_no_batch_or_two_is_refused_invalid_record_before_the_log() {
    let node = node().await;
    let empty = produce(&node, produce_request(None, 0, Bytes::new())).await;
    assert_eq!(
        (empty.error_code, empty.log_start_offset),
        (KafkaError::InvalidRecord.code(), -1)
    );
    let mut two = batch(None, false, 1, 4).to_vec();
    two.extend_from_slice(&batch(None, false, 1, 4));
    let two = produce(&node, produce_request(None, 0, Bytes::from(two))).await;
    assert_eq!(
        (two.error_code, two.log_start_offset),
        (KafkaError::InvalidRecord.code(), -1)
    );
}

#[tokio::test]
async fn an_unknown_acks_refuses_every_partition_invalid_required_acks() {
    let node = node().await;
    let mut request = produce_request(None, 0, batch(None, false, 1, 4));
    request.acks = 2;
    let refused = produce(&node, request).await;
    assert_eq!(
        (refused.error_code, refused.base_offset),
        (KafkaError::InvalidRequiredAcks.code(), -1)
    );
    let next = produce(&node, produce_request(None, 0, batch(None, false, 1, 4))).await;
    assert_eq!((next.error_code, next.base_offset), (0, 0), "nothing was stored");
}

#[tokio::test]
async fn a_record_more_than_an_hour_ahead_is_refused_invalid_timestamp_naming_it() {
    let node = node().await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut builder = BatchBuilder::new();
    builder.add(now, None, Some(b"now"), &[]);
    builder.add(now + 2 * 3_600_000, None, Some(b"two hours ahead"), &[]);
    let records = builder.build().unwrap().into_bytes();
    let refused = produce(&node, produce_request(None, 0, records)).await;
    assert_eq!(refused.error_code, KafkaError::InvalidTimestamp.code());
    assert_eq!(
        refused.log_start_offset, 0,
        "a refusal of the record checks carries the log start"
    );
    let indexes: Vec<i32> = refused
        .record_errors
        .iter()
        .map(|error| error.batch_index)
        .collect();
    assert_eq!(indexes, vec![1]);
    let mut corrupt = BatchBuilder::new();
    corrupt.add(now + 2 * 3_600_000, None, Some(b"two hours ahead"), &[]);
    let mut corrupt = corrupt.build().unwrap().into_bytes().to_vec();
    // The value's last byte (the batch ends with the record's header count): the records still decode.
    let in_the_value = corrupt.len() - 2;
    corrupt[in_the_value] ^= 0x20;
    let corrupt = produce(&node, produce_request(None, 0, Bytes::from(corrupt))).await;
    assert_eq!(
        corrupt.error_code,
        KafkaError::CorruptMessage.code(),
        "the CRC is checked first"
    );
    let mut old = BatchBuilder::new();
    old.add(0, None, Some(b"1970"), &[]);
    let accepted = produce(&node, produce_request(None, 0, old.build().unwrap().into_bytes())).await;
    assert_eq!(accepted.error_code, 0, "no limit behind the clock by default");
}

#[tokio::test]
async fn a_transactional_batch_is_appended_only_to_a_partition_of_its_open_transaction() {
    let node = node().await;
    let txn = "verified";
    let producer = init(&node, Some(txn)).await;
    let not_added = produce(
        &node,
        produce_request(Some(txn), 0, batch(Some((producer.0, producer.1, 0)), true, 2, 4)),
    )
    .await;
    assert_eq!(not_added.error_code, KafkaError::InvalidTxnState.code());
    assert_eq!((not_added.base_offset, not_added.log_start_offset), (-1, -1));
    add_partition(&node, txn, producer, 1).await;
    let other = produce(
        &node,
        produce_request(Some(txn), 0, batch(Some((producer.0, producer.1, 0)), true, 2, 4)),
    )
    .await;
    assert_eq!(
        other.error_code,
        KafkaError::InvalidTxnState.code(),
        "partition 0 is not in the transaction"
    );
    let added = produce(
        &node,
        produce_request(Some(txn), 1, batch(Some((producer.0, producer.1, 0)), true, 2, 4)),
    )
    .await;
    assert_eq!((added.error_code, added.base_offset), (0, 0));
}

#[tokio::test]
async fn a_fenced_producers_transactional_batch_is_refused_invalid_producer_epoch_before_the_log() {
    let node = node().await;
    let txn = "zombie";
    let zombie = init(&node, Some(txn)).await;
    add_partition(&node, txn, zombie, 0).await;
    assert_eq!(
        produce(
            &node,
            produce_request(Some(txn), 0, batch(Some((zombie.0, zombie.1, 0)), true, 1, 4))
        )
        .await
        .error_code,
        0
    );
    let successor = init(&node, Some(txn)).await;
    assert!(successor.1 > zombie.1);
    let late = produce(
        &node,
        produce_request(Some(txn), 0, batch(Some((zombie.0, zombie.1, 1)), true, 1, 4)),
    )
    .await;
    assert_eq!(late.error_code, KafkaError::InvalidProducerEpoch.code());
    assert_eq!(late.log_start_offset, -1);
}

fn fetch_request(isolation: i8, offset: i64, partition: i32) -> FetchRequest {
    let mut wanted = fetch_request::FetchPartition::default();
    wanted.partition = partition;
    wanted.fetch_offset = offset;
    wanted.partition_max_bytes = 1 << 20;
    let mut topic = fetch_request::FetchTopic::default();
    topic.topic = TopicName(s(TOPIC));
    topic.partitions = vec![wanted];
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.max_bytes = 1 << 20;
    request.isolation_level = isolation;
    request.topics = vec![topic];
    request
}

#[tokio::test]
async fn a_fetch_answers_watermarks_and_aborted_lists_as_kafka_does() {
    let node = node().await;
    assert_eq!(
        produce(&node, produce_request(None, 0, batch(None, false, 3, 4)))
            .await
            .error_code,
        0
    );
    let read = |isolation, offset, partition| node.fetch(fetch_request(isolation, offset, partition), 11);
    let out_of_range = read(0, 1_000, 0).await.responses[0].partitions[0].clone();
    assert_eq!(out_of_range.error_code, KafkaError::OffsetOutOfRange.code());
    let marks = (
        out_of_range.high_watermark,
        out_of_range.last_stable_offset,
        out_of_range.log_start_offset,
    );
    assert_eq!(marks, (-1, -1, -1));
    let uncommitted = read(0, 0, 0).await.responses[0].partitions[0].clone();
    assert_eq!((uncommitted.error_code, uncommitted.high_watermark), (0, 3));
    assert_eq!(uncommitted.aborted_transactions, None, "read_uncommitted: null");
    let committed = read(1, 0, 0).await.responses[0].partitions[0].clone();
    assert_eq!(
        committed.aborted_transactions,
        Some(Vec::new()),
        "read_committed: a list"
    );
    let unknown = read(0, 0, 9).await.responses[0].partitions[0].clone();
    assert_eq!(unknown.error_code, KafkaError::UnknownTopicOrPartition.code());
    assert_eq!(
        unknown.aborted_transactions,
        Some(Vec::new()),
        "an unknown partition: an empty list"
    );
}

#[tokio::test]
async fn list_offsets_names_a_leader_epoch_only_beside_an_offset_found() {
    let node = node().await;
    assert_eq!(
        produce(&node, produce_request(None, 0, batch(None, false, 3, 4)))
            .await
            .error_code,
        0
    );
    let ask = |timestamp: i64| {
        let mut partition = list_offsets_request::ListOffsetsPartition::default();
        partition.timestamp = timestamp;
        let mut topic = list_offsets_request::ListOffsetsTopic::default();
        topic.name = TopicName(s(TOPIC));
        topic.partitions = vec![partition];
        let mut request = ListOffsetsRequest::default();
        request.replica_id = BrokerId(-1);
        request.topics = vec![topic];
        node.list_offsets(request, 5)
    };
    let found = ask(1_700_000_000_001).await.topics[0].partitions[0].clone();
    assert_eq!((found.error_code, found.offset, found.leader_epoch), (0, 1, 0));
    let past = ask(1_700_000_000_003).await.topics[0].partitions[0].clone();
    assert_eq!((past.error_code, past.offset, past.leader_epoch), (0, -1, -1));
    let special = ask(-7).await.topics[0].partitions[0].clone();
    assert_eq!(
        (special.error_code, special.leader_epoch),
        (KafkaError::UnsupportedVersion.code(), -1)
    );
}

#[tokio::test]
async fn find_coordinator_names_no_node_beside_an_error() {
    let node = node().await;
    let mut request = FindCoordinatorRequest::default();
    request.key = s("group");
    request.key_type = 9;
    let answer = node
        .find_coordinator(request, 2, &node.advertised().clone())
        .await;
    assert_ne!(answer.error_code, 0);
    assert_eq!((answer.node_id.0, answer.port), (-1, -1));
}
