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
//! The state and its rules — what each request writes, how a transaction's offsets become visible, what expires —
//! are `group-coordinator`'s ([`group_coordinator::offsets::OffsetState`]); this module is its log: each decision's
//! records appended and made durable, then applied; opening replays them. Staging and ending a transaction's
//! offsets are records too, so a crash between the coordinator's PrepareCommit and its markers loses nothing: the
//! coordinator re-sends the markers on restart and the staged offsets are still there.

use std::sync::Arc;

use group_coordinator::offsets::{stamped, OffsetRecord, OffsetState, SnapshotReplay};
use record_format::BatchBuilder;
use storage::{Durability, PartitionStorage};

use crate::membership::StoredGroup;
use crate::{Clock, NodeError};

pub use group_coordinator::offsets::{Committed, Expired, OffsetEntry, MAX_STORED_GROUP_BYTES};

/// The internal partition holding the offset log.
pub const OFFSETS_PARTITION: &str = "__mirrorlog_group_offsets";

const READ_BYTES: usize = 1 << 20;

/// The fewest records since the last snapshot that make the store write a new one.
pub const SNAPSHOT_MIN_RECORDS: u64 = 100_000;

/// Records of a snapshot per batch.
const SNAPSHOT_RECORDS_PER_BATCH: usize = 10_000;

/// A group's `__consumer_offsets` partition, by Kafka's hash (the transaction coordinator's).
fn offsets_partition_of(group: &str) -> Option<u32> {
    txn_coordinator::offsets_partition_for(group).map(|partition| partition.partition())
}

/// The store; see the module docs.
pub struct GroupOffsets {
    storage: Box<dyn PartitionStorage>,
    durability: Durability,
    /// Stamps the records' timestamps.
    clock: Arc<dyn Clock>,
    state: OffsetState,
    /// Records in the log from its start (replayed at open, written since).
    records: u64,
    /// Records of the last snapshot (0: none).
    snapshot_records: u64,
}

impl std::fmt::Debug for GroupOffsets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupOffsets")
            .field("state", &self.state)
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
            state: OffsetState::new(offsets_partition_of),
            records: 0,
            snapshot_records: 0,
        };
        // A snapshot being read: its records build a state of their own, which becomes the store's at its end.
        let mut snapshot = SnapshotReplay::default();
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
                    if let Some(records) = store.state.replay(record, &mut snapshot) {
                        store.snapshot_records = records;
                    }
                }
            }
        }
        if snapshot.is_open() {
            // Closed before anything else is written, so no record of the store's can follow it unclosed.
            store.write(vec![OffsetRecord::SnapshotAbandoned]).await?;
            store.storage.flush(Durability::Sync).await?;
        }
        Ok(store)
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
        let state = self.state.snapshot();
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
        self.state.committed(group, topic, partition)
    }

    /// Whether a transaction's offsets for a group's partition are staged, waiting for its marker.
    pub fn pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.state.pending(group, topic, partition)
    }

    /// Every committed offset of a group, by topic then partition.
    pub fn group(&self, group: &str) -> Vec<(&str, i32, &Committed)> {
        self.state.group(group)
    }

    /// Every committed offset on partitions of `topics`, of every group: (group, topic, partition, committed).
    pub fn on_topics(&self, topics: &std::collections::BTreeSet<&str>) -> Vec<(&str, &str, i32, &Committed)> {
        self.state.on_topics(topics)
    }

    /// Whether `group` has a committed offset, or had some that were deleted.
    pub fn has_group(&self, group: &str) -> bool {
        self.state.has_group(group)
    }

    /// Every group with a committed offset, or whose offsets were deleted.
    pub fn groups(&self) -> std::collections::BTreeSet<&str> {
        self.state.groups()
    }

    /// Every group's membership as last stored (what a restarted node restores).
    pub fn stored_groups(&self) -> &std::collections::BTreeMap<String, StoredGroup> {
        self.state.stored_groups()
    }

    /// OffsetCommit: durable before it returns.
    pub async fn commit(&mut self, entries: Vec<OffsetEntry>) -> Result<(), NodeError> {
        let now = self.clock.now_ms();
        self.write(OffsetState::commit_records(entries, now)).await
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

    /// Stores groups' membership, durably. A group whose record would exceed [`MAX_STORED_GROUP_BYTES`] is not
    /// stored (the others are) and makes the call fail with [`NodeError::GroupTooLarge`].
    pub async fn store_groups(&mut self, groups: Vec<(String, StoredGroup)>) -> Result<(), NodeError> {
        let (records, too_large) = OffsetState::store_group_records(groups);
        self.write(records).await?;
        too_large.map_or(Ok(()), |refused| {
            Err(NodeError::GroupTooLarge {
                group: refused.group,
                size: refused.size,
            })
        })
    }

    /// TxnOffsetCommit: staged under the producer id until its transaction ends.
    pub async fn stage(&mut self, producer_id: i64, entries: Vec<OffsetEntry>) -> Result<(), NodeError> {
        let now = self.clock.now_ms();
        self.write(OffsetState::stage_records(producer_id, entries, now))
            .await
    }

    /// Deletes, durably, the committed offsets `offsets.retention.minutes` expired at `now_ms`
    /// ([`OffsetState::expire`]); returns the offsets deleted and the groups forgotten.
    pub async fn expire(
        &mut self,
        now_ms: i64,
        retention_ms: i64,
        expiry: impl Fn(&str) -> crate::membership::OffsetExpiry,
    ) -> Result<Expired, NodeError> {
        let (records, done) = self.state.expire(now_ms, retention_ms, expiry);
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

    /// Appends `records`, makes them as durable as the store's durability says, then applies them.
    async fn write(&mut self, records: Vec<OffsetRecord>) -> Result<(), NodeError> {
        if records.is_empty() {
            return Ok(());
        }
        self.append(&records).await?;
        self.storage.flush(self.durability).await?;
        self.records += records.len() as u64;
        for record in records {
            self.state.apply(record);
        }
        Ok(())
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
        let live = offsets.state.snapshot();

        assert!(offsets.snapshot_if_due().await.unwrap());
        assert!(!offsets.snapshot_if_due().await.unwrap(), "not due again at once");
        // 100 committed offsets, one staged, one group, one emptied group, and the two bounds.
        assert_eq!(offsets.log_records(), 105);
        offsets.close().await.unwrap();

        let mut reopened = reopen(&storage).await;
        assert_eq!(reopened.log_records(), 105, "a start replays the live state only");
        let state = reopened.state.snapshot();
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
