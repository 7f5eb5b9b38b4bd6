//! The source's topics watched while a link mirrors them (issue 50, item 2; KIP-1279's metadata refresh): every
//! [`SOURCE_TOPIC_CHECK_INTERVAL_MS`] (or the interval the owner set) each still-mirrored topic is described at its
//! link's source and its partition count compared with the link's.
//!
//! - **Partitions added at the source** (an operator's `kafka-topics --alter --partitions`) are added here too,
//!   read-only, recorded in the link, and mirrored from the source's log start like a new link's — as long as no
//!   partition of the topic has begun a failover, and the answer came from the link's own source cluster (its
//!   cluster id). A partition is created before the link records it, so a crash in between leaves an empty
//!   read-only partition the next check adopts. `serve` logs each growth (INFO). A growth that fails (storage) is a
//!   link warning, tried again at the next check.
//! - **Topics a link's include patterns select** (ADR 0059; KIP-1279's discovery): each check also lists the
//!   link's source (Metadata for every topic) and adds each selected topic the link does not mirror yet — created
//!   here read-only with the source's partition count, recorded with its topic id, mirrored from the source's log
//!   start. A selected topic this cluster holds already, or another link mirrors, stays out with a link warning; a
//!   listing that fails is a link warning and removes nothing. A topic the link failed over is never added again.
//! - **A count that went down** (the topic deleted and created again at the source) is never followed: it is a
//!   warning on the link in `describe` (JSON `warnings`), logged once at WARN.
//!
//! A topic that stopped being mirrored (failed over, paused) loses its warning.
//!
//! The check never holds the links up: with rounds in flight (as `serve` runs them) the descriptions are asked by
//! a task of their own, each under [`DESCRIBE_DEADLINE`], and the next step that finds the task done applies them;
//! a deterministic caller (rounds in flight off: the simulator, whose runtime has no timers) asks inline. A source that cannot answer changes nothing:
//! the last warning stands, and the check runs again at the next interval. Each topic is asked alone, so one
//! deleted at the source does not hide the others.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use mirror_fsm::{topic_id_text, Event, FetchError, SourceAcls, SourceConfigs, Sources, StateKind};

use super::error::MirrorError;
use super::filters::Patterns;
use super::links::MirrorLinks;
use super::registry::{LinkRecord, LinkSettings, TopicRecord};
use super::{acl_sync, config_sync};
use crate::Node;
use kafka_auth::acl::AclBinding;
use topic_config::Overrides;

/// How often a link compares its topics' partition counts with the source's (KIP-1279 discusses 30 s for its
/// metadata refresh, `mirror.metadata.refresh.interval.ms`).
pub const SOURCE_TOPIC_CHECK_INTERVAL_MS: i64 = 30_000;

/// The most one topic's description may take in a background check.
pub const DESCRIBE_DEADLINE: Duration = Duration::from_secs(15);

/// One topic to compare: (link, source, topic, the link's partition count).
type Asked = (String, String, String, u32);

/// What a check found: each topic asked with what the source answered (`None`: no answer), and what each
/// discovering link's source listing gave.
pub(super) struct Found {
    /// The links the check was for.
    checked: Vec<String>,
    compared: Vec<(Asked, Option<Answer>)>,
    discovered: Vec<Discovery>,
    /// Each ACL-syncing link (name, source) with what its source said of its ACLs.
    acls: Vec<(String, String, SourceAcls)>,
}

/// What one check asks the sources.
struct Questions {
    /// The links the check is for.
    checked: Vec<String>,
    /// Topics whose partition count, id and configs are compared.
    asked: Vec<Asked>,
    /// Links whose include patterns discover.
    discover: Vec<Discover>,
    /// Links (name, source) whose ACL rules sync.
    acl_links: Vec<(String, String)>,
}

/// One link whose include patterns discover: what to ask its source.
struct Discover {
    link: String,
    source: String,
    filter: Patterns,
    /// Topics not to describe: those some link records.
    known: BTreeSet<String>,
}

/// What one discovering link's source listing gave.
struct Discovery {
    link: String,
    source: String,
    /// The names the patterns select (never an internal topic), each new one described alone (`None`: no
    /// answer, or not described because it is known) — or why the source could not be listed.
    selected: Result<Vec<(String, Option<Answer>)>, String>,
}

/// A source's answer for one topic.
pub(super) struct Answer {
    /// The answering cluster's id.
    cluster_id: String,
    /// The topic's partition count there.
    partitions: u32,
    /// The topic's id there, if the source has topic ids.
    topic_id: Option<[u8; 16]>,
    /// The topic's overrides there (`None`: not read; an error: why they could not be).
    configs: Option<Result<BTreeMap<String, String>, String>>,
    /// Why the link may not read the topic there (Kafka's TOPIC_AUTHORIZATION_FAILED to a Fetch: DESCRIBE without
    /// READ), when it may not: the topic is then left out with a link warning until it may, rather than created
    /// here with partitions that would fail at their first fetch and stay FAILED.
    unreadable: Option<String>,
}

/// What a source description says of `topic`'s configs (`None`: not read; an error: why they could not be).
pub(super) fn configs_of(
    configs: &SourceConfigs,
    topic: &str,
) -> Option<Result<BTreeMap<String, String>, String>> {
    match configs {
        SourceConfigs::NotRead => None,
        SourceConfigs::Read(configs) => configs.get(topic).cloned().map(Ok),
        SourceConfigs::Failed(why) => Some(Err(why.clone())),
    }
}

impl MirrorLinks {
    /// Applies a finished background check, or starts one once the interval has passed (see the module docs).
    pub(super) async fn check_source_topics(&mut self, node: &Node) {
        if let Some(task) = self.topic_check.take() {
            if !task.is_finished() {
                self.topic_check = Some(task);
                return;
            }
            if let Ok(found) = task.await {
                self.apply_source_topics(node, found).await;
            }
        }
        let node_interval = self.topic_check_interval_ms;
        let due = due_links(&self.links, &mut self.topic_check_due, node.now_ms(), |link| {
            link.settings.metadata_refresh_interval_ms.or(node_interval)
        });
        if due.is_empty() {
            return;
        }
        let asked = self.topics_to_check(&due);
        let discover = self.links_to_discover(&due);
        let acl_links: Vec<(String, String)> = self
            .links
            .iter()
            .filter(|link| due.contains(&link.name) && !link.settings.acl_include.is_empty())
            .map(|link| (link.name.clone(), link.source.clone()))
            .collect();
        let questions = Questions {
            checked: due.iter().cloned().collect(),
            asked,
            discover,
            acl_links,
        };
        if self.rounds_in_flight {
            let sources = Arc::clone(&self.sources);
            self.topic_check = Some(tokio::spawn(ask_sources(
                sources,
                questions,
                Some(DESCRIBE_DEADLINE),
            )));
        } else {
            let found = ask_sources(Arc::clone(&self.sources), questions, None).await;
            self.apply_source_topics(node, found).await;
        }
    }

    /// Every due link with include patterns, with what it need not describe. A topic of the link failed over (by
    /// an operator, or stopped by an exclude pattern) stays the link's: it is never added again.
    fn links_to_discover(&self, due: &BTreeSet<String>) -> Vec<Discover> {
        // Topics some link records are not described again (their conflict needs no answer); a topic held here
        // that no link records is, so that one this process created and did not record can be taken back.
        let recorded: BTreeSet<&String> = self.links.iter().flat_map(|link| link.topics.keys()).collect();
        self.links
            .iter()
            .filter(|link| due.contains(&link.name))
            .filter_map(|link| {
                let filter = Patterns::new(&link.settings.include, &link.settings.exclude).ok()?;
                filter.discovers().then(|| Discover {
                    link: link.name.clone(),
                    source: link.source.clone(),
                    filter,
                    known: recorded.iter().map(|topic| (*topic).clone()).collect(),
                })
            })
            .collect()
    }

    /// Every still-mirrored topic of the `due` links, with the link's partition count; the warnings of their
    /// topics no longer mirrored are dropped.
    fn topics_to_check(&mut self, due: &BTreeSet<String>) -> Vec<Asked> {
        let mut asked = Vec::new();
        let mut watched: BTreeSet<(String, String)> = BTreeSet::new();
        for link in self.links.iter().filter(|link| due.contains(&link.name)) {
            let mirrored: BTreeSet<&String> = self
                .partitions
                .iter()
                .filter(|((topic, _), partition)| {
                    link.topics.contains_key(topic) && partition.driver.fetching()
                })
                .map(|((topic, _), _)| topic)
                .collect();
            for topic in mirrored {
                if let Some(record) = link.topics.get(topic) {
                    watched.insert((link.name.clone(), topic.clone()));
                    asked.push((
                        link.name.clone(),
                        link.source.clone(),
                        topic.clone(),
                        record.partitions,
                    ));
                }
            }
        }
        // A link's own warning (its source listing; an empty topic) stays until its next listing says otherwise.
        // A topic failed over has its own configs from then on: nothing to say about them.
        let links = &self.links;
        self.config_warnings.retain(|(link, topic), _| {
            links.iter().any(|record| {
                record.name == *link
                    && record
                        .topics
                        .get(topic)
                        .is_some_and(|topic| !topic.failover_requested)
            })
        });
        self.warnings.retain(|key, _| {
            !due.contains(&key.0)
                || watched.contains(key)
                || (key.1.is_empty() && self.links.iter().any(|link| link.name == key.0))
        });
        asked
    }

    /// Grows each topic whose count at the source went up (see the module docs) and records a warning for each
    /// whose count went down or could not grow; clears the warning of each that agrees again. A topic without an
    /// answer keeps what it had.
    async fn apply_source_topics(&mut self, node: &Node, found: Found) {
        let now = node.now_ms();
        for link in &found.checked {
            self.activity.entry(link.clone()).or_default().last_check_ms = Some(now);
        }
        self.apply_discoveries(node, found.discovered).await;
        for (link, source, acls) in found.acls {
            self.follow_source_acls(node, &link, &source, acls).await;
        }
        for ((link, source, topic, ours), answer) in found.compared {
            let Some(Answer {
                cluster_id,
                partitions: theirs,
                topic_id,
                configs,
                ..
            }) = answer
            else {
                continue;
            };
            let Some(record) = self.link_record(&link, &source) else {
                self.warnings.remove(&(link, topic));
                continue;
            };
            let key = (link.clone(), topic.clone());
            let expected_id = record.topics.get(&topic).and_then(|topic| topic.source_topic_id);
            if let Some((expected, found)) = expected_id
                .zip(topic_id)
                .filter(|(expected, found)| expected != found)
            {
                let warning = format!(
                    "topic {topic} at the source has topic id {}, not {} as when this link was created: it was \
                     deleted and created again (UNKNOWN_TOPIC_ID); its partitions here are FAILED and keep what they mirrored",
                    topic_id_text(found),
                    topic_id_text(expected)
                );
                self.fail_topic(node, &topic, &warning).await;
                if self.warnings.get(&key) != Some(&warning) {
                    tracing::warn!(link = %link, source = %source, "{warning}");
                    self.warnings.insert(key, warning);
                }
                continue;
            }
            // Only while the topic is mirrored now: one failed over since the check was asked has its own configs.
            let mirrored_now = record
                .topics
                .get(&topic)
                .is_some_and(|entry| !entry.failover_requested);
            if cluster_id == record.source_cluster_id && mirrored_now {
                self.follow_source_configs(node, &record, &topic, configs.as_ref())
                    .await;
            }
            // The link's count may have grown since the check was asked.
            let ours = record.topics.get(&topic).map_or(ours, |topic| topic.partitions);
            if theirs == ours {
                self.warnings.remove(&key);
                continue;
            }
            let warning = if theirs < ours {
                format!(
                    "topic {topic} has {theirs} partitions at the source and {ours} here: the source's topic is not \
                     the one this link was created from"
                )
            } else if cluster_id != record.source_cluster_id {
                format!(
                    "topic {topic} has {theirs} partitions at {source} and {ours} here, but {source} is cluster \
                     {cluster_id}, not the link's {}: nothing added",
                    record.source_cluster_id
                )
            } else if let Some(blocker) = self.growth_blocker(&record, &topic) {
                format!(
                    "topic {topic} has {theirs} partitions at the source and {ours} here: partitions {ours}–{} are \
                     not mirrored ({blocker})",
                    theirs - 1
                )
            } else {
                match self.grow_topic(node, &record, &topic, theirs).await {
                    Ok(()) => {
                        tracing::info!(
                            link = %link,
                            source = %source,
                            "topic {topic} grew from {ours} to {theirs} partitions at the source: partitions \
                             {ours}–{} added here and mirrored",
                            theirs - 1
                        );
                        self.warnings.remove(&key);
                        continue;
                    }
                    Err(error) => format!(
                        "topic {topic} has {theirs} partitions at the source and {ours} here: adding partitions \
                         {ours}–{} failed ({error}); tried again at the next check",
                        theirs - 1
                    ),
                }
            };
            if self.warnings.get(&key) != Some(&warning) {
                tracing::warn!(link = %link, source = %source, "{warning}");
                self.warnings.insert(key, warning);
            }
        }
    }

    /// Adds to each discovering link the new topics its patterns selected at the source: created here read-only
    /// with the source's partition count, recorded in the link with their topic id, and mirrored from the source's
    /// log start. A topic this cluster holds already, or another link mirrors, or that the link's own source cluster
    /// did not describe, stays out with a link warning; a listing that failed is a link warning and changes nothing.
    async fn apply_discoveries(&mut self, node: &Node, discovered: Vec<Discovery>) {
        for Discovery {
            link,
            source,
            selected,
        } in discovered
        {
            let Some(record) = self.link_record(&link, &source) else {
                continue;
            };
            let selected = match selected {
                Ok(selected) => selected,
                Err(error) => {
                    let warning = format!(
                        "the source's topics could not be listed ({error}): the include patterns add nothing \
                         until it answers"
                    );
                    self.note_listing_failed(&link, Some(warning));
                    continue;
                }
            };
            self.note_listing_failed(&link, None);
            // The link's patterns now: an `alter` since the check was asked decides.
            let Ok(patterns) = Patterns::new(&record.settings.include, &record.settings.exclude) else {
                continue;
            };
            let existing = node.topic_partitions().await;
            let mut skipped = BTreeMap::new();
            for (topic, answer) in selected {
                if !patterns.selects(&topic) {
                    continue;
                }
                if self
                    .links
                    .iter()
                    .any(|other| other.name == link && other.topics.contains_key(&topic))
                {
                    continue;
                }
                // A topic this process created for the link and did not get to record (a crash, a registry write
                // that failed): read-only, empty, no link's — taken back rather than left owned by nothing.
                let leftover = existing.contains_key(&topic)
                    && !self.links.iter().any(|other| other.topics.contains_key(&topic))
                    && empty_read_only(node, &topic).await;
                if !leftover {
                    if let Some(why) = self.discovery_conflict(&existing, &topic) {
                        skipped.insert(topic, why);
                        continue;
                    }
                }
                // Not described (no answer within the deadline): asked again at the next check.
                let Some(answer) = answer else {
                    continue;
                };
                if leftover && existing.get(&topic).copied() != usize::try_from(answer.partitions).ok() {
                    skipped.insert(
                        topic,
                        "an empty read-only topic of that name, with another partition count, exists on this cluster"
                            .to_owned(),
                    );
                    continue;
                }
                if let Some(why) = &answer.unreadable {
                    skipped.insert(
                        topic,
                        format!("added at the first check after the link may read it: {why}"),
                    );
                    continue;
                }
                if answer.cluster_id != record.source_cluster_id {
                    skipped.insert(
                        topic,
                        format!(
                            "{source} answered as cluster {}, not the link's {}",
                            answer.cluster_id, record.source_cluster_id
                        ),
                    );
                    continue;
                }
                match self.add_topic(node, &link, &topic, &answer, !leftover).await {
                    Ok(()) => {
                        self.activity.entry(link.clone()).or_default().topics_discovered += 1;
                        tracing::info!(
                            link = %link,
                            source = %source,
                            "topic {topic} ({} partitions) matches the link's include patterns: created here and \
                             mirrored",
                            answer.partitions
                        );
                    }
                    Err(error) => {
                        skipped.insert(
                            topic,
                            format!("adding it failed ({error}); tried again at the next check"),
                        );
                    }
                }
            }
            self.note_skipped(&link, skipped);
        }
    }

    /// Why a topic a link's patterns selected cannot be mirrored here, if it cannot: a name this cluster keeps for
    /// itself, a topic it holds already, a topic another link mirrors.
    pub(super) fn discovery_conflict(
        &self,
        existing: &BTreeMap<String, usize>,
        topic: &str,
    ) -> Option<String> {
        if crate::node::reserved_topic_name(topic).is_some() {
            return Some("its name is one of this cluster's internal topics".to_owned());
        }
        if let Some(other) = self.links.iter().find(|link| link.topics.contains_key(topic)) {
            return Some(format!("link {:?} mirrors it", other.name));
        }
        existing
            .contains_key(topic)
            .then(|| "a topic of that name exists on this cluster".to_owned())
    }

    /// Records the topics a link's patterns selected and left out, with why (replacing what the last check
    /// recorded); each new one is logged once at WARN.
    pub(super) fn note_skipped(&mut self, link: &str, skipped: BTreeMap<String, String>) {
        let before = self.skipped.remove(link).unwrap_or_default();
        for (topic, why) in &skipped {
            if before.get(topic) != Some(why) {
                tracing::warn!(link = %link, "topic {topic} matches the link's include patterns and is not mirrored: {why}");
            }
        }
        if !skipped.is_empty() {
            self.skipped.insert(link.to_owned(), skipped);
        }
    }

    /// Records (or clears, with `None`) why a link's source could not be listed; logged once at WARN.
    fn note_listing_failed(&mut self, link: &str, warning: Option<String>) {
        note(
            &mut self.warnings,
            (link.to_owned(), String::new()),
            link,
            warning,
        );
    }

    /// Creates the mirror topic `topic` of the link `link` (unless `create` is false: a leftover taken back), records
    /// it, and starts its partitions. The topic comes before the record, as [`Self::grow_topic`] adds partitions: a
    /// crash in between leaves an empty read-only topic no link records, which the next check takes back.
    async fn add_topic(
        &mut self,
        node: &Node,
        link: &str,
        topic: &str,
        answer: &Answer,
        create: bool,
    ) -> Result<(), MirrorError> {
        if create {
            let settings = self
                .links
                .iter()
                .find(|record| record.name == link)
                .map(|record| record.settings.clone())
                .unwrap_or_default();
            let (overrides, warning) = Self::initial_configs(&settings, answer.configs.as_ref());
            node.create_read_only_topic_with_configs(topic, answer.partitions, overrides)
                .await
                .map_err(|error| MirrorError::Failed(format!("the node refused: {}", error.name())))?;
            self.note_config_warning(link, topic, warning);
        }
        let entry = TopicRecord {
            partitions: answer.partitions,
            failover_requested: false,
            source_topic_id: answer.topic_id,
        };
        let mut recorded = self.links.clone();
        let Some(record) = recorded.iter_mut().find(|record| record.name == link) else {
            return Ok(());
        };
        record.topics.insert(topic.to_owned(), entry);
        let record = record.clone();
        node.put_mirror_links(&recorded).await?;
        self.links = recorded;
        for partition in 0..answer.partitions {
            let partition = i32::try_from(partition).unwrap_or(i32::MAX);
            self.start_partition(node, &record, topic, partition, entry, true)
                .await?;
        }
        Ok(())
    }

    /// The overrides a new mirror topic starts with: its source topic's, as `config_sync` takes them under
    /// `settings` (none when they are not known; the next check brings them), and why any are not taken.
    pub(super) fn initial_configs(
        settings: &LinkSettings,
        configs: Option<&Result<BTreeMap<String, String>, String>>,
    ) -> (Overrides, Option<String>) {
        let outcome = configs.map(|configs| {
            configs
                .as_ref()
                .map(|source| config_sync::synced(settings, &BTreeMap::new(), source))
        });
        match outcome {
            None => (Overrides::default(), None),
            Some(Ok(synced)) => (
                synced.overrides,
                (!synced.refused.is_empty()).then(|| synced.refused.join("; ")),
            ),
            Some(Err(why)) => (Overrides::default(), Some(not_read(why))),
        }
    }

    /// Makes the mirror topic `topic` of `link` hold its source topic's overrides (`configs`, as a check read them):
    /// see `config_sync`. Nothing changes when they were not read; a failure to read or apply them is a warning.
    async fn follow_source_configs(
        &mut self,
        node: &Node,
        link: &LinkRecord,
        topic: &str,
        configs: Option<&Result<BTreeMap<String, String>, String>>,
    ) {
        let warning = match configs {
            None => return,
            Some(Err(why)) => Some(not_read(why)),
            Some(Ok(source)) => {
                // Computed under the topic configs' lock, so a local change to an excluded config made meanwhile
                // is never undone.
                let mut refused = Vec::new();
                let synced = node
                    .sync_mirror_topic_configs(topic, |local| {
                        let synced = config_sync::synced(&link.settings, local, source);
                        refused = synced.refused;
                        synced.overrides
                    })
                    .await;
                match synced {
                    Ok(Some(overrides)) => {
                        self.activity.entry(link.name.clone()).or_default().config_changes += 1;
                        tracing::info!(
                            link = %link.name,
                            "configs of topic {topic} follow the source: {:?}",
                            overrides.as_map()
                        )
                    }
                    Ok(None) => {}
                    Err(error) => refused.push(format!(
                        "the source's configs could not be recorded here ({}); tried again at the next check",
                        error.message.unwrap_or_else(|| error.error.name().to_owned())
                    )),
                }
                (!refused.is_empty()).then(|| refused.join("; "))
            }
        };
        self.note_config_warning(&link.name, topic, warning);
    }

    /// Records (or clears) why `topic`'s configs do not all follow the source; a new one is logged once at WARN.
    pub(super) fn note_config_warning(&mut self, link: &str, topic: &str, warning: Option<String>) {
        let warning = warning.map(|warning| format!("topic {topic}: {warning}"));
        note(
            &mut self.config_warnings,
            (link.to_owned(), topic.to_owned()),
            link,
            warning,
        );
    }

    /// Makes this cluster hold the source's ACLs that `link`'s rules select (`acl_sync`): those absent here are
    /// created, those the link created before and the source no longer has are deleted, in one durable write;
    /// then the link records what it created. A source without an authorizer has nothing to sync (said once); one
    /// that could not answer changes nothing and is a link warning.
    async fn follow_source_acls(&mut self, node: &Node, link: &str, source: &str, acls: SourceAcls) {
        // The link as it is now: rules cleared (or the link deleted) since the check was asked stop the sync here.
        let Some(record) = self.link_record(link, source) else {
            return;
        };
        if record.settings.acl_include.is_empty() {
            return;
        }
        let Ok(rules) = acl_sync::parse_rules(&record.settings.acl_include) else {
            return;
        };
        let listed = match acls {
            SourceAcls::NotRead => return,
            SourceAcls::NoAuthorizer => {
                if self.acl_no_authorizer.insert(link.to_owned()) {
                    tracing::info!(link = %link, source = %source, "the source has no authorizer: no ACL to sync");
                }
                self.acl_warnings.remove(link);
                return;
            }
            SourceAcls::Failed(why) => {
                self.note_acl_warning(
                    link,
                    Some(format!(
                        "the source's ACLs could not be read ({why}): not synced until they can be (the link's \
                         principal needs DESCRIBE on the source's cluster)"
                    )),
                );
                return;
            }
            SourceAcls::Read { cluster_id, .. } if cluster_id != record.source_cluster_id => {
                self.note_acl_warning(
                    link,
                    Some(format!(
                        "{source} answered as cluster {cluster_id}, not the link's {}: its ACLs are not synced",
                        record.source_cluster_id
                    )),
                );
                return;
            }
            SourceAcls::Read { acls, .. } => acls,
        };
        self.acl_no_authorizer.remove(link);
        let (wanted, invalid) = acl_sync::selected(&rules, &listed);
        let local = node.acls().await;
        let changes = acl_sync::changes(&wanted, &local, &record.synced_acls);
        // Recorded before they are created (what the link is about to create is the link's: a crash in between
        // leaves a record naming bindings absent here, which the next check creates), and removals recorded after
        // they are deleted (a crash in between leaves bindings absent here, which the next check drops from the
        // record): the record never misses a binding the link created, so a revocation at the source is never lost.
        let before: BTreeSet<AclBinding> = record.synced_acls.iter().cloned().collect();
        let claimed: Vec<AclBinding> = before
            .union(&changes.add.iter().cloned().collect())
            .cloned()
            .collect();
        if claimed != record.synced_acls && !self.record_synced_acls(node, link, claimed).await {
            return;
        }
        if !changes.add.is_empty() || !changes.remove.is_empty() {
            if let Err(error) = node.change_acls(&changes.add, &changes.remove).await {
                self.note_acl_warning(
                    link,
                    Some(format!(
                        "the source's ACLs could not be stored here ({error}); tried again at the next check"
                    )),
                );
                return;
            }
            let activity = self.activity.entry(link.to_owned()).or_default();
            activity.acls_created += u64::try_from(changes.add.len()).unwrap_or(u64::MAX);
            activity.acls_deleted += u64::try_from(changes.remove.len()).unwrap_or(u64::MAX);
            tracing::info!(
                link = %link,
                source = %source,
                created = changes.add.len(),
                deleted = changes.remove.len(),
                "ACLs follow the source"
            );
        }
        let current = self
            .links
            .iter()
            .find(|record| record.name == link)
            .map(|record| record.synced_acls.clone())
            .unwrap_or_default();
        if changes.synced != current && !self.record_synced_acls(node, link, changes.synced).await {
            return;
        }
        let warning = (!invalid.is_empty()).then(|| {
            format!(
                "ACLs at the source that are not valid here, not synced: {}",
                invalid.join("; ")
            )
        });
        self.note_acl_warning(link, warning);
    }

    /// Records `synced` as the ACLs `link` created here; false (with a link warning) when the record fails.
    async fn record_synced_acls(&mut self, node: &Node, link: &str, synced: Vec<AclBinding>) -> bool {
        let mut recorded = self.links.clone();
        for entry in &mut recorded {
            if entry.name == link {
                entry.synced_acls = synced.clone();
            }
        }
        match node.put_mirror_links(&recorded).await {
            Ok(()) => {
                self.links = recorded;
                true
            }
            Err(error) => {
                self.note_acl_warning(
                    link,
                    Some(format!(
                        "the synced ACLs could not be recorded ({error}); tried again at the next check"
                    )),
                );
                false
            }
        }
    }

    /// The link `name` as it is now, if it still reaches `source` (a check's answers are applied to it only then).
    fn link_record(&self, name: &str, source: &str) -> Option<LinkRecord> {
        self.links
            .iter()
            .find(|record| record.name == name && record.source == source)
            .cloned()
    }

    /// Records (or clears) why a link's ACLs do not follow its source's; a new one is logged once at WARN.
    fn note_acl_warning(&mut self, link: &str, warning: Option<String>) {
        note(&mut self.acl_warnings, link.to_owned(), link, warning);
    }

    /// Fails every fetching partition of `topic`, not retryably, with `message` (its source's topic was replaced).
    async fn fail_topic(&mut self, node: &Node, topic: &str, message: &str) {
        let keys: Vec<_> = self
            .partitions
            .iter()
            .filter(|((name, _), mirrored)| name == topic && mirrored.driver.fetching())
            .map(|(key, _)| key.clone())
            .collect();
        for key in keys {
            let Some(mirrored) = self.partitions.get_mut(&key) else {
                continue;
            };
            let Ok(slot) = super::links::slot(node, &key.0, key.1).await else {
                continue;
            };
            let mut guard = slot.lock().await;
            let Ok(log) = super::links::leader(&mut guard, &key.0, key.1) else {
                continue;
            };
            let failure_before = super::round_errors::failure_now(&mirrored.driver);
            let failed = mirrored
                .driver
                .handle(
                    log,
                    mirrored.fetcher.as_mut(),
                    Event::Error {
                        message: message.to_owned(),
                        retryable: false,
                        code: None,
                    },
                )
                .await;
            mirrored.count_failure_since(failure_before.as_ref(), super::round_errors::SOURCE_REFUSED);
            if let Err(error) = failed {
                mirrored.error = Some(error.to_string());
            }
        }
    }

    /// Why the link's `topic` cannot grow now, if it cannot: a failover asked for or begun on any of its
    /// partitions (the topic is becoming this cluster's own).
    fn growth_blocker(&self, link: &LinkRecord, topic: &str) -> Option<&'static str> {
        let record = link.topics.get(topic)?;
        let failing_over = record.failover_requested
            || self.partitions.iter().any(|((name, _), mirrored)| {
                let state = mirrored.driver.state();
                name == topic
                    && (matches!(state.kind(), StateKind::Stopping | StateKind::Stopped)
                        || state.stop_step().is_some())
            });
        failing_over.then_some("a failover of the topic has begun")
    }

    /// Adds partitions up to `partitions` to the link's mirror topic `topic` (those the node holds already, from a
    /// growth cut short, are kept), records the new count in the link, and starts each new partition's session.
    async fn grow_topic(
        &mut self,
        node: &Node,
        link: &LinkRecord,
        topic: &str,
        partitions: u32,
    ) -> Result<(), MirrorError> {
        let held = node.topic_partitions().await.get(topic).copied().unwrap_or(0);
        if held < partitions as usize {
            node.add_read_only_partitions(topic, partitions)
                .await
                .map_err(|error| MirrorError::Failed(format!("the node refused: {}", error.name())))?;
        }
        let mut recorded = self.links.clone();
        let mut grown = None;
        for record in &mut recorded {
            if record.name == link.name {
                if let Some(entry) = record.topics.get_mut(topic) {
                    let before = entry.partitions;
                    entry.partitions = partitions;
                    let entry = *entry;
                    grown = Some((record.clone(), before, entry));
                }
            }
        }
        let Some((record, before, entry)) = grown else {
            return Ok(());
        };
        node.put_mirror_links(&recorded).await?;
        self.links = recorded;
        for partition in before..partitions {
            let partition = i32::try_from(partition).unwrap_or(i32::MAX);
            self.start_partition(node, &record, topic, partition, entry, true)
                .await?;
        }
        Ok(())
    }

    /// The warnings recorded for the link `name`, in topic order.
    pub(super) fn warnings_of(&self, name: &str) -> Vec<String> {
        let skipped = self.skipped.get(name).into_iter().flatten().map(|(topic, why)| {
            format!("topic {topic} matches the link's include patterns and is not mirrored: {why}")
        });
        let configs = self
            .config_warnings
            .iter()
            .filter(|((link, _), _)| link == name)
            .map(|(_, warning)| warning.clone());
        self.warnings
            .iter()
            .filter(|((link, _), _)| link == name)
            .map(|(_, warning)| warning.clone())
            .chain(skipped)
            .chain(configs)
            .chain(self.acl_warnings.get(name).cloned())
            .collect()
    }

    /// How often the links compare their topics with the source's (default [`SOURCE_TOPIC_CHECK_INTERVAL_MS`]; 0:
    /// at every step; `None`: never).
    pub fn set_source_topic_check_interval_ms(&mut self, interval_ms: Option<i64>) {
        self.topic_check_interval_ms = interval_ms;
        self.topic_check_due.clear();
    }
}

/// Whether every partition of `topic` here is read-only and holds nothing (a mirror topic created and never
/// written).
async fn empty_read_only(node: &Node, topic: &str) -> bool {
    let count = node.topic_partitions().await.get(topic).copied().unwrap_or(0);
    if count == 0 {
        return false;
    }
    for partition in 0..count {
        let Ok(partition) = i32::try_from(partition) else {
            return false;
        };
        let Some(slot) = node.partition(topic, partition).await else {
            return false;
        };
        let guard = slot.lock().await;
        let Some(replicas) = guard.as_ref() else {
            return false;
        };
        if !replicas.leader.is_read_only() || replicas.leader.log_end_offset() != 0 {
            return false;
        }
    }
    true
}

/// Records `warning` under `key` in `warnings` (logged at WARN when it is new or changed), or clears the key.
fn note<K: Ord>(warnings: &mut BTreeMap<K, String>, key: K, link: &str, warning: Option<String>) {
    match warning {
        Some(warning) => {
            if warnings.get(&key) != Some(&warning) {
                tracing::warn!(link = %link, "{warning}");
                warnings.insert(key, warning);
            }
        }
        None => {
            warnings.remove(&key);
        }
    }
}

/// The warning for a source whose topic configs could not be read.
fn not_read(why: &str) -> String {
    format!("its configs could not be read at the source ({why}): not synced until they can be")
}

/// The links whose periodic work is due at `now` (each at its own interval, from `interval_of`; `None`: never),
/// their next due times moved on in `due`; links gone are forgotten there.
pub(super) fn due_links(
    links: &[LinkRecord],
    due: &mut BTreeMap<String, i64>,
    now: i64,
    interval_of: impl Fn(&LinkRecord) -> Option<i64>,
) -> BTreeSet<String> {
    due.retain(|name, _| links.iter().any(|link| link.name == *name));
    let mut ready = BTreeSet::new();
    for link in links {
        let Some(interval) = interval_of(link) else {
            continue;
        };
        let next = due.entry(link.name.clone()).or_insert(now);
        if now >= *next {
            *next = now.saturating_add(interval);
            ready.insert(link.name.clone());
        }
    }
    ready
}

/// Describes each topic of `asked` alone at its source, and lists each discovering link's source and describes
/// alone each topic its patterns select that is not known yet — each question under `deadline` when one is given.
async fn ask_sources(sources: Arc<dyn Sources>, questions: Questions, deadline: Option<Duration>) -> Found {
    let Questions {
        checked,
        asked,
        discover,
        acl_links,
    } = questions;
    let mut acls = Vec::with_capacity(acl_links.len());
    for (link, source) in acl_links {
        let answer = match deadline {
            Some(deadline) => tokio::time::timeout(deadline, sources.acls(&source))
                .await
                .unwrap_or_else(|_| SourceAcls::Failed(format!("no answer within {deadline:?}"))),
            None => sources.acls(&source).await,
        };
        acls.push((link, source, answer));
    }
    let mut compared = Vec::with_capacity(asked.len());
    for entry in asked {
        let answer = describe_one(sources.as_ref(), &entry.1, &entry.2, deadline).await;
        compared.push((entry, answer));
    }
    let mut discovered = Vec::with_capacity(discover.len());
    for Discover {
        link,
        source,
        filter,
        known,
    } in discover
    {
        let listed = sources.list_topics(&source);
        let listed = match deadline {
            Some(deadline) => tokio::time::timeout(deadline, listed)
                .await
                .unwrap_or_else(|_| Err(FetchError::new(format!("no answer within {deadline:?}"), true))),
            None => listed.await,
        };
        let selected = match listed {
            Ok(listed) => {
                let mut selected = Vec::new();
                for topic in listed {
                    if topic.internal || !filter.selects(&topic.name) {
                        continue;
                    }
                    let answer = if known.contains(&topic.name) {
                        None
                    } else {
                        describe_found(sources.as_ref(), &source, &topic.name, deadline).await
                    };
                    selected.push((topic.name, answer));
                }
                Ok(selected)
            }
            Err(error) => Err(error.to_string()),
        };
        discovered.push(Discovery {
            link,
            source,
            selected,
        });
    }
    Found {
        checked,
        compared,
        discovered,
        acls,
    }
}

/// `topic` described alone at `source`, under `deadline` when one is given; `None` without an answer.
async fn describe_one(
    sources: &dyn Sources,
    source: &str,
    topic: &str,
    deadline: Option<Duration>,
) -> Option<Answer> {
    let topics = [topic.to_owned()];
    let described = within(deadline, sources.describe(source, &topics)).await?.ok()?;
    Some(Answer {
        partitions: described.partitions.get(topic).copied()?,
        topic_id: described.topic_ids.get(topic).copied(),
        configs: configs_of(&described.configs, topic),
        cluster_id: described.cluster_id,
        unreadable: None,
    })
}

/// A topic found at `source`, described as [`describe_one`] does, and whether the link may read it there (fail
/// fast, issue 53 item 6); `None` without an answer to either.
async fn describe_found(
    sources: &dyn Sources,
    source: &str,
    topic: &str,
    deadline: Option<Duration>,
) -> Option<Answer> {
    let mut answer = describe_one(sources, source, topic, deadline).await?;
    let topics = [topic.to_owned()];
    match within(deadline, sources.check_readable(source, &topics)).await? {
        Ok(()) => {}
        Err(refused) if refused.code == Some(super::round_errors::TOPIC_AUTHORIZATION_FAILED) => {
            answer.unreadable = Some(refused.message)
        }
        // Any other error is no answer about the link's rights: asked again at the next check.
        Err(_) => return None,
    }
    Some(answer)
}

/// `question`'s answer, or `None` when `deadline` passed first.
async fn within<T>(deadline: Option<Duration>, question: impl std::future::Future<Output = T>) -> Option<T> {
    match deadline {
        Some(deadline) => tokio::time::timeout(deadline, question).await.ok(),
        None => Some(question.await),
    }
}
