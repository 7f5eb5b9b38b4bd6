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
        let done = self
            .each_replica("retention", |log, settings| {
                Box::pin(async move {
                    // A mirror's and a follower's appends do not pass the produce path: their segments learn the
                    // topic's segment.bytes / segment.ms here.
                    log.set_segment_policy(settings.segment_bytes, Some(settings.segment_ms));
                    let policy = RetentionPolicy::from_kafka(settings.retention_ms, settings.retention_bytes);
                    if !settings.delete_by_retention || policy.keeps_everything() {
                        return Ok(None);
                    }
                    log.apply_retention(policy, now).await
                })
            })
            .await?;
        Ok(done
            .into_iter()
            .map(|(partition, replica, retained)| {
                tracing::info!(
                    %partition,
                    replica,
                    units = retained.units,
                    bytes = retained.bytes,
                    log_start_offset = retained.log_start_offset,
                    breach = ?retained.breach,
                    "retention deleted the oldest data"
                );
                RetentionDeleted {
                    partition,
                    replica,
                    retained,
                }
            })
            .collect())
    }
}
