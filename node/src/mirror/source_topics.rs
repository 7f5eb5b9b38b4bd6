//! The source's topics watched while a link mirrors them (issue 50, item 2): every
//! [`SOURCE_TOPIC_CHECK_INTERVAL_MS`] (or the interval the owner set) each still-mirrored topic is described at its
//! link's source and its partition count compared with the link's. A topic that gained partitions at the source
//! (an operator's `kafka-topics --alter --partitions`) is mirrored only in the partitions the link was created
//! with; until links mirror added partitions too, the difference is never silent: `describe` carries a warning for
//! the link, and `serve` logs it once (WARN). A count that went down (the topic deleted and created again) is
//! reported the same way. A topic that stopped being mirrored (failed over, paused) loses its warning.
//!
//! The check never holds the links up: with fetch-ahead on (as `serve` runs them) the descriptions are asked by a
//! task of their own, each under [`DESCRIBE_DEADLINE`], and the next step that finds the task done applies them; a
//! deterministic caller (fetch-ahead off: the simulator) asks inline. A source that cannot answer changes nothing:
//! the last warning stands, and the check runs again at the next interval. Each topic is asked alone, so one
//! deleted at the source does not hide the others.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use mirror_fsm::Sources;

use super::links::MirrorLinks;
use crate::Node;

/// How often a link compares its topics' partition counts with the source's (KIP-1279 discusses 30 s for its
/// metadata refresh, `mirror.metadata.refresh.interval.ms`).
pub const SOURCE_TOPIC_CHECK_INTERVAL_MS: i64 = 30_000;

/// The most one topic's description may take in a background check.
pub const DESCRIBE_DEADLINE: Duration = Duration::from_secs(15);

/// One topic to compare: (link, source, topic, the link's partition count).
type Asked = (String, String, String, u32);

/// What a check found: each topic asked with the source's partition count (`None`: no answer).
pub(super) type Found = Vec<(Asked, Option<u32>)>;

impl MirrorLinks {
    /// Applies a finished background check, or starts one once the interval has passed (see the module docs).
    pub(super) async fn check_source_topics(&mut self, node: &Node) {
        if let Some(task) = self.topic_check.take() {
            if !task.is_finished() {
                self.topic_check = Some(task);
                return;
            }
            if let Ok(found) = task.await {
                self.apply_source_topics(found);
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
        if self.fetch_ahead {
            let sources = Arc::clone(&self.sources);
            self.topic_check = Some(tokio::spawn(describe_each(
                sources,
                asked,
                Some(DESCRIBE_DEADLINE),
            )));
        } else {
            let found = describe_each(Arc::clone(&self.sources), asked, None).await;
            self.apply_source_topics(found);
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

    /// Records a warning for each topic whose count at the source differs from the link's, and clears the
    /// warning of each that agrees again; a topic without an answer keeps what it had.
    fn apply_source_topics(&mut self, found: Found) {
        for ((link, source, topic, ours), theirs) in found {
            let Some(theirs) = theirs else {
                continue;
            };
            let still_linked = self
                .links
                .iter()
                .any(|record| record.name == link && record.source == source);
            let key = (link.clone(), topic.clone());
            if !still_linked || theirs == ours {
                self.warnings.remove(&key);
                continue;
            }
            let warning = if theirs > ours {
                format!(
                    "topic {topic} has {theirs} partitions at the source and {ours} here: partitions {ours}–{} are \
                     not mirrored",
                    theirs - 1
                )
            } else {
                format!(
                    "topic {topic} has {theirs} partitions at the source and {ours} here: the source's topic is not \
                     the one this link was created from"
                )
            };
            if self.warnings.get(&key) != Some(&warning) {
                tracing::warn!(link = %link, source = %source, "{warning}");
                self.warnings.insert(key, warning);
            }
        }
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
        let count = answer
            .and_then(Result::ok)
            .and_then(|description| description.partitions.get(&entry.2).copied());
        found.push((entry, count));
    }
    found
}
