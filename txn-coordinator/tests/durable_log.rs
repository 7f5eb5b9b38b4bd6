//! The transaction-state log: records round-trip, hostile bytes are typed errors, and a coordinator rebuilt from
//! its partition on fs after a crash between Prepare and Complete re-sends every marker and completes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::collections::BTreeSet;

use kafka_types::TransactionVersion;
use kafka_types::{CoordinatorEpoch, ProducerEpoch, ProducerId, TransactionalId};
use proptest::prelude::*;
use storage::{PartitionId, Storage};
use storage_fs::{FsConfig, FsStorage};
use txn_coordinator::log::{batch_of, decode};
use txn_coordinator::{
    CoordinatorConfig, CoordinatorError, DurableCoordinator, TxnMetadata, TxnState, Write,
};

fn txn(partitions: &[(&str, u32)], state: TxnState) -> TxnMetadata {
    TxnMetadata {
        transactional_id: TransactionalId("app-ü".to_owned()),
        producer_id: ProducerId(4_000),
        last_producer_id: Some(ProducerId(12)),
        next_producer_id: Some(ProducerId(4_001)),
        epoch: Some(ProducerEpoch(7)),
        last_epoch: None,
        timeout_ms: 60_000,
        state,
        partitions: partitions
            .iter()
            .map(|&(topic, number)| PartitionId::new(topic, number).unwrap())
            .collect(),
        txn_start_ms: Some(1_000),
        last_update_ms: 2_000,
        pending_markers: BTreeSet::new(),
    }
}

fn records_of(writes: &[Write]) -> Vec<Write> {
    let batch = batch_of(writes, 0, 5).unwrap();
    let records = batch.records().unwrap();
    records
        .iter()
        .map(|record| {
            let record = record.unwrap();
            decode(record.key, record.value).unwrap()
        })
        .collect()
}

#[test]
fn every_kind_of_record_round_trips_through_a_batch() {
    let writes = vec![
        Write::ReserveProducerIds(txn_coordinator::Reservation { up_to: 5_000 }),
        Write::Txn(Box::new(txn(
            &[("orders", 0), ("__consumer_offsets", 47)],
            TxnState::PrepareCommit,
        ))),
        Write::Txn(Box::new(TxnMetadata {
            last_producer_id: None,
            next_producer_id: None,
            epoch: None,
            txn_start_ms: None,
            ..txn(&[], TxnState::Empty)
        })),
        Write::Tombstone(TransactionalId("gone".to_owned())),
    ];
    assert_eq!(records_of(&writes), writes);
}

#[test]
fn hostile_records_are_typed_errors() {
    let good = {
        let batch = batch_of(
            &[Write::Txn(Box::new(txn(&[("orders", 1)], TxnState::Ongoing)))],
            0,
            0,
        )
        .unwrap();
        let records = batch.records().unwrap();
        let record = records.iter().next().unwrap().unwrap();
        (record.key.unwrap().to_vec(), record.value.unwrap().to_vec())
    };
    let corrupt = |key: Option<&[u8]>, value: Option<&[u8]>| {
        matches!(decode(key, value), Err(CoordinatorError::CorruptTxnLog(_)))
    };
    assert!(corrupt(None, Some(b"x")), "no key");
    assert!(corrupt(Some(&[9]), Some(b"x")), "unknown key");
    assert!(corrupt(Some(&[0]), Some(&[1, 2, 3])), "short reservation");
    for cut in 0..good.1.len() {
        assert!(corrupt(Some(&good.0), Some(&good.1[..cut])), "value cut at {cut}");
    }
    let mut bad_state = good.1.clone();
    bad_state[2 + 8 + 8 + 2 + 2 + 8] = 99;
    assert!(corrupt(Some(&good.0), Some(&bad_state)), "unknown state id");
    // A partition count of u32::MAX with no partitions behind it: an error, not a 4-billion-entry allocation.
    let mut huge_count = good.1.clone();
    let count_at = 2 + 8 + 8 + 2 + 2 + 8 + 1 + 8 + 8;
    huge_count.truncate(count_at);
    huge_count.extend_from_slice(&u32::MAX.to_be_bytes());
    assert!(corrupt(Some(&good.0), Some(&huge_count)));
}

#[test]
fn a_version_0_record_without_a_next_producer_id_still_decodes() {
    let written = txn(&[("orders", 1)], TxnState::Ongoing);
    let batch = batch_of(&[Write::Txn(Box::new(written.clone()))], 0, 0).unwrap();
    let records = batch.records().unwrap();
    let record = records.iter().next().unwrap().unwrap();
    let mut value = record.value.unwrap().to_vec();
    value.truncate(value.len() - 8);
    value[..2].copy_from_slice(&0i16.to_be_bytes());
    let expected = TxnMetadata {
        next_producer_id: None,
        ..written
    };
    assert_eq!(
        decode(record.key, Some(&value)).unwrap(),
        Write::Txn(Box::new(expected))
    );
    value[..2].copy_from_slice(&2i16.to_be_bytes());
    assert!(
        decode(record.key, Some(&value)).is_err(),
        "a version from the future is refused"
    );
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(key in proptest::collection::vec(any::<u8>(), 0..40),
                                   value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200))) {
        let _ = decode(Some(&key), value.as_deref());
    }
}

fn state_partition() -> PartitionId {
    PartitionId::new("__transaction_state", 0).unwrap()
}

async fn open(
    dir: &std::path::Path,
    epoch: i32,
) -> (DurableCoordinator, Vec<txn_coordinator::MarkerRequest>) {
    let store = FsStorage::open(FsConfig::new(dir)).unwrap();
    let storage = match store.open(&state_partition()).await {
        Ok(partition) => partition,
        Err(_) => store.create(&state_partition()).await.unwrap(),
    };
    DurableCoordinator::open(storage, CoordinatorConfig::default(), CoordinatorEpoch(epoch))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_crash_between_prepare_and_complete_resends_every_marker_after_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let id = TransactionalId("app".to_owned());
    let partitions: Vec<PartitionId> = (0..3).map(|n| PartitionId::new("orders", n).unwrap()).collect();
    let producer = {
        let (mut durable, _) = open(dir.path(), 1).await;
        let outcome = durable.coordinator().init_producer_id(Some(&id), 60_000, None, 0);
        let producer = durable.apply(outcome, 0).await.unwrap().0.unwrap();
        let outcome = durable
            .coordinator()
            .add_partitions(&id, producer.0, producer.1, &partitions, 1);
        durable.apply(outcome, 1).await.unwrap().0.unwrap();
        let outcome =
            durable
                .coordinator()
                .end_txn(&id, producer.0, producer.1, true, TransactionVersion::V1, 2);
        let (answer, markers) = durable.apply(outcome, 2).await.unwrap();
        answer.unwrap();
        assert_eq!(markers.len(), 3);
        // One marker lands, then the process dies.
        let outcome = durable
            .coordinator()
            .marker_written(&id, &markers[0].partition, 3);
        durable.apply(outcome, 3).await.unwrap().0.unwrap();
        producer
    };
    let (mut durable, resent) = open(dir.path(), 2).await;
    assert_eq!(
        durable.coordinator().transaction(&id).unwrap().state,
        TxnState::PrepareCommit
    );
    let resent_partitions: Vec<PartitionId> = resent.iter().map(|m| m.partition.clone()).collect();
    assert_eq!(resent_partitions, partitions);
    assert!(resent
        .iter()
        .all(|m| m.commit && m.producer_id == producer.0 && m.coordinator_epoch == CoordinatorEpoch(2)));
    for marker in &resent {
        let outcome = durable.coordinator().marker_written(&id, &marker.partition, 4);
        durable.apply(outcome, 4).await.unwrap().0.unwrap();
    }
    assert_eq!(
        durable.coordinator().transaction(&id).unwrap().state,
        TxnState::CompleteCommit
    );
    // And once more after a clean restart: complete, nothing to resend, ids above the first block.
    drop(durable);
    let (mut durable, resent) = open(dir.path(), 3).await;
    assert!(resent.is_empty());
    assert_eq!(
        durable.coordinator().transaction(&id).unwrap().state,
        TxnState::CompleteCommit
    );
    let outcome = durable.coordinator().init_producer_id(None, 0, None, 5);
    let fresh = durable.apply(outcome, 5).await.unwrap().0.unwrap();
    assert!(fresh.0.get() > producer.0.get());
}

/// Writes `history` into the state partition under `dir` as batches of 1,000 records, after what is there.
async fn append_history(dir: &std::path::Path, history: &[Write]) {
    let store = FsStorage::open(FsConfig::new(dir)).unwrap();
    let mut storage = match store.open(&state_partition()).await {
        Ok(partition) => partition,
        Err(_) => store.create(&state_partition()).await.unwrap(),
    };
    for chunk in history.chunks(1_000) {
        let batch = batch_of(chunk, storage.log_end_offset(), 7).unwrap();
        storage.append(&[batch]).await.unwrap();
    }
    storage.flush(storage::Durability::Sync).await.unwrap();
}

/// What a reopened coordinator holds: every transaction, the markers it re-sends and its producer-id bound.
async fn state_after_open(dir: &std::path::Path, epoch: i32) -> (Vec<TxnMetadata>, Vec<String>, i64, u64) {
    let (mut durable, resent) = open(dir, epoch).await;
    let records = durable.log_records();
    let coordinator = durable.coordinator();
    let transactions = coordinator.transactions().cloned().collect();
    let resent = resent
        .iter()
        .map(|marker| format!("{}:{}", marker.transactional_id.as_str(), marker.partition))
        .collect();
    (
        transactions,
        resent,
        coordinator.producer_ids_issued_below(),
        records,
    )
}

/// 120,000 records of history over 40 transactional ids: each id rewritten again and again, a few tombstoned, one
/// left in PrepareCommit (its markers are re-sent after a start), reservations rising.
fn long_history() -> Vec<Write> {
    let mut history = Vec::new();
    for round in 0..3_000i64 {
        history.push(Write::ReserveProducerIds(txn_coordinator::Reservation {
            up_to: 1_000 * (round + 1),
        }));
        for n in 0..39 {
            let state = if n == 7 {
                TxnState::PrepareCommit
            } else {
                TxnState::CompleteCommit
            };
            history.push(Write::Txn(Box::new(TxnMetadata {
                transactional_id: TransactionalId(format!("app-{n}")),
                producer_id: ProducerId(n),
                last_update_ms: round,
                ..txn(&[("orders", n as u32 % 3)], state)
            })));
        }
    }
    for n in [3, 11] {
        history.push(Write::Tombstone(TransactionalId(format!("app-{n}"))));
    }
    history
}

#[tokio::test]
async fn the_transaction_log_is_rewritten_as_its_live_state_and_a_start_replays_only_that() {
    let dir = tempfile::tempdir().unwrap();
    append_history(dir.path(), &long_history()).await;
    let before = state_after_open(dir.path(), 1).await;
    assert_eq!(before.3, 120_002, "the whole history is replayed");
    assert_eq!(before.0.len(), 37);
    assert_eq!(
        before.1.len(),
        1,
        "the transaction in PrepareCommit has its marker re-sent"
    );

    let (mut durable, _) = open(dir.path(), 2).await;
    assert!(durable.snapshot_if_due(10).await.unwrap());
    assert_eq!(
        durable.log_records(),
        38,
        "the reservation and one record per transactional id"
    );
    assert!(
        !durable.snapshot_if_due(11).await.unwrap(),
        "not due again at once"
    );
    drop(durable);

    let after = state_after_open(dir.path(), 3).await;
    assert_eq!(after.3, 38, "a start replays the live state only");
    assert_eq!((&after.0, &after.1, after.2), (&before.0, &before.1, before.2));
}

#[tokio::test]
async fn a_rewrite_cut_short_by_a_crash_replays_to_the_state_it_was_copying() {
    let dir = tempfile::tempdir().unwrap();
    append_history(dir.path(), &long_history()).await;
    let before = state_after_open(dir.path(), 1).await;
    // Half of the live state appended again, then the crash: the log start never moved.
    let half: Vec<Write> = before.0[..before.0.len() / 2]
        .iter()
        .map(|txn| Write::Txn(Box::new(txn.clone())))
        .collect();
    append_history(dir.path(), &half).await;
    let after = state_after_open(dir.path(), 2).await;
    assert_eq!(after.3, before.3 + half.len() as u64);
    assert_eq!((&after.0, &after.1, after.2), (&before.0, &before.1, before.2));
}

/// A log that holds only live state — more transactional ids than the rewrite threshold — is not rewritten again
/// at each start: the live state counts as the last rewrite (before, every start rewrote it once).
#[tokio::test]
async fn a_log_of_live_state_alone_is_not_rewritten_again_after_a_start() {
    let dir = tempfile::tempdir().unwrap();
    let live: Vec<Write> = (0..110_000i64)
        .map(|n| {
            Write::Txn(Box::new(TxnMetadata {
                transactional_id: TransactionalId(format!("app-{n}")),
                producer_id: ProducerId(n),
                ..txn(&[("orders", 0)], TxnState::CompleteCommit)
            }))
        })
        .collect();
    append_history(dir.path(), &live).await;
    let (mut durable, _) = open(dir.path(), 1).await;
    assert_eq!(durable.log_records(), 110_000);
    assert!(
        !durable.snapshot_if_due(10).await.unwrap(),
        "nothing to rewrite: the log is its live state"
    );
}
