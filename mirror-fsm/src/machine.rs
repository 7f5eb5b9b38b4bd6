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
//! STOPPING, step by step (each step persisted before its action runs, so a crash resumes it):
//!   RemoveFetcher    → StopFetcher, TruncateToLso            → event Truncated{offset}
//!   PersistOffset    → PersistLastMirrored{source, offset}   → event LastMirroredPersisted
//!   WriteBarrier     → WriteBarrier{at: offset}  (durable)   → event BarrierWritten
//!   ClearReadOnly    → SetReadOnly(false)                    → event ReadOnlyCleared
//!   → STOPPED
//! ```
//!
//! [`MirrorPartition::handle`] checks the transition against [`transition_allowed`] (the explicit table; an
//! invalid transition is [`TransitionError`] and changes nothing) and returns the [`Action`]s to run, in order.
//! Every state change starts with [`Action::Persist`]: the driver writes the record before running the rest, so
//! after a crash [`Event::Recovered`] with the persisted record resumes exactly where it stopped.

use record_format::RecordBatch;
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
    /// Remove the fetcher and truncate to the LSO.
    RemoveFetcher,
    /// Persist the last mirrored offset (the LSO the log was cut to).
    PersistOffset {
        /// The offset.
        offset: i64,
    },
    /// Append the barrier at `offset` and make it durable.
    WriteBarrier {
        /// Where the barrier goes (the log end after the cut).
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
    /// Retries made so far.
    pub attempts: u32,
    /// The state to go back to on retry.
    pub previous: StateKind,
    /// When the next retry is due (ms; the time of the events).
    pub retry_at_ms: i64,
}

/// The machine's whole state: what [`Action::Persist`] writes and [`Event::Recovered`] reads back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorState {
    /// The state.
    pub kind: StateKind,
    /// The source cluster this session mirrors (`None` before the first start).
    pub source_cluster_id: Option<String>,
    /// The STOPPING step (when `kind` is `Stopping`).
    pub stop_step: Option<StopStep>,
    /// The failure (when `kind` is `Failed`).
    pub failure: Option<Failure>,
    /// The last mirrored offset recorded by the last STOPPING (kept after STOPPED).
    pub last_mirrored_offset: Option<i64>,
}

impl MirrorState {
    /// A partition that was never mirrored (writable).
    pub fn never_mirrored() -> Self {
        MirrorState {
            kind: StateKind::Stopped,
            source_cluster_id: None,
            stop_step: None,
            failure: None,
            last_mirrored_offset: None,
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
    /// The log is aligned with the source; fetch from `from_offset`.
    Aligned {
        /// Where fetching starts.
        from_offset: i64,
    },
    /// The fetcher returned batches, reporting the cluster it fetched from.
    Fetched {
        /// The cluster id the source reported.
        source_cluster_id: String,
        /// The batches, as the source stored them.
        batches: Vec<RecordBatch>,
    },
    /// Fetching or aligning failed.
    Error {
        /// What happened.
        message: String,
        /// Whether a retry can help.
        retryable: bool,
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
    /// STOPPING: the log was truncated to `offset` (its LSO).
    Truncated {
        /// The new log end.
        offset: i64,
    },
    /// STOPPING: the last mirrored offset is persisted.
    LastMirroredPersisted,
    /// STOPPING: the barrier is in the log and durable.
    BarrierWritten,
    /// STOPPING: read-only is cleared.
    ReadOnlyCleared,
    /// The process restarted; this is the last persisted state.
    Recovered {
        /// The persisted record (`None`: never mirrored).
        state: Option<MirrorState>,
    },
}

impl Event {
    /// The event's name in the transition table.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Start { .. } => "Start",
            Event::Aligned { .. } => "Aligned",
            Event::Fetched { .. } => "Fetched",
            Event::Error { .. } => "Error",
            Event::Pause => "Pause",
            Event::Resume => "Resume",
            Event::Stop => "Stop",
            Event::Tick { .. } => "Tick",
            Event::Truncated { .. } => "Truncated",
            Event::LastMirroredPersisted => "LastMirroredPersisted",
            Event::BarrierWritten => "BarrierWritten",
            Event::ReadOnlyCleared => "ReadOnlyCleared",
            Event::Recovered { .. } => "Recovered",
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
    /// Ask the source for its last mirrored offset of this partition for `source_cluster_id` (this cluster, when
    /// failing back), truncate the log to it (fully, to the source's log start, when it has none), then report
    /// [`Event::Aligned`].
    Align {
        /// The source.
        source_cluster_id: String,
    },
    /// Start the fetcher at `from_offset` (`None`: the log end).
    StartFetcher {
        /// Where to fetch from.
        from_offset: Option<i64>,
    },
    /// Stop the fetcher.
    StopFetcher,
    /// Append fetched batches with REPLICATION origin, offsets and bytes kept.
    AppendReplicated(Vec<RecordBatch>),
    /// Truncate the log to its LSO, then report [`Event::Truncated`].
    TruncateToLso,
    /// Persist the last mirrored offset for `source_cluster_id`, then report [`Event::LastMirroredPersisted`].
    PersistLastMirrored {
        /// The source.
        source_cluster_id: String,
        /// The offset.
        offset: i64,
    },
    /// Make sure the log holds this cluster's barrier at `offset` (append it with COORDINATOR origin unless it
    /// is already there), durable; then report [`Event::BarrierWritten`].
    WriteBarrier {
        /// The source cluster written into the barrier.
        source_cluster_id: String,
        /// Where it goes.
        offset: i64,
    },
}

/// An event the current state does not accept; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid transition: {event} in state {state:?}")]
pub struct TransitionError {
    /// The state.
    pub state: StateKind,
    /// The event's name.
    pub event: &'static str,
}

/// Retry backoff: the first retry after this long, doubling up to [`MAX_BACKOFF_MS`].
pub const INITIAL_BACKOFF_MS: i64 = 100;
/// Longest wait between retries.
pub const MAX_BACKOFF_MS: i64 = 30_000;

/// The transition table: whether `state` accepts the event named `event` (names from [`Event::name`]).
pub fn transition_allowed(state: StateKind, event: &str) -> bool {
    use StateKind::*;
    match event {
        // A new session from a peer: a partition never mirrored, stopped, or failed (e.g. an operator re-start).
        "Start" => matches!(state, Stopped | Failed),
        "Aligned" => state == Preparing,
        "Fetched" => state == Mirroring,
        "Error" => matches!(state, Preparing | Mirroring | Stopping | Failed),
        "Pause" => state == Mirroring,
        "Resume" => state == Paused,
        "Stop" => matches!(state, Preparing | Mirroring | Paused | Failed),
        // Time passes in every state; only FAILED acts on it.
        "Tick" => true,
        "Truncated" | "LastMirroredPersisted" | "BarrierWritten" | "ReadOnlyCleared" => state == Stopping,
        "Recovered" => true,
        _ => false,
    }
}

/// One partition's machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorPartition {
    state: MirrorState,
    now_ms: i64,
}

impl MirrorPartition {
    /// A partition in `state` (use [`MirrorState::never_mirrored`] for a fresh one).
    pub fn new(state: MirrorState) -> Self {
        MirrorPartition { state, now_ms: 0 }
    }

    /// The state.
    pub fn state(&self) -> &MirrorState {
        &self.state
    }

    /// True when CLIENT appends must be refused: every state but STOPPED.
    pub fn read_only(&self) -> bool {
        self.state.kind != StateKind::Stopped
    }

    /// Handles one event; see the module docs.
    pub fn handle(&mut self, event: Event) -> Result<Vec<Action>, TransitionError> {
        let kind = self.state.kind;
        let stop_step = self.state.stop_step;
        let name = event.name();
        // A STOPPING step's completion must match the step in progress.
        let check_step = |expected: fn(StopStep) -> bool| match stop_step {
            Some(step) if expected(step) => Ok(()),
            _ => Err(TransitionError {
                state: kind,
                event: name,
            }),
        };
        if !transition_allowed(kind, event.name()) {
            return Err(TransitionError {
                state: kind,
                event: event.name(),
            });
        }
        let actions = match event {
            Event::Start { source_cluster_id } => {
                self.state = MirrorState {
                    kind: StateKind::Preparing,
                    source_cluster_id: Some(source_cluster_id),
                    stop_step: None,
                    failure: None,
                    last_mirrored_offset: self.state.last_mirrored_offset,
                };
                self.enter_actions()
            }
            Event::Aligned { from_offset } => {
                self.set_kind(StateKind::Mirroring);
                vec![
                    self.persist(),
                    Action::StartFetcher {
                        from_offset: Some(from_offset),
                    },
                ]
            }
            Event::Fetched {
                source_cluster_id,
                batches,
            } => {
                let expected = self.state.source_cluster_id.clone().unwrap_or_default();
                if source_cluster_id == expected {
                    vec![Action::AppendReplicated(batches)]
                } else {
                    let message = format!(
                        "source verification failed: the fetcher reports cluster {source_cluster_id:?}, this \
                         session mirrors {expected:?}; nothing appended"
                    );
                    self.fail(message, false)
                }
            }
            Event::Error { message, retryable } => {
                if kind == StateKind::Failed {
                    // A failed retry: count it and back off further.
                    self.fail_again(message, retryable)
                } else {
                    self.fail(message, retryable)
                }
            }
            Event::Pause => {
                self.set_kind(StateKind::Paused);
                vec![self.persist(), Action::StopFetcher]
            }
            Event::Resume => {
                self.set_kind(StateKind::Mirroring);
                vec![self.persist(), Action::StartFetcher { from_offset: None }]
            }
            Event::Stop => {
                // A STOPPING that failed part-way resumes at its step: the steps before it are done, and
                // starting over could cut the log again after the barrier.
                let resume_at = match (&self.state.failure, stop_step) {
                    (Some(failure), Some(step)) if failure.previous == StateKind::Stopping => step,
                    _ => StopStep::RemoveFetcher,
                };
                self.state.kind = StateKind::Stopping;
                self.state.stop_step = Some(resume_at);
                self.state.failure = None;
                self.enter_actions()
            }
            Event::Tick { now_ms } => {
                self.now_ms = self.now_ms.max(now_ms);
                match &self.state.failure {
                    Some(failure)
                        if kind == StateKind::Failed
                            && failure.retryable
                            && now_ms >= failure.retry_at_ms =>
                    {
                        let previous = failure.previous;
                        self.state.kind = match previous {
                            // Retrying alignment or mirroring starts over from alignment: the log may be
                            // anywhere after a failure.
                            StateKind::Preparing | StateKind::Mirroring => StateKind::Preparing,
                            other => other,
                        };
                        self.state.failure = None;
                        self.enter_actions()
                    }
                    _ => Vec::new(),
                }
            }
            Event::Truncated { offset } => {
                check_step(|step| step == StopStep::RemoveFetcher)?;
                self.state.stop_step = Some(StopStep::PersistOffset { offset });
                self.enter_actions()
            }
            Event::LastMirroredPersisted => {
                check_step(|step| matches!(step, StopStep::PersistOffset { .. }))?;
                let Some(StopStep::PersistOffset { offset }) = stop_step else {
                    return Ok(Vec::new());
                };
                self.state.last_mirrored_offset = Some(offset);
                self.state.stop_step = Some(StopStep::WriteBarrier { offset });
                self.enter_actions()
            }
            Event::BarrierWritten => {
                check_step(|step| matches!(step, StopStep::WriteBarrier { .. }))?;
                self.state.stop_step = Some(StopStep::ClearReadOnly);
                self.enter_actions()
            }
            Event::ReadOnlyCleared => {
                check_step(|step| step == StopStep::ClearReadOnly)?;
                self.state.stop_step = None;
                self.set_kind(StateKind::Stopped);
                vec![self.persist()]
            }
            Event::Recovered { state } => {
                self.state = state.unwrap_or_else(MirrorState::never_mirrored);
                self.resume_actions()
            }
        };
        Ok(actions)
    }

    fn set_kind(&mut self, kind: StateKind) {
        self.state.kind = kind;
        if kind != StateKind::Failed {
            self.state.failure = None;
        }
    }

    fn persist(&self) -> Action {
        Action::Persist(self.state.clone())
    }

    fn source(&self) -> String {
        self.state.source_cluster_id.clone().unwrap_or_default()
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
        if self.read_only() {
            // Whatever the state, a mirrored partition stays read-only until STOPPING clears it.
            if self.state.stop_step != Some(StopStep::ClearReadOnly) {
                actions.push(Action::SetReadOnly(true));
            }
        }
        match self.state.kind {
            StateKind::Mirroring => actions.push(Action::StartFetcher { from_offset: None }),
            _ => actions.extend(self.state_work()),
        }
        actions
    }

    fn state_work(&self) -> Vec<Action> {
        match (self.state.kind, self.state.stop_step) {
            (StateKind::Preparing, _) => vec![
                Action::SetReadOnly(true),
                Action::StopFetcher,
                Action::Align {
                    source_cluster_id: self.source(),
                },
            ],
            (StateKind::Stopping, Some(StopStep::RemoveFetcher)) => {
                vec![Action::StopFetcher, Action::TruncateToLso]
            }
            (StateKind::Stopping, Some(StopStep::PersistOffset { offset })) => {
                vec![Action::PersistLastMirrored {
                    source_cluster_id: self.source(),
                    offset,
                }]
            }
            (StateKind::Stopping, Some(StopStep::WriteBarrier { offset })) => vec![Action::WriteBarrier {
                source_cluster_id: self.source(),
                offset,
            }],
            (StateKind::Stopping, Some(StopStep::ClearReadOnly)) => vec![Action::SetReadOnly(false)],
            _ => Vec::new(),
        }
    }

    fn fail(&mut self, message: String, retryable: bool) -> Vec<Action> {
        let previous = self.state.kind;
        self.state.kind = StateKind::Failed;
        // A failed STOPPING keeps its step so a retry (or a new Stop) resumes there.
        if previous != StateKind::Stopping {
            self.state.stop_step = None;
        }
        self.state.failure = Some(Failure {
            message,
            retryable,
            attempts: 0,
            previous,
            retry_at_ms: self.now_ms.saturating_add(INITIAL_BACKOFF_MS),
        });
        vec![self.persist(), Action::StopFetcher]
    }

    fn fail_again(&mut self, message: String, retryable: bool) -> Vec<Action> {
        if let Some(failure) = &mut self.state.failure {
            failure.attempts = failure.attempts.saturating_add(1);
            let backoff = INITIAL_BACKOFF_MS
                .saturating_mul(1_i64 << failure.attempts.min(20))
                .min(MAX_BACKOFF_MS);
            failure.retry_at_ms = self.now_ms.saturating_add(backoff);
            failure.message = message;
            failure.retryable = failure.retryable && retryable;
        }
        vec![self.persist(), Action::StopFetcher]
    }
}
