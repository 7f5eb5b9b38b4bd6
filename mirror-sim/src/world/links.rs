//! Mirror links: the destination node's own (`node::mirror::MirrorLinks`, what `mirrorlog serve` runs), reached
//! through the administration requests an operator sends (`create` or `reverse`, `failover`, `delete`) and
//! stepped round by round as `serve` steps them (each round also copies the sources' consumer group offsets). Under the barrier strategies a link stops with the node's
//! failover (STOPPING, the barrier); under the others, and for the mutants that break STOPPING, the link is
//! deleted and the partition opened by the simulator's own steps below. The node's replication then brings the
//! follower along.

use mirror_fsm::MirrorState;
use node::mirror::{AdminRequest, AdminResponse, MirrorLinks};
use node::{Node, PartitionSlot};
use std::sync::Arc;

use super::sources::SimSources;
use super::{Link, Mutation, World};
use crate::strategy::Strategy;
use crate::SimError;

/// The most rounds one mirror step runs on one destination before it calls the links stuck.
const MAX_ROUNDS: usize = 100_000;
/// The most retries one mirror step waits for on one destination after the network's faults.
const MAX_RETRIES_AFTER_FAULTS: usize = 64;
/// The most times the simulated operator sends a link's `create` that a faulty network kept from its source.
const MAX_ADMIN_ATTEMPTS: usize = 8;

impl World {
    pub(super) async fn start_link(&mut self, source: &str, dest: &str, topic: &str) -> Result<(), SimError> {
        if source == dest
            || !self.clusters.contains_key(dest)
            || self
                .links
                .iter()
                .any(|link| link.dest == dest && link.topic == topic)
            || !self.ensure_partition(source, topic).await?
        {
            return Ok(());
        }
        let into_existing = self
            .clusters
            .get(dest)
            .is_some_and(|cluster| cluster.topics.contains(topic));
        let (link, topics) = (topic.to_owned(), vec![topic.to_owned()]);
        let request = if into_existing {
            AdminRequest::Reverse {
                link,
                source: source.to_owned(),
                topics,
                source_config: Default::default(),
            }
        } else {
            AdminRequest::Create {
                link,
                source: source.to_owned(),
                topics,
                source_config: Default::default(),
                include: Vec::new(),
                exclude: Vec::new(),
            }
        };
        if let Some(cluster) = self.clusters.get(dest) {
            let mut ids = cluster
                .copied_ids
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            ids.remove(&(source.to_owned(), topic.to_owned()));
        }
        let faults_before = self.network.faults_met();
        let mut answer = self.administer(dest, request.clone()).await?;
        let mut attempts = 1;
        // The source did not answer over a faulty network and nothing was created: the operator runs the same
        // command again a second later.
        while !answer.ok
            && answer.links.is_empty()
            && answer
                .error
                .as_ref()
                .is_some_and(|error| error.category == "source")
            && self.network.faults_met() > faults_before
            && attempts < MAX_ADMIN_ATTEMPTS
        {
            self.clock.advance(super::STEP_MS);
            answer = self.administer(dest, request.clone()).await?;
            attempts += 1;
        }
        if let Some(cluster) = self.clusters.get_mut(dest) {
            if cluster.node.topic_partitions().await.contains_key(topic) {
                cluster.topics.insert(topic.to_owned());
            }
        }
        let transient = !answer.links.is_empty() && self.network.faults_met() > faults_before;
        if !answer.ok && !transient {
            // PREPARING could not align the destination (e.g. with a position inside a batch), or the link was
            // refused: judged as failed, not a crash of the simulation. A recorded link stays and retries. (One
            // the network's faults failed retries too, and the mirror rounds judge where its retries end.)
            self.failed_links
                .push(format!("{source} -> {dest} ({topic}): {}", refusal(&answer)));
        }
        if !answer.links.is_empty() {
            self.links.push(Link {
                source: source.to_owned(),
                dest: dest.to_owned(),
                topic: topic.to_owned(),
            });
        }
        self.replicate(dest, topic).await
    }

    pub(super) async fn mirror_all(&mut self) -> Result<(), SimError> {
        for index in 0..self.links.len() {
            let (source, dest, topic) = {
                let link = &self.links[index];
                (link.source.clone(), link.dest.clone(), link.topic.clone())
            };
            // Rounds until the destination's links have nothing more to copy (a destination with several links
            // catches them all up at its first). A partition that the network's faults failed waits for its
            // retry: the clock moves to when it is due (bounded; only in a run whose network has faults, so that
            // a run without any keeps its clock).
            let (mut rounds, mut retries) = (0, 0);
            loop {
                let watched = self.watch_rewinds(&dest).await?;
                let (appended, next_retry) = match self.links_of(&dest).await? {
                    Some((node, links)) => (links.step(node).await, links.next_retry_at_ms()),
                    None => break,
                };
                self.check_rewinds(watched).await?;
                if appended > 0 {
                    rounds += 1;
                    if rounds == MAX_ROUNDS {
                        return Err(SimError::Setup(format!(
                            "the links into {dest} still copy after {MAX_ROUNDS} rounds"
                        )));
                    }
                    continue;
                }
                match next_retry {
                    Some(due) if self.network.faults_met() > 0 && retries < MAX_RETRIES_AFTER_FAULTS => {
                        retries += 1;
                        self.clock.advance_to(due);
                    }
                    _ => break,
                }
            }
            let partitions = self.partition_numbers();
            let failures: Vec<(i32, String)> = match self.links_of(&dest).await? {
                Some((_, links)) => partitions
                    .filter_map(|partition| Some((partition, links.failure(&topic, partition)?)))
                    .collect(),
                None => Vec::new(),
            };
            // A link that cannot go on — FAILED, or an error its retries meet every time (a destination aligned
            // with the wrong position) — is judged, not a crash of the simulation.
            for (partition, failure) in failures {
                let entry = format!(
                    "{source} -> {dest} ({}): {failure}",
                    self.log_name(&topic, partition)
                );
                if !self.failed_links.contains(&entry) {
                    self.failed_links.push(entry);
                }
            }
            self.replicate(&dest, &topic).await?;
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
        let link = self.links.remove(index);
        let bypassed = self.mutation == Some(Mutation::FailoverNeverCompletes)
            || !self.strategy.writes_barrier()
            || matches!(self.mutation, Some(Mutation::NoLsoCut | Mutation::NoBarrier));
        if bypassed {
            // The link is forgotten without STOPPING; what happens to the partition is the simulator's below.
            self.forget_link(&link).await?;
            for partition in self.partition_numbers() {
                let dest_slot = self.leader(dest, topic, partition).await?;
                let now = self.now();
                let mut guard = dest_slot.lock().await;
                let log = &mut closed_if_none(guard.as_mut(), dest, topic)?.leader;
                if self.mutation == Some(Mutation::FailoverNeverCompletes) {
                    // The bug: the link is dropped without STOPPING.
                } else if self.strategy.writes_barrier() && self.mutation == Some(Mutation::NoLsoCut) {
                    stop_without_the_lso_cut(log, &link.source, dest, now).await?;
                } else {
                    // A mirror without the KIP's PID handling (or the barrier strategies' `NoBarrier` mutant):
                    // stop fetching, remember where mirroring ended (for a later failback), open the partition
                    // for writes. No cut to the LSO and no barrier: that is the KIP's STOPPING.
                    let end = log.log_end_offset();
                    persist_last_mirrored(log, &link.source, end).await?;
                    open_as_stopped(log).await?;
                }
            }
        } else {
            let mut ends_before_the_cut = Vec::new();
            for partition in self.partition_numbers() {
                let dest_slot = self.leader(dest, topic, partition).await?;
                let guard = dest_slot.lock().await;
                let end = closed_if_none_ref(guard.as_ref(), dest, topic)?
                    .leader
                    .log_end_offset();
                ends_before_the_cut.push((partition, end));
            }
            let failover = AdminRequest::Failover {
                link: topic.to_owned(),
                topics: Vec::new(),
            };
            let answer = self.administer(dest, failover).await?;
            if !answer.ok {
                // A failover that did not complete (the barrier refused, a tail mismatch): the partition stays
                // read-only; judged, not dropped.
                self.failed_links.push(format!(
                    "{} -> {} ({topic}): failover: {}",
                    link.source,
                    link.dest,
                    refusal(&answer)
                ));
            }
            if self.mutation == Some(Mutation::LastMirroredBeforeTheCut) {
                for (partition, end_before_the_cut) in ends_before_the_cut {
                    let dest_slot = self.leader(dest, topic, partition).await?;
                    let mut guard = dest_slot.lock().await;
                    let log = &mut closed_if_none(guard.as_mut(), dest, topic)?.leader;
                    persist_last_mirrored(log, &link.source, end_before_the_cut).await?;
                }
            }
            self.forget_link(&link).await?;
        }
        self.failed_over.insert((dest.to_owned(), topic.to_owned()));
        self.note_failover_window(&link.source, dest, topic).await?;
        let copied = self.clusters.get(dest).and_then(|cluster| {
            let mut ids = cluster
                .copied_ids
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            ids.remove(&(link.source.clone(), topic.to_owned()))
        });
        if self.strategy == Strategy::BarrierAdvance && self.mutation != Some(Mutation::AllocatorNotAdvanced)
        {
            let past = copied.and_then(|ids| {
                if self.mutation == Some(Mutation::AdvancePastCopiedIdsOnly) {
                    (ids.highest_copied >= 0).then_some(ids.highest_copied)
                } else {
                    ids.advance_past()
                }
            });
            if let (Some(past), Some(node)) = (past, self.node(dest)) {
                node.advance_producer_ids_past(past)
                    .await
                    .map_err(SimError::node)?;
            }
        }
        self.replicate(dest, topic).await
    }

    /// Deletes `link` from its destination's links (its partition keeps the state the link left it in).
    async fn forget_link(&mut self, link: &Link) -> Result<(), SimError> {
        let delete = AdminRequest::Delete {
            link: link.topic.clone(),
        };
        let answer = self.administer(&link.dest, delete).await?;
        if !answer.ok {
            self.failed_links.push(format!(
                "{} -> {} ({}): delete: {}",
                link.source,
                link.dest,
                link.topic,
                refusal(&answer)
            ));
        }
        Ok(())
    }

    /// Sends an administration request to `dest`'s mirror links, as `mirrorlog mirror` would.
    async fn administer(&mut self, dest: &str, request: AdminRequest) -> Result<AdminResponse, SimError> {
        match self.links_of(dest).await? {
            Some((node, links)) => Ok(links.handle(node, request).await),
            None => Err(SimError::Setup(format!("no cluster named {dest}"))),
        }
    }

    /// `cluster`'s node and its mirror links, opened at the first call (the fetch bound is set by then).
    async fn links_of(&mut self, cluster: &str) -> Result<Option<(&Node, &mut MirrorLinks)>, SimError> {
        let opening = self
            .clusters
            .get(cluster)
            .is_some_and(|state| state.links.is_none());
        // Every cluster as a source, gathered once: when the links open.
        let nodes: std::collections::BTreeMap<String, Arc<Node>> = if opening {
            self.clusters
                .iter()
                .map(|(name, state)| (name.clone(), Arc::clone(&state.node)))
                .collect()
        } else {
            std::collections::BTreeMap::new()
        };
        let (bound, strategy, mutation) = (self.fetch_bound, self.strategy, self.mutation);
        let (network, clock) = (self.network.clone(), Arc::clone(&self.clock));
        let Some(state) = self.clusters.get_mut(cluster) else {
            return Ok(None);
        };
        let links = match &mut state.links {
            Some(links) => links,
            empty => {
                let sources = SimSources {
                    nodes,
                    bound,
                    strategy,
                    copied_ids: Arc::clone(&state.copied_ids),
                    network: network.clone(),
                    clock: Arc::clone(&clock),
                };
                let mut links = MirrorLinks::open(&state.node, Arc::new(sources))
                    .await
                    .map_err(|error| SimError::Setup(format!("{cluster}'s mirror links: {error}")))?;
                // `serve`'s round: the next round is fetched on a task of its own while this one is written (on
                // the run's one-thread runtime, so the interleaving is the seed's). Group offsets are copied at
                // every round (the `NoOffsetSync` mutant: never).
                links.set_fetch_ahead(true);
                links.set_group_sync_interval_ms((mutation != Some(Mutation::NoOffsetSync)).then_some(0));
                links.realign_on_retry(mutation == Some(Mutation::TruncateOnRetry));
                empty.insert(links)
            }
        };
        Ok(Some((&*state.node, links)))
    }

    /// The leader (and followers) of a partition of `topic` on `cluster`.
    pub(super) async fn leader(
        &self,
        cluster: &str,
        topic: &str,
        partition: i32,
    ) -> Result<Arc<PartitionSlot>, SimError> {
        match self.node(cluster) {
            Some(node) => node.partition(topic, partition).await,
            None => None,
        }
        .ok_or_else(|| {
            SimError::Setup(format!(
                "{cluster} has no partition {}",
                self.log_name(topic, partition)
            ))
        })
    }
}

/// An administration answer's error, as one line.
fn refusal(answer: &AdminResponse) -> String {
    answer.error.as_ref().map_or_else(
        || "the action did not complete".to_owned(),
        |error| format!("{}: {}", error.category, error.message),
    )
}

/// The replicas of a partition, or the error of a closed one (shared access).
fn closed_if_none_ref<'a>(
    replicas: Option<&'a partition_log::ReplicaSet>,
    cluster: &str,
    topic: &str,
) -> Result<&'a partition_log::ReplicaSet, SimError> {
    replicas.ok_or_else(|| SimError::Setup(format!("{cluster}/{topic} is closed")))
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
