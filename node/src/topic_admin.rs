//! Deleting topics and growing them: what DeleteTopics and CreatePartitions ask.
//!
//! A deletion is decided durably before anything is removed: the topic is named in the topic-config record's
//! `deleting` set (`crate::topic_configs`), then it leaves the topic map (requests in flight on its partitions find
//! no log), then each partition's storage is deleted, **highest partition first** so that whatever a crash leaves
//! is partitions 0..k, which the next open deletes before it serves, and finally the name leaves the set. A topic
//! that belongs to a mirror link is neither deleted nor grown: the link owns it (`mirrorlog mirror delete` first).
//! Every group's committed offsets on a deleted topic go with it, as Kafka's group coordinator drops them.

use kafka_types::KafkaError;
use storage::PartitionId;

use crate::{ConfigRefusal, Node, NodeError};

impl Node {
    /// Deletes the topic `name` and its data. Durable when this returns; the storage of every partition is gone.
    pub async fn delete_topic(&self, name: &str) -> Result<(), ConfigRefusal> {
        self.delete_topic_checked(name, None).await
    }

    /// Deletes the topic `name` if its id is still `id` (one deleted and created again since it was looked up is
    /// another topic: UNKNOWN_TOPIC_ID, and it stays); as [`Node::delete_topic`] otherwise.
    pub async fn delete_topic_with_id(&self, name: &str, id: [u8; 16]) -> Result<(), ConfigRefusal> {
        self.delete_topic_checked(name, Some(id)).await
    }

    async fn delete_topic_checked(&self, name: &str, id: Option<[u8; 16]>) -> Result<(), ConfigRefusal> {
        self.refuse_if_mirrored(name).await?;
        let slots = {
            let mut topics = self.topics.write().await;
            if let Some(id) = id {
                // Checked under the topic map's lock, which a creation holds too.
                let held =
                    topics.contains_key(name) && self.topic_configs.read().await.topic_id(name) == Some(id);
                if !held {
                    return Err(KafkaError::UnknownTopicId.into());
                }
            }
            if !topics.contains_key(name) {
                return Err(KafkaError::UnknownTopicOrPartition.into());
            }
            if let Err(error) = self.topic_configs.write().await.mark_deletion(name, true).await {
                tracing::error!(topic = name, %error, "recording a topic's deletion failed");
                return Err(KafkaError::KafkaStorageError.into());
            }
            topics.remove(name).unwrap_or_default()
        };
        // Requests holding a slot see no log from here on; long polls on the topic answer now (with
        // UNKNOWN_TOPIC_OR_PARTITION), as Kafka completes a delayed fetch whose partition went away.
        for (partition, slot) in slots.iter().enumerate() {
            drop(slot.lock().await.take());
            self.wake_fetches(name, i32::try_from(partition).unwrap_or(i32::MAX));
        }
        let count = u32::try_from(slots.len()).unwrap_or(u32::MAX);
        if let Err(error) = self.finish_deletion(name, count).await {
            // The record still names the topic: the next open finishes the deletion.
            tracing::error!(topic = name, %error, "deleting a topic failed");
            return Err(KafkaError::KafkaStorageError.into());
        }
        Ok(())
    }

    /// Deletes the storage of partitions `count - 1` down to 0 of `name` (on the leader's store and every
    /// follower's), then clears the deletion from the record.
    pub(crate) async fn finish_deletion(&self, name: &str, count: u32) -> Result<(), NodeError> {
        for partition in (0..count).rev() {
            let id = PartitionId::new(name, partition)?;
            for store in std::iter::once(&self.storage).chain(&self.follower_stores) {
                if store.list().await?.contains(&id) {
                    store.delete(&id).await?;
                }
            }
        }
        // Kafka's group coordinator forgets the deleted partitions' committed offsets.
        self.offsets.lock().await.delete_offsets(None, name, None).await?;
        self.topic_configs.write().await.mark_deletion(name, false).await
    }

    /// Adds partitions to `name` until it has `count` (CreatePartitions); `validate_only` checks only.
    pub async fn grow_topic(&self, name: &str, count: i32, validate_only: bool) -> Result<(), ConfigRefusal> {
        self.refuse_if_mirrored(name).await?;
        let held = self
            .topic_partitions()
            .await
            .get(name)
            .copied()
            .ok_or(KafkaError::UnknownTopicOrPartition)?;
        let held = i64::try_from(held).unwrap_or(i64::MAX);
        let invalid = |message: String| ConfigRefusal {
            error: KafkaError::InvalidPartitions,
            message: Some(message),
        };
        if i64::from(count) == held {
            return Err(invalid(format!("Topic already has {held} partition(s).")));
        }
        if i64::from(count) < held {
            return Err(invalid(format!(
                "The topic {name} currently has {held} partition(s); {count} would not be an increase."
            )));
        }
        let count = u32::try_from(count).map_err(|_| KafkaError::InvalidPartitions)?;
        if validate_only {
            return if count > crate::node::MAX_PARTITIONS {
                Err(KafkaError::InvalidPartitions.into())
            } else {
                Ok(())
            };
        }
        self.add_partitions(name, count)
            .await
            .map_err(ConfigRefusal::from)
    }

    /// POLICY_VIOLATION for a topic a mirror link holds.
    async fn refuse_if_mirrored(&self, name: &str) -> Result<(), ConfigRefusal> {
        let links = self.mirror_links().await.map_err(|error| {
            tracing::error!(%error, "reading the mirror links failed");
            ConfigRefusal::from(KafkaError::KafkaStorageError)
        })?;
        match links.iter().find(|link| link.topics.contains_key(name)) {
            Some(link) => Err(ConfigRefusal {
                error: KafkaError::PolicyViolation,
                message: Some(format!(
                    "topic {name} belongs to mirror link {}: delete the link first (mirrorlog mirror delete)",
                    link.name
                )),
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

    use std::collections::BTreeMap;

    use storage_config::{Backend, StorageConfig};

    use crate::mirror::registry::{LinkRecord, TopicRecord};
    use crate::{Node, NodeConfig};
    use kafka_types::KafkaError;

    async fn open(dir: &std::path::Path) -> Node {
        let config = NodeConfig::new(StorageConfig::for_backend(Backend::Fs, dir));
        Node::open(config, ("localhost".to_owned(), 9092)).await.unwrap()
    }

    #[tokio::test]
    async fn a_request_holding_a_deleted_topics_partition_is_told_unknown_topic_an_offline_one_storage_error()
    {
        let dir = tempfile::tempdir().unwrap();
        let node = open(dir.path()).await;
        node.create_topic("busy", 1).await.unwrap();
        node.create_topic("offline", 1).await.unwrap();
        // Looked up before the deletion, locked after: no log, because the topic is gone.
        let held = node.partition("busy", 0).await.unwrap();
        node.delete_topic("busy").await.unwrap();
        assert!(held.lock().await.is_none());
        assert_eq!(
            node.missing_log_error("busy", 0, &held).await,
            KafkaError::UnknownTopicOrPartition
        );
        // Deleted and created again: the old partition is still not the topic's.
        node.create_topic("busy", 1).await.unwrap();
        assert_eq!(
            node.missing_log_error("busy", 0, &held).await,
            KafkaError::UnknownTopicOrPartition
        );
        // A partition whose log went offline is still the topic's: a storage error.
        let offline = node.partition("offline", 0).await.unwrap();
        drop(offline.lock().await.take());
        assert_eq!(
            node.missing_log_error("offline", 0, &offline).await,
            KafkaError::KafkaStorageError
        );
    }

    #[tokio::test]
    async fn a_deletion_a_crash_interrupted_is_finished_at_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let node = open(dir.path()).await;
        node.create_topic("doomed", 3).await.unwrap();
        node.create_topic("kept", 1).await.unwrap();
        // The deletion was decided and partition 2 deleted when the process died.
        node.topic_configs
            .write()
            .await
            .mark_deletion("doomed", true)
            .await
            .unwrap();
        let slots = node.topics.write().await.remove("doomed").unwrap();
        for slot in &slots {
            drop(slot.lock().await.take());
        }
        let last = storage::PartitionId::new("doomed", 2).unwrap();
        node.storage.delete(&last).await.unwrap();
        node.close().await.unwrap();

        let node = open(dir.path()).await;
        let topics = node.topic_partitions().await;
        assert_eq!(topics.keys().collect::<Vec<_>>(), ["kept"]);
        assert!(node.topic_configs.read().await.deleting().is_empty());
        let left: Vec<_> = node
            .storage
            .list()
            .await
            .unwrap()
            .into_iter()
            .filter(|id| id.topic() == "doomed")
            .collect();
        assert!(left.is_empty(), "{left:?}");
        // The name can be used again, for an empty topic.
        node.create_topic("doomed", 1).await.unwrap();
        assert_eq!(
            node.partition("doomed", 0)
                .await
                .unwrap()
                .lock()
                .await
                .as_ref()
                .unwrap()
                .leader
                .log_end_offset(),
            0
        );
        node.close().await.unwrap();
    }

    #[tokio::test]
    async fn a_topic_keeps_its_id_across_restarts_and_a_topic_created_again_gets_another() {
        let dir = tempfile::tempdir().unwrap();
        let node = open(dir.path()).await;
        node.create_topic("orders", 2).await.unwrap();
        node.create_topic("audit", 1).await.unwrap();
        let first = node.topic_id("orders").await.unwrap();
        let audit = node.topic_id("audit").await.unwrap();
        assert_ne!(first, audit);
        assert_ne!(first, [0; 16]);
        assert_eq!(first[6] >> 4, 4, "a version-4 UUID");
        assert!(!mirror_fsm::topic_id_text(first).starts_with('-'));
        assert_eq!(node.topic_named_by(first).await.as_deref(), Some("orders"));
        node.close().await.unwrap();

        let node = open(dir.path()).await;
        assert_eq!(node.topic_id("orders").await, Some(first), "durable");
        node.grow_topic("orders", 3, false).await.unwrap();
        assert_eq!(node.topic_id("orders").await, Some(first), "growing keeps the id");
        node.delete_topic("orders").await.unwrap();
        assert_eq!(node.topic_id("orders").await, None);
        assert_eq!(node.topic_named_by(first).await, None);
        node.create_topic("orders", 2).await.unwrap();
        let second = node.topic_id("orders").await.unwrap();
        assert_ne!(second, first, "a topic created again is another topic");
        assert_eq!(node.topic_id("audit").await, Some(audit));
        node.close().await.unwrap();
    }

    #[tokio::test]
    async fn topics_from_before_topic_ids_get_one_at_the_next_open_and_a_later_format_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let node = open(dir.path()).await;
        node.create_topic("old", 1).await.unwrap();
        // The record as a build before topic ids wrote it (format version 1, no ids).
        let old_record = br#"{"version":1,"topics":{"old":{"retention.ms":"1000"}}}"#;
        node.topic_configs
            .write()
            .await
            .put_raw(old_record)
            .await
            .unwrap();
        node.close().await.unwrap();

        let node = open(dir.path()).await;
        let given = node.topic_id("old").await.expect("an id given at the open");
        assert_eq!(
            node.topic_overrides("old")
                .await
                .and_then(|o| o.get("retention.ms").cloned())
                .as_deref(),
            Some("1000"),
            "the overrides read from the old record are kept"
        );
        node.close().await.unwrap();
        let node = open(dir.path()).await;
        assert_eq!(node.topic_id("old").await, Some(given), "given once, then kept");
        // A record from a later format is refused, not rewritten without what it holds.
        node.topic_configs
            .write()
            .await
            .put_raw(br#"{"version":3,"topics":{}}"#)
            .await
            .unwrap();
        node.close().await.unwrap();
        let config = NodeConfig::new(StorageConfig::for_backend(Backend::Fs, dir.path()));
        let refused = Node::open(config, ("localhost".to_owned(), 9092))
            .await
            .err()
            .map(|error| error.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|error| error.contains("format version 3")),
            "{refused:?}"
        );
    }

    #[tokio::test]
    async fn a_deleted_topics_committed_offsets_go_with_it_and_other_topics_keep_theirs() {
        use crate::offsets::{Committed, OffsetEntry};
        let dir = tempfile::tempdir().unwrap();
        let node = open(dir.path()).await;
        node.create_topic("doomed", 2).await.unwrap();
        node.create_topic("kept", 1).await.unwrap();
        let entry = |topic: &str, partition| OffsetEntry {
            group: "readers".to_owned(),
            topic: topic.to_owned(),
            partition,
            committed: Committed::new(7, None),
        };
        node.offsets
            .lock()
            .await
            .commit(vec![entry("doomed", 0), entry("doomed", 1), entry("kept", 0)])
            .await
            .unwrap();
        node.delete_topic("doomed").await.unwrap();
        node.close().await.unwrap();
        let node = open(dir.path()).await;
        let offsets = node.offsets.lock().await;
        assert!(offsets.committed("readers", "doomed", 0).is_none());
        assert!(offsets.committed("readers", "doomed", 1).is_none());
        assert_eq!(offsets.committed("readers", "kept", 0).map(|c| c.offset), Some(7));
        drop(offsets);
        node.close().await.unwrap();
    }

    #[tokio::test]
    async fn a_topic_a_mirror_link_holds_is_neither_deleted_nor_grown() {
        let dir = tempfile::tempdir().unwrap();
        let node = open(dir.path()).await;
        node.create_topic("mirrored", 1).await.unwrap();
        let record = TopicRecord {
            partitions: 1,
            failover_requested: false,
            source_topic_id: None,
        };
        node.put_mirror_links(&[LinkRecord {
            name: "from-a".to_owned(),
            source: "127.0.0.1:9".to_owned(),
            source_cluster_id: "a".to_owned(),
            source_config: BTreeMap::new(),
            topics: BTreeMap::from([("mirrored".to_owned(), record)]),
            settings: Default::default(),
            synced_acls: Vec::new(),
        }])
        .await
        .unwrap();
        let refused = node.delete_topic("mirrored").await.unwrap_err();
        assert_eq!(refused.error, kafka_types::KafkaError::PolicyViolation);
        assert!(refused.message.unwrap().contains("from-a"));
        assert!(node.grow_topic("mirrored", 2, false).await.is_err());
        assert!(node.partition("mirrored", 0).await.is_some());
        node.close().await.unwrap();
    }
}
