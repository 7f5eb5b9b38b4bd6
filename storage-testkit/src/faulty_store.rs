//! [`FaultyStore`]: a backend wrapper whose syncs fail or stall, and whose appends slow down, on command.
//!
//! It sits *below* `storage`'s checks (it is a [`BlockingStore`] like any backend), so a failure it injects is
//! seen by the contract exactly as a real failed fsync would be: the partition is poisoned. A sync it holds
//! waits on whatever thread runs the backend call, which is how a test shows that a slow fsync does not hold an
//! executor thread.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use record_format::{AbortedTxn, RecordBatch};
use storage::{
    BlockingPartition, BlockingStore, Durability, OpenMode, OpenReport, PartitionId, StorageError,
};

/// The switches of a [`FaultyStore`], shared by its clones and the partitions it opened.
#[derive(Debug, Default)]
pub struct StoreFaults {
    fail_next_sync: Mutex<BTreeSet<PartitionId>>,
    append_delay: Mutex<Option<Duration>>,
    /// Held syncs that have begun to wait, and a signal for each one that begins.
    held_syncs_begun: std::sync::atomic::AtomicUsize,
    held_sync_begins: tokio::sync::Notify,
    /// Partitions whose syncs wait for [`StoreFaults::release_held_syncs`].
    held: Mutex<BTreeSet<PartitionId>>,
    /// Set by [`StoreFaults::release_held_syncs`]; the held syncs wait on `released_signal`.
    released: Mutex<bool>,
    released_signal: std::sync::Condvar,
    /// Held syncs that gave up waiting after [`HOLD_LIMIT`] instead of being released.
    held_syncs_expired: std::sync::atomic::AtomicUsize,
}

/// Releases the held syncs of a [`StoreFaults`] when dropped ([`StoreFaults::release_on_drop`]).
#[must_use = "dropping the guard releases the held syncs at once"]
pub struct ReleaseOnDrop<'a>(&'a StoreFaults);

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.release_held_syncs();
    }
}

/// The longest a held sync waits for its release (so that a test whose release never comes ends instead of
/// hanging); [`StoreFaults::held_syncs_expired`] counts those that waited that long.
pub const HOLD_LIMIT: Duration = Duration::from_secs(20);

impl StoreFaults {
    /// Makes the next `flush(Sync)` of `id` fail with an I/O error.
    pub fn fail_next_sync(&self, id: &PartitionId) {
        self.fail_next_sync.lock().unwrap().insert(id.clone());
    }

    /// Makes every `flush(Sync)` of `id` wait until [`Self::release_held_syncs`] (at most [`HOLD_LIMIT`]): a disk
    /// that stalls for as long as the test needs, with no timing in the test.
    pub fn hold_syncs(&self, id: &PartitionId) {
        self.held.lock().unwrap().insert(id.clone());
    }

    /// Lets every held sync, and every later one, go on.
    pub fn release_held_syncs(&self) {
        *self.released.lock().unwrap() = true;
        self.released_signal.notify_all();
    }

    /// A guard that calls [`Self::release_held_syncs`] when dropped: a test that fails before its release leaves
    /// no blocking thread waiting out [`HOLD_LIMIT`].
    pub fn release_on_drop(&self) -> ReleaseOnDrop<'_> {
        ReleaseOnDrop(self)
    }

    /// How many held syncs went on because [`HOLD_LIMIT`] passed, not because they were released.
    pub fn held_syncs_expired(&self) -> usize {
        self.held_syncs_expired.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Blocks a held sync of `id` until the release or [`HOLD_LIMIT`].
    fn wait_if_held(&self, id: &PartitionId) {
        if !self.held.lock().unwrap().contains(id) {
            return;
        }
        self.held_syncs_begun
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.held_sync_begins.notify_waiters();
        let released = self.released.lock().unwrap();
        let (released, waited) = self
            .released_signal
            .wait_timeout_while(released, HOLD_LIMIT, |released| !*released)
            .unwrap();
        if waited.timed_out() && !*released {
            self.held_syncs_expired
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Waits until `count` held syncs (of any partition, since the store was wrapped) have begun to wait: what a
    /// test waits for before it shows that the hold holds nobody else up.
    pub async fn held_syncs_begun(&self, count: usize) {
        loop {
            let begun = self.held_sync_begins.notified();
            tokio::pin!(begun);
            // Registered before the count is read: a sync beginning in between wakes it.
            begun.as_mut().enable();
            if self.held_syncs_begun.load(std::sync::atomic::Ordering::SeqCst) >= count {
                return;
            }
            begun.await;
        }
    }

    /// Makes every append of every partition sleep `delay` first (a deliberately slow backend: what a benchmark
    /// must show as slower).
    pub fn delay_appends(&self, delay: Duration) {
        *self.append_delay.lock().unwrap() = Some(delay);
    }
}

/// A store whose partitions' syncs fail or stall on command; see the module docs.
#[derive(Debug, Clone)]
pub struct FaultyStore<S> {
    inner: S,
    faults: Arc<StoreFaults>,
}

impl<S> FaultyStore<S> {
    /// Wraps `inner` with fresh switches.
    pub fn new(inner: S) -> Self {
        Self::with_faults(inner, Arc::default())
    }

    /// Wraps `inner` with shared switches.
    pub fn with_faults(inner: S, faults: Arc<StoreFaults>) -> Self {
        FaultyStore { inner, faults }
    }

    /// The switches.
    pub fn faults(&self) -> &Arc<StoreFaults> {
        &self.faults
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: BlockingStore> BlockingStore for FaultyStore<S> {
    fn create(&self, id: &PartitionId) -> storage::Result<Box<dyn BlockingPartition>> {
        Ok(Box::new(FaultyBlockingPartition {
            inner: self.inner.create(id)?,
            faults: self.faults.clone(),
        }))
    }

    fn open(&self, id: &PartitionId, mode: OpenMode) -> storage::Result<Box<dyn BlockingPartition>> {
        Ok(Box::new(FaultyBlockingPartition {
            inner: self.inner.open(id, mode)?,
            faults: self.faults.clone(),
        }))
    }

    fn list(&self) -> storage::Result<Vec<PartitionId>> {
        self.inner.list()
    }

    fn delete(&self, id: &PartitionId) -> storage::Result<()> {
        self.inner.delete(id)
    }
}

struct FaultyBlockingPartition {
    inner: Box<dyn BlockingPartition>,
    faults: Arc<StoreFaults>,
}

impl BlockingPartition for FaultyBlockingPartition {
    fn id(&self) -> &PartitionId {
        self.inner.id()
    }
    fn log_start_offset(&self) -> i64 {
        self.inner.log_start_offset()
    }
    fn log_end_offset(&self) -> i64 {
        self.inner.log_end_offset()
    }
    fn open_report(&self) -> OpenReport {
        self.inner.open_report()
    }
    fn appends_are_cheap(&self) -> bool {
        self.inner.appends_are_cheap()
    }
    fn append_is_cheap(&self, batches: &[RecordBatch]) -> bool {
        // An append the test delays is slow, wherever it would run.
        self.faults.append_delay.lock().unwrap().is_none() && self.inner.append_is_cheap(batches)
    }
    fn reads_are_cheap(&self) -> bool {
        self.inner.reads_are_cheap()
    }
    fn append(&mut self, batches: &[RecordBatch]) -> storage::Result<()> {
        let delay = *self.faults.append_delay.lock().unwrap();
        if let Some(delay) = delay {
            std::thread::sleep(delay);
        }
        self.inner.append(batches)
    }
    fn read(&self, from_offset: i64, max_bytes: usize) -> storage::Result<Vec<RecordBatch>> {
        self.inner.read(from_offset, max_bytes)
    }
    fn segments(&self, from_offset: i64, max: usize) -> storage::Result<Vec<storage::SegmentSummary>> {
        self.inner.segments(from_offset, max)
    }
    fn size_bytes(&self) -> storage::Result<u64> {
        self.inner.size_bytes()
    }
    fn roll_segment(&mut self) -> storage::Result<()> {
        self.inner.roll_segment()
    }
    fn replace_batches(&mut self, from: i64, to: i64, batches: &[RecordBatch]) -> storage::Result<()> {
        self.inner.replace_batches(from, to, batches)
    }
    fn rewrite_stager(&self) -> Option<std::sync::Arc<dyn storage::blocking::RewriteStager>> {
        self.inner.rewrite_stager()
    }
    fn install_staged(
        &mut self,
        from: i64,
        to: i64,
        files: Vec<(i64, std::path::PathBuf)>,
    ) -> storage::Result<()> {
        self.inner.install_staged(from, to, files)
    }
    fn truncate_to(&mut self, offset: i64) -> storage::Result<()> {
        self.inner.truncate_to(offset)
    }
    fn truncate_fully_and_start_at(&mut self, offset: i64) -> storage::Result<()> {
        self.inner.truncate_fully_and_start_at(offset)
    }
    fn delete_before(&mut self, offset: i64) -> storage::Result<()> {
        self.inner.delete_before(offset)
    }
    fn flush(&mut self, durability: Durability) -> storage::Result<()> {
        if durability == Durability::Sync {
            self.faults.wait_if_held(self.id());
            if self.faults.fail_next_sync.lock().unwrap().remove(self.id()) {
                return Err(StorageError::io(
                    "syncing (injected failure)",
                    std::io::Error::other("injected sync failure"),
                ));
            }
        }
        self.inner.flush(durability)
    }
    fn put_snapshot(&mut self, offset: i64, bytes: Bytes) -> storage::Result<()> {
        self.inner.put_snapshot(offset, bytes)
    }
    fn snapshot_at_or_below(&self, offset: i64) -> storage::Result<Option<(i64, Bytes)>> {
        self.inner.snapshot_at_or_below(offset)
    }
    fn snapshot_offsets(&self) -> storage::Result<Vec<i64>> {
        self.inner.snapshot_offsets()
    }
    fn delete_snapshot(&mut self, offset: i64) -> storage::Result<()> {
        self.inner.delete_snapshot(offset)
    }
    fn append_aborted_txn(&mut self, entry: AbortedTxn) -> storage::Result<()> {
        self.inner.append_aborted_txn(entry)
    }
    fn last_aborted_txn(&self) -> storage::Result<Option<AbortedTxn>> {
        self.inner.last_aborted_txn()
    }
    fn aborted_txns(&self, from_offset: i64, upper_bound: i64) -> storage::Result<Vec<AbortedTxn>> {
        self.inner.aborted_txns(from_offset, upper_bound)
    }
    fn put_metadata(&mut self, key: &str, value: &[u8]) -> storage::Result<()> {
        self.inner.put_metadata(key, value)
    }
    fn metadata(&self, key: &str) -> storage::Result<Option<Vec<u8>>> {
        self.inner.metadata(key)
    }
}
