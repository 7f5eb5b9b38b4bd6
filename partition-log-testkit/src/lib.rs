//! The Kafka-semantics scenario suite: the log-level scenarios of kafka-semantics §11.3 (and the barrier invariants of
//! ARCHITECTURE.md) as checks every storage backend runs.
//!
//! A backend crate expands [`kafka_semantics_suite!`](crate::kafka_semantics_suite) with a
//! [`storage_testkit::conformance::Backend`]; each scenario becomes a named `#[tokio::test]`. The names follow Kafka's
//! `UnifiedLogTest` / `LogLoaderTest` where a scenario ports one. The checks panic with a message on failure
//! (they are test code), which is why this module allows `unwrap`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

pub mod executor;

use partition_log::{
    AppendOutcome, CompactionPolicy, Isolation, LogConfig, LogError, PartitionLog, RecoveryReport,
    ReplicaSet, RetentionBreach, RetentionPolicy,
};
use producer_state::{AppendOrigin, BarrierScope, PsmConfig, TransactionVersion};
use record_format::control::{end_txn_marker_batch, mirror_pid_reset_batch, ControlBatchPlacement};
use record_format::{AbortedTxn, BatchBuilder, MirrorPidResetRecord, RecordBatch};
use storage::PartitionId;
use storage_testkit::conformance::Backend;
use storage_testkit::FaultyPartition;

/// The cluster the scenarios' logs belong to.
pub const LOCAL_CLUSTER: &str = "local-cluster";

/// A configuration for scenarios: small segments, the local cluster id, the given barrier scope.
pub fn config(scope: BarrierScope) -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        producer_state: PsmConfig {
            cluster_id: Some(LOCAL_CLUSTER.to_owned()),
            barrier_scope: scope,
            ..PsmConfig::default()
        },
        ..LogConfig::default()
    }
}

fn partition(number: u32) -> PartitionId {
    PartitionId::new("scenario", number).unwrap()
}

/// Creates partition `number` in a fresh store of `backend` and opens a log on it.
pub async fn create_log(backend: &dyn Backend, number: u32, config: LogConfig) -> PartitionLog {
    create_logs(backend, &[number], config).await.remove(0)
}

/// Creates several partitions in one store of `backend` (embedded databases allow one open store per
/// directory) and opens a log on each.
pub async fn create_logs(backend: &dyn Backend, numbers: &[u32], config: LogConfig) -> Vec<PartitionLog> {
    let store = backend.store().await;
    let mut logs = Vec::new();
    for &number in numbers {
        let storage = store.create(&partition(number)).await.unwrap();
        logs.push(PartitionLog::open(storage, config.clone(), 0).await.unwrap().0);
    }
    logs
}

/// Drops `log` without closing it (a crash, for the process) and opens it again.
pub async fn crash_and_reopen(
    backend: &dyn Backend,
    log: PartitionLog,
    config: LogConfig,
) -> (PartitionLog, RecoveryReport) {
    let id = log.id().clone();
    drop(log);
    let store = backend.store().await;
    let storage = store.open(&id).await.unwrap();
    PartitionLog::open(storage, config, 0).await.unwrap()
}

/// Drops `log` (a crash), deletes every producer snapshot of its partition and opens it again: what a recovery
/// rebuilds from the log alone.
pub async fn reopen_without_snapshots(
    backend: &dyn Backend,
    log: PartitionLog,
    config: LogConfig,
) -> (PartitionLog, RecoveryReport) {
    let id = log.id().clone();
    drop(log);
    let store = backend.store().await;
    let mut storage = store.open(&id).await.unwrap();
    for offset in storage.snapshot_offsets().await.unwrap() {
        storage.delete_snapshot(offset).await.unwrap();
    }
    PartitionLog::open(storage, config, 0).await.unwrap()
}

/// Closes `log` cleanly and opens it again.
pub async fn close_and_reopen(
    backend: &dyn Backend,
    log: PartitionLog,
    config: LogConfig,
) -> (PartitionLog, RecoveryReport) {
    let id = log.id().clone();
    log.close().await.unwrap();
    let store = backend.store().await;
    let storage = store.open(&id).await.unwrap();
    PartitionLog::open(storage, config, 0).await.unwrap()
}

/// A client batch of `records` records from producer `pid` (−1: no producer) at `sequence`.
pub fn data(pid: i64, epoch: i16, sequence: i32, records: usize, transactional: bool) -> RecordBatch {
    let mut builder = BatchBuilder::new()
        .producer(pid, epoch, sequence)
        .transactional(transactional);
    for i in 0..records {
        builder.add(1_000 + i as i64, None, Some(b"value"), &[]);
    }
    builder.build().unwrap()
}

/// A transaction marker (TV0/1 style) from coordinator epoch `coordinator_epoch`.
pub fn marker(commit: bool, pid: i64, epoch: i16, coordinator_epoch: i32) -> RecordBatch {
    end_txn_marker_batch(commit, pid, epoch, coordinator_epoch, placement()).unwrap()
}

/// A `MIRROR_PID_RESET` barrier from `source`, written by `writer`.
pub fn barrier(source: &str, writer: Option<&str>) -> RecordBatch {
    let value = MirrorPidResetRecord::new(source, writer.map(str::to_owned));
    mirror_pid_reset_batch(&value, placement()).unwrap()
}

/// An aborted-transaction index entry.
pub fn aborted(producer_id: i64, first_offset: i64, last_offset: i64, last_stable_offset: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id,
        first_offset,
        last_offset,
        last_stable_offset,
    }
}

fn placement() -> ControlBatchPlacement {
    ControlBatchPlacement {
        base_offset: 0,
        partition_leader_epoch: 0,
        timestamp: 2_000,
    }
}

/// Appends as a client and returns the outcome.
pub async fn produce(log: &mut PartitionLog, batch: RecordBatch) -> partition_log::Result<AppendOutcome> {
    log.append_as_leader(vec![batch], AppendOrigin::Client, TransactionVersion::V0)
        .await
}

/// Appends a coordinator batch (marker or barrier).
pub async fn coordinate(log: &mut PartitionLog, batch: RecordBatch) -> partition_log::Result<AppendOutcome> {
    log.append_as_leader(vec![batch], AppendOrigin::Coordinator, TransactionVersion::V0)
        .await
}

fn settle(log: &mut PartitionLog) {
    let end = log.log_end_offset();
    log.advance_high_watermark(end);
}

// ---------------------------------------------------------------------------------------------------------------
// Appends by origin.

/// testDuplicateAppends: a resent batch (one of the last five) is answered with its original offsets and nothing
/// is written; a partial overlap is out of order.
pub async fn duplicate_appends_return_the_original_offsets(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    for sequence in 0..6 {
        let outcome = produce(&mut log, data(1, 0, sequence, 1, false)).await.unwrap();
        assert_eq!(outcome.first_offset, i64::from(sequence));
    }
    let multi = produce(&mut log, data(1, 0, 6, 3, false)).await.unwrap();
    assert_eq!((multi.first_offset, multi.last_offset), (6, 8));
    let end = log.log_end_offset();
    let again = produce(&mut log, data(1, 0, 6, 3, false)).await.unwrap();
    assert!(again.duplicate);
    assert_eq!((again.first_offset, again.last_offset), (6, 8));
    assert_eq!(log.log_end_offset(), end, "a duplicate writes nothing");
    // Sequences 5..=7 overlap the cached 6..=8 only partly.
    let overlap = produce(&mut log, data(1, 0, 5, 3, false)).await;
    assert!(matches!(overlap, Err(LogError::ProducerState(_))), "{overlap:?}");
    // Sequence 2 is the fourth batch from the tail: still cached, so a duplicate.
    let older = produce(&mut log, data(1, 0, 2, 1, false)).await.unwrap();
    assert!(older.duplicate);
    assert_eq!(older.first_offset, 2);
    // Sequence 1 is no longer cached (five batches kept): out of order.
    assert!(produce(&mut log, data(1, 0, 1, 1, false)).await.is_err());
    assert_eq!(log.log_end_offset(), end);
}

/// testDuplicateAppendToFollower: replication accepts repeated sequences (it is not a client).
pub async fn replication_accepts_repeated_sequences(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    let mut first = data(1, 0, 0, 2, false);
    first.set_base_offset(0);
    let mut repeat = data(1, 0, 0, 2, false);
    repeat.set_base_offset(2);
    log.append_as_follower(vec![first, repeat]).await.unwrap();
    assert_eq!(log.log_end_offset(), 4);
}

/// A follower's batches must follow its log end.
pub async fn replication_below_the_log_end_is_refused(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    produce(&mut log, data(-1, -1, -1, 3, false)).await.unwrap();
    let mut batch = data(-1, -1, -1, 1, false);
    batch.set_base_offset(1);
    let refused = log.append_as_follower(vec![batch]).await;
    assert!(matches!(refused, Err(LogError::Storage(_))), "{refused:?}");
    assert_eq!(log.log_end_offset(), 3);
}

/// testOldProducerEpoch: epoch 0 after epoch 1 is refused.
pub async fn old_producer_epoch_is_refused(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    produce(&mut log, data(1, 1, 0, 1, false)).await.unwrap();
    let stale = produce(&mut log, data(1, 0, 1, 1, false)).await;
    assert!(matches!(stale, Err(LogError::ProducerState(_))), "{stale:?}");
    assert_eq!(log.log_end_offset(), 1);
}

/// testZombieCoordinatorFenced: a marker from an older coordinator epoch is fenced; a repeated TV0 marker from
/// the same coordinator epoch is accepted.
pub async fn zombie_coordinator_is_fenced(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    produce(&mut log, data(1, 0, 0, 1, true)).await.unwrap();
    coordinate(&mut log, marker(false, 1, 0, 2)).await.unwrap();
    coordinate(&mut log, marker(false, 1, 0, 2)).await.unwrap();
    let zombie = coordinate(&mut log, marker(false, 1, 0, 1)).await;
    assert!(matches!(zombie, Err(LogError::ProducerState(_))), "{zombie:?}");
}

/// Invariant 3: a client cannot write a control batch, so nothing a client sends resets producer state.
pub async fn client_control_batches_are_refused(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Everywhere)).await;
    produce(&mut log, data(1, 0, 0, 1, false)).await.unwrap();
    for forged in [barrier("other", None), marker(true, 1, 0, 0)] {
        let refused = produce(&mut log, forged).await;
        assert!(
            matches!(refused, Err(LogError::InvalidBatch { .. })),
            "{refused:?}"
        );
    }
    assert_eq!(log.log_end_offset(), 1);
    assert!(log.producer_state().producer(1).is_some());
}

/// Spec §7.1 step 1: a produce request holds exactly one batch (not two, not none), with base offset 0.
pub async fn client_appends_are_validated_structurally(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    let two = log
        .append_as_leader(
            vec![data(-1, -1, -1, 1, false), data(-1, -1, -1, 1, false)],
            AppendOrigin::Client,
            TransactionVersion::V0,
        )
        .await;
    assert!(matches!(two, Err(LogError::InvalidBatch { .. })), "{two:?}");
    let none = log
        .append_as_leader(Vec::new(), AppendOrigin::Client, TransactionVersion::V0)
        .await;
    assert!(matches!(none, Err(LogError::InvalidBatch { .. })), "{none:?}");
    let mut moved = data(-1, -1, -1, 1, false);
    moved.set_base_offset(5);
    assert!(matches!(
        produce(&mut log, moved).await,
        Err(LogError::InvalidBatch { .. })
    ));
    let mut corrupt = data(1, 0, 0, 1, false).as_bytes().to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let corrupt = RecordBatch::parse(corrupt.into()).unwrap();
    assert!(matches!(
        produce(&mut log, corrupt).await,
        Err(LogError::CorruptBatch { .. })
    ));
    assert_eq!(log.log_end_offset(), 0);
}

/// Invariant 4: while read-only, client appends fail with ReadOnlyTopic and write nothing, and so does this
/// cluster's coordinator's transaction marker (a mirror's transactions are its source's, ADR 0045); replication
/// and coordinator appends (the barrier) still work; the flag survives a crash.
pub async fn read_only_refuses_client_appends_and_survives_restart(backend: &dyn Backend) {
    let config = config(BarrierScope::Writer);
    let mut log = create_log(backend, 0, config.clone()).await;
    log.set_read_only(true).await.unwrap();
    let refused = produce(&mut log, data(1, 0, 0, 1, false)).await;
    assert!(
        matches!(refused, Err(LogError::ReadOnlyTopic { .. })),
        "{refused:?}"
    );
    assert_eq!(log.log_end_offset(), 0);
    assert!(log.producer_state().producer(1).is_none());
    let mut mirrored_open = data(8, 0, 0, 1, true);
    mirrored_open.set_base_offset(2);
    log.append_as_follower(vec![data(7, 0, 0, 2, false), mirrored_open])
        .await
        .unwrap();
    let end = log.log_end_offset();
    let marker = log.write_marker(false, 8, 0, 0, 5_000).await;
    assert!(
        matches!(marker, Err(LogError::ReadOnlyTopic { .. })),
        "{marker:?}"
    );
    assert_eq!(log.log_end_offset(), end, "no marker of this cluster in a mirror");
    coordinate(&mut log, barrier("source", Some(LOCAL_CLUSTER)))
        .await
        .unwrap();
    let (mut log, _) = crash_and_reopen(backend, log, config).await;
    assert!(log.is_read_only());
    assert!(matches!(
        produce(&mut log, data(1, 0, 0, 1, false)).await,
        Err(LogError::ReadOnlyTopic { .. })
    ));
    log.set_read_only(false).await.unwrap();
    produce(&mut log, data(1, 0, 0, 1, false)).await.unwrap();
}

// ---------------------------------------------------------------------------------------------------------------
// Barriers.

/// Invariant 2: right after a barrier that applies there are no producers and no open transactions (the open
/// one is aborted at the barrier, ADR 0005); a local producer reusing a mirrored id starts at sequence 0 and is
/// never taken for a duplicate.
pub async fn barrier_leaves_a_clean_slate(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    // Mirrored history: producer 5 idempotent, producer 6 in an open transaction.
    let mut mirrored = data(5, 3, 0, 2, false);
    mirrored.set_base_offset(0);
    let mut open_txn = data(6, 0, 0, 1, true);
    open_txn.set_base_offset(2);
    log.append_as_follower(vec![mirrored, open_txn]).await.unwrap();
    let outcome = coordinate(&mut log, barrier("source", Some(LOCAL_CLUSTER)))
        .await
        .unwrap();
    assert_eq!(outcome.barriers_applied, 1);
    assert_eq!(log.producer_state().producer_count(), 0);
    assert!(log.producer_state().ongoing_transactions().is_empty());
    settle(&mut log);
    assert_eq!(
        log.aborted_transactions().await.unwrap(),
        vec![aborted(6, 2, 3, 4)],
        "the open transaction is aborted at the barrier"
    );
    // The same id and sequence as the mirrored batch: a new producer, not a duplicate.
    let local = produce(&mut log, data(5, 0, 0, 2, false)).await.unwrap();
    assert!(!local.duplicate);
    assert_eq!(local.first_offset, 4);
}

/// The failback rule: under `Writer` scope a barrier written by another cluster, replicated here, does not reset
/// this cluster's producers; under `Everywhere` it does.
pub async fn barrier_from_another_writer_applies_only_everywhere(backend: &dyn Backend) {
    for (scope, number, expected_producers) in
        [(BarrierScope::Writer, 0, 1), (BarrierScope::Everywhere, 1, 0)]
    {
        let mut log = create_log(backend, number, config(scope)).await;
        produce(&mut log, data(1, 0, 0, 1, false)).await.unwrap();
        let mut foreign = barrier("local-cluster", Some("peer-cluster"));
        foreign.set_base_offset(1);
        log.append_as_follower(vec![foreign]).await.unwrap();
        assert_eq!(
            log.producer_state().producer_count(),
            expected_producers,
            "{scope:?}"
        );
    }
}

/// Recovery applies a barrier by the same rule as the live append.
pub async fn recovery_applies_barriers_like_live_appends(backend: &dyn Backend) {
    let config = config(BarrierScope::Writer);
    let mut log = create_log(backend, 0, config.clone()).await;
    let mut mirrored = data(5, 0, 0, 1, false);
    mirrored.set_base_offset(0);
    log.append_as_follower(vec![mirrored]).await.unwrap();
    coordinate(&mut log, barrier("source", Some(LOCAL_CLUSTER)))
        .await
        .unwrap();
    produce(&mut log, data(9, 0, 0, 1, false)).await.unwrap();
    settle(&mut log);
    let live = log.summary().await.unwrap();
    // Drop every snapshot so recovery replays the barrier itself.
    let (log, _) = crash_and_reopen(backend, log, config.clone()).await;
    let (mut log, report) = reopen_without_snapshots(backend, log, config).await;
    assert_eq!(report.snapshot_offset, None);
    assert_eq!(report.batches_replayed, 3);
    settle(&mut log);
    assert_eq!(log.summary().await.unwrap(), live);
}

// ---------------------------------------------------------------------------------------------------------------
// Transactions, LSO, fetch.

/// testFirstUnstableOffsetNoTransactionalData / WithTransactionalData, testTransactionIndexUpdated: the first
/// unstable offset follows open and unreplicated transactions; aborted ones enter the index with Kafka's LSO.
pub async fn first_unstable_offset_and_transaction_index(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    produce(&mut log, data(1, 0, 0, 2, false)).await.unwrap();
    assert_eq!(log.first_unstable_offset(), None);
    produce(&mut log, data(2, 0, 0, 2, true)).await.unwrap(); // 2..=3
    produce(&mut log, data(3, 0, 0, 1, true)).await.unwrap(); // 4
    assert_eq!(log.first_unstable_offset(), Some(2));
    settle(&mut log);
    assert_eq!(log.last_stable_offset(), 2);
    coordinate(&mut log, marker(false, 2, 0, 0)).await.unwrap(); // 5: abort producer 2
                                                                 // Producer 3's transaction (from 4) is still open: that is the LSO written into the index.
    assert_eq!(
        log.aborted_transactions().await.unwrap(),
        vec![aborted(2, 2, 5, 4)]
    );
    // The abort is decided but not replicated yet: still unstable until the HW passes the marker.
    assert_eq!(log.first_unstable_offset(), Some(2));
    settle(&mut log);
    assert_eq!(log.first_unstable_offset(), Some(4));
    coordinate(&mut log, marker(true, 3, 0, 0)).await.unwrap(); // 6
    settle(&mut log);
    assert_eq!(log.first_unstable_offset(), None);
    assert_eq!(log.last_stable_offset(), 7);
}

/// Fetches: read_uncommitted stops at the HW, read_committed at the LSO with the aborted transactions of the
/// range.
pub async fn fetch_is_bounded_by_isolation_level(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    produce(&mut log, data(1, 0, 0, 1, true)).await.unwrap(); // 0
    coordinate(&mut log, marker(false, 1, 0, 0)).await.unwrap(); // 1
    produce(&mut log, data(-1, -1, -1, 1, false)).await.unwrap(); // 2
    produce(&mut log, data(2, 0, 0, 1, true)).await.unwrap(); // 3, open
    produce(&mut log, data(-1, -1, -1, 1, false)).await.unwrap(); // 4
    log.advance_high_watermark(4);
    let uncommitted = log.read(0, usize::MAX, Isolation::ReadUncommitted).await.unwrap();
    assert_eq!(uncommitted.batches.len(), 4);
    assert!(uncommitted.aborted_transactions.is_empty());
    let committed = log.read(0, usize::MAX, Isolation::ReadCommitted).await.unwrap();
    assert_eq!(committed.last_stable_offset, 3);
    assert_eq!(committed.batches.len(), 3);
    assert_eq!(committed.aborted_transactions, vec![aborted(1, 0, 1, 2)]);
    let beyond = log.read(3, usize::MAX, Isolation::ReadCommitted).await.unwrap();
    assert!(beyond.batches.is_empty());
    assert!(matches!(
        log.read(6, 1, Isolation::ReadUncommitted).await,
        Err(LogError::OffsetOutOfRange { .. })
    ));
}

/// testAbortedTransactionSpanningMultipleSegments: a transaction whose data spans rolls is indexed once, and
/// fetches from any segment see it.
pub async fn aborted_transaction_spanning_segments(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    for batch in 0..30 {
        produce(&mut log, data(1, 0, batch * 2, 2, true)).await.unwrap();
    }
    assert!(
        log.snapshot_offsets().len() >= 2,
        "small segments rolled: {:?}",
        log.snapshot_offsets()
    );
    coordinate(&mut log, marker(false, 1, 0, 0)).await.unwrap();
    settle(&mut log);
    let expected = vec![aborted(1, 0, 60, 61)];
    assert_eq!(log.aborted_transactions().await.unwrap(), expected);
    let fetched = log.read(14, usize::MAX, Isolation::ReadCommitted).await.unwrap();
    assert_eq!(fetched.aborted_transactions, expected);
}

/// testLastStableOffsetDoesNotExceedLogStartOffset: after retention past an open transaction's start, the first
/// unstable offset and the LSO are clamped to the log start.
pub async fn lso_is_clamped_to_the_log_start(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    produce(&mut log, data(-1, -1, -1, 5, false)).await.unwrap(); // 0..=4
    produce(&mut log, data(1, 0, 0, 3, true)).await.unwrap(); // 5..=7
    produce(&mut log, data(-1, -1, -1, 2, false)).await.unwrap(); // 8..=9
    settle(&mut log);
    assert_eq!(log.last_stable_offset(), 5);
    log.delete_records_before(8).await.unwrap();
    assert_eq!(log.first_unstable_offset(), Some(8));
    assert_eq!(log.last_stable_offset(), 8);
    assert!(matches!(
        log.delete_records_before(11).await,
        Err(LogError::OffsetOutOfRange { .. })
    ));
}

// ---------------------------------------------------------------------------------------------------------------
// Segments, snapshots, retention, expiration.

/// testProducerIdMapOffsetUpdatedForNonIdempotentData: plain data moves the map end offset too.
pub async fn map_end_offset_moves_with_non_idempotent_data(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    produce(&mut log, data(-1, -1, -1, 3, false)).await.unwrap();
    assert_eq!(log.producer_state().map_end_offset(), 3);
    log.roll().await.unwrap();
    assert_eq!(log.snapshot_offsets(), vec![3]);
}

/// testTakeSnapshotOnRoll: a roll takes a snapshot at the new segment's base.
pub async fn snapshot_is_taken_on_roll(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    let mut bases = Vec::new();
    for sequence in 0..20 {
        let before = log.log_end_offset();
        let snapshots = log.snapshot_offsets().len();
        produce(&mut log, data(1, 0, sequence, 1, false)).await.unwrap();
        if log.snapshot_offsets().len() > snapshots {
            bases.push(before);
        }
    }
    assert!(!bases.is_empty(), "1 KiB segments roll within 20 batches");
    assert_eq!(log.snapshot_offsets(), bases);
}

/// testRetentionDeletesProducerStateSnapshots, testLogStartOffsetMovementDeletesSnapshots,
/// testProducerIdExpirationOnSegmentDeletion: retention deletes snapshots below the new start; producers stay,
/// also after a restart.
pub async fn retention_deletes_snapshots_but_keeps_producers(backend: &dyn Backend) {
    let config = config(BarrierScope::Writer);
    let mut log = create_log(backend, 0, config.clone()).await;
    for sequence in 0..60 {
        produce(&mut log, data(i64::from(sequence % 3), 0, sequence / 3, 1, false))
            .await
            .unwrap();
    }
    settle(&mut log);
    let snapshots = log.snapshot_offsets();
    let cut = snapshots[1];
    log.delete_records_before(cut).await.unwrap();
    assert!(
        log.snapshot_offsets().iter().all(|&offset| offset >= cut),
        "{:?}",
        log.snapshot_offsets()
    );
    assert_eq!(log.producer_state().producer_count(), 3);
    // Retention past every producer's data: a snapshot is kept above the start so a restart keeps them.
    log.delete_records_before(log.log_end_offset() - 1).await.unwrap();
    assert_eq!(log.producer_state().producer_count(), 3);
    let live = log.summary().await.unwrap();
    let (mut log, _) = crash_and_reopen(backend, log, config.clone()).await;
    settle(&mut log);
    assert_eq!(log.summary().await.unwrap(), live);
    // Retention to the log end keeps them live, but a reload drops every snapshot at or below the log start
    // (kafka-semantics §4.9 and §12): after a restart they are gone, as in Kafka.
    log.delete_records_before(log.log_end_offset()).await.unwrap();
    assert_eq!(log.producer_state().producer_count(), 3);
    let (log, _) = crash_and_reopen(backend, log, config).await;
    assert_eq!(log.producer_state().producer_count(), 0);
}

/// A one-record batch from producer `pid` with a 200-byte value and `timestamp`.
fn stamped(pid: i64, epoch: i16, sequence: i32, timestamp: i64) -> RecordBatch {
    let mut builder = BatchBuilder::new().producer(pid, epoch, sequence);
    builder.add(timestamp, None, Some(&[b'v'; 200]), &[]);
    builder.build().unwrap()
}

/// testRetentionByTime / testSizeBasedLogRetention (UnifiedLogTest): retention deletes the oldest whole units —
/// those whose newest record is older than `retention.ms`, then those beyond `retention.bytes` — never what is not
/// yet below the high watermark; producers stay, and a recovery after it rebuilds the same producer state.
pub async fn time_and_size_retention_delete_the_oldest_units(backend: &dyn Backend) {
    let config = config(BarrierScope::Writer);
    let mut log = create_log(backend, 0, config.clone()).await;
    for i in 0..40 {
        let batch = stamped(i64::from(i % 3), 0, i / 3, 100_000 + 1_000 * i64::from(i));
        produce(&mut log, batch).await.unwrap();
    }
    settle(&mut log);
    // The batch at offset 20 is newest at 120,000: it is exactly retention.ms old and stays, as all after it.
    let policy = RetentionPolicy::from_kafka(10_000, -1);
    let retained = log
        .apply_retention(policy, 130_000)
        .await
        .unwrap()
        .expect("expired units");
    assert_eq!(retained.breach, RetentionBreach::Time);
    let start = log.log_start_offset();
    assert_eq!(retained.log_start_offset, start);
    assert!(start > 0 && start <= 20, "log start {start}");
    assert_eq!(
        log.read(20, 1, Isolation::ReadUncommitted).await.unwrap().batches[0].base_offset(),
        20
    );
    assert_eq!(
        log.apply_retention(policy, 130_000).await.unwrap(),
        None,
        "nothing more is due"
    );
    assert_eq!(log.producer_state().producer_count(), 3);

    let size = log.size_bytes().await.unwrap();
    let bound = size / 2;
    let retained = log
        .apply_retention(RetentionPolicy::from_kafka(-1, bound as i64), 0)
        .await
        .unwrap()
        .expect("units beyond retention.bytes");
    assert_eq!(retained.breach, RetentionBreach::Size);
    let left = log.size_bytes().await.unwrap();
    assert!(
        left >= bound && left < size,
        "{left} bytes left of {size}, bound {bound}"
    );
    assert_eq!(left, size - retained.bytes);

    // Nothing above the high watermark goes, however old.
    let end = log.log_end_offset();
    for i in 40..45 {
        produce(&mut log, stamped(7, 0, i - 40, 1_000)).await.unwrap();
    }
    log.apply_retention(RetentionPolicy::from_kafka(0, 0), i64::MAX)
        .await
        .unwrap();
    assert!(log.log_start_offset() <= end);
    assert_eq!(log.log_end_offset(), end + 5);

    settle(&mut log);
    let live = log.summary().await.unwrap();
    let (mut log, _) = crash_and_reopen(backend, log, config).await;
    settle(&mut log);
    assert_eq!(log.summary().await.unwrap(), live, "recovery after retention");
}

/// ADR 0054: retention deletes a unit holding a `MIRROR_PID_RESET` barrier like any other, and the barrier's
/// effect outlives it: the mirrored producers it cleared stay cleared, live and after a recovery, and the local
/// producer that reused a mirrored id keeps its own state.
pub async fn retention_past_a_barrier_keeps_its_effect(backend: &dyn Backend) {
    let config = config(BarrierScope::Writer);
    let mut log = create_log(backend, 0, config.clone()).await;
    let mut mirrored = vec![stamped(5, 3, 0, 1_000), data(6, 0, 0, 1, true)];
    mirrored[1].set_base_offset(1);
    log.append_as_follower(mirrored).await.unwrap();
    let barrier_offset = log.log_end_offset();
    coordinate(&mut log, barrier("source", Some(LOCAL_CLUSTER)))
        .await
        .unwrap();
    // Local writes after the failover: old enough to expire with the barrier, then recent ones.
    for sequence in 0..10 {
        produce(&mut log, stamped(5, 0, sequence, 3_000)).await.unwrap();
    }
    for sequence in 10..20 {
        produce(&mut log, stamped(5, 0, sequence, 1_000_000))
            .await
            .unwrap();
    }
    settle(&mut log);
    let before = log.producer_state().producer_count();
    log.apply_retention(RetentionPolicy::from_kafka(10_000, -1), 500_000)
        .await
        .unwrap()
        .expect("the units up to the recent writes expired");
    assert!(log.log_start_offset() > barrier_offset, "the barrier's unit went");
    assert!(
        log.aborted_transactions().await.unwrap().is_empty(),
        "the aborted entry went below the start"
    );
    assert_eq!(log.producer_state().producer_count(), before);
    let live = log.summary().await.unwrap();
    let (mut log, _) = crash_and_reopen(backend, log, config).await;
    settle(&mut log);
    assert_eq!(log.summary().await.unwrap(), live);
    // Producer 5 is the local one (epoch 0, next sequence 20), not the mirrored one of epoch 3; 6 is gone.
    assert_eq!(
        log.producer_state().producer(5).map(|entry| entry.producer_epoch),
        Some(0)
    );
    assert!(log.producer_state().producer(6).is_none());
    let next = produce(&mut log, stamped(5, 0, 20, 1_000_001)).await.unwrap();
    assert!(!next.duplicate);
    assert!(log.producer_state().ongoing_transactions().is_empty());
}

/// testSegmentRollingByTime (LogSegmentTest): a segment rolls once a batch's timestamp is more than `segment.ms`
/// after its first batch's — measured between record timestamps, so a log of equal old timestamps never rolls by
/// time — and by `segment.bytes`; each roll takes a producer snapshot at the new segment's base.
pub async fn segments_roll_by_record_time_and_by_size(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    log.set_segment_policy(1 << 30, Some(1_000));
    for sequence in 0..5 {
        produce(&mut log, stamped(1, 0, sequence, 0)).await.unwrap();
    }
    assert!(
        log.snapshot_offsets().is_empty(),
        "equal timestamps: {:?}",
        log.snapshot_offsets()
    );
    produce(&mut log, stamped(1, 0, 5, 1_000)).await.unwrap();
    assert!(
        log.snapshot_offsets().is_empty(),
        "exactly segment.ms later does not roll"
    );
    produce(&mut log, stamped(1, 0, 6, 1_001)).await.unwrap();
    assert_eq!(log.snapshot_offsets(), [6], "rolled before the batch at 6");
    produce(&mut log, stamped(1, 0, 7, 1_500)).await.unwrap();
    assert_eq!(
        log.snapshot_offsets(),
        [6],
        "the new segment's age counts from 1,001"
    );
    log.set_segment_policy(1, None);
    produce(&mut log, stamped(1, 0, 8, 0)).await.unwrap();
    assert_eq!(
        log.snapshot_offsets(),
        [6, 8],
        "segment.bytes of 1: every append rolls"
    );
}

/// A keyed one-record batch from producer `pid` (−1: none) at `sequence`, `value` `None` for a tombstone.
fn keyed(pid: i64, sequence: i32, key: &str, value: Option<&str>, transactional: bool) -> RecordBatch {
    let mut builder = BatchBuilder::new()
        .producer(pid, 0, sequence)
        .transactional(transactional);
    builder.add(1_000, Some(key.as_bytes()), value.map(str::as_bytes), &[]);
    builder.build().unwrap()
}

/// A record as (offset, key, value).
type KeyedRecord = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

/// Every record of the log as (offset, key, value), control batches left out.
async fn records_of(log: &PartitionLog) -> Vec<KeyedRecord> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let batches = log.read_for_replica(offset, 1 << 20).await.unwrap();
        let Some(last) = batches.last() else { break };
        offset = last.next_offset();
        for batch in batches.iter().filter(|batch| !batch.is_control()) {
            for record in batch.records().unwrap().iter() {
                let record = record.unwrap();
                out.push((
                    record.offset,
                    record.key.map(<[u8]>::to_vec),
                    record.value.map(<[u8]>::to_vec),
                ));
            }
        }
    }
    out
}

/// LogCleanerTest (testCleanSegments, testAbortedTransactionsRemovedAfterCleaning, testProducerIdsRetained…):
/// a compaction pass keeps the latest record of each key at its own offset, removes the records of aborted
/// transactions and the superseded ones, keeps every control batch and each producer's last batch, leaves the
/// active unit alone, and leaves producer state as it was — live, after a recovery from snapshots, and rebuilt
/// from the compacted log alone.
pub async fn compaction_keeps_the_latest_record_of_each_key_and_producer_state(backend: &dyn Backend) {
    let config = config(BarrierScope::Writer);
    let mut log = create_log(backend, 0, config.clone()).await;
    // Producer 1 (idempotent) writes keys k0..k4 over and over; producer 2's transaction aborts; 3's commits.
    for sequence in 0..20 {
        let key = format!("k{}", sequence % 5);
        let value = format!("v{sequence}");
        produce(&mut log, keyed(1, sequence, &key, Some(&value), false))
            .await
            .unwrap();
    }
    produce(&mut log, keyed(2, 0, "k0", Some("aborted"), true))
        .await
        .unwrap();
    coordinate(&mut log, marker(false, 2, 0, 0)).await.unwrap();
    produce(&mut log, keyed(3, 0, "k1", Some("committed"), true))
        .await
        .unwrap();
    coordinate(&mut log, marker(true, 3, 0, 0)).await.unwrap();
    produce(&mut log, keyed(-1, -1, "k2", None, false)).await.unwrap(); // a tombstone
    log.roll().await.unwrap();
    produce(&mut log, keyed(1, 20, "k3", Some("latest"), false))
        .await
        .unwrap(); // the active unit, alone
    settle(&mut log);
    let before = records_of(&log).await;
    let live = log.summary().await.unwrap();
    let end = log.log_end_offset();

    let cleaned = log
        .clean(CompactionPolicy::default(), 2_000)
        .await
        .unwrap()
        .expect("everything below the active unit is dirty");
    assert!(
        cleaned.records_removed > 0 && cleaned.bytes_after < cleaned.bytes_before,
        "{cleaned:?}"
    );
    assert_eq!(cleaned.to, end - 1, "everything but the active unit: {cleaned:?}");
    assert_eq!(log.log_end_offset(), end);
    let after = records_of(&log).await;
    // What stays: per key its latest record below the pass's end, and everything from the end on.
    let mut expected = Vec::new();
    for (index, record) in before.iter().enumerate() {
        let aborted = record.2.as_deref() == Some(b"aborted".as_slice());
        let superseded = before[index + 1..].iter().any(|later| {
            later.1 == record.1 && later.0 < cleaned.to && later.2.as_deref() != Some(b"aborted".as_slice())
        });
        if record.0 >= cleaned.to || (!aborted && !superseded) {
            expected.push(record.clone());
        }
    }
    assert_eq!(after, expected);
    assert!(after
        .iter()
        .any(|(_, _, value)| value.as_deref() == Some(b"committed".as_slice())));
    assert!(!after
        .iter()
        .any(|(_, _, value)| value.as_deref() == Some(b"aborted".as_slice())));
    assert_eq!(log.summary().await.unwrap(), live, "producer state untouched");
    assert_eq!(
        log.clean(CompactionPolicy::default(), 2_000).await.unwrap(),
        None,
        "nothing dirty is left"
    );

    // Recovery from snapshots, then a rebuild from the compacted log alone, find the same producers.
    let (log, _) = crash_and_reopen(backend, log, config.clone()).await;
    let (mut log, _) = reopen_without_snapshots(backend, log, config).await;
    settle(&mut log);
    let rebuilt = log.summary().await.unwrap();
    assert_eq!(
        rebuilt.producers, live.producers,
        "rebuilt from the compacted log alone"
    );
    assert_eq!(records_of(&log).await, after);
}

/// ADR 0055: the cleaner keeps a `MIRROR_PID_RESET` barrier (a control batch) where it is, so producer state
/// rebuilt from the compacted log alone applies it as the live log did: the mirrored producers it cleared stay
/// cleared, the local producer that reused a mirrored id keeps its own state.
pub async fn compaction_keeps_a_barrier_and_its_effect(backend: &dyn Backend) {
    let config = config(BarrierScope::Writer);
    let mut log = create_log(backend, 0, config.clone()).await;
    let mut mirrored = keyed(5, 0, "k", Some("mirrored"), false);
    mirrored.set_base_offset(0);
    log.append_as_follower(vec![mirrored]).await.unwrap();
    coordinate(&mut log, barrier("source", Some(LOCAL_CLUSTER)))
        .await
        .unwrap();
    for sequence in 0..5 {
        produce(&mut log, keyed(5, sequence, "k", Some("local"), false))
            .await
            .unwrap();
    }
    log.roll().await.unwrap();
    produce(&mut log, keyed(9, 0, "other", Some("active"), false))
        .await
        .unwrap();
    settle(&mut log);
    let live = log.summary().await.unwrap();
    log.clean(CompactionPolicy::default(), 2_000)
        .await
        .unwrap()
        .expect("dirty");
    let batches = partition_log::batches_from(&log, 0).await.unwrap();
    assert!(
        batches
            .iter()
            .any(|batch| batch.base_offset() == 1 && batch.is_control()),
        "the barrier stays at 1"
    );
    assert_eq!(
        records_of(&log)
            .await
            .iter()
            .filter(|r| r.1.as_deref() == Some(b"k".as_slice()))
            .count(),
        1
    );
    let (mut log, _) = reopen_without_snapshots(backend, log, config).await;
    settle(&mut log);
    assert_eq!(log.summary().await.unwrap().producers, live.producers);
}

/// LogCleanerManagerTest (testCleanableOffsetsForShortTime, testLogsWithSegmentsToDeleteShouldNotConsiderCleanupPolicy
/// …): a pass waits until the dirty part reaches `min.cleanable.dirty.ratio`, or its oldest record passes
/// `max.compaction.lag.ms`; records younger than `min.compaction.lag.ms` are not cleanable.
pub async fn compaction_waits_for_the_dirty_ratio_or_the_compaction_lags(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    // Keys k0..k(keys-1) valued `value`, then a roll and one record alone in the active unit.
    async fn write_round(log: &mut PartitionLog, keys: usize, value: &str, active: &str) {
        for index in 0..keys {
            produce(log, keyed(-1, -1, &format!("k{index}"), Some(value), false))
                .await
                .unwrap();
        }
        log.roll().await.unwrap();
        produce(log, keyed(-1, -1, "active", Some(active), false))
            .await
            .unwrap();
        settle(log);
    }
    write_round(&mut log, 10, "first", "v").await;
    let young = CompactionPolicy {
        min_compaction_lag_ms: 10_000,
        ..CompactionPolicy::default()
    };
    assert_eq!(
        log.clean(young, 2_000).await.unwrap(),
        None,
        "every record is younger than the lag"
    );
    let first = log
        .clean(CompactionPolicy::default(), 2_000)
        .await
        .unwrap()
        .expect("all dirty");
    assert_eq!(first.records_removed, 0, "ten keys, one record each");
    write_round(&mut log, 2, "second", "w").await;
    // Three dirty batches of thirteen: under the ratio.
    assert_eq!(log.clean(CompactionPolicy::default(), 2_000).await.unwrap(), None);
    let overdue = CompactionPolicy {
        max_compaction_lag_ms: 500,
        ..CompactionPolicy::default()
    };
    let second = log
        .clean(overdue, 2_000)
        .await
        .unwrap()
        .expect("the dirty part is overdue");
    // The record superseding the old `active` one is in the active unit, which the map does not read.
    assert_eq!(second.records_removed, 2, "k0 and k1 superseded");
    let values: Vec<_> = records_of(&log).await.into_iter().filter_map(|r| r.2).collect();
    assert_eq!(values.iter().filter(|v| v.as_slice() == b"second").count(), 2);
    assert_eq!(values.iter().filter(|v| v.as_slice() == b"first").count(), 8);
}

/// LogCleanerManager's choice of a log: the dirty share must be *more* than `min.cleanable.dirty.ratio` — a log
/// exactly half dirty is not cleaned at the default 0.5.
pub async fn compaction_needs_more_than_the_dirty_ratio(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    // Four batches of one size each (two-byte keys, one-byte values, one timestamp), then a roll and the first
    // batch of the next unit.
    async fn four_then_roll(log: &mut PartitionLog, prefix: char, next: &str) {
        for index in 0..4 {
            produce(log, keyed(-1, -1, &format!("{prefix}{index}"), Some("x"), false))
                .await
                .unwrap();
        }
        log.roll().await.unwrap();
        produce(log, keyed(-1, -1, next, Some("x"), false)).await.unwrap();
        settle(log);
    }
    four_then_roll(&mut log, 'a', "b4").await;
    let first = log
        .clean(CompactionPolicy::default(), 2_000)
        .await
        .unwrap()
        .expect("all dirty");
    assert_eq!(first.records_removed, 0);
    // The active unit holds b4 already: three more make four batches of the same size as the clean unit's.
    for index in 1..4 {
        produce(&mut log, keyed(-1, -1, &format!("b{index}"), Some("x"), false))
            .await
            .unwrap();
    }
    log.roll().await.unwrap();
    produce(&mut log, keyed(-1, -1, "c0", Some("x"), false))
        .await
        .unwrap();
    settle(&mut log);
    assert_eq!(
        log.clean(CompactionPolicy::default(), 2_000).await.unwrap(),
        None,
        "half of the cleanable bytes dirty is not more than 0.5"
    );
    let lower = CompactionPolicy {
        min_cleanable_dirty_ratio: 0.49,
        ..CompactionPolicy::default()
    };
    assert!(
        log.clean(lower, 2_000).await.unwrap().is_some(),
        "0.5 is more than 0.49"
    );
}

/// KIP-534 (LogCleanerTest's delete-horizon tests): the first pass that keeps a tombstone writes its delete
/// horizon into the batch (that pass's time plus `delete.retention.ms`; records written long ago included), later
/// passes keep the tombstone until the horizon and remove it from then on; the rewritten batch reads back with its
/// records' own timestamps.
pub async fn compaction_removes_a_tombstone_only_once_its_delete_horizon_passed(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    let policy = CompactionPolicy {
        min_cleanable_dirty_ratio: 0.0,
        delete_retention_ms: 1_000,
        ..CompactionPolicy::default()
    };
    // Keys written once more each round (dirty data for the next pass), then a roll and a record in the active
    // unit, which no pass reads.
    async fn dirty(log: &mut PartitionLog, round: usize) {
        produce(
            log,
            keyed(-1, -1, "other", Some(&format!("round {round}")), false),
        )
        .await
        .unwrap();
        log.roll().await.unwrap();
        produce(log, keyed(-1, -1, "active", Some("v"), false))
            .await
            .unwrap();
        settle(log);
    }
    produce(&mut log, keyed(-1, -1, "gone", Some("v"), false))
        .await
        .unwrap();
    // The tombstone's record time (1,000) is far older than delete.retention.ms at every pass below.
    produce(&mut log, keyed(-1, -1, "gone", None, false))
        .await
        .unwrap();
    dirty(&mut log, 0).await;
    let tombstone = |records: &[KeyedRecord]| {
        records
            .iter()
            .any(|(_, key, value)| key.as_deref() == Some(b"gone".as_slice()) && value.is_none())
    };
    log.clean(policy, 50_000).await.unwrap().expect("dirty");
    let after_first = records_of(&log).await;
    assert!(
        tombstone(&after_first),
        "the first pass keeps it and sets its horizon (51,000)"
    );
    assert!(
        !after_first
            .iter()
            .any(|(_, key, value)| key.as_deref() == Some(b"gone".as_slice()) && value.is_some()),
        "the value it deletes is gone"
    );
    let horizon = {
        let batches = log
            .read_for_replica(log.log_start_offset(), 1 << 20)
            .await
            .unwrap();
        let holder = batches
            .iter()
            .find(|batch| {
                batch
                    .records()
                    .unwrap()
                    .iter()
                    .any(|record| record.unwrap().value.is_none())
            })
            .expect("the tombstone's batch");
        let records = holder.records().unwrap();
        let record = records.iter().next().unwrap().unwrap();
        assert_eq!(record.timestamp, 1_000, "the record keeps its own timestamp");
        holder.delete_horizon_ms()
    };
    assert_eq!(horizon, Some(51_000));
    dirty(&mut log, 1).await;
    log.clean(policy, 50_999).await.unwrap().expect("dirty");
    assert!(tombstone(&records_of(&log).await), "kept until the horizon");
    dirty(&mut log, 2).await;
    log.clean(policy, 51_000).await.unwrap().expect("dirty");
    assert!(!tombstone(&records_of(&log).await), "removed from the horizon on");
}

/// A storage reader that counts the bytes of the batches read through it.
struct CountingReader {
    inner: Box<dyn storage::PartitionReader>,
    bytes: std::sync::atomic::AtomicU64,
}

#[async_trait::async_trait]
impl storage::PartitionReader for CountingReader {
    async fn read(&self, from_offset: i64, max_bytes: usize) -> storage::Result<Vec<RecordBatch>> {
        let batches = self.inner.read(from_offset, max_bytes).await?;
        let bytes: u64 = batches.iter().map(|batch| batch.size() as u64).sum();
        self.bytes.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
        Ok(batches)
    }

    async fn segments(&self, from_offset: i64, max: usize) -> storage::Result<Vec<storage::SegmentSummary>> {
        self.inner.segments(from_offset, max).await
    }

    async fn aborted_txns(&self, from_offset: i64, upper_bound: i64) -> storage::Result<Vec<AbortedTxn>> {
        self.inner.aborted_txns(from_offset, upper_bound).await
    }
}

/// A pass reads its log at most twice — the offset map over the dirty part, then the rewrite — whatever its
/// units: where a unit is one batch (the key-value backends), the rewrite does not read a whole read window
/// from each unit and keep only the unit.
pub async fn a_compaction_pass_reads_each_byte_of_its_log_at_most_twice(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    let value = "x".repeat(100);
    for index in 0..200 {
        produce(
            &mut log,
            keyed(-1, -1, &format!("k{}", index % 10), Some(&value), false),
        )
        .await
        .unwrap();
    }
    log.roll().await.unwrap();
    produce(&mut log, keyed(-1, -1, "active", Some("v"), false))
        .await
        .unwrap();
    settle(&mut log);
    let log_bytes: u64 = log
        .read_for_replica(log.log_start_offset(), 1 << 30)
        .await
        .unwrap()
        .iter()
        .map(|batch| batch.size() as u64)
        .sum();
    let plan = log
        .plan_clean(CompactionPolicy::default(), 2_000)
        .await
        .unwrap()
        .expect("all dirty");
    let counting = CountingReader {
        inner: log.reader(),
        bytes: std::sync::atomic::AtomicU64::new(0),
    };
    let work = plan.prepare(&counting).await.unwrap();
    assert!(work.is_some(), "190 of 200 records superseded");
    let read = counting.bytes.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        read <= 2 * log_bytes,
        "the pass read {read} bytes of a {log_bytes}-byte log"
    );
}

/// A pass prepares its rewrite through a reader while the log goes on taking appends (what the node does with
/// the partition unlocked); its rewrite then lands below them. A pass whose log was cut back, or whose log start
/// moved, between its plan and its write is dropped: nothing is written.
pub async fn a_compaction_pass_prepares_while_the_log_takes_appends_and_is_dropped_if_the_log_moved(
    backend: &dyn Backend,
) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    for round in 0..3 {
        for key in 0..4 {
            let value = format!("round {round}");
            produce(&mut log, keyed(-1, -1, &format!("k{key}"), Some(&value), false))
                .await
                .unwrap();
        }
    }
    log.roll().await.unwrap();
    produce(&mut log, keyed(-1, -1, "active", Some("v"), false))
        .await
        .unwrap();
    settle(&mut log);
    let policy = CompactionPolicy::default();

    let plan = log.plan_clean(policy, 2_000).await.unwrap().expect("dirty");
    let reader = log.reader();
    // Produce goes on while the pass reads.
    for key in 0..3 {
        produce(&mut log, keyed(-1, -1, &format!("late{key}"), Some("x"), false))
            .await
            .unwrap();
    }
    settle(&mut log);
    let work = plan.prepare(reader.as_ref()).await.unwrap().expect("a rewrite");
    let cleaned = log.apply_clean(work).await.unwrap().expect("written");
    assert_eq!(cleaned.records_removed, 8, "two superseded rounds of four keys");
    let values: Vec<String> = records_of(&log)
        .await
        .into_iter()
        .map(|record| String::from_utf8(record.2.unwrap()).unwrap())
        .collect();
    assert_eq!(
        values,
        ["round 2", "round 2", "round 2", "round 2", "v", "x", "x", "x"]
    );

    // The log start moves between the plan and the write: the pass is dropped.
    for key in 0..4 {
        produce(
            &mut log,
            keyed(-1, -1, &format!("k{key}"), Some("round 3"), false),
        )
        .await
        .unwrap();
    }
    log.roll().await.unwrap();
    produce(&mut log, keyed(-1, -1, "active", Some("w"), false))
        .await
        .unwrap();
    settle(&mut log);
    let before = records_of(&log).await;
    let plan = log.plan_clean(policy, 2_000).await.unwrap().expect("dirty again");
    let work = plan
        .prepare(log.reader().as_ref())
        .await
        .unwrap()
        .expect("a rewrite");
    log.delete_records_before(before[0].0 + 1).await.unwrap();
    assert_eq!(log.apply_clean(work).await.unwrap(), None, "dropped");
    assert_eq!(
        records_of(&log).await,
        before[1..],
        "nothing rewritten, only the deleted record gone"
    );
}

/// testPeriodicProducerIdExpiration: producers idle for the expiration time go, those in a transaction stay.
pub async fn idle_producers_expire_on_schedule(backend: &dyn Backend) {
    let mut config = config(BarrierScope::Writer);
    config.producer_state.producer_id_expiration_ms = 10_000;
    let mut log = create_log(backend, 0, config).await;
    produce(&mut log, data(1, 0, 0, 1, false)).await.unwrap(); // timestamp 1_000
    produce(&mut log, data(2, 0, 0, 1, true)).await.unwrap();
    assert_eq!(log.remove_expired_producers(10_999), 0);
    assert_eq!(log.remove_expired_producers(11_000), 1);
    assert!(log.producer_state().producer(1).is_none());
    assert!(
        log.producer_state().producer(2).is_some(),
        "an ongoing transaction never expires"
    );
}

// ---------------------------------------------------------------------------------------------------------------
// Truncation.

/// testProducerIdMapTruncateTo: truncation rebuilds producer state to the new end and drops later snapshots.
pub async fn truncation_rebuilds_producer_state(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    produce(&mut log, data(1, 0, 0, 1, false)).await.unwrap();
    log.roll().await.unwrap();
    produce(&mut log, data(1, 0, 1, 1, false)).await.unwrap();
    log.roll().await.unwrap();
    produce(&mut log, data(1, 0, 2, 1, false)).await.unwrap();
    log.roll().await.unwrap();
    assert_eq!(log.snapshot_offsets(), vec![1, 2, 3]);
    assert!(log.truncate_to(2, 0).await.unwrap());
    assert_eq!(log.producer_state().producer(1).unwrap().last_seq(), 1);
    assert_eq!(log.snapshot_offsets(), vec![1, 2]);
    assert!(log.truncate_to(1, 0).await.unwrap());
    assert_eq!(log.producer_state().producer(1).unwrap().last_seq(), 0);
    assert!(!log.truncate_to(5, 0).await.unwrap(), "beyond the end: nothing");
    // The producer goes on from its rebuilt sequence.
    produce(&mut log, data(1, 0, 1, 1, false)).await.unwrap();
}

/// testTruncateBelowFirstUnstableOffset: truncating below an open transaction's start forgets the transaction.
pub async fn truncation_below_the_first_unstable_offset(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    produce(&mut log, data(-1, -1, -1, 2, false)).await.unwrap();
    produce(&mut log, data(1, 0, 0, 3, true)).await.unwrap();
    assert_eq!(log.first_unstable_offset(), Some(2));
    log.truncate_to(2, 0).await.unwrap();
    assert_eq!(log.first_unstable_offset(), None);
    assert!(log.producer_state().ongoing_transactions().is_empty());
    settle(&mut log);
    assert_eq!(log.last_stable_offset(), 2);
}

/// truncateFullyAndStartAt: an empty log at the new offset, no producers, no snapshots.
pub async fn truncate_fully_restarts_empty(backend: &dyn Backend) {
    let mut log = create_log(backend, 0, config(BarrierScope::Writer)).await;
    produce(&mut log, data(1, 0, 0, 4, false)).await.unwrap();
    log.roll().await.unwrap();
    log.truncate_fully_and_start_at(100).await.unwrap();
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset(), log.high_watermark()),
        (100, 100, 100)
    );
    assert_eq!(log.producer_state().producer_count(), 0);
    assert!(log.snapshot_offsets().is_empty());
    let next = produce(&mut log, data(1, 0, 0, 1, false)).await.unwrap();
    assert_eq!(next.first_offset, 100);
}

// ---------------------------------------------------------------------------------------------------------------
// Recovery.

/// testProducerSnapshotsRecoveryAfterUncleanShutdown: after a crash the state is the last snapshot plus a
/// replay, equal to the live state; a clean close needs no replay.
pub async fn recovery_after_unclean_shutdown_equals_live_state(backend: &dyn Backend) {
    let config = config(BarrierScope::Writer);
    let mut log = create_log(backend, 0, config.clone()).await;
    for batch in 0..15 {
        produce(
            &mut log,
            data(i64::from(batch % 4), 0, batch / 4 * 2, 2, batch % 4 == 3),
        )
        .await
        .unwrap();
    }
    coordinate(&mut log, marker(false, 3, 0, 0)).await.unwrap();
    produce(&mut log, data(3, 0, 6, 1, true)).await.unwrap();
    settle(&mut log);
    let live = log.summary().await.unwrap();
    let (mut log, report) = crash_and_reopen(backend, log, config.clone()).await;
    assert!(!report.clean_shutdown);
    assert!(
        report.snapshot_offset.is_some(),
        "rolls left snapshots: {report:?}"
    );
    assert!(report.batches_replayed > 0);
    settle(&mut log);
    assert_eq!(log.summary().await.unwrap(), live);
    let (mut log, report) = close_and_reopen(backend, log, config).await;
    assert!(report.clean_shutdown);
    assert_eq!(
        report.batches_replayed, 0,
        "a clean close leaves a snapshot at the log end"
    );
    settle(&mut log);
    assert_eq!(log.summary().await.unwrap(), live);
}

/// A corrupt latest snapshot is deleted and recovery falls back to the previous one, then replays.
pub async fn recovery_falls_back_past_a_corrupt_snapshot(backend: &dyn Backend) {
    let config = config(BarrierScope::Writer);
    let mut log = create_log(backend, 0, config.clone()).await;
    for sequence in 0..10 {
        produce(&mut log, data(1, 0, sequence, 1, false)).await.unwrap();
        log.roll().await.unwrap();
    }
    let live = log.summary().await.unwrap();
    let id = log.id().clone();
    drop(log);
    let store = backend.store().await;
    let mut storage = store.open(&id).await.unwrap();
    let latest = *storage.snapshot_offsets().await.unwrap().last().unwrap();
    storage
        .put_snapshot(latest, bytes::Bytes::from_static(b"\x00\x01garbage"))
        .await
        .unwrap();
    let (log, report) = PartitionLog::open(storage, config, 0).await.unwrap();
    assert_eq!(
        report
            .corrupt_snapshots
            .iter()
            .map(|corrupt| corrupt.offset)
            .collect::<Vec<_>>(),
        vec![latest],
        "the recovery report names the snapshot it could not read"
    );
    assert!(
        report.snapshot_offset.is_some_and(|offset| offset < latest),
        "{report:?}"
    );
    assert_eq!(log.summary().await.unwrap(), live);
}

/// testAppendToTransactionIndexFailure, testFullTransactionIndexRecovery: when the index write fails after the
/// records were written the log goes offline; reopening restores the missing entry.
pub async fn failed_index_write_takes_the_log_offline_until_recovery(backend: &dyn Backend) {
    let config = config(BarrierScope::Writer);
    let log = create_log(backend, 0, config.clone()).await;
    let id = log.id().clone();
    drop(log);
    let store = backend.store().await;
    let storage = store.open(&id).await.unwrap();
    // Embedded databases lock their directory: only the partition may keep the store open.
    drop(store);
    let (storage, faults) = FaultyPartition::new(storage);
    faults
        .fail_aborted_txn
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (mut log, _) = PartitionLog::open(Box::new(storage), config.clone(), 0)
        .await
        .unwrap();
    produce(&mut log, data(1, 0, 0, 1, true)).await.unwrap();
    let failed = coordinate(&mut log, marker(false, 1, 0, 0)).await;
    assert!(matches!(failed, Err(LogError::Storage(_))), "{failed:?}");
    assert_eq!(log.log_end_offset(), 2, "the marker itself is in the log");
    let offline = produce(&mut log, data(2, 0, 0, 1, false)).await;
    assert!(matches!(offline, Err(LogError::Offline { .. })), "{offline:?}");
    let (log, report) = crash_and_reopen(backend, log, config).await;
    assert_eq!(report.index_entries_restored, 1);
    assert_eq!(
        log.aborted_transactions().await.unwrap(),
        vec![aborted(1, 0, 1, 2)]
    );
}

/// testRebuildProducerStateWithEmptyCompactedBatch: a batch emptied by compaction still carries its sequences,
/// and a rebuild takes the last sequence from it.
pub async fn rebuild_reads_sequences_from_empty_compacted_batches(backend: &dyn Backend) {
    let config = config(BarrierScope::Writer);
    let mut log = create_log(backend, 0, config.clone()).await;
    let mut emptied = BatchBuilder::new()
        .producer(1, 0, 0)
        .last_offset_delta(1)
        .base_timestamp(1_000)
        .max_timestamp(1_000)
        .build()
        .unwrap();
    emptied.set_base_offset(0);
    let mut next = data(1, 0, 2, 1, false);
    next.set_base_offset(2);
    log.append_as_follower(vec![emptied, next]).await.unwrap();
    let id = log.id().clone();
    drop(log);
    let store = backend.store().await;
    let mut storage = store.open(&id).await.unwrap();
    storage.truncate_to(2).await.unwrap();
    for offset in storage.snapshot_offsets().await.unwrap() {
        storage.delete_snapshot(offset).await.unwrap();
    }
    let (log, _) = PartitionLog::open(storage, config, 0).await.unwrap();
    assert_eq!(log.producer_state().producer(1).unwrap().last_seq(), 1);
}

// ---------------------------------------------------------------------------------------------------------------
// Replication.

/// The high watermark moves by follower acknowledgement; followers equal the leader after replication.
pub async fn high_watermark_moves_by_follower_acknowledgement(backend: &dyn Backend) {
    let config = config(BarrierScope::Writer);
    let mut logs = create_logs(backend, &[0, 1, 2], config).await;
    let leader = logs.remove(0);
    let mut replicas = ReplicaSet::new(leader, logs);
    produce(&mut replicas.leader, data(1, 0, 0, 2, true))
        .await
        .unwrap();
    produce(&mut replicas.leader, data(2, 0, 0, 1, false))
        .await
        .unwrap();
    assert_eq!(replicas.leader.high_watermark(), 0);
    replicas.replicate_follower(0, 0).await.unwrap();
    assert_eq!(replicas.leader.high_watermark(), 0, "follower 1 has not fetched");
    replicas.replicate(0).await.unwrap();
    assert_eq!(replicas.leader.high_watermark(), 3);
    coordinate(&mut replicas.leader, marker(false, 1, 0, 0))
        .await
        .unwrap();
    // The abort is decided but its marker is not replicated: the LSO stays at the transaction's start.
    assert_eq!(replicas.leader.last_stable_offset(), 0);
    replicas.replicate(0).await.unwrap();
    assert_eq!(replicas.leader.last_stable_offset(), 4);
    let leader = replicas.leader.summary().await.unwrap();
    for follower in &replicas.followers {
        assert_eq!(follower.summary().await.unwrap(), leader);
        assert_eq!(follower.high_watermark(), 4);
    }
}

/// A follower that caught up before the leader was cut back and rewritten at the same offsets (a mirror start or a
/// failover cutting to the source's LSO, then new appends) is cut to the byte-identical prefix and catches up:
/// it ends with the leader's bytes, not its own stale batches at the same offsets.
pub async fn a_follower_whose_history_left_the_leaders_is_cut_back_to_the_common_prefix(
    backend: &dyn Backend,
) {
    let config = config(BarrierScope::Writer);
    let mut logs = create_logs(backend, &[0, 1], config).await;
    let leader = logs.remove(0);
    let mut replicas = ReplicaSet::new(leader, logs);
    produce(&mut replicas.leader, data(1, 0, 0, 1, false))
        .await
        .unwrap();
    produce(&mut replicas.leader, data(2, 0, 0, 2, false))
        .await
        .unwrap();
    replicas.replicate(0).await.unwrap();
    assert_eq!(replicas.followers[0].log_end_offset(), 3);
    // The leader loses its last batch and takes another producer's, one record longer, at the same offset.
    replicas.leader.truncate_to(1, 0).await.unwrap();
    produce(&mut replicas.leader, data(3, 0, 0, 3, false))
        .await
        .unwrap();
    replicas.replicate(0).await.unwrap();
    let leader_batches = partition_log::batches_from(&replicas.leader, 0).await.unwrap();
    let follower_batches = partition_log::batches_from(&replicas.followers[0], 0)
        .await
        .unwrap();
    let bytes = |batches: &[RecordBatch]| batches.iter().map(|b| b.as_bytes().to_vec()).collect::<Vec<_>>();
    assert_eq!(bytes(&follower_batches), bytes(&leader_batches));
    assert_eq!(
        replicas.followers[0].summary().await.unwrap(),
        replicas.leader.summary().await.unwrap()
    );
    assert!(
        replicas.followers[0].producer_state().producer(2).is_none(),
        "the cut producer is gone"
    );
    assert_eq!(replicas.leader.high_watermark(), 4);
}

/// Expands every scenario above as a `#[tokio::test]` on a backend (an expression of a type implementing
/// [`storage_testkit::conformance::Backend`]).
#[macro_export]
macro_rules! kafka_semantics_suite {
    ($backend:expr) => {
        $crate::kafka_semantics_suite!(@tests $backend;
            duplicate_appends_return_the_original_offsets,
            replication_accepts_repeated_sequences,
            replication_below_the_log_end_is_refused,
            old_producer_epoch_is_refused,
            zombie_coordinator_is_fenced,
            client_control_batches_are_refused,
            client_appends_are_validated_structurally,
            read_only_refuses_client_appends_and_survives_restart,
            barrier_leaves_a_clean_slate,
            barrier_from_another_writer_applies_only_everywhere,
            recovery_applies_barriers_like_live_appends,
            first_unstable_offset_and_transaction_index,
            fetch_is_bounded_by_isolation_level,
            aborted_transaction_spanning_segments,
            lso_is_clamped_to_the_log_start,
            map_end_offset_moves_with_non_idempotent_data,
            snapshot_is_taken_on_roll,
            retention_deletes_snapshots_but_keeps_producers,
            time_and_size_retention_delete_the_oldest_units,
            segments_roll_by_record_time_and_by_size,
            compaction_keeps_the_latest_record_of_each_key_and_producer_state,
            compaction_keeps_a_barrier_and_its_effect,
            compaction_removes_a_tombstone_only_once_its_delete_horizon_passed,
            compaction_waits_for_the_dirty_ratio_or_the_compaction_lags,
            compaction_needs_more_than_the_dirty_ratio,
            a_compaction_pass_prepares_while_the_log_takes_appends_and_is_dropped_if_the_log_moved,
            a_compaction_pass_reads_each_byte_of_its_log_at_most_twice,
            retention_past_a_barrier_keeps_its_effect,
            idle_producers_expire_on_schedule,
            truncation_rebuilds_producer_state,
            truncation_below_the_first_unstable_offset,
            truncate_fully_restarts_empty,
            recovery_after_unclean_shutdown_equals_live_state,
            recovery_falls_back_past_a_corrupt_snapshot,
            failed_index_write_takes_the_log_offline_until_recovery,
            rebuild_reads_sequences_from_empty_compacted_batches,
            high_watermark_moves_by_follower_acknowledgement,
            a_follower_whose_history_left_the_leaders_is_cut_back_to_the_common_prefix,
        );
    };
    (@tests $backend:expr; $($scenario:ident,)*) => {
        $(
            #[tokio::test]
            async fn $scenario() {
                let backend = $backend;
                $crate::$scenario(&backend).await;
            }
        )*
    };
}
