//! Mirroring over loopback (issue 35, item 5): a partition of `mirrorlog serve` (fs, 256 MiB of 1 KiB batches by
//! default, `MIRRORLOG_BENCH_MIB`) mirrored, from the session's start to caught up, into a partition log on fs by
//! `mirror-fsm`'s driver with a `KafkaFetcher`, against a raw TCP copy of the same bytes in the same run — a socket streaming the source's segment into a file, 1 MiB at a time. Runs
//! alternate (ADR 0024); prints the median rate of each and the ratio (target ≥ 0.7).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark fails by panicking

use std::path::Path;
use std::time::{Duration, Instant};

use broker::{BrokerConfig, Server};
use mirror_fsm::{Event, MirrorDriver};
use mirror_link::{FetcherConfig, KafkaFetcher};
use partition_log::{LogConfig, PartitionLog};
use record_format::{BatchBuilder, RecordBatch};
use storage::PartitionId;
use storage_config::{Backend, StorageConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOPIC: &str = "mirrored";
const BATCH_VALUE: usize = 1024 - 80;
const RUNS: usize = 3;

fn megabytes() -> usize {
    std::env::var("MIRRORLOG_BENCH_MIB")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(256)
}

/// Writes `bytes` worth of 1 KiB batches into a new partition of an fs store at `dir`.
async fn fill_source(dir: &Path, bytes: usize) -> u64 {
    let store = StorageConfig::for_backend(Backend::Fs, dir).open().unwrap();
    let partition = store.create(&PartitionId::new(TOPIC, 0).unwrap()).await.unwrap();
    let (mut log, _) = PartitionLog::open(partition, LogConfig::default(), 0)
        .await
        .unwrap();
    let value = vec![7u8; BATCH_VALUE];
    let mut written = 0u64;
    let mut offset = 0i64;
    while (written as usize) < bytes {
        let batches: Vec<RecordBatch> = (0..1024)
            .map(|index| {
                let mut builder = BatchBuilder::new().base_offset(offset + index);
                builder.add(1_700_000_000_000, None, Some(&value), &[]);
                builder.build().unwrap()
            })
            .collect();
        written += batches.iter().map(|batch| batch.size() as u64).sum::<u64>();
        offset += 1024;
        log.append_as_follower(batches).await.unwrap();
    }
    let end = log.log_end_offset();
    log.advance_high_watermark(end);
    log.close().await.unwrap();
    written
}

/// Mirrors the source into a fresh fs partition; returns the time taken.
async fn mirror(address: &str, dir: &Path, expected_end: i64) -> Duration {
    let store = StorageConfig::for_backend(Backend::Fs, dir).open().unwrap();
    let partition = store.create(&PartitionId::new(TOPIC, 0).unwrap()).await.unwrap();
    let (mut log, _) = PartitionLog::open(partition, LogConfig::default(), 0)
        .await
        .unwrap();
    let mut fetcher = KafkaFetcher::new(FetcherConfig::new(address), TOPIC, 0);
    let mut driver = MirrorDriver::recover(&mut log, &mut fetcher, "destination")
        .await
        .unwrap();
    let start = Event::Start {
        source_cluster_id: "bench-source".to_owned(),
    };
    // The session's start (its state records and read-only flag, each synced) is not the copy's rate.
    driver.handle(&mut log, &mut fetcher, start).await.unwrap();
    let started = Instant::now();
    while log.log_end_offset() < expected_end {
        driver.catch_up(&mut log, &mut fetcher).await.unwrap();
    }
    log.flush(storage::Durability::Buffered).await.unwrap();
    let elapsed = started.elapsed();
    log.close().await.unwrap();
    elapsed
}

/// The baseline: the source's segment bytes streamed over a loopback socket into a file, 1 MiB at a time.
async fn raw_copy(segment: &Path, target: &Path) -> Duration {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let source = segment.to_owned();
    let sender = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut file = tokio::fs::File::open(&source).await.unwrap();
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            let read = file.read(&mut buffer).await.unwrap();
            if read == 0 {
                break;
            }
            socket.write_all(&buffer[..read]).await.unwrap();
        }
    });
    let started = Instant::now();
    let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
    let mut out = tokio::fs::File::create(target).await.unwrap();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = socket.read(&mut buffer).await.unwrap();
        if read == 0 {
            break;
        }
        out.write_all(&buffer[..read]).await.unwrap();
    }
    out.flush().await.unwrap();
    let elapsed = started.elapsed();
    sender.await.unwrap();
    elapsed
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let data = tempfile::tempdir().unwrap();
    let source_dir = data.path().join("source");
    let bytes = fill_source(&source_dir, megabytes() << 20).await;
    let segment = std::fs::read_dir(source_dir.join(format!("{TOPIC}-0")))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "log"))
        .unwrap();
    let expected_end = {
        let store = StorageConfig::for_backend(Backend::Fs, &source_dir)
            .open()
            .unwrap();
        store
            .open(&PartitionId::new(TOPIC, 0).unwrap())
            .await
            .unwrap()
            .log_end_offset()
    };
    let storage = StorageConfig::for_backend(Backend::Fs, &source_dir);
    let mut config = BrokerConfig::new("127.0.0.1:0".parse().unwrap(), storage);
    config.node.cluster_id = "bench-source".to_owned();
    let server = Server::bind(config).await.unwrap();
    let address = server.local_addr().unwrap().to_string();
    let stop = std::sync::Arc::new(tokio::sync::Notify::new());
    let stopped = stop.clone();
    let serving = tokio::spawn(async move { server.run(async move { stopped.notified().await }).await });

    let mib = bytes as f64 / f64::from(1 << 20);
    let (mut mirrored, mut copied) = (Vec::new(), Vec::new());
    for run in 0..RUNS {
        let target = data.path().join(format!("run-{run}"));
        std::fs::create_dir_all(&target).unwrap();
        let mirror_rate = || async {
            mib / mirror(&address, &target.join("mirror"), expected_end)
                .await
                .as_secs_f64()
        };
        let copy_rate = || async { mib / raw_copy(&segment, &target.join("copy.log")).await.as_secs_f64() };
        if run % 2 == 0 {
            mirrored.push(mirror_rate().await);
            copied.push(copy_rate().await);
        } else {
            copied.push(copy_rate().await);
            mirrored.push(mirror_rate().await);
        }
        std::fs::remove_dir_all(&target).unwrap();
    }
    stop.notify_one();
    serving.await.unwrap().unwrap();
    let (mirror_median, copy_median) = (median(mirrored.clone()), median(copied.clone()));
    println!("| what ({mib:.0} MiB of 1 KiB batches, loopback, fs) | runs MiB/s | median MiB/s |");
    println!("|---|---|---|");
    println!("| mirror (KafkaFetcher, MirrorDriver) | {mirrored:.0?} | {mirror_median:.0} |");
    println!("| raw TCP copy into a file | {copied:.0?} | {copy_median:.0} |");
    println!(
        "ratio mirror / raw copy: {:.2} (target >= 0.7)",
        mirror_median / copy_median
    );
}
