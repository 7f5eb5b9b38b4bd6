//! Runs the machine's actions against a [`PartitionLog`] and a [`Fetcher`].
//!
//! The driver owns no log and no fetcher: the caller passes them to every call, so a test (or the simulator)
//! can hold many clusters' logs and let one cluster's fetcher read another's. It decides nothing: actions run in
//! order, and an action that reports back (the peer's position, the STOPPING steps) feeds its event to the
//! machine, whose actions run next.
//!
//! One error channel: every action failure becomes an event for the machine — [`Event::Error`] for the source
//! (its own retry verdict), [`Event::LogFailed`] for the local log (the machine classifies it) — which records
//! FAILED and decides whether to retry. `handle` then returns `Ok` when the failure was the source's or a batch
//! the log refused (the partition is FAILED, as the machine decided), and `Err` when the local log's storage
//! failed (the caller must know its log may be unusable; FAILED was recorded if storage still allowed it).
//!
//! Metadata records (in the partition's storage, next to the log's own): `mirror.state` (the machine's state,
//! JSON) and `mirror.lmo.<source cluster id>` (the last mirrored offset, 8 bytes big-endian).

use std::collections::VecDeque;

use partition_log::{LogError, PartitionLog};
use producer_state::{AppendOrigin, TransactionVersion};
use record_format::control::{mirror_pid_reset_batch, ControlBatchPlacement};
use record_format::MirrorPidResetRecord;

use crate::ahead::{Ahead, AheadThread, FETCH_AHEAD_BYTES};
use crate::error::DriverError;
use crate::fetcher::Fetcher;
use crate::machine::{Action, Event, LogFailure, MirrorPartition, MirrorState, StateKind};
use crate::resume;
use crate::stopping::{self, StableCut, StoppingDeparture, StoppingTail};

/// The metadata key of the machine's state.
pub const STATE_KEY: &str = "mirror.state";

/// The metadata key of the last mirrored offset from `source_cluster_id`.
pub fn last_mirrored_key(source_cluster_id: &str) -> String {
    format!("mirror.lmo.{source_cluster_id}")
}

/// Reads the last mirrored offset this partition recorded for `source_cluster_id`.
pub async fn last_mirrored_offset(
    log: &PartitionLog,
    source_cluster_id: &str,
) -> Result<Option<i64>, DriverError> {
    let key = last_mirrored_key(source_cluster_id);
    match log.metadata(&key).await? {
        None => Ok(None),
        Some(bytes) => {
            let raw: [u8; 8] = bytes
                .as_slice()
                .try_into()
                .map_err(|_| DriverError::CorruptRecord {
                    key,
                    reason: format!("expected 8 bytes, found {}", bytes.len()),
                })?;
            Ok(Some(i64::from_be_bytes(raw)))
        }
    }
}

/// Bytes fetched per round.
pub const FETCH_BYTES: usize = 1 << 20;

/// A fetch on the caller's thread, CRCs checked, as the machine's event.
async fn fetch_here(fetcher: &mut dyn Fetcher, from_offset: i64) -> Event {
    match fetcher.fetch(from_offset, FETCH_BYTES).await {
        Ok(response) => crate::ahead::checked(response),
        Err(error) => Event::Error {
            message: error.message,
            retryable: error.retryable,
            code: error.code,
        },
    }
}

/// One partition's driver; see the module docs.
#[derive(Debug)]
pub struct MirrorDriver {
    machine: MirrorPartition,
    local_cluster_id: String,
    fetcher_running: bool,
    now_ms: i64,
    /// A test fault: a pause after each STOPPING action, so a test can kill the process in the middle of one.
    stopping_pause: Option<std::time::Duration>,
    /// A deliberate bug (the simulator's oracle must catch it): a resumed session aligns again as a new one.
    realign_on_retry: bool,
    /// The simulator's STOPPING with one rule left out ([`Self::depart_from_stopping`]).
    stopping_departure: Option<StoppingDeparture>,
    /// The log end when this process last ran the cut (for [`StoppingDeparture::LastMirroredBeforeTheCut`]).
    end_before_the_cut: Option<i64>,
}

/// Deliberate faults a driver runs with from its recovery on, for tests and the simulator only (`serve` recovers
/// with the default: none). Each has the setter of the same name for a driver already running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverFaults {
    /// [`MirrorDriver::pause_between_stopping_steps`].
    pub stopping_pause: Option<std::time::Duration>,
    /// [`MirrorDriver::realign_on_retry`].
    pub realign_on_retry: bool,
    /// [`MirrorDriver::depart_from_stopping`].
    pub stopping_departure: Option<StoppingDeparture>,
}

impl MirrorDriver {
    /// Restores the driver of `log`'s partition from its persisted state (a partition never mirrored is
    /// STOPPED, i.e. writable) and resumes whatever the state was doing (a STOPPING step, the fetcher).
    pub async fn recover(
        log: &mut PartitionLog,
        fetcher: &mut dyn Fetcher,
        local_cluster_id: impl Into<String>,
    ) -> Result<Self, DriverError> {
        Self::recover_with_faults(log, fetcher, local_cluster_id, DriverFaults::default()).await
    }

    /// [`Self::recover`] with `faults` in force from the start, so that what the recovery resumes (a STOPPING
    /// interrupted by a crash, a session's position check) runs with them too. Never used outside tests and
    /// the simulator.
    #[doc(hidden)]
    pub async fn recover_with_faults(
        log: &mut PartitionLog,
        fetcher: &mut dyn Fetcher,
        local_cluster_id: impl Into<String>,
        faults: DriverFaults,
    ) -> Result<Self, DriverError> {
        let state = match log.metadata(STATE_KEY).await? {
            None => None,
            Some(bytes) => Some(serde_json::from_slice::<MirrorState>(&bytes).map_err(|error| {
                DriverError::CorruptRecord {
                    key: STATE_KEY.to_owned(),
                    reason: error.to_string(),
                }
            })?),
        };
        let mut driver = MirrorDriver {
            machine: MirrorPartition::new(MirrorState::never_mirrored()),
            local_cluster_id: local_cluster_id.into(),
            fetcher_running: false,
            now_ms: 0,
            stopping_pause: faults.stopping_pause,
            realign_on_retry: faults.realign_on_retry,
            stopping_departure: faults.stopping_departure,
            end_before_the_cut: None,
        };
        driver.handle(log, fetcher, Event::Recovered { state }).await?;
        Ok(driver)
    }

    /// The machine's state.
    pub fn state(&self) -> &MirrorState {
        self.machine.state()
    }

    /// True while the fetcher runs.
    pub fn fetching(&self) -> bool {
        self.fetcher_running
    }

    /// Test fault: pause this long after each action of a STOPPING sequence (the process-level crash tests
    /// kill a destination in the middle of one). Never set outside tests.
    #[doc(hidden)]
    pub fn pause_between_stopping_steps(&mut self, pause: Option<std::time::Duration>) {
        self.stopping_pause = pause;
    }

    /// Deliberate bug, for the simulator's mutant only: a session that resumes after a transient error asks the
    /// peer where to start as a new session does, and a peer with no answer (Apache Kafka, which never mirrored
    /// from us) counts as "start over" — the log is emptied and copied again (what the retry did before ADR
    /// 0046). Never set outside the simulator's mutant runs.
    #[doc(hidden)]
    pub fn realign_on_retry(&mut self, realign: bool) {
        self.realign_on_retry = realign;
    }

    /// For the simulator only: this partition's next STOPPING leaves out one of its rules (`None`: all of them
    /// kept, as `serve` always does); [`Self::recover_with_faults`] sets it for what a recovery resumes. A
    /// `LastMirroredBeforeTheCut` STOPPING resumed after a crash past its cut records the cut: the log end before
    /// it is not kept. Never set outside the simulator.
    #[doc(hidden)]
    pub fn depart_from_stopping(&mut self, departure: Option<StoppingDeparture>) {
        self.stopping_departure = departure;
    }

    /// Caps the wait between this partition's retries (a link's `mirror.retry.backoff.max.ms`); see
    /// [`MirrorPartition::set_max_backoff_ms`].
    pub fn set_max_backoff_ms(&mut self, max_ms: i64, now_ms: i64) {
        self.machine.set_max_backoff_ms(max_ms, now_ms);
    }

    /// Retries a FAILED partition at the next tick, even after a final failure; see
    /// [`MirrorPartition::retry_now`].
    pub fn retry_now(&mut self, now_ms: i64) -> bool {
        self.machine.retry_now(now_ms)
    }

    /// Handles an event and every event its actions report back.
    pub async fn handle(
        &mut self,
        log: &mut PartitionLog,
        fetcher: &mut dyn Fetcher,
        event: Event,
    ) -> Result<(), DriverError> {
        if let Event::Tick { now_ms } = event {
            self.now_ms = self.now_ms.max(now_ms);
        }
        let mut events = VecDeque::from([event]);
        while let Some(event) = events.pop_front() {
            let actions = self.machine.handle(event)?;
            for action in actions {
                let ran = self.run(log, fetcher, action).await;
                if let Some(pause) = self
                    .stopping_pause
                    .filter(|_| self.machine.state().kind() == StateKind::Stopping)
                {
                    tokio::time::sleep(pause).await;
                }
                match ran {
                    Ok(Some(next)) => events.push_back(next),
                    Ok(None) => {}
                    Err(Failed::Report(event)) => {
                        // The machine decides what the failure means (FAILED, retry or not).
                        events.clear();
                        events.push_back(event);
                        break;
                    }
                    Err(Failed::Storage(error)) => {
                        let failure = Event::LogFailed {
                            failure: LogFailure::Storage,
                            message: error.to_string(),
                        };
                        if let Ok(actions) = self.machine.handle(failure) {
                            for action in actions {
                                // Best effort: the storage may be what failed.
                                if self.run(log, fetcher, action).await.is_err() {
                                    break;
                                }
                            }
                        }
                        return Err(error.into());
                    }
                }
            }
        }
        Ok(())
    }

    /// One fetch round while mirroring: fetch from the log end, check the batches' CRCs and append what came (or
    /// fail). Returns the number of batches appended.
    pub async fn fetch_once(
        &mut self,
        log: &mut PartitionLog,
        fetcher: &mut dyn Fetcher,
    ) -> Result<usize, DriverError> {
        if !self.fetcher_running {
            return Ok(0);
        }
        let event = fetch_here(fetcher, log.log_end_offset()).await;
        self.append_fetched(log, fetcher, event).await
    }

    /// Applies a fetch made elsewhere — one partition's answer to a multi-partition request
    /// ([`crate::Sources::fetch_many`]) — as [`Self::fetch_once`] applies its own: CRCs checked, batches appended
    /// or the failure handed to the machine. `from_offset` is where the fetch started; an answer for another
    /// offset than the log end (the log moved since) is dropped. Returns the number of batches appended.
    pub async fn apply_fetch(
        &mut self,
        log: &mut PartitionLog,
        fetcher: &mut dyn Fetcher,
        from_offset: i64,
        fetched: Result<crate::fetcher::FetchResponse, crate::fetcher::FetchError>,
    ) -> Result<usize, DriverError> {
        if !self.fetcher_running || from_offset != log.log_end_offset() {
            return Ok(0);
        }
        let event = match fetched {
            Ok(response) => crate::ahead::checked(response),
            Err(error) => Event::Error {
                message: error.message,
                retryable: error.retryable,
                code: error.code,
            },
        };
        self.append_fetched(log, fetcher, event).await
    }

    /// Fetches until a round brings nothing (caught up) or the machine leaves MIRRORING. With a backlog, each
    /// range is fetched and CRC-checked while the one before it is written ([`crate::ahead`]).
    pub async fn catch_up(
        &mut self,
        log: &mut PartitionLog,
        fetcher: &mut dyn Fetcher,
    ) -> Result<(), DriverError> {
        let mut ahead: Option<Ahead> = None;
        let mut thread = AheadThread::default();
        while self.machine.state().kind() == StateKind::Mirroring && self.fetcher_running {
            let from_offset = log.log_end_offset();
            let event = match ahead.take() {
                Some(fetched) if fetched.starts_at() == from_offset => match fetched.into_event().await {
                    Some(event) => event,
                    None => fetch_here(fetcher, from_offset).await,
                },
                _ => fetch_here(fetcher, from_offset).await,
            };
            if let Event::Fetched {
                batches: Ok(batches), ..
            } = &event
            {
                if let Some(last) = batches
                    .as_slice()
                    .last()
                    .filter(|_| batches.size() >= FETCH_AHEAD_BYTES)
                {
                    ahead = Ahead::start(fetcher, last.next_offset(), &mut thread).await;
                }
            }
            if self.append_fetched(log, fetcher, event).await? == 0 {
                break;
            }
        }
        Ok(())
    }

    /// Runs a fetch's event; the number of batches appended (0 when the log end did not move).
    async fn append_fetched(
        &mut self,
        log: &mut PartitionLog,
        fetcher: &mut dyn Fetcher,
        event: Event,
    ) -> Result<usize, DriverError> {
        let count = match &event {
            Event::Fetched {
                batches: Ok(batches), ..
            } => batches.len(),
            _ => 0,
        };
        let before = log.log_end_offset();
        self.handle(log, fetcher, event).await?;
        Ok(if log.log_end_offset() > before { count } else { 0 })
    }

    async fn run(
        &mut self,
        log: &mut PartitionLog,
        fetcher: &mut dyn Fetcher,
        action: Action,
    ) -> Result<Option<Event>, Failed> {
        match action {
            Action::Persist(state) => {
                let json = serde_json::to_vec(&state).map_err(|error| {
                    Failed::Report(Event::LogFailed {
                        failure: LogFailure::Refused,
                        message: format!("cannot encode the mirror state: {error}"),
                    })
                })?;
                log.put_metadata(STATE_KEY, &json).await?;
                Ok(None)
            }
            Action::SetReadOnly(read_only) => {
                log.set_read_only(read_only).await?;
                Ok((!read_only && self.machine.state().kind() == StateKind::Stopping)
                    .then_some(Event::ReadOnlyCleared))
            }
            Action::QueryPeer => {
                let source_cluster_id = fetcher.cluster_id().await.map_err(Failed::from_fetch)?;
                let local = self.local_cluster_id.clone();
                let last_mirrored_offset = fetcher
                    .last_mirrored_offset(&local)
                    .await
                    .map_err(Failed::from_fetch)?;
                let log_start_offset = fetcher.log_start_offset().await.map_err(Failed::from_fetch)?;
                Ok(Some(Event::PeerPosition {
                    source_cluster_id,
                    last_mirrored_offset,
                    log_start_offset,
                    local_log_end: log.log_end_offset(),
                }))
            }
            Action::CheckPosition if self.realign_on_retry => {
                realign_as_a_new_session(log, fetcher, &self.local_cluster_id)
                    .await
                    .map(Some)
            }
            Action::CheckPosition => check_position(log, fetcher).await.map(Some),
            Action::TruncateTo { offset } => {
                log.truncate_to(offset, self.now_ms).await?;
                Ok(None)
            }
            Action::TruncateFullyAndStartAt { offset } => {
                log.truncate_fully_and_start_at(offset).await?;
                Ok(None)
            }
            Action::StartFetcher => {
                self.fetcher_running = true;
                Ok(None)
            }
            Action::StopFetcher => {
                self.fetcher_running = false;
                Ok(None)
            }
            Action::AppendReplicated(batches) => {
                if let Some(refused) = align_with_a_straddling_batch(log, batches.as_slice()).await? {
                    return Err(Failed::Report(refused));
                }
                append_replicated(log, batches).await
            }
            Action::AdvanceHighWatermark => {
                let end = log.log_end_offset();
                log.advance_high_watermark(end);
                Ok(None)
            }
            Action::TruncateToStableCut => {
                // The stable cut, not the LSO itself: a cut at the LSO can remove the marker of a transaction
                // whose records lie below it, taking back what readers were already served (ADR 0045). What stays
                // open above the LSO is aborted by markers before the barrier.
                let end = log.log_end_offset();
                self.end_before_the_cut = Some(end);
                let cut = match self.stopping_departure {
                    Some(StoppingDeparture::NoStableCut | StoppingDeparture::NoBarrier) => end,
                    _ => stable_cut(log).await?,
                };
                if cut < end {
                    log.truncate_to(cut, self.now_ms).await?;
                }
                Ok(Some(Event::Truncated {
                    offset: log.log_end_offset(),
                }))
            }
            Action::PersistLastMirrored {
                source_cluster_id,
                offset,
            } => {
                let offset = match (self.stopping_departure, self.end_before_the_cut) {
                    (Some(StoppingDeparture::LastMirroredBeforeTheCut), Some(end)) => end,
                    _ => offset,
                };
                log.put_metadata(&last_mirrored_key(&source_cluster_id), &offset.to_be_bytes())
                    .await?;
                Ok(Some(Event::LastMirroredPersisted))
            }
            Action::InspectLogTail { offset } => {
                let tail = stopping_tail(log, offset, &self.local_cluster_id).await?;
                Ok(Some(tail.event(offset, log.log_end_offset())))
            }
            Action::AppendBarrier {
                source_cluster_id, ..
            } => {
                if self.stopping_departure != Some(StoppingDeparture::NoBarrier) {
                    self.append_barrier(log, &source_cluster_id).await?;
                }
                Ok(None)
            }
            Action::SyncLog => {
                log.flush(storage::Durability::Sync).await?;
                Ok(Some(Event::Synced))
            }
        }
    }

    /// Appends one ABORT marker for each transaction still open, then this cluster's barrier, at the log end
    /// (the last mirrored offset, or after the markers of an attempt that crashed before its barrier: the machine
    /// checked through [`stopping::read_tail`]).
    async fn append_barrier(&mut self, log: &mut PartitionLog, source: &str) -> Result<(), Failed> {
        let encode_failed = |what: &str, error: record_format::EncodeError| {
            Failed::Report(Event::LogFailed {
                failure: LogFailure::Refused,
                message: format!("cannot encode {what}: {error}"),
            })
        };
        let placement = ControlBatchPlacement {
            base_offset: log.log_end_offset(),
            partition_leader_epoch: log.config().leader_epoch,
            timestamp: self.now_ms,
        };
        let mut batches = stopping::abort_markers(log.producer_state(), placement)
            .map_err(|error| encode_failed("an ABORT marker", error))?;
        let barrier = MirrorPidResetRecord::new(source, Some(self.local_cluster_id.clone()));
        let placement = ControlBatchPlacement {
            base_offset: placement.base_offset + batches.len() as i64,
            ..placement
        };
        batches.push(
            mirror_pid_reset_batch(&barrier, placement)
                .map_err(|error| encode_failed("the barrier", error))?,
        );
        log.append_as_leader(batches, AppendOrigin::Coordinator, TransactionVersion::V0)
            .await?;
        Ok(())
    }
}

/// Compares `log` with the source's log for a session that resumes ([`crate::resume`]): its last batch first, and
/// when that differs, a bisection for the first batch the source does not hold. Every comparison reads one batch
/// of each side. A source that serves nothing below our log end yet is a retryable failure, never evidence.
async fn check_position(log: &PartitionLog, fetcher: &mut dyn Fetcher) -> Result<Event, Failed> {
    let source_cluster_id = fetcher.cluster_id().await.map_err(Failed::from_fetch)?;
    let source_log_start = fetcher.log_start_offset().await.map_err(Failed::from_fetch)?;
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    let checked = |first_difference| Event::PositionChecked {
        source_cluster_id: source_cluster_id.clone(),
        source_log_start,
        local_log_end: end,
        first_difference,
    };
    // Nothing of ours the source could still hold: nothing to compare (the machine handles a start past our end).
    if end <= start || source_log_start >= end {
        return Ok(checked(None));
    }
    let Some(last) = batch_holding(log, end - 1).await? else {
        return Ok(checked(None));
    };
    let source = (source_cluster_id.as_str(), source_log_start);
    if probe(fetcher, &last, source).await? == resume::Probe::Agrees {
        return Ok(checked(None));
    }
    let mut search = resume::Divergence::new(start.max(source_log_start), last.base_offset());
    while let Some(offset) = search.probe() {
        let Some(ours) = batch_holding(log, offset).await? else {
            break;
        };
        let agrees = probe(fetcher, &ours, source).await? == resume::Probe::Agrees;
        search.record(ours.base_offset(), ours.last_offset(), agrees);
    }
    Ok(checked(Some(search.offset())))
}

/// The retry of [`MirrorDriver::realign_on_retry`]'s deliberate bug: the peer's last mirrored offset (no answer:
/// "never mirrored from us", so everything goes) taken as the first difference.
async fn realign_as_a_new_session(
    log: &PartitionLog,
    fetcher: &mut dyn Fetcher,
    local_cluster_id: &str,
) -> Result<Event, Failed> {
    let source_cluster_id = fetcher.cluster_id().await.map_err(Failed::from_fetch)?;
    let peer = fetcher
        .last_mirrored_offset(local_cluster_id)
        .await
        .map_err(Failed::from_fetch)?;
    let source_log_start = fetcher.log_start_offset().await.map_err(Failed::from_fetch)?;
    Ok(Event::PositionChecked {
        source_cluster_id,
        source_log_start,
        local_log_end: log.log_end_offset(),
        first_difference: Some(peer.unwrap_or(log.log_start_offset())),
    })
}

/// Our batch holding `offset`.
async fn batch_holding(
    log: &PartitionLog,
    offset: i64,
) -> Result<Option<record_format::RecordBatch>, Failed> {
    Ok(log.read_for_replica(offset, 1).await?.into_iter().next())
}

/// Fetches the source's batch at `ours`'s base offset and compares them; an empty answer fails the check
/// (retryably), an answer that the source holds no such offset above its log start is a difference. `source` is
/// the cluster id the check began with (an answer from another cluster is refused) and its log start.
async fn probe(
    fetcher: &mut dyn Fetcher,
    ours: &record_format::RecordBatch,
    (source_cluster_id, source_log_start): (&str, i64),
) -> Result<resume::Probe, Failed> {
    let at = ours.base_offset();
    let answer = match fetcher.fetch(at.max(source_log_start), 1).await {
        Ok(answer) => answer,
        Err(error) if error.offset_out_of_range && at >= source_log_start => {
            return Ok(resume::Probe::Differs)
        }
        Err(error) => return Err(Failed::from_fetch(error)),
    };
    if answer.source_cluster_id != source_cluster_id {
        return Err(Failed::Report(Event::Error {
            message: format!(
                "source verification failed while resuming: cluster {:?} answered, {source_cluster_id:?} was asked \
                 (nothing truncated)",
                answer.source_cluster_id
            ),
            retryable: false,
            code: None,
        }));
    }
    match resume::compare(ours, &answer.batches) {
        resume::Probe::Unknown => {
            // Nothing served from `at`: the source's log may end there (a fetch at the log end is empty) or its
            // high watermark may lag. Past our batch's end it answers which: OFFSET_OUT_OF_RANGE there means its
            // log ends inside our batch.
            match fetcher.fetch(ours.last_offset().saturating_add(1), 1).await {
                Err(error) if error.offset_out_of_range => Ok(resume::Probe::Differs),
                Err(error) => Err(Failed::from_fetch(error)),
                Ok(_) => Err(Failed::Report(Event::Error {
                    message: format!(
                        "resuming: the source serves nothing at offset {at} yet, below this mirror's log end; \
                         waiting for it (nothing truncated)"
                    ),
                    retryable: true,
                    code: None,
                })),
            }
        }
        found => Ok(found),
    }
}

/// The log's stable cut ([`StableCut`]): its batches from the LSO to the log end, read in bounded pieces.
async fn stable_cut(log: &PartitionLog) -> Result<i64, LogError> {
    let lso = log.last_stable_offset();
    let mut cut = StableCut::from_lso(lso);
    let mut pieces = TailPieces::from(lso);
    while let Some(batches) = pieces.next(log).await? {
        batches.iter().for_each(|batch| cut.observe(batch));
    }
    Ok(cut.offset())
}

/// What lies between `offset` (the last mirrored offset) and the log end; see [`StoppingTail`].
async fn stopping_tail(
    log: &PartitionLog,
    offset: i64,
    local_cluster_id: &str,
) -> Result<StoppingTail, LogError> {
    let mut pieces = TailPieces::from(offset);
    while let Some(batches) = pieces.next(log).await? {
        match stopping::read_tail(&batches, local_cluster_id) {
            StoppingTail::Unfinished => continue,
            found => return Ok(found),
        }
    }
    Ok(StoppingTail::Unfinished)
}

/// A log's batches from an offset to its end, read in pieces of at most [`TailPieces::BYTES`].
struct TailPieces {
    next: i64,
}

impl TailPieces {
    const BYTES: usize = 1 << 20;

    fn from(offset: i64) -> Self {
        TailPieces { next: offset }
    }

    /// The next piece (`None` at the log end).
    async fn next(
        &mut self,
        log: &PartitionLog,
    ) -> Result<Option<Vec<record_format::RecordBatch>>, LogError> {
        if self.next >= log.log_end_offset() {
            return Ok(None);
        }
        let batches = log.read_for_replica(self.next, Self::BYTES).await?;
        let Some(last) = batches.last() else {
            return Ok(None);
        };
        self.next = last.next_offset();
        Ok(Some(batches))
    }
}

/// Appends mirrored batches as the source stored them.
async fn append_replicated(
    log: &mut PartitionLog,
    batches: record_format::CrcCheckedBatches,
) -> Result<Option<Event>, Failed> {
    match log.append_checked_as_follower(batches).await {
        Ok(_) => Ok(None),
        // The bytes themselves are refused (corrupt, or producer state rejects them); offsets that do not
        // follow are a storage error: a retry re-aligns first.
        Err(error @ (LogError::CorruptBatch { .. } | LogError::ProducerState(_))) => {
            Err(Failed::Report(Event::LogFailed {
                failure: LogFailure::Refused,
                message: format!("a mirrored batch was refused: {error}"),
            }))
        }
        Err(error) => Err(error.into()),
    }
}

/// A fetch that started inside a batch — the source's log start lies inside one (after DeleteRecords or
/// retention) — answers with that whole batch. An empty log then starts again at the batch's base offset, as
/// Kafka's follower does (`truncateFullyAndStartAt` on an unexpected append offset); a log that holds records
/// refuses it (the logs diverged), as an event for the machine.
async fn align_with_a_straddling_batch(
    log: &mut PartitionLog,
    batches: &[record_format::RecordBatch],
) -> Result<Option<Event>, LogError> {
    let end = log.log_end_offset();
    let Some(first) = batches.first().filter(|first| first.base_offset() < end) else {
        return Ok(None);
    };
    if log.log_start_offset() == end && first.last_offset() >= end {
        log.truncate_fully_and_start_at(first.base_offset()).await?;
        return Ok(None);
    }
    Ok(Some(Event::LogFailed {
        failure: LogFailure::Refused,
        message: format!(
            "the source's batch {}..={} starts before the log end {end}: the logs diverged",
            first.base_offset(),
            first.last_offset()
        ),
    }))
}

/// Why an action did not complete: always an event for the machine; storage failures are also returned.
enum Failed {
    /// A failure the machine handles alone (the source's errors, refused batches).
    Report(Event),
    /// The local log's storage failed: the machine records it and the caller gets the error.
    Storage(LogError),
}

impl Failed {
    fn from_fetch(error: crate::fetcher::FetchError) -> Self {
        Failed::Report(Event::Error {
            message: error.message,
            retryable: error.retryable,
            code: error.code,
        })
    }
}

impl From<LogError> for Failed {
    fn from(error: LogError) -> Self {
        Failed::Storage(error)
    }
}
