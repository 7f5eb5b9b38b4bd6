//! Unplanned failovers: the source is lost with open transactions and data its mirror has not copied. What the
//! source acknowledged and the destination never received is the failover's loss window, counted apart from
//! silent loss — also after a failback cuts it from the old source's log.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use mirror_sim::{generate, run_script, SimStorage, Strategy, Topology, Workload};

#[test]
fn a_planned_failover_loses_nothing_in_its_window() {
    let script = generate(Topology::ActivePassive, Workload::Seed, 1, 30);
    let (findings, finished) = run_script(&script, Strategy::Barrier, &SimStorage::memory()).unwrap();
    assert!(
        finished.failover_window.is_empty(),
        "{:?}",
        finished.failover_window
    );
    assert_eq!(findings.anomalies.corruption(), 0, "{:?}", findings.notes);
}

#[test]
fn an_unplanned_failover_loses_its_window_and_nothing_else_under_the_barrier() {
    for topology in [Topology::ActivePassive, Topology::Failback, Topology::Chain3] {
        let script = generate(topology, Workload::Unplanned, 1, 30);
        let (findings, finished) = run_script(&script, Strategy::Barrier, &SimStorage::memory()).unwrap();
        assert!(
            !finished.failover_window.is_empty(),
            "{topology}: the source lost unmirrored records"
        );
        assert_eq!(
            findings.anomalies.corruption(),
            0,
            "{topology}: {:?}",
            findings.notes
        );
        // Every record in the window was acknowledged by the cluster that lost it.
        for id in &finished.failover_window {
            assert!(
                finished.truth.records[id].acked_on.is_some(),
                "{topology}: record {id}"
            );
        }
    }
}

#[test]
fn without_the_window_a_failback_would_count_the_lost_records_as_silent_loss() {
    // Failback brings the old source back as a mirror of the new one: its unmirrored tail is cut, so the records
    // it acknowledged leave its log — exactly the window, and nothing the oracle may call (a).
    let script = generate(Topology::Failback, Workload::Unplanned, 1, 30);
    let (_, finished) = run_script(&script, Strategy::Barrier, &SimStorage::memory()).unwrap();
    let held: std::collections::BTreeSet<u64> =
        finished.committed_views.values().flatten().copied().collect();
    let cut = finished
        .failover_window
        .iter()
        .filter(|id| !held.contains(id))
        .count();
    assert!(cut > 0, "some window records are gone from every log");
}
