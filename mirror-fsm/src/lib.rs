//! The mirror partition state machine: read-only mirroring, crash-safe STOPPING with the `MIRROR_PID_RESET`
//! barrier, failback alignment and source verification (ARCHITECTURE.md: the barrier invariants and the STOPPING sequence).
//!
//! The core is sans-IO in the raft-rs manner: [`MirrorPartition`] takes [`Event`]s and returns [`Action`]s, and
//! knows no log, clock, network or randomness. [`MirrorDriver`] executes the actions against a
//! [`partition_log::PartitionLog`] and a [`Fetcher`] (the source side), persisting the machine's state in the
//! partition's metadata so a crash at any point resumes to the same end: log cut at its stable cut, last mirrored
//! offset persisted, what the cut keeps open aborted by markers and exactly one barrier after them
//! ([`stopping`]), and only then writable.

pub mod ahead;
pub mod driver;
pub mod error;
pub mod failover;
pub mod fetcher;
pub mod local;
pub mod machine;
pub mod resume;
pub mod stopping;

pub use driver::{last_mirrored_offset, DriverFaults, MirrorDriver, FETCH_BYTES};
pub use error::DriverError;
pub use failover::{stop_all, StopJob};
pub use fetcher::{
    topic_id_from_text, topic_id_text, DetachedFetch, FetchError, FetchLimits, FetchResponse,
    FetchedPartition, Fetcher, GroupOffset, ListedTopic, PartitionFetch, SourceAcl, SourceAcls,
    SourceConfigs, SourceDescription, Sources,
};
pub use local::{shared, LocalFetcher, SharedLog};
pub use machine::{
    transition_allowed, Action, Event, EventKind, Failure, LogFailure, MirrorPartition, MirrorState, Session,
    StateKind, StopStep, TransitionError,
};
pub use stopping::{abort_markers, read_tail, StableCut, StoppingDeparture, StoppingTail};
