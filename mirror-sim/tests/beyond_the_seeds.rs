//! What the seeds do not discuss: a source producer that keeps its producer id across failover, and
//! KAFKA-16699 — applications whose transactional id expires or that move to the destination.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use common::*;
use mirror_sim::{AppPolicy, Step, Strategy};

/// A's idempotent producer survives the failover behind a DNS switch and keeps its A-issued id 0; B issues 0 to
/// its first new producer. The barrier clears B's state, so nothing stops the two from sharing the id: one of
/// them is refused or, worse, acknowledged as a duplicate of the other. `barrier+advance` moves B's allocator
/// past every mirrored id, and the two never meet.
#[test]
fn a_producer_that_keeps_its_id_shares_it_with_a_destination_producer_unless_the_allocator_advances() {
    let steps = vec![
        start("A", "B", "orders"),
        idempotent("A/p", "A", "orders"),
        produce("A/p", 1),
        produce("A/p", 1),
        Step::Mirror,
        stop("B", "orders"),
        move_to("A/p", "B", true),
        idempotent("B/q", "B", "orders"),
        produce("B/q", 1),
        produce("A/p", 1),
        produce("B/q", 1),
        produce("A/p", 1),
    ];
    let script = script(&["A", "B"], steps);
    let (barrier, finished) = run(&script, Strategy::Barrier);
    assert_eq!(
        finished.shared_ids,
        vec!["B/orders producer id 0: A/p, B/q".to_owned()],
        "barrier alone: the ids meet"
    );
    let refused: u64 = finished.client_errors.values().sum();
    assert!(
        refused > 0 || barrier.anomalies.silent_loss > 0,
        "the meeting shows as a refusal or a loss: {:?} {:?}",
        finished.client_errors,
        barrier.notes
    );
    let (advanced, finished) = run(&script, Strategy::BarrierAdvance);
    assert!(finished.shared_ids.is_empty(), "{:?}", finished.shared_ids);
    assert!(finished.client_errors.is_empty(), "{:?}", finished.client_errors);
    assert_eq!(advanced.anomalies.corruption(), 0, "{:?}", advanced.notes);
}

/// An idempotent producer whose acknowledgement was lost moves, keeping its id, and sends the batch again. The
/// batch was mirrored; the barrier cleared the state that would have recognised the retry, so the destination
/// stores it twice — under every barrier strategy (advancing the allocator does not help: the id is the
/// producer's own). Without the barrier the mirrored state still knows the batch and answers it as a duplicate.
#[test]
fn a_retry_after_failover_by_a_producer_that_keeps_its_id_is_a_duplicate_under_the_barrier() {
    let steps = vec![
        start("A", "C", "orders"),
        idempotent("A/p", "A", "orders"),
        produce_losing_ack("A/p", 2),
        Step::Mirror,
        stop("C", "orders"),
        move_to("A/p", "C", true),
        produce("A/p", 3),
    ];
    let script = script(&["A", "C"], steps);
    for strategy in [
        Strategy::Barrier,
        Strategy::BarrierEverywhere,
        Strategy::BarrierAdvance,
    ] {
        let (findings, _) = run(&script, strategy);
        assert_eq!(
            findings.anomalies.duplicates, 2,
            "{strategy}: {:?}",
            findings.notes
        );
    }
    let (none, _) = run(&script, Strategy::None);
    assert_eq!(none.anomalies.corruption(), 0, "{:?}", none.notes);
}

/// A feeder on A, an application of each policy reading it on A. The applications' transactional ids expire
/// while they are idle (KAFKA-16699 case 1), then A fails over to B and the applications move, keeping their
/// producers (the ids are unknown at B's coordinator: case 1 again).
fn application_script() -> mirror_sim::Script {
    let mut steps = vec![
        start("A", "B", "orders"),
        start("A", "B", "out-fenced"),
        start("A", "B", "out-pre"),
        idempotent("feeder", "A", "orders"),
        app("fenced", "A", "out-fenced", "orders", AppPolicy::Fenced),
        app("pre", "A", "out-pre", "orders", AppPolicy::Pre16699),
    ];
    let round = |steps: &mut Vec<Step>| {
        steps.push(produce("feeder", 2));
        for app in ["fenced", "pre"] {
            steps.push(produce(app, 2));
            steps.push(end(app, true));
        }
    };
    round(&mut steps);
    round(&mut steps);
    steps.push(Step::ExpireIds);
    round(&mut steps);
    round(&mut steps);
    steps.push(Step::Mirror);
    for topic in ["orders", "out-fenced", "out-pre"] {
        steps.push(stop("B", topic));
    }
    steps.push(move_to("feeder", "B", false));
    steps.push(move_to("fenced", "B", true));
    steps.push(move_to("pre", "B", true));
    round(&mut steps);
    round(&mut steps);
    round(&mut steps);
    script(&["A", "B"], steps)
}

#[test]
fn kafka_16699_the_fenced_policy_survives_expiration_and_failover_without_duplicates_or_losses() {
    for strategy in [Strategy::Barrier, Strategy::BarrierAdvance] {
        let (findings, finished) = run(&application_script(), strategy);
        let fenced = finished.apps.iter().find(|app| app.client == "fenced").unwrap();
        assert_eq!(fenced.dead, None);
        assert_eq!(fenced.cluster, "B");
        assert!(
            fenced.recoveries >= 2,
            "{fenced:?}: one recovery per INVALID_PRODUCER_ID_MAPPING"
        );
        assert!(fenced.position > 0);
        let a = &findings.anomalies;
        assert_eq!((a.app_duplicates, a.app_losses), (0, 0), "{:?}", findings.notes);
        assert_eq!(a.corruption(), 0, "{:?}", findings.notes);
        assert!(finished.client_errors.contains_key("INVALID_PRODUCER_ID_MAPPING"));
    }
}

#[test]
fn kafka_16699_the_pre_16699_policy_dies_on_invalid_producer_id_mapping() {
    let (findings, finished) = run(&application_script(), Strategy::Barrier);
    let pre = finished.apps.iter().find(|app| app.client == "pre").unwrap();
    assert_eq!(pre.dead.as_deref(), Some("INVALID_PRODUCER_ID_MAPPING"));
    assert_eq!(
        findings.anomalies.apps_dead, 1,
        "only the pre-16699 application dies"
    );
    // What it committed before dying is intact: no duplicate, no loss.
    assert_eq!(findings.anomalies.app_damage(), 0, "{:?}", findings.notes);
}

/// Applications commit their input offsets in their transactions (TxnOffsetCommit) and read them back from the
/// cluster when they resume; the links copy the committed offsets. Without that copy the application that moved
/// starts its input over on the destination and writes its output twice: the position really is the cluster's.
#[test]
fn an_application_that_moves_resumes_from_the_offsets_the_link_copied() {
    let script = application_script();
    let (findings, finished) = run(&script, Strategy::Barrier);
    let fenced = finished.apps.iter().find(|app| app.client == "fenced").unwrap();
    assert!(
        fenced.position > 0,
        "{fenced:?}: B holds the group's committed offset"
    );
    assert_eq!(findings.anomalies.app_duplicates, 0, "{:?}", findings.notes);

    let (findings, _) = mirror_sim::run_script_mutated(
        &script,
        Strategy::Barrier,
        &mirror_sim::SimStorage::memory(),
        mirror_sim::FetchBound::default(),
        Some(mirror_sim::Mutation::NoOffsetSync),
    )
    .unwrap();
    assert!(findings.anomalies.app_duplicates > 0, "{:?}", findings.notes);
}
