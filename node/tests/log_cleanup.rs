//! Retention and compaction through the node: topics' `retention.ms` / `retention.bytes` and the broker's
//! `log.retention.*` move the log start of each partition, as ListOffsets and Fetch then see it, and the deletion is
//! durable; a compacted topic keeps the latest record of each key, durably.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use node::{Clock, Node, NodeConfig};
use record_format::BatchBuilder;
use storage_config::{Backend, StorageConfig};
use topic_config::ConfigSource;

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

/// The storage under test: a backend, and for storage-fs the segment size (`None`: Kafka's 1 GiB).
#[derive(Debug, Clone, Copy)]
struct Store(Backend, Option<u64>);

impl Store {
    fn config(self, dir: &std::path::Path) -> StorageConfig {
        let mut config = StorageConfig::for_backend(self.0, dir);
        if let StorageConfig::Fs(options) = &mut config {
            options.segment_bytes = self.1;
        }
        config
    }
}

async fn open(
    dir: &std::path::Path,
    store: Store,
    clock: Arc<TestClock>,
    tune: impl Fn(&mut NodeConfig),
) -> Node {
    let mut config = NodeConfig::new(store.config(dir));
    tune(&mut config);
    let storage = config.storage.open().unwrap();
    Node::open_on(config, ("localhost".to_owned(), 9092), storage, clock)
        .await
        .unwrap()
}

fn create(name: &str, configs: &[(&str, &str)]) -> CreateTopicsRequest {
    let mut topic = create_topics_request::CreatableTopic::default();
    topic.name = TopicName(s(name));
    topic.num_partitions = 1;
    topic.replication_factor = 1;
    topic.configs = configs
        .iter()
        .map(|&(name, value)| {
            let mut config = create_topics_request::CreatableTopicConfig::default();
            config.name = s(name);
            config.value = Some(s(value));
            config
        })
        .collect();
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![topic];
    request
}

/// Produces one keyed 1 KiB record with `timestamp`; returns its offset.
async fn produce(node: &Node, topic: &str, timestamp: i64) -> i64 {
    produce_keyed(node, topic, timestamp, "key", &[b'x'; 1024]).await
}

/// Produces one record; returns its offset.
async fn produce_keyed(node: &Node, topic: &str, timestamp: i64, key: &str, value: &[u8]) -> i64 {
    let mut builder = BatchBuilder::new();
    builder.add(timestamp, Some(key.as_bytes()), Some(value), &[]);
    let mut partition = produce_request::PartitionProduceData::default();
    partition.records = Some(builder.build().unwrap().as_bytes().clone());
    let mut data = produce_request::TopicProduceData::default();
    data.name = TopicName(s(topic));
    data.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.topic_data = vec![data];
    let response = node.produce(request, 8).await;
    let answer = &response.responses[0].partition_responses[0];
    assert_eq!(answer.error_code, 0, "{topic}");
    answer.base_offset
}

/// ListOffsets' answer for `timestamp` (−2: earliest, −1: latest).
async fn list_offset(node: &Node, topic: &str, timestamp: i64) -> i64 {
    let mut partition = list_offsets_request::ListOffsetsPartition::default();
    partition.timestamp = timestamp;
    let mut wanted = list_offsets_request::ListOffsetsTopic::default();
    wanted.name = TopicName(s(topic));
    wanted.partitions = vec![partition];
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(-1);
    request.topics = vec![wanted];
    let response = node.list_offsets(request, 7).await;
    let answer = &response.topics[0].partitions[0];
    assert_eq!(answer.error_code, 0, "{topic}");
    answer.offset
}

/// Every record Fetch returns from `offset` on, as (offset, key, value).
async fn fetch_all(node: &Node, topic: &str) -> Vec<(i64, String, String)> {
    let mut out = Vec::new();
    let mut offset = list_offset(node, topic, -2).await;
    let end = list_offset(node, topic, -1).await;
    while offset < end {
        let response = fetch(node, topic, offset).await;
        let records = response.records.unwrap_or_default();
        let mut progressed = false;
        for batch in record_format::BatchIter::unverified(records) {
            let batch = batch.unwrap().batch;
            offset = batch.next_offset();
            progressed = true;
            for record in batch.records().unwrap().iter() {
                let record = record.unwrap();
                let text =
                    |bytes: Option<&[u8]>| String::from_utf8_lossy(bytes.unwrap_or_default()).into_owned();
                out.push((record.offset, text(record.key), text(record.value)));
            }
        }
        assert!(
            progressed,
            "a fetch at {offset} below the end {end} returned nothing"
        );
    }
    out
}

/// Fetch's answer for `topic`'s partition 0 from `offset`.
async fn fetch(node: &Node, topic: &str, offset: i64) -> fetch_response::PartitionData {
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
    response.responses.remove(0).partitions.remove(0)
}

async fn fetch_error(node: &Node, topic: &str, offset: i64) -> i16 {
    fetch(node, topic, offset).await.error_code
}

const MINUTE: i64 = 60_000;

#[tokio::test]
async fn expired_data_goes_by_the_topics_retention_and_the_deletion_survives_a_restart() {
    // Each record batch is about 1.1 KiB: 2 KiB segments hold one or two; a 1 GiB segment holds them all.
    for (store, size_deletes) in [
        (Store(Backend::Fs, Some(2048)), true),
        (Store(Backend::Sled, None), true),
        (Store(Backend::Fs, None), false),
    ] {
        let backend = store;
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::default());
        let node = open(dir.path(), store, clock.clone(), |_| {}).await;
        for (topic, configs) in [
            ("short", vec![("retention.ms", "60000")]),
            (
                "compacted",
                vec![("retention.ms", "60000"), ("cleanup.policy", "compact")],
            ),
            ("bounded", vec![("retention.bytes", "3000")]),
            // segment.ms of a minute: segments [0, 1], [2, 3], [4] on any backend, so size retention deletes the
            // first (2.2 KiB of the 2.5 KiB too many) and keeps the second.
            (
                "rolled",
                vec![("segment.ms", "60000"), ("retention.bytes", "3000")],
            ),
            ("kept", vec![]),
        ] {
            assert_eq!(
                node.create_topics(create(topic, &configs), 4).await.topics[0].error_code,
                0
            );
            for minute in 0..5 {
                produce(&node, topic, minute * MINUTE).await;
            }
        }
        clock.0.store(10 * MINUTE, Ordering::SeqCst);
        let deleted = node.apply_retention().await.unwrap();
        let mut topics: Vec<&str> = deleted.iter().map(|d| d.partition.topic()).collect();
        topics.sort_unstable();
        let expected: &[&str] = if size_deletes {
            &["bounded", "rolled", "short"]
        } else {
            &["rolled", "short"]
        };
        assert_eq!(topics, expected, "{backend:?}");

        assert_eq!(
            list_offset(&node, "short", -2).await,
            5,
            "{backend:?}: everything expired"
        );
        assert_eq!(list_offset(&node, "short", -1).await, 5);
        assert_eq!(
            fetch_error(&node, "short", 0).await,
            1,
            "OFFSET_OUT_OF_RANGE below the log start"
        );
        assert_eq!(
            list_offset(&node, "compacted", -2).await,
            0,
            "compact alone deletes nothing"
        );
        assert_eq!(list_offset(&node, "kept", -2).await, 0, "7 days have not passed");
        let bounded_start = list_offset(&node, "bounded", -2).await;
        if size_deletes {
            assert!(
                (1..=3).contains(&bounded_start),
                "{backend:?}: at least 3000 bytes stay: {bounded_start}"
            );
        } else {
            assert_eq!(
                bounded_start, 0,
                "a segment is kept whole while deleting it would leave too little"
            );
        }
        assert_eq!(list_offset(&node, "rolled", -2).await, 2, "{backend:?}");
        assert_eq!(
            produce(&node, "short", 10 * MINUTE).await,
            5,
            "offsets go on from the log end"
        );
        assert!(
            node.apply_retention().await.unwrap().is_empty(),
            "nothing more is due"
        );
        node.close().await.unwrap();
        drop(node); // an embedded database opens once per directory

        let node = open(dir.path(), store, clock.clone(), |_| {}).await;
        assert_eq!(list_offset(&node, "short", -2).await, 5, "{backend:?}: durable");
        assert_eq!(list_offset(&node, "bounded", -2).await, bounded_start);
        node.close().await.unwrap();
    }
}

#[tokio::test]
async fn the_brokers_log_retention_applies_to_topics_without_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TestClock::default());
    let store = Store(Backend::Fs, None);
    let node = open(dir.path(), store, clock.clone(), |config| {
        config.log_retention_ms = MINUTE
    })
    .await;
    node.create_topics(create("plain", &[]), 4).await;
    node.create_topics(create("own", &[("retention.ms", "-1")]), 4)
        .await;
    for topic in ["plain", "own"] {
        produce(&node, topic, 0).await;
    }
    let described = node
        .describe_topic_configs("plain", Some(&["retention.ms"]))
        .await
        .unwrap();
    assert_eq!(described[0].value.value, "60000");
    assert_eq!(described[0].value.source, ConfigSource::StaticBroker);
    clock.0.store(2 * MINUTE, Ordering::SeqCst);
    node.apply_retention().await.unwrap();
    assert_eq!(list_offset(&node, "plain", -2).await, 1);
    assert_eq!(
        list_offset(&node, "own", -2).await,
        0,
        "retention.ms=-1 keeps data forever"
    );
    node.close().await.unwrap();
}

#[tokio::test]
async fn a_search_by_timestamp_skips_the_segments_that_end_before_it_and_finds_the_first_record_reaching_it()
{
    for store in [Store(Backend::Fs, Some(2048)), Store(Backend::Memory, None)] {
        let dir = tempfile::tempdir().unwrap();
        let node = open(dir.path(), store, Arc::new(TestClock::default()), |_| {}).await;
        node.create_topics(create("timed", &[]), 4).await;
        // Offsets 0..10 at minutes 0..10, except offset 6, stamped back at minute 1 (timestamps out of order).
        for offset in 0..10 {
            let minute = if offset == 6 { 1 } else { offset };
            assert_eq!(produce(&node, "timed", minute * MINUTE).await, offset);
        }
        for (target, expected) in [
            (0, 0),
            (MINUTE, 1),
            (MINUTE + 1, 2),
            (5 * MINUTE + 1, 7),
            (9 * MINUTE, 9),
            (9 * MINUTE + 1, -1),
        ] {
            assert_eq!(
                list_offset(&node, "timed", target).await,
                expected,
                "{store:?} at {target}"
            );
        }
        node.close().await.unwrap();
    }
}

#[tokio::test]
async fn a_compacted_topic_keeps_the_latest_record_of_each_key_at_its_offset_across_a_restart() {
    for store in [Store(Backend::Fs, Some(2048)), Store(Backend::Sled, None)] {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(TestClock::default());
        let node = open(dir.path(), store, clock.clone(), |_| {}).await;
        for (topic, policy) in [
            ("table", "compact"),
            ("table-expiring", "compact,delete"),
            ("plain", "delete"),
        ] {
            let configs = [("cleanup.policy", policy), ("segment.bytes", "1048576")];
            assert_eq!(
                node.create_topics(create(topic, &configs), 4).await.topics[0].error_code,
                0
            );
            // Keys k0..k4, four rounds: offsets 0..20, then one more record the active unit keeps.
            for round in 0..4 {
                for key in 0..5 {
                    // About 650 bytes a batch: a 2 KiB segment holds three.
                    let value = format!("round {round} {}", ".".repeat(600));
                    produce_keyed(&node, topic, MINUTE, &format!("k{key}"), value.as_bytes()).await;
                }
            }
            produce_keyed(&node, topic, MINUTE, "k0", b"active").await;
        }
        clock.0.store(2 * MINUTE, Ordering::SeqCst);
        let before = fetch_all(&node, "plain").await;
        let done = node.compact_topics().await.unwrap();
        let mut topics: Vec<&str> = done.iter().map(|d| d.partition.topic()).collect();
        topics.sort_unstable();
        assert_eq!(topics, ["table", "table-expiring"], "{store:?}");
        assert!(
            node.compact_topics().await.unwrap().is_empty(),
            "nothing is dirty any more"
        );
        let expected: Vec<(i64, String, String)> = (15..20)
            .map(|offset| {
                (
                    offset,
                    format!("k{}", offset - 15),
                    format!("round 3 {}", ".".repeat(600)),
                )
            })
            .chain([(20, "k0".to_owned(), "active".to_owned())])
            .collect();
        for topic in ["table", "table-expiring"] {
            let records = fetch_all(&node, topic).await;
            // Each key's last record at its own offset; on storage-fs the active segment may hold more.
            assert!(records.ends_with(&expected), "{store:?} {topic}: {records:?}");
            assert_eq!(list_offset(&node, topic, -1).await, 21);
        }
        assert_eq!(
            fetch_all(&node, "plain").await,
            before,
            "a delete topic is not compacted"
        );
        node.close().await.unwrap();
        drop(node);
        let node = open(dir.path(), store, clock.clone(), |_| {}).await;
        assert!(
            fetch_all(&node, "table").await.ends_with(&expected),
            "{store:?}: durable"
        );
        node.close().await.unwrap();
    }
}

/// `log.cleaner.io.max.bytes.per.second`: a pass that reads its log twice (the offset map, then the rewrite) at
/// 256 KiB/s takes at least what those bytes take at that rate, less the one interval (0.3 s) whose bytes go
/// unpaid; unthrottled, the same pass over memory takes milliseconds.
#[tokio::test]
async fn the_cleaners_reads_and_writes_are_held_to_the_brokers_io_rate() {
    const RATE: f64 = 256.0 * 1024.0;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TestClock::default());
    let node = open(
        dir.path(),
        Store(Backend::Memory, None),
        clock.clone(),
        |config| {
            config.cleaner_io_max_bytes_per_second = RATE;
        },
    )
    .await;
    let configs = [("cleanup.policy", "compact")];
    assert_eq!(
        node.create_topics(create("table", &configs), 4).await.topics[0].error_code,
        0
    );
    // 300 records of 1 KiB over 10 keys: about 300 KiB to read twice.
    for index in 0..300 {
        produce_keyed(&node, "table", MINUTE, &format!("k{}", index % 10), &[b'x'; 1024]).await;
    }
    clock.0.store(2 * MINUTE, Ordering::SeqCst);
    let started = std::time::Instant::now();
    let done = node.compact_topics().await.unwrap();
    let took = started.elapsed();
    let [pass] = done.as_slice() else {
        panic!("one pass: {done:?}")
    };
    assert!(pass.cleaned.records_removed >= 280, "{pass:?}");
    let read = 2 * pass.cleaned.bytes_before;
    let least = std::time::Duration::from_secs_f64(read as f64 / RATE - 0.3);
    assert!(
        took >= least,
        "{read} bytes read at {RATE} bytes/s took {took:?}, less than {least:?}"
    );
    node.close().await.unwrap();
}

#[tokio::test]
async fn a_corrupt_keyless_batch_on_a_compacted_topic_is_corrupt_message_not_a_record_error() {
    let dir = tempfile::tempdir().unwrap();
    let node = open(
        dir.path(),
        Store(Backend::Fs, None),
        Arc::new(TestClock::default()),
        |_| {},
    )
    .await;
    node.create_topics(create("table", &[("cleanup.policy", "compact")]), 4)
        .await;
    let mut builder = BatchBuilder::new();
    builder.add(1_000, None, Some(b"no key"), &[]);
    let mut bytes = builder.build().unwrap().as_bytes().to_vec();
    // The value's last byte (the record ends with it and an empty header count): the record still decodes,
    // keyless, and only the CRC, which covers it, says the batch is corrupt.
    let last = bytes.len() - 2;
    bytes[last] ^= 0x01;
    let mut partition = produce_request::PartitionProduceData::default();
    partition.records = Some(bytes.into());
    let mut data = produce_request::TopicProduceData::default();
    data.name = TopicName(s("table"));
    data.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.topic_data = vec![data];
    let response = node.produce(request, 8).await;
    let answer = &response.responses[0].partition_responses[0];
    assert_eq!(
        answer.error_code, 2,
        "CORRUPT_MESSAGE, as Kafka checks the CRC first"
    );
    assert!(answer.record_errors.is_empty());
    node.close().await.unwrap();
}

/// The offset group `readers` has committed on `orders`/0 (−1: none).
async fn fetched(node: &Node) -> i64 {
    let mut request = OffsetFetchRequest::default();
    request.group_id = GroupId(s("readers"));
    let mut topic = offset_fetch_request::OffsetFetchRequestTopic::default();
    topic.name = TopicName(s("orders"));
    topic.partition_indexes = vec![0];
    request.topics = Some(vec![topic]);
    node.offset_fetch(request, 1).await.topics[0].partitions[0].committed_offset
}

/// How many groups ListGroups lists.
async fn listed(node: &Node) -> usize {
    node.list_groups(ListGroupsRequest::default(), 4)
        .await
        .groups
        .len()
}

/// `offsets.retention.minutes` through the node's housekeeping: a standalone consumer's committed offset is kept
/// until the retention has passed since its commit and a check is due (`offsets.retention.check.interval.ms`),
/// then it is gone — OffsetFetch answers no offset, ListGroups no longer lists the group — and stays gone after a
/// restart.
#[tokio::test]
async fn committed_offsets_expire_after_the_retention_at_the_next_check_and_stay_gone() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TestClock::default());
    clock.0.store(1_000_000, Ordering::SeqCst);
    let tune = |config: &mut NodeConfig| {
        config.offsets_retention_ms = 60_000;
        config.offsets_retention_check_interval_ms = 10_000;
        config.topics = vec![("orders".to_owned(), 1)];
    };
    let store = Store(Backend::Fs, None);
    let node = open(dir.path(), store, clock.clone(), tune).await;
    let mut commit = OffsetCommitRequest::default();
    commit.group_id = GroupId(s("readers"));
    let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
    topic.name = TopicName(s("orders"));
    let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
    partition.committed_offset = 3;
    topic.partitions.push(partition);
    commit.topics.push(topic);
    let committed = node.offset_commit(commit, 2).await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);

    // A millisecond before the retention has passed: kept, whatever the checks.
    clock.0.store(1_000_000 + 59_999, Ordering::SeqCst);
    node.housekeeping().await.unwrap();
    assert_eq!(fetched(&node).await, 3);
    // Past it, but no check due since the last one (10 s apart): still there.
    clock.0.store(1_000_000 + 60_000, Ordering::SeqCst);
    node.housekeeping().await.unwrap();
    assert_eq!(fetched(&node).await, 3);
    assert_eq!(listed(&node).await, 1);
    // The next check deletes it, and forgets the group.
    clock.0.store(1_000_000 + 69_999, Ordering::SeqCst);
    node.housekeeping().await.unwrap();
    assert_eq!(fetched(&node).await, -1);
    assert_eq!(listed(&node).await, 0);
    node.close().await.unwrap();
    let node = open(dir.path(), store, clock, tune).await;
    assert_eq!(fetched(&node).await, -1);
    assert_eq!(listed(&node).await, 0);
}
