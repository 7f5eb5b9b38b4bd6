//! The clusters' transaction coordinators as the world drives them: records kept as the coordinator's durable
//! log, markers delivered to the partitions (COORDINATOR origin) and acknowledged, timeouts, crashes, expiration.

use kafka_types::{CoordinatorEpoch, KafkaError, TransactionalId};
use txn_coordinator::{
    Coordinator, CoordinatorConfig, MarkerFailure, MarkerRequest, Outcome, ProducerIdManager,
};

use super::{error_name, World, STEP_MS};
use crate::truth::Status;
use crate::SimError;

impl World {
    /// Makes an outcome's records durable, delivers its markers, and returns its answer.
    pub(super) async fn apply<T>(
        &mut self,
        cluster: &str,
        outcome: Outcome<T>,
    ) -> Result<Result<T, KafkaError>, SimError> {
        let Some(state) = self.clusters.get_mut(cluster) else {
            return Ok(Err(KafkaError::UnknownServerError));
        };
        state.coordinator_log.extend(outcome.writes);
        self.deliver(cluster, outcome.markers).await?;
        Ok(outcome.answer)
    }

    /// Writes markers to the cluster's partitions (COORDINATOR origin) and reports each back; a marker whose
    /// write is refused is reported as Kafka's marker handler classifies it. Re-sent markers are delivered too,
    /// a bounded number of rounds.
    pub(super) async fn deliver(
        &mut self,
        cluster: &str,
        mut markers: Vec<MarkerRequest>,
    ) -> Result<(), SimError> {
        for _round in 0..3 {
            if markers.is_empty() {
                break;
            }
            let mut resent = Vec::new();
            for marker in std::mem::take(&mut markers) {
                let topic = marker.partition.topic().to_owned();
                let owner = self
                    .txn_owners
                    .get(&marker.transactional_id)
                    .cloned()
                    .unwrap_or_else(|| marker.transactional_id.to_string());
                let written = match self.leader(cluster, &topic) {
                    Ok(log) => {
                        self.clock += 1;
                        self.truth.markers.insert(self.clock, owner);
                        let mut log = log.write().await;
                        log.write_marker(
                            marker.commit,
                            marker.producer_id.get(),
                            marker.epoch.get(),
                            marker.coordinator_epoch.get(),
                            self.clock,
                        )
                        .await
                        .map(|_| ())
                    }
                    // A partition this cluster does not have cannot hold the marker.
                    Err(_) => Ok(()),
                };
                self.replicate(cluster, &topic).await?;
                let Some(state) = self.clusters.get_mut(cluster) else {
                    return Ok(());
                };
                let outcome = match written {
                    Ok(()) => state.coordinator.marker_written(
                        &marker.transactional_id,
                        &marker.partition,
                        self.clock,
                    ),
                    Err(error) => {
                        let failure = error
                            .kafka_error()
                            .map_or(MarkerFailure::Retriable, MarkerFailure::of);
                        *self
                            .client_errors
                            .entry(format!("marker refused: {}", error_name(&error)))
                            .or_default() += 1;
                        state.coordinator.marker_failed(
                            &marker.transactional_id,
                            &marker.partition,
                            failure,
                            self.clock,
                        )
                    }
                };
                state.coordinator_log.extend(outcome.writes);
                resent.extend(outcome.markers);
            }
            markers = resent;
        }
        Ok(())
    }

    pub(super) async fn abort_timed_out(&mut self) -> Result<(), SimError> {
        let names: Vec<String> = self.clusters.keys().cloned().collect();
        for name in names {
            let Some(state) = self.clusters.get_mut(&name) else {
                continue;
            };
            let outcome = state.coordinator.abort_timed_out(self.clock);
            if outcome.writes.is_empty() && outcome.markers.is_empty() {
                continue;
            }
            // The aborted transactions' records will never be committed.
            let fenced: Vec<TransactionalId> = outcome
                .markers
                .iter()
                .map(|marker| marker.transactional_id.clone())
                .collect();
            for client in self.clients.values_mut() {
                if client.cluster == name
                    && client.in_txn
                    && client.transactional_id().is_some_and(|id| fenced.contains(&id))
                {
                    self.truth.settle(&client.txn_records, Status::Aborted, None);
                    client.txn_records.clear();
                }
            }
            let _answer = self.apply(&name, outcome).await?;
        }
        Ok(())
    }

    pub(super) async fn crash_coordinator(&mut self, cluster: &str) -> Result<(), SimError> {
        let Some(state) = self.clusters.get_mut(cluster) else {
            return Ok(());
        };
        state.coordinator_epoch += 1;
        let (coordinator, markers) = Coordinator::recover(
            CoordinatorConfig::default(),
            ProducerIdManager::recover(None),
            CoordinatorEpoch(state.coordinator_epoch),
            state.coordinator_log.clone(),
        );
        state.coordinator = coordinator;
        self.deliver(cluster, markers).await
    }

    pub(super) async fn expire_ids(&mut self) -> Result<(), SimError> {
        self.clock += CoordinatorConfig::default().transactional_id_expiration_ms + STEP_MS;
        // Days pass: a batch whose acknowledgement was lost is long past `delivery.timeout.ms`; the producer
        // reported it failed (its records were never acknowledged) and does not send it again.
        for client in self.clients.values_mut() {
            client.pending = None;
        }
        self.abort_timed_out().await?;
        let names: Vec<String> = self.clusters.keys().cloned().collect();
        for name in names {
            let Some(state) = self.clusters.get_mut(&name) else {
                continue;
            };
            let outcome = state.coordinator.expire_transactional_ids(self.clock);
            state.coordinator_log.extend(outcome.writes);
        }
        self.expire_producers().await;
        Ok(())
    }
}
