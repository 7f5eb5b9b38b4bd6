//! The mirror partition state machine, sans-IO: events in, actions out.
//!
//! ```text
//!                 Start                Aligned
//!   (none) / STOPPED / FAILED ──> PREPARING ──────> MIRRORING <──────┐ Resume
//!                                   │   ▲            │   │  Pause    │
//!                                   │   │ retry      │   └──────> PAUSED
//!                 error ────────────┼── FAILED <─────┤ error / wrong source
//!                                   │                │
//!                                   └──── Stop ──────┴──> STOPPING ──> STOPPED (writable)
//!                                        (also from PAUSED and FAILED)
//!
//! PREPARING (a new session) asks the peer where to start (QueryPeer → PeerPosition), checks the peer's cluster
//! id, and decides the alignment itself:
//!   the peer mirrored from us up to o < our end → TruncateTo{o};   up to o ≥ our end → keep the log;
//!   never mirrored from us → TruncateFullyAndStartAt{the peer's log start};   then MIRRORING.
//!
//! A session that resumes — MIRRORING entered again after a retry, a restart or a pause — never aligns again: it
//! checks its log against the source's first (CheckPosition → PositionChecked, [`crate::resume`], ADR 0046) and
//! truncates only on proof: to the first batch the source does not hold, or fully to the source's log start when
//! that passed our log end. An error is retried with exponential backoff and jitter that grow across consecutive
//! failures and reset only when a fetch succeeds.
//!
//! STOPPING, step by step (each step persisted before its action runs, so a crash resumes it):
//!   RemoveFetcher  → StopFetcher, AdvanceHighWatermark, TruncateToStableCut → event Truncated{offset}
//!   PersistOffset  → PersistLastMirrored{source, offset}                → event LastMirroredPersisted
//!   WriteBarrier   → InspectLogTail{offset}                             → event LogTail{end, own barrier?}
//!                    own barrier there → SyncLog; end = offset → AppendBarrier, SyncLog; else FAILED
//!                    (AppendBarrier writes an ABORT marker for each transaction the cut kept open, then the
//!                    barrier; the driver reports a tail of only such markers, left by a crash, as end = offset:
//!                    `crate::stopping`, ADR 0045)
//!                                                                       → event Synced
//!   ClearReadOnly  → SetReadOnly(false)                                 → event ReadOnlyCleared
//!   → STOPPED
//! ```
//!
//! The machine holds every decision (alignment, the high-watermark raise before the cut, whether the barrier
//! is already written, which failures are retried); the driver only runs actions and reports what it saw.
//! [`MirrorPartition::handle`] checks the transition against [`transition_allowed`] (an exhaustive table over
//! state × [`EventKind`]; an invalid transition is [`TransitionError`] and changes nothing) and returns the
//! [`Action`]s to run, in order. Every state change starts with [`Action::Persist`]: the driver writes the record
//! before running the rest, so after a crash [`Event::Recovered`] with the persisted record resumes exactly where
//! it stopped.

use record_format::{CrcCheckError, CrcCheckedBatches};
use serde::{Deserialize, Serialize};

/// The states (KIP-1279's early vocabulary: PREPARING, MIRRORING, PAUSED, STOPPING, STOPPED, FAILED).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum StateKind {
    /// Aligning the local log with the source before fetching.
    Preparing,
    /// The fetcher runs; the partition is read-only; batches are appended as the source wrote them.
    Mirroring,
    /// No fetcher; still read-only.
    Paused,
    /// Failing over: the steps of [`StopStep`].
    Stopping,
    /// Writable; the session is over.
    Stopped,
    /// An error; retried with backoff unless it is not retryable.
    Failed,
}

impl StateKind {
    /// Every state, in table order.
    pub const ALL: [StateKind; 6] = [
        StateKind::Preparing,
        StateKind::Mirroring,
        StateKind::Paused,
        StateKind::Stopping,
        StateKind::Stopped,
        StateKind::Failed,
    ];
}

/// Where STOPPING is (the seed's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StopStep {
    /// Remove the fetcher and truncate at the stable cut.
    RemoveFetcher,
    /// Persist the last mirrored offset (the stable cut the log was cut to).
    PersistOffset {
        /// The offset.
        offset: i64,
    },
    /// Append the ABORT markers and the barrier after `offset` and make them durable.
    WriteBarrier {
        /// Where STOPPING's own writes begin (the log end after the cut).
        offset: i64,
    },
    /// Clear read-only.
    ClearReadOnly,
}

/// The failure a FAILED partition holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// What went wrong.
    pub message: String,
    /// Whether a retry can help.
    pub retryable: bool,
    /// Kafka's error code when the failure was the source's answer (`None`: any other failure; absent in states
    /// persisted before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i16>,
    /// Retries made so far.
    pub attempts: u32,
    /// The state to go back to on retry.
    pub previous: StateKind,
    /// When the next retry is due (ms; the time of the events).
    pub retry_at_ms: i64,
}

/// A mirror session: the source it mirrors, and the last mirrored offset the latest STOPPING recorded (kept
/// across sessions; `None` before the first STOPPING).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The source cluster.
    pub source_cluster_id: String,
    /// The offset the latest STOPPING recorded.
    pub last_mirrored_offset: Option<i64>,
}

/// The machine's whole state: what [`Action::Persist`] writes and [`Event::Recovered`] reads back. Each variant
/// carries exactly its data: a STOPPING always has its step, a FAILED partition its failure, and only a
/// partition never mirrored has no session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum MirrorState {
    /// Writable; `session` is the last one (`None`: never mirrored).
    Stopped {
        /// The last session.
        session: Option<Session>,
    },
    /// Aligning with the source.
    Preparing {
        /// The session.
        session: Session,
    },
    /// Fetching, read-only.
    Mirroring {
        /// The session.
        session: Session,
    },
    /// No fetcher, still read-only.
    Paused {
        /// The session.
        session: Session,
    },
    /// Failing over, at `step`.
    Stopping {
        /// The session.
        session: Session,
        /// The step in progress.
        step: StopStep,
    },
    /// An error; retried with backoff unless not retryable.
    Failed {
        /// The session.
        session: Session,
        /// What went wrong.
        failure: Failure,
        /// The STOPPING step to resume at, when STOPPING failed.
        stop_step: Option<StopStep>,
    },
}

impl MirrorState {
    /// A partition that was never mirrored (writable).
    pub fn never_mirrored() -> Self {
        MirrorState::Stopped { session: None }
    }

    /// The state without its data.
    pub fn kind(&self) -> StateKind {
        match self {
            MirrorState::Stopped { .. } => StateKind::Stopped,
            MirrorState::Preparing { .. } => StateKind::Preparing,
            MirrorState::Mirroring { .. } => StateKind::Mirroring,
            MirrorState::Paused { .. } => StateKind::Paused,
            MirrorState::Stopping { .. } => StateKind::Stopping,
            MirrorState::Failed { .. } => StateKind::Failed,
        }
    }

    /// The session (`None`: never mirrored).
    pub fn session(&self) -> Option<&Session> {
        match self {
            MirrorState::Stopped { session } => session.as_ref(),
            MirrorState::Preparing { session }
            | MirrorState::Mirroring { session }
            | MirrorState::Paused { session }
            | MirrorState::Stopping { session, .. }
            | MirrorState::Failed { session, .. } => Some(session),
        }
    }

    /// The source this (or the last) session mirrors.
    pub fn source_cluster_id(&self) -> Option<&str> {
        self.session().map(|session| session.source_cluster_id.as_str())
    }

    /// The last mirrored offset the latest STOPPING recorded.
    pub fn last_mirrored_offset(&self) -> Option<i64> {
        self.session().and_then(|session| session.last_mirrored_offset)
    }

    /// The STOPPING step in progress, or to resume at after a failure.
    pub fn stop_step(&self) -> Option<StopStep> {
        match self {
            MirrorState::Stopping { step, .. } => Some(*step),
            MirrorState::Failed { stop_step, .. } => *stop_step,
            _ => None,
        }
    }

    /// The failure of a FAILED partition.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            MirrorState::Failed { failure, .. } => Some(failure),
            _ => None,
        }
    }
}

/// What happens to a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Start mirroring from `source_cluster_id`.
    Start {
        /// The expected source.
        source_cluster_id: String,
    },
    /// PREPARING: where the peer stands (answer to [`Action::QueryPeer`]).
    PeerPosition {
        /// The cluster id the peer reported (checked before anything is truncated).
        source_cluster_id: String,
        /// The peer's last mirrored offset of its session whose source was this cluster (`None`: it never
        /// mirrored from us).
        last_mirrored_offset: Option<i64>,
        /// The peer partition's log start offset.
        log_start_offset: i64,
        /// This partition's log end offset.
        local_log_end: i64,
    },
    /// A resumed session: how this log compares with the source's (answer to [`Action::CheckPosition`]).
    PositionChecked {
        /// The cluster id the source reported (checked before anything is truncated).
        source_cluster_id: String,
        /// The source partition's log start offset.
        source_log_start: i64,
        /// This partition's log end offset.
        local_log_end: i64,
        /// The base offset of this log's first batch the source proved it does not hold (the logs agree below
        /// it); `None` when nothing proves a difference.
        first_difference: Option<i64>,
    },
    /// The fetcher returned batches, reporting the cluster it fetched from.
    Fetched {
        /// The cluster id the source reported.
        source_cluster_id: String,
        /// The batches, as the source stored them, CRC-checked where they arrived (a mismatch fails the session:
        /// the bytes are refused, not retried).
        batches: Result<CrcCheckedBatches, CrcCheckError>,
    },
    /// Fetching or aligning failed (the source says whether a retry can help).
    Error {
        /// What happened.
        message: String,
        /// Whether a retry can help.
        retryable: bool,
        /// Kafka's error code when the source answered one.
        code: Option<i16>,
    },
    /// An action on the local log failed.
    LogFailed {
        /// What kind of failure (the machine decides whether to retry).
        failure: LogFailure,
        /// What happened.
        message: String,
    },
    /// Pause mirroring.
    Pause,
    /// Resume mirroring.
    Resume,
    /// Fail over: stop mirroring and make the partition writable.
    Stop,
    /// Time passes (retries are due at `now_ms`).
    Tick {
        /// Now.
        now_ms: i64,
    },
    /// STOPPING: the log was truncated to `offset` (its stable cut).
    Truncated {
        /// The new log end.
        offset: i64,
    },
    /// STOPPING: the last mirrored offset is persisted.
    LastMirroredPersisted,
    /// STOPPING: what the log holds where the barrier goes (answer to [`Action::InspectLogTail`]).
    LogTail {
        /// The log end offset, not counting STOPPING's own ABORT markers when no barrier follows them.
        log_end: i64,
        /// True when a barrier this cluster wrote follows the offset (after STOPPING's ABORT markers, if any).
        own_barrier_present: bool,
    },
    /// STOPPING: the log is durable (answer to [`Action::SyncLog`]).
    Synced,
    /// STOPPING: read-only is cleared.
    ReadOnlyCleared,
    /// The process restarted; this is the last persisted state.
    Recovered {
        /// The persisted record (`None`: never mirrored).
        state: Option<MirrorState>,
    },
}

/// How an action on the local log failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFailure {
    /// The log refused a mirrored batch (corrupt, offsets that do not follow, producer state): retrying the same
    /// bytes cannot help.
    Refused,
    /// Storage failed (I/O, poisoned, offline): a retry after reopening may help.
    Storage,
    /// The log is not where STOPPING expects it (neither at the barrier offset nor holding our barrier there).
    Unexpected,
}

/// An event without its data: the columns of the transition table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// [`Event::Start`].
    Start,
    /// [`Event::PeerPosition`].
    PeerPosition,
    /// [`Event::PositionChecked`].
    PositionChecked,
    /// [`Event::Fetched`].
    Fetched,
    /// [`Event::Error`].
    Error,
    /// [`Event::LogFailed`].
    LogFailed,
    /// [`Event::Pause`].
    Pause,
    /// [`Event::Resume`].
    Resume,
    /// [`Event::Stop`].
    Stop,
    /// [`Event::Tick`].
    Tick,
    /// [`Event::Truncated`].
    Truncated,
    /// [`Event::LastMirroredPersisted`].
    LastMirroredPersisted,
    /// [`Event::LogTail`].
    LogTail,
    /// [`Event::Synced`].
    Synced,
    /// [`Event::ReadOnlyCleared`].
    ReadOnlyCleared,
    /// [`Event::Recovered`].
    Recovered,
}

impl Event {
    /// The event's kind (its column in the transition table).
    pub fn kind(&self) -> EventKind {
        match self {
            Event::Start { .. } => EventKind::Start,
            Event::PeerPosition { .. } => EventKind::PeerPosition,
            Event::PositionChecked { .. } => EventKind::PositionChecked,
            Event::Fetched { .. } => EventKind::Fetched,
            Event::Error { .. } => EventKind::Error,
            Event::LogFailed { .. } => EventKind::LogFailed,
            Event::Pause => EventKind::Pause,
            Event::Resume => EventKind::Resume,
            Event::Stop => EventKind::Stop,
            Event::Tick { .. } => EventKind::Tick,
            Event::Truncated { .. } => EventKind::Truncated,
            Event::LastMirroredPersisted => EventKind::LastMirroredPersisted,
            Event::LogTail { .. } => EventKind::LogTail,
            Event::Synced => EventKind::Synced,
            Event::ReadOnlyCleared => EventKind::ReadOnlyCleared,
            Event::Recovered { .. } => EventKind::Recovered,
        }
    }
}

/// What the driver must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write the state record durably (before anything after it).
    Persist(MirrorState),
    /// Set or clear read-only, durably.
    SetReadOnly(bool),
    /// Ask the peer for its cluster id, its last mirrored offset of its session whose source was this cluster,
    /// and its log start offset; report [`Event::PeerPosition`].
    QueryPeer,
    /// Compare this log with the source's ([`crate::resume`]); report [`Event::PositionChecked`].
    CheckPosition,
    /// Truncate the log to `offset` (alignment).
    TruncateTo {
        /// The new log end.
        offset: i64,
    },
    /// Empty the log and restart it at `offset` (alignment with a peer that never mirrored from us).
    TruncateFullyAndStartAt {
        /// The new log start and end.
        offset: i64,
    },
    /// Start the fetcher (it fetches from the log end).
    StartFetcher,
    /// Stop the fetcher.
    StopFetcher,
    /// Append fetched batches with REPLICATION origin, offsets and bytes kept.
    AppendReplicated(CrcCheckedBatches),
    /// Raise the high watermark to the log end: a mirror destination is its own only replica, so what it wrote
    /// is replicated.
    AdvanceHighWatermark,
    /// Truncate the log at its stable cut (the LSO, or above it where a marker there closes a transaction begun
    /// below: [`crate::stopping`]), then report [`Event::Truncated`].
    TruncateToStableCut,
    /// Persist the last mirrored offset for `source_cluster_id`, then report [`Event::LastMirroredPersisted`].
    PersistLastMirrored {
        /// The source.
        source_cluster_id: String,
        /// The offset.
        offset: i64,
    },
    /// Report what the log holds at `offset` ([`Event::LogTail`]).
    InspectLogTail {
        /// Where the barrier goes.
        offset: i64,
    },
    /// Append an ABORT marker for each transaction still open, then this cluster's barrier, from `offset` on,
    /// with COORDINATOR origin.
    AppendBarrier {
        /// The source cluster written into the barrier.
        source_cluster_id: String,
        /// The last mirrored offset. The writes go at the log end: this offset, unless a crashed attempt's ABORT
        /// markers lie above it.
        offset: i64,
    },
    /// Make the log durable, then report [`Event::Synced`].
    SyncLog,
}

/// An event the current state does not accept; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid transition: {event:?} in state {state:?}")]
pub struct TransitionError {
    /// The state.
    pub state: StateKind,
    /// The event.
    pub event: EventKind,
}

/// Retry backoff: the first retry after this long, doubling with each consecutive failure up to
/// [`MAX_BACKOFF_MS`]; each wait is drawn between half and all of that ([`backoff_ms`]).
pub const INITIAL_BACKOFF_MS: i64 = 100;
/// Longest wait between retries.
pub const MAX_BACKOFF_MS: i64 = 30_000;

/// The wait before the retry after `failures` consecutive failures before this one: "equal jitter" — half the
/// exponential ceiling plus a part of the other half drawn from `seed` (the time of the failure: the machine knows
/// no randomness, and partitions failing at different moments spread out).
pub fn backoff_ms(failures: u32, seed: i64) -> i64 {
    backoff_within_ms(failures, seed, MAX_BACKOFF_MS)
}

/// [`backoff_ms`] with its ceiling at `max_ms` rather than [`MAX_BACKOFF_MS`] (a link's
/// `mirror.retry.backoff.max.ms`); never below [`INITIAL_BACKOFF_MS`].
pub fn backoff_within_ms(failures: u32, seed: i64, max_ms: i64) -> i64 {
    let ceiling = INITIAL_BACKOFF_MS
        .saturating_mul(1_i64 << failures.min(20))
        .min(max_ms.max(INITIAL_BACKOFF_MS));
    let half = ceiling / 2;
    // SplitMix64's finaliser: a well-spread draw from a seed.
    let mut draw = (seed as u64) ^ u64::from(failures).rotate_left(32);
    draw = (draw ^ (draw >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    draw = (draw ^ (draw >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    draw ^= draw >> 31;
    half + (draw % (half as u64 + 1)) as i64
}

/// The transition table: whether `state` accepts events of `event`'s kind. Exhaustive over both: a new state or
/// event does not compile until its row and column are written. (Inside STOPPING, `handle` also checks that a
/// step's answer belongs to the step in progress.)
pub fn transition_allowed(state: StateKind, event: EventKind) -> bool {
    use EventKind as E;
    use StateKind as S;
    match (state, event) {
        // Time passes and restarts happen in every state (only FAILED acts on time).
        (_, E::Tick | E::Recovered) => true,
        // A new session from a peer: a partition never mirrored, stopped, or failed (an operator re-start).
        (S::Stopped | S::Failed, E::Start) => true,
        (S::Preparing | S::Mirroring | S::Paused | S::Stopping, E::Start) => false,
        (S::Preparing, E::PeerPosition) => true,
        (S::Mirroring | S::Paused | S::Stopping | S::Stopped | S::Failed, E::PeerPosition) => false,
        (S::Mirroring, E::PositionChecked) => true,
        (S::Preparing | S::Paused | S::Stopping | S::Stopped | S::Failed, E::PositionChecked) => false,
        (S::Mirroring, E::Fetched) => true,
        (S::Preparing | S::Paused | S::Stopping | S::Stopped | S::Failed, E::Fetched) => false,
        (S::Preparing | S::Mirroring | S::Stopping | S::Failed, E::Error | E::LogFailed) => true,
        (S::Paused | S::Stopped, E::Error | E::LogFailed) => false,
        (S::Mirroring, E::Pause) => true,
        (S::Preparing | S::Paused | S::Stopping | S::Stopped | S::Failed, E::Pause) => false,
        (S::Paused, E::Resume) => true,
        (S::Preparing | S::Mirroring | S::Stopping | S::Stopped | S::Failed, E::Resume) => false,
        (S::Preparing | S::Mirroring | S::Paused | S::Failed, E::Stop) => true,
        (S::Stopping | S::Stopped, E::Stop) => false,
        (
            S::Stopping,
            E::Truncated | E::LastMirroredPersisted | E::LogTail | E::Synced | E::ReadOnlyCleared,
        ) => true,
        (
            S::Preparing | S::Mirroring | S::Paused | S::Stopped | S::Failed,
            E::Truncated | E::LastMirroredPersisted | E::LogTail | E::Synced | E::ReadOnlyCleared,
        ) => false,
    }
}

/// One partition's machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorPartition {
    state: MirrorState,
    now_ms: i64,
    /// Failures since the last successful fetch: the backoff's exponent.
    failures_in_a_row: u32,
    /// The longest wait between retries ([`MAX_BACKOFF_MS`] unless set).
    max_backoff_ms: i64,
}

impl MirrorPartition {
    /// A partition in `state` (use [`MirrorState::never_mirrored`] for a fresh one).
    pub fn new(state: MirrorState) -> Self {
        MirrorPartition {
            state,
            now_ms: 0,
            failures_in_a_row: 0,
            max_backoff_ms: MAX_BACKOFF_MS,
        }
    }

    /// Caps the wait between retries at `max_ms` (at least [`INITIAL_BACKOFF_MS`]) from now on: a FAILED
    /// partition waiting longer than that retries at most `max_ms` from now. Only the time of a retry changes —
    /// never whether it is made.
    pub fn set_max_backoff_ms(&mut self, max_ms: i64, now_ms: i64) {
        self.now_ms = self.now_ms.max(now_ms);
        self.max_backoff_ms = max_ms.max(INITIAL_BACKOFF_MS);
        let latest = self.now_ms.saturating_add(self.max_backoff_ms);
        if let MirrorState::Failed { failure, .. } = &mut self.state {
            failure.retry_at_ms = failure.retry_at_ms.min(latest);
        }
    }

    /// A FAILED partition (not in the middle of a STOPPING) is retried at the next tick at or after `now_ms`, even
    /// if its failure was final: what made it final has changed (a link's new client settings, after a failed
    /// authentication). The retry takes the ordinary path (back to the state it failed in, its checks first).
    /// Returns whether there was such a failure.
    pub fn retry_now(&mut self, now_ms: i64) -> bool {
        match &mut self.state {
            MirrorState::Failed {
                failure,
                stop_step: None,
                ..
            } => {
                failure.retryable = true;
                failure.retry_at_ms = now_ms;
                true
            }
            _ => false,
        }
    }

    /// The state.
    pub fn state(&self) -> &MirrorState {
        &self.state
    }

    /// True when CLIENT appends must be refused: every state but STOPPED.
    pub fn read_only(&self) -> bool {
        self.state.kind() != StateKind::Stopped
    }

    /// Handles one event; see the module docs.
    pub fn handle(&mut self, event: Event) -> Result<Vec<Action>, TransitionError> {
        let kind = self.state.kind();
        let stop_step = self.state.stop_step();
        let event_kind = event.kind();
        let refused = TransitionError {
            state: kind,
            event: event_kind,
        };
        if !transition_allowed(kind, event_kind) {
            return Err(refused);
        }
        // A STOPPING step's answer must belong to the step in progress.
        let check_step = |expected: fn(StopStep) -> bool| match stop_step {
            Some(step) if kind == StateKind::Stopping && expected(step) => Ok(()),
            _ => Err(refused.clone()),
        };
        let actions = match event {
            Event::Start { source_cluster_id } => {
                self.state = MirrorState::Preparing {
                    session: Session {
                        source_cluster_id,
                        last_mirrored_offset: self.state.last_mirrored_offset(),
                    },
                };
                self.enter_actions()
            }
            Event::PeerPosition {
                source_cluster_id,
                last_mirrored_offset,
                log_start_offset,
                local_log_end,
            } => {
                if let Some(refused) = self.unverified(&source_cluster_id) {
                    return Ok(refused);
                }
                // Failback alignment: keep exactly what the peer mirrored from us; a peer that never did owns the
                // partition's history, so ours goes and we start at its log start.
                let mut actions = match last_mirrored_offset {
                    Some(offset) if offset < local_log_end => vec![Action::TruncateTo { offset }],
                    Some(_) => Vec::new(),
                    None => vec![Action::TruncateFullyAndStartAt {
                        offset: log_start_offset,
                    }],
                };
                self.state = MirrorState::Mirroring {
                    session: self.session(),
                };
                actions.push(self.persist());
                actions.push(Action::StartFetcher);
                actions
            }
            Event::PositionChecked {
                source_cluster_id,
                source_log_start,
                local_log_end,
                first_difference,
            } => {
                if let Some(refused) = self.unverified(&source_cluster_id) {
                    return Ok(refused);
                }
                // Truncate only on proof (ADR 0046): the source's log start passed our end (what lies between is
                // gone at the source), or a batch of ours the source does not hold.
                let mut actions = match first_difference {
                    _ if source_log_start > local_log_end => vec![Action::TruncateFullyAndStartAt {
                        offset: source_log_start,
                    }],
                    Some(offset) if offset < local_log_end => vec![Action::TruncateTo { offset }],
                    _ => Vec::new(),
                };
                actions.push(Action::StartFetcher);
                actions
            }
            Event::Fetched {
                source_cluster_id,
                batches,
            } => {
                if let Some(refused) = self.unverified(&source_cluster_id) {
                    refused
                } else {
                    match batches {
                        Err(corrupt) => {
                            self.fail(format!("a mirrored batch was refused: {corrupt}"), false, None)
                        }
                        Ok(batches) => {
                            // A round that worked: the backoff starts over.
                            self.failures_in_a_row = 0;
                            if batches.is_empty() {
                                Vec::new()
                            } else {
                                vec![Action::AppendReplicated(batches), Action::AdvanceHighWatermark]
                            }
                        }
                    }
                }
            }
            Event::LogFailed { failure, message } => {
                // Retry policy: storage may recover after a reopen; a refused batch or a log in an unexpected
                // place will not get better by trying again.
                self.fail(message, failure == LogFailure::Storage, None)
            }
            Event::Error {
                message,
                retryable,
                code,
            } => self.fail(message, retryable, code),
            Event::Pause => {
                self.state = MirrorState::Paused {
                    session: self.session(),
                };
                vec![self.persist(), Action::StopFetcher]
            }
            Event::Resume => {
                self.state = MirrorState::Mirroring {
                    session: self.session(),
                };
                self.enter_actions()
            }
            Event::Stop => {
                // A STOPPING that failed part-way resumes at its step: the steps before it are done, and
                // starting over could cut the log again after the barrier.
                let step = match &self.state {
                    MirrorState::Failed {
                        failure,
                        stop_step: Some(step),
                        ..
                    } if failure.previous == StateKind::Stopping => *step,
                    _ => StopStep::RemoveFetcher,
                };
                self.state = MirrorState::Stopping {
                    session: self.session(),
                    step,
                };
                self.enter_actions()
            }
            Event::Tick { now_ms } => {
                self.now_ms = self.now_ms.max(now_ms);
                match &self.state {
                    MirrorState::Failed {
                        session,
                        failure,
                        stop_step,
                    } if failure.retryable && now_ms >= failure.retry_at_ms => {
                        let session = session.clone();
                        self.state = match (failure.previous, *stop_step) {
                            (StateKind::Stopping, Some(step)) => MirrorState::Stopping { session, step },
                            // A session that was mirroring resumes (its log checked against the source's before
                            // it fetches); one that failed while aligning aligns again.
                            (StateKind::Mirroring | StateKind::Paused, _) => {
                                MirrorState::Mirroring { session }
                            }
                            _ => MirrorState::Preparing { session },
                        };
                        self.enter_actions()
                    }
                    _ => Vec::new(),
                }
            }
            Event::Truncated { offset } => {
                check_step(|step| step == StopStep::RemoveFetcher)?;
                self.set_step(StopStep::PersistOffset { offset });
                self.enter_actions()
            }
            Event::LastMirroredPersisted => {
                check_step(|step| matches!(step, StopStep::PersistOffset { .. }))?;
                let Some(StopStep::PersistOffset { offset }) = stop_step else {
                    return Err(refused);
                };
                if let MirrorState::Stopping { session, .. } = &mut self.state {
                    session.last_mirrored_offset = Some(offset);
                }
                self.set_step(StopStep::WriteBarrier { offset });
                self.enter_actions()
            }
            Event::LogTail {
                log_end,
                own_barrier_present,
            } => {
                check_step(|step| matches!(step, StopStep::WriteBarrier { .. }))?;
                let Some(StopStep::WriteBarrier { offset }) = stop_step else {
                    return Err(refused);
                };
                if own_barrier_present {
                    // A crash after the append: the barrier is there; make it durable, never write a second.
                    vec![Action::SyncLog]
                } else if log_end == offset {
                    vec![
                        Action::AppendBarrier {
                            source_cluster_id: self.source(),
                            offset,
                        },
                        Action::SyncLog,
                    ]
                } else {
                    let message = format!(
                        "STOPPING expected the log to end at {offset} (or to hold this cluster's barrier there) \
                         but it ends at {log_end}"
                    );
                    self.fail(message, false, None)
                }
            }
            Event::Synced => {
                check_step(|step| matches!(step, StopStep::WriteBarrier { .. }))?;
                self.set_step(StopStep::ClearReadOnly);
                self.enter_actions()
            }
            Event::ReadOnlyCleared => {
                check_step(|step| step == StopStep::ClearReadOnly)?;
                self.state = MirrorState::Stopped {
                    session: Some(self.session()),
                };
                vec![self.persist()]
            }
            Event::Recovered { state } => {
                self.state = state.unwrap_or_else(MirrorState::never_mirrored);
                self.failures_in_a_row = self
                    .state
                    .failure()
                    .map_or(0, |failure| failure.attempts.saturating_add(1));
                self.resume_actions()
            }
        };
        Ok(actions)
    }

    /// The current session (states that have one; an empty one otherwise, which `transition_allowed` rules out
    /// wherever a session is needed).
    fn session(&self) -> Session {
        self.state.session().cloned().unwrap_or(Session {
            source_cluster_id: String::new(),
            last_mirrored_offset: None,
        })
    }

    fn set_step(&mut self, next: StopStep) {
        if let MirrorState::Stopping { step, .. } = &mut self.state {
            *step = next;
        }
    }

    /// Refuses a source that reports another cluster than the session's (FAILED, not retryable, before anything
    /// is written or truncated); `None` when it is the session's.
    fn unverified(&mut self, reported: &str) -> Option<Vec<Action>> {
        let expected = self.source();
        (reported != expected).then(|| {
            let message = format!(
                "source verification failed: the source reports cluster {reported:?}, this session mirrors \
                 {expected:?}; nothing written or truncated"
            );
            self.fail(message, false, None)
        })
    }

    fn persist(&self) -> Action {
        Action::Persist(self.state.clone())
    }

    fn source(&self) -> String {
        self.state
            .source_cluster_id()
            .map(str::to_owned)
            .unwrap_or_default()
    }

    /// The actions of entering (or re-entering) the current state: persist first, then the state's work.
    fn enter_actions(&self) -> Vec<Action> {
        let mut actions = vec![self.persist()];
        actions.extend(self.state_work());
        actions
    }

    /// After a restart: the current state's work again (the record is already persisted).
    fn resume_actions(&self) -> Vec<Action> {
        let mut actions = Vec::new();
        // Whatever the state, a mirrored partition stays read-only until STOPPING clears it.
        if self.read_only() && self.state.stop_step() != Some(StopStep::ClearReadOnly) {
            actions.push(Action::SetReadOnly(true));
        }
        actions.extend(self.state_work());
        actions
    }

    fn state_work(&self) -> Vec<Action> {
        match &self.state {
            MirrorState::Preparing { .. } => {
                vec![Action::SetReadOnly(true), Action::StopFetcher, Action::QueryPeer]
            }
            // Entered again (a retry, a restart, a resume): the log is checked before the fetcher starts.
            MirrorState::Mirroring { .. } => vec![Action::CheckPosition],
            MirrorState::Stopping { step, .. } => match *step {
                // Everything written is replicated (a destination is its own only replica), so the LSO cut
                // removes exactly the undecided transactions.
                StopStep::RemoveFetcher => vec![
                    Action::StopFetcher,
                    Action::AdvanceHighWatermark,
                    Action::TruncateToStableCut,
                ],
                StopStep::PersistOffset { offset } => vec![Action::PersistLastMirrored {
                    source_cluster_id: self.source(),
                    offset,
                }],
                StopStep::WriteBarrier { offset } => vec![Action::InspectLogTail { offset }],
                StopStep::ClearReadOnly => vec![Action::SetReadOnly(false)],
            },
            _ => Vec::new(),
        }
    }

    /// Records a failure: FAILED (a failed STOPPING keeps its step, so a retry or a new Stop resumes there), or,
    /// when already FAILED (a retry failed), the new message; either way the next retry backs off further.
    fn fail(&mut self, message: String, retryable: bool, code: Option<i16>) -> Vec<Action> {
        let attempts = self.failures_in_a_row;
        self.failures_in_a_row = attempts.saturating_add(1);
        let retry_at_ms =
            self.now_ms
                .saturating_add(backoff_within_ms(attempts, self.now_ms, self.max_backoff_ms));
        if let MirrorState::Failed { failure, .. } = &mut self.state {
            failure.attempts = attempts;
            failure.retry_at_ms = retry_at_ms;
            failure.message = message;
            failure.code = code;
            failure.retryable = failure.retryable && retryable;
        } else {
            let stop_step = match self.state {
                MirrorState::Stopping { step, .. } => Some(step),
                _ => None,
            };
            self.state = MirrorState::Failed {
                session: self.session(),
                failure: Failure {
                    message,
                    retryable,
                    code,
                    attempts,
                    previous: self.state.kind(),
                    retry_at_ms,
                },
                stop_step,
            };
        }
        vec![self.persist(), Action::StopFetcher]
    }
}
