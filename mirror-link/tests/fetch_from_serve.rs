//! A mirror of a partition of `mirrorlog serve` over the Kafka protocol: the source is the broker in process on an
//! ephemeral loopback port, written to over the wire (idempotent batches, a transaction left open, then
//! committed); the destination is a partition log driven by `mirror-fsm`'s driver with a `KafkaFetcher`. The
//! destination holds the source's batches byte for byte at the source's offsets, never past the source's last
//! stable offset; a failover writes the barrier after them; a source with another cluster id fails the session.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use std::time::Duration;

use broker::{BrokerConfig, Server};
use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use mirror_fsm::{Event, MirrorDriver, StateKind};
use mirror_link::{FetcherConfig, KafkaConnection, KafkaFetcher};
use partition_log::{LogConfig, PartitionLog};
use producer_state::PsmConfig;
use record_format::{BatchBuilder, RecordBatch};
use storage::{PartitionId, Storage};
use storage_config::StorageConfig;

const SOURCE_CLUSTER: &str = "source-cluster";
const TOPIC: &str = "orders";

/// The source broker, serving until the test ends; returns its address.
async fn source() -> (String, std::sync::Arc<tokio::sync::Notify>) {
    let storage = StorageConfig::for_backend(storage_config::Backend::Memory, std::path::Path::new(""));
    let mut config = BrokerConfig::new("127.0.0.1:0".parse().unwrap(), storage);
    config.node.cluster_id = SOURCE_CLUSTER.to_owned();
    config.node.topics = vec![(TOPIC.to_owned(), 1)];
    let server = Server::bind(config).await.unwrap();
    let address = server.local_addr().unwrap().to_string();
    let stop = std::sync::Arc::new(tokio::sync::Notify::new());
    let stopped = stop.clone();
    tokio::spawn(async move { server.run(async move { stopped.notified().await }).await });
    (address, stop)
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

async fn client(address: &str) -> KafkaConnection {
    KafkaConnection::connect(address, "test-producer", Duration::from_secs(10), 64 << 20)
        .await
        .unwrap()
}

async fn produce(
    connection: &mut KafkaConnection,
    transactional_id: Option<&str>,
    batch: RecordBatch,
) -> i64 {
    let mut data = produce_request::PartitionProduceData::default();
    data.index = 0;
    data.records = Some(batch.into_bytes());
    let mut topic = produce_request::TopicProduceData::default();
    topic.name = TopicName(s(TOPIC));
    topic.partition_data = vec![data];
    let mut request = ProduceRequest::default();
    request.transactional_id = transactional_id.map(|id| TransactionalId(s(id)));
    request.acks = -1;
    request.timeout_ms = 10_000;
    request.topic_data = vec![topic];
    let response: ProduceResponse = connection
        .call_trusted(ApiKey::Produce, 8, &request)
        .await
        .unwrap();
    let answer = &response.responses[0].partition_responses[0];
    assert_eq!(answer.error_code, 0);
    answer.base_offset
}

async fn init_producer(connection: &mut KafkaConnection, transactional_id: Option<&str>) -> (i64, i16) {
    let mut request = InitProducerIdRequest::default();
    request.transactional_id = transactional_id.map(|id| TransactionalId(s(id)));
    request.transaction_timeout_ms = 60_000;
    let response: InitProducerIdResponse = connection
        .call_trusted(ApiKey::InitProducerId, 4, &request)
        .await
        .unwrap();
    assert_eq!(response.error_code, 0);
    (response.producer_id.0, response.producer_epoch)
}

fn batch(producer: (i64, i16), sequence: i32, transactional: bool, records: usize) -> RecordBatch {
    let mut builder = BatchBuilder::new()
        .producer(producer.0, producer.1, sequence)
        .transactional(transactional);
    for index in 0..records {
        builder.add(
            1_700_000_000_000 + index as i64,
            Some(b"key"),
            Some(&[sequence as u8; 100]),
            &[],
        );
    }
    builder.build().unwrap()
}

/// The destination: a partition log on memory storage.
async fn destination() -> PartitionLog {
    let store = storage::MemoryStorage::new();
    let partition = store.create(&PartitionId::new(TOPIC, 0).unwrap()).await.unwrap();
    let config = LogConfig {
        producer_state: PsmConfig {
            cluster_id: Some("destination-cluster".to_owned()),
            ..PsmConfig::default()
        },
        ..LogConfig::default()
    };
    PartitionLog::open(partition, config, 0).await.unwrap().0
}

/// Every batch of a log, as bytes.
async fn bytes_of(log: &PartitionLog) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let batches = log.read_for_replica(offset, 1 << 20).await.unwrap();
        let Some(last) = batches.last() else { break };
        offset = last.next_offset();
        out.extend(batches.into_iter().map(RecordBatch::into_bytes));
    }
    out
}

#[tokio::test]
async fn a_destination_mirrors_serve_over_the_kafka_protocol_up_to_its_lso_then_fails_over() {
    let (address, stop) = source().await;
    let broker = client(&address).await;
    let mut producer = broker;
    let idempotent = init_producer(&mut producer, None).await;
    for sequence in (0..15).step_by(3) {
        produce(&mut producer, None, batch(idempotent, sequence, false, 3)).await;
    }

    let mut log = destination().await;
    let mut fetcher = KafkaFetcher::new(FetcherConfig::new(&address), TOPIC, 0);
    let mut driver = MirrorDriver::recover(&mut log, &mut fetcher, "destination-cluster")
        .await
        .unwrap();
    driver
        .handle(
            &mut log,
            &mut fetcher,
            Event::Start {
                source_cluster_id: SOURCE_CLUSTER.to_owned(),
            },
        )
        .await
        .unwrap();
    assert_eq!(driver.state().kind(), StateKind::Mirroring);
    driver.catch_up(&mut log, &mut fetcher).await.unwrap();
    assert_eq!(log.log_end_offset(), 15);

    // A transaction left open: the mirror stops before it (the source's LSO).
    let transactional = init_producer(&mut producer, Some("txn")).await;
    let mut add = AddPartitionsToTxnRequest::default();
    add.v3_and_below_transactional_id = TransactionalId(s("txn"));
    add.v3_and_below_producer_id = ProducerId(transactional.0);
    add.v3_and_below_producer_epoch = transactional.1;
    let mut add_topic = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
    add_topic.name = TopicName(s(TOPIC));
    add_topic.partitions = vec![0];
    add.v3_and_below_topics = vec![add_topic];
    let added: AddPartitionsToTxnResponse = producer
        .call_trusted(ApiKey::AddPartitionsToTxn, 2, &add)
        .await
        .unwrap();
    assert_eq!(
        added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        0
    );
    let open_at = produce(&mut producer, Some("txn"), batch(transactional, 0, true, 2)).await;
    produce(&mut producer, None, batch(idempotent, 15, false, 1)).await;
    driver.catch_up(&mut log, &mut fetcher).await.unwrap();
    assert_eq!(
        log.log_end_offset(),
        open_at,
        "nothing at or past the open transaction is copied"
    );

    let mut end = EndTxnRequest::default();
    end.transactional_id = TransactionalId(s("txn"));
    end.producer_id = ProducerId(transactional.0);
    end.producer_epoch = transactional.1;
    end.committed = true;
    let ended: EndTxnResponse = producer.call_trusted(ApiKey::EndTxn, 2, &end).await.unwrap();
    assert_eq!(ended.error_code, 0);
    driver.catch_up(&mut log, &mut fetcher).await.unwrap();

    // Byte for byte, offset for offset: what the source's log holds (read over the wire, read_uncommitted).
    let mut reader = client(&address).await;
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.max_bytes = 1 << 20;
    let mut wanted = fetch_request::FetchPartition::default();
    wanted.partition_max_bytes = 1 << 20;
    let mut topic = fetch_request::FetchTopic::default();
    topic.topic = TopicName(s(TOPIC));
    topic.partitions = vec![wanted];
    request.topics = vec![topic];
    let response: FetchResponse = reader.call(ApiKey::Fetch, 11, &request).await.unwrap();
    let source_bytes: Vec<Bytes> =
        record_format::BatchIter::new(response.responses[0].partitions[0].records.clone().unwrap())
            .map(|found| found.unwrap().batch.into_bytes())
            .collect();
    let mirrored = bytes_of(&log).await;
    assert_eq!(mirrored.len(), source_bytes.len());
    assert!(
        mirrored == source_bytes,
        "the destination's batches are the source's bytes"
    );
    assert_eq!(log.log_end_offset(), 19);

    // Failover: the barrier follows the mirrored batches and the partition is writable.
    driver.handle(&mut log, &mut fetcher, Event::Stop).await.unwrap();
    assert_eq!(driver.state().kind(), StateKind::Stopped);
    assert_eq!(log.log_end_offset(), 20);
    let tail = log.read_for_replica(19, 1 << 10).await.unwrap();
    assert!(matches!(producer_state::plan::barrier_of(&tail[0]), Ok(Some(_))));
    assert!(!log.is_read_only());
    assert_eq!(
        log.producer_state().producers().count(),
        0,
        "the barrier cleared the mirrored producers"
    );
    stop.notify_one();
}

#[tokio::test]
async fn a_source_whose_cluster_id_is_not_the_expected_one_fails_the_session() {
    let (address, stop) = source().await;
    let mut producer = client(&address).await;
    let idempotent = init_producer(&mut producer, None).await;
    produce(&mut producer, None, batch(idempotent, 0, false, 1)).await;
    let mut log = destination().await;
    let mut fetcher = KafkaFetcher::new(FetcherConfig::new(&address), TOPIC, 0);
    let mut driver = MirrorDriver::recover(&mut log, &mut fetcher, "destination-cluster")
        .await
        .unwrap();
    driver
        .handle(
            &mut log,
            &mut fetcher,
            Event::Start {
                source_cluster_id: "another-cluster".to_owned(),
            },
        )
        .await
        .unwrap();
    driver.catch_up(&mut log, &mut fetcher).await.unwrap();
    assert_eq!(driver.state().kind(), StateKind::Failed);
    assert_eq!(
        log.log_end_offset(),
        0,
        "nothing of the wrong cluster is appended"
    );
    stop.notify_one();
}

#[tokio::test]
async fn an_unreachable_source_is_a_retryable_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    drop(listener);
    let mut fetcher = KafkaFetcher::new(FetcherConfig::new(&address), TOPIC, 0);
    let error = mirror_fsm::Fetcher::fetch(&mut fetcher, 0, 1 << 20)
        .await
        .unwrap_err();
    assert!(error.retryable, "{error}");
}
