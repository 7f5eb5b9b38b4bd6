//! Fault injection for tests of the layers above storage: a [`PartitionStorage`] wrapper whose writes fail on
//! command.
//!
//! [`FaultyPartition`] passes every call to the partition it wraps, counting the mutating ones. From the
//! [`Faults::fail_from`]-th write on (1-based, adjustable while it runs) every write fails, as if the process had
//! died there; [`Faults::fail_aborted_txn`] makes only aborted-transaction index writes fail. Reads always pass.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use record_format::{AbortedTxn, RecordBatch};

use storage::{Durability, OpenReport, PartitionId, PartitionStorage, Result, StorageError};

/// The switches of a [`FaultyPartition`], shared with the test that drives it.
#[derive(Debug)]
pub struct Faults {
    /// Mutating calls made so far.
    pub writes: AtomicUsize,
    /// The first write (1-based) that fails; every later one fails too. `usize::MAX`: none.
    pub fail_from: AtomicUsize,
    /// Whether aborted-transaction index writes fail.
    pub fail_aborted_txn: AtomicBool,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            writes: AtomicUsize::new(0),
            fail_from: AtomicUsize::new(usize::MAX),
            fail_aborted_txn: AtomicBool::new(false),
        }
    }
}

impl Faults {
    /// Makes every write from `n` writes after now fail (`n = 1`: the very next one).
    pub fn fail_after(&self, n: usize) {
        let now = self.writes.load(Ordering::SeqCst);
        self.fail_from.store(now.saturating_add(n), Ordering::SeqCst);
    }

    /// Mutating calls made so far.
    pub fn writes(&self) -> usize {
        self.writes.load(Ordering::SeqCst)
    }
}

/// A partition whose writes fail on command; see the module docs.
pub struct FaultyPartition {
    inner: Box<dyn PartitionStorage>,
    faults: Arc<Faults>,
}

impl FaultyPartition {
    /// Wraps `inner`; the returned switches control it.
    pub fn new(inner: Box<dyn PartitionStorage>) -> (Self, Arc<Faults>) {
        let faults = Arc::new(Faults::default());
        (
            FaultyPartition {
                inner,
                faults: Arc::clone(&faults),
            },
            faults,
        )
    }

    fn write(&self, aborted_txn: bool) -> Result<()> {
        let n = self.faults.writes.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= self.faults.fail_from.load(Ordering::SeqCst) {
            return Err(StorageError::io(
                "writing (injected crash)",
                std::io::Error::other("the process died here"),
            ));
        }
        if aborted_txn && self.faults.fail_aborted_txn.load(Ordering::SeqCst) {
            return Err(StorageError::io(
                "writing the aborted-transaction index (injected failure)",
                std::io::Error::other("injected failure"),
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl PartitionStorage for FaultyPartition {
    fn reader(&self) -> Box<dyn storage::PartitionReader> {
        self.inner.reader()
    }
    fn id(&self) -> &PartitionId {
        self.inner.id()
    }
    fn log_start_offset(&self) -> i64 {
        self.inner.log_start_offset()
    }
    fn log_end_offset(&self) -> i64 {
        self.inner.log_end_offset()
    }
    fn open_report(&self) -> &OpenReport {
        self.inner.open_report()
    }
    async fn append(&mut self, batches: &[RecordBatch]) -> Result<()> {
        self.write(false)?;
        self.inner.append(batches).await
    }
    async fn read(&self, from_offset: i64, max_bytes: usize) -> Result<Vec<RecordBatch>> {
        self.inner.read(from_offset, max_bytes).await
    }
    async fn segments(&self, from_offset: i64, max: usize) -> Result<Vec<storage::SegmentSummary>> {
        self.inner.segments(from_offset, max).await
    }
    async fn size_bytes(&self) -> Result<u64> {
        self.inner.size_bytes().await
    }
    async fn roll_segment(&mut self) -> Result<()> {
        self.write(false)?;
        self.inner.roll_segment().await
    }
    async fn replace_batches(&mut self, from: i64, to: i64, batches: &[RecordBatch]) -> Result<()> {
        self.write(false)?;
        self.inner.replace_batches(from, to, batches).await
    }
    async fn install_rewrite(&mut self, staged: storage::StagedRewrite) -> Result<()> {
        self.write(false)?;
        self.inner.install_rewrite(staged).await
    }
    async fn truncate_to(&mut self, offset: i64) -> Result<()> {
        self.write(false)?;
        self.inner.truncate_to(offset).await
    }
    async fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<()> {
        self.write(false)?;
        self.inner.truncate_fully_and_start_at(offset).await
    }
    async fn delete_before(&mut self, offset: i64) -> Result<()> {
        self.write(false)?;
        self.inner.delete_before(offset).await
    }
    async fn flush(&mut self, durability: Durability) -> Result<()> {
        self.write(false)?;
        self.inner.flush(durability).await
    }
    async fn put_snapshot(&mut self, offset: i64, bytes: Bytes) -> Result<()> {
        self.write(false)?;
        self.inner.put_snapshot(offset, bytes).await
    }
    async fn snapshot_at_or_below(&self, offset: i64) -> Result<Option<(i64, Bytes)>> {
        self.inner.snapshot_at_or_below(offset).await
    }
    async fn snapshot_offsets(&self) -> Result<Vec<i64>> {
        self.inner.snapshot_offsets().await
    }
    async fn delete_snapshot(&mut self, offset: i64) -> Result<()> {
        self.write(false)?;
        self.inner.delete_snapshot(offset).await
    }
    async fn append_aborted_txn(&mut self, entry: AbortedTxn) -> Result<()> {
        self.write(true)?;
        self.inner.append_aborted_txn(entry).await
    }
    async fn aborted_txns(&self, from_offset: i64, upper_bound: i64) -> Result<Vec<AbortedTxn>> {
        self.inner.aborted_txns(from_offset, upper_bound).await
    }
    async fn put_metadata(&mut self, key: &str, value: &[u8]) -> Result<()> {
        self.write(false)?;
        self.inner.put_metadata(key, value).await
    }
    async fn metadata(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.inner.metadata(key).await
    }
}
