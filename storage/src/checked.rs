//! [`Checked`]: the one place the storage contract's rules are enforced, for every backend.
//!
//! Each call is checked before the backend sees it (offsets only grow, reads inside the log, truncation and
//! retention decided from the log bounds, aborted-transaction entries in order, metadata keys), and the outcome
//! is watched after: a mutating call that fails with an I/O or database error **poisons** the handle — every
//! later write fails with [`StorageError::Poisoned`] until the partition is reopened, which re-reads what is
//! durable (fjall's rule: after a failed fsync nobody knows what reached the disk). Read-only handles refuse
//! every write with [`StorageError::ReadOnly`].

use bytes::Bytes;
use record_format::{AbortedTxn, BatchBuffers, RecordBatch};

use crate::blocking::{BlockingPartition, OpenMode};
use crate::error::StorageError;
use crate::partition::{
    check_aborted_txn, check_append, check_delete_before, check_metadata_key, check_read_offset,
    check_rewrite, truncation, Durability, Truncation,
};
use crate::report::OpenReport;
use crate::segments::SegmentSummary;
use crate::Result;

/// A backend partition behind the contract's checks; see the module docs.
pub struct Checked {
    inner: Box<dyn BlockingPartition>,
    mode: OpenMode,
    poisoned: Option<String>,
    /// The last aborted-transaction entry, so ordering needs no read per append.
    last_aborted: Option<AbortedTxn>,
    report: OpenReport,
}

impl std::fmt::Debug for Checked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checked")
            .field("partition", self.inner.id())
            .field("mode", &self.mode)
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl Checked {
    /// Wraps a freshly opened or created backend partition.
    pub fn new(inner: Box<dyn BlockingPartition>, mode: OpenMode) -> Result<Self> {
        let last_aborted = inner.last_aborted_txn()?;
        let report = inner.open_report();
        Ok(Checked {
            inner,
            mode,
            poisoned: None,
            last_aborted,
            report,
        })
    }

    /// The backend partition.
    pub fn inner(&self) -> &dyn BlockingPartition {
        &*self.inner
    }

    /// What opening found and repaired.
    pub fn open_report(&self) -> &OpenReport {
        &self.report
    }

    /// Why the handle refuses writes, if it does.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// Refuses every later write (a call that never returned, so nothing is known about what it wrote).
    pub fn poison(&mut self, reason: String) {
        self.poisoned = Some(reason);
    }

    fn writable(&self) -> Result<()> {
        if self.mode == OpenMode::ReadOnly {
            return Err(StorageError::ReadOnly {
                partition: self.inner.id().clone(),
            });
        }
        match &self.poisoned {
            Some(reason) => Err(StorageError::Poisoned {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Runs a mutating backend call; an I/O or database failure poisons the handle.
    fn write<T>(&mut self, call: impl FnOnce(&mut dyn BlockingPartition) -> Result<T>) -> Result<T> {
        self.writable()?;
        match call(&mut *self.inner) {
            Err(error) if error.poisons() => {
                let reason = error.to_string();
                self.poisoned = Some(reason.clone());
                Err(StorageError::Poisoned { reason })
            }
            other => other,
        }
    }

    /// First offset still readable.
    pub fn log_start_offset(&self) -> i64 {
        self.inner.log_start_offset()
    }

    /// Offset after the last batch.
    pub fn log_end_offset(&self) -> i64 {
        self.inner.log_end_offset()
    }

    /// See [`crate::PartitionStorage::append`].
    pub fn append(&mut self, batches: &[RecordBatch]) -> Result<()> {
        self.append_with_buffers(batches, &BatchBuffers::default())
    }

    /// See [`crate::PartitionStorage::append_with_buffers`].
    pub fn append_with_buffers(&mut self, batches: &[RecordBatch], buffers: &BatchBuffers) -> Result<()> {
        self.writable()?;
        check_append(self.log_end_offset(), batches)?;
        if batches.is_empty() {
            return Ok(());
        }
        self.write(|inner| inner.append_with_buffers(batches, buffers))
    }

    /// See [`crate::PartitionStorage::read`].
    pub fn read(&self, from_offset: i64, max_bytes: usize) -> Result<Vec<RecordBatch>> {
        self.read_with_buffers(from_offset, max_bytes)
            .map(|(batches, _)| batches)
    }

    /// See [`crate::PartitionStorage::read_with_buffers`].
    pub fn read_with_buffers(
        &self,
        from_offset: i64,
        max_bytes: usize,
    ) -> Result<(Vec<RecordBatch>, BatchBuffers)> {
        check_read_offset(from_offset, self.log_start_offset(), self.log_end_offset())?;
        if from_offset == self.log_end_offset() {
            return Ok((Vec::new(), BatchBuffers::default()));
        }
        self.inner.read_with_buffers(from_offset, max_bytes)
    }

    /// See [`crate::PartitionStorage::segments`].
    pub fn segments(&self, from_offset: i64, max: usize) -> Result<Vec<SegmentSummary>> {
        check_read_offset(from_offset, self.log_start_offset(), self.log_end_offset())?;
        if from_offset == self.log_end_offset() || max == 0 {
            return Ok(Vec::new());
        }
        self.inner.segments(from_offset, max)
    }

    /// See [`crate::PartitionStorage::size_bytes`].
    pub fn size_bytes(&self) -> Result<u64> {
        self.inner.size_bytes()
    }

    /// See [`crate::PartitionStorage::replace_batches`].
    pub fn replace_batches(&mut self, from: i64, to: i64, batches: &[RecordBatch]) -> Result<()> {
        self.writable()?;
        check_rewrite(from, to, self.log_end_offset(), batches)?;
        self.write(|inner| inner.replace_batches(from, to, batches))
    }

    /// See [`crate::BlockingPartition::rewrite_stager`]; with the bases of the segments in `[from, to)` once the
    /// range and `batches` are checked as [`Self::replace_batches`] checks them.
    pub fn rewrite_stager(&self, from: i64, to: i64, batches: &[RecordBatch]) -> Result<Option<Staging>> {
        self.writable()?;
        check_rewrite(from, to, self.log_end_offset(), batches)?;
        let Some(stager) = self.inner.rewrite_stager() else {
            return Ok(None);
        };
        let mut bases = Vec::new();
        let mut at = from;
        while at < to {
            let units = self.inner.segments(at, 256)?;
            let Some(last) = units.last().map(|unit| unit.next_offset) else {
                break;
            };
            // A page starts with the segment holding `at`, which may be the previous page's last: not twice.
            let seen = bases.last().copied().unwrap_or(i64::MIN);
            bases.extend(
                units
                    .iter()
                    .map(|unit| unit.base_offset)
                    .filter(|base| (from..to).contains(base) && *base > seen),
            );
            if last <= at {
                break;
            }
            at = last;
        }
        Ok(Some((stager, bases)))
    }

    /// See [`crate::BlockingPartition::install_staged`] (which checks that the range still holds the segments
    /// staged, and removes the staged files when it does not).
    pub fn install_staged(
        &mut self,
        from: i64,
        to: i64,
        files: Vec<(i64, std::path::PathBuf)>,
    ) -> Result<()> {
        self.write(|inner| inner.install_staged(from, to, files))
    }

    /// See [`crate::PartitionStorage::roll_segment`].
    pub fn roll_segment(&mut self) -> Result<()> {
        self.writable()?;
        self.write(|inner| inner.roll_segment())
    }

    /// See [`crate::PartitionStorage::truncate_to`].
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        self.writable()?;
        match truncation(offset, self.log_start_offset(), self.log_end_offset()) {
            Truncation::Nothing => Ok(()),
            Truncation::EmptyAt(offset) => self.truncate_fully_and_start_at(offset),
            Truncation::CutAt(offset) => {
                self.write(|inner| inner.truncate_to(offset))?;
                self.last_aborted = self.inner.last_aborted_txn()?;
                Ok(())
            }
        }
    }

    /// See [`crate::PartitionStorage::truncate_fully_and_start_at`].
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<()> {
        self.write(|inner| inner.truncate_fully_and_start_at(offset))?;
        self.last_aborted = None;
        Ok(())
    }

    /// See [`crate::PartitionStorage::delete_before`].
    pub fn delete_before(&mut self, offset: i64) -> Result<()> {
        self.writable()?;
        if !check_delete_before(offset, self.log_start_offset(), self.log_end_offset())? {
            return Ok(());
        }
        self.write(|inner| inner.delete_before(offset))
    }

    /// See [`crate::PartitionStorage::flush`].
    pub fn flush(&mut self, durability: Durability) -> Result<()> {
        self.write(|inner| inner.flush(durability))
    }

    /// See [`crate::PartitionStorage::put_snapshot`].
    pub fn put_snapshot(&mut self, offset: i64, bytes: Bytes) -> Result<()> {
        self.write(|inner| inner.put_snapshot(offset, bytes))
    }

    /// See [`crate::PartitionStorage::snapshot_at_or_below`].
    pub fn snapshot_at_or_below(&self, offset: i64) -> Result<Option<(i64, Bytes)>> {
        self.inner.snapshot_at_or_below(offset)
    }

    /// See [`crate::PartitionStorage::snapshot_offsets`].
    pub fn snapshot_offsets(&self) -> Result<Vec<i64>> {
        self.inner.snapshot_offsets()
    }

    /// See [`crate::PartitionStorage::delete_snapshot`].
    pub fn delete_snapshot(&mut self, offset: i64) -> Result<()> {
        self.write(|inner| inner.delete_snapshot(offset))
    }

    /// See [`crate::PartitionStorage::append_aborted_txn`].
    pub fn append_aborted_txn(&mut self, entry: AbortedTxn) -> Result<()> {
        self.writable()?;
        check_aborted_txn(self.last_aborted.as_ref(), &entry)?;
        self.write(|inner| inner.append_aborted_txn(entry))?;
        self.last_aborted = Some(entry);
        Ok(())
    }

    /// See [`crate::PartitionStorage::aborted_txns`].
    pub fn aborted_txns(&self, from_offset: i64, upper_bound: i64) -> Result<Vec<AbortedTxn>> {
        self.inner.aborted_txns(from_offset, upper_bound)
    }

    /// See [`crate::PartitionStorage::put_metadata`].
    pub fn put_metadata(&mut self, key: &str, value: &[u8]) -> Result<()> {
        check_metadata_key(key)?;
        self.write(|inner| inner.put_metadata(key, value))
    }

    /// See [`crate::PartitionStorage::metadata`].
    pub fn metadata(&self, key: &str) -> Result<Option<Vec<u8>>> {
        check_metadata_key(key)?;
        self.inner.metadata(key)
    }
}

/// What stages a cleaner's rewrite, and the base offsets of the segments it replaces.
pub type Staging = (std::sync::Arc<dyn crate::blocking::RewriteStager>, Vec<i64>);
