//! Kafka's `ProducerStateManagerTest` cases (kafka-semantics §11.1, numbered) that need more than a psm-script: the PSM used
//! directly (no log-level duplicate check), first-offset metadata, late transactions, verification entries,
//! snapshot-set operations and corrupt snapshots.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use producer_state::append::{DataBatch, EndMarker};
use producer_state::snapshot::{decode_snapshot, encode_snapshot};
use producer_state::{
    AppendOrigin, BatchMetadata, CompletedTxn, LogOffsetMetadata, MemorySnapshotStore, ProducerStateEntry,
    ProducerStateError, ProducerStateManager, PsmConfig, SnapshotStore, TransactionVersion,
};
use record_format::BatchBuilder;

const PID: i64 = 1;

fn manager() -> ProducerStateManager {
    ProducerStateManager::new(PsmConfig {
        max_transaction_timeout_ms: 5 * 60 * 1000,
        ..PsmConfig::default()
    })
}

fn data(epoch: i16, seq: i32, offset: i64, ts: i64, txn: bool) -> DataBatch {
    DataBatch {
        epoch,
        first_seq: seq,
        last_seq: seq,
        max_timestamp: ts,
        first_offset: LogOffsetMetadata::message_only(offset),
        last_offset: offset,
        is_transactional: txn,
    }
}

/// Kafka's test helper `append`: one single-record batch, committed, map end advanced.
fn append(
    psm: &mut ProducerStateManager,
    pid: i64,
    origin: AppendOrigin,
    batch: DataBatch,
) -> Result<(), ProducerStateError> {
    let mut info = psm.prepare_update(pid, origin);
    info.append_data_batch(batch)?;
    psm.update(info);
    psm.update_map_end_offset(batch.last_offset + 1);
    Ok(())
}

fn client(
    psm: &mut ProducerStateManager,
    epoch: i16,
    seq: i32,
    offset: i64,
) -> Result<(), ProducerStateError> {
    append(psm, PID, AppendOrigin::Client, data(epoch, seq, offset, 0, false))
}

/// Kafka's test helper `appendEndTxnMarker` (COORDINATOR origin).
fn marker(
    psm: &mut ProducerStateManager,
    pid: i64,
    epoch: i16,
    commit: bool,
    offset: i64,
    ts: i64,
    tv: TransactionVersion,
) -> Result<Option<CompletedTxn>, ProducerStateError> {
    let mut info = psm.prepare_update(pid, AppendOrigin::Coordinator);
    let completed = info.append_end_txn_marker(
        EndMarker {
            commit,
            coordinator_epoch: 0,
            producer_epoch: epoch,
            offset,
            timestamp: ts,
        },
        tv,
    )?;
    psm.update(info);
    if let Some(completed) = &completed {
        psm.complete_txn(completed);
    }
    psm.update_map_end_offset(offset + 1);
    Ok(completed)
}

fn is_out_of_order(result: Result<(), ProducerStateError>) -> bool {
    matches!(result, Err(ProducerStateError::OutOfOrderSequence { .. }))
}

#[test]
fn t01_basic_id_mapping_rejects_a_resent_sequence_at_the_psm_level() {
    let mut psm = manager();
    client(&mut psm, 0, 0, 0).unwrap();
    client(&mut psm, 0, 1, 1).unwrap();
    assert!(
        is_out_of_order(client(&mut psm, 0, 1, 2)),
        "duplicates are a log-level concern"
    );
    assert!(is_out_of_order(client(&mut psm, 0, 5, 2)));
    client(&mut psm, 1, 0, 2).unwrap();
    assert!(matches!(
        client(&mut psm, 0, 2, 3),
        Err(ProducerStateError::InvalidProducerEpoch {
            current: 1,
            got: 0,
            ..
        })
    ));
}

#[test]
fn t08_txn_first_offset_metadata_is_returned_exactly() {
    let mut psm = manager();
    let metadata = LogOffsetMetadata {
        message_offset: 992,
        segment_base_offset: Some(990),
        relative_position: Some(234_224),
    };
    let mut info = psm.prepare_update(PID, AppendOrigin::Client);
    info.append_data_batch(DataBatch {
        first_offset: metadata,
        ..data(0, 0, 992, 0, true)
    })
    .unwrap();
    psm.update(info);
    assert_eq!(psm.first_unstable_offset(), Some(metadata));
}

fn late_transaction_case(tv: TransactionVersion) {
    let mut psm = manager();
    let start = 1_000_000;
    let late_after = 5 * 60 * 1000 + 300_000;
    append(&mut psm, 1, AppendOrigin::Client, data(0, 0, 100, start, true)).unwrap();
    append(
        &mut psm,
        2,
        AppendOrigin::Client,
        data(0, 0, 101, start + 500, true),
    )
    .unwrap();
    assert!(!psm.has_late_transaction(start + late_after));
    assert!(psm.has_late_transaction(start + late_after + 1));
    let epoch = if tv == TransactionVersion::V2 { 1 } else { 0 };
    marker(&mut psm, 1, epoch, true, 102, start + late_after + 1, tv).unwrap();
    assert!(
        psm.has_late_transaction(start + 500 + late_after + 1),
        "the second is still late"
    );
    assert!(!psm.has_late_transaction(start + 500 + late_after));
    marker(&mut psm, 2, epoch, true, 103, start + late_after + 1, tv).unwrap();
    assert!(!psm.has_late_transaction(start + 10 * late_after));
}

#[test]
fn t09_has_late_transaction_tv0() {
    late_transaction_case(TransactionVersion::V0);
}

#[test]
fn t09_has_late_transaction_tv2() {
    late_transaction_case(TransactionVersion::V2);
}

#[test]
fn t10_late_transaction_survives_snapshot_and_reload() {
    let mut psm = manager();
    let mut store = MemorySnapshotStore::new();
    append(&mut psm, PID, AppendOrigin::Client, data(0, 0, 100, 1_000, true)).unwrap();
    psm.take_snapshot(&mut store).unwrap();
    let mut reloaded = manager();
    reloaded.truncate_and_reload(&mut store, 0, 101, 1_000);
    let late = 1_000 + 5 * 60 * 1000 + 300_000 + 1;
    assert!(reloaded.has_late_transaction(late));
}

#[test]
fn t11_partial_truncation_below_the_transaction_clears_lateness() {
    let mut psm = manager();
    let mut store = MemorySnapshotStore::new();
    append(&mut psm, 2, AppendOrigin::Client, data(0, 0, 70, 0, false)).unwrap();
    psm.take_snapshot(&mut store).unwrap();
    append(&mut psm, PID, AppendOrigin::Client, data(0, 0, 100, 1_000, true)).unwrap();
    psm.take_snapshot(&mut store).unwrap();
    psm.truncate_and_reload(&mut store, 0, 80, 1_000);
    assert!(!psm.has_late_transaction(i64::MAX / 2));
}

#[test]
fn t12_full_truncation_clears_lateness() {
    let mut psm = manager();
    let mut store = MemorySnapshotStore::new();
    append(&mut psm, PID, AppendOrigin::Client, data(0, 0, 100, 1_000, true)).unwrap();
    psm.truncate_fully_and_start_at(&mut store, 0);
    assert!(!psm.has_late_transaction(i64::MAX / 2));
}

#[test]
fn t13_prepare_update_does_not_mutate_until_update() {
    let mut psm = manager();
    let mut info = psm.prepare_update(PID, AppendOrigin::Client);
    info.append_data_batch(DataBatch {
        first_seq: 0,
        last_seq: 5,
        first_offset: LogOffsetMetadata::message_only(20),
        last_offset: 25,
        ..data(0, 0, 20, 0, false)
    })
    .unwrap();
    assert!(psm.producer(PID).is_none());
    psm.update(info);
    let mut info = psm.prepare_update(PID, AppendOrigin::Client);
    info.append_data_batch(DataBatch {
        first_seq: 6,
        last_seq: 10,
        first_offset: LogOffsetMetadata::message_only(26),
        last_offset: 30,
        ..data(0, 6, 26, 0, false)
    })
    .unwrap();
    let before = psm.producer(PID).unwrap().clone();
    assert_eq!((before.first_seq(), before.last_seq()), (0, 5));
    psm.update(info);
    let after = psm.producer(PID).unwrap();
    assert_eq!(
        (after.first_seq(), after.last_seq(), after.last_data_offset()),
        (0, 10, 30)
    );
}

#[test]
fn t27_delete_snapshots_before() {
    let mut psm = manager();
    let mut store = MemorySnapshotStore::new();
    client(&mut psm, 0, 0, 1).unwrap();
    psm.take_snapshot(&mut store).unwrap();
    client(&mut psm, 0, 1, 2).unwrap();
    psm.take_snapshot(&mut store).unwrap();
    assert_eq!(store.offsets(), vec![2, 3]);
    ProducerStateManager::delete_snapshots_before(&mut store, 3);
    assert_eq!(store.offsets(), vec![3]);
    ProducerStateManager::delete_snapshots_before(&mut store, 4);
    assert!(store.offsets().is_empty());
}

#[test]
fn t28_truncate_fully_and_start_at() {
    let mut psm = manager();
    let mut store = MemorySnapshotStore::new();
    client(&mut psm, 0, 0, 0).unwrap();
    psm.take_snapshot(&mut store).unwrap();
    client(&mut psm, 0, 1, 1).unwrap();
    psm.take_snapshot(&mut store).unwrap();
    psm.truncate_fully_and_start_at(&mut store, 0);
    assert!(store.offsets().is_empty());
    assert!(psm.producer(PID).is_none());
    client(&mut psm, 0, 0, 0).unwrap();
    assert_eq!(psm.take_snapshot(&mut store), Some(1));
    assert_eq!(store.offsets(), vec![1]);
}

#[test]
fn t29_truncate_and_reload_deletes_the_snapshot_at_the_log_start() {
    let mut psm = manager();
    let mut store = MemorySnapshotStore::new();
    client(&mut psm, 0, 0, 0).unwrap();
    client(&mut psm, 0, 1, 1).unwrap();
    client(&mut psm, 0, 2, 2).unwrap();
    psm.take_snapshot(&mut store).unwrap();
    client(&mut psm, 0, 3, 3).unwrap();
    client(&mut psm, 0, 4, 4).unwrap();
    psm.take_snapshot(&mut store).unwrap();
    assert_eq!(store.offsets(), vec![3, 5]);
    psm.truncate_and_reload(&mut store, 3, 5, 0);
    assert_eq!(store.offsets(), vec![5], "the snapshot at the log start (3) goes");
}

fn corrupt_latest_falls_back(corrupt: impl Fn(&[u8]) -> Vec<u8>) {
    let mut psm = manager();
    let mut store = MemorySnapshotStore::new();
    client(&mut psm, 0, 0, 0).unwrap();
    psm.take_snapshot(&mut store).unwrap();
    client(&mut psm, 0, 1, 1).unwrap();
    psm.take_snapshot(&mut store).unwrap();
    let latest = store.read(2).unwrap();
    store.write(2, corrupt(&latest));
    let mut reloaded = manager();
    reloaded.truncate_and_reload(&mut store, 0, 2, 0);
    assert_eq!(store.offsets(), vec![1], "the corrupt snapshot is deleted");
    assert_eq!(reloaded.producer(PID).unwrap().last_data_offset(), 0);
    assert_eq!(reloaded.map_end_offset(), 1);
}

#[test]
fn t40_load_from_empty_snapshot_file_falls_back() {
    corrupt_latest_falls_back(|_| Vec::new());
}

#[test]
fn t41_load_from_truncated_snapshot_file_falls_back() {
    corrupt_latest_falls_back(|bytes| bytes[..bytes.len() / 2].to_vec());
}

#[test]
fn t42_load_from_corrupt_snapshot_file_falls_back() {
    corrupt_latest_falls_back(|bytes| {
        let mut bytes = bytes.to_vec();
        bytes.resize(bytes.len().max(37), 0);
        bytes[..37].fill(0);
        bytes
    });
}

#[test]
fn t43_append_empty_control_batch_gives_an_empty_entry() {
    let mut psm = manager();
    let batch = BatchBuilder::new()
        .producer(PID, 1, -1)
        .transactional(true)
        .control(true)
        .build()
        .unwrap();
    let mut info = psm.prepare_update(PID, AppendOrigin::Coordinator);
    assert_eq!(info.append(&batch, None, TransactionVersion::V0), Ok(None));
    psm.update(info);
    let entry = psm.producer(PID).unwrap();
    assert_eq!((entry.producer_epoch, entry.current_txn_first_offset), (-1, None));
}

fn store_with(offsets: &[i64]) -> MemorySnapshotStore {
    let mut store = MemorySnapshotStore::new();
    for &offset in offsets {
        store.write(offset, encode_snapshot([].iter()));
    }
    store
}

#[test]
fn t44_remove_stray_snapshots_keeps_the_clean_shutdown_snapshot() {
    let mut store = store_with(&[2, 5, 42]);
    ProducerStateManager::remove_stray_snapshots(&mut store, &[5]);
    assert_eq!(store.offsets(), vec![5, 42]);
}

#[test]
fn t45_remove_all_stray_snapshots() {
    let mut store = store_with(&[2, 5, 42]);
    ProducerStateManager::remove_stray_snapshots(&mut store, &[42]);
    assert_eq!(store.offsets(), vec![42]);
}

#[test]
fn t46_removed_snapshot_is_no_longer_tracked() {
    // Kafka renames the file to `.snapshot.deleted` and deletes it later: that is storage-fs's file layout. In the
    // abstract set the snapshot stops being tracked and reload no longer sees it.
    let mut psm = manager();
    let mut store = MemorySnapshotStore::new();
    client(&mut psm, 0, 0, 0).unwrap();
    psm.take_snapshot(&mut store).unwrap();
    store.delete(1);
    assert!(store.offsets().is_empty());
    let mut reloaded = manager();
    reloaded.truncate_and_reload(&mut store, 0, 1, 0);
    assert!(reloaded.producer(PID).is_none());
}

#[test]
fn t47_deleting_an_absent_snapshot_is_not_an_error() {
    // Kafka's rename-to-`.deleted` (t46) is a file-layout concern of storage-fs; in the abstract set, removing a
    // snapshot that is already gone is a no-op.
    let mut store = store_with(&[1]);
    store.delete(7);
    assert_eq!(store.offsets(), vec![1]);
}

#[test]
fn t48_entry_for_verification_returns_the_same_guard_until_cleared() {
    let mut psm = manager();
    let first = psm.maybe_create_verification_state_entry(PID, 0, 0, false, 0);
    let again = psm.maybe_create_verification_state_entry(PID, 0, 0, false, 0);
    assert_eq!(first, again);
    psm.clear_verification_state_entry(PID);
    assert!(psm.verification_state_entry(PID).is_none());
    assert_ne!(
        psm.maybe_create_verification_state_entry(PID, 0, 0, false, 0),
        first
    );
}

#[test]
fn t49_sequence_and_epoch_in_verification_entry() {
    let mut psm = manager();
    psm.maybe_create_verification_state_entry(PID, 1, 0, false, 0);
    psm.maybe_create_verification_state_entry(PID, 0, 0, false, 0);
    let entry = *psm.verification_state_entry(PID).unwrap();
    assert_eq!((entry.lowest_sequence, entry.epoch), (0, 0));
    psm.maybe_create_verification_state_entry(PID, 2, 1, false, 0);
    let entry = *psm.verification_state_entry(PID).unwrap();
    assert_eq!((entry.lowest_sequence, entry.epoch), (2, 1));
    psm.maybe_create_verification_state_entry(PID, 0, 0, false, 0);
    let entry = *psm.verification_state_entry(PID).unwrap();
    assert_eq!(
        (entry.lowest_sequence, entry.epoch),
        (2, 1),
        "a lower epoch is ignored"
    );
}

#[test]
fn t50_sequence_above_the_verified_lowest_is_out_of_order_even_with_verification_disabled() {
    for enabled in [true, false] {
        let mut psm = manager();
        psm.maybe_create_verification_state_entry(PID, 0, 0, false, 0);
        psm.set_config(PsmConfig {
            transaction_verification_enabled: enabled,
            ..psm.config().clone()
        });
        assert!(is_out_of_order(append(
            &mut psm,
            PID,
            AppendOrigin::Client,
            data(0, 4, 0, 0, true)
        )));
    }
}

#[test]
fn t51_verification_entry_expires_from_its_creation() {
    let mut psm = manager();
    let expiration = psm.config().producer_id_expiration_ms;
    psm.maybe_create_verification_state_entry(PID, 0, 0, false, 0);
    psm.remove_expired_producers(expiration - 1);
    assert!(psm.verification_state_entry(PID).is_some());
    psm.maybe_create_verification_state_entry(PID, 0, 0, false, expiration - 1);
    psm.remove_expired_producers(expiration);
    assert!(
        psm.verification_state_entry(PID).is_none(),
        "access does not refresh it"
    );
}

#[test]
fn t52_transactions_v2_without_state_must_start_at_zero() {
    let mut psm = manager();
    psm.maybe_create_verification_state_entry(PID, 5, 0, true, 0);
    assert!(is_out_of_order(append(
        &mut psm,
        PID,
        AppendOrigin::Client,
        data(0, 5, 0, 0, true)
    )));
    let mut psm = manager();
    psm.maybe_create_verification_state_entry(PID, 0, 0, true, 0);
    append(&mut psm, PID, AppendOrigin::Client, data(0, 0, 0, 0, true)).unwrap();
}

#[test]
fn t53_transactions_v1_without_state_may_start_anywhere() {
    let mut psm = manager();
    psm.maybe_create_verification_state_entry(PID, 5, 0, false, 0);
    append(&mut psm, PID, AppendOrigin::Client, data(0, 5, 0, 0, true)).unwrap();
}

#[test]
fn t55_last_stable_offset_of_completed_transactions() {
    let mut psm = manager();
    let (s1, s2, s3) = (100, 105, 110);
    append(&mut psm, 1, AppendOrigin::Client, data(0, 0, s1, 0, true)).unwrap();
    append(&mut psm, 2, AppendOrigin::Client, data(0, 0, s2, 0, true)).unwrap();
    append(&mut psm, 3, AppendOrigin::Client, data(0, 0, s3, 0, true)).unwrap();
    let c1 = CompletedTxn {
        producer_id: 1,
        first_offset: s1,
        last_offset: 120,
        is_aborted: false,
    };
    assert_eq!(psm.last_stable_offset(&c1), s2);
    psm.complete_txn(&c1);
    assert_eq!(psm.first_undecided_offset(), Some(s2));
    let c3 = CompletedTxn {
        producer_id: 3,
        first_offset: s3,
        last_offset: 121,
        is_aborted: false,
    };
    assert_eq!(psm.last_stable_offset(&c3), s2);
    psm.complete_txn(&c3);
    let c2 = CompletedTxn {
        producer_id: 2,
        first_offset: s2,
        last_offset: 122,
        is_aborted: false,
    };
    assert_eq!(psm.last_stable_offset(&c2), 123);
    psm.complete_txn(&c2);
    assert_eq!(psm.first_undecided_offset(), None);
}

#[test]
fn t57_snapshot_round_trip_is_lossless_for_the_last_batch() {
    let mut with_batch = ProducerStateEntry::empty(1);
    with_batch.producer_epoch = 3;
    with_batch.coordinator_epoch = 7;
    with_batch.current_txn_first_offset = Some(95);
    with_batch.last_timestamp = 1_000;
    with_batch.batches.push_back(BatchMetadata {
        last_seq: 8,
        last_offset: 100,
        offset_delta: 2,
        timestamp: 1_000,
    });
    let bare = ProducerStateEntry::empty(2);
    let entries = vec![with_batch, bare];
    assert_eq!(
        decode_snapshot(&encode_snapshot(entries.iter())).unwrap(),
        entries
    );
}

#[test]
fn client_control_batches_are_invalid_records_at_the_psm_level() {
    let psm = manager();
    let marker = record_format::end_txn_marker_batch(
        true,
        PID,
        0,
        0,
        record_format::ControlBatchPlacement {
            base_offset: 0,
            partition_leader_epoch: 0,
            timestamp: 0,
        },
    )
    .unwrap();
    let mut info = psm.prepare_update(PID, AppendOrigin::Client);
    let error = info.append(&marker, None, TransactionVersion::V0).unwrap_err();
    assert_eq!(error.kafka_error().code(), 87);
}

#[test]
fn leader_markers_need_a_transaction_version() {
    let mut psm = manager();
    append(&mut psm, PID, AppendOrigin::Client, data(0, 0, 0, 0, true)).unwrap();
    assert!(matches!(
        marker(&mut psm, PID, 0, true, 1, 0, TransactionVersion::Unknown),
        Err(ProducerStateError::UnknownTransactionVersion { .. })
    ));
}
