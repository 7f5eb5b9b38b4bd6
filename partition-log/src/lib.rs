//! Kafka's partition log (the `UnifiedLog` role) over any storage backend.
//!
//! The producer-state manager decides; this crate makes its decisions durable and consistent
//! (`kafka-semantics` §7). A [`PartitionLog`] owns one partition's [`storage::PartitionStorage`] and its
//! [`producer_state::ProducerStateManager`]:
//!
//! - **append by origin** ([`PartitionLog::append_as_leader`] for CLIENT and COORDINATOR,
//!   [`PartitionLog::append_as_follower`] for REPLICATION): producer state is analysed before anything is written,
//!   a client duplicate is answered with the original offsets and nothing written, completed transactions add
//!   aborted-transaction index entries with Kafka's LSO, the map end offset follows every append;
//! - **read-only mode** for mirrored partitions: CLIENT appends fail with [`LogError::ReadOnlyTopic`];
//! - **high watermark, first unstable offset and LSO**, and fetches by [`Isolation`] level;
//! - **segments and snapshots**: a logical segment rolls by size and each roll takes a producer snapshot, as does
//!   a clean close; retention by time, size and log start offset ([`retention`]); producer expiration driven by an explicit `now`;
//! - **truncation** and **recovery** rebuild producer state as Kafka's `rebuildProducerState` does: the latest
//!   readable snapshot, then the log replayed with REPLICATION origin, barriers applied by the same rule as live
//!   appends;
//! - [`ReplicaSet`]: a leader and its in-cluster followers, the high watermark moved by their acknowledgement.
//!
//! The Kafka-semantics scenario suite every storage backend runs lives in `partition-log-testkit`.
//! The crate never names a backend: it works on `Box<dyn PartitionStorage>`.

pub mod cleaner;
pub mod config;
pub mod error;
pub mod fetch;
pub mod log;
pub mod replication;
pub mod retention;

pub use cleaner::{CleanPlan, CleanStep, CleanWork, Cleaned, CompactionPolicy};
pub use config::LogConfig;
pub use error::LogError;
pub use fetch::{FetchResult, Isolation};
pub use log::{AppendOutcome, PartitionLog, RecoveryReport};
pub use replication::{batches_from, common_prefix_end, ReplicaSet};
pub use retention::{Retained, RetentionBreach, RetentionPolicy};

/// Shorthand for this crate's results.
pub type Result<T, E = LogError> = std::result::Result<T, E>;
