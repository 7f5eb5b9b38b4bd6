//! Simulated client operations per second, in memory and on the file-system backend, printed as a Markdown
//! table (medians of 5 runs; the fs/memory ratio is measured in the same run), and the wall time of the default
//! matrix (`mirrorlog simulate`'s 7 topologies × 6 strategies × 3 workloads, with shrinking).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::time::{Duration, Instant};

use mirror_sim::report::{run_matrix, MatrixOptions, DEFAULT_SEEDS, DEFAULT_SHRINK_BUDGET};
use mirror_sim::{generate, run_script, SimStorage, Strategy, Topology, Workload};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    if std::env::args().any(|arg| arg == "--list") {
        return;
    }
    let script = generate(Topology::Chain5, Workload::Seed, 1, 200);
    println!("| backend | operations per run | median run | operations/s | vs memory |");
    println!("|---|---:|---:|---:|---:|");
    let mut memory_rate = None;
    for backend in [
        SimStorage::memory(),
        SimStorage::backend(storage_config::Backend::Fs),
    ] {
        let mut operations = 0;
        let samples: Vec<Duration> = (0..5)
            .map(|_| {
                let start = Instant::now();
                let (_, finished) = run_script(&script, Strategy::Barrier, &backend).unwrap();
                operations = finished.operations;
                start.elapsed()
            })
            .collect();
        let run = median(samples);
        let rate = operations as f64 / run.as_secs_f64();
        let ratio = memory_rate.map_or("1.00×".to_owned(), |memory: f64| {
            format!("{:.2}×", rate / memory)
        });
        memory_rate.get_or_insert(rate);
        println!(
            "| {} | {operations} | {:.1} ms | {rate:.0} | {ratio} |",
            backend.name(),
            run.as_secs_f64() * 1e3
        );
    }
    let options = MatrixOptions {
        topologies: Topology::ALL.to_vec(),
        strategies: Strategy::ALL.to_vec(),
        seed: 1,
        steps: 30,
        storage: SimStorage::backend(storage_config::Backend::Fs),
        shrink_budget: DEFAULT_SHRINK_BUDGET,
        seeds: DEFAULT_SEEDS,
        mutation: None,
        partitions: 1,
        network_faults: false,
    };
    let samples: Vec<Duration> = (0..3)
        .map(|_| {
            let start = Instant::now();
            run_matrix(&options, &mut |_, _, _| {}).unwrap();
            start.elapsed()
        })
        .collect();
    println!(
        "\nDefault matrix (126 cells on fs, shrinking included, beside the seed pass over {DEFAULT_SEEDS} seeds): median of 3 = {:.2} s",
        median(samples).as_secs_f64()
    );
}
