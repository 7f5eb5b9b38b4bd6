//! Invariant 6: a crash at every write of STOPPING, on the memory and fs backends.
//!
//! A destination mirrors a source (a transaction is open at failover and another is decided on the source with
//! its marker beyond what was fetched), then fails over through a storage wrapper that fails every write from
//! the N-th on — the process "dies" there — for every N up to one past the number of writes a clean STOPPING
//! makes. After the crash the partition is reopened without the wrapper and the driver recovers from its
//! persisted state. Checked right after the crash: the partition is writable only if its barrier is in the log.
//! Checked at the end: STOPPED, writable, the log cut at the LSO, the last mirrored offset persisted, exactly one
//! barrier of this cluster, right after the cut, and the bytes before it equal to the source's.

mod common;

use common::{all_batches, barriers, cluster_config, memory_log, start_mirroring, LogFetcher};
use mirror_fsm::{last_mirrored_offset, Event, MirrorDriver, StateKind};
use partition_log::PartitionLog;
use partition_log_testkit::{coordinate, data, marker, produce};
use producer_state::BarrierScope;
use storage::{MemoryStorage, PartitionId, Storage};
use storage_fs::{FsConfig, FsStorage};
use storage_testkit::FaultyPartition;

type SharedLog = mirror_fsm::SharedLog;
type Opener = Box<dyn Fn() -> Box<dyn Storage>>;

fn id() -> PartitionId {
    PartitionId::new("t", 0).unwrap()
}

/// The source's traffic (see the module docs); returns the source and its LSO.
async fn source() -> (SharedLog, i64) {
    let mut log = memory_log("A", "t", BarrierScope::Writer).await;
    for sequence in 0..4 {
        produce(&mut log, data(1, 0, sequence * 2, 2, false))
            .await
            .unwrap();
    }
    produce(&mut log, data(2, 0, 0, 2, true)).await.unwrap();
    coordinate(&mut log, marker(true, 2, 0, 0)).await.unwrap();
    produce(&mut log, data(3, 0, 0, 1, true)).await.unwrap();
    produce(&mut log, data(-1, -1, -1, 1, false)).await.unwrap();
    let end = log.log_end_offset();
    log.advance_high_watermark(end);
    let lso = log.last_stable_offset();
    (mirror_fsm::shared(log), lso)
}

async fn open_log(storage: Box<dyn storage::PartitionStorage>) -> PartitionLog {
    PartitionLog::open(storage, cluster_config("B", BarrierScope::Writer), 0)
        .await
        .unwrap()
        .0
}

/// Mirrors the source into a fresh destination partition and leaves it MIRRORING, caught up.
async fn mirror(open: &Opener, source: &SharedLog) {
    let store = open();
    let mut log = open_log(store.create(&id()).await.unwrap()).await;
    let mut fetcher = LogFetcher::new(source, "A");
    let driver = start_mirroring(&mut log, &mut fetcher, "A", "B").await;
    assert_eq!(driver.state().kind(), StateKind::Mirroring);
    assert!(log.is_read_only());
}

/// Fails over, crashing at the `n`-th write of STOPPING; returns whether it crashed and the writes it made.
async fn stop_crashing_at(open: &Opener, source: &SharedLog, n: usize) -> (bool, usize) {
    let store = open();
    let (wrapped, faults) = FaultyPartition::new(store.open(&id()).await.unwrap());
    drop(store);
    let mut log = open_log(Box::new(wrapped)).await;
    let mut fetcher = LogFetcher::new(source, "A");
    let mut driver = MirrorDriver::recover(&mut log, &mut fetcher, "B").await.unwrap();
    let before = faults.writes();
    faults.fail_after(n);
    let crashed = driver.handle(&mut log, &mut fetcher, Event::Stop).await.is_err();
    (crashed, faults.writes() - before)
}

/// Reopens after the crash, checks "writable only with the barrier", resumes, checks the end state.
async fn recover_and_check(open: &Opener, source: &SharedLog, source_lso: i64, n: usize) {
    let store = open();
    let mut log = open_log(store.open(&id()).await.unwrap()).await;
    drop(store);
    let own_barriers = |found: Vec<(i64, Option<String>)>| {
        found
            .into_iter()
            .filter(|(_, writer)| writer.as_deref() == Some("B"))
            .map(|(offset, _)| offset)
            .collect::<Vec<_>>()
    };
    if !log.is_read_only() {
        assert_eq!(
            own_barriers(barriers(&log).await).len(),
            1,
            "crash at write {n}: writable without its barrier"
        );
    }
    let mut fetcher = LogFetcher::new(source, "A");
    let mut driver = MirrorDriver::recover(&mut log, &mut fetcher, "B").await.unwrap();
    if driver.state().kind() != StateKind::Stopped {
        // Recovery resumed a step that failed again, or the crash left FAILED behind: stop again.
        driver.handle(&mut log, &mut fetcher, Event::Stop).await.unwrap();
    }
    assert_eq!(driver.state().kind(), StateKind::Stopped, "crash at write {n}");
    assert!(!log.is_read_only());
    let lmo = last_mirrored_offset(&log, "A").await.unwrap();
    // The destination fetched up to the source's LSO (where producer 3's open transaction starts), so its own
    // LSO is its log end and the cut lands there.
    assert_eq!(lmo, Some(source_lso), "crash at write {n}");
    assert_eq!(
        own_barriers(barriers(&log).await),
        vec![source_lso],
        "crash at write {n}: exactly one barrier"
    );
    assert_eq!(log.log_end_offset(), source_lso + 1);
    let ours = all_batches(&log).await;
    let theirs = all_batches(&source.try_read().unwrap()).await;
    for (a, b) in ours
        .iter()
        .zip(theirs.iter())
        .filter(|(a, _)| a.base_offset() < source_lso)
    {
        assert_eq!(a.as_bytes(), b.as_bytes(), "crash at write {n}");
    }
    assert_eq!(log.producer_state().producer_count(), 0, "the barrier applied");
}

async fn crash_at_every_write(open: Opener) {
    let (source, source_lso) = source().await;
    // How many writes a clean STOPPING makes.
    let clean_writes = {
        mirror(&open, &source).await;
        let (crashed, writes) = stop_crashing_at(&open, &source, usize::MAX / 2).await;
        assert!(!crashed);
        recover_and_check(&open, &source, source_lso, 0).await;
        open().delete(&id()).await.unwrap();
        writes
    };
    assert!(
        clean_writes >= 6,
        "STOPPING persists every step: {clean_writes} writes"
    );
    for n in 1..=clean_writes + 1 {
        mirror(&open, &source).await;
        let (crashed, _) = stop_crashing_at(&open, &source, n).await;
        assert_eq!(crashed, n <= clean_writes, "crash at write {n}");
        recover_and_check(&open, &source, source_lso, n).await;
        open().delete(&id()).await.unwrap();
    }
}

#[tokio::test]
async fn memory_crash_at_every_write_of_stopping_converges_to_one_barrier() {
    let store = MemoryStorage::new();
    crash_at_every_write(Box::new(move || Box::new(store.clone()) as Box<dyn Storage>)).await;
}

#[tokio::test]
async fn fs_crash_at_every_write_of_stopping_converges_to_one_barrier() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    crash_at_every_write(Box::new(move || {
        Box::new(FsStorage::open(FsConfig::new(&path)).unwrap()) as Box<dyn Storage>
    }))
    .await;
}
