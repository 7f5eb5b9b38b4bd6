//! The seeds predict that `none`, `negate` and `negate-skip-negative` corrupt data. One lucky seed is not a
//! demonstration: these tests run each prediction over a hundred seeds and pin how often the oracle shows it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use mirror_sim::report::{run_matrix, MatrixOptions, PREDICTIONS};
use mirror_sim::{SimStorage, Strategy, Topology};

fn rates_over_100_seeds(strategy: Strategy, topology: Topology) -> mirror_sim::report::Matrix {
    let options = MatrixOptions {
        topologies: vec![topology],
        strategies: vec![strategy],
        seed: 1,
        steps: 30,
        storage: SimStorage::memory(),
        shrink_budget: 0,
        prediction_seeds: 100,
        mutation: None,
    };
    run_matrix(&options, &mut |_, _, _| {}).unwrap()
}

#[test]
fn every_prediction_of_the_seeds_shows_in_at_least_80_of_100_seeds() {
    for (strategy, topology, _, _) in PREDICTIONS {
        let matrix = rates_over_100_seeds(strategy, topology);
        assert_eq!(matrix.predictions.len(), 1, "{strategy} in {topology}");
        let rate = &matrix.predictions[0];
        assert_eq!((rate.seeds, rate.first_seed), (100, 1));
        assert!(
            rate.showing >= 80,
            "{strategy} in {topology}: shown in {} of 100 seeds",
            rate.showing
        );
        let claim = matrix
            .verdict
            .seed_claims
            .iter()
            .find(|claim| claim.claim.starts_with(&format!("{strategy} in {topology}")))
            .expect("the prediction is a claim of the verdict");
        assert!(claim.holds, "{claim:?}");
        assert!(claim.evidence.contains(" of 100 seeds"), "{claim:?}");
    }
}

#[test]
fn a_barrier_strategy_alone_checks_no_prediction() {
    let matrix = rates_over_100_seeds(Strategy::Barrier, Topology::Chain5);
    assert!(matrix.predictions.is_empty());
}
