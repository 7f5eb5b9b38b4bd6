//! Mirror links: the destination node's own (`node::mirror::MirrorLinks`, what `mirrorlog serve` runs), reached
//! through the administration requests an operator sends (`create` or `reverse`, `failover`, `delete`) and
//! stepped round by round as `serve` steps them (each round also copies the sources' consumer group offsets). A
//! link stops with the node's failover (STOPPING). The strategies without the barrier, and the mutants that break
//! STOPPING, run that same STOPPING with one rule left out (`mirror_fsm::StoppingDeparture`, ADR 0062); the one
//! mutant whose failover never completes deletes the link instead. The node's replication then brings the
//! follower along.

use mirror_fsm::StoppingDeparture;
use node::mirror::{AdminRequest, AdminResponse, MirrorLinks};
use node::{Node, PartitionSlot};
use std::sync::Arc;

use super::sources::SimSources;
use super::{Link, Mutation, World};
use crate::strategy::Strategy;
use crate::SimError;

/// What a link's failure says when its source topic is another topic now (deleted and created again: its id
/// differs from the one the link recorded; `node::mirror::local::check_topic_id`, and Kafka's answer by id).
const TOPIC_REPLACED: &str = "UNKNOWN_TOPIC_ID";
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
        let request = if into_existing {
            AdminRequest::Reverse {
                link: topic.to_owned(),
                source: source.to_owned(),
                topics: vec![topic.to_owned()],
                source_config: Default::default(),
            }
        } else {
            create_request(source, topic)
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
        // Only the refusal of partition counts that differ has the remedy the operator follows.
        let counts_refused = answer
            .error
            .as_ref()
            .is_some_and(|error| error.message.contains(" partitions here and "));
        if into_existing && !answer.ok && answer.links.is_empty() && counts_refused {
            if let Some(retried) = self
                .reverse_with_other_counts(source, dest, topic, &request)
                .await?
            {
                answer = retried;
            }
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
                source_before_recreation: None,
            });
        }
        self.replicate(dest, topic).await
    }

    /// The operator's remedy for a `reverse` that partition counts refused (the old source's topic and the new
    /// one's grew apart, as when an unplanned failover came before a link met a partition its source added), as
    /// the refusal tells it: a topic with fewer partitions than its new source is grown to their count and the
    /// reverse sent again; one with more (a partition only it has, whose records are the failover's loss window)
    /// is deleted and the link created afresh. `None`: the counts are the same, so the refusal was another.
    async fn reverse_with_other_counts(
        &mut self,
        source: &str,
        dest: &str,
        topic: &str,
        reverse: &AdminRequest,
    ) -> Result<Option<AdminResponse>, SimError> {
        let here = self.partition_numbers(dest, topic).await.end;
        let there = self.partition_numbers(source, topic).await.end;
        if here == there {
            return Ok(None);
        }
        if here < there {
            if !self.grow_topic(dest, topic, there).await? {
                return Ok(None);
            }
            return self.administer(dest, reverse.clone()).await.map(Some);
        }
        if !self.delete_topic(dest, topic, false).await? {
            // Refused (a link holds the topic): the reverse's refusal stands and is judged.
            return Ok(None);
        }
        if let Some(cluster) = self.clusters.get_mut(dest) {
            cluster.topics.remove(topic);
        }
        self.administer(dest, create_request(source, topic))
            .await
            .map(Some)
    }

    pub(super) async fn mirror_all(&mut self) -> Result<(), SimError> {
        // Links whose source topic is another topic now (deleted and created again): mirrored afresh after the
        // round, by the operator's remedy.
        let mut replaced = Vec::new();
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
                let held = self.partition_numbers(&dest, &topic).await;
                let (appended, next_retry) = match self.links_of(&dest).await? {
                    Some((node, links)) => (links.step(node).await, links.next_retry_at_ms()),
                    None => break,
                };
                self.check_rewinds(watched).await?;
                // A round that added partitions (the source's topic grew) has them to copy.
                let grew = self.partition_numbers(&dest, &topic).await.end > held.end;
                if appended > 0 || grew {
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
            let partitions = self.partition_numbers(&dest, &topic).await;
            let failures: Vec<(i32, String)> = match self.links_of(&dest).await? {
                Some((_, links)) => partitions
                    .filter_map(|partition| Some((partition, links.failure(&topic, partition)?)))
                    .collect(),
                None => Vec::new(),
            };
            // A link whose source topic was created again fails by the topic's id, as it must: the operator
            // follows the failure's remedy, and the mirror is judged before it goes.
            let recreated = self.links[index].source_before_recreation.is_some();
            if let Some((_, failure)) = failures
                .iter()
                .find(|(_, failure)| recreated && failure.contains(TOPIC_REPLACED))
            {
                replaced.push((source.clone(), dest.clone(), topic.clone(), failure.clone()));
                self.replicate(&dest, &topic).await?;
                continue;
            }
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
        for (source, dest, topic, failure) in replaced {
            self.mirror_the_topic_created_again(&source, &dest, &topic, &failure)
                .await?;
        }
        Ok(())
    }

    /// The operator's remedy for a link whose source topic was deleted and created again, which FAILED by the
    /// topic's id with the old topic's records in its mirror (KIP-1279 leaves a replaced source topic to the
    /// operator): the mirror, judged against the topic it mirrored, is deleted with its link — its records went
    /// with the source's topic — and the link created afresh, to mirror the new topic from its start.
    async fn mirror_the_topic_created_again(
        &mut self,
        source: &str,
        dest: &str,
        topic: &str,
        failure: &str,
    ) -> Result<(), SimError> {
        let Some(index) = self.links.iter().position(|link| {
            link.source == source
                && link.dest == dest
                && link.topic == topic
                && link.source_before_recreation.is_some()
        }) else {
            return Ok(());
        };
        for partition in self.partition_numbers(dest, topic).await {
            let found = self.mirror_divergence(&self.links[index], partition).await?;
            self.divergences.extend(found);
        }
        let link = self.links.remove(index);
        if !self.forget_link(&link).await? {
            // Refused (judged by `forget_link`): the link stays, and its failure with it.
            self.links.insert(index, link);
            return Ok(());
        }
        self.remedies += 1;
        if !self.delete_topic(dest, topic, true).await? {
            self.failed_links.push(format!(
                "{source} -> {dest} ({topic}): the mirror of a topic created again at its source could not be \
                 deleted to mirror the new one"
            ));
            return Ok(());
        }
        if let Some(cluster) = self.clusters.get_mut(dest) {
            cluster.topics.remove(topic);
        }
        self.replicate(dest, topic).await?;
        // What the old link learnt of its source's producer ids stays true of the same source (its producers keep
        // their ids across the topic's recreation, and its allocator is the cluster's): the new link starts from
        // it rather than from nothing, as a new link (`start_link`) does.
        let learnt = self.learnt_ids(dest, source, topic);
        self.start_link(source, dest, topic).await?;
        // Listed once the link runs again (a refused `create` is judged by `start_link` as a failed link).
        if self
            .links
            .iter()
            .any(|link| link.source == source && link.dest == dest && link.topic == topic)
        {
            self.remedied.push(format!(
                "{source} -> {dest} ({topic}): {failure}; the operator deleted the mirror and created its link \
                 afresh"
            ));
        }
        if let (Some(learnt), Some(cluster)) = (learnt, self.clusters.get(dest)) {
            let mut ids = cluster
                .copied_ids
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let entry = ids.entry((source.to_owned(), topic.to_owned())).or_insert(learnt);
            *entry = entry.merged(learnt);
        }
        Ok(())
    }

    /// What `dest`'s links learnt of `source`'s producer ids through `topic`.
    fn learnt_ids(&self, dest: &str, source: &str, topic: &str) -> Option<super::sources::SourceIds> {
        let cluster = self.clusters.get(dest)?;
        let ids = cluster
            .copied_ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ids.get(&(source.to_owned(), topic.to_owned())).copied()
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
        // A source whose topic was deleted and created again is another topic: neither its producer state nor
        // its records are the mirror's to compare or to miss.
        let recreated = self.links[index].source_before_recreation.is_some();
        if recreated {
            // The mirror as it fails over holds nothing the deleted topic did not.
            for partition in self.partition_numbers(dest, topic).await {
                let found = self.mirror_divergence(&self.links[index], partition).await?;
                self.divergences.extend(found);
            }
        } else {
            self.compare_mirror_state(&source, dest, topic).await?;
        }
        let link = self.links.remove(index);
        if self.mutation == Some(Mutation::FailoverNeverCompletes) {
            // The bug: the link is deleted without STOPPING; its partitions stay read-only.
            self.forget_link(&link).await?;
        } else {
            // STOPPING as `serve` runs it, with the rule the strategy or the mutant leaves out
            // (`stopping_departure`, set when the links opened).
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
            self.forget_link(&link).await?;
        }
        self.failed_over.insert((dest.to_owned(), topic.to_owned()));
        if !recreated {
            self.note_failover_window(&link.source, dest, topic).await?;
        }
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

    /// Deletes `link` from its destination's links (its partition keeps the state the link left it in): whether
    /// it was (a refusal is judged as a failed link).
    async fn forget_link(&mut self, link: &Link) -> Result<bool, SimError> {
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
        Ok(answer.ok)
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
        let topics_check_every_round = self.topics_check_every_round;
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
                    without_topic_ids: mutation == Some(Mutation::TopicIdsIgnored),
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
                links.depart_from_stopping(stopping_departure(strategy, mutation));
                if mutation == Some(Mutation::GrowthNotFollowed) {
                    links.set_source_topic_check_interval_ms(None);
                } else if topics_check_every_round {
                    links.set_source_topic_check_interval_ms(Some(0));
                }
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

/// `mirror create` of a link named after `topic`, mirroring it from `source`.
fn create_request(source: &str, topic: &str) -> AdminRequest {
    AdminRequest::Create {
        link: topic.to_owned(),
        source: source.to_owned(),
        topics: vec![topic.to_owned()],
        source_config: Default::default(),
        include: Vec::new(),
        exclude: Vec::new(),
    }
}

/// An administration answer's error, as one line.
fn refusal(answer: &AdminResponse) -> String {
    answer.error.as_ref().map_or_else(
        || "the action did not complete".to_owned(),
        |error| format!("{}: {}", error.category, error.message),
    )
}

/// The rule of STOPPING a run leaves out: all of it without the barrier (a strategy without KIP-1279's producer-id
/// handling, or the `NoBarrier` mutant), or the one rule a mutant breaks; none otherwise.
fn stopping_departure(strategy: Strategy, mutation: Option<Mutation>) -> Option<StoppingDeparture> {
    if !strategy.writes_barrier() {
        return Some(StoppingDeparture::NoBarrier);
    }
    match mutation {
        Some(Mutation::NoBarrier) => Some(StoppingDeparture::NoBarrier),
        Some(Mutation::NoLsoCut) => Some(StoppingDeparture::NoStableCut),
        Some(Mutation::LastMirroredBeforeTheCut) => Some(StoppingDeparture::LastMirroredBeforeTheCut),
        _ => None,
    }
}
