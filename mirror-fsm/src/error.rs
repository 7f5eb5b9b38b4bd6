//! The mirror layer's error enum.

use partition_log::LogError;

use crate::machine::TransitionError;

/// Why a mirror operation failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// The state does not accept the event; nothing changed.
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// The partition log (its storage) failed; the partition is FAILED if that could be recorded.
    #[error(transparent)]
    Log(#[from] LogError),
    /// A persisted mirror record does not decode.
    #[error("corrupt mirror record {key:?}: {reason}")]
    CorruptRecord {
        /// The metadata key.
        key: String,
        /// What is wrong.
        reason: String,
    },
}
