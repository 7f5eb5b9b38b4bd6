//! The seed's failback rule: B's barrier, stored by A while A mirrors B, "does not trigger PSM expiration on A".
//! That is writer scope; the KIP prototype resets at every barrier (everywhere scope). These tests pin what the
//! difference is in the simulator: the same bytes, the same anomalies (none), and only the mirror's producer
//! state drifts from its source's under writer scope until its own barrier clears it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use mirror_sim::{generate, run_script, SimStorage, Strategy, Topology, Workload};

#[test]
fn under_writer_scope_a_failing_back_mirror_keeps_state_its_source_cleared_and_under_everywhere_it_does_not()
{
    let script = generate(Topology::Failback, Workload::Seed, 4, 30);
    let (writer_findings, writer) = run_script(&script, Strategy::Barrier, &SimStorage::memory()).unwrap();
    let (everywhere_findings, everywhere) =
        run_script(&script, Strategy::BarrierEverywhere, &SimStorage::memory()).unwrap();

    // A stores B's barrier mid-stream: under writer scope A keeps what it knew of its own former producers
    // (here producer 4's coordinator epoch, from a transaction A's coordinator ended before the first failover).
    assert!(
        writer
            .state_drift
            .iter()
            .any(|drift| drift.starts_with("A/orders mirroring B")),
        "{:?}",
        writer.state_drift
    );
    assert!(everywhere.state_drift.is_empty(), "{:?}", everywhere.state_drift);

    // Nothing a client or a consumer can see differs: the same logs byte for byte, no anomaly under either.
    assert_eq!(writer.logs, everywhere.logs);
    assert_eq!(writer.committed_views, everywhere.committed_views);
    assert_eq!(writer_findings.anomalies, everywhere_findings.anomalies);
    assert_eq!(
        writer_findings.anomalies.corruption(),
        0,
        "{:?}",
        writer_findings.notes
    );
}

#[test]
fn with_the_allocator_advanced_the_drift_is_producers_the_source_no_longer_knows() {
    let script = generate(Topology::Failback, Workload::Seed, 4, 30);
    let (findings, finished) = run_script(&script, Strategy::BarrierAdvance, &SimStorage::memory()).unwrap();
    assert_eq!(findings.anomalies.corruption(), 0, "{:?}", findings.notes);
    let drift = finished
        .state_drift
        .iter()
        .find(|drift| drift.starts_with("A/orders mirroring B"))
        .expect("A keeps its former producers across B's barrier");
    assert!(drift.contains("only the mirror holds [0, 1, 2, 3, 4]"), "{drift}");
    assert!(drift.contains("only the source []"), "{drift}");
}
