//! The node's error enum: what stops it from opening or carrying on (request-level failures are Kafka error
//! codes in responses, not these).

/// Why the node could not open, or an operation of its own (housekeeping, closing, a coordinator reload) failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The storage configuration could not be opened.
    #[error("storage: {0}")]
    Config(#[from] storage_config::ConfigError),
    /// A storage operation failed.
    #[error("storage: {0}")]
    Storage(#[from] storage::StorageError),
    /// A partition log could not be opened or closed.
    #[error("partition log: {0}")]
    Log(#[from] partition_log::LogError),
    /// The transaction coordinator's state could not be read or written.
    #[error("transaction coordinator: {0}")]
    Coordinator(#[from] txn_coordinator::CoordinatorError),
    /// The group offset store is corrupt.
    #[error("group offsets: {0}")]
    Offsets(String),
    /// A consumer group's membership is too large to store.
    #[error("group {group:?}: its membership takes {size} bytes, more than a stored group may")]
    GroupTooLarge {
        /// The group.
        group: String,
        /// The size of its record.
        size: usize,
    },
    /// A topic given at start-up is not valid.
    #[error("topic {name:?}: {reason}")]
    Topic {
        /// The topic.
        name: String,
        /// Why.
        reason: String,
    },
    /// The SCRAM credential store cannot be read or written.
    #[error("security: {0}")]
    Security(String),
    /// The mirror link registry cannot be read or written.
    #[error("mirror links: {0}")]
    Mirror(String),
}
