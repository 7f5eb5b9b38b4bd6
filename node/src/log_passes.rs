//! Passes over every replica of every topic partition — retention ([`crate::retention`]) and compaction
//! ([`crate::compaction`]) — one partition's lock at a time, never across partitions, off the request path.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use partition_log::{LogError, PartitionLog};
use storage::PartitionId;
use topic_config::TopicSettings;

use crate::{Node, NodeError, PartitionSlot};

/// What a pass over one replica returns: its report, if it did anything. Boxed and `Send`, so that the tasks
/// running the passes can be spawned.
pub(crate) type PassFuture<'a, T> = Pin<Box<dyn Future<Output = Result<Option<T>, LogError>> + Send + 'a>>;

impl Node {
    /// Every topic with its partitions' slots: a copy of the topic map, whose lock is not held afterwards.
    pub(crate) async fn topic_slots(&self) -> Vec<(String, Vec<Arc<PartitionSlot>>)> {
        self.topics
            .read()
            .await
            .iter()
            .map(|(name, slots)| (name.clone(), slots.clone()))
            .collect()
    }

    /// Runs `pass` on every replica (the leader, then each follower) of every partition of every topic, with the
    /// topic's settings, and collects what the passes report as (partition, replica, report). A pass that fails
    /// is logged (as `what`) and the others still run; the first error is returned once all had their turn.
    pub(crate) async fn each_replica<T>(
        &self,
        what: &'static str,
        mut pass: impl for<'a> FnMut(&'a mut PartitionLog, &'a TopicSettings) -> PassFuture<'a, T>,
    ) -> Result<Vec<(PartitionId, usize, T)>, NodeError> {
        let mut done = Vec::new();
        let mut first_error = None;
        for (topic, slots) in self.topic_slots().await {
            let settings = self.topic_settings(&topic).await;
            for slot in slots {
                let mut guard = slot.lock().await;
                let Some(replicas) = guard.as_mut() else { continue };
                let logs = std::iter::once(&mut replicas.leader).chain(replicas.followers.iter_mut());
                for (replica, log) in logs.enumerate() {
                    match pass(log, &settings).await {
                        Ok(Some(report)) => done.push((log.id().clone(), replica, report)),
                        Ok(None) => {}
                        Err(error) => {
                            tracing::warn!(partition = %log.id(), replica, %error, "{what} failed");
                            first_error.get_or_insert(NodeError::Log(error));
                        }
                    }
                }
            }
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(done),
        }
    }
}
