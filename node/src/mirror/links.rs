//! [`MirrorLinks`]: the node's mirror links at work — one `mirror-fsm` driver and one [`Fetcher`] per mirrored
//! partition, created from the registry at start (resuming what each partition was doing: fetching, or an
//! interrupted STOPPING, once) and stepped by the caller (each step fetches one round for every fetching
//! partition). The administration actions on them are in `actions.rs`.
//!
//! A driver works on the partition's leader log under the partition's lock, like a produce, so a mirrored batch
//! and a client's request never interleave inside the log; after every write the node's replication moves the
//! high watermark and long-polling consumers are woken.
//!
//! [`MirrorLinks`] is not `Send` (a `Fetcher` need not be): its owner runs it on one thread — `serve` gives it a
//! thread of its own — and reaches it with messages.
//!
//! **Rounds in flight** (ADR 0049, [`MirrorLinks::set_rounds_in_flight`], as `serve` runs them): each source's
//! round is a task of its own that the step never waits for — a step applies the rounds that have landed, starts
//! the next round of each source whose round it applied, and returns; a slow or dead source holds up only its own
//! partitions, never another link, nor an administration request answered between steps. The owner waits on
//! [`MirrorLinks::landed`] for the next landing. A FAILED partition's retry asks its source on this thread, so it
//! runs only once its source has proved it answers (`probes`).

use std::collections::BTreeMap;
use std::sync::Arc;

use mirror_fsm::{
    transition_allowed, Event, EventKind, FetchError, FetchLimits, FetchedPartition, Fetcher, MirrorDriver,
    PartitionFetch, Sources, StateKind,
};
use partition_log::{PartitionLog, ReplicaSet};

use super::error::MirrorError;
use super::registry::{LinkRecord, TopicRecord};
use crate::{Node, PartitionSlot};

/// What one round asks of a source: 2 MiB, whatever the number of partitions. Small rounds are fast rounds: the
/// answer is written while it is still in the CPU's cache, and the next round, fetched meanwhile, waits in the
/// socket's buffers (`cargo bench -p broker --bench mirror_links` measured 32 MiB rounds of 100 partitions at 0.36
/// of a raw copy, 2 MiB rounds at 0.92). Partitions take turns at the front of the request, so a round that fills
/// up early starves none of them.
const ROUND_LIMITS: FetchLimits = FetchLimits {
    per_partition: ROUND_BYTES,
    total: ROUND_BYTES,
};

/// See [`ROUND_LIMITS`].
const ROUND_BYTES: usize = 2 << 20;

/// A round fetched ahead from a source: what it asked for, and the task fetching it (its answers, and when they
/// landed).
type Prefetch = (
    Vec<PartitionFetch>,
    tokio::task::JoinHandle<(Option<Vec<Result<FetchedPartition, FetchError>>>, u64)>,
);

/// The next number in the landing order `landings` keeps.
pub(super) fn next_landing(landings: &std::sync::atomic::AtomicU64) -> u64 {
    landings.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
}

/// What asking a source for a round now gave.
enum RoundNow {
    /// Its answers, one per partition asked, and when they landed.
    Answers(Vec<Result<FetchedPartition, FetchError>>, u64),
    /// The round is in flight (rounds in flight): it is applied by the step that finds it landed.
    InFlight,
    /// The source cannot fetch several partitions in one request: each partition fetches on its own.
    Unsupported,
}

/// A mirrored partition's topic and number.
pub(super) type PartitionKey = (String, i32);

/// One mirrored partition at work.
pub(super) struct Mirrored {
    /// The source's address (the link's).
    pub(super) source: String,
    /// The source topic's id when the link was created, where the source has ids: every fetch names it.
    pub(super) source_topic_id: Option<[u8; 16]>,
    pub(super) driver: MirrorDriver,
    pub(super) fetcher: Box<dyn Fetcher>,
    /// The source's last stable offset in its latest answer for this partition.
    pub(super) source_lso: Option<i64>,
    /// When that answer landed, in the links' landing order ([`MirrorLinks::landings`]): an answer that landed
    /// earlier — a round fetched ahead before a pause, applied after the resume — never replaces a later one.
    pub(super) source_lso_landed: u64,
    /// Rounds of this partition applied with the source's answer (its last stable offset): `promote` counts them,
    /// so that it judges the lag on answers the source gave after it began.
    pub(super) answers: u64,
    /// When its log end last reached the source's last stable offset (the start, before that).
    pub(super) caught_up_at_ms: i64,
    /// The latest error a step met that the machine did not record (its storage failing).
    pub(super) error: Option<String>,
    /// The state and error last logged ([`Mirrored::log_changes`]); `None` before the first line.
    pub(super) logged: Option<(StateKind, Option<String>)>,
    /// What its rounds wrote and how many failed, since the links opened.
    pub(super) progress: Progress,
}

/// What a mirrored partition's rounds did since the links opened (`describe` and the metrics).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Progress {
    /// Offsets written (records and markers).
    pub(super) offsets: u64,
    /// Batches written.
    pub(super) batches: u64,
    /// Bytes of the batches the source answered (written or not).
    pub(super) bytes_fetched: u64,
    /// Offsets the batches the source answered span (written or not).
    pub(super) offsets_fetched: u64,
    /// Bytes of the batches written.
    pub(super) bytes_mirrored: u64,
    /// Rounds that failed, by why ([`super::round_errors`]).
    pub(super) failed_rounds: BTreeMap<&'static str, u64>,
    /// Retries of the partition once FAILED (each retry once, whether it then held or failed again).
    pub(super) retries: u64,
}

/// How a round went, for [`Mirrored::after_round`]: what the driver made of it, and what the source answered.
struct Round<'a> {
    /// The driver's result: the batches appended, or the step it could not take.
    applied: Result<usize, mirror_fsm::DriverError>,
    /// The partition's failure before the round (`None`: it was not FAILED).
    failure_before: Option<mirror_fsm::Failure>,
    /// The name of the round's failure should it leave the partition FAILED anew: the source's error, a batch
    /// refused, or a retry that failed again.
    failed_as: &'static str,
    /// The batches the source answered, when it answered some.
    answer: Option<&'a FetchedBatches>,
    /// Where the log ended before and after the round.
    end_before: i64,
    end: i64,
}

/// What a round's answer brought: its batches' bytes, and the offsets they span.
#[derive(Debug, Clone, Copy, Default)]
struct FetchedBatches {
    bytes: u64,
    offsets: u64,
}

impl FetchedBatches {
    fn of(response: &mirror_fsm::FetchResponse) -> Self {
        let bytes = response
            .batches
            .iter()
            .map(|batch| u64::try_from(batch.size()).unwrap_or(u64::MAX))
            .fold(0u64, u64::saturating_add);
        // Offsets the source chose: a hostile answer may span anything, so nothing here may overflow.
        let offsets = match (response.batches.first(), response.batches.last()) {
            (Some(first), Some(last)) => {
                u64::try_from(last.next_offset().saturating_sub(first.base_offset())).unwrap_or(0)
            }
            _ => 0,
        };
        FetchedBatches { bytes, offsets }
    }
}

/// The name a round's failure gets from its answer ([`super::round_errors`]).
fn failed_as<T>(answer: &Result<T, FetchError>) -> &'static str {
    match answer {
        Ok(_) => super::round_errors::BATCH_REFUSED,
        Err(error) => super::round_errors::fetch_error_name(error),
    }
}

impl Mirrored {
    /// Logs this partition's state and error when they changed since the last line (one `tracing` line each: a
    /// state change at INFO, an error at WARN with its message — the source's answer or ours, never a secret).
    pub(super) fn log_changes(&mut self, key: &PartitionKey) {
        let state = self.driver.state();
        let error = state
            .failure()
            .map(|failure| failure.message.as_str())
            .or(self.error.as_deref());
        // Called for every partition at every round: compared in place, copied only when it changed.
        if self
            .logged
            .as_ref()
            .is_some_and(|(kind, logged)| *kind == state.kind() && logged.as_deref() == error)
        {
            return;
        }
        let now = (state.kind(), error.map(str::to_owned));
        let (topic, partition, source) = (key.0.as_str(), key.1, self.source.as_str());
        let state = super::actions::state_name(state);
        match &now.1 {
            Some(error) => tracing::warn!(
                topic,
                partition,
                source,
                state,
                error = error.as_str(),
                "mirror partition"
            ),
            None => tracing::info!(topic, partition, source, state, "mirror partition"),
        }
        self.logged = Some(now);
    }

    /// Counts a failure an action other than a round (a start, a resume, a failover's STOPPING, a source topic
    /// replaced) left the partition with: one it did not have `before`, named as [`super::round_errors::
    /// failure_name`] names it, else `otherwise`.
    pub(super) fn count_failure_since(
        &mut self,
        before: Option<&mirror_fsm::Failure>,
        otherwise: &'static str,
    ) {
        if super::round_errors::failed_again(before, &self.driver) {
            let name = super::round_errors::failure_name(&self.driver, otherwise);
            *self.progress.failed_rounds.entry(name).or_default() += 1;
        }
    }

    /// Records how a round of this partition went — its error and why it failed, what it fetched and wrote, when
    /// it last caught up — and, when the log end moved, moves the high watermark and wakes consumers. The batches
    /// appended.
    async fn after_round(&mut self, node: &Node, key: &PartitionKey, round: Round<'_>, now: i64) -> usize {
        let Round {
            applied,
            failure_before,
            failed_as,
            answer,
            end_before,
            end,
        } = round;
        let appended = match applied {
            Ok(appended) => {
                self.error = None;
                if super::round_errors::failed_again(failure_before.as_ref(), &self.driver) {
                    let name = super::round_errors::failure_name(&self.driver, failed_as);
                    *self.progress.failed_rounds.entry(name).or_default() += 1;
                }
                appended
            }
            Err(error) => {
                let name = super::round_errors::driver_error_name(&error);
                self.error = Some(error.to_string());
                *self.progress.failed_rounds.entry(name).or_default() += 1;
                0
            }
        };
        if let Some(answer) = answer {
            self.progress.bytes_fetched = self.progress.bytes_fetched.saturating_add(answer.bytes);
            self.progress.offsets_fetched = self.progress.offsets_fetched.saturating_add(answer.offsets);
            if appended > 0 {
                // A round appends its whole answer or nothing.
                self.progress.bytes_mirrored = self.progress.bytes_mirrored.saturating_add(answer.bytes);
            }
        }
        self.progress.batches += u64::try_from(appended).unwrap_or(0);
        // A round appends; one that moved the end back (an alignment) wrote nothing to count.
        self.progress.offsets += u64::try_from(end - end_before).unwrap_or(0);
        if self.source_lso.is_some_and(|stable| end >= stable) {
            self.caught_up_at_ms = now;
        }
        if end != end_before {
            if let Err(error) = wrote(node, &key.0, key.1).await {
                self.error = Some(error.to_string());
            }
        }
        appended
    }
}

/// What became of the rounds fetched ahead ([`MirrorLinks::fetched_ahead`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundsAhead {
    /// Rounds whose answers came from a fetch ahead.
    pub used: u64,
    /// Fetches ahead whose task failed (panicked or was cancelled): the round was fetched again.
    pub lost: u64,
}

/// The node's mirror links; see the module docs.
pub struct MirrorLinks {
    pub(super) sources: Arc<dyn Sources>,
    pub(super) links: Vec<LinkRecord>,
    pub(super) partitions: BTreeMap<PartitionKey, Mirrored>,
    /// Fetch a source's next round while this one is written (a spawned task on the caller's runtime).
    pub(super) fetch_ahead: bool,
    /// The rounds fetched ahead, by source.
    pub(super) prefetched: BTreeMap<String, Prefetch>,
    /// Rounds answered from a fetch ahead, and fetches ahead whose task failed (it panicked or was cancelled).
    pub(super) fetched_ahead: RoundsAhead,
    /// Rounds applied so far, by source: which partition leads its next request (they take turns).
    pub(super) turns: BTreeMap<String, usize>,
    /// Rounds in flight: a step applies the rounds that landed and never waits for the others (ADR 0049).
    pub(super) rounds_in_flight: bool,
    /// Told whenever a round or probe task ends: the owner's wake-up with rounds in flight.
    pub(super) landed: Arc<tokio::sync::Notify>,
    /// Counts the answers that carry sources' last stable offsets as they land (rounds, fetched ahead or not, and
    /// the paused partitions' questions): their order decides which is the latest ([`next_landing`]).
    pub(super) landings: Arc<std::sync::atomic::AtomicU64>,
    /// Whether each source answers, asked before its FAILED partitions are retried ([`super::probes`]).
    pub(super) probes: BTreeMap<String, super::probes::Probe>,
    /// The group offsets being fetched by a task of their own (rounds in flight; [`super::groups`]).
    pub(super) group_fetch: Option<tokio::task::JoinHandle<super::groups::Fetched>>,
    /// The deliberate faults every driver gets (a pause after each STOPPING action for the crash tests; the
    /// simulator's "truncate on retry" mutant and its STOPPING with a rule left out). None outside them.
    faults: mirror_fsm::DriverFaults,
    /// Set when the owner shuts down: an action that waits (`promote`) gives up.
    pub(super) stopping: Arc<std::sync::atomic::AtomicBool>,
    /// By link: when its source's consumer group offsets are next copied ([`super::groups`]; absent: now).
    pub(super) group_sync_due: BTreeMap<String, i64>,
    /// How often they are copied for a link without its own interval (`None`: never).
    pub(super) group_sync_interval_ms: Option<i64>,
    /// By link: when its topics are next compared with the source's ([`super::source_topics`]; absent: now).
    pub(super) topic_check_due: BTreeMap<String, i64>,
    /// How often they are compared for a link without its own interval (`None`: never).
    pub(super) topic_check_interval_ms: Option<i64>,
    /// What the comparison found, by (link, topic; an empty topic: about the link's source listing).
    pub(super) warnings: BTreeMap<(String, String), String>,
    /// By link: the topics its include patterns selected and left out, with why ([`super::source_topics`]).
    pub(super) skipped: BTreeMap<String, BTreeMap<String, String>>,
    /// By (link, topic): why the mirror topic's configs do not all follow its source's ([`super::config_sync`]).
    pub(super) config_warnings: BTreeMap<(String, String), String>,
    /// By link: why its ACLs do not follow its source's ([`super::acl_sync`]).
    pub(super) acl_warnings: BTreeMap<String, String>,
    /// Links whose source answered that it has no authorizer (said once, at INFO).
    pub(super) acl_no_authorizer: std::collections::BTreeSet<String>,
    /// By link: what its source checks did since the links opened ([`mirror_admin::LinkActivity`]).
    pub(super) activity: BTreeMap<String, mirror_admin::LinkActivity>,
    /// The comparison under way in a task of its own (rounds in flight).
    pub(super) topic_check: Option<tokio::task::JoinHandle<super::source_topics::Found>>,
}

impl Drop for MirrorLinks {
    fn drop(&mut self) {
        for (_, (_, task)) in std::mem::take(&mut self.prefetched) {
            task.abort();
        }
        if let Some(task) = self.topic_check.take() {
            task.abort();
        }
        if let Some(task) = self.group_fetch.take() {
            task.abort();
        }
        for probe in self.probes.values_mut() {
            probe.abort();
        }
    }
}

impl std::fmt::Debug for MirrorLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorLinks")
            .field("links", &self.links)
            .field("partitions", &self.partitions.len())
            .finish_non_exhaustive()
    }
}

impl MirrorLinks {
    /// Opens the links recorded on `node`, each partition's driver recovered from its persisted state: a
    /// partition that was mirroring fetches again, an interrupted STOPPING completes, a failover that was asked
    /// for but not begun runs now, a partition recorded but never started starts.
    pub async fn open(node: &Node, sources: Arc<dyn Sources>) -> Result<Self, MirrorError> {
        let mut links = MirrorLinks {
            sources,
            links: node.mirror_links().await?,
            partitions: BTreeMap::new(),
            fetch_ahead: true,
            prefetched: BTreeMap::new(),
            fetched_ahead: RoundsAhead::default(),
            turns: BTreeMap::new(),
            rounds_in_flight: false,
            landed: Arc::new(tokio::sync::Notify::new()),
            landings: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            probes: BTreeMap::new(),
            group_fetch: None,
            faults: mirror_fsm::DriverFaults::default(),
            stopping: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            group_sync_due: BTreeMap::new(),
            group_sync_interval_ms: Some(super::groups::GROUP_SYNC_INTERVAL_MS),
            topic_check_due: BTreeMap::new(),
            topic_check_interval_ms: Some(super::source_topics::SOURCE_TOPIC_CHECK_INTERVAL_MS),
            warnings: BTreeMap::new(),
            skipped: BTreeMap::new(),
            config_warnings: BTreeMap::new(),
            acl_warnings: BTreeMap::new(),
            acl_no_authorizer: std::collections::BTreeSet::new(),
            activity: BTreeMap::new(),
            topic_check: None,
        };
        for link in links.links.clone() {
            // A link's settings were accepted when it was created; refused now (a build that reads them
            // differently), each of its fetches fails with why.
            if let Err(error) = links.sources.configure_client(&link.source, &link.source_config) {
                tracing::error!(link = %link.name, %error, "the link's source settings are refused");
            }
            for (topic, record) in &link.topics {
                for partition in 0..record.partitions as i32 {
                    links
                        .start_partition(node, &link, topic, partition, *record, false)
                        .await?;
                }
            }
        }
        Ok(links)
    }

    /// Whether a source's next round is fetched while the current one is written (on by default; a caller that
    /// needs every step to run alone — a deterministic simulation — turns it off).
    pub fn set_fetch_ahead(&mut self, fetch_ahead: bool) {
        self.fetch_ahead = fetch_ahead;
        if !fetch_ahead {
            self.rounds_in_flight = false;
            for (_, (_, task)) in std::mem::take(&mut self.prefetched) {
                task.abort();
            }
        }
    }

    /// Whether rounds stay in flight across steps (off by default: each step then fetches every source's round
    /// and waits for it, as a deterministic caller needs). On, a step applies only the rounds that have landed
    /// and starts the next ones (see the module docs); the owner waits on [`MirrorLinks::landed`] between steps.
    /// Turning it on turns fetch-ahead on.
    pub fn set_rounds_in_flight(&mut self, in_flight: bool) {
        self.rounds_in_flight = in_flight;
        if in_flight {
            self.fetch_ahead = true;
        }
    }

    /// How many rounds were answered from a fetch ahead, and how many fetches ahead were lost (the simulator
    /// checks that its rounds are `serve`'s: fetched ahead, none lost).
    pub fn fetched_ahead(&self) -> RoundsAhead {
        self.fetched_ahead
    }

    /// Told whenever a round or a probe in flight ends (a permit is kept when nobody waits): with rounds in
    /// flight, the owner waits on it, or on its own timer, before the next step.
    pub fn landed(&self) -> Arc<tokio::sync::Notify> {
        Arc::clone(&self.landed)
    }

    /// The node's intervals, which a link without its own uses ([`super::link_config`]).
    pub(super) fn node_intervals(&self) -> super::link_config::NodeIntervals {
        super::link_config::NodeIntervals {
            metadata_refresh_ms: self.topic_check_interval_ms,
            group_sync_ms: self.group_sync_interval_ms,
        }
    }

    /// How often the sources' consumer group offsets are copied (default [`super::groups::GROUP_SYNC_INTERVAL_MS`];
    /// 0: at every step; `None`: never).
    pub fn set_group_sync_interval_ms(&mut self, interval_ms: Option<i64>) {
        self.group_sync_interval_ms = interval_ms;
        self.group_sync_due.clear();
    }

    /// Watches `flag`, which the owner sets when it shuts down: an action that waits (`promote`) then gives
    /// up instead of holding the shutdown back for its timeout.
    pub fn watch_shutdown(&mut self, flag: Arc<std::sync::atomic::AtomicBool>) {
        self.stopping = flag;
    }

    /// Test fault: every driver pauses this long after each STOPPING action (see
    /// `MirrorDriver::pause_between_stopping_steps`). Never set outside tests.
    #[doc(hidden)]
    pub fn pause_between_stopping_steps(&mut self, pause: Option<std::time::Duration>) {
        self.faults.stopping_pause = pause;
        for mirrored in self.partitions.values_mut() {
            mirrored.driver.pause_between_stopping_steps(pause);
        }
    }

    /// Deliberate bug for the simulator's mutant: every driver realigns on a retry as a new session does (see
    /// `MirrorDriver::realign_on_retry`). Never set outside it.
    #[doc(hidden)]
    pub fn realign_on_retry(&mut self, realign: bool) {
        self.faults.realign_on_retry = realign;
        for mirrored in self.partitions.values_mut() {
            mirrored.driver.realign_on_retry(realign);
        }
    }

    /// Every partition's STOPPING leaves out one rule, for the simulator's mutants and its strategies without
    /// the barrier (`MirrorDriver::depart_from_stopping`). Never set outside it.
    #[doc(hidden)]
    pub fn depart_from_stopping(&mut self, departure: Option<mirror_fsm::StoppingDeparture>) {
        self.faults.stopping_departure = departure;
        for mirrored in self.partitions.values_mut() {
            mirrored.driver.depart_from_stopping(departure);
        }
    }

    /// The earliest time a FAILED partition's retry is due (retryable failures only): what a deterministic caller
    /// (the simulator) moves its clock to when every link waits for a retry.
    pub fn next_retry_at_ms(&self) -> Option<i64> {
        self.partitions
            .values()
            .filter_map(|mirrored| mirrored.driver.state().failure())
            .filter(|failure| failure.retryable)
            .map(|failure| failure.retry_at_ms)
            .min()
    }

    /// True when no partition is fetching (the caller may wait longer before the next step).
    pub fn is_idle(&self) -> bool {
        !self
            .partitions
            .values()
            .any(|mirrored| mirrored.driver.fetching() || mirrored.driver.state().kind() == StateKind::Failed)
    }

    /// What holds a mirrored partition back, if anything: the failure its machine recorded (FAILED), else the
    /// latest error a step met. `None` as well for a partition no link mirrors.
    pub fn failure(&self, topic: &str, partition: i32) -> Option<String> {
        let mirrored = self.partitions.get(&(topic.to_owned(), partition))?;
        mirrored
            .driver
            .state()
            .failure()
            .map(|failure| failure.message.clone())
            .or_else(|| mirrored.error.clone())
    }

    /// One round for every partition: FAILED ones retried when their backoff is over, fetching ones fetch once
    /// from their log end — all the partitions of one source in one request per source broker when the source
    /// allows it ([`Sources::fetch_many`]), else partition by partition; then, when due, the sources' consumer
    /// group offsets are copied ([`super::groups`]). Returns the number of batches appended.
    pub async fn step(&mut self, node: &Node) -> usize {
        let now = node.now_ms();
        let failed: Vec<PartitionKey> = self
            .partitions
            .iter()
            .filter(|(_, mirrored)| mirrored.driver.state().kind() == StateKind::Failed)
            .filter(|(_, mirrored)| {
                // With rounds in flight, a retry that is due waits for a sign of life from its source (`probes`);
                // without, the machine alone decides when it is due.
                !self.rounds_in_flight
                    || mirrored
                        .driver
                        .state()
                        .failure()
                        .is_some_and(|failure| failure.retryable && now >= failure.retry_at_ms)
            })
            .map(|(key, _)| key.clone())
            .collect();
        let mut appended = 0;
        for key in failed {
            if self.rounds_in_flight {
                let Some(source) = self.partitions.get(&key).map(|mirrored| mirrored.source.clone()) else {
                    continue;
                };
                if !self.source_answers(&source, now).await {
                    continue;
                }
            }
            appended += self.step_partition(node, &key).await;
        }
        for (source, wanted) in self.wanted_by_source(node).await {
            let len = wanted.len();
            let turn = self.turns.get(&source).copied().unwrap_or(0);
            let asked = rotated(wanted, turn);
            let answers = match self.prefetched.remove(&source) {
                // Still at the source: its partitions wait for it, the other sources' go on.
                Some((ahead, task)) if self.rounds_in_flight && !task.is_finished() => {
                    self.prefetched.insert(source, (ahead, task));
                    continue;
                }
                // The round fetched ahead asked for exactly this: its answers (a failed task counts as nothing).
                Some((ahead, task)) if ahead == asked => match task.await {
                    Ok((Some(answers), landed)) => {
                        self.fetched_ahead.used += 1;
                        RoundNow::Answers(answers, landed)
                    }
                    Ok((None, _)) => RoundNow::Unsupported,
                    Err(error) => {
                        self.fetched_ahead.lost += 1;
                        tracing::warn!(%source, %error, "a mirror round fetched ahead was lost; fetched again");
                        self.round_now(&source, asked.clone()).await
                    }
                },
                Some((_, task)) => {
                    task.abort();
                    self.round_now(&source, asked.clone()).await
                }
                None => self.round_now(&source, asked.clone()).await,
            };
            let (answers, landed) = match answers {
                RoundNow::Answers(answers, landed) => (answers, landed),
                RoundNow::InFlight => continue,
                RoundNow::Unsupported => {
                    for fetch in &asked {
                        let key = (fetch.topic.clone(), fetch.partition);
                        appended += self.step_partition(node, &key).await;
                    }
                    continue;
                }
            };
            self.turns.insert(source.clone(), turn.wrapping_add(1));
            if answers.iter().any(Result::is_ok) {
                self.source_answered(&source, now);
            }
            // While this round is written, the next one is fetched from where it will leave each partition
            // (a prediction: if a write fails or the log moves otherwise, that answer is dropped unused).
            if self.fetch_ahead
                && answers
                    .iter()
                    .any(|answer| answer.as_ref().is_ok_and(|a| !a.response.batches.is_empty()))
            {
                let mut next: Vec<PartitionFetch> = asked
                    .iter()
                    .zip(&answers)
                    .map(|(fetch, answer)| PartitionFetch {
                        offset: answer
                            .as_ref()
                            .ok()
                            .and_then(|answer| answer.response.batches.last())
                            .map_or(fetch.offset, |batch| batch.next_offset()),
                        ..fetch.clone()
                    })
                    .collect();
                // The next round's turn: the order this one's will have then.
                next.rotate_left(1 % len);
                self.launch(&source, next);
            }
            for (fetch, answer) in asked.iter().zip(answers) {
                let key = (fetch.topic.clone(), fetch.partition);
                appended += self.apply(node, &key, fetch.offset, answer, landed).await;
            }
        }
        if self.rounds_in_flight {
            // Every source whose round was applied without one fetched ahead asks again at once, from where
            // its partitions are now.
            for (source, wanted) in self.wanted_by_source(node).await {
                if !self.prefetched.contains_key(&source) {
                    let turn = self.turns.get(&source).copied().unwrap_or(0);
                    self.launch(&source, rotated(wanted, turn));
                }
            }
        }
        self.sync_group_offsets(node).await;
        self.check_source_topics(node).await;
        for (key, mirrored) in &mut self.partitions {
            mirrored.log_changes(key);
        }
        appended
    }

    /// The fetching partitions with their log ends, by source.
    async fn wanted_by_source(&self, node: &Node) -> BTreeMap<String, Vec<PartitionFetch>> {
        let mut by_source: BTreeMap<String, Vec<PartitionFetch>> = BTreeMap::new();
        for (key, mirrored) in &self.partitions {
            if mirrored.driver.fetching() {
                if let Some(end) = log_end(node, key).await {
                    by_source
                        .entry(mirrored.source.clone())
                        .or_default()
                        .push(PartitionFetch {
                            topic: key.0.clone(),
                            partition: key.1,
                            offset: end,
                            topic_id: mirrored.source_topic_id,
                        });
                }
            }
        }
        by_source
    }

    /// What a round asks of `source`: [`ROUND_LIMITS`], or the links' own `mirror.fetch.max.bytes` and
    /// `mirror.max.partition.fetch.bytes` — the smallest where several links share the source (they share its
    /// rounds).
    fn round_limits(&self, source: &str) -> FetchLimits {
        let bytes = |value: Option<i64>, default: usize| {
            value
                .and_then(|bytes| usize::try_from(bytes).ok())
                .unwrap_or(default)
        };
        self.links
            .iter()
            .filter(|link| link.source == source)
            .map(|link| FetchLimits {
                per_partition: bytes(
                    link.settings.max_partition_fetch_bytes,
                    ROUND_LIMITS.per_partition,
                ),
                total: bytes(link.settings.fetch_max_bytes, ROUND_LIMITS.total),
            })
            .reduce(|one, other| FetchLimits {
                per_partition: one.per_partition.min(other.per_partition),
                total: one.total.min(other.total),
            })
            .unwrap_or(ROUND_LIMITS)
    }

    /// One round's fetch from `source`, now: fetched and waited for, or, with rounds in flight, started.
    async fn round_now(&mut self, source: &str, asked: Vec<PartitionFetch>) -> RoundNow {
        if self.rounds_in_flight {
            self.launch(source, asked);
            return RoundNow::InFlight;
        }
        match self
            .sources
            .fetch_many(source, &asked, self.round_limits(source))
            .await
        {
            Some(answers) => RoundNow::Answers(answers, next_landing(&self.landings)),
            None => RoundNow::Unsupported,
        }
    }

    /// Starts `asked` at `source` in a task of its own (the caller's runtime), which tells [`MirrorLinks::landed`]
    /// when it ends.
    fn launch(&mut self, source: &str, asked: Vec<PartitionFetch>) {
        let sources = Arc::clone(&self.sources);
        let landed = Arc::clone(&self.landed);
        let limits = self.round_limits(source);
        let landings = Arc::clone(&self.landings);
        let (address, wanted) = (source.to_owned(), asked.clone());
        let task = tokio::spawn(async move {
            let answers = sources.fetch_many(&address, &wanted, limits).await;
            let order = next_landing(&landings);
            landed.notify_one();
            (answers, order)
        });
        self.prefetched.insert(source.to_owned(), (asked, task));
    }

    /// Applies one partition's answer of a multi-partition round; the batches appended.
    async fn apply(
        &mut self,
        node: &Node,
        key: &PartitionKey,
        offset: i64,
        answer: Result<FetchedPartition, FetchError>,
        landed: u64,
    ) -> usize {
        let Some(mirrored) = self.partitions.get_mut(key) else {
            return 0;
        };
        let (topic, partition) = (key.0.as_str(), key.1);
        let Ok(slot) = slot(node, topic, partition).await else {
            return 0;
        };
        let now = node.now_ms();
        let mut guard = slot.lock().await;
        let Ok(log) = leader(&mut guard, topic, partition) else {
            return 0;
        };
        let failure_before = super::round_errors::failure_now(&mirrored.driver);
        let failed_as = failed_as(&answer);
        let batches = answer
            .as_ref()
            .ok()
            .map(|answer| FetchedBatches::of(&answer.response));
        let fetched = answer.map(|answer| {
            if answer.last_stable_offset.is_some() && landed >= mirrored.source_lso_landed {
                mirrored.source_lso = answer.last_stable_offset;
                mirrored.source_lso_landed = landed;
                mirrored.answers += 1;
            }
            answer.response
        });
        let applied = mirrored
            .driver
            .apply_fetch(log, mirrored.fetcher.as_mut(), offset, fetched)
            .await;
        let end = log.log_end_offset();
        drop(guard);
        let round = Round {
            applied,
            failure_before,
            failed_as,
            answer: batches.as_ref(),
            end_before: offset,
            end,
        };
        mirrored.after_round(node, key, round, now).await
    }

    /// One round of one partition through its own fetcher; the batches it appended.
    pub(super) async fn step_partition(&mut self, node: &Node, key: &PartitionKey) -> usize {
        let Some(source) = self.partitions.get(key).map(|mirrored| mirrored.source.clone()) else {
            return 0;
        };
        let max_bytes = self.round_limits(&source).per_partition;
        let Some(mirrored) = self.partitions.get_mut(key) else {
            return 0;
        };
        let (topic, partition) = (key.0.as_str(), key.1);
        let kind = mirrored.driver.state().kind();
        if !mirrored.driver.fetching() && kind != StateKind::Failed {
            return 0;
        }
        let Ok(slot) = slot(node, topic, partition).await else {
            return 0;
        };
        let now = node.now_ms();
        let mut guard = slot.lock().await;
        let Ok(log) = leader(&mut guard, topic, partition) else {
            return 0;
        };
        let end_before = log.log_end_offset();
        let failure_before = super::round_errors::failure_now(&mirrored.driver);
        let tick = mirrored
            .driver
            .handle(log, mirrored.fetcher.as_mut(), Event::Tick { now_ms: now })
            .await;
        if kind == StateKind::Failed
            && super::round_errors::failure_now(&mirrored.driver).as_ref() != failure_before.as_ref()
        {
            // The tick retried the partition: it left FAILED, or failed again on the way.
            mirrored.progress.retries += 1;
        }
        let mut failed_as = if kind == StateKind::Failed {
            super::round_errors::RETRY
        } else {
            super::round_errors::STEP
        };
        let mut batches = None;
        let fetched = match tick {
            // A retry that resumed fetching waits for the next round's fetch.
            Ok(()) if kind == StateKind::Failed => Ok(0),
            Ok(()) if !mirrored.driver.fetching() => Ok(0),
            Ok(()) => {
                // Fetched here rather than by the driver, so the round knows what the source answered.
                let from_offset = log.log_end_offset();
                let answer = mirrored.fetcher.fetch(from_offset, max_bytes).await;
                failed_as = self::failed_as(&answer);
                batches = answer.as_ref().ok().map(FetchedBatches::of);
                mirrored
                    .driver
                    .apply_fetch(log, mirrored.fetcher.as_mut(), from_offset, answer)
                    .await
            }
            Err(error) => Err(error),
        };
        if let Some(stable) = mirrored.fetcher.source_last_stable_offset() {
            mirrored.source_lso = Some(stable);
            mirrored.source_lso_landed = next_landing(&self.landings);
            if fetched.is_ok() && kind != StateKind::Failed {
                mirrored.answers += 1;
            }
        }
        let end = log.log_end_offset();
        drop(guard);
        let round = Round {
            applied: fetched,
            failure_before,
            failed_as,
            answer: batches.as_ref(),
            end_before,
            end,
        };
        mirrored.after_round(node, key, round, now).await
    }

    /// Recovers one partition's driver and brings it where the registry says it belongs. A `fresh` link (just
    /// created, not reopened) also starts a new session on a partition a deleted link left FAILED.
    pub(super) async fn start_partition(
        &mut self,
        node: &Node,
        link: &LinkRecord,
        topic: &str,
        partition: i32,
        record: TopicRecord,
        fresh: bool,
    ) -> Result<(), MirrorError> {
        let mut fetcher = self.sources.fetcher(&link.source, topic, partition);
        if let Some(topic_id) = record.source_topic_id {
            fetcher.expect_topic_id(topic_id);
        }
        let slot = slot(node, topic, partition).await?;
        let now = node.now_ms();
        let mut guard = slot.lock().await;
        let log = leader(&mut guard, topic, partition)?;
        let mut driver = MirrorDriver::recover_with_faults(
            log,
            fetcher.as_mut(),
            node.config().cluster_id.clone(),
            self.faults,
        )
        .await?;
        let failure_before = super::round_errors::failure_now(&driver);
        if let Some(max_ms) = link.settings.retry_backoff_max_ms {
            driver.set_max_backoff_ms(max_ms, now);
        }
        driver
            .handle(log, fetcher.as_mut(), Event::Tick { now_ms: now })
            .await?;
        let kind = driver.state().kind();
        let event = if record.failover_requested {
            // Asked to fail over before a crash: STOPPING runs now (an interrupted one has completed above).
            transition_allowed(kind, EventKind::Stop).then_some(Event::Stop)
        } else if kind == StateKind::Stopped
            || (fresh && kind == StateKind::Failed && driver.state().stop_step().is_none())
        {
            Some(Event::Start {
                source_cluster_id: link.source_cluster_id.clone(),
            })
        } else {
            None
        };
        let mut error = None;
        let mut progress = Progress::default();
        if let Some(event) = event {
            if let Err(failed) = driver.handle(log, fetcher.as_mut(), event).await {
                let name = super::round_errors::driver_error_name(&failed);
                *progress.failed_rounds.entry(name).or_default() += 1;
                error = Some(failed.to_string());
            }
        }
        drop(guard);
        wrote(node, topic, partition).await?;
        self.partitions.insert(
            (topic.to_owned(), partition),
            Mirrored {
                source: link.source.clone(),
                source_topic_id: record.source_topic_id,
                driver,
                fetcher,
                source_lso: None,
                source_lso_landed: 0,
                answers: 0,
                caught_up_at_ms: now,
                error,
                logged: None,
                progress,
            },
        );
        if let Some(mirrored) = self.partitions.get_mut(&(topic.to_owned(), partition)) {
            // Its start (a retry of a recorded failure, a new session's alignment) failing counts as a round.
            mirrored.count_failure_since(failure_before.as_ref(), super::round_errors::STEP);
            mirrored.log_changes(&(topic.to_owned(), partition));
        }
        Ok(())
    }
}

/// A source's wanted partitions in the order of its `turn` (a different partition leads each round).
fn rotated(mut wanted: Vec<PartitionFetch>, turn: usize) -> Vec<PartitionFetch> {
    if !wanted.is_empty() {
        let len = wanted.len();
        wanted.rotate_left(turn % len);
    }
    wanted
}

pub(super) async fn slot(
    node: &Node,
    topic: &str,
    partition: i32,
) -> Result<Arc<PartitionSlot>, MirrorError> {
    node.partition(topic, partition)
        .await
        .ok_or_else(|| MirrorError::UnknownTopic(format!("{topic}-{partition} does not exist on this node")))
}

pub(super) fn leader<'a>(
    replicas: &'a mut Option<ReplicaSet>,
    topic: &str,
    partition: i32,
) -> Result<&'a mut PartitionLog, MirrorError> {
    replicas
        .as_mut()
        .map(|replicas| &mut replicas.leader)
        .ok_or_else(|| MirrorError::Failed(format!("{topic}-{partition} is closed")))
}

/// Where a partition's log ends (`None`: missing or closed).
pub(super) async fn log_end(node: &Node, key: &PartitionKey) -> Option<i64> {
    log_end_and_truncations(node, key).await.map(|(end, _)| end)
}

/// Where the partition's log ends, and how many times it was cut back since the node opened it.
pub(super) async fn log_end_and_truncations(node: &Node, key: &PartitionKey) -> Option<(i64, u64)> {
    let slot = node.partition(&key.0, key.1).await?;
    let guard = slot.lock().await;
    guard
        .as_ref()
        .map(|replicas| (replicas.leader.log_end_offset(), replicas.leader.truncations()))
}

/// After a driver wrote: replication moves the high watermark, long polls wake.
pub(super) async fn wrote(node: &Node, topic: &str, partition: i32) -> Result<(), MirrorError> {
    node.replicate(topic, partition).await?;
    node.wake_fetches(topic, partition);
    Ok(())
}
