//! The producer-state error taxonomy.
//!
//! [`ProducerStateError`] is what validation returns; each variant carries the values that made it fail and maps
//! to a [`KafkaError`] (name + wire code, from `kafka-types`, re-exported here) through
//! [`ProducerStateError::kafka_error`].

pub use kafka_types::{ClientErrorClass, KafkaError};

/// Why an append (or a snapshot) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerStateError {
    /// The first sequence of a batch does not follow the producer's state.
    #[error("out of order sequence for producer {producer_id} epoch {epoch}: first sequence {first_sequence}, {reason}")]
    OutOfOrderSequence {
        /// Producer id.
        producer_id: i64,
        /// The batch's epoch.
        epoch: i16,
        /// The batch's first sequence.
        first_sequence: i32,
        /// What was expected.
        reason: String,
    },
    /// The batch (or marker) epoch is older than the stored one.
    #[error("invalid producer epoch for producer {producer_id}: {got} against current {current} at offset {offset}")]
    InvalidProducerEpoch {
        /// Producer id.
        producer_id: i64,
        /// The stored epoch.
        current: i16,
        /// The batch's epoch.
        got: i16,
        /// Offset of the batch or marker.
        offset: i64,
    },
    /// Transaction state does not allow this append.
    #[error("invalid transaction state for producer {producer_id}: {reason}")]
    InvalidTxnState {
        /// Producer id.
        producer_id: i64,
        /// What is inconsistent.
        reason: String,
    },
    /// A marker from an older transaction coordinator.
    #[error(
        "transaction coordinator fenced for producer {producer_id}: coordinator epoch {got} below {current}"
    )]
    TransactionCoordinatorFenced {
        /// Producer id.
        producer_id: i64,
        /// The stored coordinator epoch.
        current: i32,
        /// The marker's coordinator epoch.
        got: i32,
    },
    /// The batch is not acceptable for this origin.
    #[error("invalid record: {reason}")]
    InvalidRecord {
        /// What is wrong.
        reason: String,
    },
    /// A leader-side append of a marker without a known transaction version (Kafka: IllegalArgumentException).
    #[error(
        "transaction marker for producer {producer_id} appended by the leader without a transaction version"
    )]
    UnknownTransactionVersion {
        /// Producer id.
        producer_id: i64,
    },
    /// The batch could not be decoded.
    #[error("undecodable batch: {0}")]
    Decode(#[from] record_format::DecodeError),
    /// A producer snapshot file is corrupt.
    #[error("corrupt producer snapshot: {reason}")]
    CorruptSnapshot {
        /// What is wrong.
        reason: String,
    },
}

impl ProducerStateError {
    /// The Kafka error a broker would answer with.
    pub fn kafka_error(&self) -> KafkaError {
        match self {
            ProducerStateError::OutOfOrderSequence { .. } => KafkaError::OutOfOrderSequenceNumber,
            ProducerStateError::InvalidProducerEpoch { .. } => KafkaError::InvalidProducerEpoch,
            ProducerStateError::InvalidTxnState { .. } => KafkaError::InvalidTxnState,
            ProducerStateError::TransactionCoordinatorFenced { .. } => {
                KafkaError::TransactionCoordinatorFenced
            }
            ProducerStateError::InvalidRecord { .. } | ProducerStateError::Decode(_) => {
                KafkaError::InvalidRecord
            }
            ProducerStateError::UnknownTransactionVersion { .. }
            | ProducerStateError::CorruptSnapshot { .. } => KafkaError::UnknownServerError,
        }
    }
}
