//! The one replay: batches fed to a manager with REPLICATION origin, one at a time, as Kafka's log recovery does.
//!
//! [`ProducerStateManager::replay_batch`] is the step every rebuild takes — `PartitionLog` recovery and
//! truncation, `mirrorlog replay`, the scenario runner — so they cannot disagree. It streams: the caller reads
//! batches from wherever they are and hands them over one by one; nothing is collected but the
//! aborted-transaction index entries the replay produces. [`replay`] is the convenience loop over an iterator.
//!
//! A batch without a producer id only moves the map end offset; a data or marker batch is validated and merged
//! directly (Kafka's `loadProducersFromRecords`); a `MIRROR_PID_RESET` barrier goes through the full append plan,
//! so it is decided by the same rule as a live append.

use record_format::RecordBatch;

use crate::append::{AppendOrigin, TransactionVersion};
use crate::error::ProducerStateError;
use crate::manager::ProducerStateManager;
use crate::plan::{barrier_of, AppendDecision};
use crate::summary::StateSummary;
use crate::txn_index::AbortedTxn;

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

    /// Replays one more batch.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<(), ReplayError> {
        let step = self.manager.replay_batch(batch, &mut self.aborted)?;
        self.barriers_applied += usize::from(step.barrier_applied);
        self.barriers_kept += usize::from(step.barrier_kept);
        self.batches += 1;
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
        replayed.push(batch)?;
    }
    Ok(replayed)
}
