//! Batches whose CRCs were checked, with the proof in the type.
//!
//! A follower (a mirror destination) appends batches as another log stored them, and Kafka checks each one's
//! CRC-32C before it does. [`CrcCheckedBatches`] can only be made by [`CrcCheckedBatches::check`], so a caller
//! may check where the batches arrive (on another thread, while the previous fetch is written; ADR 0020) and hand
//! the log batches it need not check again. Nothing can change a checked batch: the type gives out shared
//! references only, and [`CrcCheckedBatches::into_parts`] gives up the proof with the ownership.
//!
//! [`SharedCrcCheck`] is the same check split between threads (ADR 0021): whoever holds a handle checks chunks
//! of batches until none is left to claim, and [`SharedCrcCheck::finish`] makes the proof once every batch was
//! checked by someone, with the same answer as [`CrcCheckedBatches::check`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::batch::RecordBatch;
use crate::buffers::BatchBuffers;
use crate::error::DecodeError;

/// Batches whose stored CRC matched their bytes when [`check`](Self::check) made this value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrcCheckedBatches {
    batches: Vec<RecordBatch>,
    /// Their bytes in total, summed while each batch was checked (its header in cache then).
    size: usize,
    /// The buffers they were sliced from, if known ([`with_buffers`](Self::with_buffers)).
    buffers: BatchBuffers,
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
        Ok(CrcCheckedBatches {
            batches,
            size,
            buffers: BatchBuffers::default(),
        })
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

    /// The same batches, known to be sliced from `buffers` (which a writer may use to write them with one
    /// `write`; the proof is about the batches' bytes, wherever they lie).
    pub fn with_buffers(mut self, buffers: BatchBuffers) -> Self {
        self.buffers = buffers;
        self
    }

    /// The batches, without the proof, and the buffers they were sliced from.
    pub fn into_parts(self) -> (Vec<RecordBatch>, BatchBuffers) {
        (self.batches, self.buffers)
    }
}

/// A CRC check of a list of batches that several threads share: each [`help`](Self::help)s by claiming chunks
/// of [`CHUNK`](Self::CHUNK) batches until none is left, and one of them [`finish`](Self::finish)es.
///
/// A mirror fetching ahead (ADR 0020) checks a fetched range on the fetching thread; when that thread is the
/// slower of the two, the writing thread, done with the range before, checks the rest instead of waiting.
#[derive(Debug)]
pub struct SharedCrcCheck {
    batches: Vec<RecordBatch>,
    /// The first batch of the next chunk nobody has claimed.
    next_chunk: AtomicUsize,
    progress: Mutex<Progress>,
    /// Signalled when the last claimed chunk is done.
    all_checked: Condvar,
}

/// What the helpers have found so far.
#[derive(Debug, Default)]
struct Progress {
    /// Batches of finished chunks (a chunk with a mismatch counts whole: it is finished too).
    checked: usize,
    /// Bytes of the batches that matched.
    size: usize,
    /// The mismatch with the lowest index.
    first_failure: Option<CrcCheckError>,
}

impl SharedCrcCheck {
    /// Batches per claim: 32 KiB of 1 KiB batches, about 10 µs of checking — small enough that a helper arriving
    /// late still finds work, large enough that claiming costs nothing next to it.
    pub const CHUNK: usize = 32;

    /// A check of `batches` that nobody has started.
    pub fn new(batches: Vec<RecordBatch>) -> Arc<Self> {
        Arc::new(SharedCrcCheck {
            batches,
            next_chunk: AtomicUsize::new(0),
            progress: Mutex::new(Progress::default()),
            all_checked: Condvar::new(),
        })
    }

    /// How many batches are checked (by everyone together).
    pub fn len(&self) -> usize {
        self.batches.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// Checks chunks until none is left to claim. Others may still be checking chunks they claimed.
    pub fn help(&self) {
        let count = self.batches.len();
        loop {
            let start = self.next_chunk.fetch_add(Self::CHUNK, Ordering::Relaxed);
            if start >= count {
                return;
            }
            let end = count.min(start + Self::CHUNK);
            let mut size = 0;
            let mut failure = None;
            for (index, batch) in self.batches[start..end].iter().enumerate() {
                match batch.verify_crc() {
                    Ok(()) => size += batch.size(),
                    Err(source) => {
                        failure = Some(CrcCheckError {
                            index: start + index,
                            count,
                            base_offset: batch.base_offset(),
                            source,
                        });
                        break;
                    }
                }
            }
            let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
            progress.checked += end - start;
            progress.size += size;
            if let Some(failure) = failure {
                if progress
                    .first_failure
                    .as_ref()
                    .is_none_or(|first| failure.index < first.index)
                {
                    progress.first_failure = Some(failure);
                }
            }
            if progress.checked == count {
                self.all_checked.notify_all();
            }
        }
    }

    /// Helps, waits for the chunks others claimed (microseconds: a chunk at most) and for their handles to be
    /// dropped, then gives the batches with their proof, or the mismatch with the lowest index — what
    /// [`CrcCheckedBatches::check`] answers for the same batches.
    pub fn finish(self: Arc<Self>) -> Result<CrcCheckedBatches, CrcCheckError> {
        self.help();
        let (size, first_failure) = {
            let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
            while progress.checked < self.batches.len() {
                progress = self
                    .all_checked
                    .wait(progress)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            (progress.size, progress.first_failure.take())
        };
        if let Some(failure) = first_failure {
            return Err(failure);
        }
        // Every chunk is done; a helper still holding a handle is on its way out of `help`.
        let mut shared = self;
        let check = loop {
            match Arc::try_unwrap(shared) {
                Ok(check) => break check,
                Err(still_shared) => {
                    shared = still_shared;
                    std::thread::yield_now();
                }
            }
        };
        Ok(CrcCheckedBatches {
            batches: check.batches,
            size,
            buffers: BatchBuffers::default(),
        })
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

    fn damaged(base_offset: i64) -> RecordBatch {
        let mut bytes = batch(base_offset).as_bytes().to_vec();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        RecordBatch::parse(bytes.into()).unwrap()
    }

    /// `batches` checked by `helpers` threads besides the finishing one.
    fn shared_check(batches: Vec<RecordBatch>, helpers: usize) -> Result<CrcCheckedBatches, CrcCheckError> {
        let check = SharedCrcCheck::new(batches);
        std::thread::scope(|scope| {
            for _ in 0..helpers {
                let handle = Arc::clone(&check);
                scope.spawn(move || handle.help());
            }
            check.finish()
        })
    }

    #[test]
    fn a_shared_check_answers_what_one_thread_answers() {
        let batches: Vec<RecordBatch> = (0..200).map(batch).collect();
        for helpers in 0..3 {
            assert_eq!(
                shared_check(batches.clone(), helpers),
                CrcCheckedBatches::check(batches.clone())
            );
        }
        assert_eq!(shared_check(Vec::new(), 1), Ok(CrcCheckedBatches::default()));
    }

    #[test]
    fn a_shared_check_names_the_first_damaged_batch_whoever_found_it() {
        // Damage in two chunks: whichever thread checks the later one first, the earlier batch is the answer.
        let mut batches: Vec<RecordBatch> = (0..200).map(batch).collect();
        batches[150] = damaged(150);
        batches[40] = damaged(40);
        for helpers in 0..3 {
            let error = shared_check(batches.clone(), helpers).unwrap_err();
            assert_eq!((error.index, error.count, error.base_offset), (40, 200, 40));
            assert_eq!(Err(error), CrcCheckedBatches::check(batches.clone()));
        }
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
