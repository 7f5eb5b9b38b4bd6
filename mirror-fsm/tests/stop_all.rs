//! `stop_all`: many partitions failed over concurrently end exactly as one `Stop` each would leave them, each
//! result is reported in order, and a partition whose storage fails mid-STOPPING fails alone (its own recovery is
//! invariant 6's subject, `stopping_crash.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use common::LogFetcher;
use common::{barriers, cluster_config, memory_log, start_mirroring};
use mirror_fsm::{last_mirrored_offset, stop_all, StateKind, StopJob};
use partition_log::PartitionLog;
use partition_log_testkit::{data, produce};
use producer_state::BarrierScope;
use storage::{MemoryStorage, PartitionId, Storage};
use storage_testkit::FaultyPartition;

const PARTITIONS: u32 = 8;
const FAILING: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_all_leaves_every_partition_stopped_with_one_barrier_and_a_failing_one_fails_alone() {
    let mut source = memory_log("A", "t", BarrierScope::Writer).await;
    for sequence in 0..5 {
        produce(&mut source, data(1, 0, sequence * 2, 2, false))
            .await
            .unwrap();
    }
    let end = source.log_end_offset();
    source.advance_high_watermark(end);
    let source = mirror_fsm::shared(source);

    let store = MemoryStorage::new();
    let mut mirrors = Vec::new();
    let mut faults = Vec::new();
    for partition in 0..PARTITIONS {
        let id = PartitionId::new("t", partition).unwrap();
        let (wrapped, fault) = FaultyPartition::new(store.create(&id).await.unwrap());
        let (mut log, _) =
            PartitionLog::open(Box::new(wrapped), cluster_config("B", BarrierScope::Writer), 0)
                .await
                .unwrap();
        let mut fetcher = LogFetcher::new(&source, "A");
        let driver = start_mirroring(&mut log, &mut fetcher, "A", "B").await;
        assert_eq!(driver.state().kind(), StateKind::Mirroring);
        mirrors.push((log, driver, fetcher));
        faults.push(fault);
    }
    // The third partition's storage fails from its second STOPPING write on.
    faults[FAILING].fail_after(2);

    let jobs = mirrors
        .iter_mut()
        .map(|(log, driver, fetcher)| StopJob { log, driver, fetcher })
        .collect();
    let results = stop_all(jobs, 3).await;

    assert_eq!(results.len(), PARTITIONS as usize);
    for (index, ((log, driver, _), result)) in mirrors.iter().zip(&results).enumerate() {
        if index == FAILING {
            assert!(result.is_err(), "the failing partition reports its storage error");
            assert!(log.is_read_only(), "and stays read-only: no barrier was written");
            continue;
        }
        assert!(result.is_ok(), "partition {index}: {result:?}");
        assert_eq!(driver.state().kind(), StateKind::Stopped, "partition {index}");
        assert!(!log.is_read_only(), "partition {index} is writable");
        assert_eq!(
            last_mirrored_offset(log, "A").await.unwrap(),
            Some(end),
            "partition {index}"
        );
        let own: Vec<i64> = barriers(log)
            .await
            .into_iter()
            .filter(|(_, writer)| writer.as_deref() == Some("B"))
            .map(|(offset, _)| offset)
            .collect();
        assert_eq!(
            own,
            vec![end],
            "partition {index}: exactly one barrier, right after the mirrored data"
        );
    }
}
