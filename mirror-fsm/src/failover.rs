//! Failing over many partitions at once: each partition's STOPPING sequence is unchanged (every step persisted
//! in order, so a crash at any point resumes to the same end — barrier invariants 1–6), but up to `parallelism`
//! partitions run theirs concurrently, so their fsyncs overlap instead of queueing one partition after another.
//!
//! The futures run in the caller's task (a [`Fetcher`] need not be `Send`); the storage calls they await run on
//! the blocking pool (ADR 0010), which is where the overlap happens.

use futures_util::stream::{self, StreamExt};
use partition_log::PartitionLog;

use crate::driver::MirrorDriver;
use crate::error::DriverError;
use crate::fetcher::Fetcher;
use crate::machine::Event;

/// One partition to stop: its log, its driver and its source.
pub struct StopJob<'a> {
    /// The partition's log.
    pub log: &'a mut PartitionLog,
    /// Its driver.
    pub driver: &'a mut MirrorDriver,
    /// Its source (one per partition, as the driver expects).
    pub fetcher: &'a mut dyn Fetcher,
}

/// Sends [`Event::Stop`] to every job, at most `parallelism` at a time (at least one); the results are in the
/// jobs' order.
pub async fn stop_all(jobs: Vec<StopJob<'_>>, parallelism: usize) -> Vec<Result<(), DriverError>> {
    let mut results: Vec<(usize, Result<(), DriverError>)> = stream::iter(jobs.into_iter().enumerate())
        .map(|(index, job)| async move {
            let StopJob { log, driver, fetcher } = job;
            (index, driver.handle(log, fetcher, Event::Stop).await)
        })
        .buffer_unordered(parallelism.max(1))
        .collect()
        .await;
    results.sort_by_key(|(index, _)| *index);
    results.into_iter().map(|(_, result)| result).collect()
}
