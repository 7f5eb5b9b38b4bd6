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
        let done = self
            .each_replica("compaction", |log, settings| {
                Box::pin(async move {
                    if !settings.compacted {
                        return Ok(None);
                    }
                    let policy = CompactionPolicy {
                        min_cleanable_dirty_ratio: settings.min_cleanable_dirty_ratio,
                        min_compaction_lag_ms: settings.min_compaction_lag_ms,
                        max_compaction_lag_ms: settings.max_compaction_lag_ms,
                        delete_retention_ms: settings.delete_retention_ms,
                        ..CompactionPolicy::default()
                    };
                    log.clean(policy, now).await
                })
            })
            .await?;
        Ok(done
            .into_iter()
            .map(|(partition, replica, cleaned)| {
                tracing::info!(
                    %partition,
                    replica,
                    from = cleaned.from,
                    to = cleaned.to,
                    bytes_before = cleaned.bytes_before,
                    bytes_after = cleaned.bytes_after,
                    records_removed = cleaned.records_removed,
                    "compacted"
                );
                Compacted {
                    partition,
                    replica,
                    cleaned,
                }
            })
            .collect())
    }
}
