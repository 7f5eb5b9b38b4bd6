//! The storage a partition log needs, behind traits every backend implements.
//!
//! A [`Storage`] holds many partitions, each a [`PartitionStorage`]: a log of record batches stored as raw bytes
//! (never re-encoded), producer-state snapshots by offset, the aborted-transaction index, and small metadata
//! records written atomically. Backends: [`MemoryStorage`] here (the reference), `storage-fs` (Kafka's own
//! directory layout), `storage-sled`, `storage-rocks` (both through the shared ordered key-value layout in
//! [`kv`]). Every backend runs the conformance suite of `storage-testkit`.
//!
//! The layers: a backend implements the blocking traits of [`blocking`]; [`checked::Checked`] enforces the
//! rules below for every backend; [`offload`] implements the async traits once, running each call off the
//! executor (ADR 0010).
//!
//! Rules every backend keeps (and the suite checks):
//!
//! - **Offsets only grow.** An append's first batch starts at or after the log end offset and each batch after
//!   the previous one's last offset (gaps are allowed, as in a compacted Kafka log).
//! - **Reads return whole batches**: from the batch holding the requested offset, up to a byte budget, but always
//!   at least one batch when there is one.
//! - **Durability is explicit.** After `flush(Durability::Sync)` returns, everything appended before it survives a
//!   crash; metadata and snapshot writes are durable when they return. A failed sync **poisons** the partition:
//!   every later write fails with [`StorageError::Poisoned`] until the partition is reopened.
//! - **Inspection never writes**: [`Storage::open_read_only`] repairs nothing and refuses writes.
//! - **Truncation is at batch boundaries**; the aborted-transaction index is cut with the log.

pub mod blocking;
pub mod checked;
pub mod error;
pub mod flush_group;
pub mod id;
pub mod kv;
pub mod memory;
pub mod offload;
pub mod partition;
pub mod report;
pub mod segments;

pub use blocking::{BlockingPartition, BlockingStore, OpenMode};
pub use error::StorageError;
pub use id::PartitionId;
pub use memory::MemoryStorage;
pub use partition::{Durability, PartitionReader, PartitionStorage, StagedRewrite, StagingCleanup, Storage};
pub use record_format::AbortedTxn;
pub use report::OpenReport;
pub use segments::SegmentSummary;

/// Shorthand for this crate's results.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;
