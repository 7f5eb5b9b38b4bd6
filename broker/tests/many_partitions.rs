//! Many partitions on one node (issue 33, item 8): 20,000 partitions created through CreateTopics in batches of
//! 10 topics × 50 partitions, as a user would, on the fs backend under the process's descriptor limit; each
//! written once; the broker closed and opened again; each read back. The store keeps at most half the limit's
//! descriptors open (`storage_fs::pool`), so nothing is refused for lack of them.
//!
//! The figures it prints (time to create, write, open and read; descriptors; memory per partition) are for
//! information: this test passes or fails on what a client sees, never on a time.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use std::time::Instant;

use broker::{Node, NodeConfig, Reply};
use bytes::BytesMut;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use record_format::{BatchBuilder, BatchIter};
use storage_config::StorageConfig;

const TOPICS_PER_REQUEST: usize = 10;
const PARTITIONS_PER_TOPIC: i32 = 50;

fn partitions_wanted() -> usize {
    std::env::var("MIRRORLOG_MANY_PARTITIONS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(20_000)
}

async fn call<Q: Encodable, A: Decodable>(broker: &Node, key: ApiKey, version: i16, request: &Q) -> A {
    let mut body = BytesMut::new();
    request.encode(&mut body, version).unwrap();
    let frame = broker::frame::Request {
        api_key: key as i16,
        version,
        correlation_id: 1,
        client_id: None,
        body: body.freeze(),
    };
    let Reply::Frame(bytes, _) = broker::handle(broker, &frame).await.unwrap() else {
        panic!("{key:?} answered nothing");
    };
    let mut rest = bytes.slice(8..);
    A::decode(&mut rest, version).unwrap()
}

fn topic_name(index: usize) -> String {
    format!("t{index:05}")
}

fn value(topic: usize, partition: i32) -> Vec<u8> {
    format!("{topic}/{partition}").into_bytes()
}

async fn open(config: &StorageConfig) -> Node {
    let mut node_config = NodeConfig::new(config.clone());
    node_config.auto_create_topics = false;
    Node::open(node_config, ("127.0.0.1".to_owned(), 9092))
        .await
        .unwrap()
}

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |entries| entries.count())
}

fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_thousand_partitions_are_created_written_reopened_and_read_back() {
    let wanted = partitions_wanted();
    let topics = wanted.div_ceil(PARTITIONS_PER_TOPIC as usize);
    let dir = tempfile::tempdir().unwrap();
    let config = StorageConfig::parse(&format!(
        "backend = \"fs\"\ndata_dir = {:?}\ndurability = \"buffered\"\n",
        dir.path()
    ))
    .unwrap();
    let limit = storage_fs::pool::open_files_limit().unwrap_or(usize::MAX);

    let broker = open(&config).await;
    let memory_before = resident_kib();
    let started = Instant::now();
    for first in (0..topics).step_by(TOPICS_PER_REQUEST) {
        let mut request = CreateTopicsRequest::default();
        request.timeout_ms = 60_000;
        request.topics = (first..(first + TOPICS_PER_REQUEST).min(topics))
            .map(|index| {
                let mut topic = create_topics_request::CreatableTopic::default();
                topic.name = TopicName(StrBytes::from_string(topic_name(index)));
                topic.num_partitions = PARTITIONS_PER_TOPIC;
                topic.replication_factor = 1;
                topic
            })
            .collect();
        let response: CreateTopicsResponse = call(&broker, ApiKey::CreateTopics, 4, &request).await;
        for result in &response.topics {
            assert_eq!(
                result.error_code,
                0,
                "creating {} after {} partitions ({} descriptors open, limit {limit})",
                result.name.as_str(),
                first * PARTITIONS_PER_TOPIC as usize,
                open_descriptors()
            );
        }
        assert!(open_descriptors() < limit);
    }
    let created = started.elapsed();
    let memory_per_partition = (resident_kib().saturating_sub(memory_before)) as f64 / wanted as f64;

    let started = Instant::now();
    for topic in 0..topics {
        let mut request = ProduceRequest::default();
        request.acks = -1;
        request.timeout_ms = 60_000;
        let mut data = produce_request::TopicProduceData::default();
        data.name = TopicName(StrBytes::from_string(topic_name(topic)));
        data.partition_data = (0..PARTITIONS_PER_TOPIC)
            .map(|partition| {
                let mut builder = BatchBuilder::new();
                builder.add(1_700_000_000_000, None, Some(&value(topic, partition)), &[]);
                let mut part = produce_request::PartitionProduceData::default();
                part.index = partition;
                part.records = Some(builder.build().unwrap().into_bytes());
                part
            })
            .collect();
        request.topic_data = vec![data];
        let response: ProduceResponse = call(&broker, ApiKey::Produce, 8, &request).await;
        for answer in &response.responses[0].partition_responses {
            assert_eq!(
                (answer.error_code, answer.base_offset),
                (0, 0),
                "{}",
                topic_name(topic)
            );
        }
    }
    let written = started.elapsed();
    assert!(open_descriptors() < limit);
    broker.close().await.unwrap();
    drop(broker);

    let started = Instant::now();
    let broker = open(&config).await;
    let reopened = started.elapsed();
    assert_eq!(broker.topic_partitions().await.len(), topics);
    let started = Instant::now();
    for topic in 0..topics {
        let mut request = FetchRequest::default();
        request.replica_id = BrokerId(-1);
        request.max_bytes = 1 << 20;
        let mut fetched = fetch_request::FetchTopic::default();
        fetched.topic = TopicName(StrBytes::from_string(topic_name(topic)));
        fetched.partitions = (0..PARTITIONS_PER_TOPIC)
            .map(|partition| {
                let mut part = fetch_request::FetchPartition::default();
                part.partition = partition;
                part.partition_max_bytes = 1 << 16;
                part
            })
            .collect();
        request.topics = vec![fetched];
        let response: FetchResponse = call(&broker, ApiKey::Fetch, 11, &request).await;
        for data in &response.responses[0].partitions {
            assert_eq!(data.error_code, 0);
            let records = data.records.clone().unwrap_or_default();
            let batches: Vec<_> = BatchIter::new(records)
                .map(|batch| batch.unwrap().batch)
                .collect();
            assert_eq!(batches.len(), 1, "{}-{}", topic_name(topic), data.partition_index);
            let records = batches[0].records().unwrap();
            let record = records.iter().next().unwrap().unwrap();
            assert_eq!(record.value, Some(&value(topic, data.partition_index)[..]));
        }
    }
    let read = started.elapsed();
    assert!(open_descriptors() < limit);
    broker.close().await.unwrap();
    eprintln!(
        "{wanted} partitions: created in {created:.1?}, written in {written:.1?}, opened again in {reopened:.1?}, \
         read in {read:.1?}; {:.1} KiB of memory per created partition; descriptor limit {limit}",
        memory_per_partition
    );
}
