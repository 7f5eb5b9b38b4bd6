//! `log.cleaner.io.max.bytes.per.second`: the log cleaner's reads and writes held to a rate, as Kafka's
//! `Throttler` holds its cleaner threads'. Every pass reads through a [`ThrottledReader`], which counts the bytes
//! of each batch read and of each rewrite staged. Once a check interval (300 ms) has passed — or, unlike Kafka,
//! once the bytes counted are more than the rate allows in one interval — a rate above the limit is paid for
//! with a pause long enough to bring the interval's bytes back to the limit, and the next interval starts after
//! it. (Kafka checks only after the interval, so a pass quicker than 300 ms is never held back, whatever it
//! reads; here a burst is bounded by one interval's worth of bytes.) One throttle serves every pass of a node
//! (Kafka's is shared by its cleaner threads).
//!
//! Unlimited (Kafka's default, `f64::MAX`) costs nothing: no clock is read and nothing sleeps.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use record_format::{AbortedTxn, RecordBatch};
use storage::{PartitionReader, SegmentSummary, StagedRewrite};
use tokio::time::Instant;

/// How long bytes are counted before the rate is checked (Kafka's cleaner: 300 ms).
const CHECK_INTERVAL: Duration = Duration::from_millis(300);

/// The longest single pause (a rate so low that one read would call for more is paid in hour-long steps, each
/// interval checked again).
const MAX_PAUSE: Duration = Duration::from_secs(3_600);

/// The cleaner's I/O budget; see the module docs.
#[derive(Debug)]
pub(crate) struct CleanerThrottle {
    /// Bytes per second; `None`: unlimited.
    rate: Option<f64>,
    window: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    start: Option<Instant>,
    bytes: f64,
}

impl CleanerThrottle {
    /// A throttle at `bytes_per_second`; anything not a finite positive rate below `f64::MAX` is no limit.
    pub(crate) fn new(bytes_per_second: f64) -> Self {
        let limited = bytes_per_second.is_finite() && bytes_per_second > 0.0 && bytes_per_second < f64::MAX;
        CleanerThrottle {
            rate: limited.then_some(bytes_per_second),
            window: Mutex::new(Window {
                start: None,
                bytes: 0.0,
            }),
        }
    }

    /// Counts `bytes` of cleaner I/O at `now` and says how long to pause for them: zero while the interval is
    /// shorter than [`CHECK_INTERVAL`] and its bytes take no longer than that at the rate, or while its rate is
    /// within the limit. After a check the next interval starts when the pause ends.
    fn charge(&self, bytes: u64, now: Instant) -> Duration {
        let Some(rate) = self.rate else {
            return Duration::ZERO;
        };
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        let start = *window.start.get_or_insert(now);
        window.bytes += bytes as f64;
        let elapsed = now.saturating_duration_since(start);
        // How long the interval's bytes take at the rate.
        let due = Duration::try_from_secs_f64(window.bytes / rate).unwrap_or(Duration::MAX);
        if elapsed <= CHECK_INTERVAL && due <= CHECK_INTERVAL {
            return Duration::ZERO;
        }
        let pause = due.saturating_sub(elapsed).min(MAX_PAUSE);
        window.start = Some(now + pause);
        window.bytes = 0.0;
        pause
    }

    /// Counts `bytes` of cleaner I/O and waits as long as the limit asks.
    pub(crate) async fn spend(&self, bytes: u64) {
        if self.rate.is_none() {
            return;
        }
        let pause = self.charge(bytes, Instant::now());
        if !pause.is_zero() {
            tracing::debug!(
                pause_ms = pause.as_millis() as u64,
                "log cleaner paused (log.cleaner.io.max.bytes.per.second)"
            );
            tokio::time::sleep(pause).await;
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
        self.throttle.spend(batch_bytes(&batches)).await;
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
        let bytes = batch_bytes(&batches);
        let staged = self.inner.stage_rewrite(from, to, batches).await?;
        self.throttle.spend(bytes).await;
        Ok(staged)
    }
}

fn batch_bytes(batches: &[RecordBatch]) -> u64 {
    batches.iter().map(|batch| batch.size() as u64).sum()
}

#[cfg(test)]
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
        // 1 MiB/s: 200 KiB take 0.195 s, under the interval; 200 KiB more counted at 0.4 s should have taken
        // 0.39 s — 0 s of pause, within the rate; 2 MiB counted over 0.4 s should have taken 2 s: 1.6 s.
        let throttle = CleanerThrottle::new(1_048_576.0);
        let start = Instant::now();
        assert_eq!(throttle.charge(200 << 10, start), Duration::ZERO);
        assert_eq!(
            throttle.charge(200 << 10, start + Duration::from_millis(400)),
            Duration::ZERO,
            "within the rate"
        );
        let next = start + Duration::from_millis(400);
        assert_eq!(
            throttle.charge(1 << 20, next),
            Duration::from_secs(1),
            "a whole second at once"
        );
        let resumed = next + Duration::from_secs(1);
        assert_eq!(throttle.charge(0, resumed), Duration::ZERO);
        assert_eq!(
            throttle.charge(2 << 20, resumed + Duration::from_millis(400)),
            Duration::from_millis(1_600)
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
    fn a_rate_so_low_that_the_pause_cannot_be_represented_is_paid_in_bounded_steps() {
        let throttle = CleanerThrottle::new(f64::MIN_POSITIVE);
        let start = Instant::now();
        throttle.charge(1, start);
        assert_eq!(throttle.charge(1, start + Duration::from_secs(1)), MAX_PAUSE);
    }
}
