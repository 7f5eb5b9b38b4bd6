//! Mirror links: starting one (PREPARING through `mirror-fsm`), fetching, and stopping one — STOPPING with the
//! barrier under the barrier strategies, or just opening the partition under the others.

use mirror_fsm::{Event, LocalFetcher, MirrorDriver, MirrorState, SharedLog};

use super::{Link, SimFetcher, World};
use crate::strategy::Strategy;
use crate::SimError;

impl World {
    pub(super) async fn start_link(&mut self, source: &str, dest: &str, topic: &str) -> Result<(), SimError> {
        if source == dest
            || self
                .links
                .iter()
                .any(|link| link.dest == dest && link.topic == topic)
            || !self.ensure_partition(source, topic).await?
            || !self.ensure_partition(dest, topic).await?
        {
            return Ok(());
        }
        let source_log = self.leader(source, topic)?;
        let dest_log = self.leader(dest, topic)?;
        let mut fetcher = SimFetcher {
            inner: LocalFetcher::new(&source_log, source),
            source: std::sync::Arc::clone(&source_log),
            bound: self.fetch_bound,
            strategy: self.strategy,
            max_producer_id: -1,
        };
        let driver = {
            let mut log = dest_log.write().await;
            let mut driver = MirrorDriver::recover(&mut log, &mut fetcher, dest)
                .await
                .map_err(SimError::driver)?;
            let tick = Event::Tick { now_ms: self.clock };
            driver
                .handle(&mut log, &mut fetcher, tick)
                .await
                .map_err(SimError::driver)?;
            let start = Event::Start {
                source_cluster_id: source.to_owned(),
            };
            driver
                .handle(&mut log, &mut fetcher, start)
                .await
                .map_err(SimError::driver)?;
            driver
        };
        self.mark_truncated(dest, topic);
        self.links.push(Link {
            source: source.to_owned(),
            dest: dest.to_owned(),
            topic: topic.to_owned(),
            driver,
            fetcher,
        });
        self.replicate(dest, topic).await
    }

    pub(super) async fn mirror_all(&mut self) -> Result<(), SimError> {
        for index in 0..self.links.len() {
            let (dest, topic) = (self.links[index].dest.clone(), self.links[index].topic.clone());
            let dest_log = self.leader(&dest, &topic)?;
            {
                let link = &mut self.links[index];
                let mut log = dest_log.write().await;
                link.driver
                    .handle(&mut log, &mut link.fetcher, Event::Tick { now_ms: self.clock })
                    .await
                    .map_err(SimError::driver)?;
                link.driver
                    .catch_up(&mut log, &mut link.fetcher)
                    .await
                    .map_err(SimError::driver)?;
                if let Some(failure) = link.driver.state().failure() {
                    let entry = format!("{} -> {} ({}): {failure:?}", link.source, link.dest, link.topic);
                    if !self.failed_links.contains(&entry) {
                        self.failed_links.push(entry);
                    }
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
        let mut link = self.links.remove(index);
        let dest_log = self.leader(dest, topic)?;
        {
            let mut log = dest_log.write().await;
            if self.strategy.writes_barrier() {
                link.driver
                    .handle(&mut log, &mut link.fetcher, Event::Tick { now_ms: self.clock })
                    .await
                    .map_err(SimError::driver)?;
                link.driver
                    .handle(&mut log, &mut link.fetcher, Event::Stop)
                    .await
                    .map_err(SimError::driver)?;
            } else {
                // A mirror without the KIP's PID handling: stop fetching, remember where mirroring ended (for a
                // later failback), open the partition for writes. No cut to the LSO and no barrier: that is the
                // KIP's STOPPING, which the barrier strategies run.
                let end = log.log_end_offset();
                log.put_metadata(
                    &mirror_fsm::driver::last_mirrored_key(&link.source),
                    &end.to_be_bytes(),
                )
                .await
                .map_err(SimError::log)?;
                let stopped = serde_json::to_vec(&MirrorState::never_mirrored())
                    .map_err(|error| SimError::Setup(error.to_string()))?;
                log.put_metadata(mirror_fsm::driver::STATE_KEY, &stopped)
                    .await
                    .map_err(SimError::log)?;
                log.set_read_only(false).await.map_err(SimError::log)?;
            }
        }
        if self.strategy == Strategy::BarrierAdvance && link.fetcher.max_producer_id >= 0 {
            if let Some(state) = self.clusters.get_mut(dest) {
                let outcome = state
                    .coordinator
                    .advance_producer_ids_past(link.fetcher.max_producer_id);
                state.coordinator_log.extend(outcome.writes);
            }
        }
        self.mark_truncated(dest, topic);
        self.replicate(dest, topic).await
    }

    pub(super) fn mark_truncated(&mut self, cluster: &str, topic: &str) {
        if let Some(replicas) = self
            .clusters
            .get_mut(cluster)
            .and_then(|state| state.partitions.get_mut(topic))
        {
            replicas.leader_truncated = true;
        }
    }

    pub(super) fn leader(&self, cluster: &str, topic: &str) -> Result<SharedLog, SimError> {
        self.clusters
            .get(cluster)
            .and_then(|state| state.partitions.get(topic))
            .map(|replicas| std::sync::Arc::clone(&replicas.leader))
            .ok_or_else(|| SimError::Setup(format!("{cluster} has no partition of {topic}")))
    }
}
