//! [`BatchBuffers`]: the buffers a list of batches was sliced from, so that a writer can write batches lying
//! back to back with one `write`.
//!
//! A log segment read (one `pread` of a range) or a fetch response (one record set) gives whole batches that are
//! slices of one buffer, back to back as they were stored. A writer given only the batches writes them with a
//! `writev` of one slice per batch; with 1 KiB batches that costs about a third more than one write of the same
//! bytes (`docs/benchmarks.md`, issue 16). Given the buffers too, [`BatchBuffers::contiguous`] finds the one
//! slice of a buffer that holds the batches, checked by where each batch's bytes lie, so the writer can write that
//! slice instead — without unsafe code and without copying.
//!
//! The buffers are a hint about where bytes lie, never content of their own: every byte written is a byte of the
//! batches, whatever the buffers hold, and batches that do not lie in one buffer back to back simply get no slice.

use bytes::Bytes;

use crate::batch::RecordBatch;

/// The buffers batches were sliced from; see the module docs. The default holds none (the batches lie wherever
/// they were built).
#[derive(Clone, Default)]
pub struct BatchBuffers {
    buffers: Vec<Bytes>,
}

impl BatchBuffers {
    /// Buffers the batches may lie in.
    pub fn new(buffers: Vec<Bytes>) -> Self {
        BatchBuffers { buffers }
    }

    /// Adds a buffer.
    pub fn push(&mut self, buffer: Bytes) {
        self.buffers.push(buffer);
    }

    /// How many buffers.
    pub fn len(&self) -> usize {
        self.buffers.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.buffers.is_empty()
    }

    /// The bytes of `batches` as one slice of a buffer, when they lie in it back to back in this order; `None`
    /// otherwise (or for no batches). The slice is exactly the batches' bytes: it starts where the first batch's
    /// bytes start, each next batch starts where the one before ends, and it ends inside the buffer.
    pub fn contiguous(&self, batches: &[RecordBatch]) -> Option<&[u8]> {
        let (buffer, range) = self.locate(batches)?;
        buffer.get(range)
    }

    /// [`contiguous`](Self::contiguous) as shared bytes (no copy): a fetch response's record set.
    pub fn contiguous_bytes(&self, batches: &[RecordBatch]) -> Option<Bytes> {
        let (buffer, range) = self.locate(batches)?;
        Some(buffer.slice(range))
    }

    /// The buffer holding `batches` back to back, and their range in it (checked to be inside it).
    fn locate(&self, batches: &[RecordBatch]) -> Option<(&Bytes, std::ops::Range<usize>)> {
        let first = batches.first()?.as_bytes().as_ptr() as usize;
        let buffer = self.buffers.iter().find(|buffer| {
            let start = buffer.as_ptr() as usize;
            first >= start && first - start < buffer.len()
        })?;
        let buffer_start = buffer.as_ptr() as usize;
        let start = first - buffer_start;
        let mut end = start;
        for batch in batches {
            if batch.as_bytes().as_ptr() as usize != buffer_start + end {
                return None;
            }
            end += batch.size();
        }
        // Within the buffer (checked here), the range's bytes are the batches' own: the same memory, read-only.
        (end <= buffer.len()).then_some((buffer, start..end))
    }
}

impl std::fmt::Debug for BatchBuffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchBuffers")
            .field("buffers", &self.buffers.len())
            .field("bytes", &self.buffers.iter().map(Bytes::len).sum::<usize>())
            .finish()
    }
}

/// Always equal: the buffers say where batches lie, not what they hold, so two lists of the same batches are
/// equal wherever their bytes are.
impl PartialEq for BatchBuffers {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for BatchBuffers {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::BatchBuilder;
    use crate::segment::BatchIter;

    fn batch(base_offset: i64) -> RecordBatch {
        let mut builder = BatchBuilder::new().base_offset(base_offset).producer(1, 0, 0);
        builder.add(0, None, Some(b"value"), &[]);
        builder.build().unwrap()
    }

    /// Three batches stored back to back in one buffer, and the buffer, as a segment read gives them.
    fn stored() -> (Vec<RecordBatch>, Bytes) {
        let built: Vec<RecordBatch> = (0..3).map(batch).collect();
        let buffer = Bytes::from(
            built
                .iter()
                .flat_map(|b| b.as_bytes().to_vec())
                .collect::<Vec<u8>>(),
        );
        let batches = BatchIter::new(buffer.clone())
            .map(|stored| stored.unwrap().batch)
            .collect();
        (batches, buffer)
    }

    #[test]
    fn batches_back_to_back_in_a_buffer_are_one_slice_of_exactly_their_bytes() {
        let (batches, buffer) = stored();
        let buffers = BatchBuffers::new(vec![Bytes::from_static(b"other"), buffer.clone()]);
        assert_eq!(buffers.contiguous(&batches), Some(&buffer[..]));
        let tail = &batches[1..];
        let expected: Vec<u8> = tail.iter().flat_map(|b| b.as_bytes().to_vec()).collect();
        assert_eq!(buffers.contiguous(tail), Some(&expected[..]));
        assert_eq!(
            buffers.contiguous(&batches[..1]),
            Some(&batches[0].as_bytes()[..])
        );
        let shared = buffers.contiguous_bytes(tail).unwrap();
        assert_eq!(shared, expected);
        assert_eq!(
            shared.as_ptr(),
            tail[0].as_bytes().as_ptr(),
            "a view of the buffer, not a copy"
        );
    }

    #[test]
    fn batches_out_of_order_with_a_gap_or_elsewhere_get_no_slice() {
        let (batches, buffer) = stored();
        let buffers = BatchBuffers::new(vec![buffer]);
        let swapped = [batches[1].clone(), batches[0].clone()];
        assert_eq!(buffers.contiguous(&swapped), None);
        let gap = [batches[0].clone(), batches[2].clone()];
        assert_eq!(buffers.contiguous(&gap), None);
        let copied = [batch(0), batch(1)];
        assert_eq!(buffers.contiguous(&copied), None);
        let mixed = [batches[0].clone(), batch(1)];
        assert_eq!(buffers.contiguous(&mixed), None);
        assert_eq!(buffers.contiguous(&[]), None);
        assert_eq!(BatchBuffers::default().contiguous(&batches), None);
    }

    #[test]
    fn batches_reaching_past_their_buffer_get_no_slice() {
        let (batches, buffer) = stored();
        // A buffer that ends inside the last batch (a shorter view of the same memory).
        let short = buffer.slice(..buffer.len() - 1);
        let buffers = BatchBuffers::new(vec![short]);
        assert_eq!(buffers.contiguous(&batches), None);
        assert_eq!(buffers.contiguous_bytes(&batches), None);
    }
}
