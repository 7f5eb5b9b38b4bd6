//! Shared test support: partition logs of clusters, a fetcher that reads a peer's log.
// One task drives every log; a `RefCell` borrow held across an await never meets another borrow.
#![allow(clippy::await_holding_refcell_ref)]
#![allow(dead_code)]

use std::cell::RefCell;
use std::rc::Rc;

use async_trait::async_trait;
use mirror_fsm::{FetchError, FetchResponse, Fetcher};
use partition_log::semantics::config;
use partition_log::{Isolation, LogConfig, PartitionLog};
use producer_state::{BarrierScope, PsmConfig};
use record_format::RecordBatch;
use storage::{MemoryStorage, PartitionId, Storage};

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
