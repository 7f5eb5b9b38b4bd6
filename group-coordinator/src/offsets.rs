//! The group offset store's state and rules, without I/O: committed offsets per (group, topic, partition), the
//! offsets transactions staged, each group's stored membership, and the groups whose offsets were deleted — and
//! the records of the offset log that change them ([`OffsetRecord`]). The caller (the node) writes the records a
//! decision returns to its log, durably, and then [`OffsetState::apply`]s them; opening replays the log through
//! [`OffsetState::replay`].
//!
//! Rules: a transaction's offsets are staged per producer id and become committed when the COMMIT marker for the
//! group's `__consumer_offsets` partition arrives (dropped on ABORT); `offsets.retention.minutes` expires offsets
//! as Kafka's `GroupMetadata.removeExpiredOffsets` does ([`OffsetState::expire`]); a group's stored membership is
//! bounded ([`MAX_STORED_GROUP_BYTES`]); a snapshot of the whole state ([`OffsetState::snapshot`]) replaces the
//! history before it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::membership::StoredGroup;

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
pub enum OffsetRecord {
    /// Committed at once (OffsetCommit).
    Commit(OffsetEntry),
    /// Staged by a transaction (TxnOffsetCommit).
    Staged {
        /// The transaction's producer.
        producer_id: i64,
        /// The offset staged.
        entry: OffsetEntry,
    },
    /// DeleteGroups: every committed offset of the group goes, and its stored membership.
    DeleteGroup {
        /// The group.
        group: String,
    },
    /// OffsetDelete (one group, some partitions) or a topic's deletion (every group, every partition): the
    /// committed offsets named go.
    DeleteOffsets {
        /// The group; every group when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
        /// The topic.
        topic: String,
        /// The partitions; every partition when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partitions: Option<Vec<i32>>,
    },
    /// A group's membership as last stored.
    Group {
        /// The group.
        group: String,
        /// Its membership.
        stored: StoredGroup,
    },
    /// A transaction's marker reached the `__consumer_offsets` partition `offsets_partition`.
    End {
        /// The transaction's producer.
        producer_id: i64,
        /// The `__consumer_offsets` partition the marker is for.
        offsets_partition: u32,
        /// COMMIT (or ABORT).
        commit: bool,
    },
    /// A snapshot of the whole state begins: the records up to [`OffsetRecord::SnapshotEnd`] are the state.
    SnapshotStart,
    /// A group whose offsets were all deleted and that still exists (part of a snapshot).
    Emptied {
        /// The group.
        group: String,
    },
    /// The snapshot is complete.
    SnapshotEnd,
    /// The snapshot begun before was cut short by a crash: its records are not the state.
    SnapshotAbandoned,
}

/// (group, topic, partition).
type Key = (String, String, i32);

/// A group's offsets as [`OffsetState::expire`] judges them.
struct GroupVerdict<'a> {
    group: &'a str,
    /// How its offsets expire (asked of the membership once).
    rule: crate::membership::OffsetExpiry,
    /// The partitions expired, by topic.
    expired: BTreeMap<&'a str, Vec<i32>>,
    /// How many offsets are kept.
    kept: usize,
}

/// What [`OffsetState::expire`] deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expired {
    /// Committed offsets deleted.
    pub offsets: usize,
    /// Groups forgotten with them (left with no offsets).
    pub groups: Vec<String>,
}

/// `entry` with its commit time set to `now_ms` when it has none (a record written before commit times were
/// stored takes its batch's time when replayed).
pub fn stamped(mut entry: OffsetEntry, now_ms: i64) -> OffsetEntry {
    entry.committed.commit_timestamp_ms.get_or_insert(now_ms);
    entry
}

/// A snapshot being replayed ([`OffsetState::replay`]): the state its records build, until its end makes it the
/// store's.
#[derive(Default)]
pub struct SnapshotReplay {
    open: Option<Replayed>,
}

impl SnapshotReplay {
    /// Whether a snapshot began and has not ended (the log ended inside it: a crash cut it short).
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }
}

#[derive(Default)]
struct Replayed {
    committed: BTreeMap<Key, Committed>,
    staged: BTreeMap<i64, Vec<OffsetEntry>>,
    groups: BTreeMap<String, StoredGroup>,
    emptied: std::collections::BTreeSet<String>,
    records: u64,
}

/// The store's state; see the module docs.
#[derive(Clone)]
pub struct OffsetState {
    committed: BTreeMap<Key, Committed>,
    staged: BTreeMap<i64, Vec<OffsetEntry>>,
    groups: BTreeMap<String, StoredGroup>,
    /// Groups whose committed offsets were deleted (OffsetDelete, a topic's deletion): they still exist, empty,
    /// as Kafka's coordinator keeps them, until DeleteGroups (Kafka's periodic cleanup of empty groups is not
    /// done).
    emptied: std::collections::BTreeSet<String>,
    /// The `__consumer_offsets` partition of a group (Kafka's hash): which staged offsets a marker ends.
    partition_of: fn(&str) -> Option<u32>,
}

impl std::fmt::Debug for OffsetState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffsetState")
            .field("committed", &self.committed.len())
            .field("staged", &self.staged.len())
            .finish_non_exhaustive()
    }
}

/// A group stored by [`OffsetState::store_group_records`] whose record would pass [`MAX_STORED_GROUP_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupTooLarge {
    /// The group.
    pub group: String,
    /// Its record's size.
    pub size: usize,
}

impl OffsetState {
    /// An empty state; `partition_of` gives a group's `__consumer_offsets` partition.
    pub fn new(partition_of: fn(&str) -> Option<u32>) -> Self {
        OffsetState {
            committed: BTreeMap::new(),
            staged: BTreeMap::new(),
            groups: BTreeMap::new(),
            emptied: std::collections::BTreeSet::new(),
            partition_of,
        }
    }

    /// OffsetCommit's records: `entries` committed at once, stamped with `now_ms`.
    pub fn commit_records(entries: Vec<OffsetEntry>, now_ms: i64) -> Vec<OffsetRecord> {
        entries
            .into_iter()
            .map(|entry| OffsetRecord::Commit(stamped(entry, now_ms)))
            .collect()
    }

    /// TxnOffsetCommit's records: `entries` staged under `producer_id` until its transaction ends.
    pub fn stage_records(producer_id: i64, entries: Vec<OffsetEntry>, now_ms: i64) -> Vec<OffsetRecord> {
        entries
            .into_iter()
            .map(|entry| OffsetRecord::Staged {
                producer_id,
                entry: stamped(entry, now_ms),
            })
            .collect()
    }

    /// The records that store `groups`' membership; a group whose record would pass [`MAX_STORED_GROUP_BYTES`]
    /// has none, and is named (the others are stored all the same).
    pub fn store_group_records(
        groups: Vec<(String, StoredGroup)>,
    ) -> (Vec<OffsetRecord>, Option<GroupTooLarge>) {
        let mut too_large = None;
        let mut records = Vec::with_capacity(groups.len());
        for (group, stored) in groups {
            let record = OffsetRecord::Group { group, stored };
            let size = serde_json::to_vec(&record).map_or(usize::MAX, |json| json.len());
            match record {
                OffsetRecord::Group { group, .. } if size > MAX_STORED_GROUP_BYTES => {
                    too_large = Some(GroupTooLarge { group, size });
                }
                record => records.push(record),
            }
        }
        (records, too_large)
    }

    /// The whole state as records (a snapshot's body, between its start and end records).
    pub fn snapshot(&self) -> Vec<OffsetRecord> {
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
        state
    }

    /// Replays one record of the log: into the snapshot being read, if one is, else into the state. Returns the
    /// records of a snapshot its end completed (its start and end included).
    pub fn replay(&mut self, record: OffsetRecord, snapshot: &mut SnapshotReplay) -> Option<u64> {
        let snapshot = &mut snapshot.open;
        match (record, snapshot.as_mut()) {
            (OffsetRecord::SnapshotStart, _) => *snapshot = Some(Replayed::default()),
            (OffsetRecord::SnapshotEnd, Some(_)) => {
                if let Some(done) = snapshot.take() {
                    self.committed = done.committed;
                    self.staged = done.staged;
                    self.groups = done.groups;
                    self.emptied = done.emptied;
                    return Some(done.records + 2);
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
        None
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

    /// The records that delete the committed offsets `offsets.retention.minutes` expired at `now_ms` (Kafka's `GroupMetadata.
    /// removeExpiredOffsets`), each group as `expiry` says it expires, and forgets a group left with no offsets
    /// whose expiry allows it (an Empty group, a standalone consumer's; also one OffsetDelete emptied). An offset
    /// a transaction has staged for its partition is kept until the transaction ends. Returns them with the
    /// offsets deleted and the groups forgotten (for the caller to forget their membership too), once written.
    pub fn expire(
        &self,
        now_ms: i64,
        retention_ms: i64,
        expiry: impl Fn(&str) -> crate::membership::OffsetExpiry,
    ) -> (Vec<OffsetRecord>, Expired) {
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
        (records, done)
    }

    /// Applies one record (written, or replayed outside a snapshot).
    pub fn apply(&mut self, record: OffsetRecord) {
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
                let partition_of = self.partition_of;
                let (ended, kept): (Vec<_>, Vec<_>) = entries
                    .into_iter()
                    .partition(|entry| partition_of(&entry.group) == Some(offsets_partition));
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
#[allow(clippy::unwrap_used)] // a test fails by panicking
mod tests {
    use super::*;
    use crate::membership::OffsetExpiry;

    /// Groups "a…" live in `__consumer_offsets` partition 0, every other in 1.
    fn partition_of(group: &str) -> Option<u32> {
        Some(u32::from(!group.starts_with('a')))
    }

    fn entry(group: &str, partition: i32, offset: i64) -> OffsetEntry {
        OffsetEntry {
            group: group.to_owned(),
            topic: "orders".to_owned(),
            partition,
            committed: Committed::new(offset, None),
        }
    }

    fn applied(state: &mut OffsetState, records: Vec<OffsetRecord>) {
        for record in records {
            state.apply(record);
        }
    }

    #[test]
    fn a_transactions_offsets_are_committed_by_the_marker_for_their_groups_partition_only() {
        let mut state = OffsetState::new(partition_of);
        let staged =
            OffsetState::stage_records(7, vec![entry("a-group", 0, 5), entry("b-group", 0, 9)], 1_000);
        applied(&mut state, staged);
        assert!(state.pending("a-group", "orders", 0));
        assert_eq!(
            state.committed("a-group", "orders", 0),
            None,
            "staged, not visible"
        );
        state.apply(OffsetRecord::End {
            producer_id: 7,
            offsets_partition: 0,
            commit: true,
        });
        assert_eq!(state.committed("a-group", "orders", 0).map(|c| c.offset), Some(5));
        assert!(state.pending("b-group", "orders", 0), "its marker has not come");
        state.apply(OffsetRecord::End {
            producer_id: 7,
            offsets_partition: 1,
            commit: false,
        });
        assert!(!state.pending("b-group", "orders", 0));
        assert_eq!(state.committed("b-group", "orders", 0), None, "aborted");
    }

    #[test]
    fn offsets_expire_by_their_groups_rule_and_a_staged_one_is_kept() {
        let mut state = OffsetState::new(partition_of);
        applied(
            &mut state,
            OffsetState::commit_records(vec![entry("a-empty", 0, 1), entry("a-empty", 1, 2)], 0),
        );
        applied(
            &mut state,
            OffsetState::commit_records(vec![entry("b-live", 0, 3)], 0),
        );
        applied(
            &mut state,
            OffsetState::stage_records(9, vec![entry("a-empty", 1, 4)], 0),
        );
        let rule = |group: &str| match group {
            "a-empty" => OffsetExpiry::EmptySince(0),
            _ => OffsetExpiry::Keep,
        };
        let (records, expired) = state.expire(100, 50, rule);
        assert_eq!(expired.offsets, 1, "partition 1 is held by a transaction");
        assert!(expired.groups.is_empty(), "the group keeps a staged offset");
        applied(&mut state, records);
        assert_eq!(state.committed("a-empty", "orders", 0), None);
        assert!(state.committed("a-empty", "orders", 1).is_some());
        assert!(
            state.committed("b-live", "orders", 0).is_some(),
            "kept while its members live"
        );
    }

    #[test]
    fn a_snapshot_replayed_is_the_state_it_was_taken_from_and_one_cut_short_is_dropped() {
        let mut state = OffsetState::new(partition_of);
        applied(
            &mut state,
            OffsetState::commit_records(vec![entry("a", 0, 1), entry("b", 0, 2)], 5),
        );
        applied(
            &mut state,
            OffsetState::stage_records(3, vec![entry("a", 1, 7)], 5),
        );
        state.apply(OffsetRecord::DeleteOffsets {
            group: Some("b".to_owned()),
            topic: "orders".to_owned(),
            partitions: None,
        });
        let body = state.snapshot();
        let mut replayed = OffsetState::new(partition_of);
        let mut snapshot = SnapshotReplay::default();
        let records = std::iter::once(OffsetRecord::SnapshotStart)
            .chain(body.iter().cloned())
            .chain(std::iter::once(OffsetRecord::SnapshotEnd));
        let mut completed = None;
        for record in records {
            completed = replayed.replay(record, &mut snapshot).or(completed);
        }
        assert_eq!(completed, Some(body.len() as u64 + 2));
        assert_eq!(replayed.snapshot(), body);
        assert!(replayed.has_group("b"), "emptied, still there");
        // A snapshot the log ends inside is open; the one abandoned after it leaves the state as it was.
        let mut cut = SnapshotReplay::default();
        replayed.replay(OffsetRecord::SnapshotStart, &mut cut);
        replayed.replay(OffsetRecord::Commit(entry("a", 0, 99)), &mut cut);
        assert!(cut.is_open());
        replayed.replay(OffsetRecord::SnapshotAbandoned, &mut cut);
        assert_eq!(replayed.snapshot(), body);
    }
}
