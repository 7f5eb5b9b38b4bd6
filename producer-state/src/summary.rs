//! A comparable summary of producer state and its JSON form.
//!
//! [`StateSummary`] is what `mirrorlog replay --json` and the `state` script command print, with the field names
//! of `producer_state_after_replay` in the shared test-vector manifest.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::manager::ProducerStateManager;
use crate::txn_index::AbortedTxn;

/// One producer in a [`StateSummary`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerSummary {
    /// Current epoch.
    pub producer_epoch: i16,
    /// Last cached sequence (−1 when none).
    pub last_sequence: i32,
    /// Last cached data offset (−1 when none).
    pub last_data_offset: i64,
    /// Coordinator epoch of the last marker (−1 when none).
    pub coordinator_epoch: i32,
    /// First offset of the open transaction.
    pub ongoing_txn_first_offset: Option<i64>,
}

/// Producer state as the manifest describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateSummary {
    /// Producers by id.
    pub producers: BTreeMap<i64, ProducerSummary>,
    /// Open transactions `(producer_id, first_offset)` by first offset.
    pub ongoing_transactions: Vec<(i64, i64)>,
    /// Aborted transactions recorded so far.
    pub aborted_transactions: Vec<AbortedTxn>,
    /// The map end offset.
    pub log_end_offset: i64,
    /// LSO against the given high watermark.
    pub last_stable_offset: i64,
}

impl StateSummary {
    /// Summarises `manager`, with the aborted-transaction index kept by the caller and the current high watermark.
    pub fn of(manager: &ProducerStateManager, aborted: &[AbortedTxn], high_watermark: i64) -> Self {
        let producers = manager
            .producers()
            .map(|entry| {
                (
                    entry.producer_id,
                    ProducerSummary {
                        producer_epoch: entry.producer_epoch,
                        last_sequence: entry.last_seq(),
                        last_data_offset: entry.last_data_offset(),
                        coordinator_epoch: entry.coordinator_epoch,
                        ongoing_txn_first_offset: entry.current_txn_first_offset,
                    },
                )
            })
            .collect();
        StateSummary {
            producers,
            ongoing_transactions: manager
                .ongoing_transactions()
                .values()
                .map(|txn| (txn.producer_id, txn.first_offset.message_offset))
                .collect(),
            aborted_transactions: aborted.to_vec(),
            log_end_offset: manager.map_end_offset(),
            last_stable_offset: manager.log_last_stable_offset(high_watermark, 0),
        }
    }

    /// One line of JSON, keys in a fixed order, producers by ascending id.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\"producers\":{");
        for (index, (producer_id, p)) in self.producers.iter().enumerate() {
            let comma = if index == 0 { "" } else { "," };
            let txn = p
                .ongoing_txn_first_offset
                .map_or_else(|| "null".to_owned(), |offset| offset.to_string());
            let _ = write!(
                out,
                "{comma}\"{producer_id}\":{{\"producer_epoch\":{},\"last_sequence\":{},\"last_data_offset\":{},\
                 \"coordinator_epoch\":{},\"ongoing_txn_first_offset\":{txn}}}",
                p.producer_epoch, p.last_sequence, p.last_data_offset, p.coordinator_epoch
            );
        }
        out.push_str("},\"ongoing_transactions\":[");
        for (index, (producer_id, first_offset)) in self.ongoing_transactions.iter().enumerate() {
            let comma = if index == 0 { "" } else { "," };
            let _ = write!(
                out,
                "{comma}{{\"producer_id\":{producer_id},\"first_offset\":{first_offset}}}"
            );
        }
        out.push_str("],\"aborted_transactions\":[");
        for (index, aborted) in self.aborted_transactions.iter().enumerate() {
            let comma = if index == 0 { "" } else { "," };
            let _ = write!(
                out,
                "{comma}{{\"producer_id\":{},\"first_offset\":{},\"last_offset\":{}}}",
                aborted.producer_id, aborted.first_offset, aborted.last_offset
            );
        }
        let _ = write!(
            out,
            "],\"log_end_offset\":{},\"last_stable_offset\":{}}}",
            self.log_end_offset, self.last_stable_offset
        );
        out
    }
}
