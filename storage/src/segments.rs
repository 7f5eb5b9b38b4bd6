//! What retention looks at: the log as a sequence of units it deletes whole ([`SegmentSummary`]).
//!
//! Kafka's retention deletes whole segments, oldest first: one whose newest record is older than `retention.ms`,
//! one the log can lose and still hold `retention.bytes`. A backend with segments (storage-fs, Kafka's layout)
//! reports its segments; the others (memory, the key-value layout) have no segments, and report each batch as
//! its own unit, so retention there is finer than Kafka's — it deletes a batch once *its* newest record expired,
//! never earlier than Kafka would promise (ADR 0054).

use record_format::RecordBatch;

/// One unit of the log retention deletes whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSummary {
    /// The first offset it may hold (a segment's base offset; a batch's base offset).
    pub base_offset: i64,
    /// The offset after its last batch (its base offset when it holds none).
    pub next_offset: i64,
    /// The bytes it holds.
    pub size_bytes: u64,
    /// The largest timestamp of its batches (−1 when it holds none).
    pub max_timestamp: i64,
}

impl SegmentSummary {
    /// The unit of one batch.
    pub fn of_batch(batch: &RecordBatch) -> Self {
        SegmentSummary {
            base_offset: batch.base_offset(),
            next_offset: batch.next_offset(),
            size_bytes: batch.size() as u64,
            max_timestamp: batch.max_timestamp(),
        }
    }
}

/// Bytes a backend without segments reads per page when it lists its batches as units.
pub const UNIT_SCAN_BYTES: usize = 1 << 20;
