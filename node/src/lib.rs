//! `node`: one cluster node with no socket. It holds topics and their partition logs, the transaction
//! coordinator with the driver that makes its outcomes durable and delivers its markers, the group offset store
//! and housekeeping, all on one storage backend and an injected [`Clock`]; it answers Kafka's request values
//! (`kafka-protocol` structs) with response values.
//!
//! `mirrorlog serve` is this node behind the wire front end (`broker`: framing, shape checks, version table,
//! TCP). `mirrorlog simulate` runs several of them on a simulated clock and speaks the same request values to
//! them, so the simulator exercises the code users run.
//!
//! - [`node`] — topics, partition logs, the coordinator's driver (persist, deliver markers, re-send, report),
//!   housekeeping, closing.
//! - [`offsets`] — the group offset store (OffsetCommit, OffsetFetch, TxnOffsetCommit).
//! - [`membership`] — consumer groups' classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): the
//!   `group-coordinator` crate's, which the node drives (stores, restores, ticks).
//! - `api` — the answer to each request, as methods of [`Node`].
//! - [`mirror`] — mirror links: the node as a mirror destination (registry, drivers and fetchers, the
//!   administration actions).
//! - [`clock`] — the injected clock and the wall clock.
//!
//! What it deliberately does not know: sockets, frames, request headers and the advertised version table.

mod api;
mod cleaner_throttle;
pub mod clock;
mod compaction;
pub mod config;
mod error;
mod log_passes;
pub use group_coordinator::membership;
pub mod mirror;
pub mod node;
pub mod offsets;
mod retention;
mod topic_admin;
mod topic_configs;
pub mod users;
mod wakeups;

pub use api::{
    create_topics_given_twice, delete_topics_given_twice, metadata_by_id, metadata_refused_whole, NodeGauges,
};
pub use clock::{Clock, SystemClock};
pub use compaction::Compacted;
pub use config::NodeConfig;
pub use error::NodeError;
#[cfg(feature = "simulator")]
pub use node::DeliveredMarker;
pub use node::{Endpoint, Node, PartitionSlot, CLUSTER_METADATA_TOPIC, TXN_STATE_PARTITION};
pub use retention::RetentionDeleted;
pub use topic_configs::ConfigRefusal;
