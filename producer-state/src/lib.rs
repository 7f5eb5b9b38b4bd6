//! Kafka's producer-state manager, rule for rule, with the `MIRROR_PID_RESET` barrier.
//!
//! Idempotence and transactions in Kafka live in each partition's producer-state manager (PSM): per producer the
//! epoch, the last five batches (for duplicate detection and sequence checks), the coordinator epoch and the
//! open transaction; per partition the open and decided transactions that hold back the last stable offset. This
//! crate implements `kafka-semantics` §2–§6 and §8–§9:
//!
//! - [`ProducerAppendInfo`] validates one producer's batches by [`AppendOrigin`] (epochs, sequences,
//!   transactions, end markers by [`TransactionVersion`]);
//! - [`ProducerStateManager`] holds the state: transactions, first unstable offset and LSO, expiration, late
//!   transactions, verification entries; [`Reload`] is the one snapshot reload protocol (sans-IO: the partition
//!   log carries its steps out over storage, the [`SnapshotStore`] forms over a store);
//! - [`ProducerStateManager::plan_append`] / [`ProducerStateManager::commit`] are the log-level path of one append:
//!   duplicate answers, client rules, barriers ([`BarrierScope`]), the aborted-transaction index;
//! - [`snapshot`] and [`txn_index`] (re-exported from `record-format`) are Kafka's byte formats; [`error`] the error names, codes and client classes;
//! - [`replay()`] is the one REPLICATION-origin replay every rebuild uses; [`summary`] prints the state. The scenario-script runner is the `psm-script` crate.
//!
//! No I/O, no clock, no randomness: time is an argument and snapshot storage is the caller's.

pub mod append;
pub mod barrier;
pub mod entry;
pub mod error;
pub mod manager;
pub mod plan;
pub mod reload;
pub mod replay;
pub mod snapshot;
pub mod summary;
mod table;
/// The aborted-transaction index entry format (defined in `record-format`, shared with the storage layer).
pub use record_format::txn_index;

pub use append::{AppendOrigin, DataBatch, EndMarker, ProducerAppendInfo};
pub use barrier::BarrierScope;
pub use entry::{
    BatchMetadata, CompletedTxn, LogOffsetMetadata, ProducerStateEntry, TxnMetadata, VerificationStateEntry,
};
pub use error::{ClientErrorClass, KafkaError, ProducerStateError};
/// Kafka's identities and transaction version, defined in `kafka-types` (re-exported for callers of this crate).
pub use kafka_types::{
    ids, ClusterId, CoordinatorEpoch, ProducerEpoch, ProducerId, TransactionVersion, TransactionalId,
};
pub use manager::{CorruptSnapshot, ProducerStateManager, PsmConfig, ReloadPlan, ReloadReport};
pub use plan::{AppendDecision, AppendEffects, AppendPlan, Applied, BarrierReset};
pub use reload::{Reload, ReloadStep};
pub use replay::{replay, ReplayCounts, ReplayError, ReplayStep, Replayed};
pub use snapshot::{MemorySnapshotStore, SnapshotStore};
pub use summary::StateSummary;
pub use txn_index::AbortedTxn;
