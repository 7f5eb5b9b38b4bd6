//! How long a node takes to start after 1,000,000 offset commits (issue 51, item 4: goal ≤ 2 s), with the group
//! offset log rewritten as its live state by housekeeping (as `serve` runs it every 10 s) and without.
//!
//! `cargo run --release -p node --example offsets_start_up [COMMITS]` prints one line per run: commits written,
//! and the median of five starts (`Node::open` on the data directory, storage-fs), first with no commit at all.
#![allow(clippy::unwrap_used, clippy::expect_used)] // an example fails by panicking

use std::time::Instant;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use node::{Node, NodeConfig};
use storage_config::{Backend, DurabilityMode, StorageConfig};

/// Commits per OffsetCommit request (one consumer committing 1,000 partitions at a time).
const PER_REQUEST: usize = 1_000;
/// Requests between two housekeeping rounds (`serve`'s every 10 s, at 100 requests a second).
const REQUESTS_PER_HOUSEKEEPING: usize = 1_000;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn config(dir: &std::path::Path) -> NodeConfig {
    let mut storage = StorageConfig::for_backend(Backend::Fs, dir);
    if let StorageConfig::Fs(options) = &mut storage {
        options.durability = DurabilityMode::Buffered;
    }
    let mut config = NodeConfig::new(storage);
    config.topics = vec![("orders".to_owned(), PER_REQUEST as u32)];
    config
}

fn commit(round: usize) -> OffsetCommitRequest {
    let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
    topic.name = TopicName(s("orders"));
    topic.partitions = (0..PER_REQUEST)
        .map(|partition| {
            let mut committed = offset_commit_request::OffsetCommitRequestPartition::default();
            committed.partition_index = partition as i32;
            committed.committed_offset = round as i64;
            committed
        })
        .collect();
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(s("readers"));
    request.generation_id_or_member_epoch = -1;
    request.topics = vec![topic];
    request
}

async fn run(commits: usize, housekeeping: bool) {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::open(config(dir.path()), ("localhost".to_owned(), 9092))
        .await
        .unwrap();
    for round in 0..commits / PER_REQUEST {
        let answer = node.offset_commit(commit(round), 8).await;
        assert_eq!(answer.topics[0].partitions[0].error_code, 0);
        if housekeeping && (round + 1) % REQUESTS_PER_HOUSEKEEPING == 0 {
            node.compact_offsets().await.unwrap();
        }
    }
    node.close().await.unwrap();
    drop(node);
    let mut starts = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let node = Node::open(config(dir.path()), ("localhost".to_owned(), 9092))
            .await
            .unwrap();
        starts.push(started.elapsed());
        node.close().await.unwrap();
    }
    starts.sort();
    println!(
        "{commits} commits, housekeeping {}: start median {:.3} s (min {:.3}, max {:.3})",
        if housekeeping { "on " } else { "off" },
        starts[2].as_secs_f64(),
        starts[0].as_secs_f64(),
        starts[4].as_secs_f64()
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let commits: usize = std::env::args()
        .nth(1)
        .map_or(1_000_000, |n| n.parse().expect("a number of commits"));
    // The same node with no commit: what a start costs besides the offset log (a topic of 1,000 partitions).
    run(0, false).await;
    run(commits, false).await;
    run(commits, true).await;
}
