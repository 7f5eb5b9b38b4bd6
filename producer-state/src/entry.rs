//! The data model of producer state (kafka-semantics §2): per-producer entries with their 5-batch window, transactions,
//! completed transactions and verification entries.

use prefetch_index::prefetch_index;
use record_format::batch::{decrement_sequence, NO_PRODUCER_EPOCH, NO_SEQUENCE};

/// Batches remembered per producer for duplicate detection (Kafka's `NUM_BATCHES_TO_RETAIN`).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;
/// Kafka's `NO_TIMESTAMP`.
pub const NO_TIMESTAMP: i64 = -1;
/// Coordinator epoch of a producer that has seen no marker.
pub const NO_COORDINATOR_EPOCH: i32 = -1;

/// One cached batch of a producer (`BatchMetadata`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BatchMetadata {
    /// Last sequence of the batch.
    pub last_seq: i32,
    /// Last offset of the batch.
    pub last_offset: i64,
    /// `lastOffset − firstOffset` (also the sequence delta).
    pub offset_delta: i32,
    /// The batch's max timestamp.
    pub timestamp: i64,
}

impl BatchMetadata {
    /// First sequence (wrapping like Kafka).
    pub fn first_seq(&self) -> i32 {
        if self.last_seq == NO_SEQUENCE {
            NO_SEQUENCE
        } else {
            decrement_sequence(self.last_seq, self.offset_delta)
        }
    }

    /// First offset.
    pub fn first_offset(&self) -> i64 {
        self.last_offset.wrapping_sub(i64::from(self.offset_delta))
    }
}

/// The last (up to) five batches of a producer, oldest first, stored inline (no heap allocation per entry or
/// per append): a ring of five slots, the oldest at `start`. Equality and hashing see the batches held, oldest
/// first, not the slots (a window filled past five and one built from its last five batches are equal).
#[derive(Debug, Clone, Copy, Default)]
pub struct BatchWindow {
    slots: [BatchMetadata; NUM_BATCHES_TO_RETAIN],
    /// Index of the oldest batch in `slots`.
    start: u8,
    len: u8,
}

/// `index` of the ring, for `index` below twice its size.
fn wrap(index: usize) -> usize {
    if index >= NUM_BATCHES_TO_RETAIN {
        index - NUM_BATCHES_TO_RETAIN
    } else {
        index
    }
}

impl BatchWindow {
    /// An empty window.
    pub const fn new() -> Self {
        const EMPTY: BatchMetadata = BatchMetadata {
            last_seq: NO_SEQUENCE,
            last_offset: -1,
            offset_delta: 0,
            timestamp: NO_TIMESTAMP,
        };
        BatchWindow {
            slots: [EMPTY; NUM_BATCHES_TO_RETAIN],
            start: 0,
            len: 0,
        }
    }

    /// Number of cached batches.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// True when no batch is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Drops every batch.
    pub fn clear(&mut self) {
        self.start = 0;
        self.len = 0;
    }

    fn slot(&self, index: usize) -> &BatchMetadata {
        &self.slots[wrap(usize::from(self.start) + index)]
    }

    /// The batches held as two runs of slots, the older first (the second is empty unless the ring wraps).
    fn runs(&self) -> (&[BatchMetadata], &[BatchMetadata]) {
        let (start, end) = (
            usize::from(self.start),
            usize::from(self.start) + usize::from(self.len),
        );
        if end <= NUM_BATCHES_TO_RETAIN {
            (&self.slots[start..end], &[])
        } else {
            (&self.slots[start..], &self.slots[..end - NUM_BATCHES_TO_RETAIN])
        }
    }

    /// The oldest batch.
    pub fn front(&self) -> Option<&BatchMetadata> {
        (self.len > 0).then(|| self.slot(0))
    }

    /// The newest batch.
    pub fn back(&self) -> Option<&BatchMetadata> {
        (self.len > 0).then(|| self.slot(usize::from(self.len) - 1))
    }

    /// Adds a batch, evicting the oldest when five are held.
    pub fn push_back(&mut self, batch: BatchMetadata) {
        let start = usize::from(self.start);
        if usize::from(self.len) == NUM_BATCHES_TO_RETAIN {
            self.slots[start] = batch;
            self.start = wrap(start + 1) as u8;
        } else {
            self.slots[wrap(start + usize::from(self.len))] = batch;
            self.len += 1;
        }
    }

    /// The oldest batch for which `matches` is true. Walks the two runs of slots rather than `iter()`'s indices:
    /// written as `self.iter().find(..)`, the duplicate check of every client append made `log-appends` fall from
    /// 0.894 to 0.851 (thirty alternating runs, ADR 0028).
    pub fn find(&self, mut matches: impl FnMut(&BatchMetadata) -> bool) -> Option<&BatchMetadata> {
        let (older, newer) = self.runs();
        older.iter().chain(newer).find(|batch| matches(batch))
    }

    /// Hints the CPU to bring the window into its caches (see [`crate::table`]); reads nothing.
    fn prefetch(&self) {
        prefetch_index(std::slice::from_ref(&self.len), 0);
        for index in 0..NUM_BATCHES_TO_RETAIN {
            // A slice of the stored array: passing the array itself would prefetch a copy of it.
            prefetch_index(self.slots.as_slice(), index);
        }
    }

    /// The batches, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &BatchMetadata> + ExactSizeIterator + '_ {
        (0..self.len()).map(move |index| self.slot(index))
    }
}

impl PartialEq for BatchWindow {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for BatchWindow {}

impl std::hash::Hash for BatchWindow {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_usize(self.len());
        for batch in self.iter() {
            batch.hash(state);
        }
    }
}

impl FromIterator<BatchMetadata> for BatchWindow {
    fn from_iter<I: IntoIterator<Item = BatchMetadata>>(iter: I) -> Self {
        let mut window = BatchWindow::new();
        for batch in iter {
            window.push_back(batch);
        }
        window
    }
}

/// Where a transaction's first record is: its offset, and its place in a segment when known
/// (`LogOffsetMetadata`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LogOffsetMetadata {
    /// The message offset.
    pub message_offset: i64,
    /// Base offset of the segment holding it, when known.
    pub segment_base_offset: Option<i64>,
    /// Byte position in that segment, when known.
    pub relative_position: Option<u32>,
}

impl LogOffsetMetadata {
    /// Offset-only metadata (as restored from a snapshot).
    pub fn message_only(message_offset: i64) -> Self {
        LogOffsetMetadata {
            message_offset,
            segment_base_offset: None,
            relative_position: None,
        }
    }
}

/// The state of one producer (`ProducerStateEntry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateEntry {
    /// Producer id.
    pub producer_id: i64,
    /// Up to five most recent batches, oldest first.
    pub batches: BatchWindow,
    /// Current epoch (−1 when unknown).
    pub producer_epoch: i16,
    /// Epoch of the coordinator that wrote the last marker (−1 when none).
    pub coordinator_epoch: i32,
    /// Timestamp of the last batch or marker.
    pub last_timestamp: i64,
    /// First offset of the ongoing transaction, if any.
    pub current_txn_first_offset: Option<i64>,
}

impl ProducerStateEntry {
    /// A producer with no state (`ProducerStateEntry.empty`).
    pub fn empty(producer_id: i64) -> Self {
        ProducerStateEntry {
            producer_id,
            batches: BatchWindow::new(),
            producer_epoch: NO_PRODUCER_EPOCH,
            coordinator_epoch: NO_COORDINATOR_EPOCH,
            last_timestamp: NO_TIMESTAMP,
            current_txn_first_offset: None,
        }
    }

    /// The same entry without its cached batches (the start of an append's updated entry).
    pub fn without_batches(&self) -> Self {
        ProducerStateEntry {
            producer_id: self.producer_id,
            batches: BatchWindow::new(),
            producer_epoch: self.producer_epoch,
            coordinator_epoch: self.coordinator_epoch,
            last_timestamp: self.last_timestamp,
            current_txn_first_offset: self.current_txn_first_offset,
        }
    }

    /// First sequence of the oldest cached batch, −1 when none.
    pub fn first_seq(&self) -> i32 {
        self.batches.front().map_or(NO_SEQUENCE, BatchMetadata::first_seq)
    }

    /// Last sequence of the newest cached batch, −1 when none.
    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |batch| batch.last_seq)
    }

    /// First offset of the oldest cached batch, −1 when none.
    pub fn first_data_offset(&self) -> i64 {
        self.batches.front().map_or(-1, BatchMetadata::first_offset)
    }

    /// Last offset of the newest cached batch, −1 when none.
    pub fn last_data_offset(&self) -> i64 {
        self.batches.back().map_or(-1, |batch| batch.last_offset)
    }

    /// Offset delta of the newest cached batch, 0 when none.
    pub fn last_offset_delta(&self) -> i32 {
        self.batches.back().map_or(0, |batch| batch.offset_delta)
    }

    /// True when no batch is cached.
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// Adopts `epoch` if it differs (in either direction), dropping the cached batches. Returns whether it changed.
    fn maybe_update_producer_epoch(&mut self, epoch: i16) -> bool {
        if self.producer_epoch == epoch {
            return false;
        }
        self.batches.clear();
        self.producer_epoch = epoch;
        true
    }

    fn push_batch(&mut self, batch: BatchMetadata) {
        self.batches.push_back(batch);
    }

    /// `addBatch`: epoch rule, then cache the batch (evicting the oldest of five), then `lastTimestamp`.
    pub fn add_batch(
        &mut self,
        epoch: i16,
        last_seq: i32,
        last_offset: i64,
        offset_delta: i32,
        timestamp: i64,
    ) {
        self.maybe_update_producer_epoch(epoch);
        self.push_batch(BatchMetadata {
            last_seq,
            last_offset,
            offset_delta,
            timestamp,
        });
        self.last_timestamp = timestamp;
    }

    /// `update(nextEntry)`: epoch rule, append `next`'s batches, then overwrite coordinator epoch, transaction and
    /// last timestamp with `next`'s.
    pub fn update(&mut self, next: ProducerStateEntry) {
        self.maybe_update_producer_epoch(next.producer_epoch);
        for batch in next.batches.iter() {
            self.push_batch(*batch);
        }
        self.coordinator_epoch = next.coordinator_epoch;
        self.current_txn_first_offset = next.current_txn_first_offset;
        self.last_timestamp = next.last_timestamp;
    }

    /// The marker update: epoch rule, coordinator epoch set, transaction closed, last timestamp set.
    pub fn update_for_marker(&mut self, epoch: i16, coordinator_epoch: i32, timestamp: i64) {
        self.maybe_update_producer_epoch(epoch);
        self.coordinator_epoch = coordinator_epoch;
        self.current_txn_first_offset = None;
        self.last_timestamp = timestamp;
    }

    /// Hints the CPU to bring the fields a client append reads into its caches (see [`crate::table`]); reads
    /// nothing.
    pub(crate) fn prefetch(&self) {
        prefetch_index(std::slice::from_ref(self), 0);
        prefetch_index(std::slice::from_ref(&self.producer_epoch), 0);
        prefetch_index(std::slice::from_ref(&self.current_txn_first_offset), 0);
        self.batches.prefetch();
    }

    /// `findDuplicateBatch`: the cached batch with exactly this epoch, first and last sequence.
    pub fn find_duplicate_batch(&self, epoch: i16, first_seq: i32, last_seq: i32) -> Option<BatchMetadata> {
        if epoch != self.producer_epoch {
            return None;
        }
        // The last sequence first: it is stored, the first is computed.
        self.batches
            .find(|batch| batch.last_seq == last_seq && batch.first_seq() == first_seq)
            .copied()
    }
}

/// An undecided (or decided but unreplicated) transaction (`TxnMetadata`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TxnMetadata {
    /// Producer id.
    pub producer_id: i64,
    /// Where the transaction's first record is.
    pub first_offset: LogOffsetMetadata,
    /// Offset of its marker once decided.
    pub last_offset: Option<i64>,
}

/// A transaction closed by a marker (or by a barrier that aborts it) (`CompletedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CompletedTxn {
    /// Producer id.
    pub producer_id: i64,
    /// First offset of the transaction.
    pub first_offset: i64,
    /// Offset of the marker (or barrier) that closed it.
    pub last_offset: i64,
    /// True for ABORT.
    pub is_aborted: bool,
}

/// State kept while a transactional produce is being verified with the coordinator (`VerificationStateEntry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VerificationStateEntry {
    /// When the entry was created (it expires from then, access does not refresh it).
    pub timestamp: i64,
    /// The guard token a verified produce must present.
    pub verification_guard: u64,
    /// Lowest sequence seen for the verification.
    pub lowest_sequence: i32,
    /// Epoch of the verification.
    pub epoch: i16,
    /// True for a TV2 client (KIP-890 part 2).
    pub supports_epoch_bump: bool,
}

impl VerificationStateEntry {
    /// `maybeUpdateLowestSequenceAndEpoch`: same epoch and lower sequence lowers it; a higher epoch adopts both;
    /// a lower epoch is ignored.
    pub fn maybe_update_lowest_sequence_and_epoch(&mut self, sequence: i32, epoch: i16) {
        if epoch == self.epoch && sequence < self.lowest_sequence {
            self.lowest_sequence = sequence;
        } else if epoch > self.epoch {
            self.epoch = epoch;
            self.lowest_sequence = sequence;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn window_keeps_the_five_most_recent_batches() {
        let mut entry = ProducerStateEntry::empty(1);
        for seq in 0..7 {
            entry.add_batch(0, seq, i64::from(seq), 0, 0);
        }
        assert_eq!(entry.batches.len(), 5);
        assert_eq!((entry.first_seq(), entry.last_seq()), (2, 6));
    }

    fn cached(last_seq: i32) -> BatchMetadata {
        BatchMetadata {
            last_seq,
            last_offset: i64::from(last_seq) * 10,
            offset_delta: 0,
            timestamp: 0,
        }
    }

    #[test]
    fn the_window_holds_its_batches_oldest_first_at_every_fill() {
        let mut window = BatchWindow::new();
        for pushed in 0..13 {
            window.push_back(cached(pushed));
            let held: Vec<i32> = window.iter().map(|batch| batch.last_seq).collect();
            let expected: Vec<i32> = ((pushed - 4).max(0)..=pushed).collect();
            assert_eq!(held, expected, "after pushing 0..={pushed}");
            assert_eq!(
                window.front().map(|batch| batch.last_seq),
                expected.first().copied()
            );
            assert_eq!(window.back().map(|batch| batch.last_seq), Some(pushed));
            let mut found = Vec::new();
            window.find(|batch| {
                found.push(batch.last_seq);
                false
            });
            assert_eq!(
                found, expected,
                "find visits oldest first after pushing 0..={pushed}"
            );
        }
    }

    #[test]
    fn find_answers_the_oldest_matching_batch() {
        let mut window = BatchWindow::new();
        for (index, last_seq) in [7, 1, 7, 2, 7, 3, 4].into_iter().enumerate() {
            window.push_back(BatchMetadata {
                last_offset: index as i64,
                ..cached(last_seq)
            });
        }
        // Held: 7@2, 2@3, 7@4, 3@5, 4@6 (the ring has wrapped).
        assert_eq!(
            window
                .find(|batch| batch.last_seq == 7)
                .map(|batch| batch.last_offset),
            Some(2)
        );
        assert_eq!(window.find(|batch| batch.last_seq == 1), None);
    }

    #[test]
    fn windows_holding_the_same_batches_are_equal_whatever_their_slots() {
        let mut wrapped = BatchWindow::new();
        for last_seq in 0..8 {
            wrapped.push_back(cached(last_seq));
        }
        let rebuilt: BatchWindow = (3..8).map(cached).collect();
        assert_eq!(wrapped, rebuilt);
        let state = std::hash::RandomState::new();
        assert_eq!(state.hash_one(wrapped), state.hash_one(rebuilt));
        let mut cleared = wrapped;
        cleared.clear();
        assert_eq!(cleared, BatchWindow::new());
        assert_ne!(wrapped, (4..8).map(cached).collect());
    }

    #[test]
    fn a_different_epoch_in_either_direction_clears_the_window() {
        let mut entry = ProducerStateEntry::empty(1);
        entry.add_batch(3, 0, 0, 0, 0);
        entry.add_batch(2, 5, 1, 0, 0);
        assert_eq!((entry.producer_epoch, entry.batches.len()), (2, 1));
    }

    #[test]
    fn wrapped_batch_reports_its_first_sequence() {
        let batch = BatchMetadata {
            last_seq: 9,
            last_offset: 2020,
            offset_delta: 20,
            timestamp: 0,
        };
        assert_eq!((batch.first_seq(), batch.first_offset()), (i32::MAX - 10, 2000));
    }
}
