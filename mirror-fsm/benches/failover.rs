//! Failover and mirroring costs on the file-system backend, printed as Markdown tables (medians; ratios against
//! a baseline measured in the same run).
//!
//! - **STOPPING latency** of one partition holding the state of 100 mirrored producers (median of 15).
//! - **Total failover time** of 1,000 and 10,000 such partitions in one store, stopped one after another
//!   (`MIRRORLOG_BENCH_FAILOVER_PARTITIONS`, default `1000,10000`), at most 2,000 open at a time (each fs
//!   partition holds three open files).
//! - **Mirroring copy throughput**: a driver catching up a destination partition from a source partition of
//!   `MIRRORLOG_BENCH_MIRROR_MB` MiB (default 256) of 1 KiB batches, next to copying the source's segment files
//!   into new files through a 1 MiB buffer (median of 3).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use mirror_fsm::{Event, LocalFetcher, MirrorDriver, StateKind};
use partition_log::{LogConfig, PartitionLog};
use producer_state::{AppendOrigin, PsmConfig, TransactionVersion};
use record_format::{BatchBuilder, RecordBatch};
use storage::{PartitionId, Storage};
use storage_fs::{FsConfig, FsStorage};

const PRODUCERS: i64 = 100;
/// Partitions open at once in the failover measurement (file-descriptor limit).
const FAILOVER_GROUP: usize = 2_000;

fn env_list(name: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(name)
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn config(cluster: &str) -> LogConfig {
    LogConfig {
        producer_state: PsmConfig {
            cluster_id: Some(cluster.to_owned()),
            ..PsmConfig::default()
        },
        ..LogConfig::default()
    }
}

fn batch(producer: i64, sequence: i32, value_len: usize) -> RecordBatch {
    let value = vec![b'm'; value_len];
    let mut builder = BatchBuilder::new().producer(producer, 0, sequence);
    builder.add(1_700_000_000_000, None, Some(&value), &[]);
    builder.build().unwrap()
}

/// A source log on `store`, filled with `batches` batches round-robin over `producers` producers.
async fn source_log(
    store: &FsStorage,
    topic: &str,
    producers: i64,
    batches: usize,
    value_len: usize,
) -> PartitionLog {
    let partition = store.create(&PartitionId::new(topic, 0).unwrap()).await.unwrap();
    let (mut log, _) = PartitionLog::open(partition, config("source"), 0).await.unwrap();
    for i in 0..batches {
        let producer = i as i64 % producers;
        let sequence = (i as i64 / producers) as i32;
        log.append_as_leader(
            vec![batch(producer, sequence, value_len)],
            AppendOrigin::Client,
            TransactionVersion::V0,
        )
        .await
        .unwrap();
    }
    let end = log.log_end_offset();
    log.advance_high_watermark(end);
    log
}

/// A destination partition mirroring `fetcher`'s source, caught up.
async fn mirrored(
    store: &FsStorage,
    topic: &str,
    fetcher: &mut LocalFetcher,
) -> (PartitionLog, MirrorDriver) {
    let partition = store.create(&PartitionId::new(topic, 0).unwrap()).await.unwrap();
    let (mut log, _) = PartitionLog::open(partition, config("destination"), 0)
        .await
        .unwrap();
    let mut driver = MirrorDriver::recover(&mut log, fetcher, "destination")
        .await
        .unwrap();
    driver
        .handle(
            &mut log,
            fetcher,
            Event::Start {
                source_cluster_id: "source".to_owned(),
            },
        )
        .await
        .unwrap();
    driver.catch_up(&mut log, fetcher).await.unwrap();
    (log, driver)
}

async fn stop(log: &mut PartitionLog, driver: &mut MirrorDriver, fetcher: &mut LocalFetcher) -> Duration {
    let started = Instant::now();
    driver.handle(log, fetcher, Event::Stop).await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(driver.state().kind(), StateKind::Stopped);
    elapsed
}

fn copy_files(from: &Path, to: &Path) -> (Duration, u64) {
    let started = Instant::now();
    let mut bytes = 0;
    let mut buffer = vec![0u8; 1 << 20];
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "log") {
            let mut input = std::fs::File::open(&path).unwrap();
            let mut output = std::fs::File::create(to.join(path.file_name().unwrap())).unwrap();
            loop {
                let n = input.read(&mut buffer).unwrap();
                if n == 0 {
                    break;
                }
                output.write_all(&buffer[..n]).unwrap();
                bytes += n as u64;
            }
        }
    }
    (started.elapsed(), bytes)
}

async fn stopping_latency() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStorage::open(FsConfig::new(dir.path())).unwrap();
    let source = mirror_fsm::shared(source_log(&store, "source", PRODUCERS, 1_000, 100).await);
    let mut samples = Vec::new();
    for run in 0..15 {
        let mut fetcher = LocalFetcher::new(&source, "source");
        let (mut log, mut driver) = mirrored(&store, &format!("dest{run}"), &mut fetcher).await;
        assert_eq!(log.producer_state().producer_count(), PRODUCERS as usize);
        samples.push(stop(&mut log, &mut driver, &mut fetcher).await);
    }
    println!("## STOPPING latency, one partition, {PRODUCERS} producers of state (fs)\n");
    println!(
        "median {:.2} ms over 15 runs (min {:.2} ms, max {:.2} ms)\n",
        median(samples.clone()).as_secs_f64() * 1e3,
        samples.iter().min().unwrap().as_secs_f64() * 1e3,
        samples.iter().max().unwrap().as_secs_f64() * 1e3
    );
}

async fn failover(partitions: usize) -> (Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStorage::open(FsConfig::new(dir.path())).unwrap();
    let source = mirror_fsm::shared(source_log(&store, "source", PRODUCERS, PRODUCERS as usize, 100).await);
    let mut fetcher = LocalFetcher::new(&source, "source");
    // An fs partition holds three open files; this machine allows 20,000, so the partitions are set up and
    // stopped a group at a time. The stops are sequential either way: the total is the sum of their times.
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < partitions {
        let group = (partitions - done).min(FAILOVER_GROUP);
        let mut mirrors = Vec::with_capacity(group);
        for i in done..done + group {
            mirrors.push(mirrored(&store, &format!("d{i}"), &mut fetcher).await);
        }
        let started = Instant::now();
        for (log, driver) in &mut mirrors {
            stop(log, driver, &mut fetcher).await;
        }
        total += started.elapsed();
        done += group;
    }
    (total, total / partitions as u32)
}

async fn mirroring_throughput(megabytes: usize) {
    let mut ours = Vec::new();
    let mut raw = Vec::new();
    let batches = (megabytes << 20) / 1024;
    let source_dir = tempfile::tempdir().unwrap();
    let source_store = FsStorage::open(FsConfig::new(source_dir.path())).unwrap();
    let source = mirror_fsm::shared(source_log(&source_store, "src", 1_000, batches, 1024 - 80).await);
    let source_bytes: u64 = {
        let path = source_dir.path().join("src-0");
        std::fs::read_dir(&path)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
            .map(|e| e.metadata().unwrap().len())
            .sum()
    };
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let store = FsStorage::open(FsConfig::new(dir.path())).unwrap();
        let mut fetcher = LocalFetcher::new(&source, "source");
        let started = Instant::now();
        let (log, _driver) = mirrored(&store, "dst", &mut fetcher).await;
        ours.push(started.elapsed());
        assert_eq!(log.log_end_offset(), source.try_read().unwrap().log_end_offset());
        let copy_dir = tempfile::tempdir().unwrap();
        let (elapsed, bytes) = copy_files(&source_dir.path().join("src-0"), copy_dir.path());
        assert_eq!(bytes, source_bytes);
        raw.push(elapsed);
    }
    let mb = source_bytes as f64 / (1 << 20) as f64;
    let (ours, raw) = (median(ours), median(raw));
    println!("## Mirroring copy throughput, {mb:.0} MiB of 1 KiB batches (fs → fs)\n");
    println!("| mirror catch-up MB/s | raw file copy MB/s | ratio |");
    println!("|---|---|---|");
    println!(
        "| {:.0} | {:.0} | {:.2} |\n",
        mb / ours.as_secs_f64(),
        mb / raw.as_secs_f64(),
        raw.as_secs_f64() / ours.as_secs_f64()
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    println!("# mirror-fsm: failover and mirroring (fs backend)\n");
    runtime.block_on(stopping_latency());
    println!("## Total failover time ({PRODUCERS} producers of state per partition, sequential, fs)\n");
    println!("| partitions | total | per partition |");
    println!("|---|---|---|");
    for partitions in env_list("MIRRORLOG_BENCH_FAILOVER_PARTITIONS", &[1_000, 10_000]) {
        let (total, each) = runtime.block_on(failover(partitions));
        println!(
            "| {partitions} | {:.2} s | {:.2} ms |",
            total.as_secs_f64(),
            each.as_secs_f64() * 1e3
        );
    }
    println!();
    let megabytes = env_list("MIRRORLOG_BENCH_MIRROR_MB", &[256])[0];
    runtime.block_on(mirroring_throughput(megabytes));
}
