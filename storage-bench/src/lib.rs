//! A cross-backend storage benchmark, built the redb way: fixed work per measurement, several runs, medians, and
//! a baseline of plain file I/O with the same pattern measured in the same run.
//!
//! Measured per backend: appends of 1 KiB and 64 KiB batches (a) without sync and (b) with a sync every MiB,
//! next to a raw sequential `write` of the same bytes with the same sync pattern; a sequential read of the whole
//! log next to a raw read of the same files; opening (recovering) the partition next to reading its bytes raw.
//!
//! Run with `cargo bench -p storage-bench` (add `--features rocks` for RocksDB); `MIRRORLOG_BENCH_MB` sets the
//! data size of the append and read measurements, `MIRRORLOG_BENCH_RECOVERY_MB` that of the recovery one, and
//! `MIRRORLOG_BENCH_BACKENDS` (e.g. `fs,rocks`) which backends run. A watchdog ends the run with a message when
//! one measurement makes no progress for `MIRRORLOG_BENCH_STALL_SECS` (default 300): sled 0.34.7 can deadlock
//! inside `apply_batch` (upstream issue spacejam/sled#1412; narrowed by the sled backend's larger segments, see
//! `storage_sled::DEFAULT_SEGMENT_SIZE` and [`soak`]), and a hung benchmark should say so.
//!
//! The macro benchmark of `cargo xtask bench` lives in [`suite`] (every measurement across backends), [`report`]
//! (JSON, Markdown, comparison) and [`svg`] (charts); the `bench-report` binary runs it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod engine_floor;
pub mod micro;
pub mod publish;
pub mod report;
pub mod soak;
pub mod suite;
pub mod svg;

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use record_format::{BatchBuilder, RecordBatch};
use storage::{Durability, PartitionId, Storage};

/// A backend under test.
pub struct Backend {
    /// Its name in the report.
    pub name: &'static str,
    /// Opens a store in a directory.
    pub open: fn(&Path) -> Box<dyn Storage>,
}

/// The backends compiled into this build and selected by `MIRRORLOG_BENCH_BACKENDS` (all when unset).
pub fn backends() -> Vec<Backend> {
    let selected = std::env::var("MIRRORLOG_BENCH_BACKENDS").ok();
    all_backends()
        .into_iter()
        .filter(|backend| {
            selected
                .as_deref()
                .is_none_or(|list| list.split(',').any(|name| name.trim() == backend.name))
        })
        .collect()
}

/// Heartbeats of this process: a run finished, or a long preparation (filling a log) made headway.
static HEARTBEATS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Notes progress for a watchdog that reads [`heartbeats`]; called between runs and inside long preparations,
/// never inside a timed loop.
pub fn heartbeat() {
    HEARTBEATS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// How many heartbeats this process has made.
pub fn heartbeats() -> u64 {
    HEARTBEATS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Ends the process with a message naming `what` unless [`Watchdog::progress`] is called within the stall
/// time.
pub struct Watchdog {
    last: std::sync::Arc<std::sync::Mutex<(Instant, String)>>,
}

impl Watchdog {
    /// Starts the watchdog thread.
    pub fn start() -> Self {
        let stall = Duration::from_secs(
            std::env::var("MIRRORLOG_BENCH_STALL_SECS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(300),
        );
        let last = std::sync::Arc::new(std::sync::Mutex::new((Instant::now(), "start".to_owned())));
        let watched = std::sync::Arc::clone(&last);
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_secs(1));
            let (since, what) = watched.lock().unwrap().clone();
            if since.elapsed() > stall {
                eprintln!("no progress for {stall:?} in: {what} — giving up (a backend deadlock?)");
                println!(
                    "\n**{what}: no progress for {} s — stopped (see spacejam/sled#1412 for sled)**",
                    stall.as_secs()
                );
                std::process::exit(3);
            }
        });
        Watchdog { last }
    }

    /// Notes that a new measurement starts.
    pub fn progress(&self, what: impl Into<String>) {
        *self.last.lock().unwrap() = (Instant::now(), what.into());
    }
}

/// Every backend compiled into this build.
fn all_backends() -> Vec<Backend> {
    // The registry of `storage-config` decides what this build holds (rocks only with the `rocks` feature).
    ["fs", "sled", "rocks"]
        .into_iter()
        .filter(|name| {
            name.parse::<storage_config::Backend>()
                .is_ok_and(storage_config::Backend::is_compiled)
        })
        .map(|name| Backend {
            name,
            open: opener(name),
        })
        .collect()
}

/// The opener of a backend, through the `storage-config` registry.
fn opener(name: &'static str) -> fn(&Path) -> Box<dyn Storage> {
    match name {
        "fs" => |dir| open_configured("fs", dir),
        "sled" => |dir| open_configured("sled", dir),
        _ => |dir| open_configured("rocks", dir),
    }
}

fn open_configured(name: &str, dir: &Path) -> Box<dyn Storage> {
    let backend: storage_config::Backend = name.parse().unwrap();
    storage_config::StorageConfig::for_backend(backend, dir)
        .open()
        .unwrap()
}

/// Batches of about `batch_bytes` each (one record), `total_bytes` in all, offsets contiguous from 0.
pub fn batches(batch_bytes: usize, total_bytes: usize) -> Vec<RecordBatch> {
    let value: Vec<u8> = (0..batch_bytes.saturating_sub(90))
        .map(|i| (i % 251) as u8)
        .collect();
    let count = (total_bytes / batch_bytes).max(1);
    (0..count as i64)
        .map(|offset| {
            let mut builder = BatchBuilder::new()
                .base_offset(offset)
                .producer(1, 0, offset as i32);
            builder.add(offset, Some(b"key"), Some(&value), &[]);
            builder.build().unwrap()
        })
        .collect()
}

/// Syncs every `sync_every` bytes (never when `None`).
fn due(written_since_sync: &mut usize, size: usize, sync_every: Option<usize>) -> bool {
    *written_since_sync += size;
    match sync_every {
        Some(every) if *written_since_sync >= every => {
            *written_since_sync = 0;
            true
        }
        _ => false,
    }
}

/// Appends through a backend; returns the elapsed time.
pub async fn append_backend(
    backend: &Backend,
    dir: &Path,
    batches: &[RecordBatch],
    sync_every: Option<usize>,
) -> Duration {
    let store = (backend.open)(dir);
    let mut partition = store
        .create(&PartitionId::new("bench", 0).unwrap())
        .await
        .unwrap();
    let started = Instant::now();
    let mut since = 0;
    for batch in batches {
        partition.append(std::slice::from_ref(batch)).await.unwrap();
        if due(&mut since, batch.size(), sync_every) {
            partition.flush(Durability::Sync).await.unwrap();
        }
    }
    partition
        .flush(if sync_every.is_some() {
            Durability::Sync
        } else {
            Durability::Buffered
        })
        .await
        .unwrap();
    started.elapsed()
}

/// The baseline: the same bytes written to one file with `write`, synced with the same pattern.
pub fn append_raw(dir: &Path, batches: &[RecordBatch], sync_every: Option<usize>) -> Duration {
    let mut file = File::create(dir.join("raw.log")).unwrap();
    let started = Instant::now();
    let mut since = 0;
    for batch in batches {
        file.write_all(batch.as_bytes()).unwrap();
        if due(&mut since, batch.size(), sync_every) {
            file.sync_data().unwrap();
        }
    }
    if sync_every.is_some() {
        file.sync_data().unwrap();
    }
    started.elapsed()
}

/// Reads the whole log back through a backend (the store was written by `append_backend` in `dir`).
pub async fn read_backend(backend: &Backend, dir: &Path) -> (Duration, usize) {
    let store = (backend.open)(dir);
    let partition = store.open(&PartitionId::new("bench", 0).unwrap()).await.unwrap();
    let started = Instant::now();
    let mut offset = 0;
    let mut bytes = 0;
    while offset < partition.log_end_offset() {
        let batches = partition.read(offset, 1 << 20).await.unwrap();
        offset = batches.last().unwrap().next_offset();
        bytes += batches.iter().map(RecordBatch::size).sum::<usize>();
    }
    (started.elapsed(), bytes)
}

/// Every regular file under `dir`.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// The baseline: read every file under `dir` sequentially.
pub fn read_raw(dir: &Path) -> (Duration, usize) {
    let started = Instant::now();
    let mut total = 0;
    let mut buffer = vec![0u8; 1 << 20];
    for path in files_under(dir) {
        let mut file = File::open(path).unwrap();
        loop {
            let n = file.read(&mut buffer).unwrap();
            if n == 0 {
                break;
            }
            total += n;
        }
    }
    (started.elapsed(), total)
}

/// Opens (recovers) the partition: store open plus partition open.
pub async fn open_backend(backend: &Backend, dir: &Path) -> Duration {
    let started = Instant::now();
    let store = (backend.open)(dir);
    let partition = store.open(&PartitionId::new("bench", 0).unwrap()).await.unwrap();
    assert!(partition.log_end_offset() > 0);
    started.elapsed()
}

/// The median of some durations.
pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Megabytes per second.
pub fn mb_per_s(bytes: usize, elapsed: Duration) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / elapsed.as_secs_f64()
}
