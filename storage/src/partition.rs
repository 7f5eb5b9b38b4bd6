//! The storage traits, and the offset bookkeeping every backend shares.

use std::collections::BTreeMap;

use async_trait::async_trait;
use bytes::Bytes;
use record_format::{AbortedTxn, BatchBuffers, RecordBatch};

use crate::error::StorageError;
use crate::id::PartitionId;
use crate::report::OpenReport;
use crate::segments::SegmentSummary;
use crate::Result;

/// How far `flush` pushes appended data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Durability {
    /// Hand the data to the operating system (survives a process crash, not a machine crash).
    Buffered,
    /// Make it durable (fsync, or the database's sync write): survives a machine crash.
    Sync,
}

/// A store of many partitions.
#[async_trait]
pub trait Storage: Send + Sync {
    /// Creates an empty partition starting at offset 0.
    async fn create(&self, id: &PartitionId) -> Result<Box<dyn PartitionStorage>>;
    /// Opens an existing partition (recovering it if it was not closed cleanly; see
    /// [`PartitionStorage::open_report`]).
    async fn open(&self, id: &PartitionId) -> Result<Box<dyn PartitionStorage>>;
    /// Opens an existing partition for inspection: nothing on disk changes (no torn tail is cut, no index
    /// rebuilt), reads stop before anything a read-write open would cut, and every write fails with
    /// [`StorageError::ReadOnly`].
    async fn open_read_only(&self, id: &PartitionId) -> Result<Box<dyn PartitionStorage>>;
    /// Every partition, in order.
    async fn list(&self) -> Result<Vec<PartitionId>>;
    /// Removes a partition and everything in it.
    async fn delete(&self, id: &PartitionId) -> Result<()>;
}

/// A read-only view of a partition that does not borrow its handle ([`PartitionStorage::reader`]): a log cleaner
/// reads through one outside the partition's lock while the handle goes on appending. Each call sees the log as
/// it is then (reads are checked against the current bounds).
#[async_trait]
pub trait PartitionReader: Send + Sync {
    /// As [`PartitionStorage::read`].
    async fn read(&self, from_offset: i64, max_bytes: usize) -> Result<Vec<RecordBatch>>;
    /// As [`PartitionStorage::segments`].
    async fn segments(&self, from_offset: i64, max: usize) -> Result<Vec<SegmentSummary>>;
    /// As [`PartitionStorage::aborted_txns`].
    async fn aborted_txns(&self, from_offset: i64, upper_bound: i64) -> Result<Vec<AbortedTxn>>;
    /// The slow half of a log cleaner's rewrite of `[from, to)` ([`PartitionStorage::replace_batches`]), done
    /// without the partition's handle: a backend that can writes the new data beside the log, durably, changing
    /// nothing the log holds; [`PartitionStorage::install_rewrite`] then puts it in place. By default nothing is
    /// written ahead: the batches are installed whole.
    async fn stage_rewrite(&self, from: i64, to: i64, batches: Vec<RecordBatch>) -> Result<StagedRewrite> {
        Ok(StagedRewrite::Batches { from, to, batches })
    }
}

/// A log cleaner's rewrite prepared by [`PartitionReader::stage_rewrite`], for
/// [`PartitionStorage::install_rewrite`].
#[derive(Debug)]
pub enum StagedRewrite {
    /// Nothing written ahead: the batches replacing `[from, to)`.
    Batches {
        /// The range's start.
        from: i64,
        /// The range's end.
        to: i64,
        /// What stays of the range.
        batches: Vec<RecordBatch>,
    },
    /// Written beside the log, durably (storage-fs: one file per segment of the range, by its base offset), to
    /// be renamed into place.
    Files {
        /// The range's start.
        from: i64,
        /// The range's end.
        to: i64,
        /// Each segment's base offset and the staged file that replaces its log.
        files: Vec<(i64, std::path::PathBuf)>,
        /// Removes what is left of the staging once the rewrite is installed, refused or dropped.
        cleanup: StagingCleanup,
    },
}

/// Removes a staged rewrite's leftovers when dropped: after an installation (what the renames left), and when
/// the rewrite is never installed (a pass dropped because its log moved, its partition deleted, an error).
pub struct StagingCleanup(Option<Box<dyn FnOnce() + Send + Sync>>);

impl StagingCleanup {
    /// Runs `remove` when dropped.
    pub fn new(remove: impl FnOnce() + Send + Sync + 'static) -> Self {
        StagingCleanup(Some(Box::new(remove)))
    }
}

impl Drop for StagingCleanup {
    fn drop(&mut self) {
        if let Some(remove) = self.0.take() {
            remove();
        }
    }
}

impl std::fmt::Debug for StagingCleanup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StagingCleanup")
    }
}

/// One partition: its log, producer snapshots, aborted-transaction index and metadata.
#[async_trait]
pub trait PartitionStorage: Send + Sync {
    /// A read-only view of this partition that does not borrow the handle (see [`PartitionReader`]).
    fn reader(&self) -> Box<dyn PartitionReader>;
    /// Which partition.
    fn id(&self) -> &PartitionId;
    /// First offset still readable.
    fn log_start_offset(&self) -> i64;
    /// Offset after the last batch.
    fn log_end_offset(&self) -> i64;
    /// What opening found and repaired (or, read-only, would repair).
    fn open_report(&self) -> &OpenReport;

    /// Appends batches as stored bytes. The first must start at or after the log end offset, each next one after
    /// the previous one's last offset; otherwise nothing is written.
    async fn append(&mut self, batches: &[RecordBatch]) -> Result<()>;
    /// [`append`](Self::append) of batches sliced from `buffers` (a fetched range, [`BatchBuffers`]): a backend
    /// that writes bytes may write batches lying back to back with one write. By default the buffers go unused.
    async fn append_with_buffers(&mut self, batches: &[RecordBatch], buffers: &BatchBuffers) -> Result<()> {
        let _ = buffers;
        self.append(batches).await
    }
    /// Whole batches from the one holding `from_offset`, up to `max_bytes` (always at least one batch when one
    /// exists). `from_offset == log_end_offset` reads nothing; outside `[log_start, log_end]` is an error.
    async fn read(&self, from_offset: i64, max_bytes: usize) -> Result<Vec<RecordBatch>>;
    /// [`read`](Self::read), with the buffers the batches were sliced from (none by default).
    async fn read_with_buffers(
        &self,
        from_offset: i64,
        max_bytes: usize,
    ) -> Result<(Vec<RecordBatch>, BatchBuffers)> {
        Ok((self.read(from_offset, max_bytes).await?, BatchBuffers::default()))
    }
    /// Up to `max` retention units ([`SegmentSummary`]), oldest first, from the one holding `from_offset`
    /// (`from_offset == log_end_offset`: none; outside the log: an error).
    async fn segments(&self, from_offset: i64, max: usize) -> Result<Vec<SegmentSummary>>;
    /// The bytes the log holds (what `retention.bytes` bounds).
    async fn size_bytes(&self) -> Result<u64>;
    /// Ends the active retention unit at the log end (Kafka's segment roll; nothing to do for a backend whose
    /// units are batches).
    async fn roll_segment(&mut self) -> Result<()>;
    /// Replaces the batches whose base offsets lie in `[from, to)` with `batches`: a log cleaner's rewrite, offsets
    /// unchanged (see [`crate::BlockingPartition::replace_batches`] for the units storage-fs needs).
    async fn replace_batches(&mut self, from: i64, to: i64, batches: &[RecordBatch]) -> Result<()>;
    /// Removes every batch at or after `offset` (a batch boundary) and the index entries ending there or later.
    /// At or below the log start the log is emptied and starts at `offset`.
    async fn truncate_to(&mut self, offset: i64) -> Result<()>;
    /// Empties the log (and its index) and restarts it at `offset`.
    async fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<()>;
    /// Puts a rewrite staged by this partition's reader in place: the quick half of a cleaner's rewrite
    /// ([`PartitionReader::stage_rewrite`]). By default the staged batches are installed by
    /// [`Self::replace_batches`].
    async fn install_rewrite(&mut self, staged: StagedRewrite) -> Result<()> {
        match staged {
            StagedRewrite::Batches { from, to, batches } => self.replace_batches(from, to, &batches).await,
            StagedRewrite::Files { from, to, .. } => Err(crate::StorageError::InvalidRewrite {
                from,
                to,
                reason: "this backend stages no files".to_owned(),
            }),
        }
    }
    /// Moves the log start offset up to `offset` (retention); batches wholly below it may be dropped.
    async fn delete_before(&mut self, offset: i64) -> Result<()>;
    /// Makes appended data durable to the given level.
    async fn flush(&mut self, durability: Durability) -> Result<()>;

    /// Stores the producer snapshot taken at `offset` (durable when it returns).
    async fn put_snapshot(&mut self, offset: i64, bytes: Bytes) -> Result<()>;
    /// The snapshot with the highest offset at or below `offset`.
    async fn snapshot_at_or_below(&self, offset: i64) -> Result<Option<(i64, Bytes)>>;
    /// Offsets of every snapshot, ascending.
    async fn snapshot_offsets(&self) -> Result<Vec<i64>>;
    /// Removes a snapshot (no error if absent).
    async fn delete_snapshot(&mut self, offset: i64) -> Result<()>;

    /// Records an aborted transaction; its last offset must exceed the previous entry's.
    async fn append_aborted_txn(&mut self, entry: AbortedTxn) -> Result<()>;
    /// Aborted transactions a read_committed fetch of `[from_offset, upper_bound)` must know: those ending at or
    /// after `from_offset` and starting before `upper_bound`.
    async fn aborted_txns(&self, from_offset: i64, upper_bound: i64) -> Result<Vec<AbortedTxn>>;

    /// Writes a small metadata record atomically and durably.
    async fn put_metadata(&mut self, key: &str, value: &[u8]) -> Result<()>;
    /// Reads a metadata record.
    async fn metadata(&self, key: &str) -> Result<Option<Vec<u8>>>;
}

/// Longest metadata key.
pub const MAX_METADATA_KEY_LEN: usize = 64;

/// Metadata keys are short names of `[A-Za-z0-9._-]`, usable as file names and key suffixes.
pub fn check_metadata_key(key: &str) -> Result<()> {
    let invalid = |reason| StorageError::InvalidMetadataKey {
        key: key.to_owned(),
        reason,
    };
    if key.is_empty() || key.len() > MAX_METADATA_KEY_LEN {
        return Err(invalid("keys have 1 to 64 characters"));
    }
    if !key
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(invalid("keys use only ASCII letters, digits, `.`, `_` and `-`"));
    }
    Ok(())
}

/// Checks an append against the log end offset; returns the new log end offset.
pub fn check_append(log_end_offset: i64, batches: &[RecordBatch]) -> Result<i64> {
    let mut next = log_end_offset;
    for batch in batches {
        if batch.base_offset() < next || batch.last_offset() < batch.base_offset() {
            return Err(StorageError::NonMonotonicOffsets {
                expected_at_least: next,
                base_offset: batch.base_offset(),
            });
        }
        next = batch.next_offset();
    }
    Ok(next)
}

/// Checks that an aborted-transaction entry follows the previous one: entries grow by (last offset, first
/// offset). Kafka's markers close one transaction each, so its last offsets grow strictly; a `MIRROR_PID_RESET`
/// barrier aborts every open transaction at its own offset (ADR 0005), giving entries that share a last offset
/// and are ordered by first offset.
pub fn check_aborted_txn(previous: Option<&AbortedTxn>, entry: &AbortedTxn) -> Result<()> {
    match previous {
        Some(previous)
            if (entry.last_offset, entry.first_offset) <= (previous.last_offset, previous.first_offset) =>
        {
            Err(StorageError::AbortedTxnOutOfOrder {
                last_offset: entry.last_offset,
                previous: previous.last_offset,
            })
        }
        _ => Ok(()),
    }
}

/// Where each batch is, by base offset: the offset bookkeeping every backend needs (`L` is the backend's
/// location of a batch).
#[derive(Debug, Clone)]
pub struct BatchMap<L> {
    /// base offset → (last offset, size in bytes, location).
    batches: BTreeMap<i64, (i64, usize, L)>,
}

impl<L> Default for BatchMap<L> {
    fn default() -> Self {
        BatchMap {
            batches: BTreeMap::new(),
        }
    }
}

impl<L: Clone> BatchMap<L> {
    /// An empty map.
    pub fn new() -> Self {
        BatchMap {
            batches: BTreeMap::new(),
        }
    }

    /// Records a batch.
    pub fn insert(&mut self, batch: &RecordBatch, location: L) {
        self.batches
            .insert(batch.base_offset(), (batch.last_offset(), batch.size(), location));
    }

    /// Records a batch from its offsets.
    pub fn insert_span(&mut self, base_offset: i64, last_offset: i64, size: usize, location: L) {
        self.batches.insert(base_offset, (last_offset, size, location));
    }

    /// Number of batches.
    pub fn len(&self) -> usize {
        self.batches.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// The next offset after the last batch.
    pub fn next_offset(&self) -> Option<i64> {
        self.batches.values().next_back().map(|(last, _, _)| last + 1)
    }

    /// Locations of the batches a read from `from_offset` returns, within `max_bytes` (at least one).
    pub fn read_plan(&self, from_offset: i64, max_bytes: usize) -> Vec<L> {
        // The batch holding `from_offset` starts at or before it; if the one before it ends earlier, start after.
        let start = match self.batches.range(..=from_offset).next_back() {
            Some((&base, &(last, _, _))) if last >= from_offset => base,
            _ => from_offset,
        };
        let mut plan = Vec::new();
        let mut total = 0usize;
        for (_, (_, size, location)) in self.batches.range(start..) {
            if !plan.is_empty() && total.saturating_add(*size) > max_bytes {
                break;
            }
            total = total.saturating_add(*size);
            plan.push(location.clone());
        }
        plan
    }

    /// Fails if a batch straddles `offset` (starts before it and ends at or after it).
    pub fn check_boundary(&self, offset: i64) -> Result<()> {
        match self.batches.range(..offset).next_back() {
            Some((&base, &(last, _, _))) if last >= offset => Err(StorageError::NotABatchBoundary {
                offset,
                base_offset: base,
                last_offset: last,
            }),
            _ => Ok(()),
        }
    }

    /// Removes and returns the batches starting at or after `offset`, in order.
    pub fn split_off(&mut self, offset: i64) -> Vec<(i64, L)> {
        self.batches
            .split_off(&offset)
            .into_iter()
            .map(|(base, (_, _, location))| (base, location))
            .collect()
    }

    /// Removes and returns the batches that end before `offset`, in order.
    pub fn remove_below(&mut self, offset: i64) -> Vec<(i64, L)> {
        let keep_from = match self.batches.range(..offset).next_back() {
            Some((&base, &(last, _, _))) if last >= offset => base,
            _ => offset,
        };
        let kept = self.batches.split_off(&keep_from);
        let removed = std::mem::replace(&mut self.batches, kept);
        removed
            .into_iter()
            .map(|(base, (_, _, location))| (base, location))
            .collect()
    }

    /// Every batch as (base offset, last offset, size, location), in order.
    pub fn iter(&self) -> impl Iterator<Item = (i64, i64, usize, &L)> {
        self.batches
            .iter()
            .map(|(&base, (last, size, location))| (base, *last, *size, location))
    }
}

/// Aborted transactions a fetch of `[from_offset, upper_bound)` must know (all entries, no early stop).
pub fn select_aborted(entries: &[AbortedTxn], from_offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
    entries
        .iter()
        .filter(|entry| entry.last_offset >= from_offset && entry.first_offset < upper_bound)
        .copied()
        .collect()
}

/// What `truncate_to(offset)` has to do, given the log bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncation {
    /// `offset` is at or past the log end: nothing.
    Nothing,
    /// `offset` is at or below the log start: empty the log and restart it at `offset`.
    EmptyAt(i64),
    /// Cut the log at `offset` (a batch boundary, which the backend checks).
    CutAt(i64),
}

/// Decides a truncation (shared by every backend).
pub fn truncation(offset: i64, log_start: i64, log_end: i64) -> Truncation {
    if offset >= log_end {
        Truncation::Nothing
    } else if offset <= log_start {
        Truncation::EmptyAt(offset)
    } else {
        Truncation::CutAt(offset)
    }
}

/// Checks a retention move: `Ok(true)` when the log start moves to `offset`, `Ok(false)` when it is already
/// there or beyond, an error past the log end.
pub fn check_delete_before(offset: i64, log_start: i64, log_end: i64) -> Result<bool> {
    if offset > log_end {
        return Err(StorageError::OffsetOutOfRange {
            offset,
            log_start,
            log_end,
        });
    }
    Ok(offset > log_start)
}

/// Checks a cleaner's rewrite: `[from, to)` inside `[log_start_floor, log_end]` and non-empty, each batch inside it,
/// offsets growing.
pub fn check_rewrite(from: i64, to: i64, log_end: i64, batches: &[RecordBatch]) -> Result<()> {
    let invalid = |reason: String| StorageError::InvalidRewrite { from, to, reason };
    if from >= to || to > log_end {
        return Err(invalid(format!(
            "the range must be non-empty and end at or before the log end {log_end}"
        )));
    }
    let mut next = from;
    for batch in batches {
        if batch.base_offset() < next || batch.last_offset() >= to {
            return Err(invalid(format!(
                "batch {}..={} is outside the range or out of order",
                batch.base_offset(),
                batch.last_offset()
            )));
        }
        next = batch.next_offset();
    }
    Ok(())
}

/// Checks a read's start offset against the log bounds.
pub fn check_read_offset(offset: i64, log_start: i64, log_end: i64) -> Result<()> {
    if offset < log_start || offset > log_end {
        return Err(StorageError::OffsetOutOfRange {
            offset,
            log_start,
            log_end,
        });
    }
    Ok(())
}
