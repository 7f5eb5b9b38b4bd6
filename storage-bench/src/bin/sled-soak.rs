//! `cargo run --release -p storage-bench --bin sled-soak [MIB] [RUNS]`: the sled soak (default 1,024 MiB, three
//! runs), each under a 60-second stall watchdog; exits 1 if any run stalls.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use storage_bench::soak::{sled_soak, SoakOutcome};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mib: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(1024);
    let runs: u32 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let mut failed = false;
    for run in 1..=runs {
        let dir = tempfile::tempdir().expect("temp dir");
        match sled_soak(dir.path(), mib, Duration::from_secs(60)) {
            SoakOutcome::Completed { elapsed, mib_per_s } => {
                println!("run {run}: {mib} MiB synced every MiB in {elapsed:.1?} ({mib_per_s:.1} MiB/s)")
            }
            SoakOutcome::Stalled { written_mib } => {
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
