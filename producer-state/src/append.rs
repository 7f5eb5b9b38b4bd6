//! Per-producer validation of one append (`ProducerAppendInfo`, kafka-semantics §3).
//!
//! A [`ProducerAppendInfo`] starts from the stored entry (or an empty one) and accumulates the batches of one
//! producer within one append call; nothing reaches the manager until it is committed with
//! [`crate::ProducerStateManager::update`]. Rules by origin: epochs are checked for every origin but only
//! *warned* about on REPLICATION (which may lower the stored epoch); sequences are checked for CLIENT only;
//! transaction-state rules apply to every origin.

use kafka_types::TransactionVersion;
use record_format::batch::{increment_sequence, NO_PRODUCER_EPOCH};
use record_format::control::{types, ControlKey, EndTxnMarker};
use record_format::RecordBatch;

use crate::entry::{
    CompletedTxn, LogOffsetMetadata, ProducerStateEntry, TxnMetadata, VerificationStateEntry,
};
use crate::error::ProducerStateError;

/// Who is appending (`AppendOrigin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AppendOrigin {
    /// A produce request: full validation.
    Client,
    /// The transaction or group coordinator (markers, offsets) and our own barrier writes.
    Coordinator,
    /// Followers, mirroring and log recovery: offsets kept, epochs only warned about, no sequence checks.
    Replication,
}

impl AppendOrigin {
    /// Lower-case name (`client`, `coordinator`, `replication`).
    pub fn name(self) -> &'static str {
        match self {
            AppendOrigin::Client => "client",
            AppendOrigin::Coordinator => "coordinator",
            AppendOrigin::Replication => "replication",
        }
    }
}

/// `inSequence`: the next sequence follows the last one, computed without overflow, wrapping at `i32::MAX`.
pub fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    i64::from(next_seq) == i64::from(last_seq) + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

/// A data batch as producer state sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataBatch {
    /// The batch's producer epoch.
    pub epoch: i16,
    /// First sequence (−1 when none).
    pub first_seq: i32,
    /// Last sequence (−1 when none).
    pub last_seq: i32,
    /// The batch's max timestamp.
    pub max_timestamp: i64,
    /// Where the batch starts.
    pub first_offset: LogOffsetMetadata,
    /// Its last offset.
    pub last_offset: i64,
    /// The transactional bit.
    pub is_transactional: bool,
}

impl DataBatch {
    /// The producer-state view of a data batch header.
    pub fn from_batch(batch: &RecordBatch, first_offset: Option<LogOffsetMetadata>) -> Self {
        DataBatch {
            epoch: batch.producer_epoch(),
            first_seq: batch.base_sequence(),
            last_seq: batch.last_sequence(),
            max_timestamp: batch.max_timestamp(),
            first_offset: first_offset
                .unwrap_or_else(|| LogOffsetMetadata::message_only(batch.base_offset())),
            last_offset: batch.last_offset(),
            is_transactional: batch.is_transactional(),
        }
    }
}

/// A COMMIT or ABORT marker as producer state sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndMarker {
    /// True for COMMIT, false for ABORT.
    pub commit: bool,
    /// The marker value's coordinator epoch.
    pub coordinator_epoch: i32,
    /// The marker batch's producer epoch.
    pub producer_epoch: i16,
    /// The marker's offset.
    pub offset: i64,
    /// The marker record's timestamp.
    pub timestamp: i64,
}

/// What the sequence check needs from the stored entry (a copy, so preparing an append allocates nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StoredView {
    producer_epoch: i16,
    last_seq: i32,
    has_batches: bool,
}

/// Validation of one producer's batches within one append; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerAppendInfo {
    producer_id: i64,
    origin: AppendOrigin,
    current_entry: StoredView,
    updated_entry: ProducerStateEntry,
    verification: Option<VerificationStateEntry>,
    started_transactions: Vec<TxnMetadata>,
}

impl ProducerAppendInfo {
    /// `prepareUpdate`: starts from the stored entry (`None` for an unknown producer) and verification entry.
    pub fn new(
        producer_id: i64,
        origin: AppendOrigin,
        stored: Option<&ProducerStateEntry>,
        verification: Option<VerificationStateEntry>,
    ) -> Self {
        let updated_entry = match stored {
            Some(entry) => entry.without_batches(),
            None => ProducerStateEntry::empty(producer_id),
        };
        let current_entry = StoredView {
            producer_epoch: updated_entry.producer_epoch,
            last_seq: stored.map_or(-1, ProducerStateEntry::last_seq),
            has_batches: stored.is_some_and(|entry| !entry.is_empty()),
        };
        ProducerAppendInfo {
            producer_id,
            origin,
            current_entry,
            updated_entry,
            verification,
            started_transactions: Vec::new(),
        }
    }

    /// Producer id.
    pub fn producer_id(&self) -> i64 {
        self.producer_id
    }

    /// The entry as it will be merged into the stored one.
    pub fn updated_entry(&self) -> &ProducerStateEntry {
        &self.updated_entry
    }

    /// Transactions begun inside this append.
    pub fn started_transactions(&self) -> &[TxnMetadata] {
        &self.started_transactions
    }

    pub(crate) fn into_parts(self) -> (ProducerStateEntry, Vec<TxnMetadata>) {
        (self.updated_entry, self.started_transactions)
    }

    /// Appends one batch of this producer (kafka-semantics §3.2 dispatch). Returns the transaction a marker completed.
    pub fn append(
        &mut self,
        batch: &RecordBatch,
        first_offset: Option<LogOffsetMetadata>,
        transaction_version: TransactionVersion,
    ) -> Result<Option<CompletedTxn>, ProducerStateError> {
        if !batch.is_control() {
            self.append_data_batch(DataBatch::from_batch(batch, first_offset))?;
            return Ok(None);
        }
        if self.origin == AppendOrigin::Client {
            return Err(ProducerStateError::InvalidRecord {
                reason: format!("control batch at offset {} from a client", batch.base_offset()),
            });
        }
        let records = batch.records()?;
        let Some(first) = records.iter().next() else {
            // Emptied by compaction: nothing to do, but the producer still gets an (empty) entry on update.
            return Ok(None);
        };
        let first = first?;
        let key = ControlKey::decode(first.key)?;
        let commit = match key.control_type {
            types::COMMIT => true,
            types::ABORT => false,
            other => {
                return Err(ProducerStateError::InvalidRecord {
                    reason: format!(
                        "control batch of type {} at offset {} carries producer id {}",
                        record_format::control::type_name(other),
                        batch.base_offset(),
                        self.producer_id
                    ),
                })
            }
        };
        let value = first.value.ok_or_else(|| ProducerStateError::InvalidRecord {
            reason: format!(
                "end-transaction marker at offset {} without a value",
                batch.base_offset()
            ),
        })?;
        let marker = EndTxnMarker::decode(value)?;
        self.append_end_txn_marker(
            EndMarker {
                commit,
                coordinator_epoch: marker.coordinator_epoch,
                producer_epoch: batch.producer_epoch(),
                offset: batch.base_offset(),
                timestamp: first.timestamp,
            },
            transaction_version,
        )
    }

    /// `checkProducerEpoch` (kafka-semantics §3.3).
    fn check_producer_epoch(
        &self,
        epoch: i16,
        offset: i64,
        transaction_version: TransactionVersion,
    ) -> Result<(), ProducerStateError> {
        let current = self.updated_entry.producer_epoch;
        let invalid = if transaction_version.bumps_epoch_per_transaction() {
            epoch <= current
        } else {
            epoch < current
        };
        if !invalid {
            return Ok(());
        }
        // KAFKA-19999: a TV2 marker retried with the same epoch after its transaction closed is written again.
        // KAFKA-20090: likewise at the epoch ceiling, even with a transaction open (epoch exhaustion).
        let retried_marker = transaction_version.bumps_epoch_per_transaction()
            && epoch == current
            && (self.updated_entry.current_txn_first_offset.is_none() || epoch == i16::MAX);
        if retried_marker || self.origin == AppendOrigin::Replication {
            // Replication only warns: the leader already accepted it (the stored epoch may move down).
            return Ok(());
        }
        Err(ProducerStateError::InvalidProducerEpoch {
            producer_id: self.producer_id,
            current,
            got: epoch,
            offset,
        })
    }

    fn out_of_order(&self, epoch: i16, first_seq: i32, reason: String) -> ProducerStateError {
        ProducerStateError::OutOfOrderSequence {
            producer_id: self.producer_id,
            epoch,
            first_sequence: first_seq,
            reason,
        }
    }

    /// `checkSequence`, CLIENT origin only (kafka-semantics §3.4).
    fn check_sequence(&self, epoch: i16, first_seq: i32) -> Result<(), ProducerStateError> {
        if let Some(verification) = &self.verification {
            if verification.supports_epoch_bump && !self.current_entry.has_batches && first_seq != 0 {
                return Err(self.out_of_order(
                    epoch,
                    first_seq,
                    "expected 0 for a transactions-v2 producer without state".into(),
                ));
            }
            if first_seq > verification.lowest_sequence {
                return Err(self.out_of_order(
                    epoch,
                    first_seq,
                    format!(
                        "above the verified lowest sequence {}",
                        verification.lowest_sequence
                    ),
                ));
            }
        }
        if epoch != self.updated_entry.producer_epoch {
            if first_seq != 0 && self.updated_entry.producer_epoch != NO_PRODUCER_EPOCH {
                return Err(self.out_of_order(
                    epoch,
                    first_seq,
                    format!(
                        "expected 0 for new epoch (current {})",
                        self.updated_entry.producer_epoch
                    ),
                ));
            }
            return Ok(());
        }
        let last_seq = if !self.updated_entry.is_empty() {
            self.updated_entry.last_seq()
        } else if epoch == self.current_entry.producer_epoch {
            self.current_entry.last_seq
        } else {
            -1
        };
        if self.current_entry.producer_epoch == NO_PRODUCER_EPOCH || in_sequence(last_seq, first_seq) {
            Ok(())
        } else {
            Err(self.out_of_order(
                epoch,
                first_seq,
                format!("expected {}", increment_sequence(last_seq, 1)),
            ))
        }
    }

    /// Validates and records a data batch (kafka-semantics §3.3–§3.5).
    pub fn append_data_batch(&mut self, batch: DataBatch) -> Result<(), ProducerStateError> {
        let first_offset = batch.first_offset.message_offset;
        self.check_producer_epoch(batch.epoch, first_offset, TransactionVersion::Unknown)?;
        if self.origin == AppendOrigin::Client {
            self.check_sequence(batch.epoch, batch.first_seq)?;
        }
        let offset_delta = batch.last_offset.wrapping_sub(first_offset) as i32;
        self.updated_entry.add_batch(
            batch.epoch,
            batch.last_seq,
            batch.last_offset,
            offset_delta,
            batch.max_timestamp,
        );
        match (self.updated_entry.current_txn_first_offset, batch.is_transactional) {
            (Some(txn_first), false) => Err(ProducerStateError::InvalidTxnState {
                producer_id: self.producer_id,
                reason: format!(
                    "non-transactional batch at offset {first_offset} while a transaction from offset {txn_first} is open"
                ),
            }),
            (None, true) => {
                self.updated_entry.current_txn_first_offset = Some(first_offset);
                self.started_transactions.push(TxnMetadata {
                    producer_id: self.producer_id,
                    first_offset: batch.first_offset,
                    last_offset: None,
                });
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Validates and records an end-transaction marker (kafka-semantics §3.6).
    pub fn append_end_txn_marker(
        &mut self,
        marker: EndMarker,
        transaction_version: TransactionVersion,
    ) -> Result<Option<CompletedTxn>, ProducerStateError> {
        let effective_version = match transaction_version {
            TransactionVersion::Unknown if self.origin == AppendOrigin::Replication => TransactionVersion::V0,
            TransactionVersion::Unknown => {
                return Err(ProducerStateError::UnknownTransactionVersion {
                    producer_id: self.producer_id,
                })
            }
            known => known,
        };
        self.check_producer_epoch(marker.producer_epoch, marker.offset, effective_version)?;
        let current_coordinator_epoch = self.updated_entry.coordinator_epoch;
        if current_coordinator_epoch > marker.coordinator_epoch && self.origin != AppendOrigin::Replication {
            return Err(ProducerStateError::TransactionCoordinatorFenced {
                producer_id: self.producer_id,
                current: current_coordinator_epoch,
                got: marker.coordinator_epoch,
            });
        }
        let completed = self
            .updated_entry
            .current_txn_first_offset
            .map(|first_offset| CompletedTxn {
                producer_id: self.producer_id,
                first_offset,
                last_offset: marker.offset,
                is_aborted: !marker.commit,
            });
        self.updated_entry.update_for_marker(
            marker.producer_epoch,
            marker.coordinator_epoch,
            marker.timestamp,
        );
        Ok(completed)
    }
}
