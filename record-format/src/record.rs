//! Lazy decoding of the records inside a batch.
//!
//! [`Records`] is the records section ready to iterate: borrowed from the batch when uncompressed, inflated into
//! one buffer when compressed. [`RecordIter`] decodes one [`Record`] per step; a record's key, value and headers
//! are slices of that section, so iterating an uncompressed batch allocates nothing at all.
//!
//! The iterator holds the header's record count to account: it yields exactly `recordsCount` records, and a
//! section with fewer records, or with bytes left after the last one, ends in
//! [`DecodeError::RecordCountMismatch`]. Nothing is ever sized from the count.
//!
//! Record layout (`kafka-semantics` §1.1): `length varint | attributes i8 | timestampDelta varlong |
//! offsetDelta varint | keyLength varint, key | valueLength varint, value | headerCount varint |
//! (headerKeyLength varint, key, headerValueLength varint, value)*`.

use std::borrow::Cow;

use crate::batch::{increment_sequence, RecordBatch, TimestampType, NO_SEQUENCE};
use crate::compression::{decompress, Compression, DecodeLimits};
use crate::error::DecodeError;
use crate::varint::{read_varint, read_varlong};

/// One decoded record; byte fields borrow from the records section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Byte length of the record body (the stored length varint).
    pub length: i32,
    /// Record attributes (unused by Kafka, always 0 in practice).
    pub attributes: i8,
    /// `timestampDelta` as stored.
    pub timestamp_delta: i64,
    /// `offsetDelta` as stored.
    pub offset_delta: i32,
    /// Absolute offset: base offset + offset delta.
    pub offset: i64,
    /// Effective timestamp: base + delta for CreateTime, the batch max timestamp for LogAppendTime.
    pub timestamp: i64,
    /// Sequence number: base sequence + offset delta (wrapping), or −1 without a base sequence.
    pub sequence: i32,
    /// Key, `None` for a null key (distinct from an empty one).
    pub key: Option<&'a [u8]>,
    /// Value, `None` for a null value (distinct from an empty one).
    pub value: Option<&'a [u8]>,
    /// Headers in stored order, duplicates kept.
    pub headers: Headers<'a>,
    /// The whole encoded record, length varint included.
    pub encoded: &'a [u8],
}

/// A record's headers, validated when the record was decoded and iterated lazily.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headers<'a> {
    raw: &'a [u8],
    count: usize,
}

/// One header: the key is raw bytes (Kafka requires UTF-8; see [`Header::key_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    /// Header key bytes.
    pub key: &'a [u8],
    /// Header value, `None` for null.
    pub value: Option<&'a [u8]>,
}

impl<'a> Header<'a> {
    /// The key as UTF-8, if it is.
    pub fn key_str(&self) -> Option<&'a str> {
        std::str::from_utf8(self.key).ok()
    }
}

impl<'a> Headers<'a> {
    /// Number of headers.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when the record has no headers.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Iterates the headers in stored order.
    pub fn iter(&self) -> HeaderIter<'a> {
        HeaderIter {
            raw: self.raw,
            pos: 0,
            remaining: self.count,
        }
    }
}

impl<'a> IntoIterator for Headers<'a> {
    type Item = Header<'a>;
    type IntoIter = HeaderIter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Iterator over [`Headers`].
#[derive(Debug, Clone)]
pub struct HeaderIter<'a> {
    raw: &'a [u8],
    pos: usize,
    remaining: usize,
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = Header<'a>;

    fn next(&mut self) -> Option<Header<'a>> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        // The headers were validated when the record was decoded, so these reads cannot fail; if they did,
        // the iteration would simply end.
        let key = read_bytes_field(self.raw, &mut self.pos).ok()??;
        let value = read_bytes_field(self.raw, &mut self.pos).ok()?;
        Some(Header { key, value })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

/// Reads `length varint` + bytes; −1 is null, anything below is an error.
#[inline(always)]
fn read_bytes_field<'a>(buf: &'a [u8], pos: &mut usize) -> Result<Option<&'a [u8]>, DecodeError> {
    let at = *pos;
    let length = read_varint(buf, pos)?;
    if length == -1 {
        return Ok(None);
    }
    let Ok(length) = usize::try_from(length) else {
        return Err(DecodeError::corrupt(at, format!("negative length {length}")));
    };
    let end = pos
        .checked_add(length)
        .filter(|&end| end <= buf.len())
        .ok_or_else(|| {
            DecodeError::corrupt(at, format!("length {length} runs past the end of the record"))
        })?;
    let bytes = &buf[*pos..end];
    *pos = end;
    Ok(Some(bytes))
}

/// What a record needs from its batch header to compute absolute values.
#[derive(Debug, Clone, Copy)]
struct BatchContext {
    base_offset: i64,
    base_timestamp: i64,
    max_timestamp: i64,
    base_sequence: i32,
    log_append_time: bool,
}

/// The records section of one batch, ready to iterate.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    section: Cow<'a, [u8]>,
    declared_count: i32,
    context: BatchContext,
}

impl<'a> Records<'a> {
    pub(crate) fn new(batch: &'a RecordBatch, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        let attributes = batch.attributes();
        let codec = attributes.compression()?;
        let stored = batch.records_section();
        let section = match codec {
            Compression::None => Cow::Borrowed(stored),
            _ => Cow::Owned(decompress(codec, stored, limits)?),
        };
        Ok(Records {
            section,
            declared_count: batch.record_count(),
            context: BatchContext {
                base_offset: batch.base_offset(),
                base_timestamp: batch.base_timestamp(),
                max_timestamp: batch.max_timestamp(),
                base_sequence: batch.base_sequence(),
                log_append_time: attributes.timestamp_type() == TimestampType::LogAppendTime,
            },
        })
    }

    /// The uncompressed records section.
    pub fn section(&self) -> &[u8] {
        &self.section
    }

    /// True when the section is the batch's own bytes (uncompressed), false when it was inflated.
    pub fn is_borrowed(&self) -> bool {
        matches!(self.section, Cow::Borrowed(_))
    }

    /// The record count the header declares.
    pub fn declared_count(&self) -> i32 {
        self.declared_count
    }

    /// Iterates the records; the iterator ends after the first error.
    pub fn iter(&self) -> RecordIter<'_> {
        RecordIter {
            section: &self.section,
            pos: 0,
            remaining: self.declared_count.max(0) as usize,
            declared_count: self.declared_count,
            context: self.context,
            done: false,
        }
    }

    /// Decodes every record, returning how many there were, or the first error.
    pub fn validate(&self) -> Result<usize, DecodeError> {
        let mut count = 0;
        for record in self.iter() {
            record?;
            count += 1;
        }
        Ok(count)
    }

    /// Decodes every record as [`validate`](Self::validate) does and checks that the offset deltas are the
    /// records' positions, 0, 1, 2, … — as a producer numbers them, and as Kafka requires of a batch from a
    /// client. The walk happens here, where decoding a record can leave out the fields nobody reads (a partition
    /// log makes this check on every client append).
    pub fn check_offset_deltas(&self) -> Result<OffsetDeltas, DecodeError> {
        let mut records = 0usize;
        for record in self.iter() {
            let offset_delta = record?.offset_delta;
            if usize::try_from(offset_delta).ok() != Some(records) {
                return Ok(OffsetDeltas::OutOfPlace {
                    position: records,
                    offset_delta,
                });
            }
            records += 1;
        }
        Ok(OffsetDeltas::InOrder { records })
    }
}

/// What [`Records::check_offset_deltas`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetDeltas {
    /// Every record decoded and sits at the position its offset delta names; how many there are.
    InOrder {
        /// The number of records.
        records: usize,
    },
    /// The first record whose offset delta is not its position (the records before it decoded).
    OutOfPlace {
        /// Its position in the batch (0-based).
        position: usize,
        /// Its offset delta as stored.
        offset_delta: i32,
    },
}

impl<'r> IntoIterator for &'r Records<'_> {
    type Item = Result<Record<'r>, DecodeError>;
    type IntoIter = RecordIter<'r>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Decodes records one at a time; see the module docs for the count rules.
#[derive(Debug, Clone)]
pub struct RecordIter<'a> {
    section: &'a [u8],
    pos: usize,
    remaining: usize,
    declared_count: i32,
    context: BatchContext,
    done: bool,
}

impl<'a> RecordIter<'a> {
    fn count_mismatch(&self, found: String) -> DecodeError {
        DecodeError::RecordCountMismatch {
            declared: self.declared_count,
            found,
        }
    }

    // Inlined, so that a caller reading a few fields of each record (`check_offset_deltas`) leaves the rest
    // undecoded rather than building whole records.
    #[inline]
    fn decode_one(&mut self) -> Result<Record<'a>, DecodeError> {
        let buf = self.section;
        let start = self.pos;
        let mut pos = start;
        let length = read_varint(buf, &mut pos)?;
        let body_start = pos;
        let body_end = usize::try_from(length)
            .ok()
            .and_then(|length| body_start.checked_add(length))
            .filter(|&end| end <= buf.len())
            .ok_or_else(|| {
                DecodeError::corrupt(start, format!("record length {length} runs past the section"))
            })?;
        let body = &buf[..body_end];
        let Some(&attributes) = body.get(pos) else {
            return Err(DecodeError::corrupt(
                pos,
                "record body too short for its attributes",
            ));
        };
        pos += 1;
        let timestamp_delta = read_varlong(body, &mut pos)?;
        let offset_delta = read_varint(body, &mut pos)?;
        let key = read_bytes_field(body, &mut pos)?;
        let value = read_bytes_field(body, &mut pos)?;
        let header_count_at = pos;
        let header_count = read_varint(body, &mut pos)?;
        let header_count = usize::try_from(header_count)
            .ok()
            .filter(|&count| count <= body_end - pos)
            .ok_or_else(|| {
                DecodeError::corrupt(header_count_at, format!("invalid header count {header_count}"))
            })?;
        let headers_start = pos;
        for _ in 0..header_count {
            let key_at = pos;
            if read_bytes_field(body, &mut pos)?.is_none() {
                return Err(DecodeError::corrupt(key_at, "null header key"));
            }
            read_bytes_field(body, &mut pos)?;
        }
        if pos != body_end {
            return Err(DecodeError::corrupt(
                start,
                format!(
                    "record length {length} but its fields take {} bytes",
                    pos - body_start
                ),
            ));
        }
        self.pos = body_end;
        let context = &self.context;
        let timestamp = if context.log_append_time {
            context.max_timestamp
        } else {
            context.base_timestamp.wrapping_add(timestamp_delta)
        };
        let sequence = if context.base_sequence == NO_SEQUENCE {
            NO_SEQUENCE
        } else {
            increment_sequence(context.base_sequence, offset_delta)
        };
        Ok(Record {
            length,
            attributes: attributes as i8,
            timestamp_delta,
            offset_delta,
            offset: context.base_offset.wrapping_add(i64::from(offset_delta)),
            timestamp,
            sequence,
            key,
            value,
            headers: Headers {
                raw: &buf[headers_start..body_end],
                count: header_count,
            },
            encoded: &buf[start..body_end],
        })
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<Record<'a>, DecodeError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.declared_count < 0 {
            self.done = true;
            return Some(Err(self.count_mismatch("a negative count".into())));
        }
        if self.remaining == 0 {
            self.done = true;
            let left = self.section.len() - self.pos;
            return (left > 0)
                .then(|| Err(self.count_mismatch(format!("{left} bytes after the last declared record"))));
        }
        if self.pos == self.section.len() {
            self.done = true;
            let found = self.declared_count as usize - self.remaining;
            return Some(Err(self.count_mismatch(format!("only {found} records present"))));
        }
        self.remaining -= 1;
        let record = self.decode_one();
        if record.is_err() {
            self.done = true;
        }
        Some(record)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            (0, Some(0))
        } else {
            (0, Some(self.remaining + 1))
        }
    }
}
