//! Reading a partition log as the oracle and the simulated clients do: every batch, the read_committed view
//! (Kafka's consumer algorithm over the aborted-transaction list), headers.

use partition_log::{Isolation, PartitionLog};
use record_format::RecordBatch;

use crate::truth::RECORD_HEADER;
use crate::SimError;

/// Bytes read per call when scanning a log.
pub(crate) const READ_BYTES: usize = 1 << 20;

/// Every batch of a log, from its start to its end.
pub(crate) async fn all_batches(log: &PartitionLog) -> Result<Vec<RecordBatch>, SimError> {
    partition_log::batches_from(log, log.log_start_offset())
        .await
        .map_err(SimError::log)
}

/// What a read_committed consumer of `log` sees from `from`: (offset, record id) of every data record with a
/// record id, skipping aborted transactions the way Kafka's consumer does (an aborted producer's batches are
/// skipped from its aborted transaction's first offset until its ABORT marker).
pub(crate) async fn committed_records(log: &PartitionLog, from: i64) -> Result<Vec<(i64, u64)>, SimError> {
    let mut out = Vec::new();
    let mut offset = from.max(log.log_start_offset());
    let mut aborting: std::collections::BTreeSet<i64> = std::collections::BTreeSet::new();
    while offset < log.last_stable_offset() {
        let fetched = log
            .read(offset, READ_BYTES, Isolation::ReadCommitted)
            .await
            .map_err(SimError::log)?;
        let Some(last) = fetched.batches.last() else {
            break;
        };
        offset = last.next_offset();
        let mut aborted = fetched.aborted_transactions.clone();
        aborted.sort_by_key(|entry| entry.first_offset);
        let mut pending = aborted.into_iter().peekable();
        for batch in &fetched.batches {
            while let Some(entry) = pending.peek() {
                if entry.first_offset <= batch.last_offset() {
                    aborting.insert(entry.producer_id);
                    pending.next();
                } else {
                    break;
                }
            }
            if batch.is_control() {
                if let Ok(records) = record_format::control::decode_control_records(batch) {
                    if records
                        .iter()
                        .any(|record| matches!(record, record_format::ControlRecord::Abort(_)))
                    {
                        aborting.remove(&batch.producer_id());
                    }
                }
                continue;
            }
            if batch.is_transactional() && aborting.contains(&batch.producer_id()) {
                continue;
            }
            let Ok(records) = batch.records() else {
                continue;
            };
            for record in records.iter().flatten().filter(|record| record.offset >= from) {
                if let Some(id) = header(&record, RECORD_HEADER).and_then(|value| value.parse().ok()) {
                    out.push((record.offset, id));
                }
            }
        }
    }
    Ok(out)
}

/// A record's header value as text.
pub(crate) fn header<'a>(record: &'a record_format::Record<'a>, key: &str) -> Option<&'a str> {
    record
        .headers
        .into_iter()
        .find(|header| header.key == key.as_bytes())
        .and_then(|header| header.value)
        .and_then(|value| std::str::from_utf8(value).ok())
}

/// The record ids of a batch's data records (none for a control batch, or one whose records do not decode).
pub(crate) fn record_ids(batch: &RecordBatch) -> Vec<u64> {
    if batch.is_control() {
        return Vec::new();
    }
    let Ok(records) = batch.records() else {
        return Vec::new();
    };
    records
        .iter()
        .flatten()
        .filter_map(|record| header(&record, RECORD_HEADER)?.parse().ok())
        .collect()
}
