//! The one replay: batches fed to a manager with REPLICATION origin, one at a time, as Kafka's log recovery does.
//!
//! [`ProducerStateManager::replay_batches`] is the step every rebuild takes — `PartitionLog` recovery and
//! truncation, `mirrorlog replay` — so they cannot disagree. It streams: the caller reads a chunk of batches
//! from wherever they are and hands it over; nothing is collected but the aborted-transaction index entries the
//! replay produces. A chunk goes through the log-level plan with REPLICATION origin (one lookup per producer per
//! chunk, not per batch); if the plan refuses the chunk, the batches are replayed one by one
//! ([`ProducerStateManager::replay_batch`]) up to the refused one, so the error names its offset and the state
//! holds everything before it. [`replay`] is the convenience loop over an iterator.
//!
//! A batch without a producer id only moves the map end offset; a data or marker batch is validated and merged
//! directly (Kafka's `loadProducersFromRecords`); a `MIRROR_PID_RESET` barrier goes through the full append plan,
//! so it is decided by the same rule as a live append.

use record_format::RecordBatch;

use crate::append::AppendOrigin;
use crate::error::ProducerStateError;
use crate::manager::ProducerStateManager;
use crate::plan::{barrier_of, AppendDecision};
use crate::summary::StateSummary;
use crate::txn_index::AbortedTxn;
use kafka_types::TransactionVersion;

/// A replay stopped at a batch producer state refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("batch at offset {offset}: {error}")]
pub struct ReplayError {
    /// Base offset of the batch.
    pub offset: i64,
    /// Why.
    pub error: ProducerStateError,
}

/// What one replayed batch did beyond updating producers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayStep {
    /// The batch was a barrier that reset producer state here.
    pub barrier_applied: bool,
    /// The batch was a barrier that did not apply here.
    pub barrier_kept: bool,
}

impl ProducerStateManager {
    /// Replays one batch with REPLICATION origin (see the module docs); index entries for the transactions it
    /// completes as aborted are pushed onto `aborted`. On error the manager is unchanged.
    pub fn replay_batch(
        &mut self,
        batch: &RecordBatch,
        aborted: &mut Vec<AbortedTxn>,
    ) -> Result<ReplayStep, ReplayError> {
        let fail = |error| ReplayError {
            offset: batch.base_offset(),
            error,
        };
        crate::plan::check_offsets(batch).map_err(fail)?;
        let mut step = ReplayStep::default();
        if batch.is_control() && barrier_of(batch).map_err(fail)?.is_some() {
            match self
                .plan_append([batch], AppendOrigin::Replication, TransactionVersion::Unknown)
                .map_err(fail)?
            {
                AppendDecision::Append(plan) => {
                    let effects = self.commit(plan);
                    aborted.extend(effects.aborted_index);
                    step.barrier_applied = !effects.barriers_applied.is_empty();
                    step.barrier_kept = effects.barriers_kept > 0;
                }
                // Only CLIENT appends are answered as duplicates; a REPLICATION plan never is.
                AppendDecision::Duplicate(_) => {}
            }
            return Ok(step);
        }
        if batch.has_producer_id() {
            let mut info = self.prepare_update(batch.producer_id(), AppendOrigin::Replication);
            let completed = info
                .append(batch, None, TransactionVersion::Unknown)
                .map_err(fail)?;
            self.update(info);
            if let Some(completed) = completed {
                aborted.extend(self.complete_with_index_entry(&completed));
            }
        }
        self.update_map_end_offset(batch.next_offset());
        Ok(step)
    }
}

/// What a replayed chunk did beyond updating producers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayCounts {
    /// Batches replayed.
    pub batches: u64,
    /// Barriers that reset producer state here.
    pub barriers_applied: usize,
    /// Barriers that did not apply here.
    pub barriers_kept: usize,
}

impl ProducerStateManager {
    /// Replays a chunk of consecutive batches with REPLICATION origin; see the module docs. On error the state
    /// holds every batch before the refused one.
    pub fn replay_batches(
        &mut self,
        batches: &[RecordBatch],
        aborted: &mut Vec<AbortedTxn>,
    ) -> Result<ReplayCounts, ReplayError> {
        // A chunk without control batches completes no transaction, so planning it as one append gives what one
        // batch at a time gives. With a marker or barrier in it, it goes batch by batch: recovery computes each
        // aborted entry's LSO right after its batch (Kafka's segment recovery, spec §7.7), not after the chunk.
        let one_plan = !batches.iter().any(RecordBatch::is_control);
        if let Some(Ok(AppendDecision::Append(plan))) = one_plan
            .then(|| self.plan_append(batches, AppendOrigin::Replication, TransactionVersion::Unknown))
        {
            let effects = self.commit(plan);
            aborted.extend(effects.aborted_index);
            return Ok(ReplayCounts {
                batches: batches.len() as u64,
                barriers_applied: effects.barriers_applied.len(),
                barriers_kept: effects.barriers_kept,
            });
        }
        // Refused (or, impossibly for REPLICATION, answered as a duplicate): one by one, to stop at the batch.
        let mut counts = ReplayCounts::default();
        for batch in batches {
            let step = self.replay_batch(batch, aborted)?;
            counts.batches += 1;
            counts.barriers_applied += usize::from(step.barrier_applied);
            counts.barriers_kept += usize::from(step.barrier_kept);
        }
        Ok(counts)
    }
}

/// The outcome of [`replay`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// The manager after the last batch.
    pub manager: ProducerStateManager,
    /// The aborted-transaction index built on the way.
    pub aborted: Vec<AbortedTxn>,
    /// Barriers that reset state.
    pub barriers_applied: usize,
    /// Barriers that did not apply.
    pub barriers_kept: usize,
    /// Batches replayed.
    pub batches: u64,
}

impl Replayed {
    /// An empty replay into `manager`.
    pub fn start(manager: ProducerStateManager) -> Self {
        Replayed {
            manager,
            aborted: Vec::new(),
            barriers_applied: 0,
            barriers_kept: 0,
            batches: 0,
        }
    }

    /// Replays one more chunk of consecutive batches.
    pub fn push(&mut self, batches: &[RecordBatch]) -> Result<(), ReplayError> {
        let counts = self.manager.replay_batches(batches, &mut self.aborted)?;
        self.barriers_applied += counts.barriers_applied;
        self.barriers_kept += counts.barriers_kept;
        self.batches += counts.batches;
        Ok(())
    }

    /// The summary with the high watermark at the log end (everything replicated).
    pub fn summary(&self) -> StateSummary {
        let mut manager = self.manager.clone();
        let log_end = manager.map_end_offset();
        manager.on_high_watermark_updated(log_end);
        StateSummary::of(&manager, &self.aborted, log_end)
    }
}

/// Replays `batches` into `manager`; see the module docs.
pub fn replay<'a>(
    manager: ProducerStateManager,
    batches: impl IntoIterator<Item = &'a RecordBatch>,
) -> Result<Replayed, ReplayError> {
    let mut replayed = Replayed::start(manager);
    for batch in batches {
        replayed.push(std::slice::from_ref(batch))?;
    }
    Ok(replayed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ProducerStateError;
    use crate::manager::PsmConfig;
    use record_format::BatchBuilder;

    fn batch(offset: i64, transactional: bool) -> RecordBatch {
        let mut builder = BatchBuilder::new()
            .base_offset(offset)
            .producer(1, 0, offset as i32)
            .transactional(transactional);
        builder.add(offset, None, Some(b"v"), &[]);
        builder.build().unwrap()
    }

    #[test]
    fn a_refused_chunk_is_replayed_up_to_the_refused_batch_which_the_error_names() {
        // A non-transactional batch while the producer's transaction is open is refused on every origin.
        let chunk = [batch(0, true), batch(1, true), batch(2, false), batch(3, true)];
        let mut manager = ProducerStateManager::new(PsmConfig::default());
        let mut aborted = Vec::new();
        let error = manager.replay_batches(&chunk, &mut aborted).unwrap_err();
        assert_eq!(error.offset, 2);
        assert_eq!(
            manager.map_end_offset(),
            2,
            "the batches before the refused one are in the state"
        );
        assert_eq!(manager.producer(1).unwrap().last_seq(), 1);
    }

    #[test]
    fn offsets_at_the_end_of_the_offset_space_are_refused_not_a_panic() {
        // A transaction at the last offsets a log can name, then its marker at i64::MAX: `last + 1` would overflow.
        let transactional = {
            let mut builder = BatchBuilder::new()
                .base_offset(i64::MAX - 1)
                .producer(1, 0, 0)
                .transactional(true);
            builder.add(0, None, Some(b"v"), &[]);
            builder.build().unwrap()
        };
        let marker = record_format::end_txn_marker_batch(
            true,
            1,
            0,
            0,
            record_format::ControlBatchPlacement {
                base_offset: i64::MAX,
                partition_leader_epoch: 0,
                timestamp: 0,
            },
        )
        .unwrap();
        let mut manager = ProducerStateManager::new(PsmConfig::default());
        let mut aborted = Vec::new();
        let error = manager
            .replay_batches(&[transactional, marker], &mut aborted)
            .unwrap_err();
        assert_eq!(error.offset, i64::MAX);
        assert!(
            matches!(error.error, ProducerStateError::InvalidRecord { .. }),
            "{error}"
        );
    }

    #[test]
    fn a_chunk_and_the_same_batches_one_by_one_give_the_same_state() {
        let chunk: Vec<RecordBatch> = (0..20).map(|offset| batch(offset, offset % 7 != 6)).collect();
        let (mut together, mut one_by_one) = (
            ProducerStateManager::new(PsmConfig::default()),
            ProducerStateManager::new(PsmConfig::default()),
        );
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let _ = together.replay_batches(&chunk, &mut a);
        for batch in &chunk {
            if one_by_one.replay_batch(batch, &mut b).is_err() {
                break;
            }
        }
        assert_eq!(together, one_by_one);
        assert_eq!(a, b);
    }
}
