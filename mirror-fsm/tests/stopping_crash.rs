//! Invariant 6: a crash at every write of STOPPING, on the memory, fs, sled and RocksDB backends.
//!
//! A destination mirrors a source, then fails over through a storage wrapper that fails every write from the
//! N-th on — the process "dies" there — for every N up to one past the number of writes a clean STOPPING makes.
//! Two sources: in one a transaction is open at failover and another is decided with its marker beyond what was
//! fetched; in the other, transactions interleave so that the destination's stable cut keeps one open, and
//! STOPPING writes an ABORT marker for it before its barrier (ADR 0045). After the crash the partition is reopened
//! without the wrapper and the driver recovers from its persisted state. Checked right after the crash: the
//! partition is writable only if its barrier is in the log. Checked at the end: STOPPED, writable, the log cut at
//! the stable cut, the last mirrored offset persisted there, one ABORT marker for each transaction the cut kept
//! open, exactly one barrier of this cluster right after them, nothing open, and the bytes before the cut equal to
//! the source's.
//!
//! The same under real power loss (`fs_power_loss_…`): the fs backend runs on the power-loss simulator, the power
//! fails at every write STOPPING makes (torn, unsynced writes lost, directory entries not synced dropped; three
//! outcomes per point), and after the reboot producer state must equal a replay of the surviving log, and once
//! recovered the partition must end exactly where a clean STOPPING ends: the same log, aborted-transaction index,
//! LSO, high watermark and producer state.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use common::{all_batches, barriers, cluster_config, memory_log, start_mirroring, LogFetcher};
use mirror_fsm::{last_mirrored_offset, Event, MirrorDriver, StateKind};
use partition_log::PartitionLog;
use partition_log_testkit::{coordinate, data, marker, produce};
use producer_state::BarrierScope;
use std::sync::Arc;
use storage::{MemoryStorage, PartitionId, Storage};

use storage_fs::sim::{SimFs, SimRng};
use storage_fs::{FsConfig, FsStorage};
use storage_testkit::FaultyPartition;

type SharedLog = mirror_fsm::SharedLog;
type Opener = Box<dyn Fn() -> Box<dyn Storage>>;

fn id() -> PartitionId {
    PartitionId::new("t", 0).unwrap()
}

/// A source (see the module docs): the shared log, its LSO (where the destination's fetch stops and its stable
/// cut lands) and how many transactions the destination holds open there (one ABORT marker each).
struct Source {
    log: SharedLog,
    lso: i64,
    aborts: i64,
}

/// The source's traffic; `interleaved`: P5 opens, P4 opens, P5 commits, P6 opens (the source's LSO), P4 aborts.
async fn source(interleaved: bool) -> Source {
    let mut log = memory_log("A", "t", BarrierScope::Writer).await;
    for sequence in 0..4 {
        produce(&mut log, data(1, 0, sequence * 2, 2, false))
            .await
            .unwrap();
    }
    produce(&mut log, data(2, 0, 0, 2, true)).await.unwrap();
    coordinate(&mut log, marker(true, 2, 0, 0)).await.unwrap();
    if interleaved {
        produce(&mut log, data(5, 0, 0, 1, true)).await.unwrap();
        produce(&mut log, data(4, 0, 0, 1, true)).await.unwrap();
        coordinate(&mut log, marker(true, 5, 0, 0)).await.unwrap();
        produce(&mut log, data(6, 0, 0, 1, true)).await.unwrap();
        coordinate(&mut log, marker(false, 4, 0, 0)).await.unwrap();
    } else {
        produce(&mut log, data(3, 0, 0, 1, true)).await.unwrap();
        produce(&mut log, data(-1, -1, -1, 1, false)).await.unwrap();
    }
    let end = log.log_end_offset();
    log.advance_high_watermark(end);
    let lso = log.last_stable_offset();
    Source {
        log: mirror_fsm::shared(log),
        lso,
        aborts: i64::from(interleaved),
    }
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
async fn recover_and_check(open: &Opener, expected: &Source, n: usize) {
    let (source, source_lso) = (&expected.log, expected.lso);
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
    // The destination fetched up to the source's LSO, where its stable cut lands: its own LSO there, or (with the
    // interleaved traffic) past P5's marker, keeping P4 open.
    assert_eq!(lmo, Some(source_lso), "crash at write {n}");
    let barrier_at = source_lso + expected.aborts;
    assert_eq!(
        own_barriers(barriers(&log).await),
        vec![barrier_at],
        "crash at write {n}: exactly one barrier, after one ABORT marker per transaction kept open"
    );
    assert_eq!(log.log_end_offset(), barrier_at + 1);
    let ours = all_batches(&log).await;
    let between: Vec<_> = ours
        .iter()
        .filter(|batch| (source_lso..barrier_at).contains(&batch.base_offset()))
        .cloned()
        .collect();
    assert_eq!(between.len() as i64, expected.aborts, "crash at write {n}");
    assert_eq!(
        mirror_fsm::read_tail(&between, "B"),
        mirror_fsm::StoppingTail::Unfinished,
        "crash at write {n}: only ABORT markers between the cut and the barrier"
    );
    assert!(
        log.producer_state().ongoing_transactions().is_empty(),
        "crash at write {n}: a transaction is still open"
    );
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
    for interleaved in [false, true] {
        crash_at_every_write_with(&open, &source(interleaved).await).await;
    }
}

async fn crash_at_every_write_with(open: &Opener, expected: &Source) {
    let source = &expected.log;
    // How many writes a clean STOPPING makes.
    let clean_writes = {
        mirror(open, source).await;
        let (crashed, writes) = stop_crashing_at(open, source, usize::MAX / 2).await;
        assert!(!crashed);
        recover_and_check(open, expected, 0).await;
        open().delete(&id()).await.unwrap();
        writes
    };
    assert!(
        clean_writes >= 6,
        "STOPPING persists every step: {clean_writes} writes"
    );
    for n in 1..=clean_writes + 1 {
        mirror(open, source).await;
        let (crashed, _) = stop_crashing_at(open, source, n).await;
        assert_eq!(crashed, n <= clean_writes, "crash at write {n}");
        recover_and_check(open, expected, n).await;
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

#[tokio::test]
async fn sled_crash_at_every_write_of_stopping_converges_to_one_barrier() {
    let dir = tempfile::tempdir().unwrap();
    // One open database, shared by every "process" (sled locks its directory).
    let store = storage_sled::SledStorage::open(storage_sled::SledConfig::new(dir.path())).unwrap();
    crash_at_every_write(Box::new(move || Box::new(store.clone()) as Box<dyn Storage>)).await;
}

#[tokio::test]
async fn rocks_crash_at_every_write_of_stopping_converges_to_one_barrier() {
    let dir = tempfile::tempdir().unwrap();
    let store = storage_rocks::RocksStorage::open(storage_rocks::RocksConfig::new(dir.path())).unwrap();
    crash_at_every_write(Box::new(move || Box::new(store.clone()) as Box<dyn Storage>)).await;
}

fn sim_opener(fs: &SimFs) -> Opener {
    let fs = fs.clone();
    Box::new(move || {
        Box::new(FsStorage::open_on(FsConfig::new("/data"), Arc::new(fs.clone())).unwrap())
            as Box<dyn Storage>
    })
}

/// Where a partition ended up: its batches, aborted-transaction index, LSO, high watermark, producer state.
#[derive(Debug, PartialEq)]
struct Outcome {
    batches: Vec<Vec<u8>>,
    summary: producer_state::StateSummary,
    high_watermark: i64,
}

async fn outcome(open: &Opener) -> Outcome {
    let log = open_log(open().open(&id()).await.unwrap()).await;
    Outcome {
        batches: all_batches(&log)
            .await
            .iter()
            .map(|b| b.as_bytes().to_vec())
            .collect(),
        summary: log.summary().await.unwrap(),
        high_watermark: log.high_watermark(),
    }
}

/// Producer state and the aborted index after recovery equal a replay of the surviving log from scratch.
async fn assert_state_equals_replay(open: &Opener, at: u64) {
    let log = open_log(open().open(&id()).await.unwrap()).await;
    let mut replay = common::memory_log("B", "t", BarrierScope::Writer).await;
    if log.log_start_offset() > 0 {
        replay
            .truncate_fully_and_start_at(log.log_start_offset())
            .await
            .unwrap();
    }
    let batches = all_batches(&log).await;
    if !batches.is_empty() {
        replay.append_as_follower(batches).await.unwrap();
    }
    replay.advance_high_watermark(log.high_watermark());
    let mut recovered = log.summary().await.unwrap();
    let mut replayed = replay.summary().await.unwrap();
    // The replay's high watermark is capped by its own log end, as the recovered one is.
    recovered.last_stable_offset = recovered.last_stable_offset.min(log.high_watermark());
    replayed.last_stable_offset = replayed.last_stable_offset.min(log.high_watermark());
    assert_eq!(
        recovered, replayed,
        "power lost at write {at}: producer state differs from a replay"
    );
}

/// Fails over on the simulator; with `power_fails_at = Some(k)`, the power fails at the `k`-th file-system write
/// of STOPPING. Returns whether STOPPING failed and how many writes it made. What was mirrored is synced first
/// (a power loss may take mirrored data never synced, and STOPPING then rightly cuts below it).
async fn stop_on_sim(fs: &SimFs, source: &SharedLog, power_fails_at: Option<u64>) -> (bool, u64) {
    let store = sim_opener(fs)();
    let mut log = open_log(store.open(&id()).await.unwrap()).await;
    log.flush(storage::Durability::Sync).await.unwrap();
    let mut fetcher = LogFetcher::new(source, "A");
    let mut driver = MirrorDriver::recover(&mut log, &mut fetcher, "B").await.unwrap();
    let before = fs.stats().mutations;
    if let Some(k) = power_fails_at {
        fs.power_fails_at(before + k);
    }
    let syncs_before = fs.stats();
    let failed = driver.handle(&mut log, &mut fetcher, Event::Stop).await.is_err();
    if power_fails_at.is_none() {
        let after = fs.stats();
        eprintln!(
            "a clean STOPPING on fs: {} file syncs, {} directory syncs",
            after.file_syncs - syncs_before.file_syncs,
            after.dir_syncs - syncs_before.dir_syncs
        );
    }
    (failed, fs.stats().mutations - before)
}

#[tokio::test]
async fn fs_power_loss_at_every_write_of_stopping_converges_to_the_clean_outcome() {
    for interleaved in [false, true] {
        power_loss_at_every_write(&source(interleaved).await).await;
    }
}

async fn power_loss_at_every_write(expected: &Source) {
    let source = &expected.log;
    let clean = SimFs::new();
    let open = sim_opener(&clean);
    mirror(&open, source).await;
    let (failed, writes) = stop_on_sim(&clean, source, None).await;
    assert!(!failed);
    recover_and_check(&open, expected, 0).await;
    let reference = outcome(&open).await;
    assert!(writes > 10, "STOPPING made only {writes} file-system writes");
    let mut points = 0;
    for at in 1..=writes {
        for variant in 0..3 {
            let fs = SimFs::new();
            mirror(&sim_opener(&fs), source).await;
            let (crashed, _) = stop_on_sim(&fs, source, Some(at)).await;
            assert!(crashed, "the power failed at write {at}");
            let rebooted = fs.crash(&mut SimRng::new(at * 3 + variant));
            let open = sim_opener(&rebooted);
            assert_state_equals_replay(&open, at).await;
            recover_and_check(&open, expected, at as usize).await;
            assert_eq!(outcome(&open).await, reference, "power lost at write {at}");
            points += 1;
        }
    }
    eprintln!("STOPPING under power loss: {points} crash outcomes over its {writes} file-system writes");
}
