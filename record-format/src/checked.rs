//! Batches whose CRCs were checked, with the proof in the type.
//!
//! A follower (a mirror destination) appends batches as another log stored them, and Kafka checks each one's
//! CRC-32C before it does. [`CrcCheckedBatches`] can only be made by [`CrcCheckedBatches::check`], so a caller
//! may check where the batches arrive (on another thread, while the previous fetch is written; ADR 0020) and hand
//! the log batches it need not check again. Nothing can change a checked batch: the type gives out shared
//! references only, and [`CrcCheckedBatches::into_vec`] gives up the proof with the ownership.

use crate::batch::RecordBatch;
use crate::error::DecodeError;

/// Batches whose stored CRC matched their bytes when [`check`](Self::check) made this value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrcCheckedBatches {
    batches: Vec<RecordBatch>,
    /// Their bytes in total, summed while each batch was checked (its header in cache then).
    size: usize,
}

/// A batch whose CRC did not match, and where it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("batch {index} of {count} (base offset {base_offset}): {source}")]
pub struct CrcCheckError {
    /// Position of the batch in the checked list.
    pub index: usize,
    /// How many batches were checked.
    pub count: usize,
    /// The batch's base offset.
    pub base_offset: i64,
    /// The mismatch.
    pub source: DecodeError,
}

impl CrcCheckedBatches {
    /// Checks every batch's CRC-32C; the first mismatch is the error.
    pub fn check(batches: Vec<RecordBatch>) -> Result<Self, CrcCheckError> {
        let count = batches.len();
        let mut size = 0;
        for (index, batch) in batches.iter().enumerate() {
            batch.verify_crc().map_err(|source| CrcCheckError {
                index,
                count,
                base_offset: batch.base_offset(),
                source,
            })?;
            size += batch.size();
        }
        Ok(CrcCheckedBatches { batches, size })
    }

    /// The batches, in order.
    pub fn as_slice(&self) -> &[RecordBatch] {
        &self.batches
    }

    /// How many batches.
    pub fn len(&self) -> usize {
        self.batches.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// Their bytes in total.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The batches, without the proof.
    pub fn into_vec(self) -> Vec<RecordBatch> {
        self.batches
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BatchBuilder;

    fn batch(base_offset: i64) -> RecordBatch {
        let mut builder = BatchBuilder::new().base_offset(base_offset);
        builder.add(0, None, Some(b"value"), &[]);
        builder.build().unwrap()
    }

    #[test]
    fn intact_batches_pass_the_check_in_order() {
        let checked = CrcCheckedBatches::check(vec![batch(0), batch(1)]).unwrap();
        assert_eq!(checked.len(), 2);
        let offsets: Vec<i64> = checked.as_slice().iter().map(RecordBatch::base_offset).collect();
        assert_eq!(offsets, [0, 1]);
        assert_eq!(checked.size(), 2 * batch(0).size());
    }

    #[test]
    fn a_flipped_bit_anywhere_the_crc_covers_names_the_batch() {
        let intact = batch(7);
        let mut bytes = intact.as_bytes().to_vec();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let damaged = RecordBatch::parse(bytes.into()).unwrap();
        let error = CrcCheckedBatches::check(vec![batch(6), damaged]).unwrap_err();
        assert_eq!((error.index, error.count, error.base_offset), (1, 2, 7));
        assert!(matches!(error.source, DecodeError::CrcMismatch { .. }), "{error}");
    }
}
