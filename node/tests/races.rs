//! Bad timing (issue 51, item 7): a topic deleted while producers, consumers, timestamp searches and the cleaner
//! use it; a topic's retention changed while retention runs. Each answer is a clear Kafka error or a success,
//! nothing of a deleted topic reaches the topic recreated under its name, and retention deletes only what some
//! setting in force allowed.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_types::KafkaError;
use node::{Clock, Node, NodeConfig};
use record_format::BatchBuilder;
use storage_config::{Backend, StorageConfig};

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// A clock the test moves.
#[derive(Debug, Default)]
struct TestClock(AtomicI64);

impl Clock for TestClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

async fn open(dir: &std::path::Path, clock: Arc<TestClock>) -> Arc<Node> {
    let mut storage = StorageConfig::for_backend(Backend::Fs, dir);
    if let StorageConfig::Fs(options) = &mut storage {
        // Small segments: the cleaner and retention have whole segments to work on.
        options.segment_bytes = Some(16 * 1024);
    }
    let config = NodeConfig::new(storage);
    let store = config.storage.open().unwrap();
    Arc::new(
        Node::open_on(config, ("localhost".to_owned(), 9092), store, clock)
            .await
            .unwrap(),
    )
}

async fn create(node: &Node, name: &str, configs: &[(&str, &str)]) {
    let mut topic = create_topics_request::CreatableTopic::default();
    topic.name = TopicName(s(name));
    topic.num_partitions = 1;
    topic.replication_factor = 1;
    topic.configs = configs
        .iter()
        .map(|(key, value)| {
            let mut config = create_topics_request::CreatableTopicConfig::default();
            config.name = s(key);
            config.value = Some(s(value));
            config
        })
        .collect();
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![topic];
    request.timeout_ms = 10_000;
    let answer = node.create_topics(request, 4).await;
    assert_eq!(
        answer.topics[0].error_code, 0,
        "{:?}",
        answer.topics[0].error_message
    );
}

async fn alter(node: &Node, name: &str, key: &str, value: &str) {
    let mut config = incremental_alter_configs_request::AlterableConfig::default();
    config.name = s(key);
    config.value = Some(s(value));
    config.config_operation = 0; // SET
    let mut resource = incremental_alter_configs_request::AlterConfigsResource::default();
    resource.resource_type = 2; // TOPIC
    resource.resource_name = s(name);
    resource.configs = vec![config];
    let mut request = IncrementalAlterConfigsRequest::default();
    request.resources = vec![resource];
    let answer = node.incremental_alter_configs(request, 1).await;
    assert_eq!(
        answer.responses[0].error_code, 0,
        "{:?}",
        answer.responses[0].error_message
    );
}

/// Produces one keyed record at `timestamp`; the answer's error code and offset.
async fn produce(node: &Node, topic: &str, timestamp: i64, key: &str) -> (i16, i64) {
    let mut builder = BatchBuilder::new();
    builder.add(timestamp, Some(key.as_bytes()), Some(&[b'x'; 512]), &[]);
    let mut partition = produce_request::PartitionProduceData::default();
    partition.records = Some(builder.build().unwrap().into_bytes());
    let mut data = produce_request::TopicProduceData::default();
    data.name = TopicName(s(topic));
    data.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 10_000;
    request.topic_data = vec![data];
    let response = node.produce(request, 8).await;
    let answer = &response.responses[0].partition_responses[0];
    (answer.error_code, answer.base_offset)
}

/// Fetch from `offset`: the error code and the records' (offset, timestamp).
async fn fetch(node: &Node, topic: &str, offset: i64) -> (i16, Vec<(i64, i64)>) {
    let mut partition = fetch_request::FetchPartition::default();
    partition.fetch_offset = offset;
    partition.partition_max_bytes = 1 << 20;
    let mut wanted = fetch_request::FetchTopic::default();
    wanted.topic = TopicName(s(topic));
    wanted.partitions = vec![partition];
    let mut request = FetchRequest::default();
    request.max_bytes = 1 << 20;
    request.topics = vec![wanted];
    let mut response = node.fetch(request, 12).await;
    let answer = response.responses.remove(0).partitions.remove(0);
    let mut records = Vec::new();
    for batch in record_format::BatchIter::unverified(answer.records.unwrap_or_default()) {
        for record in batch.unwrap().batch.records().unwrap().iter() {
            let record = record.unwrap();
            records.push((record.offset, record.timestamp));
        }
    }
    (answer.error_code, records)
}

/// ListOffsets for `timestamp` (−2 earliest, −1 latest, −3 largest timestamp): error code and offset.
async fn list_offset(node: &Node, topic: &str, timestamp: i64) -> (i16, i64) {
    let mut partition = list_offsets_request::ListOffsetsPartition::default();
    partition.timestamp = timestamp;
    let mut wanted = list_offsets_request::ListOffsetsTopic::default();
    wanted.name = TopicName(s(topic));
    wanted.partitions = vec![partition];
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(-1);
    request.topics = vec![wanted];
    let response = node.list_offsets(request, 8).await;
    let answer = &response.topics[0].partitions[0];
    (answer.error_code, answer.offset)
}

const NONE: i16 = 0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_deleted_while_producers_consumers_searches_and_the_cleaner_use_it_comes_back_empty() {
    let dir = tempfile::tempdir().unwrap();
    let node = open(dir.path(), Arc::new(TestClock(AtomicI64::new(1_000)))).await;
    create(
        &node,
        "busy",
        &[
            ("cleanup.policy", "compact"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    )
    .await;
    let stop = Arc::new(AtomicBool::new(false));
    let produced = Arc::new(AtomicUsize::new(0));
    let seen: Arc<Mutex<BTreeSet<(&'static str, i16)>>> = Arc::default();
    let mut tasks = Vec::new();
    {
        let (node, stop, produced, seen) = (node.clone(), stop.clone(), produced.clone(), seen.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                let (code, _) = produce(&node, "busy", 1_000, &format!("k{}", n % 20)).await;
                seen.lock().unwrap().insert(("produce", code));
                if code == NONE {
                    produced.fetch_add(1, Ordering::SeqCst);
                }
                n += 1;
            }
        }));
    }
    {
        let (node, stop, seen) = (node.clone(), stop.clone(), seen.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let (code, _) = fetch(&node, "busy", 0).await;
                seen.lock().unwrap().insert(("fetch", code));
                let (code, _) = list_offset(&node, "busy", -3).await;
                seen.lock().unwrap().insert(("list_offsets", code));
            }
        }));
    }
    {
        let (node, stop) = (node.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                // A pass that loses its partition midway is dropped or fails with a storage error; either way the
                // cleaner goes on.
                let _ = node.compact_topics().await;
                tokio::task::yield_now().await;
            }
        }));
    }
    while produced.load(Ordering::SeqCst) < 200 {
        tokio::task::yield_now().await;
    }
    let mut deletion = DeleteTopicsRequest::default();
    deletion.topic_names = vec![TopicName(s("busy"))];
    deletion.timeout_ms = 10_000;
    let answer = node.delete_topics(deletion, 5).await;
    assert_eq!(answer.responses[0].error_code, NONE);
    // The name is taken again while the others still run; what they write from now on lands in the new topic.
    create(&node, "busy", &[]).await;
    let before = produced.load(Ordering::SeqCst);
    while produced.load(Ordering::SeqCst) < before + 50 {
        tokio::task::yield_now().await;
    }
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.unwrap();
    }
    let unknown = KafkaError::UnknownTopicOrPartition.code();
    for (what, code) in seen.lock().unwrap().iter() {
        assert!(
            *code == NONE || *code == unknown,
            "{what} answered {code} during the deletion: only success or UNKNOWN_TOPIC_OR_PARTITION are clear"
        );
    }
    // The new topic holds what was produced to it, from offset 0: nothing of the old one.
    let (code, end) = list_offset(&node, "busy", -1).await;
    assert_eq!(code, NONE);
    let (code, records) = fetch(&node, "busy", 0).await;
    assert_eq!(code, NONE);
    assert_eq!(records.first().map(|(offset, _)| *offset), Some(0));
    assert!(
        (50..200).contains(&end),
        "the recreated topic holds only its own records: {end}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_racing_changes_of_retention_ms_deletes_only_what_a_setting_in_force_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TestClock(AtomicI64::new(0)));
    let node = open(dir.path(), clock.clone()).await;
    create(&node, "aging", &[("retention.ms", "-1")]).await;
    // Records at 0, 1,000, …, 299,000 ms: 300 records, several segments.
    for n in 0..300 {
        assert_eq!(produce(&node, "aging", n * 1_000, "key").await.0, NONE);
    }
    clock.0.store(300_000, Ordering::SeqCst);
    let stop = Arc::new(AtomicBool::new(false));
    let retention = {
        let (node, stop) = (node.clone(), stop.clone());
        tokio::spawn(async move {
            let mut passes = 0;
            while !stop.load(Ordering::SeqCst) {
                node.apply_retention().await.unwrap();
                passes += 1;
                tokio::task::yield_now().await;
            }
            passes
        })
    };
    // The settings in force, one after the other: forever, 250 s, forever, 200 s, forever.
    for value in ["-1", "250000", "-1", "200000", "-1"] {
        alter(&node, "aging", "retention.ms", value).await;
        // One pass surely under this setting, besides the racing ones.
        node.apply_retention().await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    assert!(retention.await.unwrap() > 0);
    node.apply_retention().await.unwrap();
    // At 300 s the shortest setting (200 s) allows deleting records older than 100 s, in whole segments: the log
    // start is at most 100 (what some setting allowed), and every record from it on is still there, in order.
    let (code, start) = list_offset(&node, "aging", -2).await;
    assert_eq!(code, NONE);
    assert!(
        (1..=100).contains(&start),
        "retention deleted nothing, or more than any setting allowed: log start {start}"
    );
    let mut offset = start;
    let mut read = Vec::new();
    while offset < 300 {
        let (code, records) = fetch(&node, "aging", offset).await;
        assert_eq!(code, NONE);
        let Some(last) = records.last() else { break };
        offset = last.0 + 1;
        read.extend(records);
    }
    let expected: Vec<(i64, i64)> = (start..300).map(|n| (n, n * 1_000)).collect();
    assert_eq!(read, expected, "nothing lost from the log start on");
}
