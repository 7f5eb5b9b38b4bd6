//! Produce latency on a compacted partition with the log cleaner running against without it (issue 51, ADR 0055):
//! a pass plans and writes under the partition's lock and reads and rewrites without it, so a produce waits at
//! most for a plan or a write, not for a pass.
//!
//! A node (storage-fs, 1 MiB segments, buffered durability) holds a compacted topic of one partition filled with
//! 48 MiB of 1 KiB records over 4,000 keys. A producer then sends 4,000 keyed 1 KiB records one at a time, first
//! alone, then while a cleaner task runs passes back to back (`min.cleanable.dirty.ratio=0`, so each round
//! rewrites the partition again); the p50 and p99 of each produce's latency are printed.
//! `cargo run --release -p node --example produce_during_compaction`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // an example fails by panicking

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use node::{Node, NodeConfig};
use record_format::BatchBuilder;
use storage_config::{Backend, DurabilityMode, StorageConfig};

const KEYS: usize = 4_000;
const FILL_RECORDS: usize = 48_000;
const MEASURED: usize = 4_000;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn produce_request(key: usize) -> ProduceRequest {
    let mut builder = BatchBuilder::new();
    builder.add(
        1_000,
        Some(format!("key-{key:05}").as_bytes()),
        Some(&[b'v'; 1_000]),
        &[],
    );
    let mut partition = produce_request::PartitionProduceData::default();
    partition.records = Some(builder.build().unwrap().into_bytes());
    let mut data = produce_request::TopicProduceData::default();
    data.name = TopicName(s("table"));
    data.partition_data = vec![partition];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.topic_data = vec![data];
    request
}

async fn produce(node: &Node, key: usize) -> Duration {
    let started = Instant::now();
    let answer = node.produce(produce_request(key), 8).await;
    assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    started.elapsed()
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1_000.0
}

async fn measure(node: &Node) -> (f64, f64, f64) {
    let mut latencies = Vec::with_capacity(MEASURED);
    for n in 0..MEASURED {
        latencies.push(produce(node, n % KEYS).await);
    }
    latencies.sort();
    (
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0),
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut storage = StorageConfig::for_backend(Backend::Fs, dir.path());
    if let StorageConfig::Fs(options) = &mut storage {
        options.segment_bytes = Some(1 << 20);
        options.durability = DurabilityMode::Buffered;
    }
    let node = Arc::new(
        Node::open(NodeConfig::new(storage), ("localhost".to_owned(), 9092))
            .await
            .unwrap(),
    );
    let mut topic = create_topics_request::CreatableTopic::default();
    topic.name = TopicName(s("table"));
    topic.num_partitions = 1;
    topic.replication_factor = 1;
    topic.configs = [("cleanup.policy", "compact"), ("min.cleanable.dirty.ratio", "0")]
        .iter()
        .map(|(name, value)| {
            let mut config = create_topics_request::CreatableTopicConfig::default();
            config.name = s(name);
            config.value = Some(s(value));
            config
        })
        .collect();
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![topic];
    assert_eq!(node.create_topics(request, 4).await.topics[0].error_code, 0);
    for n in 0..FILL_RECORDS {
        produce(&node, n % KEYS).await;
    }

    let (alone_p50, alone_p99, alone_max) = measure(&node).await;

    let running = Arc::new(AtomicBool::new(true));
    let passes = Arc::new(AtomicUsize::new(0));
    let cleaner = {
        let (node, running, passes) = (node.clone(), running.clone(), passes.clone());
        tokio::spawn(async move {
            while running.load(Ordering::SeqCst) {
                let done = node.compact_topics().await.unwrap();
                passes.fetch_add(done.len(), Ordering::SeqCst);
                tokio::task::yield_now().await;
            }
        })
    };
    let (busy_p50, busy_p99, busy_max) = measure(&node).await;
    running.store(false, Ordering::SeqCst);
    cleaner.await.unwrap();
    println!(
        "produce latency, 1 KiB records: alone p50 {alone_p50:.3} ms p99 {alone_p99:.3} ms max {alone_max:.1} ms; \
         with the cleaner ({} passes) p50 {busy_p50:.3} ms p99 {busy_p99:.3} ms max {busy_max:.1} ms",
        passes.load(Ordering::SeqCst)
    );
    Arc::try_unwrap(node).unwrap().close().await.unwrap();
}
