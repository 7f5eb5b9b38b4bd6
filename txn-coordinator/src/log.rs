//! The transaction-state log: the coordinator's records as Kafka record batches in a partition of the storage
//! trait (the role of Kafka's `__transaction_state`), and the driver that persists an [`Outcome`]'s records
//! before handing back its answer.
//!
//! One batch per outcome, one record per [`Write`], synced before [`DurableCoordinator::apply`] returns. Record
//! layout (big-endian; our own format, versioned):
//!
//! ```text
//! reservation   key: 0x00                       value: i64 up_to
//! transaction   key: 0x01 + transactional id    value: i16 version (1) | i64 producer id | i64 last producer id
//!               (-1: none) | i16 epoch (-1) | i16 last epoch (-1) | i64 timeout ms | u8 state id | i64 txn start
//!               (-1) | i64 last update | u32 partition count | per partition: u16 topic length, topic, u32 number
//!               | i64 next producer id (-1; absent in version 0 records, which are still read)
//! tombstone     key: 0x01 + transactional id    value: null
//! ```
//!
//! Decoding never trusts a length or count: each is checked against the bytes that remain, and any mismatch is
//! [`CoordinatorError::CorruptTxnLog`].
//!
//! **The log holds live state, not history.** Kafka compacts `__transaction_state` (the latest record of each
//! transactional id stays); here, once the log holds more records than [`SNAPSHOT_MIN_RECORDS`] (or twice what
//! the last rewrite wrote), [`DurableCoordinator::snapshot_if_due`] appends the live state again — the
//! reservation and one record per transactional id — syncs it, and moves the log start to where it began. Every
//! record sets its key to a whole value (a reservation only ever raises the bound), so a rewrite a crash cut short
//! replays to the state it was copying: no start or end marker is needed. A start then replays the live state
//! and what followed it.

use std::collections::BTreeSet;

use kafka_types::{CoordinatorEpoch, ProducerEpoch, ProducerId, TransactionalId};
use record_format::{BatchBuilder, RecordBatch};
use storage::{Durability, PartitionId, PartitionStorage};

use crate::coordinator::{Coordinator, CoordinatorConfig, MarkerRequest, Outcome, TxnMetadata, Write};
use crate::error::CoordinatorError;
use crate::producer_ids::{ProducerIdManager, Reservation};
use crate::state::TxnState;

const RESERVATION_KEY: u8 = 0x00;
const TRANSACTION_KEY: u8 = 0x01;
const VALUE_VERSION: i16 = 1;
/// Bytes read from the log per call when recovering.
const READ_BYTES: usize = 1 << 20;
/// The fewest records since the last rewrite that make the log write the live state again.
pub const SNAPSHOT_MIN_RECORDS: u64 = 100_000;
/// Records per batch of a rewrite.
const SNAPSHOT_RECORDS_PER_BATCH: usize = 1_000;

/// A record's key and value.
fn encode(write: &Write) -> (Vec<u8>, Option<Vec<u8>>) {
    match write {
        Write::ReserveProducerIds(reservation) => (
            vec![RESERVATION_KEY],
            Some(reservation.up_to.to_be_bytes().to_vec()),
        ),
        Write::Tombstone(id) => (transaction_key(id), None),
        Write::Txn(txn) => {
            let mut value = Vec::with_capacity(64);
            value.extend_from_slice(&VALUE_VERSION.to_be_bytes());
            value.extend_from_slice(&txn.producer_id.get().to_be_bytes());
            value.extend_from_slice(&txn.last_producer_id.map_or(-1, ProducerId::get).to_be_bytes());
            value.extend_from_slice(&txn.epoch.map_or(-1, ProducerEpoch::get).to_be_bytes());
            value.extend_from_slice(&txn.last_epoch.map_or(-1, ProducerEpoch::get).to_be_bytes());
            value.extend_from_slice(&txn.timeout_ms.to_be_bytes());
            value.push(txn.state.id());
            value.extend_from_slice(&txn.txn_start_ms.unwrap_or(-1).to_be_bytes());
            value.extend_from_slice(&txn.last_update_ms.to_be_bytes());
            value.extend_from_slice(&(txn.partitions.len() as u32).to_be_bytes());
            for partition in &txn.partitions {
                let topic = partition.topic().as_bytes();
                // Kafka topic names are at most 249 bytes: the length fits.
                value.extend_from_slice(&(topic.len() as u16).to_be_bytes());
                value.extend_from_slice(topic);
                value.extend_from_slice(&partition.partition().to_be_bytes());
            }
            value.extend_from_slice(&txn.next_producer_id.map_or(-1, ProducerId::get).to_be_bytes());
            (transaction_key(&txn.transactional_id), Some(value))
        }
    }
}

fn transaction_key(id: &TransactionalId) -> Vec<u8> {
    let mut key = vec![TRANSACTION_KEY];
    key.extend_from_slice(id.as_str().as_bytes());
    key
}

/// Reads big-endian fields from a value, refusing to read past its end.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CoordinatorError> {
        if self.bytes.len() < n {
            return Err(CoordinatorError::CorruptTxnLog(format!(
                "record value ends {} bytes early",
                n - self.bytes.len()
            )));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], CoordinatorError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn i64(&mut self) -> Result<i64, CoordinatorError> {
        self.array().map(i64::from_be_bytes)
    }

    fn i16(&mut self) -> Result<i16, CoordinatorError> {
        self.array().map(i16::from_be_bytes)
    }
}

/// Decodes one record back into the [`Write`] it stores.
pub fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Write, CoordinatorError> {
    let corrupt = |reason: &str| CoordinatorError::CorruptTxnLog(reason.to_owned());
    let key = key.ok_or_else(|| corrupt("a record without a key"))?;
    match key.split_first() {
        Some((&RESERVATION_KEY, [])) => {
            let value = value.ok_or_else(|| corrupt("a reservation without a value"))?;
            let up_to = <[u8; 8]>::try_from(value)
                .map(i64::from_be_bytes)
                .map_err(|_| corrupt("a reservation value is not 8 bytes"))?;
            Ok(Write::ReserveProducerIds(Reservation { up_to }))
        }
        Some((&TRANSACTION_KEY, id)) => {
            let id = std::str::from_utf8(id).map_err(|_| corrupt("a transactional id that is not UTF-8"))?;
            let transactional_id = TransactionalId(id.to_owned());
            let Some(value) = value else {
                return Ok(Write::Tombstone(transactional_id));
            };
            decode_txn(transactional_id, value).map(|txn| Write::Txn(Box::new(txn)))
        }
        _ => Err(corrupt("an unknown record key")),
    }
}

fn decode_txn(transactional_id: TransactionalId, value: &[u8]) -> Result<TxnMetadata, CoordinatorError> {
    let mut reader = Reader { bytes: value };
    let version = reader.i16()?;
    if !(0..=VALUE_VERSION).contains(&version) {
        return Err(CoordinatorError::CorruptTxnLog(format!(
            "transaction record version {version}"
        )));
    }
    let optional_pid = |raw: i64| (raw >= 0).then_some(ProducerId(raw));
    let optional_epoch = |raw: i16| (raw >= 0).then_some(ProducerEpoch(raw));
    let producer_id = ProducerId(reader.i64()?);
    let last_producer_id = optional_pid(reader.i64()?);
    let epoch = optional_epoch(reader.i16()?);
    let last_epoch = optional_epoch(reader.i16()?);
    let timeout_ms = reader.i64()?;
    let [state] = reader.array::<1>()?;
    let state = TxnState::from_id(state)?;
    let txn_start_ms = Some(reader.i64()?).filter(|&start| start >= 0);
    let last_update_ms = reader.i64()?;
    let count = u32::from_be_bytes(reader.array()?);
    let mut partitions = BTreeSet::new();
    // No allocation from `count`: each partition is read from the bytes that are there.
    for _ in 0..count {
        let length = u16::from_be_bytes(reader.array()?);
        let topic = std::str::from_utf8(reader.take(usize::from(length))?)
            .map_err(|_| CoordinatorError::CorruptTxnLog("a topic name that is not UTF-8".into()))?;
        let number = u32::from_be_bytes(reader.array()?);
        let partition = PartitionId::new(topic, number)
            .map_err(|error| CoordinatorError::CorruptTxnLog(error.to_string()))?;
        partitions.insert(partition);
    }
    let next_producer_id = if version >= 1 {
        optional_pid(reader.i64()?)
    } else {
        None
    };
    if !reader.bytes.is_empty() {
        return Err(CoordinatorError::CorruptTxnLog(format!(
            "{} bytes after a transaction record",
            reader.bytes.len()
        )));
    }
    Ok(TxnMetadata {
        transactional_id,
        producer_id,
        last_producer_id,
        next_producer_id,
        epoch,
        last_epoch,
        timeout_ms,
        state,
        partitions,
        txn_start_ms,
        last_update_ms,
        pending_markers: BTreeSet::new(),
    })
}

/// The records of one outcome as one batch at `base_offset`.
pub fn batch_of(writes: &[Write], base_offset: i64, now_ms: i64) -> Result<RecordBatch, CoordinatorError> {
    let mut builder = BatchBuilder::new().base_offset(base_offset);
    for write in writes {
        let (key, value) = encode(write);
        builder.add(now_ms, Some(&key), value.as_deref(), &[]);
    }
    builder
        .build()
        .map_err(|error| CoordinatorError::CorruptTxnLog(format!("cannot encode a record batch: {error}")))
}

/// A coordinator whose every outcome is made durable in its transaction-state partition before it is handed
/// back; see the module docs.
pub struct DurableCoordinator {
    storage: Box<dyn PartitionStorage>,
    coordinator: Coordinator,
    /// Records in the log from its start: what a start replays.
    records: u64,
    /// Records the last rewrite wrote — at open, the records a rewrite would write then: the live state's size,
    /// so that a log of many live transactional ids is not rewritten again at each start.
    snapshot_records: u64,
}

impl std::fmt::Debug for DurableCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableCoordinator")
            .field("partition", self.storage.id())
            .finish_non_exhaustive()
    }
}

impl DurableCoordinator {
    /// Rebuilds the coordinator from its partition (every record, in order) and returns the markers of the
    /// transactions it was completing, to send again.
    pub async fn open(
        storage: Box<dyn PartitionStorage>,
        config: CoordinatorConfig,
        epoch: CoordinatorEpoch,
    ) -> Result<(Self, Vec<MarkerRequest>), CoordinatorError> {
        let mut records = Vec::new();
        let mut offset = storage.log_start_offset();
        while offset < storage.log_end_offset() {
            let batches = storage.read(offset, READ_BYTES).await?;
            let Some(last) = batches.last() else {
                break;
            };
            offset = last.next_offset();
            for batch in &batches {
                let corrupt =
                    |error: record_format::DecodeError| CoordinatorError::CorruptTxnLog(error.to_string());
                for record in batch.records().map_err(corrupt)?.iter() {
                    let record = record.map_err(corrupt)?;
                    records.push(decode(record.key, record.value)?);
                }
            }
        }
        let replayed = records.len() as u64;
        let (coordinator, markers) =
            Coordinator::recover(config, ProducerIdManager::recover(None), epoch, records);
        let live = live_records(&coordinator);
        Ok((
            DurableCoordinator {
                storage,
                coordinator,
                records: replayed,
                snapshot_records: live,
            },
            markers,
        ))
    }

    /// The coordinator, to call a request on; hand its outcome to [`Self::apply`].
    pub fn coordinator(&mut self) -> &mut Coordinator {
        &mut self.coordinator
    }

    /// Makes the outcome's records durable (one batch, synced), then returns its answer and markers. A storage
    /// failure is returned instead: the answer must not go out, and the coordinator must be reopened.
    pub async fn apply<T>(
        &mut self,
        outcome: Outcome<T>,
        now_ms: i64,
    ) -> Result<(Result<T, kafka_types::KafkaError>, Vec<MarkerRequest>), CoordinatorError> {
        if !outcome.writes.is_empty() {
            let batch = batch_of(&outcome.writes, self.storage.log_end_offset(), now_ms)?;
            self.storage.append(&[batch]).await?;
            self.storage.flush(Durability::Sync).await?;
            self.records = self.records.saturating_add(outcome.writes.len() as u64);
        }
        Ok((outcome.answer, outcome.markers))
    }

    /// How many records the log holds from its start (what a start replays).
    pub fn log_records(&self) -> u64 {
        self.records
    }

    /// Writes the live state again once the log has grown past the threshold (module docs), syncs it, then moves
    /// the log start to it; returns whether it did. Storage-fs starts a new segment for it, so the old segments go
    /// whole. A storage failure is returned: the coordinator must be reopened, as after a failed [`Self::apply`].
    pub async fn snapshot_if_due(&mut self, now_ms: i64) -> Result<bool, CoordinatorError> {
        let threshold = SNAPSHOT_MIN_RECORDS.max(self.snapshot_records.saturating_mul(2));
        if self.records < threshold {
            return Ok(false);
        }
        let state = self.live_state();
        self.storage.roll_segment().await?;
        let start = self.storage.log_end_offset();
        for chunk in state.chunks(SNAPSHOT_RECORDS_PER_BATCH) {
            let batch = batch_of(chunk, self.storage.log_end_offset(), now_ms)?;
            self.storage.append(&[batch]).await?;
        }
        self.storage.flush(Durability::Sync).await?;
        self.storage.delete_before(start).await?;
        self.records = state.len() as u64;
        self.snapshot_records = self.records;
        Ok(true)
    }

    /// The records a rewrite writes: the producer-id reservation and one record per transactional id.
    fn live_state(&self) -> Vec<Write> {
        let mut state = Vec::new();
        let reserved = self.coordinator.producer_ids_reserved_up_to();
        if reserved > 0 {
            state.push(Write::ReserveProducerIds(Reservation { up_to: reserved }));
        }
        state.extend(
            self.coordinator
                .transactions()
                .map(|txn| Write::Txn(Box::new(txn.clone()))),
        );
        state
    }
}

/// How many records a rewrite of `coordinator`'s live state writes ([`DurableCoordinator::live_state`]), counted
/// without building them.
fn live_records(coordinator: &Coordinator) -> u64 {
    let reservation = u64::from(coordinator.producer_ids_reserved_up_to() > 0);
    reservation + coordinator.transactions().count() as u64
}
