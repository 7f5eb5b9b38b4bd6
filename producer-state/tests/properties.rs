//! Property tests with shrinking:
//!
//! - random client appends (idempotent, several producers and epochs) agree with a small reference model of
//!   Kafka's rules — duplicate answers, sequence and epoch errors, the five-batch window;
//! - replay equality (invariant 1, ARCHITECTURE.md), for both barrier scopes: after random client, coordinator and
//!   replication appends, markers (TV0 and TV2) and barriers, the state rebuilt from a snapshot taken at a random
//!   point plus a REPLICATION replay of the rest equals the live state; a follower fed every batch by replication
//!   equals its leader after every step.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::collections::{BTreeMap, VecDeque};

use producer_state::plan::AppendDecision;
use producer_state::{
    AbortedTxn, AppendOrigin, BarrierScope, MemorySnapshotStore, ProducerStateManager, PsmConfig,
    StateSummary, TransactionVersion,
};
use proptest::prelude::*;
use record_format::{
    end_txn_marker_batch, mirror_pid_reset_batch, BatchBuilder, ControlBatchPlacement, MirrorPidResetRecord,
    RecordBatch,
};

// ---------------------------------------------------------------------------------------------------------------
// Reference model of client-origin idempotent appends.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Appended,
    Duplicate { first_offset: i64, last_offset: i64 },
    OutOfOrder,
    InvalidEpoch,
}

#[derive(Debug, Clone, Default)]
struct ModelProducer {
    epoch: i16,
    /// (first_seq, last_seq, first_offset, last_offset), at most five, oldest first.
    batches: VecDeque<(i32, i32, i64, i64)>,
}

#[derive(Debug, Default)]
struct Model {
    producers: BTreeMap<i64, ModelProducer>,
}

impl Model {
    fn append(&mut self, pid: i64, epoch: i16, first_seq: i32, count: i32, offset: i64) -> Outcome {
        let batch = (
            first_seq,
            first_seq + count - 1,
            offset,
            offset + i64::from(count) - 1,
        );
        let Some(producer) = self.producers.get_mut(&pid) else {
            self.producers.insert(
                pid,
                ModelProducer {
                    epoch,
                    batches: VecDeque::from([batch]),
                },
            );
            return Outcome::Appended;
        };
        if epoch == producer.epoch {
            if let Some(&(_, _, first_offset, last_offset)) =
                producer.batches.iter().find(|b| (b.0, b.1) == (batch.0, batch.1))
            {
                return Outcome::Duplicate {
                    first_offset,
                    last_offset,
                };
            }
        }
        if epoch < producer.epoch {
            return Outcome::InvalidEpoch;
        }
        if epoch > producer.epoch {
            if first_seq != 0 {
                return Outcome::OutOfOrder;
            }
            producer.epoch = epoch;
            producer.batches = VecDeque::from([batch]);
            return Outcome::Appended;
        }
        let last_seq = producer.batches.back().map_or(-1, |b| b.1);
        if first_seq != last_seq + 1 {
            return Outcome::OutOfOrder;
        }
        if producer.batches.len() == 5 {
            producer.batches.pop_front();
        }
        producer.batches.push_back(batch);
        Outcome::Appended
    }
}

fn data_batch(pid: i64, epoch: i16, seq: i32, count: i32, offset: i64, txn: bool, ts: i64) -> RecordBatch {
    let mut builder = BatchBuilder::new()
        .base_offset(offset)
        .producer(pid, epoch, seq)
        .transactional(txn);
    for _ in 0..count {
        builder.add(ts, None, Some(b"v"), &[]);
    }
    builder.build().unwrap()
}

fn real_append(psm: &mut ProducerStateManager, batch: &RecordBatch) -> Outcome {
    match psm.plan_append([batch], AppendOrigin::Client, TransactionVersion::Unknown) {
        Ok(AppendDecision::Duplicate(d)) => Outcome::Duplicate {
            first_offset: d.first_offset(),
            last_offset: d.last_offset,
        },
        Ok(AppendDecision::Append(plan)) => {
            psm.commit(plan);
            Outcome::Appended
        }
        Err(error) => match error.kafka_error().name() {
            "OUT_OF_ORDER_SEQUENCE_NUMBER" => Outcome::OutOfOrder,
            "INVALID_PRODUCER_EPOCH" => Outcome::InvalidEpoch,
            other => panic!("unexpected {other}"),
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn client_appends_agree_with_the_reference_model(
        ops in prop::collection::vec((1i64..=3, 0i16..=2, 0i32..8, 1i32..=3), 1..60)
    ) {
        let mut psm = ProducerStateManager::new(PsmConfig::default());
        let mut model = Model::default();
        let mut offset = 0i64;
        for (pid, epoch, seq, count) in ops {
            let batch = data_batch(pid, epoch, seq, count, offset, false, 0);
            let expected = model.append(pid, epoch, seq, count, offset);
            let actual = real_append(&mut psm, &batch);
            prop_assert_eq!(actual, expected, "pid {} epoch {} seq {} count {}", pid, epoch, seq, count);
            if actual == Outcome::Appended {
                offset += i64::from(count);
            }
            for (pid, producer) in &model.producers {
                let entry = psm.producer(*pid).unwrap();
                prop_assert_eq!(entry.producer_epoch, producer.epoch);
                let window: Vec<(i32, i32, i64, i64)> = entry
                    .batches
                    .iter()
                    .map(|b| (b.first_seq(), b.last_seq, b.first_offset(), b.last_offset))
                    .collect();
                prop_assert_eq!(window, producer.batches.iter().copied().collect::<Vec<_>>());
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Replay equality.

#[derive(Debug, Clone)]
enum Op {
    /// A data batch of producer `pid`: next sequence, optionally with a bumped epoch, by a given origin.
    Data {
        pid: i64,
        bump: bool,
        txn: bool,
        count: i32,
        origin: u8,
    },
    /// An end marker for `pid`, with TV0 (same epoch) or TV2 (bumped epoch).
    Marker { pid: i64, commit: bool, tv2: bool },
    /// A barrier written by nobody (untagged), by this cluster, or by another one.
    Barrier { writer: u8 },
    /// Take a snapshot here (the recovery point of the property).
    Snapshot,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1i64..=3, prop::bool::weighted(0.1), any::<bool>(), 1i32..=3, 0u8..3)
            .prop_map(|(pid, bump, txn, count, origin)| Op::Data { pid, bump, txn, count, origin }),
        2 => (1i64..=3, any::<bool>(), any::<bool>()).prop_map(|(pid, commit, tv2)| Op::Marker { pid, commit, tv2 }),
        1 => (0u8..3).prop_map(|writer| Op::Barrier { writer }),
        1 => Just(Op::Snapshot),
    ]
}

const LOCAL: &str = "B";

struct Harness {
    leader: ProducerStateManager,
    follower: ProducerStateManager,
    log: Vec<RecordBatch>,
    aborted: Vec<AbortedTxn>,
    store: MemorySnapshotStore,
    snapshot_offset: Option<i64>,
}

impl Harness {
    fn new(config: &PsmConfig) -> Self {
        Harness {
            leader: ProducerStateManager::new(config.clone()),
            follower: ProducerStateManager::new(config.clone()),
            log: Vec::new(),
            aborted: Vec::new(),
            store: MemorySnapshotStore::new(),
            snapshot_offset: None,
        }
    }

    fn next_offset(&self) -> i64 {
        self.log.last().map_or(0, RecordBatch::next_offset)
    }

    /// Appends on the leader; if accepted, logs it and replicates it to the follower.
    fn append(&mut self, batch: RecordBatch, origin: AppendOrigin, tv: TransactionVersion) {
        let Ok(AppendDecision::Append(plan)) = self.leader.plan_append([&batch], origin, tv) else {
            return;
        };
        let effects = self.leader.commit(plan);
        self.aborted.extend(effects.aborted_index);
        let applied = self
            .follower
            .append_batches([&batch], AppendOrigin::Replication, TransactionVersion::Unknown)
            .expect("a follower accepts what its leader accepted");
        assert!(
            matches!(applied, producer_state::Applied::Appended(_)),
            "replication never answers a duplicate"
        );
        self.log.push(batch);
    }

    fn apply(&mut self, op: &Op, time: i64) {
        let offset = self.next_offset();
        match *op {
            Op::Data {
                pid,
                bump,
                txn,
                count,
                origin,
            } => {
                let entry = self.leader.producer(pid);
                let epoch = entry.map_or(0, |e| e.producer_epoch.max(0)) + i16::from(bump);
                let seq = match entry {
                    Some(e) if !bump && e.producer_epoch == epoch && e.last_seq() >= 0 => e.last_seq() + 1,
                    _ => 0,
                };
                let origin = [
                    AppendOrigin::Client,
                    AppendOrigin::Coordinator,
                    AppendOrigin::Replication,
                ][usize::from(origin)];
                let seq = if origin == AppendOrigin::Coordinator {
                    -1
                } else {
                    seq
                };
                self.append(
                    data_batch(pid, epoch, seq, count, offset, txn, time),
                    origin,
                    TransactionVersion::Unknown,
                );
            }
            Op::Marker { pid, commit, tv2 } => {
                let Some(entry) = self.leader.producer(pid) else {
                    return;
                };
                let epoch = entry.producer_epoch.max(0) + i16::from(tv2);
                let tv = if tv2 {
                    TransactionVersion::V2
                } else {
                    TransactionVersion::V0
                };
                let placement = ControlBatchPlacement {
                    base_offset: offset,
                    partition_leader_epoch: 0,
                    timestamp: time,
                };
                let batch = end_txn_marker_batch(commit, pid, epoch, 0, placement).unwrap();
                self.append(batch, AppendOrigin::Coordinator, tv);
            }
            Op::Barrier { writer } => {
                let writer =
                    [None, Some(LOCAL.to_owned()), Some("A".to_owned())][usize::from(writer)].clone();
                let placement = ControlBatchPlacement {
                    base_offset: offset,
                    partition_leader_epoch: 0,
                    timestamp: time,
                };
                let batch =
                    mirror_pid_reset_batch(&MirrorPidResetRecord::new("A", writer), placement).unwrap();
                self.append(batch, AppendOrigin::Replication, TransactionVersion::Unknown);
            }
            Op::Snapshot => {
                if self.snapshot_offset.is_none() {
                    self.snapshot_offset = self.leader.take_snapshot(&mut self.store);
                }
            }
        }
    }
}

/// What must agree: per-producer summary and last timestamp, open transactions, first unstable offset and LSO
/// (with the high watermark at the log end), the map end offset.
fn comparable(psm: &ProducerStateManager, aborted: &[AbortedTxn]) -> (StateSummary, Vec<(i64, i64)>) {
    let mut psm = psm.clone();
    let end = psm.map_end_offset();
    psm.on_high_watermark_updated(end);
    let timestamps = psm
        .producers()
        .map(|e| (e.producer_id, e.last_timestamp))
        .collect::<BTreeMap<_, _>>();
    (
        StateSummary::of(&psm, aborted, end),
        timestamps.into_iter().collect(),
    )
}

fn check_replay_equality(scope: BarrierScope, ops: &[Op]) -> Result<(), TestCaseError> {
    let config = PsmConfig {
        cluster_id: Some(LOCAL.to_owned()),
        barrier_scope: scope,
        ..PsmConfig::default()
    };
    let mut harness = Harness::new(&config);
    for (time, op) in ops.iter().enumerate() {
        harness.apply(op, time as i64 * 1000);
        prop_assert_eq!(
            comparable(&harness.follower, &[]),
            comparable(&harness.leader, &[]),
            "follower diverged after {:?}",
            op
        );
    }
    // Recovery: the latest snapshot (or none: from the log start), then REPLICATION replay of the rest.
    let start = harness.snapshot_offset.unwrap_or(0);
    let mut recovered = ProducerStateManager::new(config);
    let mut store = harness.store.clone();
    recovered.truncate_and_reload(&mut store, 0, start, 0);
    let rest: Vec<&RecordBatch> = harness.log.iter().filter(|b| b.base_offset() >= start).collect();
    let replayed =
        producer_state::replay(recovered, rest).expect("recovery replays what the leader accepted");
    let mut recovered = replayed.manager;
    let mut replayed_aborted: Vec<AbortedTxn> = harness
        .aborted
        .iter()
        .filter(|a| a.last_offset < start)
        .copied()
        .collect();
    replayed_aborted.extend(replayed.aborted);
    recovered.update_map_end_offset(harness.leader.map_end_offset());
    prop_assert_eq!(
        replayed_aborted,
        harness.aborted.clone(),
        "aborted-transaction index"
    );
    prop_assert_eq!(comparable(&recovered, &[]), comparable(&harness.leader, &[]));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn replay_from_a_snapshot_equals_live_state_with_writer_scope(ops in prop::collection::vec(op(), 1..50)) {
        check_replay_equality(BarrierScope::Writer, &ops)?;
    }

    #[test]
    fn replay_from_a_snapshot_equals_live_state_with_everywhere_scope(ops in prop::collection::vec(op(), 1..50)) {
        check_replay_equality(BarrierScope::Everywhere, &ops)?;
    }
}
