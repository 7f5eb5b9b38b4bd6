//! The barrier claims over many seeds, through the verdict's own seed pass (issue 49): under every barrier
//! strategy, in every topology, in the workloads the seeds describe (`seed`, planned failovers) and with each
//! source lost as it is (`unplanned`), no seed shows an anomaly of (a)–(e) and every failover completes; under
//! `barrier+advance` no producer id is shared in any workload, `beyond` included.
//!
//! 20 seeds in the test profile (`cargo test`); `MIRRORLOG_SIM_SEEDS=N` runs N. `cargo xtask test` runs it with
//! 1,000 seeds in the release profile (about 63,000 runs) and prints its time. Each failure names its seed and the
//! `mirrorlog simulate` command that shows it shrunk.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use mirror_sim::report::{run_matrix, MatrixOptions};
use mirror_sim::{SimStorage, Strategy, Topology};

fn seeds() -> u64 {
    std::env::var("MIRRORLOG_SIM_SEEDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(20)
}

#[test]
fn every_barrier_strategy_holds_the_barrier_claims_on_every_seed() {
    let options = MatrixOptions {
        topologies: Topology::ALL.to_vec(),
        strategies: vec![
            Strategy::Barrier,
            Strategy::BarrierEverywhere,
            Strategy::BarrierAdvance,
        ],
        seed: 1,
        steps: 30,
        storage: SimStorage::memory(),
        shrink_budget: 0,
        mutation: None,
        seeds: seeds(),
        partitions: 1,
        network_faults: false,
    };
    let started = std::time::Instant::now();
    let matrix = run_matrix(&options, &mut |_, _, _| {}).unwrap();
    let failing: Vec<_> = matrix
        .verdict
        .seed_claims
        .iter()
        .filter(|claim| !claim.holds)
        .collect();
    assert!(failing.is_empty(), "{failing:#?}");
    assert_eq!(matrix.verdict.seed_claims.len(), 3, "{:#?}", matrix.verdict);
    for claim in &matrix.verdict.seed_claims {
        assert_eq!((claim.seeds.first, claim.seeds.len()), (1, options.seeds));
        eprintln!("{}\n    {}", claim.claim, claim.evidence);
    }
    eprintln!(
        "{} seeds in {:.1} s",
        options.seeds,
        started.elapsed().as_secs_f64()
    );
}
