//! The coordinator layer's error enum.

/// Why a coordinator operation failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CoordinatorError {
    /// Every producer id below `i64::MAX` has been reserved.
    #[error("producer ids are exhausted (next would be {next})")]
    ProducerIdsExhausted {
        /// The id that would have come next.
        next: i64,
    },
    /// `advance_past` was asked for an id that is not a producer id.
    #[error("{0} is not a producer id (ids are 0..i64::MAX)")]
    NotAProducerId(i64),
    /// The persisted producer-id reservation does not decode.
    #[error("corrupt producer-id reservation record: {0}")]
    CorruptReservation(String),
    /// A transaction-state record does not decode.
    #[error("corrupt transaction-state log: {0}")]
    CorruptTxnLog(String),
    /// The storage the coordinator persists through failed.
    #[error(transparent)]
    Storage(#[from] storage::StorageError),
}
