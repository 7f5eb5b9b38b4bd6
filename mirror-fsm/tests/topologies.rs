//! The seed's five topologies with real partition logs, one per cluster and partition, driven by the test.
//!
//! Each runs for both barrier scopes: idempotent and transactional producers on the source (one transaction left
//! open at failover), mirroring, failover, local producers afterwards that reuse the mirrored producer ids and
//! sequences, and — for failback and the chain — further hops. After each failover the checks are the
//! invariants of ARCHITECTURE.md: the destination equals its source byte for byte up to the last mirrored
//! offset (5); it holds exactly one barrier of its own, right at that offset (6); right after the barrier it
//! has no producers and no open transactions, and local producers reusing mirrored ids are accepted from
//! sequence 0, never as duplicates (2); while mirrored it refuses clients (4).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use common::{all_batches, barriers, memory_log, LogFetcher, SharedLog};
use mirror_fsm::{last_mirrored_offset, Event, MirrorDriver, StateKind};
use partition_log::{LogError, PartitionLog};
use partition_log_testkit::{coordinate, data, marker, produce};
use producer_state::BarrierScope;

const SCOPES: [BarrierScope; 2] = [BarrierScope::Writer, BarrierScope::Everywhere];

fn shared(log: PartitionLog) -> SharedLog {
    mirror_fsm::shared(log)
}

fn settle(log: &SharedLog) {
    let mut log = log.try_write().unwrap();
    let end = log.log_end_offset();
    log.advance_high_watermark(end);
}

/// A mirror session: `destination` (in cluster `cluster`) mirroring `source`.
struct Mirror {
    cluster: String,
    destination: SharedLog,
    driver: MirrorDriver,
    fetcher: LogFetcher,
}

impl Mirror {
    async fn start(
        cluster: &str,
        destination: &SharedLog,
        source_cluster: &str,
        source: &SharedLog,
    ) -> Mirror {
        let mut fetcher = LogFetcher::new(source, source_cluster);
        let mut driver = {
            let mut log = destination.try_write().unwrap();
            MirrorDriver::recover(&mut log, &mut fetcher, cluster)
                .await
                .unwrap()
        };
        {
            let mut log = destination.try_write().unwrap();
            driver
                .handle(
                    &mut log,
                    &mut fetcher,
                    Event::Start {
                        source_cluster_id: source_cluster.to_owned(),
                    },
                )
                .await
                .unwrap();
        }
        assert_eq!(driver.state().kind(), StateKind::Mirroring);
        Mirror {
            cluster: cluster.to_owned(),
            destination: std::sync::Arc::clone(destination),
            driver,
            fetcher,
        }
    }

    async fn catch_up(&mut self) {
        let mut log = self.destination.try_write().unwrap();
        self.driver.catch_up(&mut log, &mut self.fetcher).await.unwrap();
    }

    /// Fails over; returns the last mirrored offset.
    async fn stop(&mut self) -> i64 {
        let mut log = self.destination.try_write().unwrap();
        self.driver
            .handle(&mut log, &mut self.fetcher, Event::Stop)
            .await
            .unwrap();
        assert_eq!(self.driver.state().kind(), StateKind::Stopped);
        let source = self.driver.state().source_cluster_id().unwrap();
        last_mirrored_offset(&log, source).await.unwrap().unwrap()
    }
}

/// Source traffic: idempotent producer 1, transactional producer 2 (one committed transaction, one left open,
/// after an abort of any transaction a previous round left open), plain data; sequences continue from the
/// log's state.
async fn source_traffic(log: &SharedLog) {
    let mut log = log.try_write().unwrap();
    let next = |log: &PartitionLog, producer: i64| {
        log.producer_state()
            .producer(producer)
            .map_or(0, |entry| entry.last_seq() + 1)
    };
    if log
        .producer_state()
        .producer(2)
        .is_some_and(|entry| entry.current_txn_first_offset.is_some())
    {
        coordinate(&mut log, marker(false, 2, 0, 0)).await.unwrap();
    }
    for _ in 0..3 {
        let sequence = next(&log, 1);
        produce(&mut log, data(1, 0, sequence, 2, false)).await.unwrap();
    }
    let sequence = next(&log, 2);
    produce(&mut log, data(2, 0, sequence, 2, true)).await.unwrap();
    coordinate(&mut log, marker(true, 2, 0, 0)).await.unwrap();
    produce(&mut log, data(-1, -1, -1, 1, false)).await.unwrap();
    let sequence = next(&log, 2);
    produce(&mut log, data(2, 0, sequence, 2, true)).await.unwrap(); // left open
    let end = log.log_end_offset();
    log.advance_high_watermark(end);
}

/// Invariants 4 (while mirrored) — clients are refused and nothing is written.
async fn assert_read_only(log: &SharedLog) {
    let mut log = log.try_write().unwrap();
    let end = log.log_end_offset();
    let refused = produce(&mut log, data(9, 0, 0, 1, false)).await;
    assert!(
        matches!(refused, Err(LogError::ReadOnlyTopic { .. })),
        "{refused:?}"
    );
    assert_eq!(log.log_end_offset(), end);
}

/// Invariants 5, 6 and 2 after a failover at `lmo`: bytes equal to the source's up to `lmo`, this cluster's
/// barrier exactly at `lmo` and nowhere else after the last one of a previous session, a clean slate, and local
/// producers reusing mirrored ids accepted from sequence 0.
async fn assert_failover(mirror: &Mirror, source: &SharedLog, lmo: i64, own_barriers_before: usize) {
    let destination = mirror.destination.try_read().unwrap();
    let ours: Vec<_> = all_batches(&destination)
        .await
        .into_iter()
        .filter(|batch| batch.base_offset() < lmo)
        .collect();
    let theirs: Vec<_> = all_batches(&source.try_read().unwrap())
        .await
        .into_iter()
        .filter(|batch| batch.base_offset() < lmo)
        .collect();
    assert_eq!(ours.len(), theirs.len());
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a.as_bytes(), b.as_bytes(), "batch at {} differs", a.base_offset());
    }
    let own: Vec<i64> = barriers(&destination)
        .await
        .into_iter()
        .filter(|(_, writer)| writer.as_deref() == Some(mirror.cluster.as_str()))
        .map(|(offset, _)| offset)
        .collect();
    assert_eq!(
        own.len(),
        own_barriers_before + 1,
        "exactly one new barrier: {own:?}"
    );
    assert_eq!(
        own.last(),
        Some(&lmo),
        "the barrier sits at the last mirrored offset"
    );
    assert_eq!(destination.log_end_offset(), lmo + 1, "nothing after the barrier");
    assert!(!destination.is_read_only());
    assert_eq!(destination.producer_state().producer_count(), 0, "clean slate");
    assert!(destination.producer_state().ongoing_transactions().is_empty());
    assert_eq!(destination.first_unstable_offset(), None);
}

/// Local producers after failover reuse the mirrored ids 1 and 2 from sequence 0.
async fn local_producers_reuse_mirrored_ids(log: &SharedLog) {
    let mut log = log.try_write().unwrap();
    let first = produce(&mut log, data(1, 0, 0, 2, false)).await.unwrap();
    assert!(
        !first.duplicate,
        "a mirrored batch must never make a local one a duplicate"
    );
    produce(&mut log, data(1, 0, 2, 1, false)).await.unwrap();
    produce(&mut log, data(2, 0, 0, 1, true)).await.unwrap();
    coordinate(&mut log, marker(true, 2, 0, 0)).await.unwrap();
    let end = log.log_end_offset();
    log.advance_high_watermark(end);
    assert_eq!(log.last_stable_offset(), end);
}

/// Fails `mirror` over, checks the invariants against `source`, then lets local producers reuse the mirrored
/// ids; returns the last mirrored offset.
async fn fail_over(mirror: &mut Mirror, source: &SharedLog, own_barriers_before: usize) -> i64 {
    let lmo = mirror.stop().await;
    assert_failover(mirror, source, lmo, own_barriers_before).await;
    local_producers_reuse_mirrored_ids(&mirror.destination).await;
    lmo
}

#[tokio::test]
async fn active_passive() {
    for scope in SCOPES {
        let a = shared(memory_log("A", "t", scope).await);
        let b = shared(memory_log("B", "t", scope).await);
        source_traffic(&a).await;
        let mut ab = Mirror::start("B", &b, "A", &a).await;
        ab.catch_up().await;
        assert_read_only(&b).await;
        assert_eq!(
            b.try_read().unwrap().log_end_offset(),
            a.try_read().unwrap().last_stable_offset()
        );
        let lmo = ab.stop().await;
        // Mirroring stops at the source's LSO: the open transaction's data never reached B.
        assert_eq!(lmo, a.try_read().unwrap().last_stable_offset(), "{scope:?}");
        assert_failover(&ab, &a, lmo, 0).await;
        local_producers_reuse_mirrored_ids(&b).await;
    }
}

#[tokio::test]
async fn failback_over_three_hops() {
    for scope in SCOPES {
        let a = shared(memory_log("A", "t", scope).await);
        let b = shared(memory_log("B", "t", scope).await);
        // Hop 1: A → B, failover to B.
        source_traffic(&a).await;
        let mut ab = Mirror::start("B", &b, "A", &a).await;
        ab.catch_up().await;
        let lmo_b = fail_over(&mut ab, &a, 0).await;
        // A diverged meanwhile (unmirrored writes), then fails back: hop 2, B → A.
        source_traffic(&a).await;
        let mut ba = Mirror::start("A", &a, "B", &b).await;
        assert_eq!(
            a.try_read().unwrap().log_end_offset(),
            lmo_b,
            "A truncated to B's last mirrored offset"
        );
        ba.catch_up().await;
        assert_read_only(&a).await;
        let lmo_a = ba.stop().await;
        assert_failover(&ba, &b, lmo_a, 0).await;
        // A carries B's barrier (applied or not by scope) and now its own.
        let writers: Vec<_> = barriers(&a.try_read().unwrap())
            .await
            .into_iter()
            .map(|(_, w)| w.unwrap())
            .collect();
        assert_eq!(writers, ["B", "A"], "{scope:?}");
        local_producers_reuse_mirrored_ids(&a).await;
        // Hop 3: A → B again.
        source_traffic(&b).await;
        let mut ab = Mirror::start("B", &b, "A", &a).await;
        assert_eq!(
            b.try_read().unwrap().log_end_offset(),
            lmo_a,
            "B truncated to A's last mirrored offset"
        );
        ab.catch_up().await;
        fail_over(&mut ab, &a, 1).await;
    }
}

#[tokio::test]
async fn fan_out() {
    for scope in SCOPES {
        let a = shared(memory_log("A", "t", scope).await);
        let b = shared(memory_log("B", "t", scope).await);
        let c = shared(memory_log("C", "t", scope).await);
        source_traffic(&a).await;
        let mut ab = Mirror::start("B", &b, "A", &a).await;
        let mut ac = Mirror::start("C", &c, "A", &a).await;
        ab.catch_up().await;
        ac.catch_up().await;
        fail_over(&mut ab, &a, 0).await;
        // C keeps mirroring A independently.
        {
            let mut log = a.try_write().unwrap();
            coordinate(&mut log, marker(false, 2, 0, 0)).await.unwrap();
        }
        settle(&a);
        ac.catch_up().await;
        assert_read_only(&c).await;
        let lmo_c = ac.stop().await;
        assert_eq!(
            lmo_c,
            a.try_read().unwrap().log_end_offset(),
            "no open transaction left on A"
        );
        assert_failover(&ac, &a, lmo_c, 0).await;
        local_producers_reuse_mirrored_ids(&c).await;
    }
}

#[tokio::test]
async fn fan_in() {
    for scope in SCOPES {
        let a = shared(memory_log("A", "t1", scope).await);
        let b = shared(memory_log("B", "t2", scope).await);
        let c1 = shared(memory_log("C", "t1", scope).await);
        let c2 = shared(memory_log("C", "t2", scope).await);
        source_traffic(&a).await;
        source_traffic(&b).await;
        let mut ac = Mirror::start("C", &c1, "A", &a).await;
        let mut bc = Mirror::start("C", &c2, "B", &b).await;
        ac.catch_up().await;
        bc.catch_up().await;
        let lmo_1 = ac.stop().await;
        assert_failover(&ac, &a, lmo_1, 0).await;
        // The other topic's partition is untouched by this failover.
        assert_read_only(&c2).await;
        assert_eq!(c2.try_read().unwrap().producer_state().producer_count(), 2);
        fail_over(&mut bc, &b, 0).await;
        local_producers_reuse_mirrored_ids(&c1).await;
    }
}

#[tokio::test]
async fn chain_of_three_hops() {
    for scope in SCOPES {
        let a = shared(memory_log("A", "t", scope).await);
        let b = shared(memory_log("B", "t", scope).await);
        let c = shared(memory_log("C", "t", scope).await);
        let d = shared(memory_log("D", "t", scope).await);
        source_traffic(&a).await;
        let mut ab = Mirror::start("B", &b, "A", &a).await;
        let mut bc = Mirror::start("C", &c, "B", &b).await;
        let mut cd = Mirror::start("D", &d, "C", &c).await;
        for _ in 0..2 {
            ab.catch_up().await;
            bc.catch_up().await;
            cd.catch_up().await;
        }
        assert_eq!(
            d.try_read().unwrap().log_end_offset(),
            a.try_read().unwrap().last_stable_offset()
        );
        // Failover in the middle of the chain: B becomes writable; C and D carry B's barrier on.
        fail_over(&mut ab, &a, 0).await;
        bc.catch_up().await;
        cd.catch_up().await;
        assert_read_only(&c).await;
        assert_read_only(&d).await;
        assert_eq!(
            d.try_read().unwrap().log_end_offset(),
            b.try_read().unwrap().log_end_offset()
        );
        // Then at the end of the chain.
        fail_over(&mut cd, &c, 0).await;
        let writers: Vec<_> = barriers(&d.try_read().unwrap())
            .await
            .into_iter()
            .map(|(_, w)| w.unwrap())
            .collect();
        assert_eq!(writers, ["B", "D"], "{scope:?}");
    }
}

/// Invariant 7: a fetcher that switches cluster id mid-session moves the partition to FAILED, not retryable,
/// and nothing is appended.
#[tokio::test]
async fn a_source_that_changes_cluster_id_fails_the_session() {
    let a = shared(memory_log("A", "t", BarrierScope::Writer).await);
    let b = shared(memory_log("B", "t", BarrierScope::Writer).await);
    source_traffic(&a).await;
    let mut ab = Mirror::start("B", &b, "A", &a).await;
    ab.catch_up().await;
    let end = b.try_read().unwrap().log_end_offset();
    {
        let mut log = a.try_write().unwrap();
        produce(&mut log, data(-1, -1, -1, 3, false)).await.unwrap();
    }
    settle(&a);
    ab.fetcher.reported_cluster_id = "impostor".to_owned();
    ab.catch_up().await;
    let state = ab.driver.state().clone();
    assert_eq!(state.kind(), StateKind::Failed);
    let failure = state.failure().cloned().unwrap();
    assert!(!failure.retryable);
    assert!(failure.message.contains("impostor"), "{}", failure.message);
    assert_eq!(b.try_read().unwrap().log_end_offset(), end, "nothing appended");
    assert!(!ab.driver.fetching());
    assert_read_only(&b).await;
    // Retries do not revive a non-retryable failure.
    let mut log = b.try_write().unwrap();
    ab.driver
        .handle(&mut log, &mut ab.fetcher, Event::Tick { now_ms: i64::MAX / 2 })
        .await
        .unwrap();
    assert_eq!(ab.driver.state().kind(), StateKind::Failed);
}
