//! Source probes (ADR 0049): with rounds in flight, a FAILED partition's retry asks its source on the links'
//! thread (its machine prepares again: the source's cluster id, log start, the batch at our log end), so it runs
//! only when its source has just proved that it answers — a round of that source landed with an answer, or a
//! probe did. A probe is one Metadata request ([`Sources::describe`] of the partition's topic) in a task of its
//! own, under [`PROBE_DEADLINE`]; while it is out, or while the source's round is, the partition waits and the
//! other links go on. A probe that fails is asked again after a backoff that grows with each failure in a row
//! (the machine's, [`mirror_fsm::machine::backoff_ms`], capped at [`PROBE_MAX_BACKOFF_MS`], as Kafka's clients cap
//! `reconnect.backoff.max.ms`); the partition keeps the failure it recorded until a retry runs, and its own
//! backoff does not grow while no retry runs — so once the source is back, its partitions are retried within
//! [`PROBE_MAX_BACKOFF_MS`] of a probe seeing it, however long it was away.

use std::sync::Arc;
use std::time::Duration;

use mirror_fsm::{FetchError, Sources};
use tokio::task::JoinHandle;

use super::links::MirrorLinks;

/// The most a probe may take: past it the source counts as not answering.
pub const PROBE_DEADLINE: Duration = Duration::from_secs(10);

/// The longest wait between two probes of a source that does not answer.
pub const PROBE_MAX_BACKOFF_MS: i64 = 2_000;

/// How long an answer from a source lets its partitions be retried without a new probe.
pub const ANSWER_FRESH_MS: i64 = 1_000;

/// What is known of whether one source answers.
#[derive(Debug, Default)]
pub(super) struct Probe {
    /// The probe under way.
    task: Option<JoinHandle<Result<(), FetchError>>>,
    /// When the source last answered (a probe, or a round with an answer).
    answered_at_ms: Option<i64>,
    /// Probes failed in a row: the backoff's exponent.
    failures: u32,
    /// When the next probe may start.
    next_probe_ms: i64,
}

impl Probe {
    /// Stops the probe under way, if any.
    pub(super) fn abort(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl MirrorLinks {
    /// Records that `source` answered at `now` (a round landed with an answer).
    pub(super) fn source_answered(&mut self, source: &str, now: i64) {
        let probe = self.probes.entry(source.to_owned()).or_default();
        probe.answered_at_ms = Some(now);
        probe.failures = 0;
        probe.next_probe_ms = now;
    }

    /// Whether a partition at `source` may be retried now, on this thread: true when the source
    /// answered within [`ANSWER_FRESH_MS`]; otherwise false, with a probe started when none is out, the
    /// source's round is not in flight, and the backoff after the last failed probe is over.
    pub(super) async fn source_answers(&mut self, source: &str, now: i64) -> bool {
        let round_in_flight = self
            .prefetched
            .get(source)
            .is_some_and(|(_, task)| !task.is_finished());
        let probe = self.probes.entry(source.to_owned()).or_default();
        if let Some(task) = probe.task.take() {
            if !task.is_finished() {
                probe.task = Some(task);
                return false;
            }
            // A finished task: this await does not wait.
            let answer = task.await.ok();
            tracing::debug!(source = %source, answered = ?answer.as_ref().map(Result::is_ok), "mirror source probe");
            match answer {
                Some(Ok(())) => {
                    probe.answered_at_ms = Some(now);
                    probe.failures = 0;
                }
                Some(Err(_)) | None => {
                    probe.failures = probe.failures.saturating_add(1);
                    let backoff =
                        mirror_fsm::machine::backoff_ms(probe.failures, now).min(PROBE_MAX_BACKOFF_MS);
                    probe.next_probe_ms = now.saturating_add(backoff);
                }
            }
        }
        if probe
            .answered_at_ms
            .is_some_and(|answered| now.saturating_sub(answered) <= ANSWER_FRESH_MS)
        {
            return !round_in_flight;
        }
        if !round_in_flight && now >= probe.next_probe_ms {
            let sources: Arc<dyn Sources> = Arc::clone(&self.sources);
            let landed = Arc::clone(&self.landed);
            let address = source.to_owned();
            probe.task = Some(tokio::spawn(async move {
                let answer = tokio::time::timeout(PROBE_DEADLINE, sources.describe(&address, &[])).await;
                landed.notify_one();
                match answer {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(error)) => Err(error),
                    Err(_) => Err(FetchError::new(
                        format!("no answer within {} ms", PROBE_DEADLINE.as_millis()),
                        true,
                    )),
                }
            }));
        }
        false
    }
}
