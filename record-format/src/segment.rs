//! Reading `.log` segment files: batches back to back.
//!
//! [`SegmentReader`] streams batches from any reader, yielding each with its file offset; [`BatchIter`] does the
//! same over bytes already in memory, without copying. Each batch is checked as log recovery checks it: length
//! bounds, magic, CRC. The first problem ends the iteration with a [`SegmentError`] that names the category,
//! the file offset of the bad batch and the valid prefix before it — for a torn tail, that prefix is what a
//! recovering log keeps. Allocation is never sized from a length field: a batch buffer grows only with bytes
//! actually read, and never past the configured maximum batch size.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use bytes::Bytes;

use crate::batch::{check_batch_prefix, RecordBatch, LOG_OVERHEAD};
use crate::error::{DecodeError, ErrorCategory};

/// Largest batch a reader accepts by default (the length field may claim up to 2 GiB).
pub const DEFAULT_MAX_BATCH_SIZE: usize = 256 * 1024 * 1024;

/// Kafka reads a batch's magic byte before judging its length: a message of the legacy formats (magic 0 or 1,
/// smaller than any v2 batch) is an old format to name as such, not a corrupt length.
fn legacy_format(error: DecodeError, magic: Option<u8>) -> DecodeError {
    match (error, magic) {
        (DecodeError::BatchLengthInvalid { length, .. }, Some(magic @ (0 | 1)))
            if length >= 5 && length < i64::from(crate::batch::MIN_BATCH_LENGTH) =>
        {
            DecodeError::UnsupportedMagic { magic: magic as i8 }
        }
        (error, _) => error,
    }
}

/// One batch of a segment with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentBatch {
    /// Byte position of the batch in the file.
    pub file_offset: u64,
    /// The batch (CRC-checked, unless the iterator is [`BatchIter::unverified`]).
    pub batch: RecordBatch,
}

/// Why reading a segment stopped early.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SegmentError {
    /// A malformed or torn batch.
    #[error("{error} (batch at file offset {file_offset}; {valid_batches} valid batches, {valid_bytes} valid bytes before it)")]
    Corrupt {
        /// Where the bad batch starts; also the length of the valid prefix.
        file_offset: u64,
        /// Batches read successfully before it.
        valid_batches: u64,
        /// Bytes of the valid prefix (equal to `file_offset`).
        valid_bytes: u64,
        /// What is wrong.
        error: DecodeError,
    },
    /// The underlying reader failed.
    #[error("I/O error at file offset {file_offset}: {source}")]
    Io {
        /// Position of the failed read.
        file_offset: u64,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl SegmentError {
    /// The category of a corrupt batch, `None` for I/O errors.
    pub fn category(&self) -> Option<ErrorCategory> {
        match self {
            SegmentError::Corrupt { error, .. } => Some(error.category()),
            SegmentError::Io { .. } => None,
        }
    }

    /// Where the problem is.
    pub fn file_offset(&self) -> u64 {
        match self {
            SegmentError::Corrupt { file_offset, .. } | SegmentError::Io { file_offset, .. } => *file_offset,
        }
    }
}

/// Streams the batches of a segment from a reader.
#[derive(Debug)]
pub struct SegmentReader<R> {
    reader: R,
    position: u64,
    /// Bytes left in the input when known (a file), so a torn tail is told from a huge length at once.
    remaining: Option<u64>,
    max_batch_size: usize,
    valid_batches: u64,
    done: bool,
}

impl SegmentReader<BufReader<File>> {
    /// Opens a segment file.
    pub fn open(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let file = File::open(path)?;
        let length = file.metadata()?.len();
        Ok(SegmentReader::new(
            BufReader::with_capacity(256 * 1024, file),
            Some(length),
        ))
    }
}

impl<R: Read> SegmentReader<R> {
    /// Reads batches from `reader`; `length` is the number of bytes it holds, if known.
    pub fn new(reader: R, length: Option<u64>) -> Self {
        SegmentReader {
            reader,
            position: 0,
            remaining: length,
            max_batch_size: DEFAULT_MAX_BATCH_SIZE,
            valid_batches: 0,
            done: false,
        }
    }

    /// Sets the largest batch accepted.
    pub fn with_max_batch_size(mut self, max_batch_size: usize) -> Self {
        self.max_batch_size = max_batch_size;
        self
    }

    fn corrupt(&self, error: DecodeError) -> SegmentError {
        SegmentError::Corrupt {
            file_offset: self.position,
            valid_batches: self.valid_batches,
            valid_bytes: self.position,
            error,
        }
    }

    /// Reads into `buf` until it is full or the input ends; returns the bytes read.
    fn read_up_to(&mut self, buf: &mut [u8]) -> Result<usize, SegmentError> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.reader.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(SegmentError::Io {
                        file_offset: self.position + filled as u64,
                        source,
                    })
                }
            }
        }
        Ok(filled)
    }

    fn read_batch(&mut self) -> Result<Option<SegmentBatch>, SegmentError> {
        let mut prefix = [0u8; LOG_OVERHEAD];
        let got = self.read_up_to(&mut prefix)?;
        if got == 0 {
            return Ok(None);
        }
        if got < LOG_OVERHEAD {
            return Err(self.corrupt(DecodeError::Truncated {
                needed: LOG_OVERHEAD as u64,
                available: got as u64,
            }));
        }
        let available = self.remaining.unwrap_or(u64::MAX);
        let total = match check_batch_prefix(&prefix, available, self.max_batch_size) {
            Ok(total) => total,
            Err(error) => {
                // Look at the magic byte (5 bytes on) before calling a short length corrupt, as Kafka does.
                let mut head = [0u8; 5];
                let magic = match self.read_up_to(&mut head) {
                    Ok(5) => Some(head[4]),
                    _ => None,
                };
                return Err(self.corrupt(legacy_format(error, magic)));
            }
        };
        // Grow with the bytes that arrive, never from the claimed length alone.
        let mut buf = Vec::with_capacity(total.min(64 * 1024));
        buf.extend_from_slice(&prefix);
        let body = (total - LOG_OVERHEAD) as u64;
        let read = (&mut self.reader)
            .take(body)
            .read_to_end(&mut buf)
            .map_err(|source| SegmentError::Io {
                file_offset: self.position,
                source,
            })?;
        if (read as u64) < body {
            return Err(self.corrupt(DecodeError::Truncated {
                needed: total as u64,
                available: buf.len() as u64,
            }));
        }
        let batch = RecordBatch::decode(Bytes::from(buf)).map_err(|error| self.corrupt(error))?;
        let found = SegmentBatch {
            file_offset: self.position,
            batch,
        };
        self.position += total as u64;
        self.remaining = self.remaining.map(|left| left - total as u64);
        self.valid_batches += 1;
        Ok(Some(found))
    }

    /// Bytes consumed by the batches returned so far.
    pub fn position(&self) -> u64 {
        self.position
    }
}

impl<R: Read> Iterator for SegmentReader<R> {
    type Item = Result<SegmentBatch, SegmentError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = self.read_batch().transpose();
        if !matches!(next, Some(Ok(_))) {
            self.done = true;
        }
        next
    }
}

/// Iterates the batches in a buffer without copying them (each batch is a slice of `bytes`).
#[derive(Debug, Clone)]
pub struct BatchIter {
    bytes: Bytes,
    position: usize,
    max_batch_size: usize,
    valid_batches: u64,
    done: bool,
    verify_crc: bool,
}

impl BatchIter {
    /// Iterates the batches of `bytes`, each CRC-checked.
    pub fn new(bytes: Bytes) -> Self {
        BatchIter {
            bytes,
            position: 0,
            max_batch_size: DEFAULT_MAX_BATCH_SIZE,
            valid_batches: 0,
            done: false,
            verify_crc: true,
        }
    }

    /// Splits `bytes` into batches checking only each batch's length and magic ([`RecordBatch::parse`]): for a
    /// caller that verifies every batch's CRC itself next (a produce request's batch goes to
    /// `PartitionLog::append_as_leader`, which does), so the checksum is computed once, not twice.
    pub fn unverified(bytes: Bytes) -> Self {
        BatchIter {
            verify_crc: false,
            ..Self::new(bytes)
        }
    }

    fn next_batch(&mut self) -> Result<Option<SegmentBatch>, DecodeError> {
        let rest = &self.bytes[self.position..];
        if rest.is_empty() {
            return Ok(None);
        }
        let Some(prefix) = rest.first_chunk::<LOG_OVERHEAD>() else {
            return Err(DecodeError::Truncated {
                needed: LOG_OVERHEAD as u64,
                available: rest.len() as u64,
            });
        };
        let total = check_batch_prefix(prefix, rest.len() as u64, self.max_batch_size)
            .map_err(|error| legacy_format(error, rest.get(LOG_OVERHEAD + 4).copied()))?;
        let bytes = self.bytes.slice(self.position..self.position + total);
        let batch = if self.verify_crc {
            RecordBatch::decode(bytes)?
        } else {
            RecordBatch::parse(bytes)?
        };
        let found = SegmentBatch {
            file_offset: self.position as u64,
            batch,
        };
        self.position += total;
        self.valid_batches += 1;
        Ok(Some(found))
    }
}

impl Iterator for BatchIter {
    type Item = Result<SegmentBatch, SegmentError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_batch() {
            Ok(Some(batch)) => Some(Ok(batch)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(error) => {
                self.done = true;
                Some(Err(SegmentError::Corrupt {
                    file_offset: self.position as u64,
                    valid_batches: self.valid_batches,
                    valid_bytes: self.position as u64,
                    error,
                }))
            }
        }
    }
}

#[cfg(test)]
mod unverified_tests {
    use super::*;
    use crate::BatchBuilder;

    #[test]
    fn unverified_iteration_leaves_the_crc_to_the_caller_and_new_checks_it() {
        let mut builder = BatchBuilder::new();
        builder.add(0, None, Some(b"value"), &[]);
        let mut bytes = builder.build().unwrap().into_bytes().to_vec();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        let bytes = Bytes::from(bytes);
        let batch = BatchIter::unverified(bytes.clone())
            .next()
            .unwrap()
            .unwrap()
            .batch;
        assert!(batch.verify_crc().is_err());
        assert!(matches!(
            BatchIter::new(bytes).next(),
            Some(Err(SegmentError::Corrupt {
                error: DecodeError::CrcMismatch { .. },
                ..
            }))
        ));
    }
}
