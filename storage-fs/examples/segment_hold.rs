//! How long a partition is held when a large segment leaves it (issue 51, ADR 0055): a 64 MiB segment of 1 KiB
//! batches, rewritten by a cleaner keeping all but its first batch — staged without the partition, then installed
//! with it (timed) — and then deleted by retention (timed). Five runs on a fresh store each; the median and the
//! spread of each are printed. `cargo run --release -p storage-fs --example segment_hold`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // an example fails by panicking

use std::time::{Duration, Instant};

use storage::{Durability, PartitionId, Storage};
use storage_fs::{FsConfig, FsStorage};
use storage_testkit::conformance::batch;

const SEGMENT_BYTES: u64 = 64 << 20;
const RUNS: usize = 5;

async fn one_run() -> (Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStorage::open(FsConfig {
        segment_bytes: SEGMENT_BYTES,
        ..FsConfig::new(dir.path())
    })
    .unwrap();
    let mut partition = store
        .create(&PartitionId::new("table", 0).unwrap())
        .await
        .unwrap();
    let mut batches = Vec::new();
    let mut offset = 0;
    // One segment filled, then the first batch of the next (the active one).
    while batches.len() < 2 || partition.segments(0, 4).await.unwrap().len() < 2 {
        let next = batch(offset, 1, 1_000);
        offset = next.next_offset();
        partition.append(std::slice::from_ref(&next)).await.unwrap();
        batches.push(next);
    }
    partition.flush(Durability::Sync).await.unwrap();
    let units = partition.segments(0, 4).await.unwrap();
    let (from, to) = (units[0].base_offset, units[1].base_offset);
    let kept: Vec<_> = batches
        .into_iter()
        .filter(|b| b.base_offset() > from && b.base_offset() < to)
        .collect();
    let staged = partition.reader().stage_rewrite(from, to, kept).await.unwrap();
    let started = Instant::now();
    partition.install_rewrite(staged).await.unwrap();
    let installed = started.elapsed();
    let started = Instant::now();
    partition.delete_before(to).await.unwrap();
    (installed, started.elapsed())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (mut installs, mut deletions) = (Vec::with_capacity(RUNS), Vec::with_capacity(RUNS));
    for _ in 0..RUNS {
        let (installed, deleted) = one_run().await;
        installs.push(installed);
        deletions.push(deleted);
    }
    let ms = |d: Duration| d.as_secs_f64() * 1_000.0;
    for (what, mut holds) in [
        ("installing a staged rewrite of", installs),
        ("deleting (retention)", deletions),
    ] {
        holds.sort();
        println!(
            "{what} a {} MiB segment: median {:.2} ms (runs {:.2}–{:.2} ms)",
            SEGMENT_BYTES >> 20,
            ms(holds[RUNS / 2]),
            ms(holds[0]),
            ms(holds[RUNS - 1])
        );
    }
}
