//! Kafka record batches (magic v2), byte-exact and zero-copy.
//!
//! This crate reads and writes the bytes Kafka stores: [`RecordBatch`] is a view over one batch whose header
//! fields are read in place; [`Records`] iterates its records lazily (no allocation per record when
//! uncompressed); [`BatchBuilder`] encodes batches with any of Kafka's five codecs; [`ControlRecord`] decodes
//! transaction markers, KRaft control records and the `MIRROR_PID_RESET` barrier ([`MirrorPidResetRecord`]);
//! [`SegmentReader`] walks a `.log` segment batch by batch and reports a torn or corrupt tail with its offset.
//!
//! The crate does no I/O of its own except [`SegmentReader::open`], and never sizes an allocation from a length or
//! count it has not checked against the bytes present. Every malformed input is a [`DecodeError`] with a stable
//! [`ErrorCategory`].
//!
//! ```
//! use record_format::{BatchBuilder, Compression, RecordBatch};
//!
//! let mut builder = BatchBuilder::new().base_offset(100).producer(7, 0, 0).compression(Compression::Lz4);
//! builder.add(1_700_000_000_000, Some(b"key"), Some(b"value"), &[("trace", Some(b"abc"))]);
//! let batch = builder.build()?;
//!
//! let decoded = RecordBatch::decode(batch.as_bytes().clone())?;
//! assert_eq!(decoded.last_offset(), 100);
//! let records = decoded.records()?;
//! let record = records.iter().next().unwrap()?;
//! assert_eq!(record.value, Some(&b"value"[..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod batch;
pub mod buffers;
pub mod builder;
pub mod checked;
pub mod compact;
pub mod compression;
pub mod control;
pub mod crc;
pub mod error;
pub mod flexible;
pub mod record;
pub mod segment;
pub mod txn_index;
pub mod varint;

pub use batch::{Attributes, RecordBatch, TimestampType};
pub use buffers::BatchBuffers;
pub use builder::{BatchBuilder, NewHeader, NewRecord};
pub use checked::{CrcCheckError, CrcCheckedBatches, SharedCrcCheck};
pub use compact::{filter_batch, FilterError, Filtered};
pub use compression::{Compression, DecodeLimits};
pub use control::{
    check_records, end_txn_marker_batch, mirror_pid_reset_batch, visit_records, ControlBatchPlacement,
    ControlKey, ControlRecord, EndTxnMarker, MirrorPidResetRecord,
};
pub use error::{DecodeError, EncodeError, ErrorCategory};
pub use flexible::{TaggedField, TaggedFields};
pub use record::{Header, Headers, OffsetDeltas, Record, Records};
pub use segment::{BatchIter, SegmentBatch, SegmentError, SegmentReader};
pub use txn_index::AbortedTxn;
