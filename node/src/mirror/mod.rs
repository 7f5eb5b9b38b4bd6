//! Mirror links: this node as the destination of KIP-1279 cluster mirroring. A link names a source cluster
//! (reached through [`mirror_fsm::Sources`]: over the Kafka protocol in `serve`) and the topics mirrored from it;
//! each mirrored partition is read-only, fetched batch for batch by its `mirror-fsm` driver, and fails over
//! through STOPPING with the `MIRROR_PID_RESET` barrier.
//!
//! - [`registry`] — the durable list of links ([`LinkRecord`]).
//! - [`links`] — [`MirrorLinks`]: the drivers and fetchers at work, recovered at open and stepped by their owner.
//! - `actions` — the administration actions on them (create, reverse, list, describe, pause, resume, failover,
//!   promote, delete).
//! - [`link_config`] — a link's settings as Kafka-style keys (`mirror alter`, `describe --config`).
//! - [`acl_sync`] — a link's ACL rules: which of the source's ACLs are created here.
//! - `config_sync` — a mirror topic's configs taken from its source's topic.
//! - [`local`] — [`NodeSources`]: other nodes of the process as sources (in-process fetchers).
//! - [`probes`] — whether a source answers, asked before its FAILED partitions are retried (rounds in flight).
//! - [`round_errors`] — why a round failed, by name (`describe --json`, the metrics).
//! - [`groups`] — the sources' consumer group offsets, copied every few seconds.
//! - [`source_topics`] — the source's topics watched: partitions added there are added here, topics matching a
//!   link's filters are discovered, a topic replaced there is a link warning.
//! - [`filters`] — a link's include/exclude patterns for topics and groups ([`filters::Patterns`]).
//! - [`error`] — [`MirrorError`] and its answer categories.
//!
//! The administration requests and answers ([`AdminRequest`], [`AdminResponse`]) are `mirror-admin`'s (ADR 0061).

pub mod acl_sync;
mod actions;
mod config_sync;
pub mod error;
pub mod filters;
pub mod groups;
pub mod link_config;
pub mod links;
pub mod local;
pub mod probes;
pub mod registry;
pub mod round_errors;
pub mod source_topics;

pub use actions::{SourceAnswer, SourceQuestion};
pub use error::MirrorError;
pub use links::{MirrorLinks, RoundsAhead};
pub use local::{check_topic_id, describe_node, NodeFetcher, NodeSources};
pub use mirror_admin::{AdminFailure, AdminRequest, AdminResponse, ConfigEntry, LinkStatus, PartitionStatus};
pub use registry::{LinkRecord, LinkSettings, TopicRecord, MIRROR_LINKS_PARTITION};
