//! The verdict's own tests: each deliberate bug (`Mutation`) must turn the verdict of the matrix to DO NOT HOLD. A
//! claim no mutant can move is not evidence.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use mirror_sim::report::{run_matrix, MatrixOptions};
use mirror_sim::{Mutation, SimStorage, Strategy, Topology};

fn options(mutation: Option<Mutation>) -> MatrixOptions {
    MatrixOptions {
        topologies: vec![Topology::ActivePassive],
        strategies: vec![Strategy::Barrier, Strategy::BarrierAdvance],
        seed: 1,
        steps: 30,
        storage: SimStorage::memory(),
        shrink_budget: 0,
        prediction_seeds: 5,
        mutation,
    }
}

#[test]
fn without_a_mutant_the_barrier_claims_hold() {
    let matrix = run_matrix(&options(None), &mut |_, _, _| {}).unwrap();
    assert!(matrix.verdict.checked);
    assert!(matrix.verdict.seed_claims_hold, "{:#?}", matrix.verdict);
}

#[test]
fn a_failover_that_never_completes_fails_the_verdict_though_no_record_is_corrupted() {
    let matrix = run_matrix(
        &options(Some(Mutation::FailoverNeverCompletes)),
        &mut |_, _, _| {},
    )
    .unwrap();
    assert!(!matrix.verdict.seed_claims_hold, "{:#?}", matrix.verdict);
    let failed: Vec<_> = matrix
        .verdict
        .seed_claims
        .iter()
        .filter(|claim| !claim.holds)
        .collect();
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert!(
        failed[0].claim.contains("every failover completes"),
        "{failed:#?}"
    );
    assert!(
        failed[0].evidence.contains("read-only after failover"),
        "{failed:#?}"
    );
    assert!(failed[0].evidence.contains("READ_ONLY_TOPIC"), "{failed:#?}");
    // (a)-(e) stay 0: only the new judgement notices the stuck failover.
    assert!(matrix.cells.iter().all(|cell| cell.anomalies.corruption() == 0));
}

/// The claims that do not hold under a mutant.
fn failed_claims(mutation: Mutation) -> Vec<mirror_sim::report::Claim> {
    let matrix = run_matrix(&options(Some(mutation)), &mut |_, _, _| {}).unwrap();
    assert!(
        !matrix.verdict.seed_claims_hold,
        "{mutation:?}: {:#?}",
        matrix.verdict
    );
    matrix
        .verdict
        .seed_claims
        .into_iter()
        .filter(|claim| !claim.holds)
        .collect()
}

#[test]
fn a_failover_without_the_barrier_fails_the_no_anomaly_claim() {
    let failed = failed_claims(Mutation::NoBarrier);
    assert!(
        failed
            .iter()
            .any(|claim| claim.claim.contains("show no anomaly of (a)-(e)")),
        "{failed:#?}"
    );
}

#[test]
fn an_allocator_not_advanced_fails_the_shared_id_claim() {
    let failed = failed_claims(Mutation::AllocatorNotAdvanced);
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert!(
        failed[0].claim.contains("no producer id is shared"),
        "{failed:#?}"
    );
}
