//! The backend side of the storage contract: plain blocking traits.
//!
//! A backend (memory, fs, sled, rocks) implements [`BlockingStore`] and [`BlockingPartition`]: ordinary
//! synchronous methods that may block on disk. It does **not** implement the async [`crate::Storage`] /
//! [`crate::PartitionStorage`] traits itself; `storage` does that once for every backend
//! ([`crate::offload`]), running each call on tokio's blocking pool so no executor thread waits on an fsync, a
//! recovery scan or a database write, and wrapping each partition in [`crate::checked::Checked`], which enforces
//! the contract's rules (offsets only grow, keys, index order, poisoning, read-only handles) before the backend
//! sees a call. A backend may therefore assume that:
//!
//! - `append` batches follow the log end and each other;
//! - `read` starts inside `[log_start, log_end]`;
//! - `truncate_to` cuts strictly inside `(log_start, log_end)` (the wrapper turns the other cases into nothing or
//!   `truncate_fully_and_start_at`); it still checks the batch boundary, which only it can see;
//! - `delete_before` moves the start strictly forward and not past the log end;
//! - `append_aborted_txn` entries follow the previous one; metadata keys are valid;
//! - no mutating call arrives on a read-only or poisoned handle.

use bytes::Bytes;
use record_format::{AbortedTxn, BatchBuffers, RecordBatch};

use crate::id::PartitionId;
use crate::partition::Durability;
use crate::report::OpenReport;
use crate::segments::{SegmentSummary, UNIT_SCAN_BYTES};
use crate::Result;

/// How a partition is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpenMode {
    /// For writing: a torn or corrupt tail is cut and indexes are rebuilt (reported in [`OpenReport`]).
    ReadWrite,
    /// For inspection: nothing on disk changes; what a read-write open would repair is reported, and reads stop
    /// before it. Every mutating call fails with [`crate::StorageError::ReadOnly`].
    ReadOnly,
}

/// A store of many partitions, as a backend implements it (blocking).
pub trait BlockingStore: Send + Sync + 'static {
    /// Creates an empty partition starting at offset 0.
    fn create(&self, id: &PartitionId) -> Result<Box<dyn BlockingPartition>>;
    /// Opens an existing partition in `mode`.
    fn open(&self, id: &PartitionId, mode: OpenMode) -> Result<Box<dyn BlockingPartition>>;
    /// Every partition, in order.
    fn list(&self) -> Result<Vec<PartitionId>>;
    /// Removes a partition and everything in it.
    fn delete(&self, id: &PartitionId) -> Result<()>;
    /// True when no call can block on I/O (the in-memory backend): calls then run on the caller's thread,
    /// since handing them to another thread would only add its cost.
    fn never_blocks(&self) -> bool {
        false
    }
}

/// One partition, as a backend implements it (blocking). See the module docs for what the caller guarantees.
pub trait BlockingPartition: Send + 'static {
    /// Which partition.
    fn id(&self) -> &PartitionId;
    /// First offset still readable.
    fn log_start_offset(&self) -> i64;
    /// Offset after the last batch.
    fn log_end_offset(&self) -> i64;
    /// What opening found and repaired (or, read-only, would repair).
    fn open_report(&self) -> OpenReport {
        OpenReport::default()
    }

    /// True when `append` usually does no more than copy bytes — into the operating system's page cache
    /// (storage-fs) or into memory held for a later database write (the key-value layout's written-behind
    /// appends, ADR 0042) — so it may run on the caller's thread: handing a microsecond's work to another thread
    /// costs more than the work. [`append_is_cheap`](Self::append_is_cheap) decides per append. The default
    /// (false) is the safe answer: every call runs off the executor.
    fn appends_are_cheap(&self) -> bool {
        false
    }

    /// Whether this append is one of the cheap ones [`appends_are_cheap`](Self::appends_are_cheap) promises (by
    /// default, whenever appends are): a backend whose append may sometimes do more (storage-fs rolls a full
    /// segment: files created, the old segment and the directory synced; the key-value layout writes its held
    /// appends once they reach their bound) says no for that append, and it runs off the executor.
    fn append_is_cheap(&self, batches: &[RecordBatch]) -> bool {
        let _ = batches;
        self.appends_are_cheap()
    }

    /// True when reads come from memory or the page cache (no database), so they may run on the caller's thread.
    fn reads_are_cheap(&self) -> bool {
        false
    }

    /// Appends batches that follow the log.
    fn append(&mut self, batches: &[RecordBatch]) -> Result<()>;
    /// [`append`](Self::append) of batches sliced from `buffers` ([`BatchBuffers`]): a backend that writes bytes
    /// may write batches lying back to back in one buffer with one write. By default the buffers go unused.
    fn append_with_buffers(&mut self, batches: &[RecordBatch], buffers: &BatchBuffers) -> Result<()> {
        let _ = buffers;
        self.append(batches)
    }
    /// Whole batches from the one holding `from_offset`, up to `max_bytes` (at least one when one exists).
    fn read(&self, from_offset: i64, max_bytes: usize) -> Result<Vec<RecordBatch>>;
    /// [`read`](Self::read), with the buffers the batches were sliced from (none by default).
    fn read_with_buffers(
        &self,
        from_offset: i64,
        max_bytes: usize,
    ) -> Result<(Vec<RecordBatch>, BatchBuffers)> {
        Ok((self.read(from_offset, max_bytes)?, BatchBuffers::default()))
    }
    /// Up to `max` retention units ([`SegmentSummary`]), oldest first, from the one holding `from_offset`
    /// (inside `[log_start, log_end)`). By default each batch is a unit, listed by reading the batches.
    fn segments(&self, from_offset: i64, max: usize) -> Result<Vec<SegmentSummary>> {
        let batches = self.read(from_offset, UNIT_SCAN_BYTES)?;
        Ok(batches.iter().take(max).map(SegmentSummary::of_batch).collect())
    }
    /// The bytes the log holds (what `retention.bytes` bounds). By default every unit is listed.
    fn size_bytes(&self) -> Result<u64> {
        let mut total = 0u64;
        let mut from = self.log_start_offset();
        while from < self.log_end_offset() {
            let units = self.segments(from, usize::MAX)?;
            let Some(last) = units.last() else { break };
            from = last.next_offset.max(from + 1);
            total = units
                .iter()
                .fold(total, |sum, unit| sum.saturating_add(unit.size_bytes));
        }
        Ok(total)
    }
    /// Cuts the log at `offset` (strictly inside the log); fails if a batch straddles it.
    fn truncate_to(&mut self, offset: i64) -> Result<()>;
    /// Empties the log (and its index) and restarts it at `offset`.
    fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<()>;
    /// Ends the active retention unit at the log end, so the next append starts a new one (Kafka's segment roll).
    /// A backend with segments starts a new one when the active one holds batches; one without (each batch its
    /// own unit) has nothing to do, the default.
    fn roll_segment(&mut self) -> Result<()> {
        Ok(())
    }
    /// Replaces the batches whose base offsets lie in `[from, to)` with `batches` (a log cleaner's rewrite; the
    /// wrapper checks the range lies in the log and `batches` inside it, ascending). storage-fs needs `from` and
    /// `to` at segment bases below the active segment and rewrites one segment at a time, each atomically; the
    /// others rewrite the range atomically. Offsets never change: each batch holds offsets the range held.
    fn replace_batches(&mut self, from: i64, to: i64, batches: &[RecordBatch]) -> Result<()>;
    /// What writes a cleaner's rewrite beside the log without this handle (see
    /// [`crate::PartitionReader::stage_rewrite`]); `None` (the default): the backend rewrites in place only.
    fn rewrite_stager(&self) -> Option<std::sync::Arc<dyn RewriteStager>> {
        None
    }
    /// Renames the files `stager` wrote into place: each replaces the log of the segment at its base offset, the
    /// segments being exactly those of `[from, to)`. Only a backend with a stager has files to install.
    fn install_staged(&mut self, from: i64, to: i64, files: Vec<(i64, std::path::PathBuf)>) -> Result<()> {
        let _ = files;
        Err(crate::StorageError::InvalidRewrite {
            from,
            to,
            reason: "this backend stages no files".to_owned(),
        })
    }
    /// Moves the log start forward to `offset`; batches wholly below it may be dropped.
    fn delete_before(&mut self, offset: i64) -> Result<()>;
    /// Makes appended data durable to the given level.
    fn flush(&mut self, durability: Durability) -> Result<()>;

    /// Stores a producer snapshot, durably.
    fn put_snapshot(&mut self, offset: i64, bytes: Bytes) -> Result<()>;
    /// The snapshot with the highest offset at or below `offset`.
    fn snapshot_at_or_below(&self, offset: i64) -> Result<Option<(i64, Bytes)>>;
    /// Offsets of every snapshot, ascending.
    fn snapshot_offsets(&self) -> Result<Vec<i64>>;
    /// Removes a snapshot (no error if absent).
    fn delete_snapshot(&mut self, offset: i64) -> Result<()>;

    /// Records an aborted transaction that follows the previous entry.
    fn append_aborted_txn(&mut self, entry: AbortedTxn) -> Result<()>;
    /// The last aborted-transaction entry (the wrapper orders new entries after it).
    fn last_aborted_txn(&self) -> Result<Option<AbortedTxn>>;
    /// Aborted transactions ending at or after `from_offset` and starting before `upper_bound`.
    fn aborted_txns(&self, from_offset: i64, upper_bound: i64) -> Result<Vec<AbortedTxn>>;

    /// Writes a small metadata record atomically and durably.
    fn put_metadata(&mut self, key: &str, value: &[u8]) -> Result<()>;
    /// Reads a metadata record.
    fn metadata(&self, key: &str) -> Result<Option<Vec<u8>>>;
}

/// Writes a cleaner's rewrite of whole segments beside a partition's log, durably, without the partition: the
/// slow half of [`BlockingPartition::replace_batches`], so that the partition is held only to install it
/// ([`BlockingPartition::install_staged`]).
pub trait RewriteStager: Send + Sync {
    /// Writes, for each segment base in `bases` (ascending, the segments of `[bases[0], to)`), the batches of
    /// `batches` that lie in it into a file of its own, synced; returns each base with its file, and what removes
    /// the staging's leftovers. A staging that fails removes what it wrote.
    fn stage(
        &self,
        bases: &[i64],
        to: i64,
        batches: &[RecordBatch],
    ) -> Result<(Vec<(i64, std::path::PathBuf)>, crate::partition::StagingCleanup)>;
}
