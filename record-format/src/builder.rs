//! Building v2 batches.
//!
//! [`BatchBuilder`] writes the 61-byte header, the records (compressed with Kafka's framing when asked), the
//! length and the CRC. Header fields that Kafka derives (`baseTimestamp`, `maxTimestamp`, `lastOffsetDelta`)
//! are derived the same way unless set explicitly — explicit values let a decoded batch, even a compacted one
//! with offset gaps or no records, be re-encoded to its original bytes ([`BatchBuilder::from_batch`]).

use bytes::Bytes;

use crate::batch::{
    offsets, Attributes, RecordBatch, TimestampType, LOG_OVERHEAD, MAGIC_V2, NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, RECORD_BATCH_OVERHEAD,
};
use crate::compression::{compress, Compression};
use crate::error::{DecodeError, EncodeError};
use crate::varint::{varint_size, varlong_size};

/// Kafka's `NO_TIMESTAMP`.
pub const NO_TIMESTAMP: i64 = -1;

/// One header of a record to encode.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct NewHeader {
    /// Key bytes (Kafka requires UTF-8).
    pub key: Bytes,
    /// Value, `None` for null.
    pub value: Option<Bytes>,
}

/// A record to encode, with its deltas as they will be stored.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct NewRecord {
    /// Record attributes byte (0).
    pub attributes: i8,
    /// Timestamp relative to the batch base timestamp.
    pub timestamp_delta: i64,
    /// Offset relative to the batch base offset.
    pub offset_delta: i32,
    /// Key, `None` for null.
    pub key: Option<Bytes>,
    /// Value, `None` for null.
    pub value: Option<Bytes>,
    /// Headers in order; duplicates are kept.
    pub headers: Vec<NewHeader>,
}

/// Encoded size of a nullable bytes field, `None` when its length does not fit an `i32`.
#[inline]
fn bytes_field_size(field: Option<&Bytes>) -> Option<usize> {
    match field {
        None => Some(1), // varint -1
        Some(bytes) => Some(varint_size(i32::try_from(bytes.len()).ok()?) + bytes.len()),
    }
}

fn length_i32(size: usize, what: &'static str) -> Result<i32, EncodeError> {
    i32::try_from(size).map_err(|_| EncodeError::TooLarge { what, size })
}

impl NewRecord {
    /// Size of the record body, `None` if any length does not fit Kafka's `i32` fields.
    #[inline]
    fn body_size(&self) -> Option<i32> {
        let mut size = 1 + varlong_size(self.timestamp_delta) + varint_size(self.offset_delta);
        size += bytes_field_size(self.key.as_ref())?;
        size += bytes_field_size(self.value.as_ref())?;
        size += varint_size(i32::try_from(self.headers.len()).ok()?);
        for header in &self.headers {
            size += bytes_field_size(Some(&header.key))?;
            size += bytes_field_size(header.value.as_ref())?;
        }
        i32::try_from(size).ok()
    }

    fn checked_body_size(&self) -> Result<i32, EncodeError> {
        self.body_size().ok_or_else(|| EncodeError::TooLarge {
            what: "record or one of its fields",
            size: self.key.as_ref().map_or(0, Bytes::len) + self.value.as_ref().map_or(0, Bytes::len),
        })
    }

    /// Size of the encoded record, length varint included.
    pub fn encoded_size(&self) -> Result<usize, EncodeError> {
        let body_size = self.checked_body_size()?;
        Ok(varint_size(body_size) + body_size as usize)
    }

    /// Appends the encoded record (length varint included).
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let body_length = self.checked_body_size()?;
        let start = out.len();
        out.resize(start + varint_size(body_length) + body_length as usize, 0);
        self.write_sized(
            &mut Cursor {
                buf: &mut out[start..],
                pos: 0,
            },
            body_length,
        );
        Ok(())
    }

    /// Writes length varint and body into a buffer sized for them; lengths were checked by `body_size`.
    #[inline(always)]
    fn write_sized(&self, out: &mut Cursor<'_>, body_length: i32) {
        out.varint(body_length);
        out.byte(self.attributes as u8);
        out.varlong(self.timestamp_delta);
        out.varint(self.offset_delta);
        out.bytes_field(self.key.as_deref());
        out.bytes_field(self.value.as_deref());
        out.varint(self.headers.len() as i32);
        for header in &self.headers {
            out.bytes_field(Some(&header.key));
            out.bytes_field(header.value.as_deref());
        }
    }
}

/// Writes into a buffer allocated at its final size: each field is one bounds-checked copy, with no capacity
/// bookkeeping per field (the sizes were computed by `NewRecord::body_size`, from the same fields).
struct Cursor<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl Cursor<'_> {
    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        let end = self.pos + bytes.len();
        self.buf[self.pos..end].copy_from_slice(bytes);
        self.pos = end;
    }

    #[inline(always)]
    fn byte(&mut self, byte: u8) {
        self.buf[self.pos] = byte;
        self.pos += 1;
    }

    #[inline(always)]
    fn unsigned(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.byte((value as u8) | 0x80);
            value >>= 7;
        }
        self.byte(value as u8);
    }

    #[inline(always)]
    fn varint(&mut self, value: i32) {
        self.unsigned(u64::from(((value << 1) ^ (value >> 31)) as u32));
    }

    #[inline(always)]
    fn varlong(&mut self, value: i64) {
        self.unsigned(((value << 1) ^ (value >> 63)) as u64);
    }

    #[inline(always)]
    fn bytes_field(&mut self, field: Option<&[u8]>) {
        match field {
            None => self.varint(-1),
            Some(bytes) => {
                self.varint(bytes.len() as i32);
                self.put(bytes);
            }
        }
    }
}

/// Builds one v2 batch; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchBuilder {
    base_offset: i64,
    partition_leader_epoch: i32,
    attributes: Attributes,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    base_timestamp: Option<i64>,
    max_timestamp: Option<i64>,
    last_offset_delta: Option<i32>,
    record_count: Option<i32>,
    records: Vec<NewRecord>,
}

impl Default for BatchBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl BatchBuilder {
    /// An empty builder: offset 0, no leader epoch, no producer, CreateTime, uncompressed.
    pub fn new() -> Self {
        BatchBuilder {
            base_offset: 0,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            attributes: Attributes::new(Compression::None, TimestampType::CreateTime, false, false),
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            base_timestamp: None,
            max_timestamp: None,
            last_offset_delta: None,
            record_count: None,
            records: Vec::new(),
        }
    }

    /// A builder holding every header field and record of `batch` as stored, so that building it again
    /// reproduces an uncompressed batch byte for byte (a compressed one to the same records).
    ///
    /// Keys, values and headers share the batch's bytes (no copy) when it is uncompressed; a compressed batch's
    /// records share one buffer holding the inflated section.
    pub fn from_batch(batch: &RecordBatch) -> Result<Self, DecodeError> {
        let records = batch.records()?;
        let section = records.section();
        let backing = match records.is_borrowed() {
            true => batch.as_bytes().slice(RECORD_BATCH_OVERHEAD..),
            false => Bytes::copy_from_slice(section),
        };
        // Every slice a record hands out lies inside `section`, which `backing` mirrors byte for byte.
        let share = |part: &[u8]| -> Bytes {
            let start = (part.as_ptr() as usize).wrapping_sub(section.as_ptr() as usize);
            backing.slice(start..start + part.len())
        };
        let mut builder = BatchBuilder {
            base_offset: batch.base_offset(),
            partition_leader_epoch: batch.partition_leader_epoch(),
            attributes: batch.attributes(),
            producer_id: batch.producer_id(),
            producer_epoch: batch.producer_epoch(),
            base_sequence: batch.base_sequence(),
            base_timestamp: Some(batch.base_timestamp()),
            max_timestamp: Some(batch.max_timestamp()),
            last_offset_delta: Some(batch.last_offset_delta()),
            record_count: Some(batch.record_count()),
            records: Vec::new(),
        };
        for record in records.iter() {
            let record = record?;
            builder.records.push(NewRecord {
                attributes: record.attributes,
                timestamp_delta: record.timestamp_delta,
                offset_delta: record.offset_delta,
                key: record.key.map(share),
                value: record.value.map(share),
                headers: record
                    .headers
                    .iter()
                    .map(|header| NewHeader {
                        key: share(header.key),
                        value: header.value.map(share),
                    })
                    .collect(),
            });
        }
        Ok(builder)
    }

    /// Sets `baseOffset`.
    pub fn base_offset(mut self, base_offset: i64) -> Self {
        self.base_offset = base_offset;
        self
    }

    /// Sets `partitionLeaderEpoch`.
    pub fn partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }

    /// Sets all attribute bits at once.
    pub fn attributes(mut self, attributes: Attributes) -> Self {
        self.attributes = attributes;
        self
    }

    fn set_flag(mut self, mask: i16, on: bool) -> Self {
        self.attributes = Attributes(if on {
            self.attributes.0 | mask
        } else {
            self.attributes.0 & !mask
        });
        self
    }

    /// Sets the codec.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.attributes = Attributes((self.attributes.0 & !0x07) | i16::from(compression.id()));
        self
    }

    /// Sets the timestamp type.
    pub fn timestamp_type(self, timestamp_type: TimestampType) -> Self {
        self.set_flag(0x08, timestamp_type == TimestampType::LogAppendTime)
    }

    /// Sets the transactional bit.
    pub fn transactional(self, transactional: bool) -> Self {
        self.set_flag(0x10, transactional)
    }

    /// Sets the control bit.
    pub fn control(self, control: bool) -> Self {
        self.set_flag(0x20, control)
    }

    /// Sets producer id, epoch and base sequence.
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Sets `baseTimestamp` instead of deriving it from the first record.
    pub fn base_timestamp(mut self, timestamp: i64) -> Self {
        self.base_timestamp = Some(timestamp);
        self
    }

    /// Sets `maxTimestamp` instead of deriving it from the records (LogAppendTime batches need it).
    pub fn max_timestamp(mut self, timestamp: i64) -> Self {
        self.max_timestamp = Some(timestamp);
        self
    }

    /// Sets `lastOffsetDelta` instead of taking the last record's offset delta.
    pub fn last_offset_delta(mut self, delta: i32) -> Self {
        self.last_offset_delta = Some(delta);
        self
    }

    /// Adds a record with an absolute timestamp at the next offset; the first record's timestamp becomes the
    /// base timestamp unless one was set.
    pub fn add(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
    ) -> &mut Self {
        let base_timestamp = *self.base_timestamp.get_or_insert(timestamp);
        let offset_delta = self
            .records
            .last()
            .map_or(0, |last| last.offset_delta.wrapping_add(1));
        self.records.push(NewRecord {
            attributes: 0,
            timestamp_delta: timestamp.wrapping_sub(base_timestamp),
            offset_delta,
            key: key.map(Bytes::copy_from_slice),
            value: value.map(Bytes::copy_from_slice),
            headers: headers
                .iter()
                .map(|(key, value)| NewHeader {
                    key: Bytes::copy_from_slice(key.as_bytes()),
                    value: value.map(Bytes::copy_from_slice),
                })
                .collect(),
        });
        self
    }

    /// Adds a record with its deltas as given.
    pub fn push(&mut self, record: NewRecord) -> &mut Self {
        self.records.push(record);
        self
    }

    /// Keeps the records whose `keep` entry is true (a log cleaner's rewrite, on a builder made by
    /// [`Self::from_batch`]): offset deltas and `lastOffsetDelta` stay as they were, so every kept record keeps its offset and the batch its last offset and sequence range;
    /// the record count follows the records kept; the base timestamp becomes the first kept record's (each delta
    /// rebased on it), and a CreateTime batch's maximum timestamp is the kept records' (a LogAppendTime batch keeps
    /// its own). Entries beyond `keep`'s length are dropped.
    pub fn retain_records(&mut self, keep: &[bool]) {
        let base = self.base_timestamp.unwrap_or(NO_TIMESTAMP);
        let mut kept: Vec<NewRecord> = std::mem::take(&mut self.records)
            .into_iter()
            .zip(keep)
            .filter_map(|(record, &keep)| keep.then_some(record))
            .collect();
        if self.attributes.has_delete_horizon() {
            // The base timestamp is the cleaner's delete horizon, which stays (Kafka rewrites such a batch with
            // it): the kept records' deltas are already relative to it.
            self.records = kept;
            self.record_count = None;
            if self.attributes.timestamp_type() != TimestampType::LogAppendTime {
                self.max_timestamp = None;
            }
            return;
        }
        let new_base = kept
            .first()
            .map_or(base, |first| base.wrapping_add(first.timestamp_delta));
        for record in &mut kept {
            let absolute = base.wrapping_add(record.timestamp_delta);
            record.timestamp_delta = absolute.wrapping_sub(new_base);
        }
        self.records = kept;
        self.record_count = None;
        self.base_timestamp = Some(new_base);
        if self.attributes.timestamp_type() != TimestampType::LogAppendTime {
            self.max_timestamp = None;
        }
    }

    /// Sets the log cleaner's delete horizon (KIP-534): attribute bit 6, and `baseTimestamp` the horizon, every
    /// record's timestamp delta rewritten relative to it so that the records keep their timestamps, as Kafka's
    /// cleaner writes a batch whose tombstones it keeps for the first time.
    pub fn delete_horizon(&mut self, horizon_ms: i64) -> &mut Self {
        let base = self.base_timestamp.unwrap_or(NO_TIMESTAMP);
        for record in &mut self.records {
            let absolute = base.wrapping_add(record.timestamp_delta);
            record.timestamp_delta = absolute.wrapping_sub(horizon_ms);
        }
        self.base_timestamp = Some(horizon_ms);
        self.attributes = self.attributes.with_delete_horizon(true);
        self
    }

    /// The records added so far.
    pub fn records(&self) -> &[NewRecord] {
        &self.records
    }

    fn derived_header(&self) -> (i64, i64, i32) {
        let base_timestamp = self.base_timestamp.unwrap_or(NO_TIMESTAMP);
        let max_timestamp = self.max_timestamp.unwrap_or_else(|| {
            self.records
                .iter()
                .map(|record| base_timestamp.wrapping_add(record.timestamp_delta))
                .max()
                .unwrap_or(NO_TIMESTAMP)
        });
        let last_offset_delta = self
            .last_offset_delta
            .unwrap_or_else(|| self.records.last().map_or(0, |record| record.offset_delta));
        (base_timestamp, max_timestamp, last_offset_delta)
    }

    /// Encodes the batch.
    pub fn build(&self) -> Result<RecordBatch, EncodeError> {
        let record_count = match self.record_count {
            Some(count) => count,
            None => i32::try_from(self.records.len()).map_err(|_| EncodeError::TooManyRecords {
                count: self.records.len(),
            })?,
        };
        let codec = Compression::from_id(self.attributes.compression_id()).map_err(|_| {
            EncodeError::UnsupportedCompression {
                id: self.attributes.compression_id(),
            }
        })?;
        let (base_timestamp, max_timestamp, last_offset_delta) = self.derived_header();

        // One exact allocation: body sizes first (kept, so each is computed once), then the bytes.
        let mut body_sizes = Vec::with_capacity(self.records.len());
        let mut records_size = 0usize;
        for record in &self.records {
            let body_size = record.checked_body_size()?;
            records_size = records_size.saturating_add(varint_size(body_size) + body_size as usize);
            body_sizes.push(body_size);
        }
        let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD.saturating_add(records_size));
        out.extend_from_slice(&self.base_offset.to_be_bytes());
        out.extend_from_slice(&[0; 4]); // length, filled below
        out.extend_from_slice(&self.partition_leader_epoch.to_be_bytes());
        out.push(MAGIC_V2 as u8);
        out.extend_from_slice(&[0; 4]); // crc, filled below
        out.extend_from_slice(&self.attributes.0.to_be_bytes());
        out.extend_from_slice(&last_offset_delta.to_be_bytes());
        out.extend_from_slice(&base_timestamp.to_be_bytes());
        out.extend_from_slice(&max_timestamp.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&record_count.to_be_bytes());
        debug_assert_eq!(out.len(), RECORD_BATCH_OVERHEAD);

        if codec == Compression::None {
            out.resize(RECORD_BATCH_OVERHEAD.saturating_add(records_size), 0);
            let mut cursor = Cursor {
                buf: &mut out[RECORD_BATCH_OVERHEAD..],
                pos: 0,
            };
            for (record, &body_size) in self.records.iter().zip(&body_sizes) {
                record.write_sized(&mut cursor, body_size);
            }
            debug_assert_eq!(cursor.pos, records_size);
        } else {
            let mut plain = vec![0; records_size];
            let mut cursor = Cursor {
                buf: &mut plain,
                pos: 0,
            };
            for (record, &body_size) in self.records.iter().zip(&body_sizes) {
                record.write_sized(&mut cursor, body_size);
            }
            out.extend_from_slice(&compress(codec, &plain)?);
        }

        let batch_length = length_i32(out.len() - LOG_OVERHEAD, "batch")?;
        out[offsets::BATCH_LENGTH..offsets::BATCH_LENGTH + 4].copy_from_slice(&batch_length.to_be_bytes());
        let crc = crate::crc::crc32c(&out[offsets::ATTRIBUTES..]);
        out[offsets::CRC..offsets::CRC + 4].copy_from_slice(&crc.to_be_bytes());
        // The bytes were laid out above with a valid length and magic 2, so parsing cannot fail; map the
        // impossible case to an error rather than a panic all the same.
        RecordBatch::parse(Bytes::from(out)).map_err(|error| EncodeError::Compression {
            codec: "none",
            message: format!("internal: built batch does not parse: {error}"),
        })
    }
}
