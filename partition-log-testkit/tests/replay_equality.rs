//! Invariant 1 (replay equality) as a property test on real backends (memory, and fs in a temporary directory).
//!
//! Random sequences of client, coordinator and replication appends, barriers (both scopes and both writers),
//! truncations, retention, rolls and restarts (clean and crashes) run against a leader on the backend under test
//! that has one follower fed by replication after every step, and against a reference log on another store that
//! is never restarted. After every step: every operation had the same outcome on both, and the leader's producer
//! state, open transactions, aborted-transaction index, first unstable offset and LSO equal the reference's (so
//! after each restart the recovered state equals a log that never crashed); the follower equals its leader.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::path::Path;

use partition_log::{LogConfig, LogError, PartitionLog, ReplicaSet};
use partition_log_testkit::{barrier, config, data, marker, LOCAL_CLUSTER};
use producer_state::{AppendOrigin, BarrierScope, TransactionVersion};
use proptest::prelude::*;
use storage::{MemoryStorage, PartitionId, Storage};
use storage_fs::{FsConfig, FsStorage};

#[derive(Debug, Clone)]
enum Op {
    /// A client batch from local producer `producer` (continuing its sequence).
    Client {
        producer: i64,
        records: usize,
        transactional: bool,
    },
    /// A transaction marker for `producer`.
    Marker { producer: i64, commit: bool },
    /// A mirrored batch (REPLICATION origin) from a source producer.
    Mirror {
        producer: i64,
        records: usize,
        transactional: bool,
    },
    /// A barrier, written here or by a peer cluster.
    Barrier { written_here: bool },
    /// Truncate to the start of one of the last batches.
    Truncate { batches_back: usize },
    /// Move the log start into the log (never to its end).
    Retention { permille: u16 },
    /// Roll the logical segment (snapshot).
    Roll,
    /// Restart the leader: crash (drop) or clean close.
    Restart { clean: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..4i64, 1..4usize, any::<bool>()).prop_map(|(producer, records, transactional)| Op::Client {
            producer, records, transactional
        }),
        3 => (0..4i64, any::<bool>()).prop_map(|(producer, commit)| Op::Marker { producer, commit }),
        3 => (0..3i64, 1..4usize, any::<bool>()).prop_map(|(producer, records, transactional)| Op::Mirror {
            producer: producer + 2, records, transactional
        }),
        1 => any::<bool>().prop_map(|written_here| Op::Barrier { written_here }),
        1 => (0..4usize).prop_map(|batches_back| Op::Truncate { batches_back }),
        1 => (0..1000u16).prop_map(|permille| Op::Retention { permille }),
        1 => Just(Op::Roll),
        2 => any::<bool>().prop_map(|clean| Op::Restart { clean }),
    ]
}

/// Where the leader under test lives.
#[derive(Clone)]
enum Home {
    Memory(MemoryStorage),
    Fs(std::path::PathBuf),
}

impl Home {
    fn store(&self) -> Box<dyn Storage> {
        match self {
            Home::Memory(store) => Box::new(store.clone()),
            Home::Fs(dir) => Box::new(
                FsStorage::open(FsConfig {
                    segment_bytes: 2048,
                    index_interval_bytes: 256,
                    ..FsConfig::new(dir)
                })
                .unwrap(),
            ),
        }
    }
}

fn id(number: u32) -> PartitionId {
    PartitionId::new("replay", number).unwrap()
}

async fn create(store: &dyn Storage, number: u32, config: LogConfig) -> PartitionLog {
    PartitionLog::open(store.create(&id(number)).await.unwrap(), config, 0)
        .await
        .unwrap()
        .0
}

/// The outcome of an operation, comparable across logs: the offsets, or the kind of error.
fn outcome<T: std::fmt::Debug>(result: &Result<T, LogError>) -> String {
    match result {
        Ok(value) => format!("{value:?}"),
        Err(error) => error.to_string(),
    }
}

/// The batch an op appends, built from the reference log's producer state (valid sequences and epochs where
/// the state allows; whatever it refuses, it must refuse on both logs).
fn batch_for(reference: &PartitionLog, op: &Op) -> Option<(record_format::RecordBatch, AppendOrigin)> {
    let state = reference.producer_state();
    let next_sequence = |producer: i64| {
        state
            .producer(producer)
            .map_or(0, |entry| entry.last_seq().wrapping_add(1).max(0))
    };
    let epoch = |producer: i64| {
        state
            .producer(producer)
            .map_or(0, |entry| entry.producer_epoch.max(0))
    };
    match *op {
        Op::Client {
            producer,
            records,
            transactional,
        } => Some((
            data(
                producer,
                epoch(producer),
                next_sequence(producer),
                records,
                transactional,
            ),
            AppendOrigin::Client,
        )),
        Op::Marker { producer, commit } => Some((
            marker(commit, producer, epoch(producer), 0),
            AppendOrigin::Coordinator,
        )),
        Op::Mirror {
            producer,
            records,
            transactional,
        } => {
            let mut batch = data(
                producer,
                epoch(producer),
                next_sequence(producer),
                records,
                transactional,
            );
            batch.set_base_offset(reference.log_end_offset());
            Some((batch, AppendOrigin::Replication))
        }
        Op::Barrier { written_here } => {
            let writer = if written_here {
                LOCAL_CLUSTER
            } else {
                "peer-cluster"
            };
            Some((barrier("source-cluster", Some(writer)), AppendOrigin::Coordinator))
        }
        _ => None,
    }
}

async fn append(log: &mut PartitionLog, batch: record_format::RecordBatch, origin: AppendOrigin) -> String {
    let result = match origin {
        AppendOrigin::Replication => log.append_as_follower(vec![batch]).await,
        origin => {
            log.append_as_leader(vec![batch], origin, TransactionVersion::V0)
                .await
        }
    };
    outcome(&result)
}

/// Base offsets of the reference log's batches (for truncation points).
async fn batch_bases(log: &PartitionLog) -> Vec<i64> {
    let mut bases = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let batches = log.read_for_replica(offset, usize::MAX).await.unwrap();
        bases.extend(batches.iter().map(|batch| batch.base_offset()));
        offset = batches.last().unwrap().next_offset();
    }
    bases
}

async fn run(home: Home, scope: BarrierScope, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let config = config(scope);
    let reference_store = MemoryStorage::new();
    let mut reference = create(&reference_store, 0, config.clone()).await;
    let follower_store = MemoryStorage::new();
    let follower = create(&follower_store, 1, config.clone()).await;
    let leader = create(&*home.store(), 0, config.clone()).await;
    let mut replicas = ReplicaSet::new(leader, vec![follower]);

    for (step, op) in ops.iter().enumerate() {
        if let Some((batch, origin)) = batch_for(&reference, op) {
            let expected = append(&mut reference, batch.clone(), origin).await;
            let got = append(&mut replicas.leader, batch, origin).await;
            prop_assert_eq!(got, expected, "step {}: {:?}", step, op);
        } else {
            match *op {
                Op::Truncate { batches_back } => {
                    let bases = batch_bases(&reference).await;
                    if let Some(&offset) = bases.iter().rev().nth(batches_back) {
                        let expected = outcome(&reference.truncate_to(offset, 0).await);
                        let got = outcome(&replicas.leader.truncate_to(offset, 0).await);
                        prop_assert_eq!(got, expected, "step {}: {:?}", step, op);
                    }
                }
                Op::Retention { permille } => {
                    let (start, end) = (reference.log_start_offset(), reference.log_end_offset());
                    if end > start + 1 {
                        let offset = start + 1 + (end - start - 1) * i64::from(permille) / 1000;
                        let offset = offset.min(end - 1);
                        let expected = outcome(&reference.delete_records_before(offset).await);
                        let got = outcome(&replicas.leader.delete_records_before(offset).await);
                        prop_assert_eq!(got, expected, "step {}: {:?}", step, op);
                    }
                }
                Op::Roll => {
                    reference.roll().await.unwrap();
                    replicas.leader.roll().await.unwrap();
                }
                Op::Restart { clean } => {
                    let (leader, followers) = replicas.into_parts();
                    let partition = leader.id().clone();
                    if clean {
                        leader.close().await.unwrap();
                    } else {
                        drop(leader);
                    }
                    let storage = home.store().open(&partition).await.unwrap();
                    let (mut leader, _) = PartitionLog::open(storage, config.clone(), 0).await.unwrap();
                    // A restarted leader learns the high watermark again from its followers.
                    leader.advance_high_watermark(reference.high_watermark());
                    replicas = ReplicaSet::new(leader, followers);
                }
                _ => unreachable!("appends are handled above"),
            }
        }
        // A single-replica reference: its HW is its log end. The leader's HW moves by the follower's fetches.
        let end = reference.log_end_offset();
        reference.advance_high_watermark(end);
        replicas.replicate(0).await.unwrap();

        let expected = reference.summary().await.unwrap();
        let leader = replicas.leader.summary().await.unwrap();
        prop_assert_eq!(&leader, &expected, "leader after step {}: {:?}", step, op);
        prop_assert_eq!(
            replicas.leader.first_unstable_offset(),
            reference.first_unstable_offset(),
            "step {}",
            step
        );
        let follower = &replicas.followers[0];
        prop_assert_eq!(
            &follower.summary().await.unwrap(),
            &leader,
            "follower after step {}: {:?}",
            step,
            op
        );
        prop_assert_eq!(follower.log_end_offset(), replicas.leader.log_end_offset());
    }
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().unwrap()
}

fn scope() -> impl Strategy<Value = BarrierScope> {
    prop_oneof![Just(BarrierScope::Writer), Just(BarrierScope::Everywhere)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn memory_leader_recovers_to_the_never_crashed_state(
        scope in scope(),
        ops in prop::collection::vec(op(), 1..60),
    ) {
        runtime().block_on(run(Home::Memory(MemoryStorage::new()), scope, ops))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn fs_leader_recovers_to_the_never_crashed_state(
        scope in scope(),
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let dir = tempfile::tempdir().unwrap();
        runtime().block_on(run(Home::Fs(dir.path().to_owned()), scope, ops))?;
        keep(dir.path());
    }
}

/// Keeps the temporary directory alive until the case ends.
fn keep(_dir: &Path) {}
