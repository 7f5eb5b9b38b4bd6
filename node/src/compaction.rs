//! Compaction for the topics a node serves: Kafka's log cleaner threads, as a task. Every partition of a topic
//! whose `cleanup.policy` includes `compact` gets a pass when it is due (`partition_log::cleaner`, ADR 0055): its
//! dirty part reached `min.cleanable.dirty.ratio` or passed `max.compaction.lag.ms`. One partition at a time, on
//! the leader and each follower; a pass holds its partition's lock while it runs (a produce or fetch on that
//! partition waits for it; the others do not), which ADR 0055 lists as what is left to do.

use partition_log::{Cleaned, CompactionPolicy};
use storage::PartitionId;

use crate::{Node, NodeError};

/// What one pass did to one replica of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    /// The partition.
    pub partition: PartitionId,
    /// 0 for the leader, 1.. for its followers.
    pub replica: usize,
    /// The pass.
    pub cleaned: Cleaned,
}

impl Node {
    /// Runs the compaction passes that are due now; returns what they did. A partition that fails is logged and
    /// skipped (its error is the first one returned once every other partition had its turn).
    pub async fn compact_topics(&self) -> Result<Vec<Compacted>, NodeError> {
        let now = self.clock.now_ms();
        let topics: Vec<(String, Vec<std::sync::Arc<crate::PartitionSlot>>)> = self
            .topics
            .read()
            .await
            .iter()
            .map(|(name, slots)| (name.clone(), slots.clone()))
            .collect();
        let mut done = Vec::new();
        let mut first_error = None;
        for (topic, slots) in topics {
            let settings = self.topic_settings(&topic).await;
            if !settings.compacted {
                continue;
            }
            let policy = CompactionPolicy {
                min_cleanable_dirty_ratio: settings.min_cleanable_dirty_ratio,
                min_compaction_lag_ms: settings.min_compaction_lag_ms,
                max_compaction_lag_ms: settings.max_compaction_lag_ms,
                delete_retention_ms: settings.delete_retention_ms,
                ..CompactionPolicy::default()
            };
            for slot in slots {
                let mut guard = slot.lock().await;
                let Some(replicas) = guard.as_mut() else { continue };
                let logs = std::iter::once(&mut replicas.leader).chain(replicas.followers.iter_mut());
                for (replica, log) in logs.enumerate() {
                    match log.clean(policy, now).await {
                        Ok(Some(cleaned)) => {
                            tracing::info!(
                                partition = %log.id(),
                                replica,
                                from = cleaned.from,
                                to = cleaned.to,
                                bytes_before = cleaned.bytes_before,
                                bytes_after = cleaned.bytes_after,
                                records_removed = cleaned.records_removed,
                                "compacted"
                            );
                            done.push(Compacted {
                                partition: log.id().clone(),
                                replica,
                                cleaned,
                            });
                        }
                        Ok(None) => {}
                        Err(error) => {
                            tracing::warn!(partition = %log.id(), replica, %error, "compaction failed");
                            first_error.get_or_insert(NodeError::Log(error));
                        }
                    }
                }
            }
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(done),
        }
    }
}
