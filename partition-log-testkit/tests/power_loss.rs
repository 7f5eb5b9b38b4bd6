//! Producer state after a real power loss equals a replay of the surviving log.
//!
//! A log on storage-fs runs on the power-loss simulator (`storage_fs::sim`) with seeded traffic: idempotent and
//! transactional batches from three producers, commit and abort markers, rolls (snapshots) and syncs. The power
//! fails at a random file-system write; the rebooted file system keeps synced data and a random, possibly torn
//! part of the rest. The log reopened on it must hold everything synced, and its producer state, open
//! transactions, aborted-transaction index and LSO must equal those of a fresh log that replays its surviving
//! batches from scratch (no snapshot), one batch per append as the live log appended them (Kafka computes an
//! aborted entry's LSO per append), with LSO ≤ high watermark ≤ log end.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::sync::Arc;

use partition_log::{LogConfig, PartitionLog};
use partition_log_testkit::{config, coordinate, data, marker, produce};
use producer_state::BarrierScope;
use storage::{Durability, MemoryStorage, PartitionId, Storage};
use storage_fs::sim::{SimFs, SimRng};
use storage_fs::{FsConfig, FsStorage};

const STEPS: usize = 80;

fn id() -> PartitionId {
    PartitionId::new("power", 0).unwrap()
}

fn store(fs: &SimFs) -> Result<Box<dyn Storage>, storage::StorageError> {
    Ok(Box::new(FsStorage::open_on(
        FsConfig::new("/data"),
        Arc::new(fs.clone()),
    )?))
}

fn log_config() -> LogConfig {
    config(BarrierScope::Writer)
}

/// Runs the seeded traffic until it ends or the power fails; returns the offset a sync last acknowledged.
async fn traffic(fs: &SimFs, seed: u64) -> i64 {
    let mut rng = SimRng::new(seed);
    let Ok(store) = store(fs) else { return 0 };
    let Ok(storage) = store.create(&id()).await else {
        return 0;
    };
    let Ok((mut log, _)) = PartitionLog::open(storage, log_config(), 0).await else {
        return 0;
    };
    let mut sequences = [0i32; 3];
    let mut in_transaction = [false; 3];
    let mut synced = 0;
    for _ in 0..STEPS {
        let producer = rng.below(3) as usize;
        let pid = producer as i64 + 1;
        let result = match rng.below(10) {
            0..=5 => {
                let records = 1 + rng.below(3) as usize;
                // Producer 1 is idempotent only; the others run transactions.
                let transactional = producer != 0;
                let batch = data(pid, 0, sequences[producer], records, transactional);
                let result = produce(&mut log, batch).await;
                if result.is_ok() {
                    sequences[producer] += records as i32;
                    in_transaction[producer] |= transactional;
                }
                result.map(|_| ())
            }
            6..=7 if in_transaction[producer] => {
                let result = coordinate(&mut log, marker(rng.below(2) == 0, pid, 0, 0)).await;
                if result.is_ok() {
                    in_transaction[producer] = false;
                }
                result.map(|_| ())
            }
            8 => log.roll().await,
            _ => {
                let result = log.flush(Durability::Sync).await;
                if result.is_ok() {
                    synced = log.log_end_offset();
                    let end = log.log_end_offset();
                    log.advance_high_watermark(end);
                }
                result
            }
        };
        if result.is_err() {
            break;
        }
    }
    synced
}

/// Reopens the rebooted file system and compares its log with a replay from scratch.
async fn check(fs: &SimFs, synced: i64, case: &str) {
    let store = store(fs).unwrap_or_else(|e| panic!("{case}: opening the store: {e}"));
    let storage = match store.open(&id()).await {
        Ok(storage) => storage,
        Err(storage::StorageError::NotFound(_)) if synced == 0 => return,
        Err(e) => panic!("{case}: reopening: {e}"),
    };
    let (log, _) = PartitionLog::open(storage, log_config(), 0)
        .await
        .unwrap_or_else(|e| panic!("{case}: recovery failed: {e}"));
    assert!(log.log_end_offset() >= synced, "{case}: synced data lost");
    assert!(
        log.last_stable_offset() <= log.high_watermark(),
        "{case}: LSO above the high watermark"
    );
    assert!(
        log.high_watermark() <= log.log_end_offset(),
        "{case}: high watermark above the log end"
    );
    let mut batches = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let read = log.read_for_replica(offset, usize::MAX).await.unwrap();
        let Some(last) = read.last() else {
            panic!("{case}: nothing readable at {offset} below the log end");
        };
        offset = last.next_offset();
        batches.extend(read);
    }
    let memory = MemoryStorage::new();
    let (mut replay, _) = PartitionLog::open(memory.create(&id()).await.unwrap(), log_config(), 0)
        .await
        .unwrap();
    if log.log_start_offset() > 0 {
        replay
            .truncate_fully_and_start_at(log.log_start_offset())
            .await
            .unwrap();
    }
    // One batch per append, as the live log appended them (an aborted entry's LSO is computed per append).
    for batch in batches {
        replay.append_as_follower(vec![batch]).await.unwrap();
    }
    replay.advance_high_watermark(log.high_watermark());
    assert_eq!(
        log.summary().await.unwrap(),
        replay.summary().await.unwrap(),
        "{case}: recovered producer state differs from a replay of the surviving log"
    );
}

#[tokio::test]
async fn producer_state_after_power_loss_equals_a_replay_of_the_surviving_log() {
    let mut points = 0;
    for seed in 0..12 {
        let clean = SimFs::new();
        traffic(&clean, seed).await;
        let writes = clean.stats().mutations;
        let mut pick = SimRng::new(seed ^ 0xfeed);
        for _ in 0..25 {
            let at = 1 + pick.below(writes);
            let fs = SimFs::new();
            fs.power_fails_at(at);
            let synced = traffic(&fs, seed).await;
            let rebooted = fs.crash(&mut SimRng::new(seed * 100_003 + at));
            check(
                &rebooted,
                synced,
                &format!("seed {seed}, power failed at write {at}"),
            )
            .await;
            points += 1;
        }
    }
    eprintln!("producer state after power loss: {points} crash points");
}
