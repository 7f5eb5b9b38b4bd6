//! Shared test support: clusters of partition logs, a fetcher that reads a peer's log, a storage wrapper that
//! "crashes" at the N-th write.
// One task drives every log; a `RefCell` borrow held across an await never meets another borrow.
#![allow(clippy::await_holding_refcell_ref)]
#![allow(dead_code)]

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use mirror_fsm::{FetchError, FetchResponse, Fetcher};
use partition_log::semantics::config;
use partition_log::{Isolation, LogConfig, PartitionLog};
use producer_state::{BarrierScope, PsmConfig};
use record_format::{AbortedTxn, RecordBatch};
use storage::{Durability, MemoryStorage, PartitionId, PartitionStorage, Storage};

/// A log shared between its cluster and the fetchers of clusters mirroring from it.
pub type SharedLog = Rc<RefCell<PartitionLog>>;

/// The configuration of a log in cluster `cluster_id`.
pub fn cluster_config(cluster_id: &str, scope: BarrierScope) -> LogConfig {
    LogConfig {
        producer_state: PsmConfig {
            cluster_id: Some(cluster_id.to_owned()),
            barrier_scope: scope,
            ..PsmConfig::default()
        },
        ..config(scope)
    }
}

/// A new log for partition `topic`-0 of cluster `cluster_id` on an in-memory store.
pub async fn memory_log(cluster_id: &str, topic: &str, scope: BarrierScope) -> PartitionLog {
    let store = MemoryStorage::new();
    let storage = store.create(&PartitionId::new(topic, 0).unwrap()).await.unwrap();
    PartitionLog::open(storage, cluster_config(cluster_id, scope), 0)
        .await
        .unwrap()
        .0
}

/// Reads a peer cluster's log, as a mirror fetcher does: up to the peer's last stable offset.
pub struct LogFetcher {
    pub peer: SharedLog,
    /// The cluster id the fetcher reports (a test may switch it mid-session).
    pub reported_cluster_id: String,
}

impl LogFetcher {
    pub fn new(peer: &SharedLog, peer_cluster_id: &str) -> Self {
        LogFetcher {
            peer: Rc::clone(peer),
            reported_cluster_id: peer_cluster_id.to_owned(),
        }
    }
}

#[async_trait(?Send)]
impl Fetcher for LogFetcher {
    async fn fetch(&mut self, from_offset: i64, max_bytes: usize) -> Result<FetchResponse, FetchError> {
        let peer = self.peer.borrow();
        let fetched = peer
            .read(from_offset, max_bytes, Isolation::ReadCommitted)
            .await
            .map_err(|error| FetchError {
                message: error.to_string(),
                retryable: true,
            })?;
        Ok(FetchResponse {
            source_cluster_id: self.reported_cluster_id.clone(),
            batches: fetched.batches,
            log_start_offset: fetched.log_start_offset,
            last_stable_offset: fetched.last_stable_offset,
        })
    }

    async fn last_mirrored_offset(&mut self, mirrored_from: &str) -> Result<Option<i64>, FetchError> {
        let peer = self.peer.borrow();
        mirror_fsm::last_mirrored_offset(&peer, mirrored_from)
            .await
            .map_err(|error| FetchError {
                message: error.to_string(),
                retryable: true,
            })
    }

    async fn log_start_offset(&mut self) -> Result<i64, FetchError> {
        Ok(self.peer.borrow().log_start_offset())
    }
}

/// Every batch of a log, in order.
pub async fn all_batches(log: &PartitionLog) -> Vec<RecordBatch> {
    let mut batches = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let read = log.read_for_replica(offset, usize::MAX).await.unwrap();
        offset = read.last().unwrap().next_offset();
        batches.extend(read);
    }
    batches
}

/// The barriers of a log: (offset, writer cluster id).
pub async fn barriers(log: &PartitionLog) -> Vec<(i64, Option<String>)> {
    all_batches(log)
        .await
        .iter()
        .filter_map(|batch| {
            producer_state::plan::barrier_of(batch)
                .unwrap()
                .map(|barrier| (batch.base_offset(), barrier.writer_cluster_id))
        })
        .collect()
}

/// Counts mutating storage calls; from the `crash_at`-th one on (1-based, adjustable while running), every
/// write fails (the process "died").
pub struct CrashingStorage {
    pub inner: Box<dyn PartitionStorage>,
    pub writes: Arc<AtomicUsize>,
    pub crash_at: Arc<AtomicUsize>,
}

impl CrashingStorage {
    fn write(&self) -> storage::Result<()> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= self.crash_at.load(Ordering::SeqCst) {
            Err(storage::StorageError::io(
                "crash injected",
                std::io::Error::other("the process died"),
            ))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl PartitionStorage for CrashingStorage {
    fn id(&self) -> &PartitionId {
        self.inner.id()
    }
    fn log_start_offset(&self) -> i64 {
        self.inner.log_start_offset()
    }
    fn log_end_offset(&self) -> i64 {
        self.inner.log_end_offset()
    }
    async fn append(&mut self, batches: &[RecordBatch]) -> storage::Result<()> {
        self.write()?;
        self.inner.append(batches).await
    }
    async fn read(&self, from_offset: i64, max_bytes: usize) -> storage::Result<Vec<RecordBatch>> {
        self.inner.read(from_offset, max_bytes).await
    }
    async fn truncate_to(&mut self, offset: i64) -> storage::Result<()> {
        self.write()?;
        self.inner.truncate_to(offset).await
    }
    async fn truncate_fully_and_start_at(&mut self, offset: i64) -> storage::Result<()> {
        self.write()?;
        self.inner.truncate_fully_and_start_at(offset).await
    }
    async fn delete_before(&mut self, offset: i64) -> storage::Result<()> {
        self.write()?;
        self.inner.delete_before(offset).await
    }
    async fn flush(&mut self, durability: Durability) -> storage::Result<()> {
        self.write()?;
        self.inner.flush(durability).await
    }
    async fn put_snapshot(&mut self, offset: i64, bytes: Bytes) -> storage::Result<()> {
        self.write()?;
        self.inner.put_snapshot(offset, bytes).await
    }
    async fn snapshot_at_or_below(&self, offset: i64) -> storage::Result<Option<(i64, Bytes)>> {
        self.inner.snapshot_at_or_below(offset).await
    }
    async fn snapshot_offsets(&self) -> storage::Result<Vec<i64>> {
        self.inner.snapshot_offsets().await
    }
    async fn delete_snapshot(&mut self, offset: i64) -> storage::Result<()> {
        self.write()?;
        self.inner.delete_snapshot(offset).await
    }
    async fn append_aborted_txn(&mut self, entry: AbortedTxn) -> storage::Result<()> {
        self.write()?;
        self.inner.append_aborted_txn(entry).await
    }
    async fn aborted_txns(&self, from_offset: i64, upper_bound: i64) -> storage::Result<Vec<AbortedTxn>> {
        self.inner.aborted_txns(from_offset, upper_bound).await
    }
    async fn put_metadata(&mut self, key: &str, value: &[u8]) -> storage::Result<()> {
        self.write()?;
        self.inner.put_metadata(key, value).await
    }
    async fn metadata(&self, key: &str) -> storage::Result<Option<Vec<u8>>> {
        self.inner.metadata(key).await
    }
}
