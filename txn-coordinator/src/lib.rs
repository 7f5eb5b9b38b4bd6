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
//! [`state`] holds the eight states of a transactional id with Kafka's allowed transitions; [`coordinator`] the
//! request handling (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, marker acknowledgements,
//! timeouts, transactional-id expiration, recovery from records), sans-IO: every request returns the records to
//! make durable before its answer goes out, and the markers to write; [`log`] stores those records as record
//! batches in a partition through the storage trait ([`DurableCoordinator`]: persist, then answer) and rebuilds
//! the coordinator from them. EndTxn speaks transaction versions 1 and 2 ([`TransactionVersion`]; KIP-890's
//! epoch bump per transaction).
//!
//! # What clients do with the coordinator's errors
//!
//! The simulator's application loop implements these policies (kafka-semantics §9; `ClientErrorClass` in
//! `kafka-types` encodes the producer column):
//!
//! | error (code) | Kafka's producer (`TransactionManager`, 4.x) | Kafka Streams after KAFKA-16699 (3.8+) |
//! |---|---|---|
//! | `PRODUCER_FENCED` (90) | fatal: the producer must be closed | task migrated: close dirty, new producer, resume from committed offsets |
//! | `INVALID_PRODUCER_ID_MAPPING` (49) | fatal since KAFKA-18019 (4.0); before, abortable-if-possible | task migrated, like `PRODUCER_FENCED` (before 3.8: fatal for the thread) |
//! | `INVALID_PRODUCER_EPOCH` (47) | from the coordinator: mapped to fenced (fatal); from a produce: abortable | task migrated |
//! | `CONCURRENT_TRANSACTIONS` (51) | retriable: back off and retry the request | retried inside the producer |
//! | `INVALID_TXN_STATE` (48) | abortable | the transaction is aborted |
//! | `TRANSACTION_ABORTABLE` (120) | abortable | the transaction is aborted |
//! | `INVALID_TRANSACTION_TIMEOUT` (50), `INVALID_REQUEST` (42) | fatal (a configuration or client bug) | fatal |

pub mod coordinator;
pub mod durable;
pub mod error;
pub mod log;
pub mod producer_ids;
pub mod state;

pub use coordinator::{
    epoch_exhausted, offsets_partition_for, Coordinator, CoordinatorConfig, MarkerFailure, MarkerRequest,
    Outcome, TxnMetadata, Write,
};
pub use error::CoordinatorError;
pub use log::DurableCoordinator;
pub use producer_ids::{Issue, ProducerIdManager, Reservation, BLOCK_SIZE};
pub use state::TxnState;
