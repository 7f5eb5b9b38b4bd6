//! `cargo run --release -p storage-bench --bin sled-soak -- [--mib N] [--runs N] [--sync-every-mib N]
//! [--segment-kib N]`: the sled soak (default 1,024 MiB, three runs, a sync every MiB, the backend's 8 MiB
//! segments), each under a 60-second stall watchdog; exits 1 if any run stalls.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use clap::Parser;
use storage_bench::soak::{sled_soak, SoakOutcome, SoakPlan};

/// Writes 1 KiB batches through the sled backend and reports whether sled kept up or stalled.
#[derive(Debug, Parser)]
struct Args {
    /// MiB per run.
    #[arg(long, default_value_t = 1024)]
    mib: u64,
    /// Runs (the soak stops at the first stall).
    #[arg(long, default_value_t = 3)]
    runs: u32,
    /// A sync every this many MiB; 0 syncs only at the end.
    #[arg(long, default_value_t = 1)]
    sync_every_mib: u64,
    /// sled's segment size in KiB (a power of two; the backend's default is 8192).
    #[arg(long, default_value_t = (storage_sled::DEFAULT_SEGMENT_SIZE >> 10) as u64)]
    segment_kib: u64,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let plan = SoakPlan {
        mib: args.mib,
        sync_every_mib: args.sync_every_mib,
        segment_size: (args.segment_kib << 10) as usize,
    };
    let cadence = match args.sync_every_mib {
        0 => "unsynced".to_owned(),
        n => format!("synced every {n} MiB"),
    };
    let mut failed = false;
    for run in 1..=args.runs {
        let dir = tempfile::tempdir().expect("temp dir");
        match sled_soak(dir.path(), plan, Duration::from_secs(60)) {
            Err(error) => {
                eprintln!("sled-soak: {error}");
                return std::process::ExitCode::from(2);
            }
            Ok(SoakOutcome::Completed { elapsed, mib_per_s }) => println!(
                "run {run}: {} MiB {cadence}, {} KiB segments, in {elapsed:.1?} ({mib_per_s:.1} MiB/s)",
                args.mib, args.segment_kib
            ),
            Ok(SoakOutcome::Stalled { written_mib }) => {
                println!("run {run}: STALLED after {written_mib} MiB (no append for 60 s)");
                failed = true;
                // The stuck writer cannot be stopped; leave its directory behind and stop here.
                std::mem::forget(dir);
                break;
            }
        }
    }
    if failed {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    }
}
