//! Compaction for the topics a node serves: Kafka's log cleaner threads, as a task. Every partition of a topic
//! whose `cleanup.policy` includes `compact` gets a pass when it is due (`partition_log::cleaner`, ADR 0055): its
//! dirty part reached `min.cleanable.dirty.ratio` or passed `max.compaction.lag.ms`. One partition at a time, on
//! the leader and each follower; a pass holds its partition's lock only to plan and to write its rewrite, and
//! reads and rewrites in between without it. Its reads and rewrites are held to
//! `log.cleaner.io.max.bytes.per.second` (`crate::cleaner_throttle`).

use partition_log::{CleanStep, Cleaned, CompactionPolicy, LogError, PartitionLog, ReplicaSet};
use storage::PartitionId;

use crate::cleaner_throttle::{CleanerThrottle, ThrottledReader};
use crate::{Node, NodeError, PartitionSlot};

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
    /// Stops the log cleaner for good (the broker is shutting down): a pass paused by
    /// `log.cleaner.io.max.bytes.per.second` ends at once, and [`Self::compact_topics`] starts no more passes.
    pub fn stop_compaction(&self) {
        self.cleaner_throttle.stop();
    }

    /// Runs the compaction passes that are due now; returns what they did. A partition that fails is logged and
    /// skipped (its error is the first one returned once every other partition had its turn).
    ///
    /// Each pass takes its partition's lock twice, briefly: to plan (where the log stands) and to write the
    /// rewrite; it reads and rewrites in between without it, so produce and fetch on the partition go on
    /// (`partition_log::cleaner`, ADR 0055).
    pub async fn compact_topics(&self) -> Result<Vec<Compacted>, NodeError> {
        let now = self.clock.now_ms();
        let mut done = Vec::new();
        let mut first_error = None;
        for (topic, slots) in self.topic_slots().await {
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
                if self.cleaner_throttle.is_stopped() {
                    return Ok(done);
                }
                let replicas = match slot.lock().await.as_ref() {
                    Some(replicas) => 1 + replicas.followers.len(),
                    None => continue,
                };
                for replica in 0..replicas {
                    match compact_replica(&slot, replica, policy, now, &self.cleaner_throttle).await {
                        Ok(Some((partition, cleaned))) => {
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
                            done.push(Compacted {
                                partition,
                                replica,
                                cleaned,
                            });
                        }
                        Ok(None) => {}
                        // A pass the shutdown ended failed nothing.
                        Err(_) if self.cleaner_throttle.is_stopped() => return Ok(done),
                        Err(error) => {
                            tracing::warn!(topic, replica, %error, "compaction failed");
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

/// One replica's pass: planned and written under the partition's lock, prepared without it.
async fn compact_replica(
    slot: &PartitionSlot,
    replica: usize,
    policy: CompactionPolicy,
    now: i64,
    throttle: &CleanerThrottle,
) -> Result<Option<(PartitionId, Cleaned)>, LogError> {
    let (plan, reader, partition) = {
        let guard = slot.lock().await;
        let Some(log) = guard.as_ref().and_then(|replicas| replica_log(replicas, replica)) else {
            return Ok(None);
        };
        (log.plan_clean(policy, now).await?, log.reader(), log.id().clone())
    };
    let Some(plan) = plan else { return Ok(None) };
    // Every batch the pass reads and every rewrite it stages is charged to the node's I/O budget.
    let reader = ThrottledReader {
        inner: reader.as_ref(),
        throttle,
    };
    let Some(mut work) = plan.prepare(&reader).await? else {
        return Ok(None);
    };
    // Written a group at a time: staged beside the log without the partition's lock (storage-fs writes and syncs
    // the new segment files), then installed with it — a produce waits for one installation at most.
    loop {
        work.stage_next(&reader).await?;
        let mut guard = slot.lock().await;
        let Some(log) = guard
            .as_mut()
            .and_then(|replicas| replica_log_mut(replicas, replica))
        else {
            return Ok(None);
        };
        match log.apply_clean_step(&mut work).await? {
            CleanStep::More => {}
            CleanStep::Done(cleaned) => return Ok(Some((partition, cleaned))),
            CleanStep::Dropped => return Ok(None),
        }
    }
}

fn replica_log(replicas: &ReplicaSet, replica: usize) -> Option<&PartitionLog> {
    match replica {
        0 => Some(&replicas.leader),
        n => replicas.followers.get(n - 1),
    }
}

fn replica_log_mut(replicas: &mut ReplicaSet, replica: usize) -> Option<&mut PartitionLog> {
    match replica {
        0 => Some(&mut replicas.leader),
        n => replicas.followers.get_mut(n - 1),
    }
}
