//! The administration actions on [`MirrorLinks`]: create and reverse a link, list and describe links, pause,
//! resume, fail over, promote and delete — each answering with the status of the partitions it touched
//! ([`AdminResponse`]). What a partition does is the state machine's decision; an action records what the
//! operator asked (the registry first, for a failover) and sends the machine its event.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use mirror_fsm::{
    stop_all, transition_allowed, Event, EventKind, FetchError, MirrorState, SourceConfigs,
    SourceDescription, Sources, StateKind, StopJob,
};

use super::error::MirrorError;
use super::filters::{effective_topic_exclude, Patterns};
use super::link_config;
use super::links::{
    leader, log_end, log_end_and_truncations, slot, wrote, MirrorLinks, Mirrored, PartitionKey,
};
use super::registry::{LinkRecord, LinkSettings, TopicRecord};
use crate::Node;
use mirror_admin::{AdminRequest, AdminResponse, LinkStatus, PartitionStatus};

/// The topics a `create` or `reverse` names, and its filters.
struct Asked {
    topics: Vec<String>,
    include: Vec<String>,
    exclude: Vec<String>,
}

/// How many partitions run their STOPPING sequences at once in one failover.
const STOP_PARALLELISM: usize = 64;

/// How long `promote` waits between rounds that brought nothing.
const PROMOTE_POLL: Duration = Duration::from_millis(10);

/// The longest link name (a topic name's limit in Kafka).
const MAX_NAME_CHARS: usize = 249;

/// What a `create` or `reverse` learnt of its source before it reached the links: `serve` asks in a task of its
/// own ([`MirrorLinks::source_question`]), so that a slow or silent source holds up no other link while it is
/// asked; a deterministic caller (the simulator) lets the action ask.
#[derive(Debug)]
pub enum SourceAnswer {
    /// The action asks the source itself.
    Ask,
    /// The source's description of the request's topics, asked before.
    Given(Result<SourceDescription, FetchError>),
}

/// What a `create` or `reverse` asks its source ([`MirrorLinks::source_question`]): the named topics and, when
/// the link has include patterns, every topic of the source they select now.
pub struct SourceQuestion {
    sources: Arc<dyn Sources>,
    source: String,
    topics: Vec<String>,
    filter: Option<Patterns>,
    /// An `alter`'s new client settings: the question is whether they reach the source (its cluster id).
    new_client: Option<BTreeMap<String, String>>,
}

impl SourceQuestion {
    /// Asks it: the source's description of the named topics and of those the filters select — or, for an
    /// `alter` with new client settings, the source's cluster id reached with them alone.
    pub async fn ask(self) -> Result<SourceDescription, FetchError> {
        if let Some(settings) = &self.new_client {
            let cluster_id = self.sources.verify_client(&self.source, settings).await?;
            return Ok(SourceDescription {
                cluster_id,
                ..SourceDescription::default()
            });
        }
        describe_selected(
            self.sources.as_ref(),
            &self.source,
            &self.topics,
            self.filter.as_ref(),
        )
        .await
    }
}

/// The description of `named` and of every topic at `source` that `filter` selects (never one the source calls
/// internal) — one Metadata listing, then one description of them all — once the source said the link may read
/// each named one.
pub(super) async fn describe_selected(
    sources: &dyn Sources,
    source: &str,
    named: &[String],
    filter: Option<&Patterns>,
) -> Result<SourceDescription, FetchError> {
    let mut wanted: BTreeSet<String> = named.iter().cloned().collect();
    if let Some(filter) = filter.filter(|filter| filter.discovers()) {
        let listed = sources.list_topics(source).await?;
        wanted.extend(
            listed
                .into_iter()
                .filter(|topic| !topic.internal && filter.selects(&topic.name))
                .map(|topic| topic.name),
        );
    }
    let wanted: Vec<String> = wanted.into_iter().collect();
    let description = match sources.describe(source, &wanted).await {
        Ok(description) => description,
        // One topic the patterns found may have gone (or not be described yet) between the listing and the
        // description: the named topics must be described, each found one is described alone and left out when
        // it cannot be (the next check finds it again).
        Err(error) if wanted.len() > named.len() => {
            let mut description = sources.describe(source, named).await?;
            let found = wanted.iter().filter(|topic| !named.contains(*topic));
            for topic in found {
                if let Ok(alone) = sources.describe(source, std::slice::from_ref(topic)).await {
                    merge(&mut description, alone);
                }
            }
            tracing::debug!(%source, %error, "a topic the patterns found could not be described with the others");
            description
        }
        Err(error) => return Err(error),
    };
    // Fail fast (issue 53, item 6): a named topic the link may describe but not read refuses the link now, not at
    // its first fetch. One the patterns found must not block the others: it is left out, and the link's checks
    // find it again and say why in a link warning until the link may read it (then it is added).
    sources.check_readable(source, named).await?;
    let mut description = description;
    let found: Vec<String> = description
        .partitions
        .keys()
        .filter(|topic| !named.contains(*topic))
        .cloned()
        .collect();
    for topic in found {
        if let Err(refused) = sources.check_readable(source, std::slice::from_ref(&topic)).await {
            if refused.code == Some(super::round_errors::TOPIC_AUTHORIZATION_FAILED) {
                tracing::info!(%source, %topic, "left out of the new link: {refused}");
                description.partitions.remove(&topic);
                description.topic_ids.remove(&topic);
            }
        }
    }
    Ok(description)
}

/// Adds `more`'s topics to `description` (the same source's answers).
fn merge(description: &mut SourceDescription, more: SourceDescription) {
    description.partitions.extend(more.partitions);
    description.topic_ids.extend(more.topic_ids);
    description.configs = match (std::mem::take(&mut description.configs), more.configs) {
        (SourceConfigs::Read(mut ours), SourceConfigs::Read(theirs)) => {
            ours.extend(theirs);
            SourceConfigs::Read(ours)
        }
        (SourceConfigs::Failed(why), _) | (_, SourceConfigs::Failed(why)) => SourceConfigs::Failed(why),
        (ours, _) => ours,
    };
}

impl MirrorLinks {
    /// Answers an administration request.
    pub async fn handle(&mut self, node: &Node, request: AdminRequest) -> AdminResponse {
        self.handle_answered(node, request, SourceAnswer::Ask).await
    }

    /// The question a `create` or `reverse` asks its source, or an `alter` with new client settings; `None` for
    /// every other request.
    pub fn source_question(&self, request: &AdminRequest) -> Option<SourceQuestion> {
        if let AdminRequest::Alter {
            link,
            source_config: Some(settings),
            ..
        } = request
        {
            let record = self.links.iter().find(|record| record.name == *link)?;
            return Some(SourceQuestion {
                sources: Arc::clone(&self.sources),
                source: record.source.clone(),
                topics: Vec::new(),
                filter: None,
                new_client: Some(settings.clone()),
            });
        }
        let (source, topics, source_config, include, exclude) = match request {
            AdminRequest::Create {
                source,
                topics,
                source_config,
                include,
                exclude,
                ..
            } => (
                source,
                topics,
                source_config,
                include.as_slice(),
                exclude.as_slice(),
            ),
            AdminRequest::Reverse {
                source,
                topics,
                source_config,
                ..
            } => (source, topics, source_config, &[][..], &[][..]),
            _ => return None,
        };
        // The settings are in place before the source is asked; refused ones, or ones another link to the same
        // source contradicts, are refused by `create` (the question then fails with why).
        if self.settings_conflict(source, source_config).is_none() {
            let _ = self.sources.configure_client(source, source_config);
        }
        // Patterns that do not compile are refused by `create`; the question then asks for the named topics only.
        let exclude = effective_topic_exclude(include, exclude.to_vec());
        let filter = Patterns::new(include, &exclude).ok();
        Some(SourceQuestion {
            sources: Arc::clone(&self.sources),
            source: source.clone(),
            topics: topics
                .iter()
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect(),
            filter,
            new_client: None,
        })
    }

    /// Answers an administration request whose source was asked before ([`SourceAnswer`]).
    pub async fn handle_answered(
        &mut self,
        node: &Node,
        request: AdminRequest,
        answer: SourceAnswer,
    ) -> AdminResponse {
        let outcome = match request {
            AdminRequest::Create {
                link,
                source,
                topics,
                source_config,
                include,
                exclude,
            } => {
                let asked = Asked {
                    topics,
                    include,
                    exclude,
                };
                self.create(node, link, (source, source_config), asked, false, answer)
                    .await
            }
            AdminRequest::Reverse {
                link,
                source,
                topics,
                source_config,
            } => {
                let asked = Asked {
                    topics,
                    include: Vec::new(),
                    exclude: Vec::new(),
                };
                self.create(node, link, (source, source_config), asked, true, answer)
                    .await
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
            AdminRequest::Delete { link } => self.delete(node, &link).await,
            AdminRequest::Alter {
                link,
                set,
                delete,
                source_config,
            } => {
                self.alter(node, &link, (&set, &delete), source_config, answer)
                    .await
            }
            AdminRequest::DescribeConfig { link } => match self.select(&link, &[]) {
                Ok((record, _)) => Ok(vec![self.status_with_config(node, &record).await]),
                Err(error) => Err((error, Vec::new())),
            },
            AdminRequest::Promote {
                link,
                topics,
                timeout_ms,
            } => self.promote(node, &link, &topics, timeout_ms).await,
            AdminRequest::LastMirrored {
                source_cluster_id,
                topic,
                partition,
            } => {
                return match last_mirrored(node, &source_cluster_id, &topic, partition).await {
                    Ok(offset) => AdminResponse {
                        ok: true,
                        error: None,
                        links: Vec::new(),
                        last_mirrored_offset: offset,
                    },
                    Err(error) => AdminResponse::failed(error.category(), error.to_string(), Vec::new()),
                };
            }
        };
        match outcome {
            Ok(links) => AdminResponse {
                ok: true,
                error: None,
                links,
                last_mirrored_offset: None,
            },
            Err((error, links)) => AdminResponse::failed(error.category(), error.to_string(), links),
        }
    }

    /// The link that already reaches `source` with other client settings, if any (one source address has one
    /// set of connections, so one set of settings).
    /// Whether `new_config` reaches `link`'s source — the same cluster — on connections of its own (asked before,
    /// or now): a wrong password or an untrusted certificate is refused with the source's answer, before the link
    /// changes.
    async fn check_new_client(
        &self,
        link: &LinkRecord,
        new_config: &BTreeMap<String, String>,
        answer: SourceAnswer,
    ) -> Result<(), MirrorError> {
        let reached = match answer {
            SourceAnswer::Given(described) => described.map(|description| description.cluster_id),
            SourceAnswer::Ask => self.sources.verify_client(&link.source, new_config).await,
        };
        let cluster_id = reached.map_err(|error| MirrorError::Source {
            address: link.source.clone(),
            error,
        })?;
        if cluster_id != link.source_cluster_id {
            return Err(MirrorError::InvalidRequest(format!(
                "the new client settings reach cluster {cluster_id:?} at {}; the link mirrors {:?}",
                link.source, link.source_cluster_id
            )));
        }
        Ok(())
    }

    /// Reaches `link`'s source with `new_config` from now on — every link to that source, since they share its
    /// connections — or refuses, changing nothing: settings the client refuses (the old ones are put back).
    fn reconfigure_source(
        &self,
        link: &LinkRecord,
        new_config: &BTreeMap<String, String>,
    ) -> Result<(), MirrorError> {
        if let Err(error) = self.sources.configure_client(&link.source, new_config) {
            let _ = self.sources.configure_client(&link.source, &link.source_config);
            return Err(MirrorError::Source {
                address: link.source.clone(),
                error,
            });
        }
        Ok(())
    }

    /// Puts `link`'s settings in effect on its running partitions: the retry backoff's cap, and, when its
    /// source's client settings changed, fetchers that connect with the new ones and a retry at the next step of
    /// every FAILED partition — even one whose failure was final (a refused authentication): what made it final
    /// has changed.
    fn apply_to_running(&mut self, link: &LinkRecord, new_client: bool, now_ms: i64) {
        let max_backoff = link
            .settings
            .retry_backoff_max_ms
            .unwrap_or(mirror_fsm::machine::MAX_BACKOFF_MS);
        for (topic, record) in &link.topics {
            for partition in 0..i32::try_from(record.partitions).unwrap_or(i32::MAX) {
                let Some(mirrored) = self.partitions.get_mut(&(topic.clone(), partition)) else {
                    continue;
                };
                mirrored.driver.set_max_backoff_ms(max_backoff, now_ms);
                if new_client {
                    let mut fetcher = self.sources.fetcher(&link.source, topic, partition);
                    if let Some(topic_id) = record.source_topic_id {
                        fetcher.expect_topic_id(topic_id);
                    }
                    mirrored.fetcher = fetcher;
                    mirrored.driver.retry_now(now_ms);
                }
            }
        }
    }

    fn settings_conflict(&self, source: &str, settings: &BTreeMap<String, String>) -> Option<&LinkRecord> {
        self.links
            .iter()
            .find(|link| link.source == source && link.source_config != *settings)
    }

    async fn create(
        &mut self,
        node: &Node,
        name: String,
        (source, source_config): (String, BTreeMap<String, String>),
        asked: Asked,
        reverse: bool,
        answer: SourceAnswer,
    ) -> Outcome {
        let no_status = |error: MirrorError| (error, Vec::new());
        check_name(&name).map_err(no_status)?;
        if let Some(other) = self.settings_conflict(&source, &source_config) {
            return Err(no_status(MirrorError::InvalidRequest(format!(
                "link {:?} reaches {source} with other client settings: links to one source share its \
                 connections, so they take the same --source-config",
                other.name
            ))));
        }
        self.sources
            .configure_client(&source, &source_config)
            .map_err(|error| {
                no_status(MirrorError::Source {
                    address: source.clone(),
                    error,
                })
            })?;
        if self.links.iter().any(|link| link.name == name) {
            return Err(no_status(MirrorError::AlreadyExists(format!(
                "mirror link {name:?} exists already"
            ))));
        }
        if asked.include.is_empty() && !asked.exclude.is_empty() {
            return Err(no_status(MirrorError::InvalidRequest(
                "exclude patterns narrow include patterns: give --include too, or leave the topics out of --topic"
                    .to_owned(),
            )));
        }
        let exclude = effective_topic_exclude(&asked.include, asked.exclude);
        let filter = Patterns::new(&asked.include, &exclude).map_err(no_status)?;
        let named: BTreeSet<String> = asked.topics.into_iter().collect();
        if named.is_empty() && !filter.discovers() {
            return Err(no_status(MirrorError::InvalidRequest(
                "name at least one topic to mirror (--topic) or an include pattern (--include)".to_owned(),
            )));
        }
        for topic in &named {
            if let Some(link) = self.links.iter().find(|link| link.topics.contains_key(topic)) {
                return Err(no_status(MirrorError::AlreadyExists(format!(
                    "topic {topic} is mirrored by link {:?} already",
                    link.name
                ))));
            }
            if filter.excludes(topic) {
                return Err(no_status(MirrorError::InvalidRequest(format!(
                    "topic {topic} is named and also excluded by the link's exclude patterns ({})",
                    exclude.join(" ")
                ))));
            }
        }
        let wanted: Vec<String> = named.iter().cloned().collect();
        let described = match answer {
            SourceAnswer::Ask => {
                describe_selected(self.sources.as_ref(), &source, &wanted, Some(&filter)).await
            }
            SourceAnswer::Given(described) => described,
        };
        let mut description = described.map_err(|error| {
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
        // A topic the patterns found that this cluster holds already, or another link mirrors, stays out (a
        // link warning); a named one refuses the link, as below.
        let mut skipped = BTreeMap::new();
        description.partitions.retain(|topic, _| {
            if named.contains(topic) {
                return true;
            }
            match self.discovery_conflict(&existing, topic) {
                Some(why) => {
                    skipped.insert(topic.clone(), why);
                    false
                }
                None => true,
            }
        });
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
                        "topic {topic} has {count} partitions here and {partitions} at the source: `mirror \
                         reverse` needs the same count ({})",
                        if count < partitions as usize {
                            "add the partitions here first: kafka-topics --alter --partitions"
                        } else {
                            "a partition only this cluster has cannot be mirrored into: delete the topic here, \
                             losing what only this cluster holds, and `mirror create` the link"
                        }
                    ))))
                }
                (Some(_), true) => {}
            }
        }
        if reverse {
            for (topic, &partitions) in &description.partitions {
                for partition in 0..partitions as i32 {
                    adoptable(node, topic, partition, &description.cluster_id)
                        .await
                        .map_err(no_status)?;
                }
            }
        }
        let mut config_warnings = Vec::new();
        for (topic, &partitions) in &description.partitions {
            if !existing.contains_key(topic) {
                // A new link's settings are the defaults: every config but KIP-1279's exclusions is taken.
                let configs = super::source_topics::configs_of(&description.configs, topic);
                let (overrides, warning) =
                    MirrorLinks::initial_configs(&LinkSettings::default(), configs.as_ref());
                node.create_read_only_topic_with_configs(topic, partitions, overrides)
                    .await
                    .map_err(|error| {
                        no_status(MirrorError::InvalidRequest(format!(
                            "topic {topic} cannot be created: {}",
                            error.name()
                        )))
                    })?;
                config_warnings.push((topic.clone(), warning));
            }
        }
        let link = LinkRecord {
            name: name.clone(),
            source,
            topics: description
                .partitions
                .iter()
                .map(|(topic, &partitions)| {
                    (
                        topic.clone(),
                        TopicRecord {
                            partitions,
                            failover_requested: false,
                            source_topic_id: description.topic_ids.get(topic).copied(),
                        },
                    )
                })
                .collect(),
            source_cluster_id: description.cluster_id,
            source_config,
            settings: LinkSettings {
                include: asked.include,
                exclude: if filter.discovers() { exclude } else { Vec::new() },
                ..LinkSettings::default()
            },
            synced_acls: Vec::new(),
        };
        let mut recorded = self.links.clone();
        recorded.push(link.clone());
        node.put_mirror_links(&recorded)
            .await
            .map_err(|error| no_status(error.into()))?;
        self.links = recorded;
        self.note_skipped(&link.name, skipped);
        for (topic, warning) in config_warnings {
            self.note_config_warning(&link.name, &topic, warning);
        }
        for (topic, record) in &link.topics {
            for partition in 0..record.partitions as i32 {
                if let Err(error) = self
                    .start_partition(node, &link, topic, partition, *record, true)
                    .await
                {
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
            let failure_before = super::round_errors::failure_now(&mirrored.driver);
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
            mirrored.count_failure_since(failure_before.as_ref(), super::round_errors::STEP);
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
        let failures_before: Vec<Option<mirror_fsm::Failure>> = selected
            .iter()
            .map(|(_, mirrored)| super::round_errors::failure_now(&mirrored.driver))
            .collect();
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
        for ((_, mirrored), before) in selected.iter_mut().zip(&failures_before) {
            mirrored.count_failure_since(before.as_ref(), super::round_errors::STEP);
        }
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

    /// Removes the link from the registry and its partitions from the links at work, answering with their
    /// status as the link left them; refused while one of them is STOPPING (its failover must complete first:
    /// only a registered link resumes an interrupted STOPPING at the next start).
    async fn delete(&mut self, node: &Node, name: &str) -> Outcome {
        let (link, keys) = self.select(name, &[]).map_err(|error| (error, Vec::new()))?;
        let status = self.status(node, &link, &BTreeSet::new()).await;
        // A failover under way — STOPPING, or FAILED at one of its steps, or asked for and not begun — completes
        // only under a registered link (its retries and the next start resume it): the link cannot go before it.
        let stopping = keys.iter().find(|key| {
            self.partitions.get(*key).is_some_and(|mirrored| {
                let state = mirrored.driver.state();
                let requested = link
                    .topics
                    .get(&key.0)
                    .is_some_and(|record| record.failover_requested);
                state.stop_step().is_some() || (requested && state.kind() != StateKind::Stopped)
            })
        });
        if let Some((topic, partition)) = stopping {
            return Err((
                MirrorError::InvalidRequest(format!(
                    "{topic}-{partition} is failing over: delete the link once its failover has completed"
                )),
                vec![status],
            ));
        }
        let recorded: Vec<LinkRecord> = self
            .links
            .iter()
            .filter(|entry| entry.name != link.name)
            .cloned()
            .collect();
        if let Err(error) = node.put_mirror_links(&recorded).await {
            return Err((error.into(), vec![status]));
        }
        self.links = recorded;
        for key in &keys {
            self.partitions.remove(key);
        }
        self.warnings.retain(|(name, _), _| *name != link.name);
        self.config_warnings.retain(|(name, _), _| *name != link.name);
        self.acl_warnings.remove(&link.name);
        self.acl_no_authorizer.remove(&link.name);
        self.activity.remove(&link.name);
        self.skipped.remove(&link.name);
        // A round fetched ahead from the source may name the deleted partitions: dropped, the next step fetches.
        if let Some((_, task)) = self.prefetched.remove(&link.source) {
            task.abort();
        }
        Ok(vec![status])
    }

    /// Changes the link's settings ([`super::link_config`]): the change is checked whole, recorded, and in effect
    /// from the next step (the link's source is checked and its groups copied at once); then each mirrored topic
    /// the new exclude patterns match, and not failing over already, is stopped as `Failover` stops it.
    async fn alter(
        &mut self,
        node: &Node,
        name: &str,
        (set, delete): (&BTreeMap<String, String>, &[String]),
        source_config: Option<BTreeMap<String, String>>,
        answer: SourceAnswer,
    ) -> Outcome {
        let (link, _) = self.select(name, &[]).map_err(|error| (error, Vec::new()))?;
        let settings = if source_config.is_some() && set.is_empty() && delete.is_empty() {
            link.settings.clone()
        } else {
            link_config::altered(&link.settings, set, delete).map_err(|error| (error, Vec::new()))?
        };
        if let Some(new_config) = &source_config {
            self.check_new_client(&link, new_config, answer)
                .await
                .map_err(|error| (error, Vec::new()))?;
            self.reconfigure_source(&link, new_config)
                .map_err(|error| (error, Vec::new()))?;
        }
        let patterns =
            Patterns::new(&settings.include, &settings.exclude).map_err(|error| (error, Vec::new()))?;
        // Only exclude patterns the operator sets now stop topics: the implicit `__.*` that include patterns
        // bring never stops a topic the link was given by name.
        let excluded: Vec<String> = if set.contains_key(link_config::TOPICS_EXCLUDE) {
            link.topics
                .iter()
                .filter(|(topic, record)| !record.failover_requested && patterns.excludes(topic))
                .map(|(topic, _)| topic.clone())
                .collect()
        } else {
            Vec::new()
        };
        let mut recorded = self.links.clone();
        for record in &mut recorded {
            if record.name == name {
                record.settings = settings.clone();
            }
            // Every link to the source takes the new client settings: they share its connections.
            if let Some(new_config) = source_config.as_ref().filter(|_| record.source == link.source) {
                record.source_config = new_config.clone();
            }
        }
        if let Err(error) = node.put_mirror_links(&recorded).await {
            if source_config.is_some() {
                // Not recorded: the source is reached as before.
                let _ = self.sources.configure_client(&link.source, &link.source_config);
            }
            return Err((error.into(), Vec::new()));
        }
        self.links = recorded;
        let now = node.now_ms();
        let affected: Vec<LinkRecord> = self
            .links
            .iter()
            .filter(|other| other.name == name || (source_config.is_some() && other.source == link.source))
            .cloned()
            .collect();
        for affected in &affected {
            self.apply_to_running(affected, source_config.is_some(), now);
        }
        self.topic_check_due.remove(name);
        self.group_sync_due.remove(name);
        // The new patterns decide what is left out: the last check's list is stale; a setting gone takes its
        // warnings with it.
        self.skipped.remove(name);
        if settings.include.is_empty() {
            self.warnings.remove(&(name.to_owned(), String::new()));
        }
        if settings.acl_include.is_empty() {
            self.acl_warnings.remove(name);
            self.acl_no_authorizer.remove(name);
        }
        tracing::info!(link = %name, set = ?set, delete = ?delete, "mirror link configuration changed");
        if !excluded.is_empty() {
            tracing::info!(link = %name, topics = ?excluded, "excluded by the link's new patterns: stopped");
            if let Err((error, statuses)) = self.failover(node, name, &excluded).await {
                let error = MirrorError::Failed(format!(
                    "the configuration change is recorded and in effect, but stopping the topics it excludes \
                     ({}) did not complete: {error} (each resumes STOPPING at its next retry)",
                    excluded.join(", ")
                ));
                return Err((error, statuses));
            }
        }
        let (link, _) = self.select(name, &[]).map_err(|error| (error, Vec::new()))?;
        Ok(vec![self.status_with_config(node, &link).await])
    }

    /// The link's status with its configuration, every key.
    async fn status_with_config(&self, node: &Node, link: &LinkRecord) -> LinkStatus {
        let mut status = self.status(node, link, &BTreeSet::new()).await;
        status.config = link_config::entries(&link.settings, self.node_intervals());
        status
    }

    /// Fetches until every selected partition has caught up with its source's last stable offset (the source
    /// answering), then fails them over; gives up after `timeout_ms`, failing nothing over.
    async fn promote(&mut self, node: &Node, name: &str, topics: &[String], timeout_ms: u64) -> Outcome {
        let (link, keys) = self.select(name, topics).map_err(|error| (error, Vec::new()))?;
        let deadline = node
            .now_ms()
            .saturating_add(i64::try_from(timeout_ms).unwrap_or(i64::MAX));
        let selected: BTreeSet<String> = topics.iter().cloned().collect();
        // The lag is judged on the source's answers to rounds fetched after the promote began: the first round
        // applied may have been fetched ahead before it, so two rounds must land (a last stable offset from before
        // the promote, e.g. from before a pause, would let a mirror that is behind fail over).
        let answers_at_start: BTreeMap<PartitionKey, u64> = keys
            .iter()
            .filter_map(|key| Some((key.clone(), self.partitions.get(key)?.answers)))
            .collect();
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
            if self.stopping.load(std::sync::atomic::Ordering::Relaxed) {
                let status = self.status(node, &link, &selected).await;
                return Err((
                    MirrorError::Failed(
                        "the broker is shutting down: nothing was failed over; promote again after the restart"
                            .to_owned(),
                    ),
                    vec![status],
                ));
            }
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
                let fresh = answers_at_start
                    .get(key)
                    .is_some_and(|start| mirrored.answers >= start.saturating_add(2));
                let caught_up = fresh
                    && mirrored
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
                let (end, truncations) = log_end_and_truncations(node, &key).await.unwrap_or((-1, 0));
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
                        truncations,
                        offsets_mirrored: 0,
                        batches_mirrored: 0,
                        failed_rounds: 0,
                        failed_rounds_by_error: BTreeMap::new(),
                        retries: 0,
                        bytes_fetched: 0,
                        offsets_fetched: 0,
                        bytes_mirrored: 0,
                        error: Some("not started".to_owned()),
                    });
                    continue;
                };
                let state = mirrored.driver.state();
                let kind = state.kind();
                let stable = mirrored.source_lso;
                let following = matches!(kind, StateKind::Mirroring | StateKind::Paused | StateKind::Failed)
                    && state.stop_step().is_none();
                // A FAILED partition cannot ask its source: its lag is unknown, never the last answer's.
                let lag = stable
                    .filter(|_| following && kind != StateKind::Failed)
                    .map(|stable| (stable - end).max(0));
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
                    truncations,
                    offsets_mirrored: mirrored.progress.offsets,
                    batches_mirrored: mirrored.progress.batches,
                    failed_rounds: mirrored.progress.failed_rounds.values().sum(),
                    failed_rounds_by_error: mirrored
                        .progress
                        .failed_rounds
                        .iter()
                        .map(|(name, count)| ((*name).to_owned(), *count))
                        .collect(),
                    retries: mirrored.progress.retries,
                    bytes_fetched: mirrored.progress.bytes_fetched,
                    offsets_fetched: mirrored.progress.offsets_fetched,
                    bytes_mirrored: mirrored.progress.bytes_mirrored,
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
            source_config: mirror_admin::shown_settings(&link.source_config),
            include: link.settings.include.clone(),
            exclude: link.settings.exclude.clone(),
            partitions,
            warnings: self.warnings_of(&link.name),
            config: Vec::new(),
            activity: self.activity.get(&link.name).cloned().unwrap_or_default(),
        }
    }
}

/// An action's links, or its failure with the links' status as far as it got.
type Outcome = Result<Vec<LinkStatus>, (MirrorError, Vec<LinkStatus>)>;

/// The names of KIP-1279's prototype for our states (PREPARING aligns the log with the source: its
/// LOG_TRUNCATION).
pub(super) fn state_name(state: &MirrorState) -> &'static str {
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

/// Whether `reverse` may adopt `topic`/`partition` as a mirror of the cluster `source_cluster_id`: a partition
/// never mirrored, stopped, or left by a deleted link while it mirrored that same cluster (it goes on from where
/// it was). One that a deleted link left mirroring another cluster is refused, as is one in a failover.
async fn adoptable(
    node: &Node,
    topic: &str,
    partition: i32,
    source_cluster_id: &str,
) -> Result<(), MirrorError> {
    let slot = super::links::slot(node, topic, partition).await?;
    let mut guard = slot.lock().await;
    let log = super::links::leader(&mut guard, topic, partition)?;
    let Some(bytes) = log
        .metadata(mirror_fsm::driver::STATE_KEY)
        .await
        .map_err(|error| {
            MirrorError::Failed(format!(
                "reading the mirror state of {topic}-{partition}: {error}"
            ))
        })?
    else {
        return Ok(());
    };
    let state: MirrorState = serde_json::from_slice(&bytes).map_err(|error| {
        MirrorError::Failed(format!(
            "the mirror state of {topic}-{partition} is corrupt: {error}"
        ))
    })?;
    if state.kind() == StateKind::Stopped {
        return Ok(());
    }
    if state.stop_step().is_some() {
        return Err(MirrorError::InvalidRequest(format!(
            "{topic}-{partition} is in the middle of a failover: it must complete first"
        )));
    }
    match state.source_cluster_id() {
        Some(mirrored) if mirrored != source_cluster_id => Err(MirrorError::InvalidRequest(format!(
            "{topic}-{partition} still mirrors cluster {mirrored} (its link was deleted without a failover): \
             reverse it from that cluster and fail it over first"
        ))),
        _ => Ok(()),
    }
}

/// The last mirrored offset `topic`/`partition`'s log recorded for the cluster `source_cluster_id`.
async fn last_mirrored(
    node: &Node,
    source_cluster_id: &str,
    topic: &str,
    partition: i32,
) -> Result<Option<i64>, MirrorError> {
    let slot = super::links::slot(node, topic, partition).await?;
    let mut guard = slot.lock().await;
    let log = super::links::leader(&mut guard, topic, partition)?;
    Ok(mirror_fsm::last_mirrored_offset(log, source_cluster_id).await?)
}
