//! The simulator over an unreliable network (issue 50, item 5): sources that answer as Apache Kafka does (no
//! private question) and requests to them refused, closed mid-answer, answered NOT_LEADER_OR_FOLLOWER, cut short
//! or late, and topics that grow at the source (`tests/topic_growth.rs`). The barrier claims hold on every seed; the oracle catches a retry that truncates a mirror
//! (`Mutation::TruncateOnRetry`, what the links did before ADR 0046) and says which batches it removed.
//!
//! 20 seeds in the test profile; `MIRRORLOG_SIM_SEEDS=N` runs N (`cargo xtask test`: 1,000, release).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use common::*;
use mirror_sim::report::{run_matrix, MatrixOptions};
use mirror_sim::script::{generate_with, SourceFault};
use mirror_sim::{Mutation, SimStorage, Step, Strategy, Topology, Workload};

fn seeds() -> u64 {
    std::env::var("MIRRORLOG_SIM_SEEDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(20)
}

fn options(mutation: Option<Mutation>, seeds: u64) -> MatrixOptions {
    MatrixOptions {
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
        mutation,
        seeds,
        partitions: 1,
        network_faults: true,
    }
}

#[test]
fn network_faults_add_fault_and_growth_steps_only_and_make_every_cluster_that_never_mirrors_kafka_like() {
    for topology in Topology::ALL {
        let plain = generate_with(topology, Workload::Seed, 7, 30, 1, false);
        let faulty = generate_with(topology, Workload::Seed, 7, 30, 1, true);
        assert_eq!(
            faulty,
            generate_with(topology, Workload::Seed, 7, 30, 1, true),
            "one seed, one script"
        );
        let own: Vec<&Step> = faulty
            .steps
            .iter()
            .filter(|step| {
                !matches!(
                    step,
                    Step::BehaveAsKafka { .. } | Step::SourceFault { .. } | Step::AddPartition { .. }
                )
            })
            .collect();
        assert_eq!(own, plain.steps.iter().collect::<Vec<_>>(), "{topology}");
        let destinations = plain.destinations();
        for step in &faulty.steps {
            match step {
                Step::BehaveAsKafka { cluster } => {
                    assert!(!destinations.contains(cluster.as_str()), "{topology}")
                }
                Step::SourceFault { count, .. } => assert!((1..=3).contains(count)),
                _ => {}
            }
        }
        let never_mirrors = plain
            .clusters
            .iter()
            .any(|cluster| !destinations.contains(cluster.as_str()));
        assert_eq!(
            faulty
                .steps
                .iter()
                .any(|step| matches!(step, Step::BehaveAsKafka { .. })),
            never_mirrors,
            "{topology}: a cluster that never mirrors answers as Kafka does"
        );
    }
}

#[test]
fn every_barrier_strategy_holds_the_barrier_claims_on_every_seed_over_an_unreliable_network() {
    let options = options(None, seeds());
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
    eprintln!(
        "{} seeds over an unreliable network in {:.1} s",
        options.seeds,
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn a_seed_over_an_unreliable_network_gives_the_same_run_twice() {
    for topology in [Topology::Failback, Topology::Chain5, Topology::Random] {
        let script = generate_with(topology, Workload::Unplanned, 3, 30, 2, true);
        let (first, first_end) = run(&script, Strategy::Barrier);
        let (second, second_end) = run(&script, Strategy::Barrier);
        assert_eq!(first.notes, second.notes, "{topology}");
        assert_eq!(first.anomalies, second.anomalies, "{topology}");
        assert_eq!(first_end.faults_met, second_end.faults_met, "{topology}");
        assert_eq!(
            first_end.rounds_fetched_ahead, second_end.rounds_fetched_ahead,
            "{topology}: the same rounds fetched ahead"
        );
        assert_eq!(
            first_end.logs, second_end.logs,
            "{topology}: the logs, byte for byte"
        );
    }
}

#[test]
fn the_faults_of_a_seed_reach_the_links_and_every_link_recovers_from_them() {
    let (mut met, mut ahead) = (0, 0);
    for seed in 1..=5 {
        for topology in Topology::ALL {
            let script = generate_with(topology, Workload::Seed, seed, 30, 1, true);
            let (findings, finished) = run(&script, Strategy::BarrierAdvance);
            assert_eq!(
                findings.anomalies.corruption(),
                0,
                "{topology} seed {seed}: {:?}",
                findings.notes
            );
            assert!(
                finished.failed_links.is_empty(),
                "{topology} seed {seed}: a transient fault left a link failed: {:?}",
                finished.failed_links
            );
            met += finished.faults_met;
            // The rounds are `serve`'s: the next one fetched on a task of its own while this one is written.
            assert_eq!(finished.rounds_fetched_ahead.lost, 0, "{topology} seed {seed}");
            ahead += finished.rounds_fetched_ahead.used;
        }
    }
    assert!(met > 50, "the seeds' faults met only {met} requests");
    assert!(ahead > 50, "only {ahead} rounds were answered from a fetch ahead");
}

/// B mirrors A, an Apache Kafka cluster; a request is refused, the partition fails and retries. The retry compares
/// batches and resumes at its log end. The mutant realigns as a new session, reads Kafka's silence as "never
/// mirrored from us", empties the mirror and copies it again: the oracle names the batches it removed.
fn retried_after_a_refusal() -> mirror_sim::Script {
    script(
        &["A", "B"],
        vec![
            Step::BehaveAsKafka { cluster: "A".into() },
            start("A", "B", "orders"),
            idempotent("A/p", "A", "orders"),
            produce("A/p", 2),
            produce("A/p", 1),
            Step::Mirror,
            produce("A/p", 1),
            Step::SourceFault {
                cluster: "A".into(),
                fault: SourceFault::Refused,
                count: 1,
            },
            Step::Mirror,
        ],
    )
}

#[test]
fn a_retry_after_a_transient_fault_resumes_at_the_log_end_and_removes_nothing() {
    let (findings, finished) = run(&retried_after_a_refusal(), Strategy::BarrierAdvance);
    assert_eq!(finished.faults_met, 1);
    assert!(finished.divergences.is_empty(), "{:?}", finished.divergences);
    assert!(finished.failed_links.is_empty(), "{:?}", finished.failed_links);
    assert_eq!(findings.anomalies.corruption(), 0, "{:?}", findings.notes);
}

#[test]
fn the_oracle_catches_a_retry_that_truncates_a_mirror_its_source_still_holds() {
    let (findings, finished) = mirror_sim::run_script_mutated(
        &retried_after_a_refusal(),
        Strategy::BarrierAdvance,
        &SimStorage::memory(),
        mirror_sim::FetchBound::default(),
        Some(Mutation::TruncateOnRetry),
    )
    .unwrap();
    assert_eq!(findings.anomalies.divergence, 1, "{:?}", finished.divergences);
    assert!(
        finished.divergences[0].contains("B/orders: mirror of A truncated although its source still holds")
            && finished.divergences[0].contains("offsets 0..=2"),
        "{:?}",
        finished.divergences
    );
}

#[test]
fn the_verdict_does_not_hold_when_a_retry_truncates() {
    let matrix = run_matrix(&options(Some(Mutation::TruncateOnRetry), 5), &mut |_, _, _| {}).unwrap();
    assert!(!matrix.verdict.seed_claims_hold, "{:#?}", matrix.verdict);
    let evidence: Vec<&str> = matrix
        .verdict
        .seed_claims
        .iter()
        .filter(|claim| !claim.holds)
        .map(|claim| claim.evidence.as_str())
        .collect();
    assert!(!evidence.is_empty());
    let truncated: u64 = matrix.cells.iter().map(|cell| cell.anomalies.divergence).sum();
    assert!(
        truncated > 0,
        "the printed seed's cells show the truncations as (e): {evidence:#?}"
    );
}
