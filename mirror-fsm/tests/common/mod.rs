//! Shared test support: partition logs of clusters and helpers to inspect them.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use partition_log::{LogConfig, PartitionLog};
use partition_log_testkit::config;
use producer_state::{BarrierScope, PsmConfig};
use record_format::RecordBatch;
use storage::{MemoryStorage, PartitionId, Storage};

/// A log shared between its cluster and the fetchers of clusters mirroring from it.
pub type SharedLog = mirror_fsm::SharedLog;

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

/// The in-process fetcher of the library.
pub use mirror_fsm::LocalFetcher as LogFetcher;

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

/// Recovers a driver for `log` as cluster `local`, starts mirroring from `source`'s cluster and catches up.
pub async fn start_mirroring(
    log: &mut PartitionLog,
    fetcher: &mut LogFetcher,
    source: &str,
    local: &str,
) -> mirror_fsm::MirrorDriver {
    let mut driver = mirror_fsm::MirrorDriver::recover(log, fetcher, local)
        .await
        .unwrap();
    let start = mirror_fsm::Event::Start {
        source_cluster_id: source.to_owned(),
    };
    driver.handle(log, fetcher, start).await.unwrap();
    driver.catch_up(log, fetcher).await.unwrap();
    driver
}
