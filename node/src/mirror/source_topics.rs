//! The source's topics watched while a link mirrors them (issue 50, item 2): every
//! [`SOURCE_TOPIC_CHECK_INTERVAL_MS`] (or the interval the owner set) a link describes its still-mirrored topics at
//! the source and compares their partition counts with its own. A topic that gained partitions at the source (an
//! operator's `kafka-topics --alter --partitions`) is mirrored only in the partitions the link was created with;
//! until the link mirrors added partitions too, the difference is never silent: `describe` carries a warning for
//! the link, and `serve` logs it once (WARN). A count that went down (the topic deleted and created again) is
//! reported the same way. A source that cannot answer changes nothing: the last warning stands, and the check runs
//! again at the next interval.

use std::collections::BTreeSet;

use super::links::MirrorLinks;
use crate::Node;

/// How often a link compares its topics' partition counts with the source's (KIP-1279 discusses 30 s for its
/// metadata refresh, `mirror.metadata.refresh.interval.ms`).
pub const SOURCE_TOPIC_CHECK_INTERVAL_MS: i64 = 30_000;

impl MirrorLinks {
    /// Describes the still-mirrored topics of every link at its source once the interval has passed, and records
    /// a warning for each topic whose partition count there differs from the link's (cleared once it agrees).
    pub(super) async fn check_source_topics(&mut self, node: &Node) {
        let Some(interval) = self.topic_check_interval_ms else {
            return;
        };
        let now = node.now_ms();
        if now < self.topic_check_due_ms {
            return;
        }
        self.topic_check_due_ms = now.saturating_add(interval);
        for link in self.links.clone() {
            let mirrored: BTreeSet<String> = self
                .partitions
                .iter()
                .filter(|((topic, _), partition)| {
                    link.topics.contains_key(topic) && partition.driver.fetching()
                })
                .map(|((topic, _), _)| topic.clone())
                .collect();
            if mirrored.is_empty() {
                continue;
            }
            let topics: Vec<String> = mirrored.into_iter().collect();
            let Ok(description) = self.sources.describe(&link.source, &topics).await else {
                continue;
            };
            for topic in &topics {
                let (Some(&theirs), Some(record)) =
                    (description.partitions.get(topic), link.topics.get(topic))
                else {
                    continue;
                };
                let key = (link.name.clone(), topic.clone());
                let ours = record.partitions;
                if theirs == ours {
                    self.warnings.remove(&key);
                    continue;
                }
                let warning = if theirs > ours {
                    format!(
                        "topic {topic} has {theirs} partitions at the source and {ours} here: partitions {ours}–{} \
                         are not mirrored",
                        theirs - 1
                    )
                } else {
                    format!(
                        "topic {topic} has {theirs} partitions at the source and {ours} here: the source's topic is \
                         not the one this link was created from"
                    )
                };
                if self.warnings.get(&key) != Some(&warning) {
                    tracing::warn!(link = %link.name, source = %link.source, "{warning}");
                    self.warnings.insert(key, warning);
                }
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
