//! `log.cleaner.io.max.bytes.per.second`: the log cleaner's reads and writes held to a rate, as Kafka's
//! `Throttler` holds its cleaner threads'. Every pass reads through a [`ThrottledReader`], which counts the bytes
//! of each batch read and of each rewrite staged. Once a check interval (300 ms) has passed — or, unlike Kafka,
//! once the bytes counted are more than the rate allows in one interval — a rate above the limit is paid for
//! with a pause long enough to bring the interval's bytes back to the limit, and the next interval starts after
//! it. (Kafka checks only after the interval, so a pass quicker than 300 ms is never held back, whatever it
//! reads; here a burst is bounded by one interval's worth of bytes.) An interval idle for longer than the check
//! interval starts afresh at the next charge, so idle time is no credit. A rewrite is charged before it is
//! staged, twice (its write, and the scan that opens the new segment), so its pause comes before its burst. A
//! pause longer than an hour is paid an hour at a time, the rest carried into the next interval. One throttle
//! serves every pass of a node (Kafka's is shared by its cleaner threads).
//!
//! **Stopping**: [`CleanerThrottle::stop`] (the broker's shutdown) ends every pause at once and makes every later
//! charge fail, so a throttled pass gives up instead of holding the shutdown back.
//!
//! Unlimited (Kafka's default, `f64::MAX`) costs nothing: no clock is read and nothing sleeps.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use record_format::{AbortedTxn, RecordBatch};
use storage::{PartitionReader, SegmentSummary, StagedRewrite};
use tokio::sync::watch;
use tokio::time::Instant;

/// How long bytes are counted before the rate is checked (Kafka's cleaner: 300 ms).
const CHECK_INTERVAL: Duration = Duration::from_millis(300);

/// The longest single pause (a rate so low that one read would call for more is paid in hour-long steps, the rest
/// carried over).
const MAX_PAUSE: Duration = Duration::from_secs(3_600);

/// The cleaner's I/O budget; see the module docs.
#[derive(Debug)]
pub(crate) struct CleanerThrottle {
    /// Bytes per second; `None`: unlimited.
    rate: Option<f64>,
    window: Mutex<Window>,
    /// True once the broker stops: pauses end and charges fail.
    stopped: watch::Sender<bool>,
}

#[derive(Debug)]
struct Window {
    start: Option<Instant>,
    /// When the last charge came (an interval idle past [`CHECK_INTERVAL`] starts afresh).
    last: Option<Instant>,
    bytes: f64,
}

/// The throttle was stopped ([`CleanerThrottle::stop`]): the pass charging it gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stopped;

impl CleanerThrottle {
    /// A throttle at `bytes_per_second`; anything not a finite positive rate below `f64::MAX` is no limit.
    pub(crate) fn new(bytes_per_second: f64) -> Self {
        let limited = bytes_per_second.is_finite() && bytes_per_second > 0.0 && bytes_per_second < f64::MAX;
        CleanerThrottle {
            rate: limited.then_some(bytes_per_second),
            window: Mutex::new(Window {
                start: None,
                last: None,
                bytes: 0.0,
            }),
            stopped: watch::Sender::new(false),
        }
    }

    /// Ends every pause now and makes every later charge fail (the broker is shutting down).
    pub(crate) fn stop(&self) {
        self.stopped.send_replace(true);
    }

    /// Whether [`Self::stop`] was called.
    pub(crate) fn is_stopped(&self) -> bool {
        *self.stopped.borrow()
    }

    /// Counts `bytes` of cleaner I/O at `now` and says how long to pause for them: zero while the interval is
    /// shorter than [`CHECK_INTERVAL`] and its bytes take no longer than that at the rate, or while its rate is
    /// within the limit. After a check the next interval starts when the pause ends.
    fn charge(&self, bytes: u64, now: Instant) -> Duration {
        let Some(rate) = self.rate else {
            return Duration::ZERO;
        };
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        // Idle since the last charge for longer than an interval (and no pause still running): idle time is no
        // credit.
        let idle = window
            .last
            .is_some_and(|last| now.saturating_duration_since(last) > CHECK_INTERVAL);
        if idle
            && window.start.is_some_and(|start| start <= now)
            && window.bytes <= rate * CHECK_INTERVAL.as_secs_f64()
        {
            window.start = Some(now);
            window.bytes = 0.0;
        }
        window.last = Some(now);
        let start = *window.start.get_or_insert(now);
        window.bytes += bytes as f64;
        let elapsed = now.saturating_duration_since(start);
        // How long the interval's bytes take at the rate.
        let due = Duration::try_from_secs_f64(window.bytes / rate).unwrap_or(Duration::MAX);
        if elapsed <= CHECK_INTERVAL && due <= CHECK_INTERVAL {
            return Duration::ZERO;
        }
        let owed = due.saturating_sub(elapsed);
        let pause = owed.min(MAX_PAUSE);
        window.start = Some(now + pause);
        // What a capped pause did not pay is carried into the next interval.
        window.bytes = owed.saturating_sub(pause).as_secs_f64() * rate;
        pause
    }

    /// Counts `bytes` of cleaner I/O and waits as long as the limit asks; [`Stopped`] once the throttle is
    /// stopped, at once or in the middle of the pause.
    pub(crate) async fn spend(&self, bytes: u64) -> Result<(), Stopped> {
        if self.rate.is_none() {
            return Ok(());
        }
        let mut stopped = self.stopped.subscribe();
        if *stopped.borrow_and_update() {
            return Err(Stopped);
        }
        let pause = self.charge(bytes, Instant::now());
        if pause.is_zero() {
            return Ok(());
        }
        tracing::debug!(
            pause_ms = pause.as_millis() as u64,
            "log cleaner paused (log.cleaner.io.max.bytes.per.second)"
        );
        tokio::select! {
            () = tokio::time::sleep(pause) => Ok(()),
            _ = stopped.wait_for(|stopped| *stopped) => Err(Stopped),
        }
    }
}

/// A partition reader whose batch reads and staged rewrites are charged to a [`CleanerThrottle`]: what a
/// compaction pass reads through.
pub(crate) struct ThrottledReader<'a> {
    pub(crate) inner: &'a dyn PartitionReader,
    pub(crate) throttle: &'a CleanerThrottle,
}

#[async_trait]
impl PartitionReader for ThrottledReader<'_> {
    async fn read(&self, from_offset: i64, max_bytes: usize) -> storage::Result<Vec<RecordBatch>> {
        let batches = self.inner.read(from_offset, max_bytes).await?;
        self.throttle
            .spend(batch_bytes(&batches))
            .await
            .map_err(stopped)?;
        Ok(batches)
    }

    async fn segments(&self, from_offset: i64, max: usize) -> storage::Result<Vec<SegmentSummary>> {
        self.inner.segments(from_offset, max).await
    }

    async fn aborted_txns(&self, from_offset: i64, upper_bound: i64) -> storage::Result<Vec<AbortedTxn>> {
        self.inner.aborted_txns(from_offset, upper_bound).await
    }

    async fn stage_rewrite(
        &self,
        from: i64,
        to: i64,
        batches: Vec<RecordBatch>,
    ) -> storage::Result<StagedRewrite> {
        // Paid before: the write, and the scan that opens the staged segment.
        let bytes = batch_bytes(&batches).saturating_mul(2);
        self.throttle.spend(bytes).await.map_err(stopped)?;
        self.inner.stage_rewrite(from, to, batches).await
    }
}

/// A stopped throttle as the storage error that ends a pass.
fn stopped(_: Stopped) -> storage::StorageError {
    storage::StorageError::io(
        "the log cleaner was stopped (the broker is shutting down)",
        std::io::Error::from(std::io::ErrorKind::Interrupted),
    )
}

fn batch_bytes(batches: &[RecordBatch]) -> u64 {
    batches.iter().map(|batch| batch.size() as u64).sum()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test fails by panicking
mod tests {
    use super::*;

    #[test]
    fn an_unlimited_throttle_never_pauses() {
        let throttle = CleanerThrottle::new(f64::MAX);
        let start = Instant::now();
        assert_eq!(throttle.charge(u64::MAX, start), Duration::ZERO);
        assert_eq!(
            throttle.charge(u64::MAX, start + Duration::from_secs(10)),
            Duration::ZERO
        );
        for not_a_limit in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(CleanerThrottle::new(not_a_limit).rate.is_none());
        }
    }

    #[test]
    fn bytes_above_the_rate_are_paid_for_once_an_interval_has_passed() {
        // 1 MiB/s. 300 KB over 0.35 s is within the rate: the check passes and the next interval starts.
        let throttle = CleanerThrottle::new(1_048_576.0);
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        assert_eq!(throttle.charge(102_400, at(0)), Duration::ZERO);
        assert_eq!(throttle.charge(102_400, at(200)), Duration::ZERO);
        assert_eq!(
            throttle.charge(102_400, at(350)),
            Duration::ZERO,
            "within the rate"
        );
        // 500 KB over the next 0.3 s should have taken 0.488 s: the rest is paid when the interval ends.
        assert_eq!(throttle.charge(256_000, at(450)), Duration::ZERO);
        assert_eq!(
            throttle.charge(256_000, at(650)),
            Duration::from_nanos(488_281_250 - 300_000_000)
        );
    }

    #[test]
    fn a_burst_is_paid_for_at_once_when_it_passes_one_intervals_worth() {
        // 1 MiB/s allows about 307 KiB an interval: 300 KiB pass, 400 KiB at the same instant cost 0.39 s.
        let throttle = CleanerThrottle::new(1_048_576.0);
        let start = Instant::now();
        assert_eq!(throttle.charge(300 << 10, start), Duration::ZERO);
        assert_eq!(
            throttle.charge(100 << 10, start),
            Duration::from_secs_f64(400.0 / 1024.0)
        );
    }

    #[test]
    fn a_pause_longer_than_the_cap_is_paid_in_steps_the_rest_carried_over() {
        // 1 byte/s: 7,200 bytes owe two hours, paid as two pauses of one.
        let throttle = CleanerThrottle::new(1.0);
        let start = Instant::now();
        assert_eq!(throttle.charge(7_200, start), MAX_PAUSE);
        let resumed = start + MAX_PAUSE;
        assert_eq!(
            throttle.charge(0, resumed),
            MAX_PAUSE,
            "the second hour is still owed"
        );
        let unrepresentable = CleanerThrottle::new(f64::MIN_POSITIVE);
        assert_eq!(unrepresentable.charge(1, start), MAX_PAUSE);
    }

    #[test]
    fn idle_time_is_no_credit() {
        // 1 MiB/s: after 10 s without a charge, 1 MiB at once costs its second again.
        let throttle = CleanerThrottle::new(1_048_576.0);
        let start = Instant::now();
        assert_eq!(throttle.charge(1_000, start), Duration::ZERO);
        let later = start + Duration::from_secs(10);
        assert_eq!(throttle.charge(1 << 20, later), Duration::from_secs(1));
    }

    #[tokio::test]
    async fn a_stopped_throttle_ends_its_pause_and_refuses_more() {
        let throttle = std::sync::Arc::new(CleanerThrottle::new(1.0));
        let waiting = {
            let throttle = throttle.clone();
            // An hour's pause.
            tokio::spawn(async move { throttle.spend(1 << 20).await })
        };
        // The pause has begun once the window holds the charge.
        while throttle.window.lock().unwrap().start.is_none() {
            tokio::task::yield_now().await;
        }
        throttle.stop();
        assert_eq!(waiting.await.unwrap(), Err(Stopped));
        assert_eq!(throttle.spend(1).await, Err(Stopped));
        assert_eq!(
            CleanerThrottle::new(f64::MAX).spend(1).await,
            Ok(()),
            "unlimited: nothing to stop"
        );
    }
}
