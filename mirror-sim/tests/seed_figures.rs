//! The seed's figures (`seeds/000`), each run on real partition logs under the strategy the seed describes, and
//! what the barrier strategies do with the same script.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use common::*;
use mirror_sim::Strategy;

/// `A → B → C → D` under `negate`: A's producer 5 is stored as 5, −7, 5, −7 along the chain (the transform is
/// not idempotent), and on C, after C takes over, its own local producer 5 collides with the restored 5: its
/// first batch is acknowledged as a duplicate of A's and never written — no error, nothing logged.
#[test]
fn negate_chain_maps_5_to_minus_7_to_5_and_collides_with_the_local_producer_5() {
    let steps = vec![
        advance("A", 4),
        advance("C", 4),
        start("A", "B", "orders"),
        start("B", "C", "orders"),
        start("C", "D", "orders"),
        idempotent("A/p", "A", "orders"),
        produce("A/p", 1),
        Step::Mirror,
        stop("C", "orders"),
        idempotent("C/local", "C", "orders"),
        produce("C/local", 1),
        produce("C/local", 1),
        Step::Mirror,
    ];
    use mirror_sim::Step;
    let script = script(&["A", "B", "C", "D"], steps);
    let (findings, finished) = run(&script, Strategy::Negate);
    assert_eq!(stored_ids(&finished, "A", "orders"), vec![5]);
    assert_eq!(stored_ids(&finished, "B", "orders"), vec![-7]);
    assert_eq!(
        stored_ids(&finished, "C", "orders"),
        vec![5],
        "A's 5 comes back; C's local producer is 5 too"
    );
    assert_eq!(
        stored_ids(&finished, "D", "orders"),
        vec![-7],
        "both of C's producers 5 are -7 on D"
    );
    assert!(
        findings.anomalies.silent_loss >= 1,
        "C's local producer 5 lost its first batch: {:?}",
        findings.notes
    );
    assert!(
        finished.client_errors.is_empty(),
        "zero signals: {:?}",
        finished.client_errors
    );

    let (barrier, _) = run(&script, Strategy::Barrier);
    assert_eq!(barrier.anomalies.corruption(), 0, "{:?}", barrier.notes);
}

/// `negate-skip-negative`: A and B each have a local producer 5; on C both are -7. Same epoch, sequences out of
/// order, and C takes both without a refusal (seed class 1: "no OutOfOrderSequenceException").
#[test]
fn skip_negative_collides_two_local_producers_5_at_minus_7_with_zero_signals() {
    let steps = vec![
        advance("A", 4),
        advance("B", 4),
        start("A", "B", "orders"),
        start("B", "C", "orders"),
        idempotent("A/p", "A", "orders"),
        produce("A/p", 2),
        produce("A/p", 2),
        mirror_sim::Step::Mirror,
        stop("B", "orders"),
        idempotent("B/p", "B", "orders"),
        produce("B/p", 1),
        mirror_sim::Step::Mirror,
    ];
    let script = script(&["A", "B", "C"], steps);
    let (findings, finished) = run(&script, Strategy::NegateSkipNegative);
    assert_eq!(stored_ids(&finished, "B", "orders"), vec![-7, 5]);
    assert_eq!(
        stored_ids(&finished, "C", "orders"),
        vec![-7],
        "A's 5 and B's 5 meet under -7"
    );
    assert!(
        findings.anomalies.collision_same_epoch >= 1,
        "{:?}",
        findings.notes
    );
    assert!(
        finished.client_errors.is_empty(),
        "zero signals: {:?}",
        finished.client_errors
    );
    assert!(finished.failed_links.is_empty());

    for strategy in [
        Strategy::Barrier,
        Strategy::BarrierEverywhere,
        Strategy::BarrierAdvance,
    ] {
        let (barrier, _) = run(&script, strategy);
        assert_eq!(
            barrier.anomalies.corruption(),
            0,
            "{strategy}: {:?}",
            barrier.notes
        );
    }
}

/// Seed class 2: the colliding producers have different epochs; the lower epoch is accepted downstream (on
/// REPLICATION Kafka only logs a WARN; the simulated client hears nothing).
#[test]
fn skip_negative_accepts_a_lower_epoch_of_another_producer_downstream() {
    let steps = vec![
        advance("A", 4),
        advance("B", 4),
        start("A", "B", "orders"),
        start("B", "C", "orders"),
        // A's producer 5 is transactional and re-initialised twice: epoch 2.
        transactional("A/t", "A", "orders", "a-app"),
        mirror_sim::Step::Connect {
            client: "A/t-again".into(),
            cluster: "A".into(),
            topic: "orders".into(),
            kind: mirror_sim::ClientKind::Transactional {
                transactional_id: "a-app".into(),
            },
        },
        mirror_sim::Step::Connect {
            client: "A/t-third".into(),
            cluster: "A".into(),
            topic: "orders".into(),
            kind: mirror_sim::ClientKind::Transactional {
                transactional_id: "a-app".into(),
            },
        },
        produce("A/t-third", 2),
        end("A/t-third", true),
        mirror_sim::Step::Mirror,
        stop("B", "orders"),
        idempotent("B/p", "B", "orders"),
        produce("B/p", 1),
        mirror_sim::Step::Mirror,
    ];
    let script = script(&["A", "B", "C"], steps);
    let (findings, finished) = run(&script, Strategy::NegateSkipNegative);
    assert_eq!(stored_ids(&finished, "C", "orders"), vec![-7]);
    assert!(
        findings.anomalies.collision_lower_epoch >= 1,
        "{:?}",
        findings.notes
    );
    assert!(finished.client_errors.is_empty(), "{:?}", finished.client_errors);
    let (barrier, _) = run(&script, Strategy::Barrier);
    assert_eq!(barrier.anomalies.corruption(), 0, "{:?}", barrier.notes);
}

/// Seed class 3: a transaction of A's producer 5 is open when B takes over. It reaches B only when the mirror
/// copies open transactions (fetching to the high watermark; `mirror-fsm`'s fetcher stops at the last stable
/// offset, and with it this class cannot occur) and B does not cut it (no KIP STOPPING). B's local producer 5
/// commits, and on C its COMMIT marker under -7 ends A's transaction too: read_committed on C shows records A
/// never committed. No exception anywhere.
#[test]
fn skip_negative_lets_one_producers_marker_close_the_others_transaction() {
    let steps = vec![
        advance("A", 4),
        advance("B", 4),
        start("A", "B", "orders"),
        start("B", "C", "orders"),
        transactional("A/t", "A", "orders", "a-app"),
        produce("A/t", 2),
        mirror_sim::Step::Mirror,
        stop("B", "orders"),
        transactional("B/t", "B", "orders", "b-app"),
        produce("B/t", 1),
        end("B/t", true),
        // A is lost: its producer's open transaction is never committed.
        move_to("A/t", "B", false),
        mirror_sim::Step::Mirror,
    ];
    let script = script(&["A", "B", "C"], steps);
    let run_to_hw = |strategy| {
        mirror_sim::run_script_with(
            &script,
            strategy,
            &mirror_sim::SimStorage::memory(),
            mirror_sim::FetchBound::HighWatermark,
        )
        .unwrap()
    };
    let (findings, finished) = run_to_hw(Strategy::NegateSkipNegative);
    assert!(findings.anomalies.collision_marker >= 1, "{:?}", findings.notes);
    assert!(
        findings.anomalies.exposed >= 1,
        "A's uncommitted records are visible: {:?}",
        findings.notes
    );
    assert!(finished.client_errors.is_empty(), "{:?}", finished.client_errors);
    // With the LSO-bounded fetch the open transaction never leaves A.
    let (bounded, _) = run(&script, Strategy::NegateSkipNegative);
    assert_eq!(bounded.anomalies.collision_marker, 0, "{:?}", bounded.notes);
    for strategy in [
        Strategy::Barrier,
        Strategy::BarrierEverywhere,
        Strategy::BarrierAdvance,
    ] {
        // With the LSO bound the barrier strategies are clean.
        let (barrier, _) = run(&script, strategy);
        assert_eq!(
            barrier.anomalies.corruption(),
            0,
            "{strategy}: {:?}",
            barrier.notes
        );
        // Fetching to the high watermark breaks them too, one hop down: B's STOPPING cuts A's open transaction
        // from B's log, but C copied it already and keeps it, so B's next transaction's marker ends it on C —
        // why the mirror fetcher stops at the last stable offset (ADR 0009).
        // (With `barrier+advance` B's next producer has another id, so no marker collides, but C still kept bytes
        // B cut: the mirror has diverged from its source.)
        let (unbounded, _) = run_to_hw(strategy);
        assert!(
            unbounded.anomalies.divergence >= 1,
            "{strategy}: {:?}",
            unbounded.notes
        );
        assert!(
            unbounded.notes.iter().all(|note| note.contains("C/orders")),
            "{strategy}: B itself is clean: {:?}",
            unbounded.notes
        );
    }
}
