//! The group offset store: committed offsets per (group, topic, partition), kept as a small internal log.
//!
//! Kafka keeps offsets in `__consumer_offsets`, a compacted topic written by the group coordinator; here they
//! are a store of their own, for the offset APIs: OffsetCommit, OffsetFetch and the transactional
//! TxnOffsetCommit. It also keeps each group's membership as [`crate::membership`] last stored it (Kafka's group
//! metadata records), for a restarted node to restore. Each change is one record batch of JSON records in the
//! internal partition [`OFFSETS_PARTITION`]; opening replays them.
//!
//! **The log holds live state, not history** (ADR 0055): once it holds more records than a threshold
//! ([`SNAPSHOT_MIN_RECORDS`], or twice the last snapshot), the store writes its whole state again after a
//! `SnapshotStart` record — committed offsets, staged ones, stored groups, emptied groups — closes it with a
//! `SnapshotEnd` record, and only then moves the log start to the `SnapshotStart`: what Kafka's cleaner does for
//! `__consumer_offsets`, as a rewrite of the live state. A start replays the snapshot and what followed it. A
//! snapshot a crash cut short (no `SnapshotEnd` before the log end) is closed at open by a `SnapshotAbandoned`
//! record, written before anything else: on every later replay its records build a state that is dropped.
//!
//! Transactional commits follow Kafka's rule: staged per producer id, they become visible when the COMMIT
//! marker for the group's `__consumer_offsets` partition arrives and are dropped on ABORT. Staging and ending are
//! records too, so a crash between the coordinator's PrepareCommit and its markers loses nothing: the
//! coordinator re-sends the markers on restart and the staged offsets are still there.

use std::collections::BTreeMap;

use record_format::BatchBuilder;
use serde::{Deserialize, Serialize};
use storage::{Durability, PartitionStorage};

use std::sync::Arc;

use crate::membership::StoredGroup;
use crate::{Clock, NodeError};

/// The internal partition holding the offset log.
pub const OFFSETS_PARTITION: &str = "__mirrorlog_group_offsets";

const READ_BYTES: usize = 1 << 20;

/// The fewest records since the last snapshot that make the store write a new one.
pub const SNAPSHOT_MIN_RECORDS: u64 = 100_000;

/// Records of a snapshot per batch.
const SNAPSHOT_RECORDS_PER_BATCH: usize = 10_000;

/// The largest record a group's stored membership may take (JSON). Kafka refuses group metadata larger than
/// the offsets topic's largest message (about 1 MiB, binary) and fails the SyncGroup; this bound is the JSON
/// equivalent of a few MiB, far above any real group, and keeps one hostile group from writing gigabytes.
pub const MAX_STORED_GROUP_BYTES: usize = 16 << 20;

/// One committed offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Committed {
    /// The offset (the next record the group will read).
    pub offset: i64,
    /// The client's metadata string.
    pub metadata: Option<String>,
    /// When it was committed (milliseconds since the epoch, the node's clock): what `offsets.retention.minutes`
    /// counts from. Stamped by the store; a record written before it was stored takes its batch's time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_timestamp_ms: Option<i64>,
}

impl Committed {
    /// An offset and its metadata, not yet stamped.
    pub fn new(offset: i64, metadata: Option<String>) -> Self {
        Committed {
            offset,
            metadata,
            commit_timestamp_ms: None,
        }
    }

    /// Whether `other` commits the same offset with the same metadata (whenever it was committed).
    pub fn same_position(&self, other: &Committed) -> bool {
        self.offset == other.offset && self.metadata == other.metadata
    }
}

/// One offset a commit names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetEntry {
    /// The group.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// What is committed.
    pub committed: Committed,
}

/// A record of the offset log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum OffsetRecord {
    /// Committed at once (OffsetCommit).
    Commit(OffsetEntry),
    /// Staged by a transaction (TxnOffsetCommit).
    Staged { producer_id: i64, entry: OffsetEntry },
    /// DeleteGroups: every committed offset of the group goes, and its stored membership.
    DeleteGroup { group: String },
    /// OffsetDelete (one group, some partitions) or a topic's deletion (every group, every partition): the
    /// committed offsets named go.
    DeleteOffsets {
        /// The group; every group when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
        topic: String,
        /// The partitions; every partition when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partitions: Option<Vec<i32>>,
    },
    /// A group's membership as last stored.
    Group { group: String, stored: StoredGroup },
    /// A transaction's marker reached the `__consumer_offsets` partition `offsets_partition`.
    End {
        producer_id: i64,
        offsets_partition: u32,
        commit: bool,
    },
    /// A snapshot of the whole state begins: the records up to [`OffsetRecord::SnapshotEnd`] are the state.
    SnapshotStart,
    /// A group whose offsets were all deleted and that still exists (part of a snapshot).
    Emptied { group: String },
    /// The snapshot is complete.
    SnapshotEnd,
    /// The snapshot begun before was cut short by a crash: its records are not the state.
    SnapshotAbandoned,
}

type Key = (String, String, i32);

/// The store; see the module docs.
pub struct GroupOffsets {
    storage: Box<dyn PartitionStorage>,
    durability: Durability,
    /// Stamps the records' timestamps.
    clock: Arc<dyn Clock>,
    committed: BTreeMap<Key, Committed>,
    staged: BTreeMap<i64, Vec<OffsetEntry>>,
    groups: BTreeMap<String, StoredGroup>,
    /// Groups whose committed offsets were deleted (OffsetDelete, a topic's deletion): they still exist, empty,
    /// as Kafka's coordinator keeps them, until DeleteGroups (Kafka's periodic cleanup of empty groups is not
    /// done).
    emptied: std::collections::BTreeSet<String>,
    /// Records in the log from its start (replayed at open, written since).
    records: u64,
    /// Records of the last snapshot (0: none).
    snapshot_records: u64,
}

/// A group's offsets as [`GroupOffsets::expire`] judges them.
struct GroupVerdict<'a> {
    group: &'a str,
    /// How its offsets expire (asked of the membership once).
    rule: crate::membership::OffsetExpiry,
    /// The partitions expired, by topic.
    expired: BTreeMap<&'a str, Vec<i32>>,
    /// How many offsets are kept.
    kept: usize,
}

/// What [`GroupOffsets::expire`] deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expired {
    /// Committed offsets deleted.
    pub offsets: usize,
    /// Groups forgotten with them (left with no offsets).
    pub groups: Vec<String>,
}

/// `entry` with its commit time set to `now_ms` when it has none.
fn stamped(mut entry: OffsetEntry, now_ms: i64) -> OffsetEntry {
    entry.committed.commit_timestamp_ms.get_or_insert(now_ms);
    entry
}

/// The state a snapshot being replayed builds, until its end makes it the store's.
#[derive(Default)]
struct Replayed {
    committed: BTreeMap<Key, Committed>,
    staged: BTreeMap<i64, Vec<OffsetEntry>>,
    groups: BTreeMap<String, StoredGroup>,
    emptied: std::collections::BTreeSet<String>,
    records: u64,
}

impl std::fmt::Debug for GroupOffsets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupOffsets")
            .field("committed", &self.committed.len())
            .field("staged", &self.staged.len())
            .finish_non_exhaustive()
    }
}

impl GroupOffsets {
    /// Opens the store over its partition, replaying every record.
    pub async fn open(
        storage: Box<dyn PartitionStorage>,
        durability: Durability,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, NodeError> {
        let mut store = GroupOffsets {
            storage,
            durability,
            clock,
            committed: BTreeMap::new(),
            staged: BTreeMap::new(),
            groups: BTreeMap::new(),
            emptied: std::collections::BTreeSet::new(),
            records: 0,
            snapshot_records: 0,
        };
        // A snapshot being read: its records build a state of their own, which becomes the store's at its end.
        let mut snapshot: Option<Replayed> = None;
        let mut offset = store.storage.log_start_offset();
        while offset < store.storage.log_end_offset() {
            let batches = store.storage.read(offset, READ_BYTES).await?;
            let Some(last) = batches.last() else {
                break;
            };
            offset = last.next_offset();
            for batch in &batches {
                let corrupt = |error: &dyn std::fmt::Display| {
                    NodeError::Offsets(format!("batch at offset {}: {error}", batch.base_offset()))
                };
                for record in batch.records().map_err(|e| corrupt(&e))?.iter() {
                    let record = record.map_err(|e| corrupt(&e))?;
                    let value = record.value.unwrap_or_default();
                    let record: OffsetRecord = serde_json::from_slice(value).map_err(|e| corrupt(&e))?;
                    // Written before commit times were stored: the batch's time is when it was committed.
                    let record = match record {
                        OffsetRecord::Commit(entry) => {
                            OffsetRecord::Commit(stamped(entry, batch.max_timestamp()))
                        }
                        OffsetRecord::Staged { producer_id, entry } => OffsetRecord::Staged {
                            producer_id,
                            entry: stamped(entry, batch.max_timestamp()),
                        },
                        record => record,
                    };
                    store.records += 1;
                    store.replay(record, &mut snapshot);
                }
            }
        }
        if snapshot.is_some() {
            // Closed before anything else is written, so no record of the store's can follow it unclosed.
            store.write(vec![OffsetRecord::SnapshotAbandoned]).await?;
            store.storage.flush(Durability::Sync).await?;
        }
        Ok(store)
    }

    /// Replays one record: into the snapshot being read, if one is, else into the store.
    fn replay(&mut self, record: OffsetRecord, snapshot: &mut Option<Replayed>) {
        match (record, snapshot.as_mut()) {
            (OffsetRecord::SnapshotStart, _) => *snapshot = Some(Replayed::default()),
            (OffsetRecord::SnapshotEnd, Some(_)) => {
                if let Some(done) = snapshot.take() {
                    self.committed = done.committed;
                    self.staged = done.staged;
                    self.groups = done.groups;
                    self.emptied = done.emptied;
                    self.snapshot_records = done.records + 2;
                }
            }
            (OffsetRecord::SnapshotEnd | OffsetRecord::SnapshotAbandoned, None) => {}
            (OffsetRecord::SnapshotAbandoned, Some(_)) => *snapshot = None,
            (OffsetRecord::Commit(entry), Some(state)) => {
                state.records += 1;
                state
                    .committed
                    .insert((entry.group, entry.topic, entry.partition), entry.committed);
            }
            (OffsetRecord::Staged { producer_id, entry }, Some(state)) => {
                state.records += 1;
                state.staged.entry(producer_id).or_default().push(entry);
            }
            (OffsetRecord::Group { group, stored }, Some(state)) => {
                state.records += 1;
                state.groups.insert(group, stored);
            }
            (OffsetRecord::Emptied { group }, Some(state)) => {
                state.records += 1;
                state.emptied.insert(group);
            }
            (record, Some(_)) => {
                // A record a snapshot never holds (a deletion, a transaction's end): the snapshot before it was
                // not a whole one. Its records are dropped; the store's state is what came before it.
                *snapshot = None;
                self.apply(record);
            }
            (record, None) => self.apply(record),
        }
    }

    /// How many records the log holds from its start (what a start replays).
    pub fn log_records(&self) -> u64 {
        self.records
    }

    /// Writes the whole state as a snapshot when the log has grown past the threshold (module docs), then moves
    /// the log start to it; returns whether it did. Storage-fs starts a new segment for it, so the old segments
    /// can go whole. The node's housekeeping calls it, off the request path.
    pub async fn snapshot_if_due(&mut self) -> Result<bool, NodeError> {
        let threshold = SNAPSHOT_MIN_RECORDS.max(self.snapshot_records.saturating_mul(2));
        if self.records < threshold {
            return Ok(false);
        }
        let mut state: Vec<OffsetRecord> = Vec::new();
        for ((group, topic, partition), committed) in &self.committed {
            state.push(OffsetRecord::Commit(OffsetEntry {
                group: group.clone(),
                topic: topic.clone(),
                partition: *partition,
                committed: committed.clone(),
            }));
        }
        for (producer_id, entries) in &self.staged {
            for entry in entries {
                state.push(OffsetRecord::Staged {
                    producer_id: *producer_id,
                    entry: entry.clone(),
                });
            }
        }
        for (group, stored) in &self.groups {
            state.push(OffsetRecord::Group {
                group: group.clone(),
                stored: stored.clone(),
            });
        }
        for group in &self.emptied {
            state.push(OffsetRecord::Emptied { group: group.clone() });
        }
        self.storage.roll_segment().await?;
        let start = self.storage.log_end_offset();
        let count = state.len() as u64;
        self.append(&[OffsetRecord::SnapshotStart]).await?;
        for chunk in state.chunks(SNAPSHOT_RECORDS_PER_BATCH) {
            self.append(chunk).await?;
        }
        self.append(&[OffsetRecord::SnapshotEnd]).await?;
        self.storage.flush(Durability::Sync).await?;
        self.storage.delete_before(start).await?;
        self.records = count + 2;
        self.snapshot_records = count + 2;
        Ok(true)
    }

    /// Appends `records` as one batch (not yet flushed).
    async fn append(&mut self, records: &[OffsetRecord]) -> Result<(), NodeError> {
        let now_ms = self.clock.now_ms();
        let mut builder = BatchBuilder::new().base_offset(self.storage.log_end_offset());
        for record in records {
            let value = serde_json::to_vec(record).map_err(|e| NodeError::Offsets(e.to_string()))?;
            builder.add(now_ms, None, Some(&value), &[]);
        }
        let batch = builder
            .build()
            .map_err(|e| NodeError::Offsets(format!("cannot encode a batch: {e}")))?;
        self.storage.append(&[batch]).await?;
        Ok(())
    }

    /// The committed offset of a group's partition.
    pub fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<&Committed> {
        self.committed
            .get(&(group.to_owned(), topic.to_owned(), partition))
    }

    /// Whether a transaction's offsets for a group's partition are staged, waiting for its marker.
    pub fn pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.staged
            .values()
            .flatten()
            .any(|entry| entry.group == group && entry.topic == topic && entry.partition == partition)
    }

    /// Every committed offset of a group, by topic then partition.
    pub fn group(&self, group: &str) -> Vec<(&str, i32, &Committed)> {
        self.committed
            .iter()
            .filter(|((g, _, _), _)| g == group)
            .map(|((_, topic, partition), committed)| (topic.as_str(), *partition, committed))
            .collect()
    }

    /// Every committed offset on partitions of `topics`, of every group: (group, topic, partition, committed).
    pub fn on_topics(&self, topics: &std::collections::BTreeSet<&str>) -> Vec<(&str, &str, i32, &Committed)> {
        self.committed
            .iter()
            .filter(|((_, topic, _), _)| topics.contains(topic.as_str()))
            .map(|((group, topic, partition), committed)| {
                (group.as_str(), topic.as_str(), *partition, committed)
            })
            .collect()
    }

    /// OffsetCommit: durable before it returns.
    pub async fn commit(&mut self, entries: Vec<OffsetEntry>) -> Result<(), NodeError> {
        let now = self.clock.now_ms();
        self.write(
            entries
                .into_iter()
                .map(|entry| OffsetRecord::Commit(stamped(entry, now)))
                .collect(),
        )
        .await
    }

    /// DeleteGroups: forgets every committed offset of `group`, durably.
    pub async fn delete_group(&mut self, group: &str) -> Result<(), NodeError> {
        self.write(vec![OffsetRecord::DeleteGroup {
            group: group.to_owned(),
        }])
        .await
    }

    /// Forgets committed offsets, durably: `group`'s (every group's when `None`) on `topic`'s `partitions`
    /// (every partition when `None`).
    pub async fn delete_offsets(
        &mut self,
        group: Option<&str>,
        topic: &str,
        partitions: Option<Vec<i32>>,
    ) -> Result<(), NodeError> {
        self.write(vec![OffsetRecord::DeleteOffsets {
            group: group.map(str::to_owned),
            topic: topic.to_owned(),
            partitions,
        }])
        .await
    }

    /// Whether `group` has a committed offset (a range lookup, not a scan), or had some that were deleted.
    pub fn has_group(&self, group: &str) -> bool {
        self.emptied.contains(group)
            || self
                .committed
                .range((group.to_owned(), String::new(), i32::MIN)..)
                .next()
                .is_some_and(|((g, _, _), _)| g == group)
    }

    /// Every group with a committed offset, or whose offsets were deleted.
    pub fn groups(&self) -> std::collections::BTreeSet<&str> {
        self.committed
            .keys()
            .map(|(group, _, _)| group.as_str())
            .chain(self.emptied.iter().map(String::as_str))
            .collect()
    }

    /// Every group's membership as last stored (what a restarted node restores).
    pub fn stored_groups(&self) -> &BTreeMap<String, StoredGroup> {
        &self.groups
    }

    /// Stores groups' membership, durably. A group whose record would exceed [`MAX_STORED_GROUP_BYTES`] is not
    /// stored (the others are) and makes the call fail with [`NodeError::GroupTooLarge`].
    pub async fn store_groups(&mut self, groups: Vec<(String, StoredGroup)>) -> Result<(), NodeError> {
        let mut too_large = None;
        let mut records = Vec::with_capacity(groups.len());
        for (group, stored) in groups {
            let record = OffsetRecord::Group { group, stored };
            let size = serde_json::to_vec(&record).map_or(usize::MAX, |json| json.len());
            match record {
                OffsetRecord::Group { group, .. } if size > MAX_STORED_GROUP_BYTES => {
                    too_large = Some(NodeError::GroupTooLarge { group, size });
                }
                record => records.push(record),
            }
        }
        self.write(records).await?;
        too_large.map_or(Ok(()), Err)
    }

    /// TxnOffsetCommit: staged under the producer id until its transaction ends.
    pub async fn stage(&mut self, producer_id: i64, entries: Vec<OffsetEntry>) -> Result<(), NodeError> {
        let now = self.clock.now_ms();
        self.write(
            entries
                .into_iter()
                .map(|entry| OffsetRecord::Staged {
                    producer_id,
                    entry: stamped(entry, now),
                })
                .collect(),
        )
        .await
    }

    /// Deletes the committed offsets `offsets.retention.minutes` expired at `now_ms` (Kafka's `GroupMetadata.
    /// removeExpiredOffsets`), each group as `expiry` says it expires, and forgets a group left with no offsets
    /// whose expiry allows it (an Empty group, a standalone consumer's; also one OffsetDelete emptied). An offset
    /// a transaction has staged for its partition is kept until the transaction ends. Returns the offsets
    /// deleted and the groups forgotten (for the caller to forget their membership too).
    pub async fn expire(
        &mut self,
        now_ms: i64,
        retention_ms: i64,
        expiry: impl Fn(&str) -> crate::membership::OffsetExpiry,
    ) -> Result<Expired, NodeError> {
        use crate::membership::OffsetExpiry;
        let expired_at = |base: i64| now_ms.saturating_sub(base) >= retention_ms;
        // One pass over the staged offsets, one over the committed ones (ordered by group): linear in the store.
        let mut staged_groups: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
        let mut staged_keys: std::collections::BTreeSet<(&str, &str, i32)> =
            std::collections::BTreeSet::new();
        for entry in self.staged.values().flatten() {
            staged_groups.insert(entry.group.as_str());
            staged_keys.insert((entry.group.as_str(), entry.topic.as_str(), entry.partition));
        }
        let mut records = Vec::new();
        let mut done = Expired::default();
        let mut verdicts: Vec<GroupVerdict<'_>> = Vec::new();
        for ((group, topic, partition), committed) in &self.committed {
            if verdicts
                .last()
                .is_none_or(|verdict| verdict.group != group.as_str())
            {
                verdicts.push(GroupVerdict {
                    group: group.as_str(),
                    rule: expiry(group),
                    expired: BTreeMap::new(),
                    kept: 0,
                });
            }
            let Some(verdict) = verdicts.last_mut() else {
                continue;
            };
            // An offset stored before its time was recorded was stamped with its batch's when replayed.
            let committed_at = committed.commit_timestamp_ms.unwrap_or(now_ms);
            let gone = !staged_keys.contains(&(group.as_str(), topic.as_str(), *partition))
                && match &verdict.rule {
                    OffsetExpiry::Standalone => expired_at(committed_at),
                    OffsetExpiry::EmptySince(since) => expired_at(committed_at.max(*since)),
                    OffsetExpiry::Unsubscribed(topics) => !topics.contains(topic) && expired_at(committed_at),
                    OffsetExpiry::Keep => false,
                };
            if gone {
                verdict
                    .expired
                    .entry(topic.as_str())
                    .or_default()
                    .push(*partition);
            } else {
                verdict.kept += 1;
            }
        }
        // Groups OffsetDelete emptied: nothing committed, still listed until this check.
        let judged: std::collections::BTreeSet<&str> = verdicts.iter().map(|verdict| verdict.group).collect();
        for group in self
            .emptied
            .iter()
            .filter(|group| !judged.contains(group.as_str()))
        {
            verdicts.push(GroupVerdict {
                group: group.as_str(),
                rule: expiry(group),
                expired: BTreeMap::new(),
                kept: 0,
            });
        }
        for verdict in verdicts {
            let GroupVerdict {
                group,
                rule,
                expired,
                kept,
            } = verdict;
            done.offsets += expired.values().map(Vec::len).sum::<usize>();
            // A group goes whole when nothing of it is left — no offset kept, none a transaction holds staged —
            // and its rule lets it (Empty, or a standalone consumer's).
            let whole_group_may_go = kept == 0
                && !staged_groups.contains(group)
                && matches!(rule, OffsetExpiry::Standalone | OffsetExpiry::EmptySince(_));
            if whole_group_may_go {
                done.groups.push(group.to_owned());
                records.push(OffsetRecord::DeleteGroup {
                    group: group.to_owned(),
                });
                continue;
            }
            for (topic, partitions) in expired {
                records.push(OffsetRecord::DeleteOffsets {
                    group: Some(group.to_owned()),
                    topic: topic.to_owned(),
                    partitions: Some(partitions),
                });
            }
        }
        self.write(records).await?;
        Ok(done)
    }

    /// A COMMIT or ABORT marker of `producer_id` for the `__consumer_offsets` partition `offsets_partition`.
    pub async fn end(
        &mut self,
        producer_id: i64,
        offsets_partition: u32,
        commit: bool,
    ) -> Result<(), NodeError> {
        self.write(vec![OffsetRecord::End {
            producer_id,
            offsets_partition,
            commit,
        }])
        .await
    }

    /// Closes the store's partition cleanly.
    pub async fn close(mut self) -> Result<(), NodeError> {
        self.storage.flush(Durability::Sync).await?;
        Ok(())
    }

    async fn write(&mut self, records: Vec<OffsetRecord>) -> Result<(), NodeError> {
        if records.is_empty() {
            return Ok(());
        }
        self.append(&records).await?;
        self.storage.flush(self.durability).await?;
        self.records += records.len() as u64;
        for record in records {
            self.apply(record);
        }
        Ok(())
    }

    fn apply(&mut self, record: OffsetRecord) {
        match record {
            OffsetRecord::Commit(entry) => {
                self.committed
                    .insert((entry.group, entry.topic, entry.partition), entry.committed);
            }
            OffsetRecord::Staged { producer_id, entry } => {
                self.staged.entry(producer_id).or_default().push(entry);
            }
            OffsetRecord::DeleteGroup { group } => {
                self.committed.retain(|(g, _, _), _| *g != group);
                self.groups.remove(&group);
                self.emptied.remove(&group);
            }
            OffsetRecord::Group { group, stored } => {
                self.groups.insert(group, stored);
            }
            OffsetRecord::DeleteOffsets {
                group,
                topic,
                partitions,
            } => {
                let emptied = &mut self.emptied;
                self.committed.retain(|(g, t, p), _| {
                    let named = group.as_ref().is_none_or(|group| group == g)
                        && *t == topic
                        && partitions
                            .as_ref()
                            .is_none_or(|partitions| partitions.contains(p));
                    if named {
                        emptied.insert(g.clone());
                    }
                    !named
                });
                // A group OffsetDelete names exists afterwards, even if it held nothing to delete.
                emptied.extend(group);
            }
            OffsetRecord::Emptied { group } => {
                self.emptied.insert(group);
            }
            OffsetRecord::SnapshotStart | OffsetRecord::SnapshotEnd | OffsetRecord::SnapshotAbandoned => {}
            OffsetRecord::End {
                producer_id,
                offsets_partition,
                commit,
            } => {
                let Some(entries) = self.staged.remove(&producer_id) else {
                    return;
                };
                let (ended, kept): (Vec<_>, Vec<_>) = entries.into_iter().partition(|entry| {
                    txn_coordinator::offsets_partition_for(&entry.group)
                        .is_some_and(|p| p.partition() == offsets_partition)
                });
                if !kept.is_empty() {
                    self.staged.insert(producer_id, kept);
                }
                if commit {
                    for entry in ended {
                        self.committed
                            .insert((entry.group, entry.topic, entry.partition), entry.committed);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::membership::StoredMember;
    use storage::{MemoryStorage, PartitionId, Storage};

    fn group(members: usize, metadata_bytes: usize) -> StoredGroup {
        StoredGroup {
            protocol_type: Some("consumer".to_owned()),
            generation: 1,
            protocol: Some("range".to_owned()),
            leader: Some("m0".to_owned()),
            members: (0..members)
                .map(|n| StoredMember {
                    member_id: format!("m{n}"),
                    instance_id: None,
                    client_id: "client".to_owned(),
                    client_host: "/127.0.0.1".to_owned(),
                    session_timeout_ms: 10_000,
                    rebalance_timeout_ms: 10_000,
                    protocols: vec![("range".to_owned(), vec![255; metadata_bytes])],
                    assignment: Vec::new(),
                })
                .collect(),
            empty_since_ms: None,
        }
    }

    #[tokio::test]
    async fn a_group_too_large_to_store_is_refused_and_the_others_of_its_call_are_stored() {
        let storage = MemoryStorage::new();
        let id = PartitionId::new(OFFSETS_PARTITION, 0).unwrap();
        let clock: Arc<dyn Clock> = Arc::new(crate::SystemClock);
        let partition = storage.create(&id).await.unwrap();
        let mut offsets = GroupOffsets::open(partition, Durability::Sync, clock.clone())
            .await
            .unwrap();
        // Five members with 1 MiB of metadata each: about 20 MiB of JSON.
        let huge = group(5, 1 << 20);
        let result = offsets
            .store_groups(vec![
                ("huge".to_owned(), huge),
                ("small".to_owned(), group(1, 10)),
            ])
            .await;
        assert!(
            matches!(result, Err(NodeError::GroupTooLarge { ref group, size }) if group == "huge" && size > MAX_STORED_GROUP_BYTES),
            "{result:?}"
        );
        offsets.close().await.unwrap();

        let reopened = GroupOffsets::open(storage.open(&id).await.unwrap(), Durability::Sync, clock)
            .await
            .unwrap();
        let stored: Vec<&String> = reopened.stored_groups().keys().collect();
        assert_eq!(stored, vec!["small"]);
    }

    #[tokio::test]
    async fn a_group_is_found_by_its_exact_name_among_groups_sharing_a_prefix() {
        let storage = MemoryStorage::new();
        let id = PartitionId::new(OFFSETS_PARTITION, 0).unwrap();
        let partition = storage.create(&id).await.unwrap();
        let mut offsets = GroupOffsets::open(partition, Durability::Sync, Arc::new(crate::SystemClock))
            .await
            .unwrap();
        let entry = |group: &str| OffsetEntry {
            group: group.to_owned(),
            topic: "orders".to_owned(),
            partition: 0,
            committed: Committed::new(1, None),
        };
        offsets.commit(vec![entry("ab"), entry("abc")]).await.unwrap();
        assert!(offsets.has_group("ab") && offsets.has_group("abc"));
        assert!(!offsets.has_group("a") && !offsets.has_group("abcd") && !offsets.has_group(""));
    }

    fn commit_of(group: &str, partition: i32, offset: i64) -> OffsetEntry {
        OffsetEntry {
            group: group.to_owned(),
            topic: "orders".to_owned(),
            partition,
            committed: Committed::new(offset, Some(format!("at {offset}"))),
        }
    }

    async fn fresh(storage: &MemoryStorage) -> GroupOffsets {
        let id = PartitionId::new(OFFSETS_PARTITION, 0).unwrap();
        storage.create(&id).await.unwrap();
        reopen(storage).await
    }

    async fn reopen(storage: &MemoryStorage) -> GroupOffsets {
        let id = PartitionId::new(OFFSETS_PARTITION, 0).unwrap();
        GroupOffsets::open(
            storage.open(&id).await.unwrap(),
            Durability::Sync,
            Arc::new(crate::SystemClock),
        )
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn a_log_of_history_is_rewritten_as_its_live_state_and_a_start_replays_only_that() {
        let storage = MemoryStorage::new();
        let mut offsets = fresh(&storage).await;
        // 120,000 commits of 100 partitions, 1,000 per call; a transaction staged, a group stored, one emptied.
        for round in 0..120 {
            let entries = (0..1_000)
                .map(|n| commit_of("readers", n % 100, round * 1_000 + i64::from(n)))
                .collect();
            offsets.commit(entries).await.unwrap();
        }
        offsets
            .stage(7, vec![commit_of("txn-readers", 0, 5)])
            .await
            .unwrap();
        offsets
            .store_groups(vec![("readers".to_owned(), group(2, 10))])
            .await
            .unwrap();
        offsets.commit(vec![commit_of("gone", 0, 1)]).await.unwrap();
        offsets
            .delete_offsets(Some("gone"), "orders", None)
            .await
            .unwrap();
        assert!(offsets.log_records() > SNAPSHOT_MIN_RECORDS);
        let live = (
            offsets.committed.clone(),
            offsets.staged.clone(),
            offsets.groups.clone(),
            offsets.emptied.clone(),
        );

        assert!(offsets.snapshot_if_due().await.unwrap());
        assert!(!offsets.snapshot_if_due().await.unwrap(), "not due again at once");
        // 100 committed offsets, one staged, one group, one emptied group, and the two bounds.
        assert_eq!(offsets.log_records(), 105);
        offsets.close().await.unwrap();

        let mut reopened = reopen(&storage).await;
        assert_eq!(reopened.log_records(), 105, "a start replays the live state only");
        let state = (
            reopened.committed.clone(),
            reopened.staged.clone(),
            reopened.groups.clone(),
            reopened.emptied.clone(),
        );
        assert_eq!(state, live);
        assert_eq!(
            reopened.committed("readers", "orders", 99).map(|c| c.offset),
            Some(119_999)
        );
        // The staged transaction still commits after the snapshot.
        reopened
            .end(
                7,
                txn_coordinator::offsets_partition_for("txn-readers")
                    .unwrap()
                    .partition(),
                true,
            )
            .await
            .unwrap();
        assert_eq!(
            reopened.committed("txn-readers", "orders", 0).map(|c| c.offset),
            Some(5)
        );
    }

    #[tokio::test]
    async fn a_snapshot_a_crash_cut_short_is_ignored_and_what_followed_it_is_kept() {
        let storage = MemoryStorage::new();
        let mut offsets = fresh(&storage).await;
        offsets.commit(vec![commit_of("readers", 0, 1)]).await.unwrap();
        // A snapshot's first records, then no end: the process died while writing it.
        offsets
            .append(&[
                OffsetRecord::SnapshotStart,
                OffsetRecord::Commit(commit_of("readers", 0, 999)),
            ])
            .await
            .unwrap();
        offsets.storage.flush(Durability::Sync).await.unwrap();
        drop(offsets);
        let mut reopened = reopen(&storage).await;
        assert_eq!(
            reopened.committed("readers", "orders", 0).map(|c| c.offset),
            Some(1)
        );
        reopened.commit(vec![commit_of("readers", 1, 2)]).await.unwrap();
        reopened.close().await.unwrap();
        let again = reopen(&storage).await;
        assert_eq!(again.committed("readers", "orders", 0).map(|c| c.offset), Some(1));
        assert_eq!(again.committed("readers", "orders", 1).map(|c| c.offset), Some(2));
    }

    /// `offsets.retention.minutes` (Kafka's `removeExpiredOffsets`): a standalone consumer's offset expires
    /// counted from its commit, an Empty group's from when it emptied (or the commit, if later), a Stable group's
    /// only on topics no member subscribes to; an offset a transaction staged is kept; a group left with no offsets
    /// is forgotten; the deletions are durable and commit times survive a restart.
    #[tokio::test]
    async fn offsets_expire_by_the_rule_of_their_group_and_stay_expired_after_a_restart() {
        use crate::membership::OffsetExpiry;
        const RETENTION: i64 = 60_000;
        let storage = MemoryStorage::new();
        let mut offsets = fresh(&storage).await;
        let on = |group: &str, topic: &str, partition: i32| OffsetEntry {
            group: group.to_owned(),
            topic: topic.to_owned(),
            partition,
            committed: Committed::new(5, None),
        };
        offsets
            .commit(vec![
                on("standalone", "orders", 0),
                on("emptied", "orders", 0),
                on("stable", "orders", 0),
                on("stable", "refunds", 0),
                on("rebalancing", "orders", 0),
                on("in-txn", "orders", 0),
                on("in-txn", "orders", 1),
                on("txn-elsewhere", "orders", 0),
            ])
            .await
            .unwrap();
        offsets.stage(7, vec![on("in-txn", "orders", 1)]).await.unwrap();
        offsets
            .stage(8, vec![on("txn-elsewhere", "orders", 2)])
            .await
            .unwrap();
        let committed_at = offsets
            .committed("standalone", "orders", 0)
            .and_then(|committed| committed.commit_timestamp_ms)
            .expect("stamped at commit");
        let emptied_at = committed_at + 30_000;
        let rule = |group: &str| match group {
            "emptied" => OffsetExpiry::EmptySince(emptied_at),
            "stable" => OffsetExpiry::Unsubscribed(["orders".to_owned()].into()),
            "rebalancing" => OffsetExpiry::Keep,
            _ => OffsetExpiry::Standalone,
        };
        let early = offsets
            .expire(committed_at + RETENTION - 1, RETENTION, rule)
            .await
            .unwrap();
        assert_eq!(early, Expired::default(), "nothing is due a millisecond early");

        let due = offsets
            .expire(committed_at + RETENTION, RETENTION, rule)
            .await
            .unwrap();
        assert_eq!(due.offsets, 4, "{due:?}");
        assert!(offsets.committed("txn-elsewhere", "orders", 0).is_none());
        assert!(
            offsets.has_group("txn-elsewhere"),
            "a group a transaction still stages offsets for is not forgotten"
        );
        assert_eq!(due.groups, vec!["standalone".to_owned()]);
        assert!(offsets.committed("standalone", "orders", 0).is_none());
        assert!(
            !offsets.has_group("standalone"),
            "a group left with nothing is forgotten"
        );
        assert!(
            offsets.committed("emptied", "orders", 0).is_some(),
            "counted from when it emptied"
        );
        assert!(
            offsets.committed("stable", "orders", 0).is_some(),
            "a subscribed topic is kept"
        );
        assert!(offsets.committed("stable", "refunds", 0).is_none());
        assert!(offsets.committed("rebalancing", "orders", 0).is_some());
        assert!(offsets.committed("in-txn", "orders", 0).is_none());
        assert!(
            offsets.committed("in-txn", "orders", 1).is_some(),
            "a transaction's staged offset holds the partition's"
        );

        let later = offsets
            .expire(emptied_at + RETENTION, RETENTION, rule)
            .await
            .unwrap();
        assert_eq!(later.groups, vec!["emptied".to_owned()], "{later:?}");
        let again = reopen(&storage).await;
        assert!(!again.has_group("standalone") && !again.has_group("emptied"));
        assert!(again.committed("stable", "refunds", 0).is_none());
        assert_eq!(
            again
                .committed("stable", "orders", 0)
                .and_then(|committed| committed.commit_timestamp_ms),
            Some(committed_at),
            "the commit time is stored with the offset"
        );
    }
}
