//! Retention for the topics a node serves: Kafka's `log.retention.check.interval.ms` task. Each partition of a
//! topic whose `cleanup.policy` includes `delete` loses its oldest units past `retention.ms` or beyond
//! `retention.bytes` (decided by `partition_log::retention`, ADR 0054), on every replica, one partition at a
//! time: a partition's lock is held only while its own retention runs, never across partitions, and never on the
//! request path (the broker runs this from its own task).

use partition_log::{Retained, RetentionPolicy};
use storage::PartitionId;

use crate::{Node, NodeError};

/// What retention deleted from one replica of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionDeleted {
    /// The partition.
    pub partition: PartitionId,
    /// 0 for the leader, 1.. for its followers.
    pub replica: usize,
    /// What went.
    pub retained: Retained,
}

impl Node {
    /// Applies every topic's retention now; returns what was deleted. A partition that fails is logged and
    /// skipped (its error is the first one returned once every other partition had its turn).
    pub async fn apply_retention(&self) -> Result<Vec<RetentionDeleted>, NodeError> {
        let now = self.clock.now_ms();
        let topics: Vec<(String, Vec<std::sync::Arc<crate::PartitionSlot>>)> = self
            .topics
            .read()
            .await
            .iter()
            .map(|(name, slots)| (name.clone(), slots.clone()))
            .collect();
        let mut deleted = Vec::new();
        let mut first_error = None;
        for (topic, slots) in topics {
            let settings = self.topic_settings(&topic).await;
            let policy = RetentionPolicy::from_kafka(settings.retention_ms, settings.retention_bytes);
            let delete = settings.delete_by_retention && !policy.keeps_everything();
            for slot in slots {
                let mut guard = slot.lock().await;
                let Some(replicas) = guard.as_mut() else { continue };
                let logs = std::iter::once(&mut replicas.leader).chain(replicas.followers.iter_mut());
                for (replica, log) in logs.enumerate() {
                    // A mirror's and a follower's appends do not pass the produce path: their segments learn the
                    // topic's segment.bytes / segment.ms here.
                    log.set_segment_policy(settings.segment_bytes, Some(settings.segment_ms));
                    if !delete {
                        continue;
                    }
                    match log.apply_retention(policy, now).await {
                        Ok(Some(retained)) => {
                            tracing::info!(
                                partition = %log.id(),
                                replica,
                                units = retained.units,
                                bytes = retained.bytes,
                                log_start_offset = retained.log_start_offset,
                                breach = ?retained.breach,
                                "retention deleted the oldest data"
                            );
                            deleted.push(RetentionDeleted {
                                partition: log.id().clone(),
                                replica,
                                retained,
                            });
                        }
                        Ok(None) => {}
                        Err(error) => {
                            tracing::warn!(partition = %log.id(), replica, %error, "retention failed");
                            first_error.get_or_insert(NodeError::Log(error));
                        }
                    }
                }
            }
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(deleted),
        }
    }
}
