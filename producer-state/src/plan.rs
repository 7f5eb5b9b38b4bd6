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

use crate::append::{AppendOrigin, ProducerAppendInfo, TransactionVersion};
use crate::entry::{BatchMetadata, CompletedTxn};
use crate::error::ProducerStateError;
use crate::manager::ProducerStateManager;
use crate::txn_index::AbortedTxn;

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
    phases: Phases,
    /// Barriers met that do not apply here (replicated back from another writer).
    barriers_kept: usize,
    next_offset: Option<i64>,
}

/// What [`ProducerStateManager::plan_append`] decided.
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

impl ProducerStateManager {
    /// Analyses an append of `batches` (kafka-semantics §7.1); see the module docs.
    pub fn plan_append<'a>(
        &self,
        batches: impl IntoIterator<Item = &'a RecordBatch>,
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
            if origin == AppendOrigin::Client {
                if batch.base_sequence() < 0 {
                    return Err(ProducerStateError::InvalidRecord {
                        reason: format!(
                            "batch of producer {producer_id} at offset {} has no sequence number",
                            batch.base_offset()
                        ),
                    });
                }
                if phases.before_any_barrier() {
                    if let Some(duplicate) = self.producer(producer_id).and_then(|entry| {
                        entry.find_duplicate_batch(
                            batch.producer_epoch(),
                            batch.base_sequence(),
                            batch.last_sequence(),
                        )
                    }) {
                        return Ok(AppendDecision::Duplicate(duplicate));
                    }
                }
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
            phases,
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
        for phase in plan.phases.into_iter() {
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
        if let Some(next_offset) = plan.next_offset {
            self.update_map_end_offset(next_offset);
        }
        effects
    }

    /// Plans and commits in one step (tools, tests): a duplicate is an answer, not an error.
    pub fn append_batches<'a>(
        &mut self,
        batches: impl IntoIterator<Item = &'a RecordBatch>,
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
}
