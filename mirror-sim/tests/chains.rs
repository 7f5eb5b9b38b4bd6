//! The seed: "On failover at any point in the chain, the barrier expires all PSM entries on the stopping node."
//! The chain topologies first fail over their third node while the second is still a mirror of A and the nodes
//! below keep mirroring the third; then each node fails over in turn from the head.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use mirror_sim::{generate, run_script, SimStorage, Strategy, Topology, Workload};
use record_format::ControlRecord;

/// The writers of the barriers in `cluster`'s log of `orders`, with their offsets.
fn barriers(finished: &mirror_sim::Finished, cluster: &str) -> Vec<(i64, Option<String>)> {
    finished.logs[&(cluster.to_owned(), "orders".to_owned())]
        .iter()
        .filter(|batch| batch.is_control())
        .filter_map(|batch| {
            let records = record_format::control::decode_control_records(batch).ok()?;
            records.into_iter().find_map(|record| match record {
                ControlRecord::MirrorPidReset(barrier) => {
                    Some((batch.base_offset(), barrier.writer_cluster_id))
                }
                _ => None,
            })
        })
        .collect()
}

#[test]
fn a_failover_in_the_middle_of_a_chain_writes_its_barrier_and_the_nodes_below_copy_it() {
    for workload in [Workload::Seed, Workload::Unplanned] {
        let script = generate(Topology::Chain5, workload, 1, 30);
        let (findings, finished) = run_script(&script, Strategy::Barrier, &SimStorage::memory()).unwrap();
        assert_eq!(
            findings.anomalies.corruption(),
            0,
            "{workload:?}: {:?}",
            findings.notes
        );
        assert!(finished.failed_links.is_empty(), "{:?}", finished.failed_links);
        // C stopped mirroring B while B still mirrored A: C's first barrier is its own, and D below it holds
        // the same barrier at the same offset.
        let on_c = barriers(&finished, "C");
        let first_of_c = on_c.first().expect("C wrote a barrier").clone();
        assert_eq!(first_of_c.1.as_deref(), Some("C"), "{workload:?}: {on_c:?}");
        assert!(
            barriers(&finished, "D").contains(&first_of_c),
            "{workload:?}: D copied C's barrier"
        );
        // B's log holds no barrier of C's: the failover below it did not reach upstream.
        assert!(
            barriers(&finished, "B")
                .iter()
                .all(|(_, writer)| writer.as_deref() != Some("C")),
            "{workload:?}"
        );
    }
}
