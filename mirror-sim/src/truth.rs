//! The ground truth: what every real client did and was told, kept by the simulator as it drives the clients and
//! never derived from a log or from producer state. The oracle compares the logs against it.
//!
//! Every record a client writes carries two headers: `client` (the real client's name) and `rid` (a record id
//! unique in the run); an application's output records also carry `src` (the input record they were made from).
//! Transaction markers cannot carry headers, so the simulator gives every marker it writes a unique timestamp and
//! remembers which client's transaction it ended; mirroring copies bytes, so the timestamp names the marker on
//! every cluster.

use std::collections::BTreeMap;

/// Header naming the real client.
pub const CLIENT_HEADER: &str = "client";
/// Header carrying the record id.
pub const RECORD_HEADER: &str = "rid";
/// Header of an application's output record: the input record id it was made from.
pub const SOURCE_HEADER: &str = "src";

/// Where a record stands, as its client knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Written by an idempotent producer (no transaction).
    Plain,
    /// In a transaction that has not ended.
    Open,
    /// In a transaction whose commit the client was told succeeded.
    Committed,
    /// In a transaction that was aborted, fenced, timed out or lost: never to be seen by read_committed.
    Aborted,
}

/// One record's truth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordTruth {
    /// The real client.
    pub client: String,
    /// The partition it was written to, named as in the finished logs (the topic when topics have one partition).
    pub topic: String,
    /// Where it stands.
    pub status: Status,
    /// The cluster that acknowledged it (a plain record's produce, a transactional record's commit).
    pub acked_on: Option<String>,
}

/// Everything the clients did and were told.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    /// Records by id.
    pub records: BTreeMap<u64, RecordTruth>,
    /// The client whose transaction each marker (by its unique timestamp) ended.
    pub markers: BTreeMap<i64, String>,
}

impl Truth {
    /// Sets the status of `records` (all of one transaction) and, for a commit, the cluster that acknowledged it.
    pub fn settle(&mut self, records: &[u64], status: Status, acked_on: Option<&str>) {
        for id in records {
            if let Some(record) = self.records.get_mut(id) {
                record.status = status;
                record.acked_on = acked_on.map(str::to_owned);
            }
        }
    }
}
