//! STOPPING's cut to the LSO reaches a point where nothing is open. One cut to the LSO is not always that point:
//! a transaction whose records lie below the LSO and whose marker lies above it is open again once the cut
//! removes its marker. The link copies exactly that when, on the source, a transaction (P4) opened before another
//! (P5) committed, and P4 ended after a third (P6) opened: the fetch stops at P6's first offset, with P5's marker
//! but without P4's.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use common::{all_batches, barriers, memory_log, start_mirroring, LogFetcher};
use mirror_fsm::{Event, StateKind};
use partition_log_testkit::{coordinate, data, marker, produce};
use producer_state::BarrierScope;

#[tokio::test]
async fn stopping_cuts_again_when_its_cut_reopens_a_transaction_whose_marker_lay_above_the_lso() {
    let mut source = memory_log("A", "t", BarrierScope::Writer).await;
    produce(&mut source, data(5, 0, 0, 1, true)).await.unwrap(); // 0: P5 opens
    produce(&mut source, data(4, 0, 0, 1, true)).await.unwrap(); // 1: P4 opens
    coordinate(&mut source, marker(true, 5, 0, 0)).await.unwrap(); // 2: P5 commits
    produce(&mut source, data(6, 0, 0, 1, true)).await.unwrap(); // 3: P6 opens
    coordinate(&mut source, marker(false, 4, 0, 0)).await.unwrap(); // 4: P4 aborts
    let end = source.log_end_offset();
    source.advance_high_watermark(end);
    assert_eq!(source.last_stable_offset(), 3, "P6 holds the source's LSO");
    let source = mirror_fsm::shared(source);

    let mut dest = memory_log("B", "t", BarrierScope::Writer).await;
    let mut fetcher = LogFetcher::new(&source, "A");
    let mut driver = start_mirroring(&mut dest, &mut fetcher, "A", "B").await;
    assert_eq!(
        dest.log_end_offset(),
        3,
        "P5's data and marker, and P4's data without its marker"
    );
    assert_eq!(dest.last_stable_offset(), 1, "P4 is open at the destination");

    driver.handle(&mut dest, &mut fetcher, Event::Stop).await.unwrap();
    assert_eq!(driver.state().kind(), StateKind::Stopped);
    // A cut at 1 would keep P5's records without their marker; the barrier would then abort a transaction the
    // source committed. The cut goes on to 0, where nothing is open, and the barrier follows.
    assert_eq!(barriers(&dest).await, vec![(0, Some("B".to_owned()))]);
    assert_eq!(all_batches(&dest).await.len(), 1, "only the barrier");
    let end = dest.log_end_offset();
    dest.advance_high_watermark(end);
    assert_eq!(dest.last_stable_offset(), end, "nothing is open");
}
