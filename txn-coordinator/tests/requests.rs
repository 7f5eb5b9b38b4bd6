//! The coordinator's requests, state by state: Kafka's error codes (both KAFKA-16699 cases, fencing, concurrent
//! transitions), markers and completion, timeouts, expiration, epoch exhaustion, KIP-360 retries, recovery from
//! the records it asked to persist, and a property test under random requests and restarts.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::collections::{BTreeMap, BTreeSet};

use kafka_types::TransactionVersion;
use kafka_types::{KafkaError, ProducerEpoch, ProducerId, TransactionalId};
use proptest::prelude::*;
use storage::PartitionId;
use txn_coordinator::{
    offsets_partition_for, Coordinator, CoordinatorConfig, MarkerRequest, Outcome, ProducerIdManager,
    TxnState, Write,
};

const TIMEOUT_MS: i64 = 60_000;

fn tid(name: &str) -> TransactionalId {
    TransactionalId(name.to_owned())
}

fn partition(number: u32) -> PartitionId {
    PartitionId::new("orders", number).unwrap()
}

/// A coordinator and every record it asked to persist (its durable log, for restarts).
struct Harness {
    coordinator: Coordinator,
    log: Vec<Write>,
}

impl Harness {
    fn idempotent(&mut self) -> (ProducerId, ProducerEpoch) {
        let outcome = self.coordinator.init_producer_id(None, 0, None, 0);
        self.keep(outcome).0.unwrap()
    }

    fn new() -> Self {
        Harness {
            coordinator: Coordinator::new(
                CoordinatorConfig::default(),
                ProducerIdManager::recover(None),
                kafka_types::CoordinatorEpoch(3),
            ),
            log: Vec::new(),
        }
    }

    fn keep<T>(&mut self, outcome: Outcome<T>) -> (Result<T, KafkaError>, Vec<MarkerRequest>) {
        self.log.extend(outcome.writes);
        (outcome.answer, outcome.markers)
    }

    fn init(&mut self, id: &str, now: i64) -> Result<(ProducerId, ProducerEpoch), KafkaError> {
        let outcome = self
            .coordinator
            .init_producer_id(Some(&tid(id)), TIMEOUT_MS, None, now);
        self.keep(outcome).0
    }

    fn add(
        &mut self,
        id: &str,
        producer: (ProducerId, ProducerEpoch),
        partitions: &[u32],
        now: i64,
    ) -> Result<(), KafkaError> {
        let partitions: Vec<PartitionId> = partitions.iter().map(|&n| partition(n)).collect();
        let outcome = self
            .coordinator
            .add_partitions(&tid(id), producer.0, producer.1, &partitions, now);
        self.keep(outcome).0
    }

    fn end(
        &mut self,
        id: &str,
        producer: (ProducerId, ProducerEpoch),
        commit: bool,
        now: i64,
    ) -> (Result<(), KafkaError>, Vec<MarkerRequest>) {
        let outcome = self.coordinator.end_txn(
            &tid(id),
            producer.0,
            producer.1,
            commit,
            TransactionVersion::V1,
            now,
        );
        let (answer, markers) = self.keep(outcome);
        (answer.map(|_| ()), markers)
    }

    fn ack(&mut self, markers: &[MarkerRequest], now: i64) {
        for marker in markers {
            let outcome = self
                .coordinator
                .marker_written(&marker.transactional_id, &marker.partition, now);
            self.keep(outcome).0.unwrap();
        }
    }

    fn state(&self, id: &str) -> TxnState {
        self.coordinator.transaction(&tid(id)).unwrap().state
    }

    /// A restart: a new coordinator from the persisted records; returns the markers it re-sends.
    fn restart(&mut self) -> Vec<MarkerRequest> {
        let (coordinator, markers) = Coordinator::recover(
            CoordinatorConfig::default(),
            ProducerIdManager::recover(None),
            kafka_types::CoordinatorEpoch(4),
            self.log.clone(),
        );
        self.coordinator = coordinator;
        markers
    }
}

#[test]
fn idempotent_producers_get_fresh_ids_at_epoch_0() {
    let mut h = Harness::new();
    let first = h.idempotent();
    let second = h.idempotent();
    assert_ne!(first.0, second.0);
    assert_eq!((first.1, second.1), (ProducerEpoch(0), ProducerEpoch(0)));
    assert!(
        matches!(h.log.first(), Some(Write::ReserveProducerIds(_))),
        "a block is reserved before use"
    );
}

#[test]
fn a_new_transactional_id_gets_epoch_0_and_each_init_bumps_it() {
    let mut h = Harness::new();
    let (pid, epoch) = h.init("app", 0).unwrap();
    assert_eq!(epoch, ProducerEpoch(0));
    assert_eq!(h.init("app", 1).unwrap(), (pid, ProducerEpoch(1)));
    assert_eq!(h.state("app"), TxnState::Empty);
}

#[test]
fn invalid_requests_and_timeouts_are_refused() {
    let mut h = Harness::new();
    let empty = h
        .coordinator
        .init_producer_id(Some(&tid("")), TIMEOUT_MS, None, 0);
    assert_eq!(empty.answer, Err(KafkaError::InvalidRequest));
    for timeout in [0, 900_001] {
        let outcome = h
            .coordinator
            .init_producer_id(Some(&tid("app")), timeout, None, 0);
        assert_eq!(
            outcome.answer,
            Err(KafkaError::InvalidTransactionTimeout),
            "{timeout}"
        );
    }
}

#[test]
fn kafka_16699_an_expired_transactional_id_answers_invalid_producer_id_mapping() {
    let mut h = Harness::new();
    let producer = h.init("app", 0).unwrap();
    let expiration = CoordinatorConfig::default().transactional_id_expiration_ms;
    let expired = h.coordinator.expire_transactional_ids(expiration);
    assert_eq!(expired.writes, vec![Write::Tombstone(tid("app"))]);
    h.keep(expired).0.unwrap();
    assert_eq!(
        h.add("app", producer, &[0], expiration + 1),
        Err(KafkaError::InvalidProducerIdMapping)
    );
    let (answer, _) = h.end("app", producer, true, expiration + 1);
    assert_eq!(answer, Err(KafkaError::InvalidProducerIdMapping));
    // Treated like PRODUCER_FENCED: the application re-initialises and carries on with a new producer id.
    let again = h.init("app", expiration + 2).unwrap();
    assert_ne!(again.0, producer.0);
    assert_eq!(again.1, ProducerEpoch(0));
}

#[test]
fn kafka_16699_another_producer_id_answers_invalid_producer_id_mapping() {
    let mut h = Harness::new();
    let (pid, epoch) = h.init("app", 0).unwrap();
    let other = ProducerId(pid.get() + 100);
    assert_eq!(
        h.add("app", (other, epoch), &[0], 1),
        Err(KafkaError::InvalidProducerIdMapping)
    );
    assert_eq!(
        h.add("app", (pid, ProducerEpoch(7)), &[0], 1),
        Err(KafkaError::ProducerFenced)
    );
}

#[test]
fn an_idle_id_with_an_open_transaction_does_not_expire() {
    let mut h = Harness::new();
    let producer = h.init("app", 0).unwrap();
    h.add("app", producer, &[0], 0).unwrap();
    let outcome = h.coordinator.expire_transactional_ids(i64::MAX / 2);
    assert!(outcome.writes.is_empty());
}

#[test]
fn commit_writes_one_marker_per_partition_and_completes_when_all_are_acknowledged() {
    let mut h = Harness::new();
    let producer = h.init("app", 0).unwrap();
    h.add("app", producer, &[0, 1], 10).unwrap();
    h.add("app", producer, &[1, 2], 11).unwrap();
    let offsets = h
        .coordinator
        .add_offsets(&tid("app"), producer.0, producer.1, "group", 12);
    let offsets = h.keep(offsets);
    assert_eq!(offsets.0, Ok(()));
    let (answer, markers) = h.end("app", producer, true, 20);
    assert_eq!(answer, Ok(()));
    let partitions: BTreeSet<PartitionId> = markers.iter().map(|m| m.partition.clone()).collect();
    let mut expected: BTreeSet<PartitionId> = (0..3).map(partition).collect();
    expected.insert(PartitionId::new("__consumer_offsets", 47).unwrap());
    assert_eq!(partitions, expected);
    assert!(markers.iter().all(|m| m.commit
        && m.producer_id == producer.0
        && m.epoch == producer.1
        && m.coordinator_epoch.get() == 3));
    assert_eq!(h.state("app"), TxnState::PrepareCommit);
    assert_eq!(
        h.end("app", producer, true, 21).0,
        Err(KafkaError::ConcurrentTransactions)
    );
    assert_eq!(
        h.end("app", producer, false, 21).0,
        Err(KafkaError::InvalidTxnState)
    );
    assert_eq!(
        h.add("app", producer, &[5], 21),
        Err(KafkaError::ConcurrentTransactions)
    );
    h.ack(&markers[..markers.len() - 1], 22);
    assert_eq!(
        h.state("app"),
        TxnState::PrepareCommit,
        "one marker still pending"
    );
    h.ack(&markers[markers.len() - 1..], 23);
    assert_eq!(h.state("app"), TxnState::CompleteCommit);
    assert!(h
        .coordinator
        .transaction(&tid("app"))
        .unwrap()
        .partitions
        .is_empty());
    assert_eq!(
        h.end("app", producer, true, 24).0,
        Ok(()),
        "a retried commit succeeds"
    );
    assert_eq!(
        h.end("app", producer, false, 24).0,
        Err(KafkaError::InvalidTxnState)
    );
    // The next transaction starts from CompleteCommit.
    h.add("app", producer, &[3], 30).unwrap();
    assert_eq!(h.state("app"), TxnState::Ongoing);
}

#[test]
fn end_txn_without_an_open_transaction_is_invalid_txn_state() {
    let mut h = Harness::new();
    let producer = h.init("app", 0).unwrap();
    assert_eq!(
        h.end("app", producer, true, 1).0,
        Err(KafkaError::InvalidTxnState)
    );
}

#[test]
fn a_new_instance_fences_the_zombie_and_aborts_its_transaction() {
    let mut h = Harness::new();
    let zombie = h.init("app", 0).unwrap();
    h.add("app", zombie, &[0, 1], 1).unwrap();
    // The new instance: its first attempt aborts the open transaction under a bumped epoch.
    let outcome = h
        .coordinator
        .init_producer_id(Some(&tid("app")), TIMEOUT_MS, None, 2);
    let (answer, markers) = h.keep(outcome);
    assert_eq!(answer, Err(KafkaError::ConcurrentTransactions));
    assert_eq!(markers.len(), 2);
    assert!(markers.iter().all(|m| !m.commit && m.epoch == ProducerEpoch(1)));
    assert_eq!(h.state("app"), TxnState::PrepareAbort);
    // The zombie is fenced from here on.
    assert_eq!(h.add("app", zombie, &[2], 3), Err(KafkaError::ProducerFenced));
    assert_eq!(h.end("app", zombie, true, 3).0, Err(KafkaError::ProducerFenced));
    // Until the abort completes, the new instance is told to retry.
    assert_eq!(h.init("app", 3), Err(KafkaError::ConcurrentTransactions));
    h.ack(&markers, 4);
    assert_eq!(h.state("app"), TxnState::CompleteAbort);
    assert_eq!(h.init("app", 5).unwrap(), (zombie.0, ProducerEpoch(2)));
}

#[test]
fn a_timed_out_transaction_is_aborted_and_its_idle_producer_fenced() {
    let mut h = Harness::new();
    let producer = h.init("app", 0).unwrap();
    h.add("app", producer, &[0], 1_000).unwrap();
    assert!(
        h.coordinator
            .abort_timed_out(1_000 + TIMEOUT_MS)
            .markers
            .is_empty(),
        "not yet"
    );
    let outcome = h.coordinator.abort_timed_out(1_001 + TIMEOUT_MS);
    let (_, markers) = h.keep(outcome);
    assert_eq!(markers.len(), 1);
    assert!(!markers[0].commit);
    assert_eq!(markers[0].epoch, ProducerEpoch(1));
    h.ack(&markers, 1_002 + TIMEOUT_MS);
    assert_eq!(h.state("app"), TxnState::CompleteAbort);
    // The producer wakes up and carries on with its old epoch: fenced.
    assert_eq!(
        h.add("app", producer, &[0], 2_000 + TIMEOUT_MS),
        Err(KafkaError::ProducerFenced)
    );
}

#[test]
fn an_exhausted_epoch_rotates_to_a_new_producer_id() {
    let mut h = Harness::new();
    let (first_pid, _) = h.init("app", 0).unwrap();
    let mut last = (first_pid, ProducerEpoch(0));
    while last.1.get() < i16::MAX - 1 {
        last = h.init("app", 1).unwrap();
    }
    assert_eq!(last, (first_pid, ProducerEpoch(i16::MAX - 1)));
    let rotated = h.init("app", 2).unwrap();
    assert_ne!(rotated.0, first_pid);
    assert_eq!(rotated.1, ProducerEpoch(0));
    assert_eq!(
        h.coordinator.transaction(&tid("app")).unwrap().last_producer_id,
        Some(first_pid)
    );
}

#[test]
fn kip_360_a_retried_bump_gets_the_same_epoch_and_a_stranger_is_fenced() {
    let mut h = Harness::new();
    let first = h.init("app", 0).unwrap();
    let bump = |h: &mut Harness, expected| {
        let outcome = h
            .coordinator
            .init_producer_id(Some(&tid("app")), TIMEOUT_MS, Some(expected), 1);
        h.keep(outcome).0
    };
    let bumped = bump(&mut h, first).unwrap();
    assert_eq!(bumped, (first.0, ProducerEpoch(1)));
    // The answer was lost; the client retries with what it held.
    assert_eq!(
        bump(&mut h, first).unwrap(),
        bumped,
        "the same epoch again, not a second bump"
    );
    assert_eq!(
        bump(&mut h, (ProducerId(first.0.get() + 9), first.1)),
        Err(KafkaError::ProducerFenced)
    );
    assert_eq!(
        bump(&mut h, (first.0, ProducerEpoch(40))),
        Err(KafkaError::ProducerFenced)
    );
}

#[test]
fn a_restarted_coordinator_resends_the_markers_of_prepared_transactions_and_issues_fresh_ids() {
    let mut h = Harness::new();
    let producer = h.init("app", 0).unwrap();
    h.add("app", producer, &[0, 1, 2], 1).unwrap();
    let (_, markers) = h.end("app", producer, true, 2);
    h.ack(&markers[..1], 3);
    // Crash between Prepare and Complete.
    let resent = h.restart();
    assert_eq!(h.state("app"), TxnState::PrepareCommit);
    let resent_partitions: BTreeSet<PartitionId> = resent.iter().map(|m| m.partition.clone()).collect();
    let all: BTreeSet<PartitionId> = (0..3).map(partition).collect();
    assert_eq!(
        resent_partitions, all,
        "every partition's marker goes out again (a second marker is harmless)"
    );
    assert!(resent.iter().all(|m| m.coordinator_epoch.get() == 4));
    h.ack(&resent, 4);
    assert_eq!(h.state("app"), TxnState::CompleteCommit);
    let fresh = h.idempotent();
    assert!(
        fresh.0.get() > producer.0.get(),
        "ids continue above the reserved block"
    );
}

#[test]
fn group_offsets_partitions_follow_kafkas_hash() {
    assert_eq!(
        offsets_partition_for("group"),
        PartitionId::new("__consumer_offsets", 47).ok()
    );
    assert_eq!(
        offsets_partition_for("my-app"),
        PartitionId::new("__consumer_offsets", 0).ok()
    );
}

#[derive(Debug, Clone)]
enum Op {
    Idempotent,
    Init(u8),
    Add(u8, u8),
    /// EndTxn: transactional id, commit, transaction version 2.
    End(u8, bool, bool),
    AckAll,
    Timeout,
    Expire,
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Idempotent),
        3 => (0..3u8).prop_map(Op::Init),
        4 => (0..3u8, 0..4u8).prop_map(|(id, p)| Op::Add(id, p)),
        3 => (0..3u8, any::<bool>(), any::<bool>()).prop_map(|(id, commit, v2)| Op::End(id, commit, v2)),
        2 => Just(Op::AckAll),
        1 => Just(Op::Timeout),
        1 => Just(Op::Expire),
        1 => Just(Op::Restart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Under random requests with restarts: no producer id is issued to two transactional ids (or twice), an
    /// epoch never goes backwards for a transactional id while its producer id stays, and every transaction that
    /// prepared ends with a marker for each of its partitions.
    #[test]
    fn ids_unique_epochs_monotonic_markers_complete(ops in proptest::collection::vec(op(), 1..60)) {
        let mut h = Harness::new();
        let mut now = 0i64;
        let mut holders: BTreeMap<ProducerId, String> = BTreeMap::new();
        let mut epochs: BTreeMap<String, (ProducerId, ProducerEpoch)> = BTreeMap::new();
        let mut producers: BTreeMap<String, (ProducerId, ProducerEpoch)> = BTreeMap::new();
        let mut outstanding: Vec<MarkerRequest> = Vec::new();
        for op in &ops {
            now += 1_000;
            match op {
                Op::Idempotent => {
                    let (pid, _) = h.idempotent();
                    prop_assert!(!holders.contains_key(&pid), "idempotent producer id {} was issued before", pid);
                    holders.insert(pid, format!("idempotent@{now}"));
                }
                Op::Init(id) => {
                    let name = format!("t{id}");
                    let outcome = h.coordinator.init_producer_id(Some(&tid(&name)), TIMEOUT_MS, None, now);
                    let (answer, markers) = h.keep(outcome);
                    // A fence aborts the open transaction: its markers go out too.
                    outstanding.extend(markers);
                    if let Ok(producer) = answer {
                        let holder = holders.entry(producer.0).or_insert_with(|| name.clone());
                        prop_assert_eq!(holder.as_str(), name.as_str(), "producer id {} issued twice", producer.0);
                        producers.insert(name, producer);
                    }
                }
                Op::Add(id, p) => {
                    let name = format!("t{id}");
                    if let Some(&producer) = producers.get(&name) {
                        let _ = h.add(&name, producer, &[u32::from(*p)], now);
                    }
                }
                Op::End(id, commit, v2) => {
                    let name = format!("t{id}");
                    if let Some(&producer) = producers.get(&name) {
                        let version = if *v2 { TransactionVersion::V2 } else { TransactionVersion::V1 };
                        let outcome = h.coordinator.end_txn(&tid(&name), producer.0, producer.1, *commit, version, now);
                        let (answer, markers) = h.keep(outcome);
                        outstanding.extend(markers);
                        // Version 2 hands back the producer to continue with (a new id after a rotation).
                        if let Ok(next) = answer {
                            let holder = holders.entry(next.0).or_insert_with(|| name.clone());
                            prop_assert_eq!(holder.as_str(), name.as_str(), "producer id {} issued twice", next.0);
                            producers.insert(name, next);
                        }
                    }
                }
                Op::AckAll => {
                    let markers = std::mem::take(&mut outstanding);
                    h.ack(&markers, now);
                }
                Op::Timeout => {
                    now += TIMEOUT_MS;
                    let outcome = h.coordinator.abort_timed_out(now);
                    outstanding.extend(h.keep(outcome).1);
                }
                Op::Expire => {
                    now += CoordinatorConfig::default().transactional_id_expiration_ms;
                    let outcome = h.coordinator.expire_transactional_ids(now);
                    h.keep(outcome).0.unwrap();
                }
                Op::Restart => {
                    outstanding = h.restart();
                }
            }
            for txn in h.coordinator.transactions() {
                let name = txn.transactional_id.as_str().to_owned();
                if let Some(epoch) = txn.epoch {
                    if let Some(&(pid, seen)) = epochs.get(&name) {
                        if pid == txn.producer_id {
                            prop_assert!(epoch >= seen, "{}: epoch went from {} to {}", name, seen, epoch);
                        }
                    }
                    epochs.insert(name, (txn.producer_id, epoch));
                }
            }
        }
        // Deliver every marker still out: every prepared transaction completes.
        for _ in 0..2 {
            let markers = std::mem::take(&mut outstanding);
            h.ack(&markers, now);
        }
        for txn in h.coordinator.transactions() {
            prop_assert!(
                !matches!(txn.state, TxnState::PrepareCommit | TxnState::PrepareAbort),
                "{:?} never completed: a partition got no marker", txn
            );
        }
    }
}

#[test]
fn marker_write_failures_are_retried_dropped_or_abandoned_as_kafka_does() {
    use txn_coordinator::MarkerFailure;
    let mut h = Harness::new();
    let producer = h.init("app", 0).unwrap();
    h.add("app", producer, &[0, 1, 2], 1).unwrap();
    let (_, markers) = h.end("app", producer, true, 2);
    // Not leader / timeout: the same marker goes out again.
    let retry = h
        .coordinator
        .marker_failed(&tid("app"), &partition(0), MarkerFailure::Retriable, 3);
    assert_eq!(retry.markers, vec![markers[0].clone()]);
    assert!(retry.writes.is_empty());
    // A partition that cannot hold markers is dropped from the wait.
    let outcome = h
        .coordinator
        .marker_failed(&tid("app"), &partition(1), MarkerFailure::Unsupported, 3);
    h.keep(outcome).0.unwrap();
    h.ack(&markers[..1], 4);
    assert_eq!(
        h.state("app"),
        TxnState::PrepareCommit,
        "partition 2 is still waiting"
    );
    h.ack(&markers[2..], 5);
    assert_eq!(h.state("app"), TxnState::CompleteCommit);
    // Fenced (the producer's epoch moved on at the partition): this transaction's markers are abandoned.
    h.add("app", producer, &[0], 6).unwrap();
    let (_, markers) = h.end("app", producer, false, 7);
    let fenced = h
        .coordinator
        .marker_failed(&tid("app"), &markers[0].partition, MarkerFailure::Fenced, 8);
    assert!(fenced.markers.is_empty() && fenced.writes.is_empty());
    assert!(h
        .coordinator
        .transaction(&tid("app"))
        .unwrap()
        .pending_markers
        .is_empty());
    assert_eq!(
        MarkerFailure::of(KafkaError::InvalidProducerEpoch),
        MarkerFailure::Fenced
    );
    assert_eq!(MarkerFailure::of(KafkaError::InvalidRecord), MarkerFailure::Fatal);
    // A partition that mirrors another cluster takes none of this coordinator's markers: it is dropped, not
    // retried (its transactions are decided by its source's markers).
    assert_eq!(
        MarkerFailure::of(KafkaError::ReadOnlyTopic),
        MarkerFailure::Unsupported
    );
    let fatal = h
        .coordinator
        .marker_failed(&tid("app"), &markers[0].partition, MarkerFailure::Fatal, 9);
    assert_eq!(fatal.answer, Err(KafkaError::UnknownServerError));
}
