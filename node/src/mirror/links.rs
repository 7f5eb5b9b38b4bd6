//! [`MirrorLinks`]: the node's mirror links at work — one `mirror-fsm` driver and one [`Fetcher`] per mirrored
//! partition, created from the registry at start (resuming what each partition was doing: fetching, or an
//! interrupted STOPPING, once), stepped by the caller (each step fetches one round for every fetching
//! partition), and driven by the administration actions.
//!
//! A driver works on the partition's leader log under the partition's lock, like a produce, so a mirrored batch
//! and a client's request never interleave inside the log; after every write the node's replication moves the
//! high watermark and long-polling consumers are woken.
//!
//! [`MirrorLinks`] is not `Send` (a `Fetcher` need not be): its owner runs it on one thread — `serve` gives it a
//! thread of its own — and reaches it with messages.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use mirror_fsm::driver::FETCH_BYTES;
use mirror_fsm::{
    stop_all, transition_allowed, Event, EventKind, FetchError, FetchedPartition, Fetcher, MirrorDriver,
    MirrorState, PartitionFetch, Sources, StateKind, StopJob,
};
use partition_log::{PartitionLog, ReplicaSet};

use super::admin::{AdminRequest, AdminResponse, LinkStatus, PartitionStatus};
use super::error::MirrorError;
use super::registry::{LinkRecord, TopicRecord};
use crate::{Node, PartitionSlot};

/// What one round asks of a source in all (a few partitions get more each, many get [`FETCH_BYTES`] each).
const ROUND_BYTES: usize = 32 << 20;

/// The most one partition asks for in a round.
const MAX_PARTITION_BYTES: usize = 8 << 20;

/// How many partitions run their STOPPING sequences at once in one failover.
const STOP_PARALLELISM: usize = 64;

/// How long `promote` waits between rounds that brought nothing.
const PROMOTE_POLL: Duration = Duration::from_millis(10);

/// The longest link name (a topic name's limit in Kafka).
const MAX_NAME_CHARS: usize = 249;

/// What each of `partitions` partitions asks for in one round.
fn round_bytes_per_partition(partitions: usize) -> usize {
    (ROUND_BYTES / partitions.max(1)).clamp(FETCH_BYTES, MAX_PARTITION_BYTES)
}

/// A round fetched ahead from a source: what it asked for, and the task fetching it.
type Prefetch = (
    Vec<PartitionFetch>,
    tokio::task::JoinHandle<Option<Vec<Result<FetchedPartition, FetchError>>>>,
);

/// A mirrored partition's topic and number.
type PartitionKey = (String, i32);

/// One mirrored partition at work.
struct Mirrored {
    /// The source's address (the link's).
    source: String,
    driver: MirrorDriver,
    fetcher: Box<dyn Fetcher>,
    /// The source's last stable offset in its latest answer for this partition.
    source_lso: Option<i64>,
    /// When its log end last reached the source's last stable offset (the start, before that).
    caught_up_at_ms: i64,
    /// The latest error a step met that the machine did not record (its storage failing).
    error: Option<String>,
}

impl Mirrored {
    /// Records how a round of this partition went — its error, when it last caught up — and, when the log end
    /// moved from `end_before` to `end`, moves the high watermark and wakes consumers. The batches appended.
    async fn after_round(
        &mut self,
        node: &Node,
        key: &PartitionKey,
        round: Result<usize, mirror_fsm::DriverError>,
        end_before: i64,
        end: i64,
        now: i64,
    ) -> usize {
        let appended = match round {
            Ok(appended) => {
                self.error = None;
                appended
            }
            Err(error) => {
                self.error = Some(error.to_string());
                0
            }
        };
        if self.source_lso.is_some_and(|stable| end >= stable) {
            self.caught_up_at_ms = now;
        }
        if end != end_before {
            if let Err(error) = wrote(node, &key.0, key.1).await {
                self.error = Some(error.to_string());
            }
        }
        appended
    }
}

/// The node's mirror links; see the module docs.
pub struct MirrorLinks {
    sources: Arc<dyn Sources>,
    links: Vec<LinkRecord>,
    partitions: BTreeMap<PartitionKey, Mirrored>,
    /// Fetch a source's next round while this one is written (a spawned task on the caller's runtime).
    fetch_ahead: bool,
    /// The rounds fetched ahead, by source.
    prefetched: BTreeMap<String, Prefetch>,
}

impl Drop for MirrorLinks {
    fn drop(&mut self) {
        for (_, (_, task)) in std::mem::take(&mut self.prefetched) {
            task.abort();
        }
    }
}

impl std::fmt::Debug for MirrorLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorLinks")
            .field("links", &self.links)
            .field("partitions", &self.partitions.len())
            .finish_non_exhaustive()
    }
}

impl MirrorLinks {
    /// Opens the links recorded on `node`, each partition's driver recovered from its persisted state: a
    /// partition that was mirroring fetches again, an interrupted STOPPING completes, a failover that was asked
    /// for but not begun runs now, a partition recorded but never started starts.
    pub async fn open(node: &Node, sources: Arc<dyn Sources>) -> Result<Self, MirrorError> {
        let mut links = MirrorLinks {
            sources,
            links: node.mirror_links().await?,
            partitions: BTreeMap::new(),
            fetch_ahead: true,
            prefetched: BTreeMap::new(),
        };
        for link in links.links.clone() {
            for (topic, record) in &link.topics {
                for partition in 0..record.partitions as i32 {
                    links
                        .start_partition(node, &link, topic, partition, *record)
                        .await?;
                }
            }
        }
        Ok(links)
    }

    /// Whether a source's next round is fetched while the current one is written (on by default; a caller that
    /// needs every step to run alone — a deterministic simulation — turns it off).
    pub fn set_fetch_ahead(&mut self, fetch_ahead: bool) {
        self.fetch_ahead = fetch_ahead;
        if !fetch_ahead {
            for (_, (_, task)) in std::mem::take(&mut self.prefetched) {
                task.abort();
            }
        }
    }

    /// True when no partition is fetching (the caller may wait longer before the next step).
    pub fn is_idle(&self) -> bool {
        !self
            .partitions
            .values()
            .any(|mirrored| mirrored.driver.fetching() || mirrored.driver.state().kind() == StateKind::Failed)
    }

    /// One round for every partition: FAILED ones retried when their backoff is over, fetching ones fetch once
    /// from their log end — all the partitions of one source in one request per source broker when the source
    /// allows it ([`Sources::fetch_many`]), else partition by partition. Returns the number of batches appended.
    pub async fn step(&mut self, node: &Node) -> usize {
        let failed: Vec<PartitionKey> = self
            .partitions
            .iter()
            .filter(|(_, mirrored)| mirrored.driver.state().kind() == StateKind::Failed)
            .map(|(key, _)| key.clone())
            .collect();
        let mut appended = 0;
        for key in failed {
            appended += self.step_partition(node, &key).await;
        }
        let mut by_source: BTreeMap<String, Vec<(PartitionKey, i64)>> = BTreeMap::new();
        for (key, mirrored) in &self.partitions {
            if mirrored.driver.fetching() {
                if let Some(end) = log_end(node, key).await {
                    by_source
                        .entry(mirrored.source.clone())
                        .or_default()
                        .push((key.clone(), end));
                }
            }
        }
        for (source, wanted) in by_source {
            let asked: Vec<PartitionFetch> = wanted
                .iter()
                .map(|((topic, partition), offset)| PartitionFetch {
                    topic: topic.clone(),
                    partition: *partition,
                    offset: *offset,
                })
                .collect();
            let answers = match self.prefetched.remove(&source) {
                // The round fetched ahead asked for exactly this: its answers (a failed task counts as nothing).
                Some((ahead, task)) if ahead == asked => task.await.ok().flatten(),
                Some((_, task)) => {
                    task.abort();
                    self.fetch_round(&source, &asked).await
                }
                None => self.fetch_round(&source, &asked).await,
            };
            let Some(answers) = answers else {
                for (key, _) in &wanted {
                    appended += self.step_partition(node, key).await;
                }
                continue;
            };
            // While this round is written, the next one is fetched from where it will leave each partition
            // (a prediction: if a write fails or the log moves otherwise, that answer is dropped unused).
            if self.fetch_ahead
                && answers
                    .iter()
                    .any(|answer| answer.as_ref().is_ok_and(|a| !a.response.batches.is_empty()))
            {
                let next: Vec<PartitionFetch> = asked
                    .iter()
                    .zip(&answers)
                    .map(|(fetch, answer)| PartitionFetch {
                        offset: answer
                            .as_ref()
                            .ok()
                            .and_then(|answer| answer.response.batches.last())
                            .map_or(fetch.offset, |batch| batch.next_offset()),
                        ..fetch.clone()
                    })
                    .collect();
                let sources = Arc::clone(&self.sources);
                let (address, wanted_next) = (source.clone(), next.clone());
                let per_partition = round_bytes_per_partition(next.len());
                let task =
                    tokio::spawn(
                        async move { sources.fetch_many(&address, &wanted_next, per_partition).await },
                    );
                self.prefetched.insert(source.clone(), (next, task));
            }
            for ((key, offset), answer) in wanted.iter().zip(answers) {
                appended += self.apply(node, key, *offset, answer).await;
            }
        }
        appended
    }

    /// One round's fetch from `source`, now.
    async fn fetch_round(
        &self,
        source: &str,
        asked: &[PartitionFetch],
    ) -> Option<Vec<Result<FetchedPartition, FetchError>>> {
        self.sources
            .fetch_many(source, asked, round_bytes_per_partition(asked.len()))
            .await
    }

    /// Applies one partition's answer of a multi-partition round; the batches appended.
    async fn apply(
        &mut self,
        node: &Node,
        key: &PartitionKey,
        offset: i64,
        answer: Result<FetchedPartition, FetchError>,
    ) -> usize {
        let Some(mirrored) = self.partitions.get_mut(key) else {
            return 0;
        };
        let (topic, partition) = (key.0.as_str(), key.1);
        let Ok(slot) = slot(node, topic, partition).await else {
            return 0;
        };
        let now = node.now_ms();
        let mut guard = slot.lock().await;
        let Ok(log) = leader(&mut guard, topic, partition) else {
            return 0;
        };
        let fetched = answer.map(|answer| {
            if answer.last_stable_offset.is_some() {
                mirrored.source_lso = answer.last_stable_offset;
            }
            answer.response
        });
        let applied = mirrored
            .driver
            .apply_fetch(log, mirrored.fetcher.as_mut(), offset, fetched)
            .await;
        let end = log.log_end_offset();
        drop(guard);
        mirrored.after_round(node, key, applied, offset, end, now).await
    }

    /// One round of one partition through its own fetcher; the batches it appended.
    async fn step_partition(&mut self, node: &Node, key: &PartitionKey) -> usize {
        let Some(mirrored) = self.partitions.get_mut(key) else {
            return 0;
        };
        let (topic, partition) = (key.0.as_str(), key.1);
        let kind = mirrored.driver.state().kind();
        if !mirrored.driver.fetching() && kind != StateKind::Failed {
            return 0;
        }
        let Ok(slot) = slot(node, topic, partition).await else {
            return 0;
        };
        let now = node.now_ms();
        let mut guard = slot.lock().await;
        let Ok(log) = leader(&mut guard, topic, partition) else {
            return 0;
        };
        let end_before = log.log_end_offset();
        let tick = mirrored
            .driver
            .handle(log, mirrored.fetcher.as_mut(), Event::Tick { now_ms: now })
            .await;
        let fetched = match tick {
            // A retry that resumed fetching waits for the next round's fetch.
            Ok(()) if kind == StateKind::Failed => Ok(0),
            Ok(()) => mirrored.driver.fetch_once(log, mirrored.fetcher.as_mut()).await,
            Err(error) => Err(error),
        };
        if let Some(stable) = mirrored.fetcher.source_last_stable_offset() {
            mirrored.source_lso = Some(stable);
        }
        let end = log.log_end_offset();
        drop(guard);
        mirrored
            .after_round(node, key, fetched, end_before, end, now)
            .await
    }

    /// Answers an administration request.
    pub async fn handle(&mut self, node: &Node, request: AdminRequest) -> AdminResponse {
        let outcome = match request {
            AdminRequest::Create { link, source, topics } => {
                self.create(node, link, source, topics, false).await
            }
            AdminRequest::Reverse { link, source, topics } => {
                self.create(node, link, source, topics, true).await
            }
            AdminRequest::List => {
                let mut statuses = Vec::new();
                for link in &self.links {
                    statuses.push(self.status(node, link, &BTreeSet::new()).await);
                }
                Ok(statuses)
            }
            AdminRequest::Describe { link, topics } => self.describe(node, &link, &topics).await,
            AdminRequest::Pause { link, topics } => {
                self.send_all(node, &link, &topics, Event::Pause, EventKind::Pause)
                    .await
            }
            AdminRequest::Resume { link, topics } => {
                self.send_all(node, &link, &topics, Event::Resume, EventKind::Resume)
                    .await
            }
            AdminRequest::Failover { link, topics } => self.failover(node, &link, &topics).await,
            AdminRequest::Promote {
                link,
                topics,
                timeout_ms,
            } => self.promote(node, &link, &topics, timeout_ms).await,
        };
        match outcome {
            Ok(links) => AdminResponse {
                ok: true,
                error: None,
                links,
            },
            Err((error, links)) => AdminResponse::failed(error.category(), error.to_string(), links),
        }
    }

    async fn create(
        &mut self,
        node: &Node,
        name: String,
        source: String,
        topics: Vec<String>,
        reverse: bool,
    ) -> Outcome {
        let no_status = |error: MirrorError| (error, Vec::new());
        check_name(&name).map_err(no_status)?;
        if self.links.iter().any(|link| link.name == name) {
            return Err(no_status(MirrorError::AlreadyExists(format!(
                "mirror link {name:?} exists already"
            ))));
        }
        let topics: BTreeSet<String> = topics.into_iter().collect();
        if topics.is_empty() {
            return Err(no_status(MirrorError::InvalidRequest(
                "name at least one topic to mirror".to_owned(),
            )));
        }
        for topic in &topics {
            if let Some(link) = self.links.iter().find(|link| link.topics.contains_key(topic)) {
                return Err(no_status(MirrorError::AlreadyExists(format!(
                    "topic {topic} is mirrored by link {:?} already",
                    link.name
                ))));
            }
        }
        let wanted: Vec<String> = topics.iter().cloned().collect();
        let description = self.sources.describe(&source, &wanted).await.map_err(|error| {
            no_status(MirrorError::Source {
                address: source.clone(),
                error,
            })
        })?;
        if description.cluster_id == node.config().cluster_id {
            return Err(no_status(MirrorError::InvalidRequest(format!(
                "the source at {source} is this cluster ({}): a cluster cannot mirror itself",
                description.cluster_id
            ))));
        }
        let existing = node.topic_partitions().await;
        for (topic, &partitions) in &description.partitions {
            match (existing.get(topic), reverse) {
                (None, false) => {}
                (Some(_), false) => {
                    return Err(no_status(MirrorError::AlreadyExists(format!(
                        "topic {topic} exists on this cluster: a mirror topic is created by the link (`mirror \
                         reverse` mirrors into a former source's topic)"
                    ))))
                }
                (None, true) => {
                    return Err(no_status(MirrorError::UnknownTopic(format!(
                        "topic {topic} does not exist on this cluster: `mirror reverse` mirrors into an existing \
                         topic (`mirror create` creates one)"
                    ))))
                }
                (Some(&count), true) if count != partitions as usize => {
                    return Err(no_status(MirrorError::InvalidRequest(format!(
                        "topic {topic} has {count} partitions here and {partitions} at the source"
                    ))))
                }
                (Some(_), true) => {}
            }
        }
        for (topic, &partitions) in &description.partitions {
            if !existing.contains_key(topic) {
                node.create_topic(topic, partitions).await.map_err(|error| {
                    no_status(MirrorError::InvalidRequest(format!(
                        "topic {topic} cannot be created: {}",
                        error.name()
                    )))
                })?;
            }
        }
        let link = LinkRecord {
            name: name.clone(),
            source,
            source_cluster_id: description.cluster_id,
            topics: description
                .partitions
                .iter()
                .map(|(topic, &partitions)| {
                    (
                        topic.clone(),
                        TopicRecord {
                            partitions,
                            failover_requested: false,
                        },
                    )
                })
                .collect(),
        };
        let mut recorded = self.links.clone();
        recorded.push(link.clone());
        node.put_mirror_links(&recorded)
            .await
            .map_err(|error| no_status(error.into()))?;
        self.links = recorded;
        for (topic, record) in &link.topics {
            for partition in 0..record.partitions as i32 {
                if let Err(error) = self.start_partition(node, &link, topic, partition, *record).await {
                    let status = self.status(node, &link, &BTreeSet::new()).await;
                    return Err((error, vec![status]));
                }
            }
        }
        let status = self.status(node, &link, &BTreeSet::new()).await;
        match failed_partitions(&status) {
            Some(message) => Err((MirrorError::Failed(message), vec![status])),
            None => Ok(vec![status]),
        }
    }

    /// Recovers one partition's driver and brings it where the registry says it belongs.
    async fn start_partition(
        &mut self,
        node: &Node,
        link: &LinkRecord,
        topic: &str,
        partition: i32,
        record: TopicRecord,
    ) -> Result<(), MirrorError> {
        let mut fetcher = self.sources.fetcher(&link.source, topic, partition);
        let slot = slot(node, topic, partition).await?;
        let now = node.now_ms();
        let mut guard = slot.lock().await;
        let log = leader(&mut guard, topic, partition)?;
        let mut driver =
            MirrorDriver::recover(log, fetcher.as_mut(), node.config().cluster_id.clone()).await?;
        driver
            .handle(log, fetcher.as_mut(), Event::Tick { now_ms: now })
            .await?;
        let kind = driver.state().kind();
        let event = if record.failover_requested {
            // Asked to fail over before a crash: STOPPING runs now (an interrupted one has completed above).
            transition_allowed(kind, EventKind::Stop).then_some(Event::Stop)
        } else if kind == StateKind::Stopped {
            Some(Event::Start {
                source_cluster_id: link.source_cluster_id.clone(),
            })
        } else {
            None
        };
        let mut error = None;
        if let Some(event) = event {
            if let Err(failed) = driver.handle(log, fetcher.as_mut(), event).await {
                error = Some(failed.to_string());
            }
        }
        drop(guard);
        wrote(node, topic, partition).await?;
        self.partitions.insert(
            (topic.to_owned(), partition),
            Mirrored {
                source: link.source.clone(),
                driver,
                fetcher,
                source_lso: None,
                caught_up_at_ms: now,
                error,
            },
        );
        Ok(())
    }

    /// The link named `name` and the partitions of `topics` (all of its topics when empty).
    fn select(&self, name: &str, topics: &[String]) -> Result<(LinkRecord, Vec<PartitionKey>), MirrorError> {
        let link = self
            .links
            .iter()
            .find(|link| link.name == name)
            .ok_or_else(|| MirrorError::UnknownLink(name.to_owned()))?;
        for topic in topics {
            if !link.topics.contains_key(topic) {
                return Err(MirrorError::UnknownTopic(format!(
                    "link {name:?} does not mirror topic {topic}"
                )));
            }
        }
        let keys = link
            .topics
            .iter()
            .filter(|(topic, _)| topics.is_empty() || topics.contains(topic))
            .flat_map(|(topic, record)| (0..record.partitions as i32).map(|p| (topic.clone(), p)))
            .collect();
        Ok((link.clone(), keys))
    }

    async fn describe(&self, node: &Node, name: &str, topics: &[String]) -> Outcome {
        let (link, _) = self.select(name, topics).map_err(|error| (error, Vec::new()))?;
        let topics: BTreeSet<String> = topics.iter().cloned().collect();
        Ok(vec![self.status(node, &link, &topics).await])
    }

    /// Sends `event` to every selected partition whose state accepts it (pause, resume).
    async fn send_all(
        &mut self,
        node: &Node,
        name: &str,
        topics: &[String],
        event: Event,
        kind: EventKind,
    ) -> Outcome {
        let (link, keys) = self.select(name, topics).map_err(|error| (error, Vec::new()))?;
        let mut first_error = None;
        for key in &keys {
            let Some(mirrored) = self.partitions.get_mut(key) else {
                continue;
            };
            if !transition_allowed(mirrored.driver.state().kind(), kind) {
                continue;
            }
            let sent = async {
                let slot = slot(node, &key.0, key.1).await?;
                let mut guard = slot.lock().await;
                let log = leader(&mut guard, &key.0, key.1)?;
                mirrored
                    .driver
                    .handle(log, mirrored.fetcher.as_mut(), event.clone())
                    .await?;
                Ok::<(), MirrorError>(())
            }
            .await;
            if let Err(error) = sent {
                first_error.get_or_insert(error);
            }
        }
        let topics: BTreeSet<String> = topics.iter().cloned().collect();
        let status = self.status(node, &link, &topics).await;
        match first_error {
            Some(error) => Err((error, vec![status])),
            None => Ok(vec![status]),
        }
    }

    /// Records the failover request, then runs STOPPING on every selected partition that is not stopped yet,
    /// [`STOP_PARALLELISM`] at a time.
    async fn failover(&mut self, node: &Node, name: &str, topics: &[String]) -> Outcome {
        let (link, keys) = self.select(name, topics).map_err(|error| (error, Vec::new()))?;
        let mut recorded = self.links.clone();
        if let Some(entry) = recorded.iter_mut().find(|entry| entry.name == link.name) {
            for (topic, record) in entry.topics.iter_mut() {
                if topics.is_empty() || topics.contains(topic) {
                    record.failover_requested = true;
                }
            }
        }
        if let Err(error) = node.put_mirror_links(&recorded).await {
            return Err((error.into(), Vec::new()));
        }
        self.links = recorded;
        let (link, _) = self.select(name, topics).map_err(|error| (error, Vec::new()))?;
        let wanted: BTreeSet<&PartitionKey> = keys.iter().collect();
        let mut selected: Vec<(&PartitionKey, &mut Mirrored)> = self
            .partitions
            .iter_mut()
            .filter(|(key, mirrored)| {
                wanted.contains(key) && transition_allowed(mirrored.driver.state().kind(), EventKind::Stop)
            })
            .collect();
        let mut guards = Vec::with_capacity(selected.len());
        for (key, _) in &selected {
            match slot(node, &key.0, key.1).await {
                Ok(slot) => guards.push(slot.lock_owned().await),
                Err(error) => return Err((error, Vec::new())),
            }
        }
        let mut jobs = Vec::with_capacity(selected.len());
        let mut stopped_keys = Vec::with_capacity(selected.len());
        for ((key, mirrored), guard) in selected.iter_mut().zip(guards.iter_mut()) {
            let Some(replicas) = guard.as_mut() else {
                continue;
            };
            stopped_keys.push((*key).clone());
            jobs.push(StopJob {
                log: &mut replicas.leader,
                driver: &mut mirrored.driver,
                fetcher: mirrored.fetcher.as_mut(),
            });
        }
        let results = stop_all(jobs, STOP_PARALLELISM).await;
        drop(guards);
        let mut first_error = None;
        for (key, result) in stopped_keys.iter().zip(results) {
            if let Err(error) = result {
                first_error.get_or_insert(MirrorError::Driver(error));
            }
            if let Err(error) = wrote(node, &key.0, key.1).await {
                first_error.get_or_insert(error);
            }
        }
        let topics: BTreeSet<String> = topics.iter().cloned().collect();
        let status = self.status(node, &link, &topics).await;
        let not_stopped = status
            .partitions
            .iter()
            .filter(|partition| partition.state != "STOPPED")
            .map(|partition| {
                format!(
                    "{}-{} is {}",
                    partition.topic, partition.partition, partition.state
                )
            })
            .collect::<Vec<_>>();
        match first_error {
            Some(error) => Err((error, vec![status])),
            None if !not_stopped.is_empty() => Err((
                MirrorError::Failed(format!("failover incomplete: {}", not_stopped.join(", "))),
                vec![status],
            )),
            None => Ok(vec![status]),
        }
    }

    /// Fetches until every selected partition has caught up with its source's last stable offset (the source
    /// answering), then fails them over; gives up after `timeout_ms`, failing nothing over.
    async fn promote(&mut self, node: &Node, name: &str, topics: &[String], timeout_ms: u64) -> Outcome {
        let (link, keys) = self.select(name, topics).map_err(|error| (error, Vec::new()))?;
        let deadline = node
            .now_ms()
            .saturating_add(i64::try_from(timeout_ms).unwrap_or(i64::MAX));
        let selected: BTreeSet<String> = topics.iter().cloned().collect();
        if let Some((key, _)) = keys
            .iter()
            .filter_map(|key| self.partitions.get_key_value(key))
            .find(|(_, mirrored)| mirrored.driver.state().kind() == StateKind::Paused)
        {
            let status = self.status(node, &link, &selected).await;
            return Err((
                MirrorError::InvalidRequest(format!(
                    "{}-{} is PAUSED: resume it first (or `mirror failover` stops it as it is)",
                    key.0, key.1
                )),
                vec![status],
            ));
        }
        loop {
            let appended = self.step(node).await;
            let mut behind = Vec::new();
            for key in &keys {
                let Some(mirrored) = self.partitions.get(key) else {
                    continue;
                };
                if matches!(
                    mirrored.driver.state().kind(),
                    StateKind::Stopped | StateKind::Stopping
                ) {
                    continue;
                }
                if let Some(failure) = mirrored.driver.state().failure() {
                    let status = self.status(node, &link, &selected).await;
                    return Err((
                        MirrorError::Failed(format!(
                            "{}-{} cannot catch up ({}): promote needs a reachable source; `mirror failover` \
                             stops now, with what was mirrored",
                            key.0, key.1, failure.message
                        )),
                        vec![status],
                    ));
                }
                let end = log_end(node, key).await;
                let caught_up = mirrored
                    .source_lso
                    .zip(end)
                    .is_some_and(|(stable, end)| end >= stable);
                if !caught_up {
                    behind.push(format!("{}-{}", key.0, key.1));
                }
            }
            if behind.is_empty() {
                break;
            }
            if node.now_ms() >= deadline {
                let status = self.status(node, &link, &selected).await;
                return Err((
                    MirrorError::Timeout(format!(
                        "not caught up after {timeout_ms} ms: {}; nothing was failed over",
                        behind.join(", ")
                    )),
                    vec![status],
                ));
            }
            if appended == 0 {
                tokio::time::sleep(PROMOTE_POLL).await;
            }
        }
        self.failover(node, name, topics).await
    }

    /// The status of `link`'s partitions (of `topics`; all when empty).
    async fn status(&self, node: &Node, link: &LinkRecord, topics: &BTreeSet<String>) -> LinkStatus {
        let now = node.now_ms();
        let mut partitions = Vec::new();
        for (topic, record) in &link.topics {
            if !topics.is_empty() && !topics.contains(topic) {
                continue;
            }
            for partition in 0..record.partitions as i32 {
                let key = (topic.clone(), partition);
                let end = log_end(node, &key).await.unwrap_or(-1);
                let Some(mirrored) = self.partitions.get(&key) else {
                    partitions.push(PartitionStatus {
                        topic: topic.clone(),
                        partition,
                        state: "UNKNOWN".to_owned(),
                        log_end_offset: end,
                        last_mirrored_offset: None,
                        source_last_stable_offset: None,
                        lag_offsets: None,
                        lag_ms: None,
                        barrier_offset: None,
                        error: Some("not started".to_owned()),
                    });
                    continue;
                };
                let state = mirrored.driver.state();
                let kind = state.kind();
                let stable = mirrored.source_lso;
                let following = matches!(kind, StateKind::Mirroring | StateKind::Paused | StateKind::Failed)
                    && state.stop_step().is_none();
                let lag = stable.filter(|_| following).map(|stable| (stable - end).max(0));
                let last_mirrored = if following {
                    Some(end)
                } else {
                    state.last_mirrored_offset()
                };
                let barrier = (kind == StateKind::Stopped && record.failover_requested)
                    .then(|| state.last_mirrored_offset())
                    .flatten();
                partitions.push(PartitionStatus {
                    topic: topic.clone(),
                    partition,
                    state: state_name(state).to_owned(),
                    log_end_offset: end,
                    last_mirrored_offset: last_mirrored,
                    source_last_stable_offset: stable,
                    lag_offsets: lag,
                    lag_ms: lag.map(|lag| {
                        if lag > 0 {
                            now - mirrored.caught_up_at_ms
                        } else {
                            0
                        }
                    }),
                    barrier_offset: barrier,
                    error: state
                        .failure()
                        .map(|failure| failure.message.clone())
                        .or_else(|| mirrored.error.clone()),
                });
            }
        }
        LinkStatus {
            name: link.name.clone(),
            source: link.source.clone(),
            source_cluster_id: link.source_cluster_id.clone(),
            partitions,
        }
    }
}

/// An action's links, or its failure with the links' status as far as it got.
type Outcome = Result<Vec<LinkStatus>, (MirrorError, Vec<LinkStatus>)>;

/// The names of KIP-1279's prototype for our states (PREPARING aligns the log with the source: its
/// LOG_TRUNCATION).
fn state_name(state: &MirrorState) -> &'static str {
    match state.kind() {
        StateKind::Preparing => "LOG_TRUNCATION",
        StateKind::Mirroring => "MIRRORING",
        StateKind::Paused => "PAUSED",
        StateKind::Stopping => "STOPPING",
        StateKind::Stopped => "STOPPED",
        StateKind::Failed => "FAILED",
    }
}

/// The FAILED partitions of a status, as one message (`None`: none failed).
fn failed_partitions(status: &LinkStatus) -> Option<String> {
    let failed: Vec<String> = status
        .partitions
        .iter()
        .filter(|partition| partition.state == "FAILED")
        .map(|partition| {
            format!(
                "{}-{}: {}",
                partition.topic,
                partition.partition,
                partition.error.as_deref().unwrap_or("failed")
            )
        })
        .collect();
    (!failed.is_empty()).then(|| failed.join("; "))
}

/// A link name: 1 to 249 characters of `[A-Za-z0-9._-]`, as Kafka's topic names.
fn check_name(name: &str) -> Result<(), MirrorError> {
    let valid = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if valid {
        Ok(())
    } else {
        Err(MirrorError::InvalidRequest(format!(
            "link name {name:?}: 1 to {MAX_NAME_CHARS} characters of [A-Za-z0-9._-]"
        )))
    }
}

async fn slot(node: &Node, topic: &str, partition: i32) -> Result<Arc<PartitionSlot>, MirrorError> {
    node.partition(topic, partition)
        .await
        .ok_or_else(|| MirrorError::UnknownTopic(format!("{topic}-{partition} does not exist on this node")))
}

fn leader<'a>(
    replicas: &'a mut Option<ReplicaSet>,
    topic: &str,
    partition: i32,
) -> Result<&'a mut PartitionLog, MirrorError> {
    replicas
        .as_mut()
        .map(|replicas| &mut replicas.leader)
        .ok_or_else(|| MirrorError::Failed(format!("{topic}-{partition} is closed")))
}

/// Where a partition's log ends (`None`: missing or closed).
async fn log_end(node: &Node, key: &PartitionKey) -> Option<i64> {
    let slot = node.partition(&key.0, key.1).await?;
    let guard = slot.lock().await;
    guard.as_ref().map(|replicas| replicas.leader.log_end_offset())
}

/// After a driver wrote: replication moves the high watermark, long polls wake.
async fn wrote(node: &Node, topic: &str, partition: i32) -> Result<(), MirrorError> {
    node.replicate(topic, partition).await?;
    node.notify_appended();
    Ok(())
}
