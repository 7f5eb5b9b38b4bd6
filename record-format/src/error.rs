//! Errors of the record-format layer.
//!
//! [`DecodeError`] is what any malformed input turns into; every variant carries the offending values and maps
//! to one of the stable [`ErrorCategory`] names that `mirrorlog dump` prints and the shared test vectors use.
//! [`EncodeError`] covers the few ways building a batch can fail (sizes past Kafka's `i32` fields, codec I/O).

use std::fmt;

/// Stable names for the ways a batch can be malformed (the error categories `mirrorlog dump` prints; the test-vector manifest's `error_categories`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCategory {
    /// Stored CRC-32C differs from the CRC-32C of the bytes from `attributes` to the end of the batch.
    CrcMismatch,
    /// Fewer bytes than the 12-byte log overhead or than the length field declares (a torn tail).
    Truncated,
    /// Length field below the v2 minimum (49) or above the reader's maximum batch size.
    BatchLengthInvalid,
    /// Magic byte is not 2.
    UnsupportedMagic,
    /// A varint longer than 5 bytes (int32 fields) or 10 bytes (int64 fields).
    InvalidVarint,
    /// The header's record count disagrees with the records actually present.
    RecordCountMismatch,
    /// Compression id in the attributes is not 0–4.
    UnsupportedCompression,
    /// Any other malformed record.
    CorruptRecord,
}

impl ErrorCategory {
    /// The snake_case name used in JSON output and in the test-vector manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCategory::CrcMismatch => "crc_mismatch",
            ErrorCategory::Truncated => "truncated",
            ErrorCategory::BatchLengthInvalid => "batch_length_invalid",
            ErrorCategory::UnsupportedMagic => "unsupported_magic",
            ErrorCategory::InvalidVarint => "invalid_varint",
            ErrorCategory::RecordCountMismatch => "record_count_mismatch",
            ErrorCategory::UnsupportedCompression => "unsupported_compression",
            ErrorCategory::CorruptRecord => "corrupt_record",
        }
    }
}

impl fmt::Display for ErrorCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A batch, record or control value could not be decoded.
///
/// Positions (`at`) are byte offsets inside the section being decoded (the records section, or a control value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ends before the structure it declares does.
    #[error("truncated: {needed} bytes needed, {available} available")]
    Truncated {
        /// Bytes the structure needs.
        needed: u64,
        /// Bytes that are present.
        available: u64,
    },
    /// The batch length field is outside `[min, max]`.
    #[error("batch length {length} outside the allowed range {min}..={max}")]
    BatchLengthInvalid {
        /// The stored length field.
        length: i64,
        /// Smallest valid value (49 for v2).
        min: i64,
        /// Largest value this reader accepts.
        max: i64,
    },
    /// The batch's buffer is not exactly `12 + batch_length` bytes long.
    #[error("batch length field says {declared} bytes follow but the buffer holds {actual}")]
    LengthMismatch {
        /// `batch_length` as stored.
        declared: i64,
        /// Bytes after the length field in the buffer.
        actual: u64,
    },
    /// The magic byte is not 2.
    #[error("unsupported magic {magic}: only record batch v2 is supported")]
    UnsupportedMagic {
        /// The stored magic byte.
        magic: i8,
    },
    /// The stored CRC does not match the computed one.
    #[error("crc mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// CRC field as stored.
        stored: u32,
        /// CRC-32C of attributes..end.
        computed: u32,
    },
    /// A varint that is too long or runs past the end of its section.
    #[error("invalid varint at byte {at}: {reason}")]
    InvalidVarint {
        /// Byte position of the varint's first byte.
        at: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The record count disagrees with the records present.
    #[error("record count mismatch: header declares {declared}, {found}")]
    RecordCountMismatch {
        /// Count from the batch header.
        declared: i32,
        /// What was found instead (human readable).
        found: String,
    },
    /// Compression id 5–7.
    #[error("unsupported compression id {id}")]
    UnsupportedCompression {
        /// Codec bits of the attributes.
        id: u8,
    },
    /// A record (or control key/value) is malformed.
    #[error("corrupt record at byte {at}: {reason}")]
    CorruptRecord {
        /// Byte position inside the section being decoded.
        at: usize,
        /// What is wrong.
        reason: String,
    },
    /// The compressed records section inflates past the configured limit.
    #[error("{codec} records section decompresses to more than the limit of {limit} bytes")]
    DecompressedTooLarge {
        /// Codec name.
        codec: &'static str,
        /// The limit in bytes.
        limit: usize,
    },
    /// The compressed records section is not a valid stream of its codec.
    #[error("{codec} decompression failed: {message}")]
    Decompression {
        /// Codec name.
        codec: &'static str,
        /// The codec's own message.
        message: String,
    },
}

impl DecodeError {
    /// The stable category of this error.
    pub fn category(&self) -> ErrorCategory {
        match self {
            DecodeError::Truncated { .. } => ErrorCategory::Truncated,
            DecodeError::BatchLengthInvalid { .. } | DecodeError::LengthMismatch { .. } => {
                ErrorCategory::BatchLengthInvalid
            }
            DecodeError::UnsupportedMagic { .. } => ErrorCategory::UnsupportedMagic,
            DecodeError::CrcMismatch { .. } => ErrorCategory::CrcMismatch,
            DecodeError::InvalidVarint { .. } => ErrorCategory::InvalidVarint,
            DecodeError::RecordCountMismatch { .. } => ErrorCategory::RecordCountMismatch,
            DecodeError::UnsupportedCompression { .. } => ErrorCategory::UnsupportedCompression,
            DecodeError::CorruptRecord { .. }
            | DecodeError::DecompressedTooLarge { .. }
            | DecodeError::Decompression { .. } => ErrorCategory::CorruptRecord,
        }
    }

    pub(crate) fn corrupt(at: usize, reason: impl Into<String>) -> Self {
        DecodeError::CorruptRecord {
            at,
            reason: reason.into(),
        }
    }
}

/// A batch could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// More records than an `i32` count can hold.
    #[error("too many records for one batch: {count}")]
    TooManyRecords {
        /// Records handed to the builder.
        count: usize,
    },
    /// The encoded batch or one record would exceed an `i32` length field.
    #[error("{what} of {size} bytes does not fit Kafka's i32 length field")]
    TooLarge {
        /// What overflowed.
        what: &'static str,
        /// Its size.
        size: usize,
    },
    /// The compressor reported an error.
    #[error("{codec} compression failed: {message}")]
    Compression {
        /// Codec name.
        codec: &'static str,
        /// The codec's own message.
        message: String,
    },
    /// The attributes name a compression id this library cannot write.
    #[error("unsupported compression id {id}")]
    UnsupportedCompression {
        /// Codec bits.
        id: u8,
    },
}
