//! In-cluster replication, simply: a leader and its followers, each a [`PartitionLog`] on its own store.
//!
//! A follower fetches from its log end and appends what it gets with REPLICATION origin (bytes and offsets
//! kept); the leader's high watermark is the smallest log end of all replicas (every follower is in sync); the
//! followers learn it from the leader, as from a fetch response. A follower behind the leader's log start restarts
//! there.
//!
//! **Divergence.** Kafka finds where a follower's history leaves the leader's through leader epochs. Here the
//! leader's log counts its own truncations ([`PartitionLog::truncations`]): a follower that caught up before the
//! leader was last cut back (a mirror start or a failover cutting to the source's LSO) — or one that is ahead of
//! the leader — is cut to the end of the prefix whose batches are byte-identical on both, then catches up. A
//! follower that merely lags needs no comparison. Elections are out of scope.

use record_format::RecordBatch;

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
    /// For each follower, the leader's truncation count when it last caught up (`None`: never).
    synced_at: Vec<Option<u64>>,
}

impl ReplicaSet {
    /// Bytes a follower fetches at a time.
    pub const FETCH_BYTES: usize = 1 << 20;

    /// A replica set.
    pub fn new(leader: PartitionLog, followers: Vec<PartitionLog>) -> Self {
        let synced_at = vec![None; followers.len()];
        ReplicaSet {
            leader,
            followers,
            synced_at,
        }
    }

    /// Replaces follower `index` with `follower` (reopened from its storage after a crash): its history is
    /// compared with the leader's at the next catch-up.
    pub fn replace_follower(&mut self, index: usize, follower: PartitionLog) -> Result<()> {
        let (Some(slot), Some(synced)) = (self.followers.get_mut(index), self.synced_at.get_mut(index))
        else {
            return Err(no_such_follower(index));
        };
        *slot = follower;
        *synced = None;
        Ok(())
    }

    /// The leader and the followers, closing nothing.
    pub fn into_parts(self) -> (PartitionLog, Vec<PartitionLog>) {
        (self.leader, self.followers)
    }

    /// Brings follower `index` up to the leader's log end, then moves the high watermarks.
    pub async fn replicate_follower(&mut self, index: usize, now_ms: i64) -> Result<()> {
        let leader = &self.leader;
        let (Some(follower), Some(synced)) = (self.followers.get_mut(index), self.synced_at.get_mut(index))
        else {
            return Err(no_such_follower(index));
        };
        if *synced != Some(leader.truncations()) || follower.log_end_offset() > leader.log_end_offset() {
            let common = common_prefix_end(leader, follower).await?;
            if common < follower.log_end_offset() {
                follower.truncate_to(common, now_ms).await?;
            }
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
        *synced = Some(leader.truncations());
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

fn no_such_follower(index: usize) -> LogError {
    LogError::InvalidBatch {
        index,
        reason: "no such follower".to_owned(),
    }
}

/// The offset up to which `leader` and `follower` hold the same batches, byte for byte (from the later of their
/// log starts).
pub async fn common_prefix_end(leader: &PartitionLog, follower: &PartitionLog) -> Result<i64> {
    let start = follower.log_start_offset().max(leader.log_start_offset());
    let mut end = start;
    if start < follower.log_end_offset() && start < leader.log_end_offset() {
        let ours = batches_from(follower, start).await?;
        let theirs = batches_from(leader, start).await?;
        for (a, b) in ours.iter().zip(theirs.iter()) {
            if a.base_offset() != b.base_offset() || a.as_bytes() != b.as_bytes() {
                break;
            }
            end = a.next_offset();
        }
    }
    // Never past either log's end (a leader emptied below the follower's start shares nothing with it).
    Ok(end.min(follower.log_end_offset()).min(leader.log_end_offset()))
}

/// Every batch of `log` from the one holding `from` to the log end.
pub async fn batches_from(log: &PartitionLog, from: i64) -> Result<Vec<RecordBatch>> {
    let mut out = Vec::new();
    let mut offset = from.max(log.log_start_offset());
    while offset < log.log_end_offset() {
        let batches = log.read_for_replica(offset, ReplicaSet::FETCH_BYTES).await?;
        let Some(last) = batches.last() else {
            break;
        };
        offset = last.next_offset();
        out.extend(batches);
    }
    Ok(out)
}
