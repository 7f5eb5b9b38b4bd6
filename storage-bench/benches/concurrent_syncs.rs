//! Group commit across producers (issue 33 item 4): `PRODUCERS` tasks, each on its own partition of one store,
//! each appending a 1 KiB batch and syncing it (`flush(Sync)`, what a produce with `durability = "sync"` waits
//! for) `ROUNDS` times, against the same appends and syncs made by one producer on one partition. On a key-value
//! store a sync is store-wide, so concurrent producers can share one (sled and RocksDB group their syncs through
//! `storage::flush_group`); on storage-fs every partition has its own files to sync.
//!
//! Prints synced appends per second for one producer and for `PRODUCERS`, and their ratio (above 1: the
//! producers share syncs). Medians of `RUNS` runs. `MIRRORLOG_BENCH_BACKENDS=fs,sled,rocks` selects; RocksDB needs
//! `--features rocks`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark fails by panicking

use std::time::{Duration, Instant};

use storage::{Durability, PartitionId, Storage};
use storage_bench::{backends, batches, median};

const RUNS: usize = 3;
const PRODUCERS: usize = 8;
const ROUNDS: usize = 300;

/// `producers` tasks, each appending and syncing `ROUNDS` batches on its own partition of `store`.
async fn synced_appends(store: std::sync::Arc<dyn Storage>, producers: usize) -> Duration {
    let work = batches(1024, 1024 * ROUNDS);
    let mut partitions = Vec::new();
    for index in 0..producers {
        let id = PartitionId::new("synced", index as u32).unwrap();
        partitions.push(store.create(&id).await.unwrap());
    }
    let started = Instant::now();
    let tasks: Vec<_> = partitions
        .into_iter()
        .map(|mut partition| {
            let work = work.clone();
            tokio::spawn(async move {
                for batch in &work {
                    partition.append(std::slice::from_ref(batch)).await.unwrap();
                    partition.flush(Durability::Sync).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    started.elapsed()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("| backend | 1 producer: synced appends/s | {PRODUCERS} producers: synced appends/s | ratio |");
    println!("|---|---:|---:|---:|");
    for backend in backends() {
        if backend.name == "memory" {
            continue;
        }
        let rate = |producers: usize| {
            let samples = (0..RUNS)
                .map(|_| {
                    let dir = tempfile::tempdir().unwrap();
                    let store: std::sync::Arc<dyn Storage> = (backend.open)(dir.path()).into();
                    runtime.block_on(synced_appends(store, producers))
                })
                .collect();
            (producers * ROUNDS) as f64 / median(samples).as_secs_f64()
        };
        let (one, many) = (rate(1), rate(PRODUCERS));
        println!("| {} | {one:.0} | {many:.0} | {:.2} |", backend.name, many / one);
    }
}
