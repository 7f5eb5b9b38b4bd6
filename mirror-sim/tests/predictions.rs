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
        seeds: 100,
        mutation: None,
        partitions: 1,
        network_faults: false,
    };
    run_matrix(&options, &mut |_, _, _| {}).unwrap()
}

#[test]
fn every_prediction_of_the_seeds_shows_in_at_least_80_of_100_seeds() {
    for (strategy, topology, _, _) in PREDICTIONS {
        let matrix = rates_over_100_seeds(strategy, topology);
        assert_eq!(matrix.seed_rates.len(), 1, "{strategy} in {topology}");
        let rate = &matrix.seed_rates[0];
        assert_eq!((rate.seeds, rate.first_seed), (100, 1));
        let showing = rate.predicted.expect("a predicted cell");
        assert!(
            showing >= 80,
            "{strategy} in {topology}: shown in {showing} of 100 seeds"
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
fn the_barrier_shows_no_corruption_class_in_any_of_100_seeds_of_chain_5() {
    let matrix = rates_over_100_seeds(Strategy::Barrier, Topology::Chain5);
    let rate = &matrix.seed_rates[0];
    assert_eq!(
        rate.predicted, None,
        "the seeds predict nothing bad of the barrier"
    );
    assert_eq!(rate.classes.len(), 7, "(a)-(e) are all counted");
    assert!(rate.classes.values().all(|&seeds| seeds == 0), "{rate:?}");
}
