//! Mirror links: starting one (PREPARING through `mirror-fsm`), fetching, and stopping one — STOPPING with the
//! barrier under the barrier strategies, or just opening the partition under the others. The driver works on the
//! destination node's leader log; the node's replication then brings the follower along (cutting it back where
//! the driver cut the leader).

use std::sync::Arc;

use mirror_fsm::{Event, MirrorDriver, MirrorState};
use node::PartitionSlot;

use super::{Link, SimFetcher, World};
use crate::strategy::Strategy;
use crate::SimError;

impl World {
    pub(super) async fn start_link(&mut self, source: &str, dest: &str, topic: &str) -> Result<(), SimError> {
        if source == dest
            || self
                .links
                .iter()
                .any(|link| link.dest == dest && link.topic == topic)
            || !self.ensure_partition(source, topic).await?
            || !self.ensure_partition(dest, topic).await?
        {
            return Ok(());
        }
        let mut fetcher = SimFetcher {
            source: self.leader(source, topic).await?,
            source_cluster_id: source.to_owned(),
            bound: self.fetch_bound,
            strategy: self.strategy,
            max_producer_id: -1,
        };
        let dest_slot = self.leader(dest, topic).await?;
        let now = self.now();
        let driver = {
            let mut guard = dest_slot.lock().await;
            let log = &mut closed_if_none(guard.as_mut(), dest, topic)?.leader;
            let mut driver = match MirrorDriver::recover(log, &mut fetcher, dest).await {
                Ok(driver) => driver,
                Err(error) => {
                    self.failed_links
                        .push(format!("{source} -> {dest} ({topic}): cannot recover: {error}"));
                    return Ok(());
                }
            };
            let start = Event::Start {
                source_cluster_id: source.to_owned(),
            };
            let started = match driver
                .handle(log, &mut fetcher, Event::Tick { now_ms: now })
                .await
            {
                Ok(()) => driver.handle(log, &mut fetcher, start).await,
                Err(error) => Err(error),
            };
            if let Err(error) = started {
                // PREPARING could not align the destination (e.g. with a position inside a batch): the link
                // stays and retries at every mirror step; judged as failed, not a crash of the simulation.
                self.failed_links
                    .push(format!("{source} -> {dest} ({topic}): {error}"));
            }
            driver
        };
        self.links.push(Link {
            source: source.to_owned(),
            dest: dest.to_owned(),
            topic: topic.to_owned(),
            driver,
            fetcher,
        });
        self.replicate(dest, topic).await
    }

    pub(super) async fn mirror_all(&mut self) -> Result<(), SimError> {
        for index in 0..self.links.len() {
            let (dest, topic) = (self.links[index].dest.clone(), self.links[index].topic.clone());
            let dest_slot = self.leader(&dest, &topic).await?;
            let now = self.now();
            {
                let link = &mut self.links[index];
                let mut guard = dest_slot.lock().await;
                let log = &mut closed_if_none(guard.as_mut(), &dest, &topic)?.leader;
                let tick = link
                    .driver
                    .handle(log, &mut link.fetcher, Event::Tick { now_ms: now })
                    .await;
                let outcome = match tick {
                    Ok(()) => link.driver.catch_up(log, &mut link.fetcher).await.map(|_| ()),
                    Err(error) => Err(error),
                };
                // A link that cannot go on — FAILED, or an error its retries meet every time (a destination
                // aligned with the wrong position) — is judged, not a crash of the simulation.
                let failure = match (outcome, link.driver.state().failure()) {
                    (Err(error), _) => Some(format!("{error}")),
                    (Ok(()), Some(failure)) => Some(format!("{failure:?}")),
                    (Ok(()), None) => None,
                };
                if let Some(failure) = failure {
                    let entry = format!("{} -> {} ({}): {failure}", link.source, link.dest, link.topic);
                    if !self.failed_links.contains(&entry) {
                        self.failed_links.push(entry);
                    }
                }
            }
            self.replicate(&dest, &topic).await?;
            if self.mutation != Some(super::Mutation::NoOffsetSync) {
                let source = self.links[index].source.clone();
                self.sync_group_offsets(&source, &dest, &topic).await?;
            }
        }
        Ok(())
    }

    pub(super) async fn stop_link(&mut self, dest: &str, topic: &str) -> Result<(), SimError> {
        let Some(index) = self
            .links
            .iter()
            .position(|link| link.dest == dest && link.topic == topic)
        else {
            return Ok(());
        };
        let source = self.links[index].source.clone();
        self.compare_mirror_state(&source, dest, topic).await?;
        let mut link = self.links.remove(index);
        let dest_slot = self.leader(dest, topic).await?;
        let now = self.now();
        {
            let mut guard = dest_slot.lock().await;
            let log = &mut closed_if_none(guard.as_mut(), dest, topic)?.leader;
            if self.mutation == Some(super::Mutation::FailoverNeverCompletes) {
                // The bug: the link is dropped without STOPPING.
            } else if self.strategy.writes_barrier() && self.mutation == Some(super::Mutation::NoLsoCut) {
                stop_without_the_lso_cut(log, &link.source, dest, now).await?;
            } else if self.strategy.writes_barrier() && self.mutation != Some(super::Mutation::NoBarrier) {
                let end_before_the_cut = log.log_end_offset();
                let stopped = match link
                    .driver
                    .handle(log, &mut link.fetcher, Event::Tick { now_ms: now })
                    .await
                {
                    Ok(()) => link.driver.handle(log, &mut link.fetcher, Event::Stop).await,
                    Err(error) => Err(error),
                };
                if let Err(error) = stopped {
                    self.failed_links.push(format!(
                        "{} -> {} ({topic}): STOPPING failed: {error}",
                        link.source, link.dest
                    ));
                }
                if self.mutation == Some(super::Mutation::LastMirroredBeforeTheCut) {
                    persist_last_mirrored(log, &link.source, end_before_the_cut).await?;
                }
                if link.driver.state().kind() != mirror_fsm::StateKind::Stopped {
                    // A failover that did not complete (the barrier refused, a tail mismatch): the partition
                    // stays read-only; judged, not dropped.
                    self.failed_links.push(format!(
                        "{} -> {} ({topic}): STOPPING ended in {:?}",
                        link.source,
                        link.dest,
                        link.driver.state().kind()
                    ));
                }
            } else {
                // A mirror without the KIP's PID handling: stop fetching, remember where mirroring ended (for a
                // later failback), open the partition for writes. No cut to the LSO and no barrier: that is the
                // KIP's STOPPING, which the barrier strategies run.
                let end = log.log_end_offset();
                persist_last_mirrored(log, &link.source, end).await?;
                open_as_stopped(log).await?;
            }
        }
        self.failed_over.insert((dest.to_owned(), topic.to_owned()));
        self.note_failover_window(&link.source, dest, topic).await?;
        if self.strategy == Strategy::BarrierAdvance
            && link.fetcher.max_producer_id >= 0
            && self.mutation != Some(super::Mutation::AllocatorNotAdvanced)
        {
            if let Some(node) = self.node(dest) {
                node.advance_producer_ids_past(link.fetcher.max_producer_id)
                    .await
                    .map_err(SimError::node)?;
            }
        }
        self.replicate(dest, topic).await
    }

    /// The leader (and followers) of `topic` on `cluster`.
    pub(super) async fn leader(&self, cluster: &str, topic: &str) -> Result<Arc<PartitionSlot>, SimError> {
        match self.node(cluster) {
            Some(node) => node.partition(topic, 0).await,
            None => None,
        }
        .ok_or_else(|| SimError::Setup(format!("{cluster} has no partition of {topic}")))
    }
}

/// The replicas of a partition, or the error of a closed one.
fn closed_if_none<'a>(
    replicas: Option<&'a mut partition_log::ReplicaSet>,
    cluster: &str,
    topic: &str,
) -> Result<&'a mut partition_log::ReplicaSet, SimError> {
    replicas.ok_or_else(|| SimError::Setup(format!("{cluster}/{topic} is closed")))
}

/// The `NoLsoCut` mutant's STOPPING: what the driver does, minus the cut to the last stable offset — remember
/// where mirroring ended, append this cluster's barrier at the log end, persist STOPPED, open for writes.
async fn stop_without_the_lso_cut(
    log: &mut partition_log::PartitionLog,
    source: &str,
    dest: &str,
    now_ms: i64,
) -> Result<(), SimError> {
    let end = log.log_end_offset();
    persist_last_mirrored(log, source, end).await?;
    let barrier = record_format::MirrorPidResetRecord::new(source, Some(dest.to_owned()));
    let placement = record_format::control::ControlBatchPlacement {
        base_offset: end,
        partition_leader_epoch: log.config().leader_epoch,
        timestamp: now_ms,
    };
    let batch = record_format::control::mirror_pid_reset_batch(&barrier, placement)
        .map_err(|error| SimError::Setup(format!("cannot encode the barrier: {error}")))?;
    log.append_as_leader(
        vec![batch],
        producer_state::AppendOrigin::Coordinator,
        kafka_types::TransactionVersion::V0,
    )
    .await
    .map_err(SimError::log)?;
    open_as_stopped(log).await
}

/// Records where mirroring from `source` ended, as STOPPING does (a later failback aligns with it).
async fn persist_last_mirrored(
    log: &mut partition_log::PartitionLog,
    source: &str,
    offset: i64,
) -> Result<(), SimError> {
    log.put_metadata(
        &mirror_fsm::driver::last_mirrored_key(source),
        &offset.to_be_bytes(),
    )
    .await
    .map_err(SimError::log)
}

/// Leaves the partition mirrored by nobody and writable, without the driver's STOPPING.
async fn open_as_stopped(log: &mut partition_log::PartitionLog) -> Result<(), SimError> {
    let stopped = serde_json::to_vec(&MirrorState::never_mirrored())
        .map_err(|error| SimError::Setup(error.to_string()))?;
    log.put_metadata(mirror_fsm::driver::STATE_KEY, &stopped)
        .await
        .map_err(SimError::log)?;
    log.set_read_only(false).await.map_err(SimError::log)
}
