//! Produce throughput on one partition while idle consumers long-poll others (issue 54): each waiting fetch
//! should cost nothing until its own partition changes. A node (memory backend) with a topic `busy` of one
//! partition and a topic `idle` of `IDLE` partitions; first 5,000 produces to `busy` alone, then the same with one
//! long-polling fetch (30 s, one byte) waiting on each `idle` partition. Five rounds each, alternating; the median
//! produces per second of each and their ratio are printed.
//! `cargo run --release -p node --example idle_long_polls`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // an example fails by panicking

use std::sync::Arc;
use std::time::Instant;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use node::{Node, NodeConfig};
use record_format::BatchBuilder;
use storage_config::{Backend, StorageConfig};

const IDLE: i32 = 1_000;
const PRODUCES: usize = 5_000;
const ROUNDS: usize = 5;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn produce_request() -> ProduceRequest {
    let mut builder = BatchBuilder::new();
    builder.add(1_000, Some(b"k"), Some(&[b'v'; 100]), &[]);
    let mut data = produce_request::PartitionProduceData::default();
    data.records = Some(builder.build().unwrap().as_bytes().clone());
    let mut topic = produce_request::TopicProduceData::default();
    topic.name = TopicName(s("busy"));
    topic.partition_data = vec![data];
    let mut request = ProduceRequest::default();
    request.acks = 1;
    request.topic_data = vec![topic];
    request
}

fn long_poll(partition: i32) -> FetchRequest {
    let mut wanted_partition = fetch_request::FetchPartition::default();
    wanted_partition.partition = partition;
    wanted_partition.partition_max_bytes = 1 << 20;
    let mut wanted = fetch_request::FetchTopic::default();
    wanted.topic = TopicName(s("idle"));
    wanted.partitions = vec![wanted_partition];
    let mut request = FetchRequest::default();
    request.max_wait_ms = 30_000;
    request.min_bytes = 1;
    request.max_bytes = 1 << 20;
    request.topics = vec![wanted];
    request
}

async fn produces_per_second(node: &Node) -> f64 {
    let started = Instant::now();
    for _ in 0..PRODUCES {
        let answer = node.produce(produce_request(), 8).await;
        assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    }
    PRODUCES as f64 / started.elapsed().as_secs_f64()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = NodeConfig::new(StorageConfig::for_backend(Backend::Memory, dir.path()));
    config.topics = vec![("busy".to_owned(), 1), ("idle".to_owned(), IDLE as u32)];
    let node = Arc::new(Node::open(config, ("localhost".to_owned(), 9092)).await.unwrap());
    let (mut alone, mut polled) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        alone.push(produces_per_second(&node).await);
        // `IDLE_LONG_POLLS_OFF=1`: the second measurement without polls too (a control of the first).
        let idle = if std::env::var_os("IDLE_LONG_POLLS_OFF").is_some() {
            0
        } else {
            IDLE
        };
        let polls: Vec<_> = (0..idle)
            .map(|partition| {
                let node = node.clone();
                tokio::spawn(async move { node.fetch(long_poll(partition), 12).await })
            })
            .collect();
        // Every poll has read its partition once and waits (each answers only at 30 s or on its own append).
        for _ in 0..1_000 {
            tokio::task::yield_now().await;
        }
        polled.push(produces_per_second(&node).await);
        eprintln!(
            "round: alone {:.0}, polled {:.0}",
            alone[alone.len() - 1],
            polled[polled.len() - 1]
        );
        // Every poll ended (aborted and dropped) before the next measurement alone.
        for poll in &polls {
            poll.abort();
        }
        for poll in polls {
            let _ = poll.await;
        }
    }
    let (alone, polled) = (median(alone), median(polled));
    println!(
        "produces per second on one partition: alone {alone:.0}; with {IDLE} idle long polls {polled:.0} \
         ({:.2}x)",
        polled / alone
    );
}
