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

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use mirror_fsm::{topic_id_text, Event, Sources, StateKind};

use super::error::MirrorError;
use super::links::MirrorLinks;
use super::registry::LinkRecord;
use crate::Node;

/// How often a link compares its topics' partition counts with the source's (KIP-1279 discusses 30 s for its
/// metadata refresh, `mirror.metadata.refresh.interval.ms`).
pub const SOURCE_TOPIC_CHECK_INTERVAL_MS: i64 = 30_000;

/// The most one topic's description may take in a background check.
pub const DESCRIBE_DEADLINE: Duration = Duration::from_secs(15);

/// One topic to compare: (link, source, topic, the link's partition count).
type Asked = (String, String, String, u32);

/// What a check found: each topic asked with what the source answered (`None`: no answer).
pub(super) type Found = Vec<(Asked, Option<Answer>)>;

/// A source's answer for one topic.
pub(super) struct Answer {
    /// The answering cluster's id.
    cluster_id: String,
    /// The topic's partition count there.
    partitions: u32,
    /// The topic's id there, if the source has topic ids.
    topic_id: Option<[u8; 16]>,
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
        let Some(interval) = self.topic_check_interval_ms else {
            return;
        };
        let now = node.now_ms();
        if now < self.topic_check_due_ms {
            return;
        }
        self.topic_check_due_ms = now.saturating_add(interval);
        let asked = self.topics_to_check();
        if self.rounds_in_flight {
            let sources = Arc::clone(&self.sources);
            self.topic_check = Some(tokio::spawn(describe_each(
                sources,
                asked,
                Some(DESCRIBE_DEADLINE),
            )));
        } else {
            let found = describe_each(Arc::clone(&self.sources), asked, None).await;
            self.apply_source_topics(node, found).await;
        }
    }

    /// Every still-mirrored topic of every link, with the link's partition count; the warnings of topics no
    /// longer mirrored are dropped.
    fn topics_to_check(&mut self) -> Vec<Asked> {
        let mut asked = Vec::new();
        let mut watched: BTreeSet<(String, String)> = BTreeSet::new();
        for link in &self.links {
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
        self.warnings.retain(|key, _| watched.contains(key));
        asked
    }

    /// Grows each topic whose count at the source went up (see the module docs) and records a warning for each
    /// whose count went down or could not grow; clears the warning of each that agrees again. A topic without an
    /// answer keeps what it had.
    async fn apply_source_topics(&mut self, node: &Node, found: Found) {
        for ((link, source, topic, ours), answer) in found {
            let Some(Answer {
                cluster_id,
                partitions: theirs,
                topic_id,
            }) = answer
            else {
                continue;
            };
            let Some(record) = self
                .links
                .iter()
                .find(|record| record.name == link && record.source == source)
                .cloned()
            else {
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
                     deleted and created again; its partitions here are FAILED and keep what they mirrored",
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
            let failed = mirrored
                .driver
                .handle(
                    log,
                    mirrored.fetcher.as_mut(),
                    Event::Error {
                        message: message.to_owned(),
                        retryable: false,
                    },
                )
                .await;
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
        self.warnings
            .iter()
            .filter(|((link, _), _)| link == name)
            .map(|(_, warning)| warning.clone())
            .collect()
    }

    /// How often the links compare their topics with the source's (default [`SOURCE_TOPIC_CHECK_INTERVAL_MS`]; 0:
    /// at every step; `None`: never).
    pub fn set_source_topic_check_interval_ms(&mut self, interval_ms: Option<i64>) {
        self.topic_check_interval_ms = interval_ms;
        self.topic_check_due_ms = 0;
    }
}

/// Describes each topic alone at its source, each under `deadline` when one is given.
async fn describe_each(sources: Arc<dyn Sources>, asked: Vec<Asked>, deadline: Option<Duration>) -> Found {
    let mut found = Vec::with_capacity(asked.len());
    for entry in asked {
        let topics = [entry.2.clone()];
        let described = sources.describe(&entry.1, &topics);
        let answer = match deadline {
            Some(deadline) => tokio::time::timeout(deadline, described).await.ok(),
            None => Some(described.await),
        };
        let answer = answer.and_then(Result::ok).and_then(|description| {
            Some(Answer {
                partitions: description.partitions.get(&entry.2).copied()?,
                topic_id: description.topic_ids.get(&entry.2).copied(),
                cluster_id: description.cluster_id,
            })
        });
        found.push((entry, answer));
    }
    found
}
