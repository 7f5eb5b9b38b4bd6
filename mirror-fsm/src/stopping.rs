//! What STOPPING writes, and where (ADR 0045): the **stable cut**, one **ABORT marker** for each transaction the
//! cut keeps open, then the barrier; and how a resumed STOPPING reads a tail it may have begun to write.
//!
//! The seed says STOPPING truncates to the last stable offset. Taken literally, that can take back a transaction
//! the mirror has already served. Say a transaction T1 opens at the LSO, and the marker of an earlier transaction
//! T0 lies above it (T0's records below the LSO, its marker after T1's first record). A cut at the LSO removes T0's
//! marker. But T0's records were given as committed to read_committed consumers of the mirror, and copied by any
//! cluster mirroring it. After the cut they are open again. Either they are aborted after readers saw them
//! committed, or the cut goes on below them and removes records that readers and downstream mirrors already hold.
//!
//! The stable cut is the smallest offset at or above the LSO above which no transaction marker closes a
//! transaction that began below it. [`StableCut`] finds it in one forward pass over the batches from the LSO,
//! holding one offset per producer with a transaction open in that range. Nothing below the LSO loses its bytes
//! or its outcome. What the cut keeps open is undecided data the source's marker never reached. STOPPING aborts
//! each such transaction with a real ABORT marker ([`abort_markers`]) before it writes the barrier. A marker, not
//! the barrier's own abort, because every reader applies a marker the same way: Kafka's read_committed consumers
//! only stop skipping an aborted producer at its ABORT marker, and downstream mirrors under either barrier scope
//! apply it too. The last mirrored offset stays the cut: only the source's bytes lie below it.
//!
//! The markers and the barrier are appended together. A crash can leave a prefix of the markers without the
//! barrier, so [`read_tail`] treats this cluster's ABORT markers above the last mirrored offset as STOPPING's own
//! unfinished writes. The next attempt aborts what is still open and writes the barrier after it.

use std::collections::BTreeMap;

use producer_state::ProducerStateManager;
use record_format::control::{
    decode_control_records, end_txn_marker_batch, ControlBatchPlacement, ControlRecord,
};
use record_format::{EncodeError, RecordBatch};

use crate::machine::Event;

/// A rule of STOPPING left out on purpose (ADR 0062), for the simulator alone: its mutants, and its strategies
/// that fail over without KIP-1279's producer-id handling, run the machine's own STOPPING with one rule missing
/// instead of writing the machine's keys and barriers themselves. `serve` never sets one
/// ([`crate::MirrorDriver::depart_from_stopping`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoppingDeparture {
    /// No stable cut: the log keeps what it copied above its last stable offset, and the ABORT markers and the
    /// barrier land at its end.
    NoStableCut,
    /// No cut, no ABORT markers, no barrier: a failover that only stops fetching, records where mirroring ended
    /// and opens the partition for writes (the strategies without the barrier, and the barrier strategies'
    /// `NoBarrier` mutant).
    NoBarrier,
    /// The last mirrored offset recorded is the log end before the cut, not the cut (a failback then aligns
    /// with a position inside this cluster's own writes).
    LastMirroredBeforeTheCut,
}

/// The stable cut of a log, found by observing its batches from the LSO to the log end in order; see the
/// module docs.
#[derive(Debug, Clone)]
pub struct StableCut {
    lso: i64,
    cut: i64,
    /// For each producer with transactional records at or above the LSO and no marker after them yet: the
    /// first offset of that transaction.
    began: BTreeMap<i64, i64>,
}

impl StableCut {
    /// Starts at the log's last stable offset.
    pub fn from_lso(lso: i64) -> Self {
        StableCut {
            lso,
            cut: lso,
            began: BTreeMap::new(),
        }
    }

    /// Takes the next batch of the log (batches must come in offset order; those ending below the LSO are
    /// ignored).
    pub fn observe(&mut self, batch: &RecordBatch) {
        if batch.last_offset() < self.lso || !batch.is_transactional() {
            return;
        }
        let producer = batch.producer_id();
        if batch.is_control() {
            // A commit or abort marker. A transaction begun below the cut keeps its marker only if the cut moves
            // past it. So does one with no records at all: this pass cannot tell it apart, and keeping its marker
            // costs nothing.
            let began = self.began.remove(&producer);
            if began.is_none_or(|first| first < self.cut) {
                self.cut = batch.next_offset();
            }
        } else {
            self.began.entry(producer).or_insert(batch.base_offset());
        }
    }

    /// The cut found so far: once every batch up to the log end was observed, the offset to truncate to.
    pub fn offset(&self) -> i64 {
        self.cut
    }
}

/// One ABORT marker for each transaction `state` holds open, in producer-id order, at consecutive offsets from
/// `placement.base_offset`. Each carries the producer's own epoch and coordinator epoch (0 if it has none), so
/// producer state accepts it as the coordinator's.
pub fn abort_markers(
    state: &ProducerStateManager,
    placement: ControlBatchPlacement,
) -> Result<Vec<RecordBatch>, EncodeError> {
    let mut open: Vec<(i64, i16, i32)> = state
        .producers()
        .filter(|entry| entry.current_txn_first_offset.is_some())
        .map(|entry| {
            (
                entry.producer_id,
                entry.producer_epoch,
                entry.coordinator_epoch.max(0),
            )
        })
        .collect();
    open.sort_unstable();
    (placement.base_offset..)
        .zip(open)
        .map(|(base_offset, (producer_id, epoch, coordinator_epoch))| {
            let at = ControlBatchPlacement {
                base_offset,
                ..placement
            };
            end_txn_marker_batch(false, producer_id, epoch, coordinator_epoch, at)
        })
        .collect()
}

/// What a STOPPING that resumes at its barrier step finds above the last mirrored offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoppingTail {
    /// Nothing, or only ABORT markers that an earlier attempt wrote: the attempt goes on.
    Unfinished,
    /// The earlier attempt's barrier, after its markers: only its durability is left to do.
    OwnBarrier,
    /// Anything else (another writer's batches, a foreign barrier): not STOPPING's doing.
    Foreign,
}

impl StoppingTail {
    /// What the machine hears of it ([`Event::LogTail`]) when STOPPING's writes begin at `offset` and the log ends
    /// at `log_end`: an unfinished tail counts as ending at the offset (the append aborts what is still open, then
    /// writes the barrier), a barrier of this cluster means done, anything else is a log that moved under STOPPING.
    pub fn event(self, offset: i64, log_end: i64) -> Event {
        match self {
            StoppingTail::Unfinished => Event::LogTail {
                log_end: offset,
                own_barrier_present: false,
            },
            StoppingTail::OwnBarrier => Event::LogTail {
                log_end,
                own_barrier_present: true,
            },
            StoppingTail::Foreign => Event::LogTail {
                log_end,
                own_barrier_present: false,
            },
        }
    }
}

/// Classifies the batches from the last mirrored offset to the log end (in order); see [`StoppingTail`].
/// `local_cluster_id` names this cluster's barriers. Nothing but STOPPING writes there while the partition is
/// read-only, so ABORT markers there are its own.
pub fn read_tail<'a>(
    batches: impl IntoIterator<Item = &'a RecordBatch>,
    local_cluster_id: &str,
) -> StoppingTail {
    for batch in batches {
        if !batch.is_control() {
            return StoppingTail::Foreign;
        }
        match decode_control_records(batch).as_deref() {
            Ok([ControlRecord::Abort(_)]) if batch.is_transactional() => continue,
            Ok([ControlRecord::MirrorPidReset(barrier)])
                if barrier.writer_cluster_id.as_deref() == Some(local_cluster_id) =>
            {
                return StoppingTail::OwnBarrier
            }
            _ => return StoppingTail::Foreign,
        }
    }
    StoppingTail::Unfinished
}

#[cfg(test)]
mod tests {
    use super::*;
    use record_format::control::mirror_pid_reset_batch;
    use record_format::{BatchBuilder, MirrorPidResetRecord};

    fn data(offset: i64, producer: i64) -> RecordBatch {
        let mut builder = BatchBuilder::new()
            .base_offset(offset)
            .producer(producer, 0, 0)
            .transactional(true);
        builder.add(0, None, Some(b"v"), &[]);
        builder
            .build()
            .unwrap_or_else(|error| panic!("a test batch encodes: {error}"))
    }

    fn placement(offset: i64) -> ControlBatchPlacement {
        ControlBatchPlacement {
            base_offset: offset,
            partition_leader_epoch: 0,
            timestamp: 0,
        }
    }

    fn marker(offset: i64, producer: i64, commit: bool) -> RecordBatch {
        end_txn_marker_batch(commit, producer, 0, 0, placement(offset))
            .unwrap_or_else(|error| panic!("a test marker encodes: {error}"))
    }

    fn barrier(offset: i64, writer: &str) -> RecordBatch {
        let value = MirrorPidResetRecord::new("A", Some(writer.to_owned()));
        mirror_pid_reset_batch(&value, placement(offset))
            .unwrap_or_else(|error| panic!("a test barrier encodes: {error}"))
    }

    fn cut(lso: i64, batches: &[RecordBatch]) -> i64 {
        let mut cut = StableCut::from_lso(lso);
        for batch in batches {
            cut.observe(batch);
        }
        cut.offset()
    }

    #[test]
    fn a_tail_of_transactions_begun_at_or_above_the_lso_is_cut_at_the_lso() {
        let log = [
            data(0, 5),
            marker(1, 5, true),
            data(2, 6),
            data(3, 7),
            marker(4, 7, true),
        ];
        assert_eq!(cut(2, &log), 2);
    }

    #[test]
    fn the_cut_moves_past_a_marker_that_closes_a_transaction_begun_below_it() {
        // 0: P0 opens, 1: P1 opens (holds the LSO), 2: P0 commits.
        let log = [data(0, 0), data(1, 1), marker(2, 0, true)];
        assert_eq!(cut(1, &log), 3);
    }

    #[test]
    fn a_transaction_begun_above_the_lso_but_below_a_moved_cut_keeps_its_later_marker() {
        // 0: P0 opens, 1: P1 opens (LSO), 2: P2 opens, 3: P0 commits (cut → 4), 4: P2 commits (began at 2 < 4).
        let log = [
            data(0, 0),
            data(1, 1),
            data(2, 2),
            marker(3, 0, true),
            marker(4, 2, true),
        ];
        assert_eq!(cut(1, &log), 5);
    }

    #[test]
    fn batches_below_the_lso_are_not_looked_at() {
        let log = [data(0, 0), marker(1, 0, true), data(2, 1)];
        assert_eq!(cut(2, &log), 2);
    }

    #[test]
    fn a_tail_of_abort_markers_is_unfinished_and_one_ending_in_our_barrier_is_done() {
        assert_eq!(read_tail(&[], "B"), StoppingTail::Unfinished);
        let aborts = [marker(3, 4, false), marker(4, 7, false)];
        assert_eq!(read_tail(&aborts, "B"), StoppingTail::Unfinished);
        let done = [marker(3, 4, false), barrier(4, "B")];
        assert_eq!(read_tail(&done, "B"), StoppingTail::OwnBarrier);
        assert_eq!(read_tail(&[barrier(3, "B")], "B"), StoppingTail::OwnBarrier);
    }

    #[test]
    fn anything_else_in_the_tail_is_foreign() {
        assert_eq!(read_tail(&[data(3, 1)], "B"), StoppingTail::Foreign);
        assert_eq!(read_tail(&[marker(3, 1, true)], "B"), StoppingTail::Foreign);
        assert_eq!(read_tail(&[barrier(3, "C")], "B"), StoppingTail::Foreign);
        assert_eq!(
            read_tail(&[marker(3, 1, false), data(4, 2)], "B"),
            StoppingTail::Foreign
        );
    }
}
