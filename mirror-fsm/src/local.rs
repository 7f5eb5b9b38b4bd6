//! A [`Fetcher`] over a partition log in the same process: the source side of mirrors between clusters that
//! one task drives (tests and benchmarks).
//!
//! It reads the source log up to its last stable offset, as every mirror fetcher must (ADR 0009), and answers
//! failback alignment from the source's own `mirror.lmo.<cluster>` record. The log is shared as a [`SharedLog`]
//! (an async read-write lock, `Send`, usable from any task); a fetch holds a read lock for its duration. It
//! takes the lock without waiting: a source that is being written (by the same task that drives the mirror, which
//! would otherwise wait on itself) is a retryable fetch error, as a busy remote source would be.

use std::sync::Arc;

use tokio::sync::{RwLock, RwLockReadGuard};

use async_trait::async_trait;
use partition_log::{Isolation, PartitionLog};

use crate::fetcher::{DetachedFetch, FetchError, FetchResponse, Fetcher};

/// A partition log shared between the task that writes it and the fetchers that read it.
pub type SharedLog = Arc<RwLock<PartitionLog>>;

/// Wraps a log for sharing.
pub fn shared(log: PartitionLog) -> SharedLog {
    Arc::new(RwLock::new(log))
}

/// Reads a source partition log in this process; see the module docs.
#[derive(Debug, Clone)]
pub struct LocalFetcher {
    source: SharedLog,
    /// The cluster id reported with every fetch (the source's; a test may change it to check verification).
    pub reported_cluster_id: String,
}

impl LocalFetcher {
    /// A fetcher reading `source`, which belongs to cluster `source_cluster_id`.
    pub fn new(source: &SharedLog, source_cluster_id: impl Into<String>) -> Self {
        LocalFetcher {
            source: Arc::clone(source),
            reported_cluster_id: source_cluster_id.into(),
        }
    }

    fn source(&self) -> Result<RwLockReadGuard<'_, PartitionLog>, FetchError> {
        self.source.try_read().map_err(|_| busy())
    }
}

fn busy() -> FetchError {
    FetchError::new("the source log is being written".to_owned(), true)
}

fn retryable(error: impl std::fmt::Display) -> FetchError {
    FetchError::new(error.to_string(), true)
}

/// Reads `source` up to its LSO, as one fetch.
async fn read_committed(
    source: &PartitionLog,
    source_cluster_id: String,
    from_offset: i64,
    max_bytes: usize,
) -> Result<FetchResponse, FetchError> {
    let fetched = source
        .read(from_offset, max_bytes, Isolation::ReadCommitted)
        .await
        .map_err(FetchError::from_log_read)?;
    Ok(FetchResponse {
        source_cluster_id,
        batches: fetched.batches,
        buffers: fetched.buffers,
    })
}

#[async_trait(?Send)]
impl Fetcher for LocalFetcher {
    async fn fetch(&mut self, from_offset: i64, max_bytes: usize) -> Result<FetchResponse, FetchError> {
        let source = self.source()?;
        read_committed(&source, self.reported_cluster_id.clone(), from_offset, max_bytes).await
    }

    fn detached_fetch(&self, from_offset: i64, max_bytes: usize) -> Option<DetachedFetch> {
        let source = Arc::clone(&self.source);
        let source_cluster_id = self.reported_cluster_id.clone();
        Some(Box::pin(async move {
            // Without waiting, as on the caller's thread: the task that writes the source may be the one waiting
            // for this fetch.
            let source = source.try_read_owned().map_err(|_| busy())?;
            read_committed(&source, source_cluster_id, from_offset, max_bytes).await
        }))
    }

    async fn last_mirrored_offset(&mut self, mirrored_from: &str) -> Result<Option<i64>, FetchError> {
        let source = self.source()?;
        crate::driver::last_mirrored_offset(&source, mirrored_from)
            .await
            .map_err(retryable)
    }

    async fn log_start_offset(&mut self) -> Result<i64, FetchError> {
        Ok(self.source()?.log_start_offset())
    }

    async fn cluster_id(&mut self) -> Result<String, FetchError> {
        Ok(self.reported_cluster_id.clone())
    }
}
