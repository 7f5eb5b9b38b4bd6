//! The driver's error enum: what stops a scenario (as opposed to an error code, which is an observation).

/// Why a scenario could not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// The connection failed, timed out, or an answer did not decode.
    #[error(transparent)]
    Link(#[from] mirror_link::LinkError),
    /// A call was made without a connection (a bug of the driver).
    #[error("no connection to the broker")]
    NotConnected,
    /// A batch could not be built or a fetched one not decoded.
    #[error("record batch: {0}")]
    Batch(String),
    /// A setup step (a topic created, a transaction begun) did not succeed, so the scenario cannot go on.
    #[error("setup: {0}")]
    Setup(String),
    /// No scenario has this name.
    #[error("no scenario is named {0:?} (`kafka-diff --list` names them)")]
    UnknownScenario(String),
}
