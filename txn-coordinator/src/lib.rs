//! Kafka's transaction coordinator and producer-id manager, sans-IO: time is an argument, and persistence is
//! expressed as steps the caller carries out (the `mirror-fsm` pattern).
//!
//! This first part is the producer-id manager ([`producer_ids`]): ids handed out from blocks of
//! [`producer_ids::BLOCK_SIZE`], each block reserved durably before any id of it is issued, so a restarted
//! coordinator never issues an id twice; and [`producer_ids::ProducerIdManager::advance_past`], which moves the
//! allocator past a given id — a destination cluster, after failover, then never issues an id that a
//! still-running source producer holds (the collision the `MIRROR_PID_RESET` barrier does not cover; Redpanda's
//! answer). [`durable`] drives it over a partition's metadata through the storage trait.
//!
//! [`state`] holds the eight states of a transactional id with Kafka's allowed transitions. The transaction
//! metadata, the request handlers and marker actions follow with the rest of issue 11.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod durable;
pub mod error;
pub mod producer_ids;
pub mod state;

pub use error::CoordinatorError;
pub use producer_ids::{Issue, ProducerIdManager, Reservation, BLOCK_SIZE};
pub use state::TxnState;
