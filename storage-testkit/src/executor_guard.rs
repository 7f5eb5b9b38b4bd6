//! Proof that no fsync or database write runs on an executor thread (ADR 0010, issue 33 item 4).
//!
//! [`guarded_runtime`] builds a multi-thread tokio runtime and learns its worker threads: tokio starts them when
//! the runtime is built, before any blocking-pool thread exists, so the threads started by then are exactly the
//! workers. [`WorkerThreads::check`] records a violation when the calling thread is one of them.
//! [`NoSyncOnWorkers`] wraps any backend (it is a [`BlockingStore`], below `storage`'s checks) and checks every
//! call that makes data durable or writes a database: flushes, snapshots, metadata, truncation, retention and
//! aborted-index appends always, and every append the backend does not call cheap (a page-cache write, or a
//! database append only held in memory: ADR 0042). Not checked: reads, which on sled and RocksDB write held
//! appends first (the offload layer runs every read of those backends off the executor), and a handle's drop.
//! A file-system backend's own fsyncs (a segment roll inside an append) are checked below it, at its `Vfs` (see
//! `partition-log-testkit/tests/no_fsync_on_executor.rs`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use bytes::Bytes;
use record_format::{AbortedTxn, BatchBuffers, RecordBatch};
use storage::{BlockingPartition, BlockingStore, Durability, OpenMode, OpenReport, PartitionId};

/// The worker threads of a runtime, and the violations seen.
#[derive(Debug, Clone, Default)]
pub struct WorkerThreads {
    workers: Arc<Mutex<HashSet<ThreadId>>>,
    violations: Arc<Mutex<Vec<String>>>,
}

impl WorkerThreads {
    /// True when the calling thread is a worker.
    pub fn on_worker(&self) -> bool {
        self.workers
            .lock()
            .unwrap()
            .contains(&std::thread::current().id())
    }

    /// Records a violation named `what` when called on a worker thread.
    pub fn check(&self, what: &str) {
        if self.on_worker() {
            let thread = std::thread::current();
            self.violations.lock().unwrap().push(format!(
                "{what} ran on executor thread {:?} ({})",
                thread.id(),
                thread.name().unwrap_or("unnamed")
            ));
        }
    }

    /// The violations so far.
    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }

    /// How many workers are known.
    pub fn count(&self) -> usize {
        self.workers.lock().unwrap().len()
    }
}

/// A multi-thread runtime with `workers` worker threads, and its [`WorkerThreads`].
pub fn guarded_runtime(workers: usize) -> (tokio::runtime::Runtime, WorkerThreads) {
    let threads = WorkerThreads::default();
    let started: Arc<Mutex<HashSet<ThreadId>>> = Arc::default();
    let record = Arc::clone(&started);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .on_thread_start(move || {
            record.lock().unwrap().insert(std::thread::current().id());
        })
        .build()
        .expect("a runtime");
    let deadline = Instant::now() + Duration::from_secs(10);
    while started.lock().unwrap().len() < workers {
        assert!(Instant::now() < deadline, "the runtime's workers did not start");
        std::thread::sleep(Duration::from_millis(1));
    }
    *threads.workers.lock().unwrap() = started.lock().unwrap().clone();
    (runtime, threads)
}

/// A backend whose durable calls check that they run off the executor; see the module docs.
#[derive(Debug, Clone)]
pub struct NoSyncOnWorkers<S> {
    inner: S,
    threads: WorkerThreads,
}

impl<S> NoSyncOnWorkers<S> {
    /// Wraps `inner`, checking against `threads`.
    pub fn new(inner: S, threads: WorkerThreads) -> Self {
        NoSyncOnWorkers { inner, threads }
    }
}

impl<S: BlockingStore> BlockingStore for NoSyncOnWorkers<S> {
    fn create(&self, id: &PartitionId) -> storage::Result<Box<dyn BlockingPartition>> {
        self.threads.check("creating a partition");
        Ok(Box::new(Guarded {
            inner: self.inner.create(id)?,
            threads: self.threads.clone(),
        }))
    }

    fn open(&self, id: &PartitionId, mode: OpenMode) -> storage::Result<Box<dyn BlockingPartition>> {
        self.threads.check("opening a partition");
        Ok(Box::new(Guarded {
            inner: self.inner.open(id, mode)?,
            threads: self.threads.clone(),
        }))
    }

    fn list(&self) -> storage::Result<Vec<PartitionId>> {
        self.inner.list()
    }

    fn delete(&self, id: &PartitionId) -> storage::Result<()> {
        self.threads.check("deleting a partition");
        self.inner.delete(id)
    }

    fn never_blocks(&self) -> bool {
        self.inner.never_blocks()
    }
}

struct Guarded {
    inner: Box<dyn BlockingPartition>,
    threads: WorkerThreads,
}

impl Guarded {
    /// An append the backend does not call cheap writes a database, or rolls a segment: never on a worker. A
    /// cheap one (a page-cache write; a database append held in memory, ADR 0042) may be.
    fn check_append(&self, batches: &[RecordBatch]) {
        if !self.inner.append_is_cheap(batches) {
            self.threads
                .check("an append that writes a database or rolls a segment");
        }
    }
}

impl BlockingPartition for Guarded {
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
        self.inner.append_is_cheap(batches)
    }

    fn reads_are_cheap(&self) -> bool {
        self.inner.reads_are_cheap()
    }

    fn append(&mut self, batches: &[RecordBatch]) -> storage::Result<()> {
        self.check_append(batches);
        self.inner.append(batches)
    }

    fn append_with_buffers(
        &mut self,
        batches: &[RecordBatch],
        buffers: &BatchBuffers,
    ) -> storage::Result<()> {
        self.check_append(batches);
        self.inner.append_with_buffers(batches, buffers)
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

    fn read_with_buffers(
        &self,
        from_offset: i64,
        max_bytes: usize,
    ) -> storage::Result<(Vec<RecordBatch>, BatchBuffers)> {
        self.inner.read_with_buffers(from_offset, max_bytes)
    }

    fn truncate_to(&mut self, offset: i64) -> storage::Result<()> {
        self.threads.check("a truncation");
        self.inner.truncate_to(offset)
    }

    fn truncate_fully_and_start_at(&mut self, offset: i64) -> storage::Result<()> {
        self.threads.check("a full truncation");
        self.inner.truncate_fully_and_start_at(offset)
    }

    fn delete_before(&mut self, offset: i64) -> storage::Result<()> {
        self.threads.check("retention");
        self.inner.delete_before(offset)
    }

    fn flush(&mut self, durability: Durability) -> storage::Result<()> {
        // A buffered flush writes a database's held appends; a synced one syncs.
        self.threads.check(match durability {
            Durability::Sync => "a sync",
            Durability::Buffered => "a buffered flush",
        });
        self.inner.flush(durability)
    }

    fn put_snapshot(&mut self, offset: i64, bytes: Bytes) -> storage::Result<()> {
        self.threads.check("a snapshot write");
        self.inner.put_snapshot(offset, bytes)
    }

    fn snapshot_at_or_below(&self, offset: i64) -> storage::Result<Option<(i64, Bytes)>> {
        self.inner.snapshot_at_or_below(offset)
    }

    fn snapshot_offsets(&self) -> storage::Result<Vec<i64>> {
        self.inner.snapshot_offsets()
    }

    fn delete_snapshot(&mut self, offset: i64) -> storage::Result<()> {
        self.threads.check("a snapshot deletion");
        self.inner.delete_snapshot(offset)
    }

    fn append_aborted_txn(&mut self, entry: AbortedTxn) -> storage::Result<()> {
        self.threads.check("an aborted-index append");
        self.inner.append_aborted_txn(entry)
    }

    fn last_aborted_txn(&self) -> storage::Result<Option<AbortedTxn>> {
        self.inner.last_aborted_txn()
    }

    fn aborted_txns(&self, from_offset: i64, upper_bound: i64) -> storage::Result<Vec<AbortedTxn>> {
        self.inner.aborted_txns(from_offset, upper_bound)
    }

    fn put_metadata(&mut self, key: &str, value: &[u8]) -> storage::Result<()> {
        self.threads.check("a metadata write");
        self.inner.put_metadata(key, value)
    }

    fn metadata(&self, key: &str) -> storage::Result<Option<Vec<u8>>> {
        self.inner.metadata(key)
    }
}
