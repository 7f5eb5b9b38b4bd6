//! The partition log's error enum.

use producer_state::{KafkaError, ProducerStateError};
use record_format::DecodeError;
use storage::{PartitionId, StorageError};

/// Why a partition-log operation failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// A client append, or this cluster's transaction marker, to a partition that is being mirrored; nothing was
    /// written.
    #[error("partition {partition} is read-only while it is mirrored (READ_ONLY_TOPIC)")]
    ReadOnlyTopic {
        /// The partition.
        partition: PartitionId,
    },
    /// The producer-state manager refused the append (sequence, epoch, transaction rules); nothing was written.
    #[error(transparent)]
    ProducerState(#[from] ProducerStateError),
    /// The storage backend failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A batch that is structurally unacceptable for its origin (Kafka's INVALID_RECORD); nothing was written.
    #[error("invalid batch at position {index} of the append: {reason}")]
    InvalidBatch {
        /// Position of the batch in the append.
        index: usize,
        /// What is wrong.
        reason: String,
    },
    /// A batch whose bytes do not decode.
    #[error("corrupt batch at position {index} of the append: {source}")]
    CorruptBatch {
        /// Position of the batch in the append.
        index: usize,
        /// The decoding error.
        source: DecodeError,
    },
    /// An offset outside what the operation allows.
    #[error("offset {offset} is outside [{lower}, {upper}] for {operation}")]
    OffsetOutOfRange {
        /// What was asked.
        operation: &'static str,
        /// The offset given.
        offset: i64,
        /// Lowest allowed.
        lower: i64,
        /// Highest allowed.
        upper: i64,
    },
    /// Replaying the stored log into producer state failed (the log holds a batch the rules refuse).
    #[error("recovery failed at offset {offset}: {source}")]
    Recovery {
        /// Where the replay stopped.
        offset: i64,
        /// Why.
        source: ProducerStateError,
    },
    /// A metadata record written by this crate does not decode.
    #[error("corrupt log metadata {key:?}: {reason}")]
    CorruptMetadata {
        /// The key.
        key: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The log cleaner cannot make progress (its offset map cannot hold one unit's keys) or read what it cleans.
    #[error("cannot compact the log: {reason}")]
    Compaction {
        /// Why.
        reason: String,
    },
    /// An earlier failure left the log's derived state behind its records (Kafka takes the log directory
    /// offline); reopen the log to recover.
    #[error("the log is offline after an earlier failure ({reason}); reopen it to recover")]
    Offline {
        /// The failure.
        reason: String,
    },
}

impl LogError {
    /// The Kafka error a produce or fetch response would carry, when there is one.
    pub fn kafka_error(&self) -> Option<KafkaError> {
        match self {
            LogError::ProducerState(error) => Some(error.kafka_error()),
            LogError::InvalidBatch { .. } | LogError::CorruptBatch { .. } => Some(KafkaError::InvalidRecord),
            LogError::ReadOnlyTopic { .. } => Some(KafkaError::ReadOnlyTopic),
            _ => None,
        }
    }
}
