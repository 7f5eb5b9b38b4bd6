//! A session that resumes (after a transient error, a restart, a pause) keeps its log unless the source proves
//! the logs diverged (ADR 0046): each test fails a mirroring partition, lets the retry run, and checks what the
//! log kept against what the source holds.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use async_trait::async_trait;
use common::{all_batches, memory_log, LogFetcher, SharedLog};
use mirror_fsm::{Event, FetchError, FetchResponse, Fetcher, MirrorDriver, StateKind};
use partition_log::PartitionLog;
use partition_log_testkit::{data, produce};
use producer_state::BarrierScope;

/// `count` idempotent batches of producer `pid` (2 records each), committed.
async fn write(log: &SharedLog, pid: i64, count: usize) {
    let mut log = log.try_write().unwrap();
    for _ in 0..count {
        let sequence = log
            .producer_state()
            .producer(pid)
            .map_or(0, |entry| entry.last_seq() + 1);
        produce(&mut log, data(pid, 0, sequence, 2, false)).await.unwrap();
    }
    let end = log.log_end_offset();
    log.advance_high_watermark(end);
}

/// A source that fails every call while `down`, and answers nothing while `empty` (a new leader that does not
/// serve its high watermark yet).
struct Flaky {
    inner: LogFetcher,
    down: bool,
    empty: bool,
}

#[async_trait(?Send)]
impl Fetcher for Flaky {
    async fn fetch(&mut self, from_offset: i64, max_bytes: usize) -> Result<FetchResponse, FetchError> {
        if self.down {
            return Err(FetchError::new("connection reset by the source", true));
        }
        let mut answer = self.inner.fetch(from_offset, max_bytes).await?;
        if self.empty {
            answer.batches.clear();
            answer.buffers = Default::default();
        }
        Ok(answer)
    }
    async fn last_mirrored_offset(&mut self, from: &str) -> Result<Option<i64>, FetchError> {
        if self.down {
            return Err(FetchError::new("connection reset by the source", true));
        }
        self.inner.last_mirrored_offset(from).await
    }
    async fn log_start_offset(&mut self) -> Result<i64, FetchError> {
        if self.down {
            return Err(FetchError::new("connection reset by the source", true));
        }
        self.inner.log_start_offset().await
    }
    async fn cluster_id(&mut self) -> Result<String, FetchError> {
        if self.down {
            return Err(FetchError::new("connection reset by the source", true));
        }
        self.inner.cluster_id().await
    }
}

/// B mirroring A's `source`, caught up.
async fn mirrored(source: &SharedLog) -> (PartitionLog, MirrorDriver, Flaky) {
    let mut fetcher = Flaky {
        inner: LogFetcher::new(source, "A"),
        down: false,
        empty: false,
    };
    let mut log = memory_log("B", "t", BarrierScope::Writer).await;
    let mut driver = MirrorDriver::recover(&mut log, &mut fetcher, "B").await.unwrap();
    driver
        .handle(
            &mut log,
            &mut fetcher,
            Event::Start {
                source_cluster_id: "A".to_owned(),
            },
        )
        .await
        .unwrap();
    driver.catch_up(&mut log, &mut fetcher).await.unwrap();
    assert_eq!(driver.state().kind(), StateKind::Mirroring);
    (log, driver, fetcher)
}

/// A source's transient failure, as the fetcher reports it.
fn transient(message: &str) -> Event {
    Event::Error {
        message: message.to_owned(),
        retryable: true,
        code: None,
    }
}

/// Fails the session with a transient error, then ticks past every backoff until the machine leaves FAILED.
async fn fail_and_retry(log: &mut PartitionLog, driver: &mut MirrorDriver, fetcher: &mut Flaky) {
    driver
        .handle(log, fetcher, transient("connection reset by the source"))
        .await
        .unwrap();
    assert_eq!(driver.state().kind(), StateKind::Failed);
    retry(log, driver, fetcher).await;
}

async fn retry(log: &mut PartitionLog, driver: &mut MirrorDriver, fetcher: &mut Flaky) {
    let due = driver.state().failure().unwrap().retry_at_ms;
    driver
        .handle(log, fetcher, Event::Tick { now_ms: due })
        .await
        .unwrap();
}

async fn same_batches(log: &PartitionLog, source: &SharedLog) {
    let source = source.try_read().unwrap();
    assert_eq!(all_batches(log).await, all_batches(&source).await);
}

/// The bug this fixes: a retry went back to alignment, asked a source that never mirrored from us, and emptied the
/// partition to copy it again from the source's log start.
#[tokio::test]
async fn a_retry_after_a_transient_error_keeps_the_log_and_fetches_from_its_end() {
    let source = mirror_fsm::shared(memory_log("A", "t", BarrierScope::Writer).await);
    write(&source, 1, 5).await;
    let (mut log, mut driver, mut fetcher) = mirrored(&source).await;
    let truncations = log.truncations();
    write(&source, 1, 3).await;
    fail_and_retry(&mut log, &mut driver, &mut fetcher).await;
    assert_eq!(driver.state().kind(), StateKind::Mirroring);
    assert!(driver.fetching());
    assert_eq!(log.truncations(), truncations, "nothing truncated");
    driver.catch_up(&mut log, &mut fetcher).await.unwrap();
    same_batches(&log, &source).await;
}

/// A source that stays down: the retries fail and back off further each time, the log untouched; once it is back,
/// one successful retry resumes the session.
#[tokio::test]
async fn retries_against_a_dead_source_back_off_and_never_truncate() {
    let source = mirror_fsm::shared(memory_log("A", "t", BarrierScope::Writer).await);
    write(&source, 1, 4).await;
    let (mut log, mut driver, mut fetcher) = mirrored(&source).await;
    let (truncations, end) = (log.truncations(), log.log_end_offset());
    fetcher.down = true;
    driver
        .handle(&mut log, &mut fetcher, transient("connection refused"))
        .await
        .unwrap();
    let mut waits = Vec::new();
    let mut now = 0;
    for _ in 0..8 {
        let failure = driver.state().failure().cloned().unwrap();
        waits.push(failure.retry_at_ms - now);
        now = failure.retry_at_ms;
        retry(&mut log, &mut driver, &mut fetcher).await;
        assert_eq!(driver.state().kind(), StateKind::Failed);
    }
    // Equal jitter: each wait lies between half and all of a ceiling that doubles.
    for (failures, wait) in waits.iter().enumerate() {
        let ceiling =
            (mirror_fsm::machine::INITIAL_BACKOFF_MS << failures).min(mirror_fsm::machine::MAX_BACKOFF_MS);
        assert!(
            (ceiling / 2..=ceiling).contains(wait),
            "wait {failures}: {wait} of {ceiling}: {waits:?}"
        );
    }
    assert_eq!((log.truncations(), log.log_end_offset()), (truncations, end));
    fetcher.down = false;
    write(&source, 1, 2).await;
    retry(&mut log, &mut driver, &mut fetcher).await;
    assert_eq!(driver.state().kind(), StateKind::Mirroring);
    driver.catch_up(&mut log, &mut fetcher).await.unwrap();
    assert_eq!(log.truncations(), truncations);
    same_batches(&log, &source).await;
    // A successful round reset the backoff: the next failure waits the first wait again.
    driver
        .handle(&mut log, &mut fetcher, transient("connection reset"))
        .await
        .unwrap();
    assert_eq!(driver.state().failure().unwrap().attempts, 0);
}

/// A restart resumes a mirroring partition the same way: its log kept, fetched from its end.
#[tokio::test]
async fn a_restart_while_mirroring_keeps_the_log() {
    let source = mirror_fsm::shared(memory_log("A", "t", BarrierScope::Writer).await);
    write(&source, 1, 3).await;
    let (mut log, _, mut fetcher) = mirrored(&source).await;
    let truncations = log.truncations();
    write(&source, 1, 2).await;
    let mut driver = MirrorDriver::recover(&mut log, &mut fetcher, "B").await.unwrap();
    assert_eq!(driver.state().kind(), StateKind::Mirroring);
    assert!(driver.fetching());
    driver.catch_up(&mut log, &mut fetcher).await.unwrap();
    assert_eq!(log.truncations(), truncations);
    same_batches(&log, &source).await;
}

/// The source's history changed under the mirror (an unclean leader election): the log is truncated to the first
/// batch the source does not hold — not emptied — and the new history is copied.
#[tokio::test]
async fn a_source_whose_history_changed_truncates_to_where_the_logs_part() {
    let source = mirror_fsm::shared(memory_log("A", "t", BarrierScope::Writer).await);
    write(&source, 1, 6).await;
    let (mut log, mut driver, mut fetcher) = mirrored(&source).await;
    // The source loses its last three batches (offsets 6..12) and another producer writes there.
    {
        let mut a = source.try_write().unwrap();
        a.truncate_to(6, 0).await.unwrap();
    }
    write(&source, 2, 4).await;
    fail_and_retry(&mut log, &mut driver, &mut fetcher).await;
    assert_eq!(driver.state().kind(), StateKind::Mirroring);
    assert_eq!(log.log_end_offset(), 6, "truncated where the logs part");
    assert_eq!(log.log_start_offset(), 0, "what agrees is kept");
    driver.catch_up(&mut log, &mut fetcher).await.unwrap();
    same_batches(&log, &source).await;
}

/// The source's log now ends below ours (its answer: OFFSET_OUT_OF_RANGE): truncated to the source's end.
#[tokio::test]
async fn a_source_that_ends_below_the_mirror_truncates_it_there() {
    let source = mirror_fsm::shared(memory_log("A", "t", BarrierScope::Writer).await);
    write(&source, 1, 6).await;
    let (mut log, mut driver, mut fetcher) = mirrored(&source).await;
    source.try_write().unwrap().truncate_to(4, 0).await.unwrap();
    fail_and_retry(&mut log, &mut driver, &mut fetcher).await;
    assert_eq!(driver.state().kind(), StateKind::Mirroring);
    assert_eq!(log.log_end_offset(), 4);
    same_batches(&log, &source).await;
}

/// The source's log start passed the mirror's end (retention while the link was down): its records in between
/// are gone there, so the mirror starts again at the source's log start, as Kafka's follower does.
#[tokio::test]
async fn a_source_whose_log_start_passed_the_mirror_restarts_it_there() {
    let source = mirror_fsm::shared(memory_log("A", "t", BarrierScope::Writer).await);
    write(&source, 1, 3).await;
    let (mut log, mut driver, mut fetcher) = mirrored(&source).await;
    write(&source, 1, 4).await;
    source
        .try_write()
        .unwrap()
        .delete_records_before(10)
        .await
        .unwrap();
    fail_and_retry(&mut log, &mut driver, &mut fetcher).await;
    assert_eq!(driver.state().kind(), StateKind::Mirroring);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (10, 10));
    driver.catch_up(&mut log, &mut fetcher).await.unwrap();
    same_batches(&log, &source).await;
}

/// A source that serves nothing below our log end yet proves nothing: the retry fails, retryably, and the log
/// stays as it is.
#[tokio::test]
async fn a_source_that_serves_nothing_yet_is_no_evidence() {
    let source = mirror_fsm::shared(memory_log("A", "t", BarrierScope::Writer).await);
    write(&source, 1, 4).await;
    let (mut log, mut driver, mut fetcher) = mirrored(&source).await;
    let (truncations, end) = (log.truncations(), log.log_end_offset());
    fetcher.empty = true;
    fail_and_retry(&mut log, &mut driver, &mut fetcher).await;
    let failure = driver.state().failure().cloned().unwrap();
    assert!(failure.retryable, "{failure:?}");
    assert!(failure.message.contains("serves nothing"), "{}", failure.message);
    assert_eq!((log.truncations(), log.log_end_offset()), (truncations, end));
    fetcher.empty = false;
    retry(&mut log, &mut driver, &mut fetcher).await;
    assert_eq!(driver.state().kind(), StateKind::Mirroring);
    assert_eq!(log.truncations(), truncations);
}

/// A source that answers as another cluster when the session resumes is refused before anything is truncated.
#[tokio::test]
async fn another_cluster_at_the_source_address_is_refused_before_any_truncation() {
    let source = mirror_fsm::shared(memory_log("A", "t", BarrierScope::Writer).await);
    write(&source, 1, 4).await;
    let (mut log, mut driver, mut fetcher) = mirrored(&source).await;
    let (truncations, end) = (log.truncations(), log.log_end_offset());
    // Another cluster's partition, with a different history, now answers at the address.
    let impostor = mirror_fsm::shared(memory_log("Z", "t", BarrierScope::Writer).await);
    write(&impostor, 7, 1).await;
    fetcher.inner = LogFetcher::new(&impostor, "Z");
    fail_and_retry(&mut log, &mut driver, &mut fetcher).await;
    let failure = driver.state().failure().cloned().unwrap();
    assert!(!failure.retryable);
    assert!(failure.message.contains("\"Z\""), "{}", failure.message);
    assert_eq!((log.truncations(), log.log_end_offset()), (truncations, end));
}

/// A pause and a resume check the log too (the source may have changed meanwhile).
#[tokio::test]
async fn a_resume_after_a_pause_checks_before_it_fetches() {
    let source = mirror_fsm::shared(memory_log("A", "t", BarrierScope::Writer).await);
    write(&source, 1, 4).await;
    let (mut log, mut driver, mut fetcher) = mirrored(&source).await;
    driver.handle(&mut log, &mut fetcher, Event::Pause).await.unwrap();
    source.try_write().unwrap().truncate_to(4, 0).await.unwrap();
    write(&source, 3, 1).await;
    driver
        .handle(&mut log, &mut fetcher, Event::Resume)
        .await
        .unwrap();
    assert_eq!(driver.state().kind(), StateKind::Mirroring);
    assert_eq!(log.log_end_offset(), 4);
    driver.catch_up(&mut log, &mut fetcher).await.unwrap();
    same_batches(&log, &source).await;
}
