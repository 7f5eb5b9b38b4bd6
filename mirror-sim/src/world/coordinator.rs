//! The clusters' transaction coordinators as the world sees them: each node's own coordinator (its durable log on
//! the node's store, its marker delivery), of which the world only reads what a client would learn — and, for the
//! oracle, which transaction each delivered marker ended. Timeouts, crashes and expiration are the node's.

use kafka_types::TransactionalId;

use super::{World, STEP_MS};
use crate::truth::Status;
use crate::SimError;

impl World {
    /// Names the transaction of every marker the nodes delivered since the last call (the oracle identifies a
    /// marker by its timestamp) and counts the markers a partition refused.
    pub(super) async fn note_delivered_markers(&mut self) {
        for state in self.clusters.values() {
            for marker in state.node.take_delivered_markers().await {
                let owner = self
                    .txn_owners
                    .get(&marker.transactional_id)
                    .cloned()
                    .unwrap_or_else(|| marker.transactional_id.to_string());
                self.truth.markers.insert(marker.timestamp, owner);
                if let Some(error) = marker.refused {
                    *self
                        .client_errors
                        .entry(format!("marker refused: {}", error.name()))
                        .or_default() += 1;
                }
            }
        }
    }

    /// Each node aborts the transactions past their timeout; their clients' open records will never commit.
    pub(super) async fn abort_timed_out(&mut self) -> Result<(), SimError> {
        let names: Vec<String> = self.clusters.keys().cloned().collect();
        for name in names {
            let Some(node) = self.node(&name) else {
                continue;
            };
            let aborted: Vec<TransactionalId> = node
                .abort_timed_out_transactions()
                .await
                .map_err(SimError::node)?;
            for client in self.clients.values_mut() {
                if client.cluster == name
                    && client.in_txn
                    && client.transactional_id().is_some_and(|id| aborted.contains(&id))
                {
                    self.truth.settle(&client.txn_records, Status::Aborted, None);
                    client.txn_records.clear();
                }
            }
            self.note_delivered_markers().await;
        }
        Ok(())
    }

    /// The coordinator crashes: the node reloads it from its log under the next epoch and re-sends the markers
    /// of the transactions it was completing.
    pub(super) async fn crash_coordinator(&mut self, cluster: &str) -> Result<(), SimError> {
        let Some(node) = self.node(cluster) else {
            return Ok(());
        };
        node.reload_coordinator().await.map_err(SimError::node)?;
        self.note_delivered_markers().await;
        Ok(())
    }

    pub(super) async fn expire_ids(&mut self) -> Result<(), SimError> {
        let expiration = self
            .clusters
            .values()
            .map(|state| state.node.config().transactional_id_expiration_ms)
            .max()
            .unwrap_or_default();
        self.clock.advance(expiration + STEP_MS);
        // Days pass: a batch whose acknowledgement was lost is long past `delivery.timeout.ms`; the producer
        // reported it failed (its records were never acknowledged) and does not send it again.
        for client in self.clients.values_mut() {
            client.pending = None;
        }
        self.abort_timed_out().await?;
        for state in self.clusters.values() {
            state
                .node
                .expire_transactional_ids()
                .await
                .map_err(SimError::node)?;
        }
        self.expire_producers().await;
        Ok(())
    }
}
