//! The oracle's watch on mirror rounds: a mirror never removes a batch its source still holds (issue 50, item 5).
//!
//! Before each round of a destination's links, [`World::watch_rewinds`] notes, for every partition a link copies
//! into it, the partition's truncation count and the batches it holds. After the round,
//! [`World::check_rewinds`] looks at the partitions that were truncated: if the source still holds every batch
//! the destination held (same offsets, same bytes after the strategy's producer-id transform, none below the
//! source's log start), nothing justified the truncation — the source proved no divergence — and it is a
//! divergence of class (e). A truncation after the source cut its own log (a chain's middle failing over) or
//! passed our end is justified and not counted. The check reads the destination before the round because a
//! truncated mirror copies the same bytes again within the round: its log alone at the end shows nothing. A link
//! whose source topic was deleted and created again is judged by what the old topic held: nothing the new topic
//! does justifies removing what was mirrored.

use std::collections::BTreeMap;

use record_format::RecordBatch;

use super::World;
use crate::logview::all_batches;
use crate::SimError;

/// One mirrored partition as it stood before a round.
pub(super) struct Watched {
    source: String,
    dest: String,
    topic: String,
    partition: i32,
    truncations: u64,
    held: Vec<RecordBatch>,
    /// What the link's source topic held of this partition when it was deleted and created again, if it was.
    source_before_recreation: Option<Vec<RecordBatch>>,
}

impl World {
    /// Notes every partition the links into `dest` copy, as it stands now.
    pub(super) async fn watch_rewinds(&self, dest: &str) -> Result<Vec<Watched>, SimError> {
        let mut watched = Vec::new();
        for link in self.links.iter().filter(|link| link.dest == dest) {
            for partition in self.partition_numbers(dest, &link.topic).await {
                let slot = self.leader(dest, &link.topic, partition).await?;
                let guard = slot.lock().await;
                let Some(replicas) = guard.as_ref() else {
                    continue;
                };
                watched.push(Watched {
                    source: link.source.clone(),
                    dest: dest.to_owned(),
                    topic: link.topic.clone(),
                    partition,
                    truncations: replicas.leader.truncations(),
                    held: all_batches(&replicas.leader).await?,
                    source_before_recreation: link
                        .source_before_recreation
                        .as_ref()
                        .map(|held| held.get(&partition).cloned().unwrap_or_default()),
                });
            }
        }
        Ok(watched)
    }

    /// Counts a divergence for every partition of `watched` truncated since although its source still holds
    /// everything it held.
    pub(super) async fn check_rewinds(&mut self, watched: Vec<Watched>) -> Result<(), SimError> {
        for before in watched {
            let slot = self.leader(&before.dest, &before.topic, before.partition).await?;
            let truncations = {
                let guard = slot.lock().await;
                guard.as_ref().map(|replicas| replicas.leader.truncations())
            };
            if truncations.is_none_or(|now| now == before.truncations) || before.held.is_empty() {
                continue;
            }
            let source = match before.source_before_recreation {
                Some(held) => held,
                None => {
                    self.leader_batches(&before.source, &before.topic, before.partition)
                        .await?
                }
            };
            let by_offset: BTreeMap<i64, &RecordBatch> =
                source.iter().map(|batch| (batch.base_offset(), batch)).collect();
            let still_held = before.held.iter().all(|ours| {
                by_offset
                    .get(&ours.base_offset())
                    .is_some_and(|theirs| self.as_mirrored(theirs).as_bytes() == ours.as_bytes())
            });
            if still_held {
                let (first, last) = (
                    before.held.first().map_or(0, RecordBatch::base_offset),
                    before.held.last().map_or(0, RecordBatch::last_offset),
                );
                self.divergences.push(format!(
                    "{}/{}: mirror of {} truncated although its source still holds every batch it held \
                     (offsets {first}..={last}): a retry removed what the source still has",
                    before.dest,
                    self.log_name(&before.topic, before.partition),
                    before.source
                ));
            }
        }
        Ok(())
    }
}
