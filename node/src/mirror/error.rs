//! Why a mirror administration action failed, with the category the admin answer carries.

use mirror_fsm::{DriverError, FetchError};

use crate::NodeError;

/// A failed action.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// The request names something invalid (a link or topic name, an empty topic list, this cluster as source).
    #[error("{0}")]
    InvalidRequest(String),
    /// No link of that name.
    #[error("no mirror link {0:?}")]
    UnknownLink(String),
    /// A topic the link does not mirror, or one missing where it must exist.
    #[error("{0}")]
    UnknownTopic(String),
    /// The link, or a topic it would create, exists already.
    #[error("{0}")]
    AlreadyExists(String),
    /// The source cannot be reached, or refused.
    #[error("source {address}: {error}")]
    Source {
        /// The source's address.
        address: String,
        /// What it said.
        error: FetchError,
    },
    /// Waiting for the mirror to catch up took longer than allowed.
    #[error("{0}")]
    Timeout(String),
    /// Partitions did not end where the action takes them (FAILED, or not STOPPED after a failover).
    #[error("{0}")]
    Failed(String),
    /// The node's storage failed.
    #[error(transparent)]
    Node(#[from] NodeError),
    /// A partition's mirror driver failed on its storage.
    #[error(transparent)]
    Driver(#[from] DriverError),
}

impl MirrorError {
    /// The category of the admin answer (`AdminFailure::category`).
    pub fn category(&self) -> &'static str {
        match self {
            MirrorError::InvalidRequest(_) => "invalid_request",
            MirrorError::UnknownLink(_) => "unknown_link",
            MirrorError::UnknownTopic(_) => "unknown_topic",
            MirrorError::AlreadyExists(_) => "already_exists",
            MirrorError::Source { .. } => "source",
            MirrorError::Timeout(_) => "timeout",
            MirrorError::Failed(_) => "failed",
            MirrorError::Node(_) | MirrorError::Driver(_) => "storage",
        }
    }
}
