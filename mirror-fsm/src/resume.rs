//! Resuming a session: before a partition that was mirroring fetches again (after a transient error, a restart or
//! a pause), its log is checked against the source's, and only a proof that they differ truncates it (ADR 0046).
//!
//! The evidence is the source's own batches. A mirror holds the source's batches byte for byte at the same
//! offsets, so "our batch at offset `o` is the source's batch at `o`" is checked by fetching from `o` and
//! comparing the batches ([`same_batch`]): offsets, partition leader epoch, producer id, epoch and base sequence,
//! the control and transactional flags, and the records — every record the source's batch holds must be ours at
//! the same offset, with the same timestamp, key, value and headers. Not the CRC: Kafka's log cleaner drops records
//! from a compacted batch (keeping its offsets and these fields, and the records it keeps unchanged), and a batch
//! the cleaner emptied away is no difference either (absence is never proof). The header fields alone are not
//! enough: two clusters' producers get the same ids from allocators that start at the same place, so after a
//! failback two batches can share every header field and hold other records, and a COMMIT and an ABORT marker of
//! one producer differ only in their record (the model check found this, ADR 0048). What the comparison counts as
//! proof:
//! - a batch of the source's at `o` whose identity differs from ours, or one that overlaps ours with other bounds;
//! - the source answering that it holds no offset `o` (`OFFSET_OUT_OF_RANGE`) while its log starts at or below `o`:
//!   its log now ends before records it served us (an unclean leader election, a topic recreated).
//!
//! An empty answer below our log end proves nothing by itself (a new Kafka leader serves its high watermark late;
//! a fetch at a log's end is empty too): the source is asked past our batch's end, and only
//! `OFFSET_OUT_OF_RANGE` there proves its log ends inside our batch; otherwise the check fails, retryably, and the
//! partition waits. Our last batch is compared first; when it differs, [`Divergence`]
//! bisects our batches for the first one the source does not hold — the logs agree below it, so the log is
//! truncated there and fetching resumes. When the source's log start has passed our log end, its records between
//! the two are gone at the source: the log starts again at the source's log start, as Kafka's follower does.

use record_format::RecordBatch;

/// Whether two batches are the same batch of one log, as far as Kafka's log cleaner lets one tell: the fields it
/// keeps when it rewrites a batch, and every record of `theirs` one of ours, unchanged (see the module docs). A
/// batch whose CRC fails or whose records do not decode is not the same as anything here; [`compare`] counts it as
/// no evidence instead.
pub fn same_batch(ours: &RecordBatch, theirs: &RecordBatch) -> bool {
    identity(ours, theirs) == Identity::Same
}

/// What comparing two batches found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Identity {
    Same,
    Different,
    /// A CRC that fails or records that do not decode: nothing can be said (a corrupt answer is no proof).
    Unreadable,
}

fn identity(ours: &RecordBatch, theirs: &RecordBatch) -> Identity {
    let headers_agree = ours.base_offset() == theirs.base_offset()
        && ours.last_offset() == theirs.last_offset()
        && ours.partition_leader_epoch() == theirs.partition_leader_epoch()
        && ours.producer_id() == theirs.producer_id()
        && ours.producer_epoch() == theirs.producer_epoch()
        && ours.base_sequence() == theirs.base_sequence()
        && ours.is_control() == theirs.is_control()
        && ours.is_transactional() == theirs.is_transactional();
    if !headers_agree {
        return Identity::Different;
    }
    if ours.verify_crc().is_err() || theirs.verify_crc().is_err() {
        return Identity::Unreadable;
    }
    records_kept_from(ours, theirs)
}

/// Whether every record of `theirs` is a record of `ours` at the same offset with the same timestamp, key, value
/// and headers (what the cleaner leaves of a batch: some of its records, unchanged).
fn records_kept_from(ours: &RecordBatch, theirs: &RecordBatch) -> Identity {
    let (Ok(ours), Ok(theirs)) = (ours.records(), theirs.records()) else {
        return Identity::Unreadable;
    };
    let mut ours = ours.iter();
    for kept in theirs.iter() {
        let Ok(kept) = kept else {
            return Identity::Unreadable;
        };
        let matching = loop {
            match ours.next() {
                Some(Ok(record)) if record.offset < kept.offset => continue,
                Some(Ok(record)) => break Some(record),
                Some(Err(_)) => return Identity::Unreadable,
                None => break None,
            }
        };
        let same = matching.is_some_and(|record| {
            record.offset == kept.offset
                && record.timestamp == kept.timestamp
                && record.key == kept.key
                && record.value == kept.value
                && record.headers == kept.headers
        });
        if !same {
            return Identity::Different;
        }
    }
    Identity::Same
}

/// What the source's answer says about one of our batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// The source holds it (or holds later batches and not this one, as compaction leaves a log: no proof).
    Agrees,
    /// The source holds something else there, or nothing: proof that the logs diverged at or before it.
    Differs,
    /// The source served nothing from there yet: no evidence either way.
    Unknown,
}

/// Compares our batch `ours` with the source's batches fetched from its base offset (`answer`, in order).
pub fn compare(ours: &RecordBatch, answer: &[RecordBatch]) -> Probe {
    let Some(theirs) = answer
        .iter()
        .find(|batch| batch.last_offset() >= ours.base_offset())
    else {
        return Probe::Unknown;
    };
    if theirs.base_offset() > ours.last_offset() {
        // The source has nothing in our batch's range but holds what follows: a batch its cleaner removed.
        Probe::Agrees
    } else {
        match identity(ours, theirs) {
            Identity::Same => Probe::Agrees,
            Identity::Different => Probe::Differs,
            Identity::Unreadable => Probe::Unknown,
        }
    }
}

/// The bisection for the first of our batches the source does not hold, over batches from `from` (the first
/// offset both logs hold) to a batch known to differ. Sans-IO: ask [`Divergence::probe`] for an offset, compare
/// our batch holding it with the source's, and report it with [`Divergence::record`]; when `probe` returns `None`,
/// [`Divergence::offset`] is where the logs part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Divergence {
    /// Every batch of ours ending below this offset agrees.
    agrees_below: i64,
    /// The base offset of a batch of ours that differs.
    differs_at: i64,
}

impl Divergence {
    /// A search from `from` (the first offset both logs hold) up to our batch at `differs_at`, known to differ.
    pub fn new(from: i64, differs_at: i64) -> Self {
        Divergence {
            agrees_below: from.min(differs_at),
            differs_at,
        }
    }

    /// The next offset to compare (our batch holding it), or `None` when the search is over.
    pub fn probe(&self) -> Option<i64> {
        (self.agrees_below < self.differs_at)
            .then(|| self.agrees_below + (self.differs_at - self.agrees_below) / 2)
    }

    /// Records the comparison of our batch `base..=last` (the one holding the probed offset).
    pub fn record(&mut self, base: i64, last: i64, agrees: bool) {
        if agrees {
            self.agrees_below = self.agrees_below.max(last.saturating_add(1));
        } else {
            self.differs_at = self.differs_at.min(base);
        }
    }

    /// The base offset of our first batch the source does not hold: the logs agree below it.
    pub fn offset(&self) -> i64 {
        self.differs_at
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use record_format::BatchBuilder;

    fn batch(base: i64, records: u32, producer_id: i64) -> RecordBatch {
        let mut builder = BatchBuilder::new().base_offset(base).producer(producer_id, 0, 0);
        for index in 0..records {
            builder.add(1_000 + i64::from(index), None, Some(b"v"), &[]);
        }
        builder.build().unwrap()
    }

    /// Three keyed records at 10, 11, 12.
    fn keyed(values: [&[u8]; 3]) -> RecordBatch {
        let mut builder = BatchBuilder::new().base_offset(10).producer(7, 0, 0);
        for (index, value) in values.into_iter().enumerate() {
            let key = [b'k', b'0' + index as u8];
            builder.add(1_000 + index as i64, Some(&key), Some(value), &[]);
        }
        builder.build().unwrap()
    }

    /// What Kafka's cleaner leaves of `keyed`: the record at offset 11 only, unchanged (with `value`), the
    /// batch's base and last offsets and its producer fields kept.
    fn cleaned(value: &[u8]) -> RecordBatch {
        let mut builder = BatchBuilder::new()
            .base_offset(10)
            .producer(7, 0, 0)
            .base_timestamp(1_001)
            .last_offset_delta(2);
        builder.push(record_format::NewRecord {
            attributes: 0,
            timestamp_delta: 0,
            offset_delta: 1,
            key: Some(b"k1".to_vec().into()),
            value: Some(value.to_vec().into()),
            headers: Vec::new(),
        });
        builder.build().unwrap()
    }

    #[test]
    fn a_batch_the_cleaner_rewrote_is_the_same_batch() {
        let ours = keyed([b"a", b"b", b"c"]);
        let kept = cleaned(b"b");
        assert_ne!(kept.as_bytes(), ours.as_bytes());
        assert_eq!(compare(&ours, &[kept]), Probe::Agrees);
    }

    #[test]
    fn a_batch_with_every_header_field_ours_and_other_records_differs() {
        // Two clusters' producers with one id, epoch and sequence at the same offsets (after a failback).
        assert_eq!(
            compare(&keyed([b"a", b"b", b"c"]), &[keyed([b"a", b"X", b"c"])]),
            Probe::Differs
        );
        // A "cleaned" batch whose kept record is not ours.
        assert_eq!(
            compare(&keyed([b"a", b"b", b"c"]), &[cleaned(b"X")]),
            Probe::Differs
        );
    }

    #[test]
    fn a_source_batch_whose_crc_fails_is_no_evidence() {
        let ours = keyed([b"a", b"b", b"c"]);
        let mut corrupt = ours.as_bytes().to_vec();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff; // a byte of the last record's value: header fields intact, CRC broken
        let corrupt = RecordBatch::parse(corrupt.into()).unwrap();
        assert_eq!(compare(&ours, &[corrupt]), Probe::Unknown);
    }

    #[test]
    fn a_commit_marker_and_an_abort_marker_of_one_producer_differ() {
        let marker = |commit: bool| {
            let placement = record_format::ControlBatchPlacement {
                base_offset: 5,
                partition_leader_epoch: 0,
                timestamp: 1_000,
            };
            record_format::end_txn_marker_batch(commit, 7, 0, 0, placement).unwrap()
        };
        assert_eq!(compare(&marker(true), &[marker(true)]), Probe::Agrees);
        assert_eq!(compare(&marker(true), &[marker(false)]), Probe::Differs);
    }

    #[test]
    fn another_producer_at_the_same_offsets_differs() {
        assert_eq!(compare(&batch(10, 3, 7), &[batch(10, 3, 8)]), Probe::Differs);
        assert_eq!(compare(&batch(10, 3, 7), &[batch(9, 3, 7)]), Probe::Differs);
    }

    #[test]
    fn nothing_served_is_no_evidence_and_a_later_batch_is_no_difference() {
        assert_eq!(compare(&batch(10, 3, 7), &[]), Probe::Unknown);
        assert_eq!(compare(&batch(10, 3, 7), &[batch(13, 1, 7)]), Probe::Agrees);
    }

    /// The bisection finds the first differing batch in O(log n) probes whatever the batch sizes.
    #[test]
    fn the_bisection_finds_the_first_differing_batch() {
        // Our batches: 0..=1, 2..=4, 5, 6..=9, 10..=11, 12 ... ; they differ from `first_bad` on.
        let bounds: Vec<(i64, i64)> = vec![(0, 1), (2, 4), (5, 5), (6, 9), (10, 11), (12, 12), (13, 20)];
        for first_bad in 0..bounds.len() {
            let mut search = Divergence::new(0, bounds[bounds.len() - 1].0);
            let mut probes = 0;
            while let Some(offset) = search.probe() {
                probes += 1;
                let index = bounds
                    .iter()
                    .position(|&(base, last)| base <= offset && offset <= last)
                    .unwrap();
                let (base, last) = bounds[index];
                search.record(base, last, index < first_bad);
            }
            let expected = bounds[first_bad.min(bounds.len() - 1)].0;
            assert_eq!(search.offset(), expected, "first bad batch {first_bad}");
            assert!(probes <= 6, "{probes} probes");
        }
    }
}
