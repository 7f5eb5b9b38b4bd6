//! The zero-copy view of one v2 record batch.
//!
//! A [`RecordBatch`] owns a [`Bytes`] holding exactly one batch (the 12-byte offset + length prefix included) and
//! reads header fields straight from it. Constructing one checks the structure (length bounds, magic 2);
//! [`RecordBatch::decode`] also checks the CRC. The records are decoded lazily by [`RecordBatch::records`].
//!
//! Layout (big-endian; `kafka-semantics` §1):
//!
//! ```text
//! 0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 | 16 magic i8 | 17 crc u32
//! 21 attributes i16 | 23 lastOffsetDelta i32 | 27 baseTimestamp i64 | 35 maxTimestamp i64
//! 43 producerId i64 | 51 producerEpoch i16 | 53 baseSequence i32 | 57 recordsCount i32 | 61 records…
//! ```
//! The CRC covers bytes 21..end, so base offset and partition leader epoch can be rewritten in place;
//! the producer fields cannot without a new CRC.

use bytes::{Bytes, BytesMut};

use crate::compression::{Compression, DecodeLimits};
use crate::error::DecodeError;
use crate::record::Records;

/// Byte positions of the v2 header fields.
pub mod offsets {
    /// `baseOffset` i64.
    pub const BASE_OFFSET: usize = 0;
    /// `batchLength` i32.
    pub const BATCH_LENGTH: usize = 8;
    /// `partitionLeaderEpoch` i32.
    pub const PARTITION_LEADER_EPOCH: usize = 12;
    /// `magic` i8.
    pub const MAGIC: usize = 16;
    /// `crc` u32.
    pub const CRC: usize = 17;
    /// `attributes` i16; the CRC starts here.
    pub const ATTRIBUTES: usize = 21;
    /// `lastOffsetDelta` i32.
    pub const LAST_OFFSET_DELTA: usize = 23;
    /// `baseTimestamp` i64.
    pub const BASE_TIMESTAMP: usize = 27;
    /// `maxTimestamp` i64.
    pub const MAX_TIMESTAMP: usize = 35;
    /// `producerId` i64.
    pub const PRODUCER_ID: usize = 43;
    /// `producerEpoch` i16.
    pub const PRODUCER_EPOCH: usize = 51;
    /// `baseSequence` i32.
    pub const BASE_SEQUENCE: usize = 53;
    /// `recordsCount` i32.
    pub const RECORDS_COUNT: usize = 57;
    /// First byte of the records section.
    pub const RECORDS: usize = 61;
}

/// Bytes before the length field's payload: base offset (8) + length (4).
pub const LOG_OVERHEAD: usize = 12;
/// Size of a v2 batch header including the log overhead.
pub const RECORD_BATCH_OVERHEAD: usize = offsets::RECORDS;
/// Smallest valid `batchLength` (a header with no records).
pub const MIN_BATCH_LENGTH: i32 = (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32;
/// The only magic this crate reads and writes.
pub const MAGIC_V2: i8 = 2;
/// `producerId` of batches without one.
pub const NO_PRODUCER_ID: i64 = -1;
/// `producerEpoch` of batches without one.
pub const NO_PRODUCER_EPOCH: i16 = -1;
/// `baseSequence` of batches without one.
pub const NO_SEQUENCE: i32 = -1;
/// `partitionLeaderEpoch` when none was stamped.
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;

/// How record timestamps are to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimestampType {
    /// Producer-supplied timestamps (attribute bit 3 clear).
    CreateTime,
    /// The broker's append time, stored as the batch `maxTimestamp` (bit 3 set).
    LogAppendTime,
}

impl TimestampType {
    /// Kafka's display name (`CreateTime`, `LogAppendTime`).
    pub fn name(self) -> &'static str {
        match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

/// The batch attributes (`i16`; Kafka reads only the low byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attributes(pub i16);

impl Attributes {
    const COMPRESSION_MASK: i16 = 0x07;
    const TIMESTAMP_TYPE: i16 = 0x08;
    const TRANSACTIONAL: i16 = 0x10;
    const CONTROL: i16 = 0x20;
    const DELETE_HORIZON: i16 = 0x40;

    /// Builds attributes from their parts.
    pub fn new(
        compression: Compression,
        timestamp_type: TimestampType,
        transactional: bool,
        control: bool,
    ) -> Self {
        let mut raw = i16::from(compression.id());
        if timestamp_type == TimestampType::LogAppendTime {
            raw |= Self::TIMESTAMP_TYPE;
        }
        if transactional {
            raw |= Self::TRANSACTIONAL;
        }
        if control {
            raw |= Self::CONTROL;
        }
        Attributes(raw)
    }

    /// Codec bits 0–2 as stored (0–7; only 0–4 are assigned).
    #[inline]
    pub fn compression_id(self) -> u8 {
        (self.0 & Self::COMPRESSION_MASK) as u8
    }

    /// The codec, or [`DecodeError::UnsupportedCompression`] for ids 5–7.
    #[inline]
    pub fn compression(self) -> Result<Compression, DecodeError> {
        Compression::from_id(self.compression_id())
    }

    /// Bit 3.
    #[inline]
    pub fn timestamp_type(self) -> TimestampType {
        if self.0 & Self::TIMESTAMP_TYPE != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Bit 4.
    #[inline]
    pub fn is_transactional(self) -> bool {
        self.0 & Self::TRANSACTIONAL != 0
    }

    /// Bit 5.
    #[inline]
    pub fn is_control(self) -> bool {
        self.0 & Self::CONTROL != 0
    }

    /// Bit 6: `baseTimestamp` holds the delete horizon set by the log cleaner.
    #[inline]
    pub fn has_delete_horizon(self) -> bool {
        self.0 & Self::DELETE_HORIZON != 0
    }

    /// These attributes with bit 6 set or cleared.
    #[inline]
    pub fn with_delete_horizon(self, set: bool) -> Self {
        if set {
            Attributes(self.0 | Self::DELETE_HORIZON)
        } else {
            Attributes(self.0 & !Self::DELETE_HORIZON)
        }
    }
}

/// Adds `delta` to a sequence number, wrapping past `i32::MAX` to 0 as Kafka does.
///
/// The arithmetic wraps like Java's `int` so that corrupt input (a negative delta) gives Kafka's answer instead
/// of an overflow.
pub fn increment_sequence(sequence: i32, delta: i32) -> i32 {
    if sequence > i32::MAX.wrapping_sub(delta) {
        delta
            .wrapping_sub(i32::MAX.wrapping_sub(sequence))
            .wrapping_sub(1)
    } else {
        sequence.wrapping_add(delta)
    }
}

/// Subtracts `delta` from a sequence number, wrapping below 0 to `i32::MAX` as Kafka does (Java `int`
/// arithmetic, see [`increment_sequence`]).
pub fn decrement_sequence(sequence: i32, delta: i32) -> i32 {
    if sequence < delta {
        i32::MAX
            .wrapping_sub(delta.wrapping_sub(sequence))
            .wrapping_add(1)
    } else {
        sequence.wrapping_sub(delta)
    }
}

#[cfg(test)]
mod sequence_tests {
    use super::*;

    #[test]
    fn sequences_wrap_past_i32_max_to_zero_and_back() {
        assert_eq!(increment_sequence(i32::MAX - 10, 20), 9);
        assert_eq!(decrement_sequence(9, 20), i32::MAX - 10);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(5, 3), 8);
    }

    #[test]
    fn corrupt_negative_deltas_do_not_overflow() {
        let _ = increment_sequence(0, i32::MIN);
        let _ = increment_sequence(i32::MAX, i32::MIN);
        let _ = decrement_sequence(i32::MIN, i32::MAX);
        let _ = decrement_sequence(0, i32::MIN);
    }
}

#[inline(always)]
fn be_i16(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([buf[at], buf[at + 1]])
}

#[inline(always)]
fn be_i32(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

#[inline(always)]
fn be_i64(buf: &[u8], at: usize) -> i64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&buf[at..at + 8]);
    i64::from_be_bytes(raw)
}

/// Checks the 12-byte log prefix of a batch: returns its total size (`12 + batchLength`).
///
/// `available` is the number of bytes the caller has for this batch (prefix included); `max_batch_size` bounds
/// the total size. Order of checks: minimum length, then availability (a torn tail), then the maximum.
pub fn check_batch_prefix(
    prefix: &[u8; LOG_OVERHEAD],
    available: u64,
    max_batch_size: usize,
) -> Result<usize, DecodeError> {
    let length = i32::from_be_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]);
    if length < MIN_BATCH_LENGTH {
        return Err(DecodeError::BatchLengthInvalid {
            length: i64::from(length),
            min: i64::from(MIN_BATCH_LENGTH),
            max: max_batch_size.saturating_sub(LOG_OVERHEAD) as i64,
        });
    }
    let total = LOG_OVERHEAD as u64 + length as u64;
    if total > available {
        return Err(DecodeError::Truncated {
            needed: total,
            available,
        });
    }
    if total > max_batch_size as u64 {
        return Err(DecodeError::BatchLengthInvalid {
            length: i64::from(length),
            min: i64::from(MIN_BATCH_LENGTH),
            max: max_batch_size.saturating_sub(LOG_OVERHEAD) as i64,
        });
    }
    Ok(total as usize)
}

/// One v2 record batch over shared bytes; header accessors read in place.
///
/// Invariant: `buf.len() == 12 + batchLength >= 61` and magic is 2 (checked by every constructor). The CRC is
/// checked by [`RecordBatch::decode`] and [`RecordBatch::verify_crc`], not by [`RecordBatch::parse`].
#[derive(Clone, PartialEq, Eq)]
pub struct RecordBatch {
    buf: Bytes,
}

impl std::fmt::Debug for RecordBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordBatch")
            .field("base_offset", &self.base_offset())
            .field("last_offset_delta", &self.last_offset_delta())
            .field("size", &self.size())
            .field("attributes", &self.attributes())
            .field("producer_id", &self.producer_id())
            .field("producer_epoch", &self.producer_epoch())
            .field("base_sequence", &self.base_sequence())
            .field("record_count", &self.record_count())
            .finish()
    }
}

impl RecordBatch {
    /// Checks structure (length and magic) without the CRC. `buf` must hold exactly one batch.
    pub fn parse(buf: Bytes) -> Result<Self, DecodeError> {
        Self::check_structure(&buf)?;
        Ok(RecordBatch { buf })
    }

    /// Base and last offset of the one batch `buf` holds, after the structure checks of [`Self::parse`] — no CRC,
    /// no copy: for a store that keeps batches by offset and needs only a stored batch's bounds.
    pub fn offsets_of(buf: &[u8]) -> Result<(i64, i64), DecodeError> {
        Self::check_structure(buf)?;
        let base_offset = be_i64(buf, offsets::BASE_OFFSET);
        let last_offset_delta = be_i32(buf, offsets::LAST_OFFSET_DELTA);
        Ok((
            base_offset,
            base_offset.wrapping_add(i64::from(last_offset_delta)),
        ))
    }

    /// Length (at least a header, exactly `buf`) and magic.
    fn check_structure(buf: &[u8]) -> Result<(), DecodeError> {
        let Some(prefix) = buf.first_chunk::<LOG_OVERHEAD>() else {
            return Err(DecodeError::Truncated {
                needed: LOG_OVERHEAD as u64,
                available: buf.len() as u64,
            });
        };
        let total = check_batch_prefix(prefix, buf.len() as u64, usize::MAX)?;
        if total != buf.len() {
            return Err(DecodeError::LengthMismatch {
                declared: total as i64 - LOG_OVERHEAD as i64,
                actual: (buf.len() - LOG_OVERHEAD) as u64,
            });
        }
        let magic = buf[offsets::MAGIC] as i8;
        if magic != MAGIC_V2 {
            return Err(DecodeError::UnsupportedMagic { magic });
        }
        Ok(())
    }

    /// Checks structure and CRC: the usual way to accept a batch from outside.
    pub fn decode(buf: Bytes) -> Result<Self, DecodeError> {
        let batch = Self::parse(buf)?;
        batch.verify_crc()?;
        Ok(batch)
    }

    /// Compares the stored CRC with the CRC-32C of bytes 21..end.
    #[inline]
    pub fn verify_crc(&self) -> Result<(), DecodeError> {
        let stored = self.crc();
        let computed = self.compute_crc();
        if stored == computed {
            Ok(())
        } else {
            Err(DecodeError::CrcMismatch { stored, computed })
        }
    }

    /// CRC-32C of the bytes the CRC covers (attributes to the end).
    pub fn compute_crc(&self) -> u32 {
        crate::crc::crc32c(&self.buf[offsets::ATTRIBUTES..])
    }

    /// The whole batch, prefix included.
    #[inline]
    pub fn as_bytes(&self) -> &Bytes {
        &self.buf
    }

    /// Gives back the underlying bytes.
    pub fn into_bytes(self) -> Bytes {
        self.buf
    }

    /// Total size in bytes (`12 + batch_length`).
    #[inline]
    pub fn size(&self) -> usize {
        self.buf.len()
    }

    /// `baseOffset`.
    #[inline]
    pub fn base_offset(&self) -> i64 {
        be_i64(&self.buf, offsets::BASE_OFFSET)
    }

    /// `batchLength` as stored.
    #[inline]
    pub fn batch_length(&self) -> i32 {
        be_i32(&self.buf, offsets::BATCH_LENGTH)
    }

    /// `partitionLeaderEpoch`.
    #[inline]
    pub fn partition_leader_epoch(&self) -> i32 {
        be_i32(&self.buf, offsets::PARTITION_LEADER_EPOCH)
    }

    /// `magic` (always 2 for a constructed batch).
    #[inline]
    pub fn magic(&self) -> i8 {
        self.buf[offsets::MAGIC] as i8
    }

    /// `crc` as stored.
    #[inline]
    pub fn crc(&self) -> u32 {
        be_i32(&self.buf, offsets::CRC) as u32
    }

    /// `attributes`.
    #[inline]
    pub fn attributes(&self) -> Attributes {
        Attributes(be_i16(&self.buf, offsets::ATTRIBUTES))
    }

    /// `lastOffsetDelta`.
    #[inline]
    pub fn last_offset_delta(&self) -> i32 {
        be_i32(&self.buf, offsets::LAST_OFFSET_DELTA)
    }

    /// `baseOffset + lastOffsetDelta`.
    #[inline]
    pub fn last_offset(&self) -> i64 {
        self.base_offset()
            .wrapping_add(i64::from(self.last_offset_delta()))
    }

    /// `baseOffset + lastOffsetDelta + 1`.
    #[inline]
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }

    /// `baseTimestamp`.
    #[inline]
    pub fn base_timestamp(&self) -> i64 {
        be_i64(&self.buf, offsets::BASE_TIMESTAMP)
    }

    /// `maxTimestamp`.
    #[inline]
    pub fn max_timestamp(&self) -> i64 {
        be_i64(&self.buf, offsets::MAX_TIMESTAMP)
    }

    /// The delete horizon a log cleaner set (attribute bit 6; then `baseTimestamp` holds it, and the records'
    /// timestamp deltas are relative to it): when the batch's tombstones may go (KIP-534's horizon, Kafka 3.1+).
    #[inline]
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        self.attributes()
            .has_delete_horizon()
            .then(|| self.base_timestamp())
    }

    /// `producerId` (−1 for none).
    #[inline]
    pub fn producer_id(&self) -> i64 {
        be_i64(&self.buf, offsets::PRODUCER_ID)
    }

    /// Kafka's `hasProducerId`: any producer id above −1.
    #[inline]
    pub fn has_producer_id(&self) -> bool {
        self.producer_id() > NO_PRODUCER_ID
    }

    /// `producerEpoch` (−1 for none).
    #[inline]
    pub fn producer_epoch(&self) -> i16 {
        be_i16(&self.buf, offsets::PRODUCER_EPOCH)
    }

    /// `baseSequence` (−1 for none).
    #[inline]
    pub fn base_sequence(&self) -> i32 {
        be_i32(&self.buf, offsets::BASE_SEQUENCE)
    }

    /// Last sequence: −1 without a base sequence, else base + lastOffsetDelta wrapping at `i32::MAX`.
    #[inline]
    pub fn last_sequence(&self) -> i32 {
        let base = self.base_sequence();
        if base == NO_SEQUENCE {
            NO_SEQUENCE
        } else {
            increment_sequence(base, self.last_offset_delta())
        }
    }

    /// `recordsCount` as stored (may be negative or a lie; iteration checks it).
    #[inline]
    pub fn record_count(&self) -> i32 {
        be_i32(&self.buf, offsets::RECORDS_COUNT)
    }

    /// Bit 4 of the attributes.
    #[inline]
    pub fn is_transactional(&self) -> bool {
        self.attributes().is_transactional()
    }

    /// Bit 5 of the attributes.
    #[inline]
    pub fn is_control(&self) -> bool {
        self.attributes().is_control()
    }

    /// The records section as stored (compressed or not), after the count.
    #[inline]
    pub fn records_section(&self) -> &[u8] {
        &self.buf[offsets::RECORDS..]
    }

    /// Decodes the records lazily with the default limits.
    pub fn records(&self) -> Result<Records<'_>, DecodeError> {
        self.records_with_limits(&DecodeLimits::default())
    }

    /// Decodes the records lazily; a compressed section is inflated (up to `limits`) first.
    pub fn records_with_limits(&self, limits: &DecodeLimits) -> Result<Records<'_>, DecodeError> {
        Records::new(self, limits)
    }

    /// Rewrites `baseOffset` in place (outside the CRC). Copies only if the bytes are shared.
    pub fn set_base_offset(&mut self, base_offset: i64) {
        self.edit(|buf| {
            buf[offsets::BASE_OFFSET..offsets::BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes())
        });
    }

    /// Rewrites `partitionLeaderEpoch` in place (outside the CRC). Copies only if the bytes are shared.
    pub fn set_partition_leader_epoch(&mut self, epoch: i32) {
        self.edit(|buf| {
            buf[offsets::PARTITION_LEADER_EPOCH..offsets::PARTITION_LEADER_EPOCH + 4]
                .copy_from_slice(&epoch.to_be_bytes())
        });
    }

    /// Rewrites `baseOffset` and `partitionLeaderEpoch` together (a leader placing a client batch): one edit of
    /// the bytes instead of two. Copies only if the bytes are shared.
    pub fn place(&mut self, base_offset: i64, partition_leader_epoch: i32) {
        self.edit(|buf| {
            buf[offsets::BASE_OFFSET..offsets::BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
            buf[offsets::PARTITION_LEADER_EPOCH..offsets::PARTITION_LEADER_EPOCH + 4]
                .copy_from_slice(&partition_leader_epoch.to_be_bytes());
        });
    }

    /// Rewrites producer id, epoch and base sequence, then recomputes the CRC.
    pub fn set_producer(&mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) {
        self.edit(|buf| {
            buf[offsets::PRODUCER_ID..offsets::PRODUCER_ID + 8].copy_from_slice(&producer_id.to_be_bytes());
            buf[offsets::PRODUCER_EPOCH..offsets::PRODUCER_EPOCH + 2]
                .copy_from_slice(&producer_epoch.to_be_bytes());
            buf[offsets::BASE_SEQUENCE..offsets::BASE_SEQUENCE + 4]
                .copy_from_slice(&base_sequence.to_be_bytes());
            let crc = crate::crc::crc32c(&buf[offsets::ATTRIBUTES..]);
            buf[offsets::CRC..offsets::CRC + 4].copy_from_slice(&crc.to_be_bytes());
        });
    }

    /// Stamps the batch with the broker's clock, as a topic with `message.timestamp.type=LogAppendTime` does:
    /// the timestamp-type attribute set, `maxTimestamp` = `now_ms`, the CRC recomputed (records' own timestamp
    /// deltas are left as they are; readers take the batch's). Check the client's CRC first: this one replaces it.
    pub fn set_log_append_time(&mut self, now_ms: i64) {
        self.edit(|buf| {
            let attributes =
                u16::from_be_bytes([buf[offsets::ATTRIBUTES], buf[offsets::ATTRIBUTES + 1]]) | 0x08;
            buf[offsets::ATTRIBUTES..offsets::ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
            buf[offsets::MAX_TIMESTAMP..offsets::MAX_TIMESTAMP + 8].copy_from_slice(&now_ms.to_be_bytes());
            let crc = crate::crc::crc32c(&buf[offsets::ATTRIBUTES..]);
            buf[offsets::CRC..offsets::CRC + 4].copy_from_slice(&crc.to_be_bytes());
        });
    }

    fn edit(&mut self, change: impl FnOnce(&mut [u8])) {
        let bytes = std::mem::take(&mut self.buf);
        let mut owned: BytesMut = bytes
            .try_into_mut()
            .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
        change(&mut owned);
        self.buf = owned.freeze();
    }
}
