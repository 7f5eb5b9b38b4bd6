//! Consumer group offsets carried over a link: every [`GROUP_SYNC_INTERVAL_MS`] (or the interval the owner set, or
//! the link's own `mirror.groups.sync.interval.ms`) a link asks its source for the offsets its consumer groups
//! committed on the partitions still mirrored ([`mirror_fsm::Sources::group_offsets`]) and commits here those of
//! the groups its patterns select (`mirror.groups.include` / `.exclude`; every group by default), so that
//! consumers moved to this cluster after a failover resume where they were.
//!
//! The same periodic question asks each source the last stable offset of the link's PAUSED partitions
//! ([`mirror_fsm::Sources::last_stable_offsets`]), which no round asks for: a paused mirror's lag keeps growing
//! in `describe` and the metrics as the source is written, and becomes unknown when the source cannot answer —
//! never the last answer's value standing still.
//!
//! A byte-exact mirror has the source's offsets, so an offset carries over as it is, with two exceptions: an
//! offset beyond what this node has mirrored so far is cut to its log end (after an unplanned failover the
//! records past it never arrive, and a consumer parked beyond the log end would skip what this cluster writes
//! there), and a group with live members here is left alone (its own commits win). Partitions no longer
//! mirrored — failed over, or paused — are not synced: from then on the group's offsets here are its own.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use mirror_fsm::{FetchError, GroupOffset, Sources, StateKind};

use super::filters::Patterns;
use super::links::{log_end, MirrorLinks, PartitionKey};
use super::source_topics::due_links;
use crate::offsets::{Committed, OffsetEntry};
use crate::Node;

/// How often a link copies its source's group offsets.
pub const GROUP_SYNC_INTERVAL_MS: i64 = 5_000;

/// Group offsets fetched from each source: the partitions asked for, and the source's answer.
type GroupAnswers = Vec<(BTreeSet<PartitionKey>, Result<Vec<GroupOffset>, FetchError>)>;

/// What the periodic question brought back from each source.
#[derive(Debug, Default)]
pub(super) struct Fetched {
    /// Group offsets: the partitions asked for, and the source's answer.
    offsets: GroupAnswers,
    /// Paused partitions' last stable offsets (`None`: the source implementation cannot say), with when each
    /// source's answer landed ([`super::links::next_landing`]).
    paused: Vec<PausedAnswer>,
}

/// A paused partition, its source's answer for its last stable offset, and when that answer landed.
type PausedAnswer = (PartitionKey, Option<Result<i64, FetchError>>, u64);

/// The most one source's group offsets may take when fetched by a task of their own.
pub const GROUP_FETCH_DEADLINE: Duration = Duration::from_secs(10);

impl MirrorLinks {
    /// Copies the source groups' offsets of the links whose interval has passed (each link's own, or the node's;
    /// the check is all a round pays in between); returns the offsets committed here. A source that cannot answer
    /// is tried again at the next interval. With rounds in flight the offsets are fetched by a task of their
    /// own, each source under [`GROUP_FETCH_DEADLINE`], and committed by the step that finds it done.
    pub(super) async fn sync_group_offsets(&mut self, node: &Node) -> usize {
        if let Some(task) = self.group_fetch.take() {
            if !task.is_finished() {
                self.group_fetch = Some(task);
                return 0;
            }
            return match task.await {
                Ok(fetched) => self.apply_periodic(node, fetched).await,
                Err(_) => 0,
            };
        }
        let node_interval = self.group_sync_interval_ms;
        let due = due_links(&self.links, &mut self.group_sync_due, node.now_ms(), |link| {
            link.settings.group_sync_interval_ms.or(node_interval)
        });
        if due.is_empty() {
            return 0;
        }
        let due_topics: BTreeSet<&String> = self
            .links
            .iter()
            .filter(|link| due.contains(&link.name))
            .flat_map(|link| link.topics.keys())
            .collect();
        let wanted =
            self.by_source(|key, mirrored| due_topics.contains(&key.0) && mirrored.driver.fetching());
        let paused = self.by_source(|key, mirrored| {
            due_topics.contains(&key.0) && mirrored.driver.state().kind() == StateKind::Paused
        });
        let sources = Arc::clone(&self.sources);
        let landings = Arc::clone(&self.landings);
        if self.rounds_in_flight {
            let landed = Arc::clone(&self.landed);
            self.group_fetch = Some(tokio::spawn(async move {
                let fetched =
                    ask_sources(sources, &landings, wanted, paused, Some(GROUP_FETCH_DEADLINE)).await;
                landed.notify_one();
                fetched
            }));
            return 0;
        }
        let fetched = ask_sources(sources, &landings, wanted, paused, None).await;
        self.apply_periodic(node, fetched).await
    }

    /// The partitions `which` picks, by source.
    fn by_source(
        &self,
        which: impl Fn(&PartitionKey, &super::links::Mirrored) -> bool,
    ) -> BTreeMap<String, BTreeSet<PartitionKey>> {
        let mut by_source: BTreeMap<String, BTreeSet<PartitionKey>> = BTreeMap::new();
        for (key, mirrored) in &self.partitions {
            if which(key, mirrored) {
                by_source
                    .entry(mirrored.source.clone())
                    .or_default()
                    .insert(key.clone());
            }
        }
        by_source
    }

    /// Records the paused partitions' last stable offsets (those still paused), then commits the group offsets;
    /// the number committed.
    async fn apply_periodic(&mut self, node: &Node, fetched: Fetched) -> usize {
        for (key, answer, landed) in fetched.paused {
            let Some(mirrored) = self.partitions.get_mut(&key) else {
                continue;
            };
            // Still paused, and no later answer recorded since this one was asked.
            if mirrored.driver.state().kind() != StateKind::Paused || landed < mirrored.source_lso_landed {
                continue;
            }
            match answer {
                Some(Ok(stable)) => mirrored.source_lso = Some(stable),
                // The source could not say: the lag is unknown, not the last answer's.
                Some(Err(_)) => mirrored.source_lso = None,
                None => continue,
            }
            mirrored.source_lso_landed = landed;
        }
        self.commit_group_offsets(node, fetched.offsets).await
    }

    /// Commits here the fetched offsets of the partitions still fetching now (one failed over or paused since
    /// the fetch keeps its own), each cut to our log end; the number committed.
    async fn commit_group_offsets(&mut self, node: &Node, fetched: GroupAnswers) -> usize {
        // Each topic's link's group patterns (recorded patterns compile: `create` and `alter` checked them).
        let patterns: BTreeMap<&String, Patterns> = self
            .links
            .iter()
            .filter_map(|link| {
                let patterns =
                    Patterns::new(&link.settings.groups_include, &link.settings.groups_exclude).ok()?;
                Some(link.topics.keys().map(move |topic| (topic, patterns.clone())))
            })
            .flatten()
            .collect();
        let mut committed = 0;
        for (keys, answer) in fetched {
            let Ok(offsets) = answer else {
                continue;
            };
            let mut entries = Vec::new();
            for offset in offsets {
                let key = (offset.topic.clone(), offset.partition);
                let still_fetching = self
                    .partitions
                    .get(&key)
                    .is_some_and(|mirrored| mirrored.driver.fetching());
                let selected = patterns
                    .get(&offset.topic)
                    .is_some_and(|patterns| patterns.selects_group(&offset.group));
                if !keys.contains(&key)
                    || !still_fetching
                    || !selected
                    || node.membership.has_members(&offset.group)
                {
                    continue;
                }
                let Some(end) = log_end(node, &key).await else {
                    continue;
                };
                let carried = Committed::new(offset.offset.min(end), offset.metadata);
                let unchanged = node
                    .offsets
                    .lock()
                    .await
                    .committed(&offset.group, &offset.topic, offset.partition)
                    .is_some_and(|current| current.same_position(&carried));
                if !unchanged {
                    entries.push(OffsetEntry {
                        group: offset.group,
                        topic: offset.topic,
                        partition: offset.partition,
                        committed: carried,
                    });
                }
            }
            committed += entries.len();
            if !entries.is_empty() && node.offsets.lock().await.commit(entries).await.is_err() {
                // The offset store is poisoned: every commit now fails loudly to its clients.
                committed = 0;
            }
        }
        committed
    }
}

/// Asks each source for its groups' offsets on the topics of its `wanted` partitions and for the last stable
/// offsets of its `paused` ones, each source's question under `deadline` when one is given.
async fn ask_sources(
    sources: Arc<dyn Sources>,
    landings: &std::sync::atomic::AtomicU64,
    wanted: BTreeMap<String, BTreeSet<PartitionKey>>,
    paused: BTreeMap<String, BTreeSet<PartitionKey>>,
    deadline: Option<Duration>,
) -> Fetched {
    let mut stable = Vec::new();
    for (source, keys) in paused {
        let keys: Vec<PartitionKey> = keys.into_iter().collect();
        let asked = sources.last_stable_offsets(&source, &keys);
        let answers = match deadline {
            Some(deadline) => tokio::time::timeout(deadline, asked).await.unwrap_or_else(|_| {
                let late = FetchError::new(format!("no answer within {} ms", deadline.as_millis()), true);
                Some(keys.iter().map(|_| Err(late.clone())).collect())
            }),
            None => asked.await,
        };
        let landed = super::links::next_landing(landings);
        match answers {
            Some(answers) => stable.extend(
                keys.into_iter()
                    .zip(answers)
                    .map(|(key, answer)| (key, Some(answer), landed)),
            ),
            None => stable.extend(keys.into_iter().map(|key| (key, None, landed))),
        }
    }
    Fetched {
        offsets: fetch_group_offsets(sources, wanted, deadline).await,
        paused: stable,
    }
}

/// Asks each source for its groups' offsets on the topics of its partitions, each under `deadline` when one is
/// given.
async fn fetch_group_offsets(
    sources: Arc<dyn Sources>,
    wanted: BTreeMap<String, BTreeSet<PartitionKey>>,
    deadline: Option<Duration>,
) -> GroupAnswers {
    let mut fetched = Vec::with_capacity(wanted.len());
    for (source, keys) in wanted {
        let topics: Vec<String> = keys
            .iter()
            .map(|(topic, _)| topic.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let asked = sources.group_offsets(&source, &topics);
        let answer = match deadline {
            Some(deadline) => tokio::time::timeout(deadline, asked).await.unwrap_or_else(|_| {
                Err(FetchError::new(
                    format!("no answer within {} ms", deadline.as_millis()),
                    true,
                ))
            }),
            None => asked.await,
        };
        fetched.push((keys, answer));
    }
    fetched
}
