//! STOPPING cuts at the stable cut and aborts what it keeps open with real ABORT markers (ADR 0045).
//!
//! The link copies the tail below when, on the source, a transaction (P4) opened before another (P5) committed,
//! and P4 ended after a third (P6) opened: the fetch stops at P6's first offset, with P5's marker but without
//! P4's. At the destination, P5's record lies below the LSO and is served as committed, while P4 holds the LSO. A
//! cut at the LSO would remove P5's marker, re-opening what readers saw committed. A cut repeated until nothing is
//! open (this project's rule before ADR 0045) would remove P5's record, which readers and downstream mirrors
//! already hold. The stable cut keeps both, and an ABORT marker closes P4 before the barrier.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use common::{all_batches, barriers, memory_log, start_mirroring, LogFetcher};
use mirror_fsm::{Event, StateKind, StoppingTail};
use partition_log::{Isolation, PartitionLog};
use partition_log_testkit::{coordinate, data, marker, produce};
use producer_state::BarrierScope;

/// A source whose LSO-bounded tail holds P5's commit above P4's open record (see the module docs).
async fn interleaved_source() -> PartitionLog {
    let mut source = memory_log("A", "t", BarrierScope::Writer).await;
    produce(&mut source, data(5, 0, 0, 1, true)).await.unwrap(); // 0: P5 opens
    produce(&mut source, data(4, 0, 0, 1, true)).await.unwrap(); // 1: P4 opens
    coordinate(&mut source, marker(true, 5, 0, 0)).await.unwrap(); // 2: P5 commits
    produce(&mut source, data(6, 0, 0, 1, true)).await.unwrap(); // 3: P6 opens
    coordinate(&mut source, marker(false, 4, 0, 0)).await.unwrap(); // 4: P4 aborts
    let end = source.log_end_offset();
    source.advance_high_watermark(end);
    assert_eq!(source.last_stable_offset(), 3, "P6 holds the source's LSO");
    source
}

/// The offsets a read_committed consumer of `log` is given records of, skipping aborted transactions as Kafka's
/// consumer does: a producer is skipped from its aborted entry's first offset until its ABORT marker.
async fn committed_offsets(log: &PartitionLog) -> Vec<i64> {
    let fetched = log
        .read(log.log_start_offset(), usize::MAX, Isolation::ReadCommitted)
        .await
        .unwrap();
    let mut skipping = std::collections::BTreeSet::new();
    let mut served = Vec::new();
    for batch in &fetched.batches {
        for aborted in &fetched.aborted_transactions {
            if aborted.first_offset == batch.base_offset() {
                skipping.insert(aborted.producer_id);
            }
        }
        if batch.is_control() {
            if batch.is_transactional()
                && matches!(
                    record_format::control::decode_control_records(batch).as_deref(),
                    Ok([record_format::control::ControlRecord::Abort(_)])
                )
            {
                skipping.remove(&batch.producer_id());
            }
        } else if !(batch.is_transactional() && skipping.contains(&batch.producer_id())) {
            served.push(batch.base_offset());
        }
    }
    served
}

#[tokio::test]
async fn stopping_keeps_a_committed_transaction_whose_marker_lies_above_the_lso_and_aborts_the_open_one_with_a_marker(
) {
    let source = mirror_fsm::shared(interleaved_source().await);
    let mut dest = memory_log("B", "t", BarrierScope::Writer).await;
    let mut fetcher = LogFetcher::new(&source, "A");
    let mut driver = start_mirroring(&mut dest, &mut fetcher, "A", "B").await;
    assert_eq!(
        dest.log_end_offset(),
        3,
        "P5's data and marker, and P4's data without its marker"
    );
    assert_eq!(dest.last_stable_offset(), 1, "P4 is open at the destination");
    let served_before = committed_offsets(&dest).await;
    assert_eq!(
        served_before,
        vec![0],
        "P5's record is served as committed before the failover"
    );

    driver.handle(&mut dest, &mut fetcher, Event::Stop).await.unwrap();
    assert_eq!(driver.state().kind(), StateKind::Stopped);
    assert_eq!(
        mirror_fsm::last_mirrored_offset(&dest, "A").await.unwrap(),
        Some(3),
        "the last mirrored offset is the cut: only the source's bytes lie below it"
    );
    assert_eq!(
        barriers(&dest).await,
        vec![(4, Some("B".to_owned()))],
        "the cut keeps P5's marker at 2; P4's ABORT marker at 3; the barrier follows"
    );
    let source_batches = all_batches(&*source.read().await).await;
    let dest_batches = all_batches(&dest).await;
    for (kept, original) in dest_batches.iter().take(3).zip(&source_batches) {
        assert_eq!(
            kept.as_bytes(),
            original.as_bytes(),
            "offset {}",
            kept.base_offset()
        );
    }
    assert_eq!(dest_batches[3].producer_id(), 4);
    assert_eq!(
        mirror_fsm::read_tail(&dest_batches[3..4], "B"),
        StoppingTail::Unfinished,
        "an ABORT marker"
    );
    let end = dest.log_end_offset();
    dest.advance_high_watermark(end);
    assert_eq!(dest.last_stable_offset(), end, "nothing is open");
    assert_eq!(
        committed_offsets(&dest).await,
        served_before,
        "what was served as committed still is, and P4's record is not"
    );

    // P4's id, issued again after the failover, commits a new transaction: a reader skipping P4's aborted one
    // stops at its ABORT marker and is given the new one (a marker-less abort would hide it for good).
    produce(&mut dest, data(4, 1, 0, 1, true)).await.unwrap();
    let again = dest.log_end_offset() - 1;
    coordinate(&mut dest, marker(true, 4, 1, 0)).await.unwrap();
    let end = dest.log_end_offset();
    dest.advance_high_watermark(end);
    assert_eq!(committed_offsets(&dest).await, vec![0, again]);
}

/// A chain A → B → C where B fails over while C keeps mirroring it. C copied B's committed P5 before the
/// failover, so B must not cut it (C would hold a record B no longer has). After the failover C copies B's ABORT
/// marker for P4 and B's barrier, under either barrier scope.
async fn chain_with_middle_failover(scope: BarrierScope) -> (PartitionLog, PartitionLog) {
    let source = mirror_fsm::shared(interleaved_source().await);
    let middle = mirror_fsm::shared(memory_log("B", "t", scope).await);
    let mut from_a = LogFetcher::new(&source, "A");
    let mut b_driver = {
        let mut log = middle.write().await;
        start_mirroring(&mut log, &mut from_a, "A", "B").await
    };
    let mut downstream = memory_log("C", "t", scope).await;
    let mut from_b = LogFetcher::new(&middle, "B");
    let mut c_driver = start_mirroring(&mut downstream, &mut from_b, "B", "C").await;
    assert_eq!(
        downstream.log_end_offset(),
        1,
        "C copied P5's record, below B's LSO"
    );

    {
        let mut log = middle.write().await;
        b_driver.handle(&mut log, &mut from_a, Event::Stop).await.unwrap();
        assert_eq!(b_driver.state().kind(), StateKind::Stopped);
        // B's replicas have the markers and the barrier (a node raises the high watermark as they replicate).
        let end = log.log_end_offset();
        log.advance_high_watermark(end);
    }
    c_driver.catch_up(&mut downstream, &mut from_b).await.unwrap();
    drop(from_b);
    let middle = std::sync::Arc::try_unwrap(middle).ok().unwrap().into_inner();
    (middle, downstream)
}

#[tokio::test]
async fn a_downstream_mirror_stays_a_prefix_of_a_middle_node_that_failed_over_and_serves_what_it_serves() {
    for scope in [BarrierScope::Writer, BarrierScope::Everywhere] {
        let (middle, mut downstream) = chain_with_middle_failover(scope).await;
        let middle_batches = all_batches(&middle).await;
        let downstream_batches = all_batches(&downstream).await;
        assert_eq!(
            downstream_batches.len(),
            middle_batches.len(),
            "{scope:?}: C caught up with B"
        );
        for (copy, original) in downstream_batches.iter().zip(&middle_batches) {
            assert_eq!(
                copy.as_bytes(),
                original.as_bytes(),
                "{scope:?}: offset {}",
                copy.base_offset()
            );
        }
        let end = downstream.log_end_offset();
        downstream.advance_high_watermark(end);
        assert_eq!(
            downstream.last_stable_offset(),
            end,
            "{scope:?}: nothing open at C"
        );
        assert_eq!(
            committed_offsets(&downstream).await,
            committed_offsets(&middle).await,
            "{scope:?}"
        );
    }
}

/// A source whose copied tail the stable cut empties: P7 opens at 0, P9 at 1, and P7 commits at 2, so the link
/// copies P7's record alone (up to the source's LSO, 1) and holds it open: its LSO and stable cut are 0.
async fn open_transaction_source() -> PartitionLog {
    let mut source = memory_log("A", "t", BarrierScope::Writer).await;
    produce(&mut source, data(7, 0, 0, 1, true)).await.unwrap(); // 0: P7 opens
    produce(&mut source, data(9, 0, 0, 1, true)).await.unwrap(); // 1: P9 opens
    coordinate(&mut source, marker(true, 7, 0, 0)).await.unwrap(); // 2: P7 commits
    let end = source.log_end_offset();
    source.advance_high_watermark(end);
    assert_eq!(source.last_stable_offset(), 1, "P9 holds the source's LSO");
    source
}

/// The simulator's departures from STOPPING (ADR 0062) each leave out their one rule and keep the rest.
#[tokio::test]
async fn each_stopping_departure_leaves_out_its_one_rule_and_keeps_the_others() {
    use mirror_fsm::StoppingDeparture;
    let barrier_at = |offset: i64| vec![(offset, Some("B".to_owned()))];
    // (departure, log end after STOPPING, barriers, last mirrored offset)
    let cases = [
        // Cut to 0 (nothing left open, so no marker), the barrier at 0.
        (None, 1, barrier_at(0), 0),
        // No cut: P7's ABORT marker at 1, the barrier at 2.
        (Some(StoppingDeparture::NoStableCut), 3, barrier_at(2), 1),
        // Nothing written: the copied log as it was, opened for writes.
        (Some(StoppingDeparture::NoBarrier), 1, Vec::new(), 1),
        // The cut and the barrier as always; the offset recorded is the end before the cut.
        (
            Some(StoppingDeparture::LastMirroredBeforeTheCut),
            1,
            barrier_at(0),
            1,
        ),
    ];
    for (departure, end, expected_barriers, last_mirrored) in cases {
        let source = mirror_fsm::shared(open_transaction_source().await);
        let mut dest = memory_log("B", "t", BarrierScope::Writer).await;
        let mut fetcher = LogFetcher::new(&source, "A");
        let mut driver = start_mirroring(&mut dest, &mut fetcher, "A", "B").await;
        assert_eq!(dest.log_end_offset(), 1, "{departure:?}: P7's record, open");
        driver.depart_from_stopping(departure);
        driver.handle(&mut dest, &mut fetcher, Event::Stop).await.unwrap();
        assert_eq!(driver.state().kind(), StateKind::Stopped, "{departure:?}");
        assert!(!dest.is_read_only(), "{departure:?}: writable");
        assert_eq!(dest.log_end_offset(), end, "{departure:?}");
        assert_eq!(barriers(&dest).await, expected_barriers, "{departure:?}");
        assert_eq!(
            mirror_fsm::last_mirrored_offset(&dest, "A").await.unwrap(),
            Some(last_mirrored),
            "{departure:?}"
        );
    }
}
