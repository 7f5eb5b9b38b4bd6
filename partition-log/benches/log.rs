//! What the partition log costs over its storage, on the in-memory and file-system backends.
//!
//! Prints Markdown tables with medians of three runs and ratios to a baseline measured in the same run:
//!
//! - **append**: CLIENT appends of idempotent 1 KiB batches from 1,000 producers through
//!   `PartitionLog::append_as_leader`, next to appending the same batches (offsets already assigned) straight to
//!   the same backend's `PartitionStorage::append`;
//! - **recovery** of a partition of 1,000,000 small batches (1,000 producers): `PartitionLog::open` after a
//!   crash (latest roll snapshot plus the tail), after a clean close, and with every snapshot deleted (a full
//!   replay), next to opening the storage and reading every batch raw.
//!
//! Sizes: `MIRRORLOG_BENCH_APPENDS` (default 100,000 appends) and `MIRRORLOG_BENCH_RECOVERY_BATCHES` (default
//! 1,000,000).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use partition_log::{LogConfig, PartitionLog};
use producer_state::{AppendOrigin, TransactionVersion};
use record_format::{BatchBuilder, RecordBatch};
use storage::{MemoryStorage, PartitionId, Storage};
use storage_fs::{FsConfig, FsStorage};

const RUNS: usize = 3;
const PRODUCERS: i64 = 1_000;

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Client batches as a producer sends them (base offset 0), round-robin over the producers.
fn client_batches(count: usize, value_len: usize) -> Vec<RecordBatch> {
    let value = vec![b'x'; value_len];
    (0..count)
        .map(|i| {
            let producer = i as i64 % PRODUCERS;
            let sequence = (i as i64 / PRODUCERS) as i32;
            let mut builder = BatchBuilder::new().producer(producer, 0, sequence);
            builder.add(1_700_000_000_000, None, Some(&value), &[]);
            builder.build().unwrap()
        })
        .collect()
}

/// A uniquely owned copy (a batch fresh off the network): assigning its offset edits it in place.
fn owned(batch: &RecordBatch) -> RecordBatch {
    RecordBatch::parse(Bytes::copy_from_slice(batch.as_bytes())).unwrap()
}

/// The same batches with their log offsets, for the raw storage baseline.
fn with_offsets(batches: &[RecordBatch]) -> Vec<RecordBatch> {
    batches
        .iter()
        .enumerate()
        .map(|(offset, batch)| {
            let mut batch = owned(batch);
            batch.set_base_offset(offset as i64);
            batch
        })
        .collect()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[derive(Clone, Copy)]
enum Backend {
    Memory,
    Fs,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Memory => "memory",
            Backend::Fs => "fs",
        }
    }

    fn store(self, dir: &Path, memory: &MemoryStorage) -> Box<dyn Storage> {
        match self {
            Backend::Memory => Box::new(memory.clone()),
            Backend::Fs => Box::new(FsStorage::open(FsConfig::new(dir)).unwrap()),
        }
    }
}

fn id() -> PartitionId {
    PartitionId::new("bench", 0).unwrap()
}

async fn append_raw(backend: Backend, batches: &[RecordBatch]) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let memory = MemoryStorage::new();
    let mut partition = backend.store(dir.path(), &memory).create(&id()).await.unwrap();
    let started = Instant::now();
    for batch in batches {
        partition.append(std::slice::from_ref(batch)).await.unwrap();
    }
    started.elapsed()
}

async fn append_log(backend: Backend, batches: Vec<RecordBatch>) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let memory = MemoryStorage::new();
    let partition = backend.store(dir.path(), &memory).create(&id()).await.unwrap();
    let (mut log, _) = PartitionLog::open(partition, LogConfig::default(), 0)
        .await
        .unwrap();
    let started = Instant::now();
    for batch in batches {
        let outcome = log
            .append_as_leader(vec![batch], AppendOrigin::Client, TransactionVersion::V0)
            .await
            .unwrap();
        assert!(!outcome.duplicate);
    }
    started.elapsed()
}

/// Fills a partition for the recovery measurements; returns the store handles keeping it.
async fn fill(backend: Backend, dir: &Path, memory: &MemoryStorage, batches: &[RecordBatch]) {
    let partition = backend.store(dir, memory).create(&id()).await.unwrap();
    let config = LogConfig {
        segment_bytes: 16 << 20,
        ..LogConfig::default()
    };
    let (mut log, _) = PartitionLog::open(partition, config, 0).await.unwrap();
    for chunk in batches.chunks(1) {
        log.append_as_leader(
            vec![owned(&chunk[0])],
            AppendOrigin::Client,
            TransactionVersion::V0,
        )
        .await
        .unwrap();
    }
    log.flush(storage::Durability::Sync).await.unwrap();
    // Dropped without close: the last snapshot is the last roll's.
}

async fn open_log(backend: Backend, dir: &Path, memory: &MemoryStorage) -> (Duration, u64) {
    let started = Instant::now();
    let partition = backend.store(dir, memory).open(&id()).await.unwrap();
    let (log, report) = PartitionLog::open(partition, LogConfig::default(), 0)
        .await
        .unwrap();
    let elapsed = started.elapsed();
    // Leave it as found: every measured open starts from the same state.
    drop(log);
    (elapsed, report.batches_replayed)
}

async fn read_raw(backend: Backend, dir: &Path, memory: &MemoryStorage) -> Duration {
    let started = Instant::now();
    let partition = backend.store(dir, memory).open(&id()).await.unwrap();
    let mut offset = partition.log_start_offset();
    let mut count = 0u64;
    while offset < partition.log_end_offset() {
        let batches = partition.read(offset, 4 << 20).await.unwrap();
        for batch in &batches {
            std::hint::black_box(batch.producer_id());
            count += 1;
        }
        offset = batches.last().unwrap().next_offset();
    }
    std::hint::black_box(count);
    started.elapsed()
}

/// Deletes every snapshot not in `keep` (recovery writes one at the log end; the next run must not find it).
async fn keep_snapshots(backend: Backend, dir: &Path, memory: &MemoryStorage, keep: &[i64]) -> Vec<i64> {
    let mut partition = backend.store(dir, memory).open(&id()).await.unwrap();
    for offset in partition.snapshot_offsets().await.unwrap() {
        if !keep.contains(&offset) {
            partition.delete_snapshot(offset).await.unwrap();
        }
    }
    partition.snapshot_offsets().await.unwrap()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let appends = env_count("MIRRORLOG_BENCH_APPENDS", 100_000);
    let recovery_batches = env_count("MIRRORLOG_BENCH_RECOVERY_BATCHES", 1_000_000);

    println!("# partition log over its storage (median of {RUNS})\n");
    println!("## CLIENT appends, idempotent 1 KiB batches, {PRODUCERS} producers, {appends} appends\n");
    println!("| backend | log appends/s | raw storage appends/s | log cost over raw |");
    println!("|---|---|---|---|");
    let batches = client_batches(appends, 1024 - 80);
    let raw_batches = with_offsets(&batches);
    for backend in [Backend::Memory, Backend::Fs] {
        let (mut log, mut raw) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            let fresh: Vec<RecordBatch> = batches.iter().map(owned).collect();
            log.push(runtime.block_on(append_log(backend, fresh)));
            raw.push(runtime.block_on(append_raw(backend, &raw_batches)));
        }
        let (log, raw) = (median(log), median(raw));
        let rate = |elapsed: Duration| appends as f64 / elapsed.as_secs_f64();
        println!(
            "| {} | {:.0} | {:.0} | {:+.1} % |",
            backend.name(),
            rate(log),
            rate(raw),
            (log.as_secs_f64() / raw.as_secs_f64() - 1.0) * 100.0
        );
    }

    println!("\n## Recovery of {recovery_batches} batches ({PRODUCERS} producers, 16 MiB segments)\n");
    println!("| backend | raw open + read | open after crash (last roll snapshot) | after clean close | no snapshot (full replay) | full replay / raw |");
    println!("|---|---|---|---|---|---|");
    let small = client_batches(recovery_batches, 40);
    for backend in [Backend::Memory, Backend::Fs] {
        let dir = tempfile::tempdir().unwrap();
        let memory = MemoryStorage::new();
        runtime.block_on(fill(backend, dir.path(), &memory, &small));
        let raw = median(
            (0..RUNS)
                .map(|_| runtime.block_on(read_raw(backend, dir.path(), &memory)))
                .collect(),
        );
        let roll_snapshots = runtime.block_on(async {
            let partition = backend.store(dir.path(), &memory).open(&id()).await.unwrap();
            partition.snapshot_offsets().await.unwrap()
        });
        let crash = median(
            (0..RUNS)
                .map(|_| {
                    runtime.block_on(keep_snapshots(backend, dir.path(), &memory, &roll_snapshots));
                    runtime.block_on(open_log(backend, dir.path(), &memory)).0
                })
                .collect(),
        );
        // A clean close leaves a snapshot at the end.
        runtime.block_on(async {
            let partition = backend.store(dir.path(), &memory).open(&id()).await.unwrap();
            let (log, _) = PartitionLog::open(partition, LogConfig::default(), 0)
                .await
                .unwrap();
            log.close().await.unwrap();
        });
        let clean = runtime.block_on(open_log(backend, dir.path(), &memory)).0;
        let mut full = Vec::new();
        for _ in 0..RUNS {
            runtime.block_on(keep_snapshots(backend, dir.path(), &memory, &[]));
            let (elapsed, replayed) = runtime.block_on(open_log(backend, dir.path(), &memory));
            assert_eq!(replayed, recovery_batches as u64);
            full.push(elapsed);
        }
        let full = median(full);
        println!(
            "| {} | {:.0} ms | {:.0} ms | {:.1} ms | {:.0} ms | {:.2} |",
            backend.name(),
            raw.as_secs_f64() * 1e3,
            crash.as_secs_f64() * 1e3,
            clean.as_secs_f64() * 1e3,
            full.as_secs_f64() * 1e3,
            full.as_secs_f64() / raw.as_secs_f64()
        );
    }
}
