//! The log cleaner's throughput against a raw read and write of the same bytes (issue 51: goal ≥ 0.5×).
//!
//! A storage-fs partition of 8 MiB segments is filled with 1 KiB records of 10,000 keys, each key written six
//! times (about 64 MiB); a compaction pass then reads it twice (the offset map, the rewrite) and writes what stays
//! (a sixth). The baseline reads every batch of the same log and writes each to a fresh partition — the bytes a
//! cleaner must at least move, once — with one sync at the end, as the pass syncs each rewritten segment. Both
//! are timed three times on fresh copies; the medians and their ratio (throughput = bytes of the log ÷ time) are
//! printed. `cargo run --release -p partition-log --example cleaner_throughput`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // an example fails by panicking

use std::path::Path;
use std::time::{Duration, Instant};

use partition_log::{CompactionPolicy, LogConfig, PartitionLog};
use producer_state::{AppendOrigin, TransactionVersion};
use record_format::BatchBuilder;
use storage::{Durability, PartitionId, Storage};
use storage_fs::{FsConfig, FsStorage};

const KEYS: usize = 10_000;
const WRITES_PER_KEY: usize = 6;
const VALUE_BYTES: usize = 1_000;
const RECORDS_PER_BATCH: usize = 10;

fn store(dir: &Path) -> FsStorage {
    FsStorage::open(FsConfig {
        segment_bytes: 8 << 20,
        ..FsConfig::new(dir)
    })
    .unwrap()
}

fn id() -> PartitionId {
    PartitionId::new("compacted", 0).unwrap()
}

/// Fills a fresh log; returns its bytes.
async fn fill(dir: &Path) -> u64 {
    let store = store(dir);
    let (mut log, _) = PartitionLog::open(store.create(&id()).await.unwrap(), LogConfig::default(), 0)
        .await
        .unwrap();
    let value = vec![b'v'; VALUE_BYTES];
    let mut written = 0usize;
    while written < KEYS * WRITES_PER_KEY {
        let mut builder = BatchBuilder::new();
        for _ in 0..RECORDS_PER_BATCH {
            let key = format!("key-{:05}", written % KEYS);
            builder.add(1_000, Some(key.as_bytes()), Some(&value), &[]);
            written += 1;
        }
        log.append_as_leader(
            vec![builder.build().unwrap()],
            AppendOrigin::Client,
            TransactionVersion::V0,
        )
        .await
        .unwrap();
    }
    // One batch in the active segment, which a pass leaves alone.
    log.roll().await.unwrap();
    let mut last = BatchBuilder::new();
    last.add(1_000, Some(b"last"), Some(&value), &[]);
    log.append_as_leader(
        vec![last.build().unwrap()],
        AppendOrigin::Client,
        TransactionVersion::V0,
    )
    .await
    .unwrap();
    let end = log.log_end_offset();
    log.advance_high_watermark(end);
    log.flush(Durability::Sync).await.unwrap();
    let bytes = log.size_bytes().await.unwrap();
    log.close().await.unwrap();
    bytes
}

async fn clean(dir: &Path) -> Duration {
    let store = store(dir);
    let (mut log, _) = PartitionLog::open(store.open(&id()).await.unwrap(), LogConfig::default(), 0)
        .await
        .unwrap();
    let started = Instant::now();
    let cleaned = log
        .clean(CompactionPolicy::default(), 2_000)
        .await
        .unwrap()
        .expect("a pass");
    let elapsed = started.elapsed();
    assert!(cleaned.bytes_after < cleaned.bytes_before / 4, "{cleaned:?}");
    elapsed
}

async fn raw_copy(dir: &Path, into: &Path) -> Duration {
    let source = store(dir);
    let target = store(into);
    let from = source.open(&id()).await.unwrap();
    let mut to = target.create(&id()).await.unwrap();
    let started = Instant::now();
    let mut offset = from.log_start_offset();
    while offset < from.log_end_offset() {
        let batches = from.read(offset, 4 << 20).await.unwrap();
        offset = batches.last().unwrap().next_offset();
        to.append(&batches).await.unwrap();
    }
    to.flush(Durability::Sync).await.unwrap();
    started.elapsed()
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let (mut cleans, mut copies, mut bytes) = (Vec::new(), Vec::new(), 0);
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        bytes = fill(dir.path()).await;
        let copy = tempfile::tempdir().unwrap();
        copies.push(raw_copy(dir.path(), copy.path()).await);
        cleans.push(clean(dir.path()).await);
    }
    let mib = bytes as f64 / (1024.0 * 1024.0);
    let (clean, copy) = (median(cleans), median(copies));
    println!(
        "log of {mib:.1} MiB: cleaner {:.0} MiB/s ({:.3} s), raw read+write {:.0} MiB/s ({:.3} s): {:.2}×",
        mib / clean.as_secs_f64(),
        clean.as_secs_f64(),
        mib / copy.as_secs_f64(),
        copy.as_secs_f64(),
        copy.as_secs_f64() / clean.as_secs_f64()
    );
}
