//! The coordinator with real partition logs on fs: one producer commits a transaction over three partitions,
//! another aborts one, and the coordinator crashes between Prepare and Complete. After recovery every marker is
//! in every partition — the one that landed before the crash twice, as Kafka's log holds a re-sent marker, the
//! second changing nothing —, each partition's LSO is past its markers, and read_committed reads see exactly the
//! committed records (read_uncommitted sees all).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::collections::BTreeMap;

use kafka_types::TransactionVersion;
use kafka_types::{CoordinatorEpoch, ProducerEpoch, ProducerId, TransactionalId};
use partition_log::{Isolation, LogConfig, PartitionLog};
use partition_log_testkit::produce;
use record_format::{BatchBuilder, RecordBatch};
use storage::{PartitionId, Storage};
use storage_fs::{FsConfig, FsStorage};
use txn_coordinator::{CoordinatorConfig, DurableCoordinator, MarkerRequest, TxnState};

fn data_partition(number: u32) -> PartitionId {
    PartitionId::new("orders", number).unwrap()
}

/// A transactional client batch holding `values`.
fn transactional(producer: (ProducerId, ProducerEpoch), sequence: i32, values: &[&str]) -> RecordBatch {
    let mut builder = BatchBuilder::new()
        .producer(producer.0.get(), producer.1.get(), sequence)
        .transactional(true);
    for value in values {
        builder.add(1_000, None, Some(value.as_bytes()), &[]);
    }
    builder.build().unwrap()
}

/// `count` data partitions with an open log each.
async fn data_logs(store: &FsStorage, count: u32) -> (BTreeMap<PartitionId, PartitionLog>, Vec<PartitionId>) {
    let mut logs = BTreeMap::new();
    for number in 0..count {
        let storage = store.create(&data_partition(number)).await.unwrap();
        let (log, _) = PartitionLog::open(storage, LogConfig::default(), 0)
            .await
            .unwrap();
        logs.insert(data_partition(number), log);
    }
    (logs, (0..count).map(data_partition).collect())
}

async fn open_coordinator(store: &FsStorage, epoch: i32) -> (DurableCoordinator, Vec<MarkerRequest>) {
    let id = PartitionId::new("__transaction_state", 0).unwrap();
    let storage = match store.open(&id).await {
        Ok(partition) => partition,
        Err(_) => store.create(&id).await.unwrap(),
    };
    DurableCoordinator::open(storage, CoordinatorConfig::default(), CoordinatorEpoch(epoch))
        .await
        .unwrap()
}

/// Delivers markers to the partition logs (a re-sent one is appended again, as Kafka's leader appends it) and
/// acknowledges each to the coordinator.
async fn deliver(
    coordinator: &mut DurableCoordinator,
    logs: &mut BTreeMap<PartitionId, PartitionLog>,
    markers: &[MarkerRequest],
    now: i64,
) {
    for marker in markers {
        let log = logs.get_mut(&marker.partition).unwrap();
        log.write_marker(
            marker.commit,
            marker.producer_id.get(),
            marker.epoch.get(),
            marker.coordinator_epoch.get(),
            now,
        )
        .await
        .unwrap();
        let outcome =
            coordinator
                .coordinator()
                .marker_written(&marker.transactional_id, &marker.partition, now);
        coordinator.apply(outcome, now).await.unwrap().0.unwrap();
    }
}

/// What a read_committed consumer of `log` sees: values of data records, skipping aborted transactions.
async fn read(log: &PartitionLog, isolation: Isolation) -> Vec<String> {
    let fetched = log
        .read(log.log_start_offset(), 1 << 20, isolation)
        .await
        .unwrap();
    let mut values = Vec::new();
    for batch in &fetched.batches {
        if batch.is_control() {
            continue;
        }
        let aborted = fetched.aborted_transactions.iter().any(|entry| {
            entry.producer_id == batch.producer_id()
                && entry.first_offset <= batch.base_offset()
                && batch.base_offset() <= entry.last_offset
        });
        if aborted {
            continue;
        }
        for record in batch.records().unwrap().iter() {
            let record = record.unwrap();
            values.push(String::from_utf8(record.value.unwrap().to_vec()).unwrap());
        }
    }
    values
}

fn control_batches(batches: &[RecordBatch]) -> usize {
    batches.iter().filter(|batch| batch.is_control()).count()
}

#[tokio::test]
async fn markers_reach_every_partition_across_a_coordinator_crash_and_a_resent_one_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStorage::open(FsConfig::new(dir.path())).unwrap();
    let (mut logs, partitions) = data_logs(&store, 3).await;
    let committer = TransactionalId("committer".to_owned());
    let aborter = TransactionalId("aborter".to_owned());

    let (mut coordinator, _) = open_coordinator(&store, 1).await;
    let init = |coordinator: &mut DurableCoordinator, id: &TransactionalId| {
        coordinator
            .coordinator()
            .init_producer_id(Some(id), 60_000, None, 0)
    };
    let outcome = init(&mut coordinator, &committer);
    let a = coordinator.apply(outcome, 0).await.unwrap().0.unwrap();
    let outcome = init(&mut coordinator, &aborter);
    let b = coordinator.apply(outcome, 0).await.unwrap().0.unwrap();

    // The aborter writes to partition 1 and aborts; its markers are delivered at once.
    let outcome = coordinator
        .coordinator()
        .add_partitions(&aborter, b.0, b.1, &partitions[1..2], 1);
    coordinator.apply(outcome, 1).await.unwrap().0.unwrap();
    produce(
        logs.get_mut(&partitions[1]).unwrap(),
        transactional(b, 0, &["b-1"]),
    )
    .await
    .unwrap();
    let outcome = coordinator
        .coordinator()
        .end_txn(&aborter, b.0, b.1, false, TransactionVersion::V1, 2);
    let (answer, markers) = coordinator.apply(outcome, 2).await.unwrap();
    answer.unwrap();
    deliver(&mut coordinator, &mut logs, &markers, 2).await;

    // The committer writes to all three partitions and commits; one marker lands, then the coordinator dies.
    let outcome = coordinator
        .coordinator()
        .add_partitions(&committer, a.0, a.1, &partitions, 3);
    coordinator.apply(outcome, 3).await.unwrap().0.unwrap();
    for (number, partition) in partitions.iter().enumerate() {
        let values = [format!("a-{number}-x"), format!("a-{number}-y")];
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        produce(logs.get_mut(partition).unwrap(), transactional(a, 0, &values))
            .await
            .unwrap();
    }
    let outcome = coordinator
        .coordinator()
        .end_txn(&committer, a.0, a.1, true, TransactionVersion::V1, 4);
    let (answer, markers) = coordinator.apply(outcome, 4).await.unwrap();
    answer.unwrap();
    assert_eq!(markers.len(), 3);
    deliver(&mut coordinator, &mut logs, &markers[..1], 5).await;
    drop(coordinator);

    let (mut coordinator, resent) = open_coordinator(&store, 2).await;
    assert_eq!(
        resent.len(),
        3,
        "every marker of the prepared transaction is re-sent"
    );
    deliver(&mut coordinator, &mut logs, &resent, 6).await;
    assert_eq!(
        coordinator.coordinator().transaction(&committer).unwrap().state,
        TxnState::CompleteCommit
    );
    assert_eq!(
        coordinator.coordinator().transaction(&aborter).unwrap().state,
        TxnState::CompleteAbort
    );

    for (number, partition) in partitions.iter().enumerate() {
        let log = logs.get_mut(partition).unwrap();
        let end = log.log_end_offset();
        log.advance_high_watermark(end);
        assert_eq!(
            log.last_stable_offset(),
            end,
            "{partition}: the LSO is past the markers"
        );
        let all = log
            .read(0, 1 << 20, Isolation::ReadUncommitted)
            .await
            .unwrap()
            .batches;
        // Partition 0 took the commit marker before the crash and again after it; partition 1 holds the
        // aborter's marker and the committer's; partition 2 the committer's.
        let expected_markers = if number == 2 { 1 } else { 2 };
        assert_eq!(
            control_batches(&all),
            expected_markers,
            "{partition}: the markers, the re-sent one again"
        );
        let committed = read(log, Isolation::ReadCommitted).await;
        assert_eq!(
            committed,
            vec![format!("a-{number}-x"), format!("a-{number}-y")],
            "{partition}"
        );
        let uncommitted = read(log, Isolation::ReadUncommitted).await;
        if number == 1 {
            assert!(
                uncommitted.contains(&"b-1".to_owned()),
                "read_uncommitted sees the aborted record"
            );
        }
    }
}

/// Transaction version 2 against real partition logs: each EndTxn's markers carry the bumped epoch, the partition
/// accepts them, and the producer's next transaction at the bumped epoch (sequence back at 0) is accepted too,
/// while a zombie still at the old epoch is refused by the partition.
#[tokio::test]
async fn transaction_version_2_markers_bump_the_epoch_on_every_partition() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStorage::open(FsConfig::new(dir.path())).unwrap();
    let (mut logs, partitions) = data_logs(&store, 2).await;
    let app = TransactionalId("app".to_owned());
    let (mut coordinator, _) = open_coordinator(&store, 1).await;
    let outcome = coordinator
        .coordinator()
        .init_producer_id(Some(&app), 60_000, None, 0);
    let mut producer = coordinator.apply(outcome, 0).await.unwrap().0.unwrap();
    let first = producer;

    for (round, commit) in [(0, true), (1, false), (2, true)] {
        let outcome =
            coordinator
                .coordinator()
                .add_partitions(&app, producer.0, producer.1, &partitions, 10 * round);
        coordinator.apply(outcome, 10 * round).await.unwrap().0.unwrap();
        for partition in &partitions {
            let value = format!("{partition}-round-{round}");
            produce(
                logs.get_mut(partition).unwrap(),
                transactional(producer, 0, &[&value]),
            )
            .await
            .unwrap();
        }
        let outcome = coordinator.coordinator().end_txn(
            &app,
            producer.0,
            producer.1,
            commit,
            TransactionVersion::V2,
            10 * round + 1,
        );
        let (answer, markers) = coordinator.apply(outcome, 10 * round + 1).await.unwrap();
        let next = answer.unwrap();
        assert_eq!(next, (producer.0, ProducerEpoch(producer.1.get() + 1)));
        assert!(markers.iter().all(|marker| marker.epoch == next.1));
        deliver(&mut coordinator, &mut logs, &markers, 10 * round + 2).await;
        producer = next;
    }

    for partition in &partitions {
        let log = logs.get_mut(partition).unwrap();
        let end = log.log_end_offset();
        log.advance_high_watermark(end);
        assert_eq!(
            log.last_stable_offset(),
            end,
            "{partition}: the LSO is past the markers"
        );
        assert_eq!(
            read(log, Isolation::ReadCommitted).await,
            vec![format!("{partition}-round-0"), format!("{partition}-round-2")],
            "{partition}: the aborted round is hidden"
        );
        // A zombie that never heard the bumps: the partition refuses its old epoch.
        let zombie = produce(log, transactional(first, 1, &["zombie"])).await;
        assert!(zombie.is_err(), "{partition}: {zombie:?}");
    }
}
