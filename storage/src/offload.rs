//! The async storage traits, implemented once for every backend: each call runs off the executor.
//!
//! Every [`BlockingStore`] that is `Clone` is a [`Storage`], and the partitions it opens are
//! [`OffloadedPartition`]s: a [`Checked`] backend partition behind a mutex, whose calls run on tokio's blocking
//! pool (`spawn_blocking`) so that an fsync, a recovery scan or a database write never holds an executor thread
//! (ADR 0010 gives the measured cost and the alternatives). What runs on the calling thread instead:
//!
//! - every call of a store that says it [never blocks](BlockingStore::never_blocks) (memory);
//! - appends and reads of a backend that says they are cheap
//!   ([`appends_are_cheap`](crate::BlockingPartition::appends_are_cheap) and, per append,
//!   [`append_is_cheap`](crate::BlockingPartition::append_is_cheap): a storage-fs append is one `write` into the
//!   page cache unless it rolls its segment, which syncs; a sled or RocksDB append is held in memory unless it
//!   brings the held appends to their bound, which writes them to the database (ADR 0042);
//!   [`reads_are_cheap`](crate::BlockingPartition::reads_are_cheap): storage-fs) — the hand-off costs about
//!   20 µs per call on a small VM, ten times the work;
//! - every call made outside a tokio runtime (a plain `block_on` in a tool): there is no executor to protect.
//!
//! Syncs, snapshot and metadata writes (durable, so fsynced), truncation, retention, opening (recovery scans),
//! listing and deleting always run off the executor, and so does every call of sled and RocksDB but a held
//! append.
//!
//! The handle caches the log bounds each call returns, so `log_start_offset` / `log_end_offset` stay
//! synchronous and cheap.

use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use bytes::Bytes;
use record_format::{AbortedTxn, BatchBuffers, RecordBatch};

use crate::blocking::{BlockingStore, OpenMode};
use crate::checked::Checked;
use crate::error::StorageError;
use crate::id::PartitionId;
use crate::partition::{Durability, PartitionReader, PartitionStorage, StagedRewrite, Storage};
use crate::report::OpenReport;
use crate::segments::SegmentSummary;
use crate::Result;

/// Runs `work` on tokio's blocking pool when inside a runtime (and `inline` is false), else right here.
async fn offload<T: Send + 'static>(
    inline: bool,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    if inline {
        return work();
    }
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle
            .spawn_blocking(work)
            .await
            .map_err(|error| StorageError::Backend {
                backend: "storage",
                message: format!("a storage call did not complete: {error}"),
            })?,
        Err(_) => work(),
    }
}

#[async_trait]
impl<S: BlockingStore + Clone> Storage for S {
    async fn create(&self, id: &PartitionId) -> Result<Box<dyn PartitionStorage>> {
        open_with(self, id, None).await
    }

    async fn open(&self, id: &PartitionId) -> Result<Box<dyn PartitionStorage>> {
        open_with(self, id, Some(OpenMode::ReadWrite)).await
    }

    async fn open_read_only(&self, id: &PartitionId) -> Result<Box<dyn PartitionStorage>> {
        open_with(self, id, Some(OpenMode::ReadOnly)).await
    }

    async fn list(&self) -> Result<Vec<PartitionId>> {
        let store = self.clone();
        offload(self.never_blocks(), move || store.list()).await
    }

    async fn delete(&self, id: &PartitionId) -> Result<()> {
        let (store, id) = (self.clone(), id.clone());
        offload(self.never_blocks(), move || store.delete(&id)).await
    }
}

/// Creates (`mode: None`) or opens a partition of `store` and wraps it.
async fn open_with<S: BlockingStore + Clone>(
    store: &S,
    id: &PartitionId,
    mode: Option<OpenMode>,
) -> Result<Box<dyn PartitionStorage>> {
    let inline = store.never_blocks();
    let (store, owned_id) = (store.clone(), id.clone());
    let checked = offload(inline, move || match mode {
        None => Checked::new(store.create(&owned_id)?, OpenMode::ReadWrite),
        Some(mode) => Checked::new(store.open(&owned_id, mode)?, mode),
    })
    .await?;
    Ok(Box::new(OffloadedPartition {
        id: id.clone(),
        log_start: checked.log_start_offset(),
        log_end: checked.log_end_offset(),
        report: checked.open_report().clone(),
        cheap_appends: inline || checked.inner().appends_are_cheap(),
        cheap_reads: inline || checked.inner().reads_are_cheap(),
        shared: Arc::new(Mutex::new(checked)),
        inline,
    }))
}

/// A partition whose calls run off the executor; see the module docs.
pub struct OffloadedPartition {
    id: PartitionId,
    shared: Arc<Mutex<Checked>>,
    /// Every call runs on the caller's thread.
    inline: bool,
    /// Appends run on the caller's thread.
    cheap_appends: bool,
    /// Reads run on the caller's thread.
    cheap_reads: bool,
    log_start: i64,
    log_end: i64,
    report: OpenReport,
}

impl std::fmt::Debug for OffloadedPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffloadedPartition")
            .field("id", &self.id)
            .field("log_start", &self.log_start)
            .field("log_end", &self.log_end)
            .finish_non_exhaustive()
    }
}

fn lock(shared: &Mutex<Checked>) -> MutexGuard<'_, Checked> {
    // A backend that panicked mid-call left the handle in an unknown state; `call` poisons it below, so the
    // guard itself can be taken over.
    shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl OffloadedPartition {
    /// Runs `work` on the checked partition off the executor and refreshes the cached log bounds.
    async fn call<T: Send + 'static>(
        &mut self,
        work: impl FnOnce(&mut Checked) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let inline = self.inline;
        self.call_where(inline, work).await
    }

    /// Like [`Self::call`], on the caller's thread when `inline`.
    async fn call_where<T: Send + 'static>(
        &mut self,
        inline: bool,
        work: impl FnOnce(&mut Checked) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let shared = self.shared.clone();
        let outcome = offload(inline, move || {
            let mut checked = lock(&shared);
            let outcome = work(&mut checked);
            Ok((outcome, checked.log_start_offset(), checked.log_end_offset()))
        })
        .await;
        match outcome {
            Ok((outcome, start, end)) => {
                self.log_start = start;
                self.log_end = end;
                outcome
            }
            Err(error) => {
                // The call never returned (its thread panicked): nothing is known about what it wrote.
                lock(&self.shared).poison(error.to_string());
                Err(error)
            }
        }
    }

    /// An append of batches sliced from `buffers`: on the caller's thread when appends are cheap.
    async fn append_from(&mut self, batches: &[RecordBatch], buffers: &BatchBuffers) -> Result<()> {
        if self.cheap_appends {
            // The hot path of a page-cache backend: no copy of the batch list, no closure, no hand-off — unless
            // this append does more than write (a segment roll syncs), which runs off the executor below.
            let mut checked = lock(&self.shared);
            if self.inline || checked.inner().append_is_cheap(batches) {
                let outcome = checked.append_with_buffers(batches, buffers);
                self.log_start = checked.log_start_offset();
                self.log_end = checked.log_end_offset();
                return outcome;
            }
        }
        let (batches, buffers) = (batches.to_vec(), buffers.clone());
        self.call(move |checked| checked.append_with_buffers(&batches, &buffers))
            .await
    }

    /// A read-only call (the bounds cannot change), on the caller's thread when reads are cheap.
    async fn read_call<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Checked) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        read_on(&self.shared, self.cheap_reads, work).await
    }
}

/// A read of `shared`, on the caller's thread when `cheap`, else on the blocking pool.
async fn read_on<T: Send + 'static>(
    shared: &Arc<Mutex<Checked>>,
    cheap: bool,
    work: impl FnOnce(&Checked) -> Result<T> + Send + 'static,
) -> Result<T> {
    // A cheap read runs here only when the partition is free: a reader need not hold the partition's log (a
    // cleaner's pass, a search by timestamp), and the partition may be in the middle of a sync on the blocking
    // pool, which this thread must not wait for.
    if cheap {
        match shared.try_lock() {
            Ok(checked) => return work(&checked),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => return work(&poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => {}
        }
    }
    let shared = shared.clone();
    offload(false, move || work(&lock(&shared))).await
}

/// An [`OffloadedPartition`]'s reader: the same backend partition, its calls made as the handle's reads are.
struct OffloadedReader {
    shared: Arc<Mutex<Checked>>,
    cheap_reads: bool,
}

impl OffloadedReader {
    async fn read_call<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Checked) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        read_on(&self.shared, self.cheap_reads, work).await
    }
}

#[async_trait]
impl PartitionReader for OffloadedReader {
    async fn read(&self, from_offset: i64, max_bytes: usize) -> Result<Vec<RecordBatch>> {
        self.read_call(move |checked| checked.read(from_offset, max_bytes))
            .await
    }

    async fn segments(&self, from_offset: i64, max: usize) -> Result<Vec<SegmentSummary>> {
        self.read_call(move |checked| checked.segments(from_offset, max))
            .await
    }

    async fn aborted_txns(&self, from_offset: i64, upper_bound: i64) -> Result<Vec<AbortedTxn>> {
        self.read_call(move |checked| checked.aborted_txns(from_offset, upper_bound))
            .await
    }

    /// The partition is held only to check the range and learn its segments; the files are written without it,
    /// off the executor.
    async fn stage_rewrite(&self, from: i64, to: i64, batches: Vec<RecordBatch>) -> Result<StagedRewrite> {
        let (staging, batches) = read_on(&self.shared, self.cheap_reads, move |checked| {
            let staging = checked.rewrite_stager(from, to, &batches)?;
            Ok((staging, batches))
        })
        .await?;
        let Some((stager, bases)) = staging else {
            return Ok(StagedRewrite::Batches { from, to, batches });
        };
        let (files, cleanup) = offload(false, move || stager.stage(&bases, to, &batches)).await?;
        Ok(StagedRewrite::Files {
            from,
            to,
            files,
            cleanup,
        })
    }
}

#[async_trait]
impl PartitionStorage for OffloadedPartition {
    fn reader(&self) -> Box<dyn PartitionReader> {
        Box::new(OffloadedReader {
            shared: self.shared.clone(),
            cheap_reads: self.cheap_reads,
        })
    }

    fn id(&self) -> &PartitionId {
        &self.id
    }

    fn log_start_offset(&self) -> i64 {
        self.log_start
    }

    fn log_end_offset(&self) -> i64 {
        self.log_end
    }

    fn open_report(&self) -> &OpenReport {
        &self.report
    }

    async fn append(&mut self, batches: &[RecordBatch]) -> Result<()> {
        // Not through `append_with_buffers`: each call of an `async_trait` method allocates its future.
        self.append_from(batches, &BatchBuffers::default()).await
    }

    async fn append_with_buffers(&mut self, batches: &[RecordBatch], buffers: &BatchBuffers) -> Result<()> {
        self.append_from(batches, buffers).await
    }

    async fn read(&self, from_offset: i64, max_bytes: usize) -> Result<Vec<RecordBatch>> {
        self.read_call(move |checked| checked.read(from_offset, max_bytes))
            .await
    }

    async fn read_with_buffers(
        &self,
        from_offset: i64,
        max_bytes: usize,
    ) -> Result<(Vec<RecordBatch>, BatchBuffers)> {
        self.read_call(move |checked| checked.read_with_buffers(from_offset, max_bytes))
            .await
    }

    async fn segments(&self, from_offset: i64, max: usize) -> Result<Vec<SegmentSummary>> {
        self.read_call(move |checked| checked.segments(from_offset, max))
            .await
    }

    async fn size_bytes(&self) -> Result<u64> {
        self.read_call(|checked| checked.size_bytes()).await
    }

    async fn replace_batches(&mut self, from: i64, to: i64, batches: &[RecordBatch]) -> Result<()> {
        let batches = batches.to_vec();
        self.call(move |checked| checked.replace_batches(from, to, &batches))
            .await
    }

    async fn install_rewrite(&mut self, staged: StagedRewrite) -> Result<()> {
        match staged {
            StagedRewrite::Batches { from, to, batches } => self.replace_batches(from, to, &batches).await,
            StagedRewrite::Files {
                from,
                to,
                files,
                cleanup,
            } => {
                let installed = self
                    .call(move |checked| checked.install_staged(from, to, files))
                    .await;
                drop(cleanup);
                installed
            }
        }
    }

    async fn roll_segment(&mut self) -> Result<()> {
        self.call(|checked| checked.roll_segment()).await
    }

    async fn truncate_to(&mut self, offset: i64) -> Result<()> {
        self.call(move |checked| checked.truncate_to(offset)).await
    }

    async fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<()> {
        self.call(move |checked| checked.truncate_fully_and_start_at(offset))
            .await
    }

    async fn delete_before(&mut self, offset: i64) -> Result<()> {
        self.call(move |checked| checked.delete_before(offset)).await
    }

    async fn flush(&mut self, durability: Durability) -> Result<()> {
        self.call(move |checked| checked.flush(durability)).await
    }

    async fn put_snapshot(&mut self, offset: i64, bytes: Bytes) -> Result<()> {
        self.call(move |checked| checked.put_snapshot(offset, bytes))
            .await
    }

    async fn snapshot_at_or_below(&self, offset: i64) -> Result<Option<(i64, Bytes)>> {
        self.read_call(move |checked| checked.snapshot_at_or_below(offset))
            .await
    }

    async fn snapshot_offsets(&self) -> Result<Vec<i64>> {
        self.read_call(|checked| checked.snapshot_offsets()).await
    }

    async fn delete_snapshot(&mut self, offset: i64) -> Result<()> {
        self.call(move |checked| checked.delete_snapshot(offset)).await
    }

    async fn append_aborted_txn(&mut self, entry: AbortedTxn) -> Result<()> {
        self.call(move |checked| checked.append_aborted_txn(entry)).await
    }

    async fn aborted_txns(&self, from_offset: i64, upper_bound: i64) -> Result<Vec<AbortedTxn>> {
        self.read_call(move |checked| checked.aborted_txns(from_offset, upper_bound))
            .await
    }

    async fn put_metadata(&mut self, key: &str, value: &[u8]) -> Result<()> {
        let (key, value) = (key.to_owned(), value.to_vec());
        self.call(move |checked| checked.put_metadata(&key, &value)).await
    }

    async fn metadata(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let key = key.to_owned();
        self.read_call(move |checked| checked.metadata(&key)).await
    }
}
