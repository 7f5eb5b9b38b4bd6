//! The log-level producer-state path for one append: analyse every batch first, commit only if all pass.
//!
//! [`ProducerStateManager::plan_append`] runs what Kafka's log runs before writing (kafka-semantics §7.1 steps 1 and 4):
//! structural rules by origin (no control batch from a client; a client batch with a producer id needs a
//! sequence), the CLIENT duplicate check against *stored* state, and per-producer validation accumulated across
//! the batches of the call. Nothing changes until [`ProducerStateManager::commit`], which merges the producers,
//! completes transactions (returning the aborted-transaction index entries, with Kafka's LSO) and advances the
//! map end offset.
//!
//! A `MIRROR_PID_RESET` barrier that applies (see [`crate::barrier`]) splits the plan into phases: batches after it
//! are validated against an empty state. If transactions are still open when the barrier applies, the barrier
//! aborts them at its own offset — they are completed as aborted and get index entries, so read_committed
//! consumers skip their data, on the leader, on followers and in recovery alike (ADR 0005).

use rustc_hash::FxHashMap;

use record_format::control::{types, ControlKey, ControlRecord};
use record_format::{MirrorPidResetRecord, RecordBatch};

use record_format::batch::NO_PRODUCER_EPOCH;

use crate::append::{in_sequence, AppendOrigin, ProducerAppendInfo};
use crate::entry::{BatchMetadata, CompletedTxn, ProducerStateEntry};
use crate::error::ProducerStateError;
use crate::manager::ProducerStateManager;
use crate::table::Slot;
use crate::txn_index::AbortedTxn;
use kafka_types::TransactionVersion;

/// Producer-state changes between two barriers.
#[derive(Debug, Clone, Default)]
struct Phase {
    /// One append info per producer, in order of first appearance (commit order does not change the result,
    /// but keeps it deterministic).
    infos: Vec<ProducerAppendInfo>,
    /// Position of each producer in `infos`, kept once a phase has more than a few producers.
    index: FxHashMap<i64, usize>,
    completed: Vec<CompletedTxn>,
    barrier: Option<BarrierReset>,
}

impl Phase {
    /// Below this many producers a linear search beats hashing (and allocates nothing).
    const LINEAR_SEARCH_MAX: usize = 8;

    fn info_mut(
        &mut self,
        producer_id: i64,
        create: impl FnOnce() -> ProducerAppendInfo,
    ) -> &mut ProducerAppendInfo {
        let position = if self.infos.len() <= Self::LINEAR_SEARCH_MAX {
            self.infos
                .iter()
                .position(|info| info.producer_id() == producer_id)
        } else {
            self.index.get(&producer_id).copied()
        };
        let position = match position {
            Some(position) => position,
            None => {
                self.infos.push(create());
                let position = self.infos.len() - 1;
                if self.infos.len() == Self::LINEAR_SEARCH_MAX + 1 {
                    self.index = self
                        .infos
                        .iter()
                        .enumerate()
                        .map(|(i, info)| (info.producer_id(), i))
                        .collect();
                } else if self.infos.len() > Self::LINEAR_SEARCH_MAX + 1 {
                    self.index.insert(producer_id, position);
                }
                position
            }
        };
        &mut self.infos[position]
    }
}

/// The phases of a plan: the first inline (an append without barriers allocates no phase list).
#[derive(Debug, Clone, Default)]
struct Phases {
    first: Phase,
    later: Vec<Phase>,
}

impl Phases {
    fn current(&mut self) -> &mut Phase {
        match self.later.last_mut() {
            Some(phase) => phase,
            None => &mut self.first,
        }
    }

    /// True before any barrier that applies: the stored state is still the starting point.
    fn before_any_barrier(&self) -> bool {
        self.later.is_empty()
    }

    fn current_ref(&self) -> &Phase {
        self.later.last().unwrap_or(&self.first)
    }

    fn into_iter(self) -> impl Iterator<Item = Phase> {
        std::iter::once(self.first).chain(self.later)
    }
}

/// What a producer's entry caches of `batch`.
fn cached_metadata(batch: &RecordBatch) -> BatchMetadata {
    BatchMetadata {
        last_seq: batch.last_sequence(),
        last_offset: batch.last_offset(),
        offset_delta: batch.last_offset_delta(),
        timestamp: batch.max_timestamp(),
    }
}

/// What a plan changes.
#[derive(Debug, Clone)]
enum Changes {
    /// One data batch that only adds itself to its producer's stored entry — the steady state of a producer:
    /// same epoch, in sequence, its transaction neither started nor left by this batch, no verification pending.
    /// Committing caches the batch (and its timestamp) in the entry; nothing else about the producer changes.
    ExtendEntry {
        /// Where the entry is in the producer table, so the commit need not look it up again.
        slot: Slot,
        producer_id: i64,
        epoch: i16,
        batch: BatchMetadata,
    },
    /// One data batch, the usual append: its producer's update (`None` without a producer id). No phase list,
    /// no per-producer index, no transaction completed (only markers complete one).
    /// Boxed, as is [`Phases`](Changes::Phases): a plan is moved from the planner to the commit, and the
    /// steady state's [`ExtendEntry`](Changes::ExtendEntry) should not pay for moving the size of the rarer
    /// variants (a producer's first batch or new epoch or transaction; markers, barriers, batch lists).
    OneDataBatch(Option<Box<ProducerAppendInfo>>),
    /// Several batches (a range a mirror copies), each a data batch that only extends its producer's stored
    /// entry as [`ExtendEntry`](Changes::ExtendEntry) does; batches without a producer id change nothing.
    ExtendEntries(Vec<EntryExtension>),
    /// Any other append, phase by phase.
    Phases(Box<Phases>),
}

/// One batch cached in its producer's stored entry, nothing else about the producer changed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryExtension {
    pub(crate) producer_id: i64,
    pub(crate) epoch: i16,
    pub(crate) batch: BatchMetadata,
}

/// A barrier that applies: where it is and which open transactions it aborts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BarrierReset {
    /// The barrier's offset.
    pub offset: i64,
    /// Transactions open at the barrier, aborted at its offset.
    pub aborted: Vec<CompletedTxn>,
}

/// A validated append, ready to commit.
#[derive(Debug, Clone)]
pub struct AppendPlan {
    changes: Changes,
    /// Barriers met that do not apply here (replicated back from another writer).
    barriers_kept: usize,
    next_offset: Option<i64>,
}

/// What [`ProducerStateManager::plan_append`] decided.
// The plan is built and consumed once per append, never stored: boxing all of it (one allocation per append) made
// `planned_appends` 11 % slower than moving it; only its rarer, larger variants are boxed (`Changes`).
#[derive(Debug, Clone)]
pub enum AppendDecision {
    /// A CLIENT batch repeats a cached one: answer with its offsets, write nothing.
    Duplicate(BatchMetadata),
    /// Every batch passed.
    Append(AppendPlan),
}

/// What [`ProducerStateManager::append_batches`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The batches were merged; what that changed.
    Appended(AppendEffects),
    /// A CLIENT batch repeats a cached one: nothing changed; answer with its offsets.
    Duplicate(BatchMetadata),
}

/// What a commit changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppendEffects {
    /// Transactions completed, in log order (markers, then those a barrier aborted).
    pub completed: Vec<CompletedTxn>,
    /// Index entries for the aborted ones, with the LSO Kafka writes.
    pub aborted_index: Vec<AbortedTxn>,
    /// Barriers that reset producer state.
    pub barriers_applied: Vec<BarrierReset>,
    /// Barriers that did not apply here.
    pub barriers_kept: usize,
}

/// The barrier value of a control batch of type `MIRROR_PID_RESET`, `None` for any other batch.
pub fn barrier_of(batch: &RecordBatch) -> Result<Option<MirrorPidResetRecord>, ProducerStateError> {
    if !batch.is_control() {
        return Ok(None);
    }
    let records = batch.records()?;
    let Some(first) = records.iter().next() else {
        return Ok(None);
    };
    let first = first?;
    if ControlKey::decode(first.key)?.control_type != types::MIRROR_PID_RESET {
        return Ok(None);
    }
    match ControlRecord::decode(first.key, first.value)? {
        ControlRecord::MirrorPidReset(barrier) => Ok(Some(barrier)),
        _ => Ok(None),
    }
}

/// Refuses a batch whose offsets cannot be followed: its last offset must be at or after its base offset and
/// below `i64::MAX` (every later offset, LSO and index entry is `last + 1`). Kafka's offsets never get near; a
/// crafted segment can.
pub fn check_offsets(batch: &RecordBatch) -> Result<(), ProducerStateError> {
    let (base, last) = (batch.base_offset(), batch.last_offset());
    if base < 0 || last < base || last == i64::MAX {
        return Err(ProducerStateError::InvalidRecord {
            reason: format!("batch offsets {base}..={last} are outside the offsets a log can hold"),
        });
    }
    Ok(())
}

/// [`ProducerStateManager::client_duplicate`] against `stored`, the producer's entry where the stored state
/// applies (`None` where it does not or there is none).
fn client_duplicate_in(
    batch: &RecordBatch,
    origin: AppendOrigin,
    stored: Option<&ProducerStateEntry>,
) -> Result<Option<BatchMetadata>, ProducerStateError> {
    if origin != AppendOrigin::Client {
        return Ok(None);
    }
    if batch.base_sequence() < 0 {
        return Err(ProducerStateError::InvalidRecord {
            reason: format!(
                "batch of producer {} at offset {} has no sequence number",
                batch.producer_id(),
                batch.base_offset()
            ),
        });
    }
    Ok(stored.and_then(|entry| {
        entry.find_duplicate_batch(
            batch.producer_epoch(),
            batch.base_sequence(),
            batch.last_sequence(),
        )
    }))
}

impl ProducerStateManager {
    /// Analyses an append of `batches` (kafka-semantics §7.1); see the module docs. The batches are walked more
    /// than once when a fast path hands over to the general one, so their iterator is cloned, never collected.
    pub fn plan_append<'a>(
        &self,
        batches: impl IntoIterator<Item = &'a RecordBatch, IntoIter: Clone>,
        origin: AppendOrigin,
        transaction_version: TransactionVersion,
    ) -> Result<AppendDecision, ProducerStateError> {
        let batches = batches.into_iter();
        let mut peek = batches.clone();
        match (peek.next(), peek.next()) {
            (Some(batch), None) if !batch.is_control() => {
                self.plan_one_data_batch(batch, origin, transaction_version)
            }
            (Some(_), Some(_)) if origin != AppendOrigin::Client => {
                self.plan_extending_range(batches, origin, transaction_version)
            }
            _ => self.plan_phases(batches, origin, transaction_version),
        }
    }

    /// [`plan_append`](Self::plan_append) for one data batch: the same rules as the general path (the shared
    /// [`client_duplicate`](Self::client_duplicate) and [`ProducerAppendInfo::append`]), without its phase
    /// machinery.
    fn plan_one_data_batch(
        &self,
        batch: &RecordBatch,
        origin: AppendOrigin,
        transaction_version: TransactionVersion,
    ) -> Result<AppendDecision, ProducerStateError> {
        check_offsets(batch)?;
        let plan = |changes| {
            Ok(AppendDecision::Append(AppendPlan {
                changes,
                barriers_kept: 0,
                next_offset: Some(batch.next_offset()),
            }))
        };
        if !batch.has_producer_id() {
            return plan(Changes::OneDataBatch(None));
        }
        let producer_id = batch.producer_id();
        // The producer's stored entry, looked up once for the duplicate check and the update.
        let found = self.producer_with_slot(producer_id);
        let stored = found.map(|(_, entry)| entry);
        if let Some(duplicate) = client_duplicate_in(batch, origin, stored)? {
            return Ok(AppendDecision::Duplicate(duplicate));
        }
        if let Some((slot, entry)) = found.filter(|(_, entry)| self.only_extends(entry, batch, origin)) {
            return plan(Changes::ExtendEntry {
                slot,
                producer_id,
                epoch: entry.producer_epoch,
                batch: cached_metadata(batch),
            });
        }
        self.plan_producer_update(batch, origin, transaction_version, stored)
    }

    /// [`plan_one_data_batch`](Self::plan_one_data_batch) for a batch that changes more of its producer than the
    /// cached batches (a new producer, epoch or transaction): the full append info. Kept out of line, so that the
    /// steady state's path stays small.
    #[inline(never)]
    fn plan_producer_update(
        &self,
        batch: &RecordBatch,
        origin: AppendOrigin,
        transaction_version: TransactionVersion,
        stored: Option<&ProducerStateEntry>,
    ) -> Result<AppendDecision, ProducerStateError> {
        let producer_id = batch.producer_id();
        let verification = self.verification_state(producer_id);
        let mut info = ProducerAppendInfo::new(producer_id, origin, stored, verification);
        info.append(batch, None, transaction_version)?;
        Ok(AppendDecision::Append(AppendPlan {
            changes: Changes::OneDataBatch(Some(Box::new(info))),
            barriers_kept: 0,
            next_offset: Some(batch.next_offset()),
        }))
    }

    /// [`plan_append`](Self::plan_append) for a range of REPLICATION (or coordinator) batches — a mirror's or a
    /// follower's fetch — in which every data batch only extends its producer's stored entry
    /// ([`only_extends`](Self::only_extends)): one lookup per batch, no append info per producer. The first batch
    /// that needs more (a control batch, a producer not stored or changing epoch or transaction, bad offsets) hands
    /// the whole range (walked again from its start: the iterator is cloned, nothing is collected) to the general
    /// path, which decides it as if this had not looked. Later batches of a
    /// producer see its entry as the earlier ones left it; only-extending changes none of what the rules read for
    /// these origins (the epoch, the open transaction, pending verification — sequences are CLIENT rules).
    fn plan_extending_range<'a>(
        &self,
        batches: impl Iterator<Item = &'a RecordBatch> + Clone,
        origin: AppendOrigin,
        transaction_version: TransactionVersion,
    ) -> Result<AppendDecision, ProducerStateError> {
        debug_assert!(
            origin != AppendOrigin::Client,
            "sequences would need checking in the range"
        );
        let mut extensions = Vec::with_capacity(batches.size_hint().0);
        let mut next_offset = None;
        for batch in batches.clone() {
            let extension = if batch.is_control() || check_offsets(batch).is_err() {
                None
            } else if !batch.has_producer_id() {
                next_offset = Some(batch.next_offset());
                continue;
            } else {
                self.producer(batch.producer_id())
                    .filter(|entry| self.only_extends(entry, batch, origin))
                    .map(|entry| EntryExtension {
                        producer_id: entry.producer_id,
                        epoch: entry.producer_epoch,
                        batch: cached_metadata(batch),
                    })
            };
            match extension {
                Some(extension) => {
                    extensions.push(extension);
                    next_offset = Some(batch.next_offset());
                }
                None => return self.plan_phases(batches, origin, transaction_version),
            }
        }
        Ok(AppendDecision::Append(AppendPlan {
            changes: Changes::ExtendEntries(extensions),
            barriers_kept: 0,
            next_offset,
        }))
    }

    /// Whether data `batch` passes every rule [`ProducerAppendInfo::append`] would apply against `entry` (its
    /// producer's stored state) and changes nothing but the cached batches and the last timestamp: the epoch is
    /// the stored one (no epoch rule fires, no cache is cleared), a CLIENT batch is in sequence, the batch is
    /// transactional exactly when a transaction is open (none starts, none is broken off), and no verification
    /// state is pending (its sequence rules are the general path's).
    fn only_extends(&self, entry: &ProducerStateEntry, batch: &RecordBatch, origin: AppendOrigin) -> bool {
        batch.producer_epoch() == entry.producer_epoch
            && entry.current_txn_first_offset.is_some() == batch.is_transactional()
            && (origin != AppendOrigin::Client
                || entry.producer_epoch == NO_PRODUCER_EPOCH
                || in_sequence(entry.last_seq(), batch.base_sequence()))
            && self.verification_state(entry.producer_id).is_none()
    }

    /// CLIENT rules for a data batch with a producer id: it needs a sequence, and one that repeats a batch of the
    /// producer's stored five is a duplicate (looked up only while the stored state applies: before any barrier
    /// of the append).
    fn client_duplicate(
        &self,
        batch: &RecordBatch,
        origin: AppendOrigin,
        stored_state_applies: bool,
    ) -> Result<Option<BatchMetadata>, ProducerStateError> {
        if origin != AppendOrigin::Client {
            return Ok(None);
        }
        let stored = if stored_state_applies {
            self.producer(batch.producer_id())
        } else {
            None
        };
        client_duplicate_in(batch, origin, stored)
    }

    /// [`plan_append`](Self::plan_append) for any append: batch by batch, a barrier that applies starting a new
    /// phase.
    fn plan_phases<'a>(
        &self,
        batches: impl Iterator<Item = &'a RecordBatch>,
        origin: AppendOrigin,
        transaction_version: TransactionVersion,
    ) -> Result<AppendDecision, ProducerStateError> {
        let mut phases = Phases::default();
        let mut barriers_kept = 0;
        let mut next_offset = None;
        for batch in batches {
            check_offsets(batch)?;
            next_offset = Some(batch.next_offset());
            if origin == AppendOrigin::Client && batch.is_control() {
                return Err(ProducerStateError::InvalidRecord {
                    reason: format!("control batch at offset {} from a client", batch.base_offset()),
                });
            }
            if let Some(barrier) = barrier_of(batch)? {
                if self.barrier_applies(&barrier) {
                    let aborted = self.open_transactions_at_barrier(&phases, batch.base_offset());
                    phases.current().barrier = Some(BarrierReset {
                        offset: batch.base_offset(),
                        aborted,
                    });
                    phases.later.push(Phase::default());
                } else {
                    barriers_kept += 1;
                }
                continue;
            }
            let producer_id = batch.producer_id();
            if !batch.has_producer_id() {
                continue;
            }
            if let Some(duplicate) = self.client_duplicate(batch, origin, phases.before_any_barrier())? {
                return Ok(AppendDecision::Duplicate(duplicate));
            }
            let first_phase = phases.before_any_barrier();
            let phase = phases.current();
            let info = phase.info_mut(producer_id, || {
                if first_phase {
                    self.prepare_update(producer_id, origin)
                } else {
                    // After a barrier the stored state is gone.
                    ProducerAppendInfo::new(producer_id, origin, None, None)
                }
            });
            if let Some(completed) = info.append(batch, None, transaction_version)? {
                phase.completed.push(completed);
            }
        }
        Ok(AppendDecision::Append(AppendPlan {
            changes: Changes::Phases(Box::new(phases)),
            barriers_kept,
            next_offset,
        }))
    }

    /// Transactions open at a barrier in the last phase of `phases`, ordered by first offset.
    fn open_transactions_at_barrier(&self, phases: &Phases, barrier_offset: i64) -> Vec<CompletedTxn> {
        let mut open: Vec<(i64, i64)> = if phases.before_any_barrier() {
            self.ongoing_transactions()
                .values()
                .map(|txn| (txn.first_offset.message_offset, txn.producer_id))
                .collect()
        } else {
            Vec::new()
        };
        let phase = phases.current_ref();
        for info in &phase.infos {
            open.extend(
                info.started_transactions()
                    .iter()
                    .map(|txn| (txn.first_offset.message_offset, txn.producer_id)),
            );
        }
        open.retain(|(first_offset, _)| !phase.completed.iter().any(|c| c.first_offset == *first_offset));
        open.sort_unstable();
        open.into_iter()
            .map(|(first_offset, producer_id)| CompletedTxn {
                producer_id,
                first_offset,
                last_offset: barrier_offset,
                is_aborted: true,
            })
            .collect()
    }

    /// Applies a plan: producers merged, transactions completed (index entries returned), barriers applied, map
    /// end offset advanced past the last batch.
    pub fn commit(&mut self, plan: AppendPlan) -> AppendEffects {
        let mut effects = AppendEffects {
            barriers_kept: plan.barriers_kept,
            ..AppendEffects::default()
        };
        match plan.changes {
            Changes::ExtendEntry {
                slot,
                producer_id,
                epoch,
                batch,
            } => self.extend_entry(slot, producer_id, epoch, batch),
            other => self.commit_changes(other, &mut effects),
        }
        if let Some(next_offset) = plan.next_offset {
            self.update_map_end_offset(next_offset);
        }
        effects
    }

    /// [`commit`](Self::commit) of the changes other than the steady state's; kept out of line, so that the
    /// steady state's path stays small.
    #[inline(never)]
    fn commit_changes(&mut self, changes: Changes, effects: &mut AppendEffects) {
        match changes {
            Changes::ExtendEntry {
                slot,
                producer_id,
                epoch,
                batch,
            } => self.extend_entry(slot, producer_id, epoch, batch),
            Changes::ExtendEntries(extensions) => self.extend_entries(extensions),
            Changes::OneDataBatch(Some(info)) => self.update(*info),
            Changes::OneDataBatch(None) => {}
            Changes::Phases(phases) => self.commit_phases(*phases, effects),
        }
    }

    fn commit_phases(&mut self, phases: Phases, effects: &mut AppendEffects) {
        for phase in phases.into_iter() {
            for info in phase.infos {
                self.update(info);
            }
            let barrier_aborts = phase.barrier.iter().flat_map(|barrier| barrier.aborted.iter());
            for completed in phase.completed.iter().chain(barrier_aborts) {
                effects
                    .aborted_index
                    .extend(self.complete_with_index_entry(completed));
                effects.completed.push(*completed);
            }
            if let Some(barrier) = phase.barrier {
                self.reset_producers();
                effects.barriers_applied.push(barrier);
            }
        }
    }

    /// Plans and commits in one step (tools, tests): a duplicate is an answer, not an error.
    pub fn append_batches<'a>(
        &mut self,
        batches: impl IntoIterator<Item = &'a RecordBatch, IntoIter: Clone>,
        origin: AppendOrigin,
        transaction_version: TransactionVersion,
    ) -> Result<Applied, ProducerStateError> {
        match self.plan_append(batches, origin, transaction_version)? {
            AppendDecision::Duplicate(duplicate) => Ok(Applied::Duplicate(duplicate)),
            AppendDecision::Append(plan) => Ok(Applied::Appended(self.commit(plan))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manager::PsmConfig;
    use record_format::BatchBuilder;

    fn batch(pid: i64, seq: i32, offset: i64) -> RecordBatch {
        let mut builder = BatchBuilder::new().base_offset(offset).producer(pid, 0, seq);
        builder.add(offset, None, Some(b"v"), &[]);
        builder.build().unwrap()
    }

    #[test]
    fn a_plan_is_small_enough_to_move_on_every_append() {
        // Moved from the planner to the commit on every append; the rare, large variants are boxed so that the
        // steady state moves a few words (over 200 bytes before, copied twice per client append by `memcpy`).
        assert!(
            std::mem::size_of::<AppendDecision>() <= 64,
            "{} bytes",
            std::mem::size_of::<AppendDecision>()
        );
    }

    #[test]
    fn one_call_with_many_producers_equals_one_call_per_batch() {
        // 20 producers, three rounds: past the linear-search limit, so the producer index is used.
        let batches: Vec<RecordBatch> = (0..60).map(|i| batch(i % 20, (i / 20) as i32, i)).collect();
        let mut together = ProducerStateManager::new(PsmConfig::default());
        let Ok(AppendDecision::Append(plan)) =
            together.plan_append(&batches, AppendOrigin::Client, TransactionVersion::Unknown)
        else {
            panic!("the batches are valid");
        };
        together.commit(plan);
        let mut one_by_one = ProducerStateManager::new(PsmConfig::default());
        for batch in &batches {
            one_by_one
                .append_batches([batch], AppendOrigin::Client, TransactionVersion::Unknown)
                .unwrap();
        }
        assert_eq!(together, one_by_one);
        assert_eq!(together.producer(7).unwrap().last_seq(), 2);
    }

    #[test]
    fn an_error_in_a_later_batch_leaves_the_state_untouched() {
        let mut psm = ProducerStateManager::new(PsmConfig::default());
        psm.append_batches(
            [&batch(1, 0, 0)],
            AppendOrigin::Client,
            TransactionVersion::Unknown,
        )
        .unwrap();
        let before = psm.clone();
        // Producer 1 is known now, so its sequences are checked (an unknown one would accept any).
        let batches = [batch(1, 1, 1), batch(2, 0, 2), batch(1, 5, 3)];
        let result = psm.append_batches(&batches, AppendOrigin::Client, TransactionVersion::Unknown);
        assert!(matches!(
            result,
            Err(ProducerStateError::OutOfOrderSequence { producer_id: 1, .. })
        ));
        assert_eq!(psm, before);
    }

    fn replicated_range(psm: &ProducerStateManager, batches: &[RecordBatch]) -> AppendPlan {
        match psm.plan_append(batches, AppendOrigin::Replication, TransactionVersion::Unknown) {
            Ok(AppendDecision::Append(plan)) => plan,
            other => panic!("a replicated range is appended, not {other:?}"),
        }
    }

    #[test]
    fn a_replicated_range_of_known_producers_only_extends_their_entries() {
        let mut psm = ProducerStateManager::new(PsmConfig::default());
        let known: Vec<RecordBatch> = (0..20).map(|i| batch(i, 0, i)).collect();
        psm.commit(replicated_range(&psm, &known));
        let range: Vec<RecordBatch> = (20..60).map(|i| batch(i % 20, (i / 20) as i32, i)).collect();
        let plan = replicated_range(&psm, &range);
        assert!(
            matches!(&plan.changes, Changes::ExtendEntries(e) if e.len() == 40),
            "{:?}",
            plan.changes
        );
        let mut general = psm.clone();
        let Ok(AppendDecision::Append(phases)) = general.plan_phases(
            range.iter(),
            AppendOrigin::Replication,
            TransactionVersion::Unknown,
        ) else {
            panic!("the general path appends the range too");
        };
        assert_eq!(psm.commit(plan), general.commit(phases));
        assert_eq!(psm, general);
        assert_eq!(psm.producer(7).unwrap().last_seq(), 2);
    }

    #[test]
    fn a_replicated_range_with_a_new_producer_takes_the_general_path() {
        let mut psm = ProducerStateManager::new(PsmConfig::default());
        psm.commit(replicated_range(&psm, &[batch(1, 0, 0), batch(1, 1, 1)]));
        let plan = replicated_range(&psm, &[batch(1, 2, 2), batch(2, 0, 3), batch(1, 3, 4)]);
        assert!(matches!(plan.changes, Changes::Phases(_)), "{:?}", plan.changes);
        psm.commit(plan);
        assert_eq!(psm.producer(1).unwrap().last_seq(), 3);
        assert_eq!(psm.producer(2).unwrap().last_seq(), 0);
    }

    /// Both plans decided alike (the same duplicate answer, the same error, or appends whose commits have the
    /// same effects), and the two managers are equal afterwards.
    fn same_outcome(
        fast: &mut ProducerStateManager,
        planned_fast: Result<AppendDecision, ProducerStateError>,
        general: &mut ProducerStateManager,
        planned_general: Result<AppendDecision, ProducerStateError>,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        match (planned_fast, planned_general) {
            (Ok(AppendDecision::Append(a)), Ok(AppendDecision::Append(b))) => {
                let effects = (fast.commit(a), general.commit(b));
                proptest::prop_assert_eq!(effects.0, effects.1);
            }
            (Ok(AppendDecision::Duplicate(a)), Ok(AppendDecision::Duplicate(b))) => {
                proptest::prop_assert_eq!(a, b)
            }
            (Err(a), Err(b)) => proptest::prop_assert_eq!(a, b),
            (a, b) => proptest::prop_assert!(false, "fast {a:?} but general {b:?}"),
        }
        proptest::prop_assert_eq!(&*fast, &*general);
        Ok(())
    }

    proptest::proptest! {
        /// The one-data-batch plan is the general plan without its containers: for any single-batch append (any
        /// origin, producer, epoch, sequence, transactional or not, with or without a producer id) against any
        /// state reached by earlier appends, both decide the same and commit to the same state — whether it
        /// only extends the producer's entry or goes through an append info.
        #[test]
        fn the_one_data_batch_plan_decides_and_commits_as_the_general_plan_does(
            appends in proptest::collection::vec(
                (0i64..4, -1i16..3, -1i32..8, proptest::bool::ANY, proptest::bool::ANY, 0u8..3),
                1..40,
            )
        ) {
            let mut fast = ProducerStateManager::new(PsmConfig::default());
            let mut general = fast.clone();
            for (offset, (pid, epoch, seq, transactional, client, records)) in appends.into_iter().enumerate() {
                let offset = offset as i64 * 3;
                let pid = if pid == 3 { -1 } else { pid };
                let mut builder = BatchBuilder::new()
                    .base_offset(offset)
                    .producer(pid, epoch, seq)
                    .transactional(transactional);
                for record in 0..=records {
                    builder.add(offset + i64::from(record), None, Some(b"v"), &[]);
                }
                let batch = builder.build().unwrap();
                let origin = if client { AppendOrigin::Client } else { AppendOrigin::Replication };
                let planned_fast = fast.plan_append([&batch], origin, TransactionVersion::V0);
                if let Ok(AppendDecision::Append(one)) = &planned_fast {
                    let one_batch_plan =
                        matches!(one.changes, Changes::OneDataBatch(_) | Changes::ExtendEntry { .. });
                    proptest::prop_assert!(one_batch_plan, "a one-batch plan, not {:?}", one.changes);
                }
                let planned_general = general.plan_phases([&batch].into_iter(), origin, TransactionVersion::V0);
                same_outcome(&mut fast, planned_fast, &mut general, planned_general)?;
            }
        }

        /// A range of batches planned by [`plan_append`](ProducerStateManager::plan_append) — which takes the
        /// only-extending path for a REPLICATION range whenever it can — decides and commits as the general path
        /// does: any ranges (one to six batches of any producer, epoch, sequence, transactional or not; CLIENT or
        /// REPLICATION), against any state reached by the ranges before.
        #[test]
        fn a_range_plan_decides_and_commits_as_the_general_plan_does(
            ranges in proptest::collection::vec(
                (
                    proptest::collection::vec(
                        (0i64..4, 0i16..2, -1i32..8, proptest::bool::weighted(0.2), 0u8..3),
                        1..6,
                    ),
                    proptest::bool::weighted(0.3),
                ),
                1..30,
            )
        ) {
            let mut fast = ProducerStateManager::new(PsmConfig::default());
            let mut general = fast.clone();
            let mut offset = 0i64;
            for (range, client) in ranges {
                let batches: Vec<RecordBatch> = range
                    .into_iter()
                    .map(|(pid, epoch, seq, transactional, records)| {
                        let pid = if pid == 3 { -1 } else { pid };
                        let mut builder = BatchBuilder::new()
                            .base_offset(offset)
                            .producer(pid, epoch, seq)
                            .transactional(transactional);
                        for _ in 0..=records {
                            builder.add(offset, None, Some(b"v"), &[]);
                            offset += 1;
                        }
                        builder.build().unwrap()
                    })
                    .collect();
                let origin = if client { AppendOrigin::Client } else { AppendOrigin::Replication };
                let planned_fast = fast.plan_append(&batches, origin, TransactionVersion::V0);
                let planned_general = general.plan_phases(batches.iter(), origin, TransactionVersion::V0);
                same_outcome(&mut fast, planned_fast, &mut general, planned_general)?;
            }
        }
    }
}
