//! Rewriting one batch for a log cleaner, as Kafka's `MemoryRecords.filterTo` does: the records a cleaner keeps,
//! at their own offsets, in a batch that keeps its base offset, last offset, producer id, epoch, base sequence,
//! partition leader epoch, attributes and codec — so a reader, and producer state rebuilt from the log, see the
//! same offsets and sequence ranges as before. A batch whose records all stay is kept as it is (not re-encoded);
//! one whose records all go disappears, unless the cleaner must keep it (the last batch of a producer, whose
//! sequence range idempotence needs): it then stays as an empty batch, header only, as Kafka writes it.

use crate::batch::{Attributes, RecordBatch};
use crate::builder::BatchBuilder;
use crate::compression::Compression;
use crate::error::{DecodeError, EncodeError};
use crate::record::Record;

/// What became of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filtered {
    /// Every record stays: the batch as it is.
    Unchanged,
    /// Some records stay (or none, and the batch had to stay empty): the rewritten batch.
    Rebuilt(RecordBatch),
    /// No record stays and nothing requires the batch: it goes.
    Removed,
}

/// Why a batch could not be filtered.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    /// Its records could not be read.
    #[error("cannot read the batch's records: {0}")]
    Decode(#[from] DecodeError),
    /// The rewritten batch could not be written.
    #[error("cannot write the filtered batch: {0}")]
    Encode(#[from] EncodeError),
}

/// Filters `batch`'s records by `keep`; `retain_empty` keeps a batch none of whose records stay, empty.
///
/// `delete_horizon_ms`: the delete horizon a log cleaner sets on a batch that keeps a tombstone and has none yet
/// (KIP-534, as Kafka's `MemoryRecords.filterTo`): such a batch is rewritten with it even when every record stays.
/// A batch that has one keeps it.
pub fn filter_batch(
    batch: &RecordBatch,
    mut keep: impl FnMut(&Record<'_>) -> bool,
    retain_empty: bool,
    delete_horizon_ms: Option<i64>,
) -> Result<Filtered, FilterError> {
    let records = batch.records()?;
    let mut kept = Vec::new();
    let mut keeps_tombstone = false;
    for record in records.iter() {
        let record = record?;
        let stays = keep(&record);
        keeps_tombstone |= stays && record.value.is_none();
        kept.push(stays);
    }
    let horizon = delete_horizon_ms.filter(|_| keeps_tombstone && batch.delete_horizon_ms().is_none());
    if horizon.is_none() && kept.iter().all(|&stays| stays) {
        return Ok(Filtered::Unchanged);
    }
    if !kept.iter().any(|&stays| stays) {
        if !retain_empty {
            return Ok(Filtered::Removed);
        }
        return Ok(Filtered::Rebuilt(empty_like(batch)?));
    }
    let mut builder = BatchBuilder::from_batch(batch)?;
    builder.retain_records(&kept);
    if let Some(horizon) = horizon {
        builder.delete_horizon(horizon);
    }
    Ok(Filtered::Rebuilt(builder.build()?))
}

/// The header-only batch Kafka writes for a batch that must stay without records: same offsets, producer fields
/// and flags, no codec and no delete horizon, both timestamps the batch's largest.
fn empty_like(batch: &RecordBatch) -> Result<RecordBatch, EncodeError> {
    let attributes = batch.attributes().with_delete_horizon(false);
    let plain = Attributes((attributes.0 & !0x07) | i16::from(Compression::None.id()));
    BatchBuilder::new()
        .base_offset(batch.base_offset())
        .partition_leader_epoch(batch.partition_leader_epoch())
        .attributes(plain)
        .producer(batch.producer_id(), batch.producer_epoch(), batch.base_sequence())
        .base_timestamp(batch.max_timestamp())
        .max_timestamp(batch.max_timestamp())
        .last_offset_delta(batch.last_offset_delta())
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(compression: Compression) -> RecordBatch {
        let mut builder = BatchBuilder::new()
            .base_offset(100)
            .partition_leader_epoch(7)
            .producer(42, 3, 10)
            .transactional(true)
            .compression(compression);
        for index in 0..5u8 {
            let key = [b'k', index];
            let value = [b'v', index];
            builder.add(
                1_000 + i64::from(index) * 10,
                Some(&key),
                Some(&value),
                &[("h", Some(b"x"))],
            );
        }
        builder.build().unwrap()
    }

    fn kept(batch: &RecordBatch) -> Vec<(i64, i64, Vec<u8>)> {
        batch
            .records()
            .unwrap()
            .iter()
            .map(|record| {
                let record = record.unwrap();
                (record.offset, record.timestamp, record.key.unwrap().to_vec())
            })
            .collect()
    }

    #[test]
    fn kept_records_keep_their_offsets_timestamps_and_the_batch_its_header() {
        for compression in [Compression::None, Compression::Gzip, Compression::Zstd] {
            let original = batch(compression);
            let Filtered::Rebuilt(filtered) =
                filter_batch(&original, |record| record.offset % 2 == 1, false, None).unwrap()
            else {
                panic!("two records kept");
            };
            filtered.verify_crc().unwrap();
            assert_eq!(
                kept(&filtered),
                [(101, 1_010, b"k\x01".to_vec()), (103, 1_030, b"k\x03".to_vec())],
                "{compression:?}"
            );
            assert_eq!(filtered.base_offset(), 100);
            assert_eq!(
                filtered.last_offset(),
                104,
                "the last offset stays: the sequence range does"
            );
            assert_eq!(filtered.record_count(), 2);
            assert_eq!(
                (
                    filtered.producer_id(),
                    filtered.producer_epoch(),
                    filtered.base_sequence()
                ),
                (42, 3, 10)
            );
            assert_eq!(filtered.partition_leader_epoch(), 7);
            assert_eq!(filtered.attributes(), original.attributes());
            assert_eq!(
                (filtered.base_timestamp(), filtered.max_timestamp()),
                (1_010, 1_030)
            );
        }
    }

    #[test]
    fn a_batch_keeps_its_bytes_when_every_record_stays_and_goes_when_none_does() {
        let original = batch(Compression::Lz4);
        assert_eq!(
            filter_batch(&original, |_| true, false, None).unwrap(),
            Filtered::Unchanged
        );
        assert_eq!(
            filter_batch(&original, |_| false, false, None).unwrap(),
            Filtered::Removed
        );
    }

    #[test]
    fn a_batch_that_must_stay_without_records_stays_as_an_empty_header() {
        let original = batch(Compression::Snappy);
        let Filtered::Rebuilt(empty) = filter_batch(&original, |_| false, true, None).unwrap() else {
            panic!("kept empty");
        };
        empty.verify_crc().unwrap();
        assert_eq!(empty.record_count(), 0);
        assert_eq!((empty.base_offset(), empty.last_offset()), (100, 104));
        assert_eq!(
            (empty.producer_id(), empty.producer_epoch(), empty.base_sequence()),
            (42, 3, 10)
        );
        assert!(empty.is_transactional());
        assert_eq!(empty.attributes().compression_id(), Compression::None.id());
        assert_eq!((empty.base_timestamp(), empty.max_timestamp()), (1_040, 1_040));
        assert!(kept(&empty).is_empty());
    }

    /// Records 0–4 at 1,000, 1,010, … with record 2 a tombstone.
    fn with_tombstone() -> RecordBatch {
        let mut builder = BatchBuilder::new().base_offset(100);
        for index in 0..5u8 {
            let value = [b'v', index];
            builder.add(
                1_000 + i64::from(index) * 10,
                Some(&[b'k', index]),
                (index != 2).then_some(&value[..]),
                &[],
            );
        }
        builder.build().unwrap()
    }

    #[test]
    fn a_kept_tombstone_gets_the_delete_horizon_once_and_the_records_keep_their_timestamps() {
        let original = with_tombstone();
        assert_eq!(original.delete_horizon_ms(), None);
        let Filtered::Rebuilt(marked) = filter_batch(&original, |_| true, false, Some(90_000)).unwrap()
        else {
            panic!("a batch keeping a tombstone without a horizon is rewritten with one");
        };
        marked.verify_crc().unwrap();
        assert_eq!(marked.delete_horizon_ms(), Some(90_000));
        assert!(marked.attributes().has_delete_horizon());
        assert_eq!(
            marked.base_timestamp(),
            90_000,
            "the base timestamp holds the horizon"
        );
        assert_eq!(marked.max_timestamp(), 1_040);
        assert_eq!(kept(&marked), kept(&original), "offsets and timestamps unchanged");
        // A later pass keeps the horizon it found, whatever horizon it would set, and filters around it.
        assert_eq!(
            filter_batch(&marked, |_| true, false, Some(99_999)).unwrap(),
            Filtered::Unchanged
        );
        let Filtered::Rebuilt(filtered) =
            filter_batch(&marked, |r| r.offset != 102, false, Some(99_999)).unwrap()
        else {
            panic!("the tombstone removed");
        };
        assert_eq!(filtered.delete_horizon_ms(), Some(90_000));
        assert_eq!(
            kept(&filtered)
                .iter()
                .map(|(offset, timestamp, _)| (*offset, *timestamp))
                .collect::<Vec<_>>(),
            [(100, 1_000), (101, 1_010), (103, 1_030), (104, 1_040)]
        );
        // Without a kept tombstone, no horizon: the batch is what it was.
        assert_eq!(
            filter_batch(&batch(Compression::None), |_| true, false, Some(90_000)).unwrap(),
            Filtered::Unchanged
        );
        let Filtered::Rebuilt(plain) =
            filter_batch(&original, |r| r.offset != 102, false, Some(90_000)).unwrap()
        else {
            panic!("the tombstone removed");
        };
        assert_eq!(plain.delete_horizon_ms(), None);
        // An empty header left for a producer carries no horizon, as Kafka writes it.
        let Filtered::Rebuilt(empty) = filter_batch(&marked, |_| false, true, None).unwrap() else {
            panic!("kept empty");
        };
        assert_eq!(empty.delete_horizon_ms(), None);
    }
}
