//! A transactional producer that moves to another cluster abandons the transaction it had open on the old one;
//! that cluster's coordinator aborts it once `transaction.timeout.ms` has passed, as Kafka's does. The simulator
//! lets that time pass before the oracle judges: judged earlier, the abandoned transaction pinned the old
//! cluster's last stable offset and hid another producer's committed records (issue 49: two of its five
//! reproductions, `tests/repro/`, which shrank to six steps without any mirroring and showed under every
//! strategy).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use mirror_sim::shrink::Reproduction;
use mirror_sim::{run_script, SimStorage, Strategy};

const REPRODUCTIONS: [(&str, &str); 2] = [
    (
        "moved-transactional-producer-lso-stuck-failback",
        include_str!("repro/moved-transactional-producer-lso-stuck-failback.json"),
    ),
    (
        "lso-stuck-random-tree-barrier",
        include_str!("repro/lso-stuck-random-tree-barrier.json"),
    ),
];

#[test]
fn a_transaction_abandoned_by_a_moving_producer_is_aborted_by_its_timeout_before_the_oracle_judges() {
    for (name, json) in REPRODUCTIONS {
        let reproduction: Reproduction = serde_json::from_str(json).unwrap();
        for strategy in Strategy::ALL {
            let (findings, finished) =
                run_script(&reproduction.script, strategy, &SimStorage::memory()).unwrap();
            assert_eq!(
                findings.anomalies.hidden_committed, 0,
                "{name} under {strategy}: {:?}",
                findings.notes
            );
            for (partition, batches) in &finished.logs {
                let end = batches.last().map_or(0, |batch| batch.next_offset());
                assert_eq!(
                    finished.last_stable_offsets.get(partition).copied(),
                    Some(end),
                    "{name} under {strategy}: {partition:?} keeps a transaction open"
                );
            }
        }
    }
}
