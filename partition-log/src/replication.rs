//! In-cluster replication, simply: a leader and its followers, each a [`PartitionLog`] on its own store.
//!
//! A follower fetches from its log end and appends what it gets with REPLICATION origin (bytes and offsets
//! kept); the leader's high watermark is the smallest log end of all replicas (every follower is in sync); the
//! followers learn it from the leader, as from a fetch response. A follower ahead of the leader (after a leader
//! truncation) truncates to the leader's log end first, and one behind the leader's log start restarts there.
//! Leader epochs, elections and divergent histories are out of scope.

use crate::error::LogError;
use crate::log::PartitionLog;
use crate::Result;

/// A leader and its followers.
#[derive(Debug)]
pub struct ReplicaSet {
    /// The leader: clients and coordinators append here.
    pub leader: PartitionLog,
    /// The followers, fed by [`ReplicaSet::replicate`].
    pub followers: Vec<PartitionLog>,
}

impl ReplicaSet {
    /// Bytes a follower fetches at a time.
    pub const FETCH_BYTES: usize = 1 << 20;

    /// A replica set.
    pub fn new(leader: PartitionLog, followers: Vec<PartitionLog>) -> Self {
        ReplicaSet { leader, followers }
    }

    /// Brings follower `index` up to the leader's log end, then moves the high watermarks.
    pub async fn replicate_follower(&mut self, index: usize, now_ms: i64) -> Result<()> {
        let leader = &self.leader;
        let Some(follower) = self.followers.get_mut(index) else {
            return Err(LogError::InvalidBatch {
                index,
                reason: "no such follower".to_owned(),
            });
        };
        if follower.log_end_offset() > leader.log_end_offset() {
            follower.truncate_to(leader.log_end_offset(), now_ms).await?;
        }
        if follower.log_end_offset() < leader.log_start_offset() {
            follower
                .truncate_fully_and_start_at(leader.log_start_offset())
                .await?;
        }
        while follower.log_end_offset() < leader.log_end_offset() {
            let batches = leader
                .read_for_replica(follower.log_end_offset(), Self::FETCH_BYTES)
                .await?;
            if batches.is_empty() {
                break;
            }
            follower.append_as_follower(batches).await?;
        }
        self.update_high_watermarks().await
    }

    /// Brings every follower up to the leader, then moves the high watermarks.
    pub async fn replicate(&mut self, now_ms: i64) -> Result<()> {
        for index in 0..self.followers.len() {
            self.replicate_follower(index, now_ms).await?;
        }
        self.update_high_watermarks().await
    }

    /// Leader HW = smallest log end of all replicas; followers take the leader's HW (and its log start, once
    /// their own HW allows).
    async fn update_high_watermarks(&mut self) -> Result<()> {
        let acknowledged = self
            .followers
            .iter()
            .map(PartitionLog::log_end_offset)
            .fold(self.leader.log_end_offset(), i64::min);
        let high_watermark = self.leader.advance_high_watermark(acknowledged);
        let log_start = self.leader.log_start_offset();
        for follower in &mut self.followers {
            follower.advance_high_watermark(high_watermark);
            if log_start > follower.log_start_offset() && log_start <= follower.high_watermark() {
                follower.delete_records_before(log_start).await?;
            }
        }
        Ok(())
    }
}
