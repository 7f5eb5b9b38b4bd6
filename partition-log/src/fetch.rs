//! What a fetch returns, by isolation level (kafka-semantics §7.8).

use record_format::{AbortedTxn, BatchBuffers, RecordBatch};

/// A consumer's isolation level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// Up to the high watermark.
    ReadUncommitted,
    /// Up to the last stable offset, with the aborted transactions of the range.
    ReadCommitted,
}

/// The answer to a fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResult {
    /// Whole batches, in order, all below the isolation level's bound.
    pub batches: Vec<RecordBatch>,
    /// The buffers the batches were read into (a writer copying them may write batches lying back to back in
    /// one with one write; [`BatchBuffers`]).
    pub buffers: BatchBuffers,
    /// The partition's high watermark.
    pub high_watermark: i64,
    /// The partition's last stable offset.
    pub last_stable_offset: i64,
    /// The partition's log start offset.
    pub log_start_offset: i64,
    /// For read_committed: the aborted transactions overlapping the returned range (empty otherwise).
    pub aborted_transactions: Vec<AbortedTxn>,
}
