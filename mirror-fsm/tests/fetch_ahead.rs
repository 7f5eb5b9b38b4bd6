//! Catching up a backlog fetches ahead (ADR 0020): the next range is fetched and CRC-checked on another thread
//! while the current one is written. These tests pin that it happens, that the copy is exact, that a corrupt
//! batch in a range fetched ahead is refused like any other, and that a failed fetch ahead costs nothing. On
//! storage-fs a fetched range is written with one write of the buffer it was read into, and a batch a fetcher
//! changed is written as changed.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::{all_batches, cluster_config, memory_log, LogFetcher};
use mirror_fsm::{DetachedFetch, FetchError, FetchResponse, Fetcher, StateKind};
use partition_log::{LogConfig, PartitionLog};
use producer_state::{AppendOrigin, BarrierScope, TransactionVersion};
use record_format::{BatchBuilder, RecordBatch};
use storage::{PartitionId, Storage};
use storage_fs::sim::SimFs;
use storage_fs::{FsConfig, FsStorage};

/// Appends one client batch of `value` from `producer` at `sequence` to `source` and commits it (HW to the end).
async fn produce_committed(source: &mut PartitionLog, producer: i64, sequence: i32, value: &[u8]) {
    let mut builder = BatchBuilder::new().producer(producer, 0, sequence);
    builder.add(1_000, Some(b"key"), Some(value), &[]);
    let batch = builder.build().unwrap();
    source
        .append_as_leader(vec![batch], AppendOrigin::Client, TransactionVersion::V0)
        .await
        .unwrap();
    let end = source.log_end_offset();
    source.advance_high_watermark(end);
}

/// A source holding `mib` MiB of 1 KiB idempotent batches (ten producers), all committed.
async fn source_with_backlog(mib: usize) -> PartitionLog {
    let mut source = memory_log("A", "orders", BarrierScope::Writer).await;
    fill(&mut source, mib).await;
    source
}

/// Produces `mib` MiB of 1 KiB idempotent batches (ten producers) to an empty log, all committed.
async fn fill(source: &mut PartitionLog, mib: usize) {
    for i in 0..mib * 1024 {
        produce_committed(source, i as i64 % 10, (i / 10) as i32, &[b'v'; 950]).await;
    }
}

/// A new log for partition `topic`-0 of cluster `cluster_id` on storage-fs over the simulated file system `fs`.
async fn fs_log(fs: &SimFs, cluster_id: &str, topic: &str) -> PartitionLog {
    let store = FsStorage::open_on(FsConfig::new("/data"), Arc::new(fs.clone())).unwrap();
    let storage = store.create(&PartitionId::new(topic, 0).unwrap()).await.unwrap();
    // Kafka's segment size: the scenario suite's 1 KiB segments would roll a new segment (files created and
    // synced) at every range, which is not what these tests count.
    let config = LogConfig {
        segment_bytes: 1 << 30,
        ..cluster_config(cluster_id, BarrierScope::Writer)
    };
    PartitionLog::open(storage, config, 0).await.unwrap().0
}

/// Wraps the in-process fetcher: counts fetches on and off the caller's thread, and may damage one batch or
/// make every detached fetch fail.
#[derive(Clone)]
struct Observed {
    inner: LogFetcher,
    damaged_offset: Option<i64>,
    detached_fail: bool,
    detached_threads: Arc<Mutex<Vec<Option<String>>>>,
    fetches_here: Arc<AtomicUsize>,
}

impl Observed {
    fn new(inner: LogFetcher) -> Self {
        Observed {
            inner,
            damaged_offset: None,
            detached_fail: false,
            detached_threads: Arc::default(),
            fetches_here: Arc::default(),
        }
    }
}

/// Flips one bit in the last byte (covered by the CRC) of the batch starting at `offset`, if fetched.
fn damage(mut response: FetchResponse, offset: Option<i64>) -> FetchResponse {
    for batch in &mut response.batches {
        if Some(batch.base_offset()) == offset {
            let mut bytes = batch.as_bytes().to_vec();
            let last = bytes.len() - 1;
            bytes[last] ^= 1;
            *batch = RecordBatch::parse(bytes.into()).unwrap();
        }
    }
    response
}

#[async_trait(?Send)]
impl Fetcher for Observed {
    async fn fetch(&mut self, from_offset: i64, max_bytes: usize) -> Result<FetchResponse, FetchError> {
        self.fetches_here.fetch_add(1, Ordering::SeqCst);
        let response = self.inner.fetch(from_offset, max_bytes).await?;
        Ok(damage(response, self.damaged_offset))
    }

    fn detached_fetch(&self, from_offset: i64, max_bytes: usize) -> Option<DetachedFetch> {
        let inner = self.inner.detached_fetch(from_offset, max_bytes)?;
        let (damaged_offset, fail, threads) = (
            self.damaged_offset,
            self.detached_fail,
            Arc::clone(&self.detached_threads),
        );
        Some(Box::pin(async move {
            threads
                .lock()
                .unwrap()
                .push(std::thread::current().name().map(str::to_owned));
            if fail {
                return Err(FetchError::new("injected".to_owned(), true));
            }
            Ok(damage(inner.await?, damaged_offset))
        }))
    }

    async fn last_mirrored_offset(&mut self, mirrored_from: &str) -> Result<Option<i64>, FetchError> {
        self.inner.last_mirrored_offset(mirrored_from).await
    }

    async fn log_start_offset(&mut self) -> Result<i64, FetchError> {
        self.inner.log_start_offset().await
    }

    async fn cluster_id(&mut self) -> Result<String, FetchError> {
        self.inner.cluster_id().await
    }
}

/// A mirror of `source` in cluster B, caught up through `fetcher` (a wrapped [`LogFetcher`]).
async fn mirror(fetcher: &mut Observed) -> (PartitionLog, mirror_fsm::MirrorDriver) {
    let log = memory_log("B", "orders", BarrierScope::Writer).await;
    caught_up(log, fetcher).await
}

/// `log` (in cluster B) started as a mirror of cluster A's partition behind `fetcher`, and caught up.
async fn caught_up(
    mut log: PartitionLog,
    fetcher: &mut dyn Fetcher,
) -> (PartitionLog, mirror_fsm::MirrorDriver) {
    let mut driver = mirror_fsm::MirrorDriver::recover(&mut log, fetcher, "B")
        .await
        .unwrap();
    let start = mirror_fsm::Event::Start {
        source_cluster_id: "A".to_owned(),
    };
    driver.handle(&mut log, fetcher, start).await.unwrap();
    driver.catch_up(&mut log, fetcher).await.unwrap();
    (log, driver)
}

#[tokio::test]
async fn a_backlog_is_fetched_ahead_on_another_thread_and_copied_byte_for_byte() {
    let source = mirror_fsm::shared(source_with_backlog(4).await);
    let mut fetcher = Observed::new(LogFetcher::new(&source, "A"));
    let (log, driver) = mirror(&mut fetcher).await;
    assert_eq!(driver.state().kind(), StateKind::Mirroring);
    let source = source.read().await;
    assert_eq!(log.log_end_offset(), source.log_end_offset());
    assert_eq!(all_batches(&log).await, all_batches(&source).await);
    let threads = fetcher.detached_threads.lock().unwrap().clone();
    assert!(
        threads.len() >= 3,
        "4 MiB in 1 MiB fetches: ranges 2.. fetched ahead, got {threads:?}"
    );
    assert!(
        threads
            .iter()
            .all(|name| name.as_deref() == Some("mirror-fetch-ahead")),
        "{threads:?}"
    );
}

#[tokio::test]
async fn a_caught_up_partition_does_not_fetch_ahead() {
    let mut one_batch = source_with_backlog(0).await;
    produce_committed(&mut one_batch, 1, 0, b"one").await;
    let source = mirror_fsm::shared(one_batch);
    let mut fetcher = Observed::new(LogFetcher::new(&source, "A"));
    let (log, _driver) = mirror(&mut fetcher).await;
    assert_eq!(log.log_end_offset(), 1);
    assert!(fetcher.detached_threads.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_corrupt_batch_in_a_range_fetched_ahead_is_refused_and_nothing_from_its_range_is_appended() {
    let source_log = source_with_backlog(3).await;
    // A batch inside the third fetch (fetches are about 1 MiB: about 1,000 batches each).
    let damaged = 2_500;
    let source = mirror_fsm::shared(source_log);
    let mut fetcher = Observed::new(LogFetcher::new(&source, "A"));
    fetcher.damaged_offset = Some(damaged);
    let (log, driver) = mirror(&mut fetcher).await;
    let failure = driver.state().failure().expect("the session failed");
    assert!(!failure.retryable, "{failure:?}");
    assert!(
        failure.message.contains("a mirrored batch was refused")
            && failure.message.contains("base offset 2500"),
        "{}",
        failure.message
    );
    assert!(
        !fetcher.detached_threads.lock().unwrap().is_empty(),
        "the damaged range was fetched ahead"
    );
    // Whole fetches before the damaged one were written; nothing of the damaged fetch was.
    assert!(
        log.log_end_offset() > 0 && log.log_end_offset() <= damaged,
        "{}",
        log.log_end_offset()
    );
    let source = source.read().await;
    let copied = all_batches(&log).await;
    assert_eq!(copied[..], all_batches(&source).await[..copied.len()]);
}

#[tokio::test]
async fn failed_fetches_ahead_fall_back_to_fetching_on_the_callers_thread() {
    let source = mirror_fsm::shared(source_with_backlog(3).await);
    let mut fetcher = Observed::new(LogFetcher::new(&source, "A"));
    fetcher.detached_fail = true;
    let (log, driver) = mirror(&mut fetcher).await;
    assert_eq!(driver.state().kind(), StateKind::Mirroring);
    let source = source.read().await;
    assert_eq!(all_batches(&log).await, all_batches(&source).await);
    assert!(!fetcher.detached_threads.lock().unwrap().is_empty());
    // Every range was fetched here in the end (once per range, plus the empty fetch that ends the catch-up).
    assert!(fetcher.fetches_here.load(Ordering::SeqCst) >= 4);
}

/// The simulator's fetchers cannot fetch off their thread: they fetch on the caller's and only the CRC check of a
/// range fetched ahead moves. The copy is the same.
#[tokio::test]
async fn a_fetcher_that_cannot_detach_copies_its_backlog_exactly() {
    struct Attached(LogFetcher);
    #[async_trait(?Send)]
    impl Fetcher for Attached {
        async fn fetch(&mut self, from_offset: i64, max_bytes: usize) -> Result<FetchResponse, FetchError> {
            self.0.fetch(from_offset, max_bytes).await
        }
        async fn last_mirrored_offset(&mut self, from: &str) -> Result<Option<i64>, FetchError> {
            self.0.last_mirrored_offset(from).await
        }
        async fn log_start_offset(&mut self) -> Result<i64, FetchError> {
            self.0.log_start_offset().await
        }
        async fn cluster_id(&mut self) -> Result<String, FetchError> {
            self.0.cluster_id().await
        }
    }
    let source = mirror_fsm::shared(source_with_backlog(3).await);
    let mut fetcher = Attached(LogFetcher::new(&source, "A"));
    let log = memory_log("B", "orders", BarrierScope::Writer).await;
    let (log, driver) = caught_up(log, &mut fetcher).await;
    assert_eq!(driver.state().kind(), StateKind::Mirroring);
    let source = source.read().await;
    assert_eq!(all_batches(&log).await, all_batches(&source).await);
}

/// Cluster A's partition on storage-fs over `fs`, holding `mib` MiB of committed 1 KiB batches, shared.
async fn fs_source(fs: &SimFs, mib: usize) -> mirror_fsm::SharedLog {
    let mut source = fs_log(fs, "A", "source").await;
    fill(&mut source, mib).await;
    mirror_fsm::shared(source)
}

/// Changes the partition leader epoch of the batch at `offset` in every fetch that brings it (as the simulator's
/// fetchers change producer ids): the changed batch is a new allocation, outside the buffer the range was read
/// into.
#[derive(Clone)]
struct ChangesOneBatch {
    inner: LogFetcher,
    offset: i64,
}

const CHANGED_EPOCH: i32 = 77;

fn change(mut response: FetchResponse, offset: i64) -> FetchResponse {
    for batch in &mut response.batches {
        if batch.base_offset() == offset {
            batch.set_partition_leader_epoch(CHANGED_EPOCH);
        }
    }
    response
}

#[async_trait(?Send)]
impl Fetcher for ChangesOneBatch {
    async fn fetch(&mut self, from_offset: i64, max_bytes: usize) -> Result<FetchResponse, FetchError> {
        Ok(change(
            self.inner.fetch(from_offset, max_bytes).await?,
            self.offset,
        ))
    }

    fn detached_fetch(&self, from_offset: i64, max_bytes: usize) -> Option<DetachedFetch> {
        let (inner, offset) = (self.inner.detached_fetch(from_offset, max_bytes)?, self.offset);
        Some(Box::pin(async move { Ok(change(inner.await?, offset)) }))
    }

    async fn last_mirrored_offset(&mut self, mirrored_from: &str) -> Result<Option<i64>, FetchError> {
        self.inner.last_mirrored_offset(mirrored_from).await
    }

    async fn log_start_offset(&mut self) -> Result<i64, FetchError> {
        self.inner.log_start_offset().await
    }

    async fn cluster_id(&mut self) -> Result<String, FetchError> {
        self.inner.cluster_id().await
    }
}

#[tokio::test]
async fn an_fs_mirror_writes_each_fetched_range_with_one_write_and_copies_it_byte_for_byte() {
    let fs = SimFs::new();
    let source = fs_source(&fs, 4).await;
    let mut fetcher = Observed::new(LogFetcher::new(&source, "A"));
    let log = fs_log(&fs, "B", "orders").await;
    let before = fs.stats().mutations;
    let (log, driver) = caught_up(log, &mut fetcher).await;
    let writes = fs.stats().mutations - before;
    assert_eq!(driver.state().kind(), StateKind::Mirroring);
    let source = source.read().await;
    assert_eq!(all_batches(&log).await, all_batches(&source).await);
    // 4,096 batches in four ranges: a write per batch (the simulated file system has no `writev`) would be
    // thousands; a write per range, with the start's durable writes and the index and bookkeeping writes, a few
    // dozen.
    assert!(writes < 100, "{writes} writes for 4,096 batches");
}

#[tokio::test]
async fn a_batch_a_fetcher_changed_is_written_as_changed_not_as_the_buffer_holds_it() {
    let fs = SimFs::new();
    let source = fs_source(&fs, 3).await;
    // One batch in the first range (fetched on the caller's thread) and one in the third (fetched ahead).
    for changed in [500, 2_500] {
        let mut fetcher = ChangesOneBatch {
            inner: LogFetcher::new(&source, "A"),
            offset: changed,
        };
        let log = fs_log(&fs, "B", &format!("changed-{changed}")).await;
        let (log, driver) = caught_up(log, &mut fetcher).await;
        assert_eq!(driver.state().kind(), StateKind::Mirroring);
        let mut expected = all_batches(&*source.read().await).await;
        expected[changed as usize].set_partition_leader_epoch(CHANGED_EPOCH);
        let copied = all_batches(&log).await;
        assert_eq!(copied[changed as usize].partition_leader_epoch(), CHANGED_EPOCH);
        assert_eq!(copied, expected);
    }
}
