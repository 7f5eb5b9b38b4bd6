//! Consumer group offsets carried over a link: every [`GROUP_SYNC_INTERVAL_MS`] (or the interval the owner set) a
//! link asks its source for the offsets its consumer groups committed on the partitions still mirrored
//! ([`mirror_fsm::Sources::group_offsets`]) and commits them here, so that consumers moved to this cluster after a
//! failover resume where they were.
//!
//! A byte-exact mirror has the source's offsets, so an offset carries over as it is, with two exceptions: an
//! offset beyond what this node has mirrored so far is cut to its log end (after an unplanned failover the
//! records past it never arrive, and a consumer parked beyond the log end would skip what this cluster writes
//! there), and a group with live members here is left alone (its own commits win). Partitions no longer
//! mirrored — failed over, or paused — are not synced: from then on the group's offsets here are its own.

use std::collections::{BTreeMap, BTreeSet};

use super::links::{log_end, MirrorLinks, PartitionKey};
use crate::offsets::{Committed, OffsetEntry};
use crate::Node;

/// How often a link copies its source's group offsets.
pub const GROUP_SYNC_INTERVAL_MS: i64 = 5_000;

impl MirrorLinks {
    /// Copies the source groups' offsets of every source once the interval has passed (one timer for all: the
    /// check is all a round pays in between); returns the offsets committed here. A source that cannot answer
    /// is tried again at the next interval.
    pub(super) async fn sync_group_offsets(&mut self, node: &Node) -> usize {
        let Some(interval) = self.group_sync_interval_ms else {
            return 0;
        };
        let now = node.now_ms();
        if now < self.group_sync_due_ms {
            return 0;
        }
        self.group_sync_due_ms = now.saturating_add(interval);
        let mut by_source: BTreeMap<String, BTreeSet<PartitionKey>> = BTreeMap::new();
        for (key, mirrored) in &self.partitions {
            if mirrored.driver.fetching() {
                by_source
                    .entry(mirrored.source.clone())
                    .or_default()
                    .insert(key.clone());
            }
        }
        let mut committed = 0;
        for (source, keys) in by_source {
            let topics: Vec<String> = keys
                .iter()
                .map(|(topic, _)| topic.clone())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let Ok(offsets) = self.sources.group_offsets(&source, &topics).await else {
                continue;
            };
            let mut entries = Vec::new();
            for offset in offsets {
                let key = (offset.topic.clone(), offset.partition);
                if !keys.contains(&key) || node.membership.has_members(&offset.group) {
                    continue;
                }
                let Some(end) = log_end(node, &key).await else {
                    continue;
                };
                let carried = Committed {
                    offset: offset.offset.min(end),
                    metadata: offset.metadata,
                };
                let unchanged = node
                    .offsets
                    .lock()
                    .await
                    .committed(&offset.group, &offset.topic, offset.partition)
                    .is_some_and(|current| *current == carried);
                if !unchanged {
                    entries.push(OffsetEntry {
                        group: offset.group,
                        topic: offset.topic,
                        partition: offset.partition,
                        committed: carried,
                    });
                }
            }
            committed += entries.len();
            if !entries.is_empty() && node.offsets.lock().await.commit(entries).await.is_err() {
                // The offset store is poisoned: every commit now fails loudly to its clients.
                committed = 0;
            }
        }
        committed
    }
}
