//! How long the transaction coordinator takes to start after 1,000,000 records of transaction-log history (issue
//! 51, item 4), with the log rewritten as its live state (`DurableCoordinator::snapshot_if_due`, as `serve`'s
//! housekeeping runs it) and without.
//!
//! `cargo run --release -p txn-coordinator --example txn_log_start_up [RECORDS]` writes RECORDS records (default
//! 1,000,000) as a busy coordinator writes them — 1,000 transactional ids, each moved through Ongoing,
//! PrepareCommit and CompleteCommit again and again, and a producer-id reservation every 1,000 records — onto
//! storage-fs, then prints the median of five `DurableCoordinator::open`s before and after one rewrite.
#![allow(clippy::unwrap_used, clippy::expect_used)] // an example fails by panicking

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kafka_types::{CoordinatorEpoch, ProducerEpoch, ProducerId, TransactionalId};
use storage::{Durability, PartitionId, Storage};
use storage_fs::{FsConfig, FsStorage};
use txn_coordinator::log::batch_of;
use txn_coordinator::{CoordinatorConfig, DurableCoordinator, Reservation, TxnMetadata, TxnState, Write};

const IDS: usize = 1_000;

fn partition() -> PartitionId {
    PartitionId::new("__transaction_state", 0).unwrap()
}

async fn storage(dir: &std::path::Path) -> Box<dyn storage::PartitionStorage> {
    let store = FsStorage::open(FsConfig::new(dir)).unwrap();
    match store.open(&partition()).await {
        Ok(partition) => partition,
        Err(_) => store.create(&partition()).await.unwrap(),
    }
}

/// The `n`th record of the history.
fn record(n: usize) -> Write {
    if n % 1_000 == 999 {
        return Write::ReserveProducerIds(Reservation {
            up_to: (n as i64 + 1) * 10,
        });
    }
    let id = n % IDS;
    let state = [
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::CompleteCommit,
    ][(n / IDS) % 3];
    Write::Txn(Box::new(TxnMetadata {
        transactional_id: TransactionalId(format!("app-{id}")),
        producer_id: ProducerId(id as i64),
        last_producer_id: None,
        next_producer_id: None,
        epoch: Some(ProducerEpoch(((n / IDS) % 30_000) as i16)),
        last_epoch: None,
        timeout_ms: 60_000,
        state,
        partitions: (0..3).map(|p| PartitionId::new("orders", p).unwrap()).collect(),
        txn_start_ms: Some(n as i64),
        last_update_ms: n as i64,
        pending_markers: BTreeSet::new(),
    }))
}

/// The median of five opens, and the records the last one replayed.
async fn median_open(dir: &std::path::Path) -> (Duration, u64) {
    let mut times = Vec::new();
    let mut records = 0;
    for epoch in 0..5 {
        let started = Instant::now();
        let (durable, _markers) = DurableCoordinator::open(
            storage(dir).await,
            CoordinatorConfig::default(),
            CoordinatorEpoch(epoch),
        )
        .await
        .unwrap();
        times.push(started.elapsed());
        records = durable.log_records();
    }
    times.sort();
    (times[2], records)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let total: usize = std::env::args().nth(1).map_or(1_000_000, |n| n.parse().unwrap());
    let dir = tempfile::tempdir().unwrap();
    {
        let mut log = storage(dir.path()).await;
        let history: Vec<Write> = (0..total).map(record).collect();
        for chunk in history.chunks(1_000) {
            let batch = batch_of(chunk, log.log_end_offset(), 0).unwrap();
            log.append(&[batch]).await.unwrap();
        }
        log.flush(Durability::Sync).await.unwrap();
    }
    let (before, replayed) = median_open(dir.path()).await;
    println!("{total} records of history, not rewritten: start-up {before:.3?} (replays {replayed} records)");
    let (mut durable, _) = DurableCoordinator::open(
        storage(dir.path()).await,
        CoordinatorConfig::default(),
        CoordinatorEpoch(9),
    )
    .await
    .unwrap();
    let started = Instant::now();
    assert!(durable.snapshot_if_due(0).await.unwrap());
    let rewrite = started.elapsed();
    drop(durable);
    let (after, replayed) = median_open(dir.path()).await;
    println!("{total} records of history, rewritten ({rewrite:.3?}): start-up {after:.3?} (replays {replayed} records)");
}
