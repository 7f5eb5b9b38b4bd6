//! The coordinator's request handling, sans-IO: each request changes the in-memory state and returns an
//! [`Outcome`] — the answer for the client, the records to make durable first, and the markers to write.
//!
//! **The caller's contract**: persist `writes` in order (producer-id reservations, transaction records,
//! tombstones) *before* delivering `answer` or sending `markers`. If persisting fails, the coordinator must be
//! treated as crashed and rebuilt from what is durable ([`Coordinator::recover`]); an answer never goes out for
//! a state that is not durable. (Kafka keeps a "pending transition" while it appends; the sans-IO machine instead
//! leaves the ordering to its driver, like `mirror-fsm`.)
//!
//! The rules follow Kafka's `TransactionCoordinator` and `TransactionMetadata` (kafka-semantics §8): unknown
//! transactional id or another producer id → `INVALID_PRODUCER_ID_MAPPING` (KAFKA-16699's two cases), another
//! epoch → `PRODUCER_FENCED`, a transition being completed → `CONCURRENT_TRANSACTIONS`. EndTxn speaks both
//! [`TransactionVersion`]s: under version 2 (KIP-890) every transaction ends with an epoch bump, its markers carry
//! the bumped epoch, and the answer is the producer id and epoch the client continues with.

use std::collections::{BTreeMap, BTreeSet};

use kafka_types::{
    CoordinatorEpoch, KafkaError, ProducerEpoch, ProducerId, TransactionVersion, TransactionalId,
};
use storage::PartitionId;

use crate::producer_ids::{Issue, ProducerIdManager, Reservation};
use crate::state::TxnState;

/// Partitions of Kafka's `__consumer_offsets` (its default `offsets.topic.num.partitions`).
pub const OFFSETS_TOPIC_PARTITIONS: u32 = 50;

/// The coordinator's settings (Kafka's defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorConfig {
    /// `transaction.max.timeout.ms`: the largest transaction timeout a producer may ask for.
    pub max_transaction_timeout_ms: i64,
    /// `transactional.id.expiration.ms`: an idle transactional id is removed after this long.
    pub transactional_id_expiration_ms: i64,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            max_transaction_timeout_ms: 900_000,
            transactional_id_expiration_ms: 604_800_000,
        }
    }
}

/// What the coordinator knows of one transactional id (Kafka's `TransactionMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    /// The transactional id.
    pub transactional_id: TransactionalId,
    /// The producer id it maps to.
    pub producer_id: ProducerId,
    /// The producer id before the last rotation (epoch exhaustion), for a retried InitProducerId or EndTxn.
    pub last_producer_id: Option<ProducerId>,
    /// Under [`TransactionVersion::V2`], while a transaction whose bump exhausted the epoch completes: the producer
    /// id it continues with (at epoch 0) once the markers are written.
    pub next_producer_id: Option<ProducerId>,
    /// The current epoch (`None` right after creation, before the first InitProducerId completes).
    pub epoch: Option<ProducerEpoch>,
    /// The epoch before the last bump, for a retried InitProducerId (KIP-360).
    pub last_epoch: Option<ProducerEpoch>,
    /// The transaction timeout the producer asked for.
    pub timeout_ms: i64,
    /// The state.
    pub state: TxnState,
    /// Partitions in the transaction (including the group-offsets partition of AddOffsetsToTxn).
    pub partitions: BTreeSet<PartitionId>,
    /// When the open transaction started.
    pub txn_start_ms: Option<i64>,
    /// When the id last changed (drives expiration).
    pub last_update_ms: i64,
    /// In Prepare* states: partitions whose marker is not yet acknowledged.
    pub pending_markers: BTreeSet<PartitionId>,
}

/// A record to make durable before the answer goes out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// A new producer-id block (see [`crate::producer_ids`]).
    ReserveProducerIds(Reservation),
    /// A transactional id's new state.
    Txn(Box<TxnMetadata>),
    /// A transactional id removed (expired).
    Tombstone(TransactionalId),
}

/// A COMMIT or ABORT marker to append (COORDINATOR origin) to a partition, then acknowledge with
/// [`Coordinator::marker_written`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerRequest {
    /// The transactional id whose transaction it ends.
    pub transactional_id: TransactionalId,
    /// The partition.
    pub partition: PartitionId,
    /// The producer id.
    pub producer_id: ProducerId,
    /// The producer epoch the marker carries.
    pub epoch: ProducerEpoch,
    /// This coordinator's epoch.
    pub coordinator_epoch: CoordinatorEpoch,
    /// COMMIT (true) or ABORT.
    pub commit: bool,
}

/// How writing a marker to a partition failed (Kafka's `TransactionMarkerRequestCompletionHandler` classes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerFailure {
    /// The partition could not take it now (not leader, not enough replicas, a timeout, a storage error): send
    /// the same marker again.
    Retriable,
    /// `INVALID_PRODUCER_EPOCH` or `TRANSACTION_COORDINATOR_FENCED`: the producer or the coordinator has moved on;
    /// stop sending this transaction's markers (a reloaded coordinator sends them again if still needed).
    Fenced,
    /// The partition cannot hold this coordinator's markers (`UNSUPPORTED_FOR_MESSAGE_FORMAT`, or
    /// `READ_ONLY_TOPIC`: it mirrors another cluster, whose markers decide its transactions): no producer could
    /// write to it transactionally either, so it is dropped from the partitions waiting for a marker.
    Unsupported,
    /// A corrupt or oversized marker: a bug, not a condition to retry.
    Fatal,
}

impl MarkerFailure {
    /// The class of a partition's answer to a marker.
    pub fn of(error: KafkaError) -> Self {
        match error {
            KafkaError::InvalidProducerEpoch | KafkaError::TransactionCoordinatorFenced => {
                MarkerFailure::Fenced
            }
            KafkaError::InvalidRecord => MarkerFailure::Fatal,
            KafkaError::ReadOnlyTopic => MarkerFailure::Unsupported,
            _ => MarkerFailure::Retriable,
        }
    }
}

/// What a request did; see the module docs for the order in which the caller acts on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome<T> {
    /// The answer for the client.
    pub answer: Result<T, KafkaError>,
    /// Records to persist before the answer goes out.
    pub writes: Vec<Write>,
    /// Markers to write after the records are durable.
    pub markers: Vec<MarkerRequest>,
}

impl<T> Outcome<T> {
    fn answer(answer: Result<T, KafkaError>) -> Self {
        Outcome {
            answer,
            writes: Vec::new(),
            markers: Vec::new(),
        }
    }

    fn refuse(error: KafkaError) -> Self {
        Self::answer(Err(error))
    }
}

/// Whether `epoch` can no longer be bumped without rotating the producer id (Kafka's `isEpochExhausted`).
pub fn epoch_exhausted(epoch: ProducerEpoch) -> bool {
    epoch.get() >= i16::MAX - 1
}

/// The `__consumer_offsets` partition of a consumer group (Kafka's `abs(groupId.hashCode) % partitions`, with
/// Java's `String.hashCode` over UTF-16 code units).
pub fn offsets_partition_for(group_id: &str) -> Option<PartitionId> {
    let hash = group_id.encode_utf16().fold(0i32, |hash, unit| {
        hash.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    // Kafka's `Utils.abs` maps i32::MIN to 0.
    let positive = if hash == i32::MIN { 0 } else { hash.abs() };
    PartitionId::new("__consumer_offsets", positive as u32 % OFFSETS_TOPIC_PARTITIONS).ok()
}

/// One coordinator (one cluster's transaction-state partition); see the module docs.
#[derive(Debug, Clone)]
pub struct Coordinator {
    config: CoordinatorConfig,
    ids: ProducerIdManager,
    epoch: CoordinatorEpoch,
    txns: BTreeMap<TransactionalId, TxnMetadata>,
}

impl Coordinator {
    /// A coordinator with no transactional ids, issuing producer ids from `ids`.
    pub fn new(config: CoordinatorConfig, ids: ProducerIdManager, epoch: CoordinatorEpoch) -> Self {
        Coordinator {
            config,
            ids,
            epoch,
            txns: BTreeMap::new(),
        }
    }

    /// Rebuilds a coordinator from its durable records, in log order (the last record of an id wins; a
    /// tombstone removes it), and returns it with the markers of every transaction that was being completed:
    /// they are sent again (a marker appended twice is harmless: the second finds no open transaction).
    pub fn recover(
        config: CoordinatorConfig,
        ids: ProducerIdManager,
        epoch: CoordinatorEpoch,
        records: impl IntoIterator<Item = Write>,
    ) -> (Self, Vec<MarkerRequest>) {
        let mut coordinator = Coordinator::new(config, ids, epoch);
        let mut reserved = None;
        for record in records {
            match record {
                Write::Txn(metadata) => {
                    coordinator
                        .txns
                        .insert(metadata.transactional_id.clone(), *metadata);
                }
                Write::Tombstone(id) => {
                    coordinator.txns.remove(&id);
                }
                Write::ReserveProducerIds(reservation) => {
                    reserved = reserved.max(Some(reservation.up_to));
                }
            }
        }
        // Ids below the last durable reservation may have been issued: continue above it.
        if let Some(up_to) = reserved {
            let bound = up_to.max(coordinator.ids.reserved_up_to());
            coordinator.ids = ProducerIdManager::recover(Some(bound));
        }
        let mut markers = Vec::new();
        for metadata in coordinator.txns.values_mut() {
            if matches!(metadata.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
                metadata.pending_markers = metadata.partitions.clone();
            }
        }
        for metadata in coordinator.txns.values() {
            markers.extend(coordinator.markers_for(metadata));
        }
        (coordinator, markers)
    }

    /// The state of a transactional id.
    pub fn transaction(&self, id: &TransactionalId) -> Option<&TxnMetadata> {
        self.txns.get(id)
    }

    /// Every transactional id, in order.
    pub fn transactions(&self) -> impl Iterator<Item = &TxnMetadata> {
        self.txns.values()
    }

    /// Every producer id this coordinator has issued is below this bound (the allocator's next id: after a
    /// restart it starts at the durable bound, so ids issued before the crash are below it too). A mirror
    /// destination that moves its allocator past `bound - 1` never issues an id this cluster issued.
    pub fn producer_ids_issued_below(&self) -> i64 {
        self.ids.peek_next()
    }

    /// The durable bound of the producer-id allocator: the reservation a rewrite of the transaction log carries.
    pub fn producer_ids_reserved_up_to(&self) -> i64 {
        self.ids.reserved_up_to()
    }

    /// Moves the producer-id allocator past `id` (a destination after failover); the reservation, if one is
    /// needed, is in the outcome's writes.
    pub fn advance_producer_ids_past(&mut self, id: i64) -> Outcome<()> {
        match self.ids.advance_past(id) {
            Ok(reservation) => {
                let mut outcome = Outcome::answer(Ok(()));
                if let Some(reservation) = reservation {
                    self.ids.reserved(reservation);
                    outcome.writes.push(Write::ReserveProducerIds(reservation));
                }
                outcome
            }
            Err(_) => Outcome::refuse(KafkaError::InvalidRequest),
        }
    }

    /// A fresh producer id, with the block reservation it needed (if any) pushed onto `writes`.
    fn issue_producer_id(&mut self, writes: &mut Vec<Write>) -> Result<ProducerId, KafkaError> {
        loop {
            match self.ids.next_id() {
                Ok(Issue::Id(id)) => return Ok(id),
                Ok(Issue::Reserve(reservation)) => {
                    self.ids.reserved(reservation);
                    writes.push(Write::ReserveProducerIds(reservation));
                }
                Err(_) => return Err(KafkaError::UnknownServerError),
            }
        }
    }

    /// InitProducerId. Without a transactional id: a fresh producer id at epoch 0 (an idempotent producer).
    /// With one: a new id gets a producer id and epoch 0; a known one gets its epoch bumped (a new producer id
    /// once the epoch is exhausted), and an open transaction is first aborted under a bumped epoch — the old
    /// instance is fenced and the caller hears `CONCURRENT_TRANSACTIONS`, so it retries. `expected` is the
    /// producer id and epoch the client already holds (KIP-360): a retried bump answers the current epoch again;
    /// anything else that does not match is `PRODUCER_FENCED`.
    pub fn init_producer_id(
        &mut self,
        transactional_id: Option<&TransactionalId>,
        timeout_ms: i64,
        expected: Option<(ProducerId, ProducerEpoch)>,
        now_ms: i64,
    ) -> Outcome<(ProducerId, ProducerEpoch)> {
        let mut writes = Vec::new();
        let Some(id) = transactional_id else {
            let answer = self
                .issue_producer_id(&mut writes)
                .map(|producer_id| (producer_id, ProducerEpoch(0)));
            return Outcome {
                answer,
                writes,
                markers: Vec::new(),
            };
        };
        if id.as_str().is_empty() {
            return Outcome::refuse(KafkaError::InvalidRequest);
        }
        if timeout_ms <= 0 || timeout_ms > self.config.max_transaction_timeout_ms {
            return Outcome::refuse(KafkaError::InvalidTransactionTimeout);
        }
        if !self.txns.contains_key(id) {
            let producer_id = match self.issue_producer_id(&mut writes) {
                Ok(producer_id) => producer_id,
                Err(error) => return Outcome::refuse(error),
            };
            self.txns.insert(
                id.clone(),
                TxnMetadata {
                    transactional_id: id.clone(),
                    producer_id,
                    last_producer_id: None,
                    next_producer_id: None,
                    epoch: None,
                    last_epoch: None,
                    timeout_ms,
                    state: TxnState::Empty,
                    partitions: BTreeSet::new(),
                    txn_start_ms: None,
                    last_update_ms: now_ms,
                    pending_markers: BTreeSet::new(),
                },
            );
        }
        let Some(current) = self.txns.get(id).cloned() else {
            return Outcome::refuse(KafkaError::UnknownServerError);
        };
        // KIP-360: the client's producer id must be the current one, or the previous one with an exhausted
        // epoch (a retry after a rotation whose answer was lost); a just-created id accepts anything.
        let valid_expectation = |(producer_id, epoch): (ProducerId, ProducerEpoch)| {
            current.epoch.is_none()
                || producer_id == current.producer_id
                || (Some(producer_id) == current.last_producer_id && epoch_exhausted(epoch))
        };
        if expected.is_some_and(|expected| !valid_expectation(expected)) {
            return Outcome::refuse(KafkaError::ProducerFenced);
        }
        match current.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                Outcome::refuse(KafkaError::ConcurrentTransactions)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let mut next = current.clone();
                let exhausted = current.epoch.is_some_and(epoch_exhausted);
                if exhausted && expected.is_none_or(|(_, epoch)| Some(epoch) == current.epoch) {
                    // Rotate: a new producer id at epoch 0.
                    next.producer_id = match self.issue_producer_id(&mut writes) {
                        Ok(producer_id) => producer_id,
                        Err(error) => return Outcome::refuse(error),
                    };
                    next.last_producer_id = Some(current.producer_id);
                    next.epoch = Some(ProducerEpoch(0));
                    next.last_epoch = if expected.is_some() { current.epoch } else { None };
                } else {
                    let bumped = ProducerEpoch(current.epoch.map_or(0, |epoch| epoch.get() + 1));
                    match expected {
                        None => {
                            next.epoch = Some(bumped);
                            next.last_epoch = None;
                        }
                        Some((_, epoch)) if current.epoch.is_none() || Some(epoch) == current.epoch => {
                            next.epoch = Some(bumped);
                            next.last_epoch = current.epoch;
                        }
                        // The bump was made, but its answer never reached the client: answer it again.
                        Some((_, epoch)) if Some(epoch) == current.last_epoch => {}
                        Some(_) => return Outcome::refuse(KafkaError::ProducerFenced),
                    }
                }
                next.state = TxnState::Empty;
                next.timeout_ms = timeout_ms;
                next.partitions.clear();
                next.txn_start_ms = None;
                next.last_update_ms = now_ms;
                let answer = match next.epoch {
                    Some(epoch) => Ok((next.producer_id, epoch)),
                    None => Err(KafkaError::UnknownServerError),
                };
                self.store(next, &mut writes);
                Outcome {
                    answer,
                    writes,
                    markers: Vec::new(),
                }
            }
            TxnState::Ongoing => {
                // Fence the old instance: bump the epoch and abort its transaction under it; the client retries
                // (and its retry bumps the epoch again, rotating the producer id if that exhausts it).
                let mut outcome = self.fence_and_abort(&current, now_ms);
                outcome.writes.splice(0..0, writes);
                Outcome {
                    answer: Err(KafkaError::ConcurrentTransactions),
                    writes: outcome.writes,
                    markers: outcome.markers,
                }
            }
            TxnState::Dead | TxnState::PrepareEpochFence => Outcome::refuse(KafkaError::UnknownServerError),
        }
    }

    /// Kafka's transaction verification (KIP-890 part 1), asked before a transactional batch of `producer_id` at
    /// `epoch` is appended to `partition`: the producer this id holds may write only to a partition of its open
    /// transaction (INVALID_TXN_STATE otherwise), and an older epoch of it — fenced, or its transaction aborted
    /// on timeout — not at all (INVALID_PRODUCER_EPOCH). An id the coordinator does not know, another producer
    /// id or a newer epoch is not its to refuse: the partition's producer state decides those.
    pub fn verify_transactional_append(
        &self,
        transactional_id: &TransactionalId,
        producer_id: ProducerId,
        epoch: ProducerEpoch,
        partition: &PartitionId,
    ) -> Result<(), KafkaError> {
        let Some(txn) = self.txns.get(transactional_id) else {
            return Ok(());
        };
        if txn.producer_id != producer_id {
            return Ok(());
        }
        match txn.epoch.map(|held| held.0.cmp(&epoch.0)) {
            Some(std::cmp::Ordering::Greater) => Err(KafkaError::InvalidProducerEpoch),
            Some(std::cmp::Ordering::Equal)
                if txn.state != TxnState::Ongoing || !txn.partitions.contains(partition) =>
            {
                Err(KafkaError::InvalidTxnState)
            }
            _ => Ok(()),
        }
    }

    /// AddPartitionsToTxn: the partitions join the open transaction (opening one if none is).
    pub fn add_partitions(
        &mut self,
        transactional_id: &TransactionalId,
        producer_id: ProducerId,
        epoch: ProducerEpoch,
        partitions: &[PartitionId],
        now_ms: i64,
    ) -> Outcome<()> {
        let current = match self.check_producer(transactional_id, producer_id, epoch) {
            Ok(current) => current,
            Err(error) => return Outcome::refuse(error),
        };
        match current.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                return Outcome::refuse(KafkaError::ConcurrentTransactions)
            }
            TxnState::Ongoing if partitions.iter().all(|p| current.partitions.contains(p)) => {
                return Outcome::answer(Ok(()))
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort | TxnState::Ongoing => {}
            TxnState::Dead | TxnState::PrepareEpochFence => {
                return Outcome::refuse(KafkaError::UnknownServerError)
            }
        }
        let mut next = current.clone();
        if current.state != TxnState::Ongoing {
            next.txn_start_ms = Some(now_ms);
        }
        next.state = TxnState::Ongoing;
        next.partitions.extend(partitions.iter().cloned());
        next.last_update_ms = now_ms;
        let mut writes = Vec::new();
        self.store(next, &mut writes);
        Outcome {
            answer: Ok(()),
            writes,
            markers: Vec::new(),
        }
    }

    /// AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction.
    pub fn add_offsets(
        &mut self,
        transactional_id: &TransactionalId,
        producer_id: ProducerId,
        epoch: ProducerEpoch,
        group_id: &str,
        now_ms: i64,
    ) -> Outcome<()> {
        match offsets_partition_for(group_id) {
            Some(partition) => {
                self.add_partitions(transactional_id, producer_id, epoch, &[partition], now_ms)
            }
            None => Outcome::refuse(KafkaError::InvalidRequest),
        }
    }

    /// EndTxn from a client: the open transaction moves to PrepareCommit or PrepareAbort and a marker request
    /// goes out per partition; the transaction completes when every marker is acknowledged. The answer is the
    /// producer id and epoch the client continues with: unchanged under [`TransactionVersion::V1`], bumped (or a
    /// new producer id at epoch 0 once the epoch is exhausted) under [`TransactionVersion::V2`].
    ///
    /// Under V1 a retried EndTxn of a completed transaction with the same result succeeds and the opposite result
    /// is `INVALID_TXN_STATE`. Under V2 a retry is recognised by its epoch (one below the bumped one, or the
    /// exhausted epoch of the previous producer id), and an abort is accepted in Empty and Complete* too — it
    /// bumps the epoch with no partition to mark (Kafka's table in `TransactionCoordinator`).
    pub fn end_txn(
        &mut self,
        transactional_id: &TransactionalId,
        producer_id: ProducerId,
        epoch: ProducerEpoch,
        commit: bool,
        version: TransactionVersion,
        now_ms: i64,
    ) -> Outcome<(ProducerId, ProducerEpoch)> {
        if version.bumps_epoch_per_transaction() {
            return self.end_txn_v2(transactional_id, producer_id, epoch, commit, now_ms);
        }
        let current = match self.check_producer(transactional_id, producer_id, epoch) {
            Ok(current) => current,
            Err(error) => return Outcome::refuse(error),
        };
        let unchanged = Ok((producer_id, epoch));
        match (current.state, commit) {
            (TxnState::Ongoing, _) => self.prepare_end(&current, commit, version, now_ms),
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Outcome::answer(unchanged),
            (state, commit) => Outcome::refuse(end_refused(state, commit)),
        }
    }

    /// EndTxn under transaction version 2; see [`Self::end_txn`].
    fn end_txn_v2(
        &mut self,
        transactional_id: &TransactionalId,
        producer_id: ProducerId,
        epoch: ProducerEpoch,
        commit: bool,
        now_ms: i64,
    ) -> Outcome<(ProducerId, ProducerEpoch)> {
        if transactional_id.as_str().is_empty() {
            return Outcome::refuse(KafkaError::InvalidRequest);
        }
        let Some(current) = self.txns.get(transactional_id).cloned() else {
            return Outcome::refuse(KafkaError::InvalidProducerIdMapping);
        };
        // A retry whose first attempt rotated the producer id: it still names the old id at the exhausted epoch.
        let retry_after_rotation = current.last_producer_id == Some(producer_id)
            && epoch.get() == i16::MAX - 1
            && current.epoch == Some(ProducerEpoch(0));
        // A retry whose first attempt bumped the epoch.
        let retry_after_bump = current.epoch.map(ProducerEpoch::get) == epoch.get().checked_add(1);
        if current.producer_id != producer_id && !retry_after_rotation {
            return Outcome::refuse(KafkaError::InvalidProducerIdMapping);
        }
        let same_epoch = current.epoch == Some(epoch);
        let valid_epoch = match current.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => retry_after_bump,
            TxnState::CompleteCommit | TxnState::CompleteAbort => {
                retry_after_bump || retry_after_rotation || same_epoch
            }
            TxnState::Empty | TxnState::Ongoing | TxnState::Dead | TxnState::PrepareEpochFence => same_epoch,
        };
        if !valid_epoch {
            return Outcome::refuse(KafkaError::ProducerFenced);
        }
        let retry = retry_after_bump || retry_after_rotation;
        let continue_with = |txn: &TxnMetadata| match txn.epoch {
            Some(epoch) => Ok((txn.producer_id, epoch)),
            None => Err(KafkaError::UnknownServerError),
        };
        let v2 = TransactionVersion::V2;
        match (current.state, commit) {
            (TxnState::Ongoing, _) => self.prepare_end(&current, commit, v2, now_ms),
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) if retry => {
                Outcome::answer(continue_with(&current))
            }
            // An abort with nothing open (or after a completed transaction): an epoch bump and no markers.
            (TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort, false) if !retry => {
                self.prepare_end(&current, false, v2, now_ms)
            }
            (state, commit) => Outcome::refuse(end_refused(state, commit)),
        }
    }

    /// A marker of a transaction being completed reached `partition`; the transaction completes (a record to
    /// persist) when it was the last one.
    pub fn marker_written(
        &mut self,
        transactional_id: &TransactionalId,
        partition: &PartitionId,
        now_ms: i64,
    ) -> Outcome<()> {
        let Some(current) = self.txns.get(transactional_id).cloned() else {
            return Outcome::answer(Ok(()));
        };
        let done = match current.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return Outcome::answer(Ok(())),
        };
        let mut next = current;
        next.pending_markers.remove(partition);
        let mut writes = Vec::new();
        if next.pending_markers.is_empty() {
            complete(&mut next, done, now_ms);
            self.store(next, &mut writes);
        } else {
            self.txns.insert(transactional_id.clone(), next);
        }
        Outcome {
            answer: Ok(()),
            writes,
            markers: Vec::new(),
        }
    }

    /// Writing the marker for `partition` failed; see [`MarkerFailure`] for what each class does.
    pub fn marker_failed(
        &mut self,
        transactional_id: &TransactionalId,
        partition: &PartitionId,
        failure: MarkerFailure,
        now_ms: i64,
    ) -> Outcome<()> {
        match failure {
            MarkerFailure::Retriable => {
                let Some(txn) = self.txns.get(transactional_id) else {
                    return Outcome::answer(Ok(()));
                };
                let markers = self
                    .markers_for(txn)
                    .into_iter()
                    .filter(|marker| &marker.partition == partition)
                    .collect();
                Outcome {
                    answer: Ok(()),
                    writes: Vec::new(),
                    markers,
                }
            }
            MarkerFailure::Fenced => {
                if let Some(txn) = self.txns.get_mut(transactional_id) {
                    txn.pending_markers.clear();
                }
                Outcome::answer(Ok(()))
            }
            MarkerFailure::Unsupported => self.marker_written(transactional_id, partition, now_ms),
            MarkerFailure::Fatal => Outcome::refuse(KafkaError::UnknownServerError),
        }
    }

    /// Aborts every open transaction past its timeout, bumping its epoch so the idle producer is fenced
    /// (Kafka's `abortTimedOutTransactions`).
    pub fn abort_timed_out(&mut self, now_ms: i64) -> Outcome<()> {
        let timed_out: Vec<TxnMetadata> = self
            .txns
            .values()
            .filter(|txn| {
                txn.state == TxnState::Ongoing
                    && txn
                        .txn_start_ms
                        .is_some_and(|start| start.saturating_add(txn.timeout_ms) < now_ms)
            })
            .cloned()
            .collect();
        let mut outcome = Outcome::answer(Ok(()));
        for txn in timed_out {
            let aborted = self.fence_and_abort(&txn, now_ms);
            outcome.writes.extend(aborted.writes);
            outcome.markers.extend(aborted.markers);
        }
        outcome
    }

    /// Removes every transactional id idle (Empty or Complete*) for `transactional.id.expiration.ms`; its
    /// producer's next request hears `INVALID_PRODUCER_ID_MAPPING` (KAFKA-16699, case 1).
    pub fn expire_transactional_ids(&mut self, now_ms: i64) -> Outcome<()> {
        let expiration = self.config.transactional_id_expiration_ms;
        let expired: Vec<TransactionalId> = self
            .txns
            .values()
            .filter(|txn| {
                txn.state.expiration_allowed() && txn.last_update_ms.saturating_add(expiration) <= now_ms
            })
            .map(|txn| txn.transactional_id.clone())
            .collect();
        let mut outcome = Outcome::answer(Ok(()));
        for id in expired {
            self.txns.remove(&id);
            outcome.writes.push(Write::Tombstone(id));
        }
        outcome
    }

    /// The checks every producer request starts with (a transactional id at all, KAFKA-16699's two cases, then
    /// fencing).
    fn check_producer(
        &self,
        transactional_id: &TransactionalId,
        producer_id: ProducerId,
        epoch: ProducerEpoch,
    ) -> Result<TxnMetadata, KafkaError> {
        if transactional_id.as_str().is_empty() {
            return Err(KafkaError::InvalidRequest);
        }
        let current = self
            .txns
            .get(transactional_id)
            .ok_or(KafkaError::InvalidProducerIdMapping)?;
        if current.producer_id != producer_id {
            return Err(KafkaError::InvalidProducerIdMapping);
        }
        if current.epoch != Some(epoch) {
            return Err(KafkaError::ProducerFenced);
        }
        Ok(current.clone())
    }

    /// → PrepareCommit/PrepareAbort with a marker per partition (completing at once if there is none). Under
    /// [`TransactionVersion::V2`] the epoch is bumped first — the markers carry the bumped epoch — and an
    /// exhausted epoch draws the producer id the client continues with.
    fn prepare_end(
        &mut self,
        current: &TxnMetadata,
        commit: bool,
        version: TransactionVersion,
        now_ms: i64,
    ) -> Outcome<(ProducerId, ProducerEpoch)> {
        let mut next = current.clone();
        let mut writes = Vec::new();
        if version.bumps_epoch_per_transaction() {
            let Some(bumped) = current.epoch.and_then(|epoch| epoch.get().checked_add(1)) else {
                return Outcome::refuse(KafkaError::UnknownServerError);
            };
            if current.epoch.is_some_and(epoch_exhausted) {
                next.next_producer_id = match self.issue_producer_id(&mut writes) {
                    Ok(producer_id) => Some(producer_id),
                    Err(error) => return Outcome::refuse(error),
                };
            }
            next.last_epoch = current.epoch;
            next.epoch = Some(ProducerEpoch(bumped));
            if current.state != TxnState::Ongoing {
                // An abort with no transaction open starts (and ends) one now.
                next.txn_start_ms = Some(now_ms);
            }
        }
        next.state = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        next.pending_markers = next.partitions.clone();
        next.last_update_ms = now_ms;
        let markers = self.markers_for(&next);
        // What the client continues with: the next producer id at epoch 0 after a rotation.
        let answer = match (next.next_producer_id, next.epoch) {
            (Some(rotated), _) => Ok((rotated, ProducerEpoch(0))),
            (None, Some(epoch)) => Ok((next.producer_id, epoch)),
            (None, None) => Err(KafkaError::UnknownServerError),
        };
        if next.pending_markers.is_empty() {
            // Nothing to mark (no partition was added): the transaction is complete at once.
            let done = if commit {
                TxnState::CompleteCommit
            } else {
                TxnState::CompleteAbort
            };
            complete(&mut next, done, now_ms);
        }
        self.store(next, &mut writes);
        Outcome {
            answer,
            writes,
            markers,
        }
    }

    /// Ongoing → (PrepareEpochFence) → PrepareAbort under a bumped epoch, with ABORT markers.
    fn fence_and_abort(&mut self, current: &TxnMetadata, now_ms: i64) -> Outcome<()> {
        let Some(epoch) = current.epoch.and_then(|epoch| epoch.get().checked_add(1)) else {
            return Outcome::refuse(KafkaError::UnknownServerError);
        };
        let mut fenced = current.clone();
        fenced.epoch = Some(ProducerEpoch(epoch));
        fenced.last_epoch = None;
        let outcome = self.prepare_end(&fenced, false, TransactionVersion::V1, now_ms);
        Outcome {
            answer: outcome.answer.map(|_| ()),
            writes: outcome.writes,
            markers: outcome.markers,
        }
    }

    /// The marker requests of a transaction being completed (one per partition still pending).
    fn markers_for(&self, txn: &TxnMetadata) -> Vec<MarkerRequest> {
        let commit = match txn.state {
            TxnState::PrepareCommit => true,
            TxnState::PrepareAbort => false,
            _ => return Vec::new(),
        };
        let Some(epoch) = txn.epoch else {
            return Vec::new();
        };
        txn.pending_markers
            .iter()
            .map(|partition| MarkerRequest {
                transactional_id: txn.transactional_id.clone(),
                partition: partition.clone(),
                producer_id: txn.producer_id,
                epoch,
                coordinator_epoch: self.epoch,
                commit,
            })
            .collect()
    }

    /// Keeps `next` as the id's state and queues its record.
    fn store(&mut self, next: TxnMetadata, writes: &mut Vec<Write>) {
        writes.push(Write::Txn(Box::new(next.clone())));
        self.txns.insert(next.transactional_id.clone(), next);
    }
}

/// Prepare* → `done`: the transaction's partitions are cleared, and a version-2 rotation takes effect (the
/// client continues with the next producer id at epoch 0; the exhausted epoch stays as the last one it saw). The
/// start time stays, as Kafka keeps it in the completed state (DescribeTransactions shows it, and the record
/// carries it).
fn complete(txn: &mut TxnMetadata, done: TxnState, now_ms: i64) {
    txn.state = done;
    txn.partitions.clear();
    txn.pending_markers.clear();
    txn.last_update_ms = now_ms;
    if let Some(rotated) = txn.next_producer_id.take() {
        txn.last_producer_id = Some(txn.producer_id);
        txn.producer_id = rotated;
        txn.epoch = Some(ProducerEpoch(0));
    }
}

/// What EndTxn answers where it neither starts an ending nor repeats a finished one (both versions agree): the
/// same ending still being written is `CONCURRENT_TRANSACTIONS`, a state that cannot occur is an internal error,
/// anything else is `INVALID_TXN_STATE`.
fn end_refused(state: TxnState, commit: bool) -> KafkaError {
    match (state, commit) {
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
            KafkaError::ConcurrentTransactions
        }
        (TxnState::Dead | TxnState::PrepareEpochFence, _) => KafkaError::UnknownServerError,
        _ => KafkaError::InvalidTxnState,
    }
}
