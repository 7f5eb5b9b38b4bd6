//! A [`Fetcher`] over a partition log in the same process: the source side of mirrors between clusters that
//! one task drives (tests, the simulator, benchmarks).
//!
//! It reads the source log up to its last stable offset, as every mirror fetcher must (ADR 0009), and answers
//! failback alignment from the source's own `mirror.lmo.<cluster>` record. The log is shared as
//! `Rc<RefCell<…>>`; a fetch borrows it for its duration, so a fetch that finds it mutably borrowed (another
//! future of the same task writing to it) fails as retryable instead of panicking.
// The borrow is held across the log's async read on purpose (see above); `try_borrow` turns overlap into an error.
#![allow(clippy::await_holding_refcell_ref)]

use std::cell::{Ref, RefCell};
use std::rc::Rc;

use async_trait::async_trait;
use partition_log::{Isolation, PartitionLog};

use crate::fetcher::{FetchError, FetchResponse, Fetcher};

/// Reads a source partition log in this process; see the module docs.
#[derive(Debug, Clone)]
pub struct LocalFetcher {
    source: Rc<RefCell<PartitionLog>>,
    /// The cluster id reported with every fetch (the source's; a test may change it to check verification).
    pub reported_cluster_id: String,
}

impl LocalFetcher {
    /// A fetcher reading `source`, which belongs to cluster `source_cluster_id`.
    pub fn new(source: &Rc<RefCell<PartitionLog>>, source_cluster_id: impl Into<String>) -> Self {
        LocalFetcher {
            source: Rc::clone(source),
            reported_cluster_id: source_cluster_id.into(),
        }
    }

    fn source(&self) -> Result<Ref<'_, PartitionLog>, FetchError> {
        self.source.try_borrow().map_err(|_| FetchError {
            message: "the source log is being written".to_owned(),
            retryable: true,
        })
    }
}

fn retryable(error: impl std::fmt::Display) -> FetchError {
    FetchError {
        message: error.to_string(),
        retryable: true,
    }
}

#[async_trait(?Send)]
impl Fetcher for LocalFetcher {
    async fn fetch(&mut self, from_offset: i64, max_bytes: usize) -> Result<FetchResponse, FetchError> {
        let source = self.source()?;
        let fetched = source
            .read(from_offset, max_bytes, Isolation::ReadCommitted)
            .await
            .map_err(retryable)?;
        Ok(FetchResponse {
            source_cluster_id: self.reported_cluster_id.clone(),
            batches: fetched.batches,
        })
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
}
