//! The storage layer's error enum.

use std::sync::Arc;

use crate::id::PartitionId;

/// Why a storage operation failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The topic or partition number is not a valid Kafka partition name.
    #[error("invalid partition id {id:?}: {reason}")]
    InvalidPartitionId {
        /// What was given.
        id: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// No such partition.
    #[error("partition {0} does not exist")]
    NotFound(PartitionId),
    /// `create` of a partition that exists.
    #[error("partition {0} already exists")]
    AlreadyExists(PartitionId),
    /// A batch would not follow the log (offsets must grow).
    #[error("batch at offset {base_offset} does not follow offset {expected_at_least} (offsets must grow)")]
    NonMonotonicOffsets {
        /// The smallest acceptable base offset.
        expected_at_least: i64,
        /// The batch's base offset.
        base_offset: i64,
    },
    /// An offset outside `[log_start, log_end]`.
    #[error("offset {offset} is outside the log [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: i64,
        /// Log start offset.
        log_start: i64,
        /// Log end offset.
        log_end: i64,
    },
    /// Truncation inside a batch.
    #[error("offset {offset} is inside the batch {base_offset}..={last_offset}; truncation is at batch boundaries")]
    NotABatchBoundary {
        /// The offset asked for.
        offset: i64,
        /// The straddling batch's first offset.
        base_offset: i64,
        /// Its last offset.
        last_offset: i64,
    },
    /// An aborted-transaction entry that does not follow the previous one.
    #[error(
        "aborted transaction ending at {last_offset} does not follow the previous one ending at {previous} \
         (entries grow by last offset, then first offset)"
    )]
    AbortedTxnOutOfOrder {
        /// The new entry's last offset.
        last_offset: i64,
        /// The previous entry's last offset.
        previous: i64,
    },
    /// A metadata key that cannot be stored.
    #[error("invalid metadata key {key:?}: {reason}")]
    InvalidMetadataKey {
        /// The key.
        key: String,
        /// Why.
        reason: &'static str,
    },
    /// A stored batch or file failed its checks.
    #[error("corrupt data in {what}: {reason}")]
    Corrupt {
        /// Which file or record.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// An I/O error.
    #[error("I/O error {context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error (shared so the enum stays `Clone`).
        source: Arc<std::io::Error>,
    },
    /// An earlier sync failed; the partition (or store) refuses writes until reopened.
    #[error("storage is poisoned after a failed sync ({reason}); reopen it to recover")]
    Poisoned {
        /// The failure that poisoned it.
        reason: String,
    },
    /// A write to a partition opened read-only (for inspection).
    #[error("partition {partition} is open read-only")]
    ReadOnly {
        /// Which partition.
        partition: PartitionId,
    },
    /// A change to a store opened read-only (for inspection): creating or deleting a partition, or opening one
    /// for writing.
    #[error("the {backend} store is open read-only: cannot {operation}")]
    ReadOnlyStore {
        /// Which backend.
        backend: &'static str,
        /// What was refused (`create partition orders-0`, …).
        operation: String,
    },
    /// An error reported by an embedded database backend.
    #[error("{backend} error: {message}")]
    Backend {
        /// Which backend.
        backend: &'static str,
        /// Its message.
        message: String,
    },
    /// The configuration names a backend this build does not include.
    #[error("storage backend {backend:?} is not in this build; rebuild with `--features {feature}`")]
    BackendNotCompiled {
        /// The backend named.
        backend: String,
        /// The cargo feature that adds it.
        feature: &'static str,
    },
    /// The configuration is not valid.
    #[error("invalid storage configuration: {0}")]
    Config(String),
    /// A cleaner's rewrite that does not fit the log: a range outside it or not on unit boundaries, or a batch
    /// outside the range or out of order.
    #[error("cannot rewrite offsets [{from}, {to}): {reason}")]
    InvalidRewrite {
        /// The range's start.
        from: i64,
        /// The range's end.
        to: i64,
        /// What is wrong.
        reason: String,
    },
}

impl StorageError {
    /// True for failures after which nobody knows what reached the disk (I/O and database errors): a write that
    /// fails this way poisons its partition.
    pub fn poisons(&self) -> bool {
        matches!(
            self,
            StorageError::Io { .. } | StorageError::Backend { .. } | StorageError::Poisoned { .. }
        )
    }

    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        StorageError::Io {
            context: context.into(),
            source: Arc::new(source),
        }
    }
}
