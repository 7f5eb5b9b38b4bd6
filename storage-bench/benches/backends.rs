//! The cross-backend storage report (see `storage-bench/src/lib.rs`): prints one Markdown table per measurement
//! with medians of three runs and the ratio to the raw-file baseline of the same run.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::time::Duration;

use storage_bench::{
    append_backend, append_raw, backends, batches, mb_per_s, median, open_backend, read_backend, read_raw,
    Watchdog,
};

const RUNS: usize = 3;

fn env_mb(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let watchdog = Watchdog::start();
    let data_mb = env_mb("MIRRORLOG_BENCH_MB", 64);
    let recovery_mb = env_mb("MIRRORLOG_BENCH_RECOVERY_MB", 1024);
    let sync_every = 1 << 20;
    println!("# storage backends ({data_mb} MiB per append/read run, {recovery_mb} MiB for recovery, median of {RUNS})\n");
    println!("| backend | batch | sync | backend MB/s | raw file MB/s | ratio |");
    println!("|---|---|---|---|---|---|");
    for batch_bytes in [1024usize, 64 * 1024] {
        let work = batches(batch_bytes, data_mb << 20);
        let bytes: usize = work.iter().map(|b| b.size()).sum();
        for sync in [None, Some(sync_every)] {
            for backend in backends() {
                watchdog.progress(format!("{} ({})", backend.name, "appends"));
                let (mut ours, mut raw) = (Vec::new(), Vec::new());
                for _ in 0..RUNS {
                    let dir = tempfile::tempdir().unwrap();
                    ours.push(runtime.block_on(append_backend(&backend, dir.path(), &work, sync)));
                    let raw_dir = tempfile::tempdir().unwrap();
                    raw.push(append_raw(raw_dir.path(), &work, sync));
                }
                let (ours, raw) = (mb_per_s(bytes, median(ours)), mb_per_s(bytes, median(raw)));
                println!(
                    "| {} | {} KiB | {} | {ours:.0} | {raw:.0} | {:.2} |",
                    backend.name,
                    batch_bytes / 1024,
                    if sync.is_some() { "every 1 MiB" } else { "none" },
                    ours / raw
                );
            }
        }
    }

    println!("\n| backend | sequential read MB/s | raw read of its files MB/s | ratio |");
    println!("|---|---|---|---|");
    let work = batches(16 * 1024, data_mb << 20);
    for backend in backends() {
        watchdog.progress(format!("{} ({})", backend.name, "sequential read"));
        let dir = tempfile::tempdir().unwrap();
        runtime.block_on(append_backend(&backend, dir.path(), &work, Some(sync_every)));
        let (mut ours, mut raw) = (Vec::new(), Vec::new());
        let mut sizes = (0, 0);
        for _ in 0..RUNS {
            let (elapsed, bytes) = runtime.block_on(read_backend(&backend, dir.path()));
            ours.push(elapsed);
            let (raw_elapsed, raw_bytes) = read_raw(dir.path());
            raw.push(raw_elapsed);
            sizes = (bytes, raw_bytes);
        }
        let (ours, raw) = (mb_per_s(sizes.0, median(ours)), mb_per_s(sizes.1, median(raw)));
        println!("| {} | {ours:.0} | {raw:.0} | {:.2} |", backend.name, ours / raw);
    }

    println!("\n| backend | open/recovery of {recovery_mb} MiB | raw read of its files | ratio (lower is better) |");
    println!("|---|---|---|---|");
    let work = batches(64 * 1024, recovery_mb << 20);
    for backend in backends() {
        watchdog.progress(format!("{} ({})", backend.name, "recovery"));
        let dir = tempfile::tempdir().unwrap();
        runtime.block_on(append_backend(&backend, dir.path(), &work, Some(16 << 20)));
        let (mut ours, mut raw) = (Vec::<Duration>::new(), Vec::new());
        for _ in 0..RUNS {
            ours.push(runtime.block_on(open_backend(&backend, dir.path())));
            raw.push(read_raw(dir.path()).0);
        }
        let (ours, raw) = (median(ours), median(raw));
        println!(
            "| {} | {:.0} ms | {:.0} ms | {:.2} |",
            backend.name,
            ours.as_secs_f64() * 1000.0,
            raw.as_secs_f64() * 1000.0,
            ours.as_secs_f64() / raw.as_secs_f64()
        );
    }
}
