//! [`NodeSources`]: source clusters that are other [`Node`]s of the same process, reached by a name instead of
//! a network address — the in-process implementation of [`Sources`] (tests and embedders; `serve` reaches its
//! sources over the Kafka protocol with `mirror-link`).
//!
//! A [`NodeFetcher`] reads the source node's leader log as a read_committed fetch would (up to its last stable
//! offset, batches as stored), and answers the source's own last mirrored offset from its partition's mirror
//! records, so a failback aligns with the position the source recorded when it stopped mirroring from us
//! instead of copying the source's log from its start (which is all a Kafka-protocol source allows). Its consumer
//! groups' committed offsets are read from the source node's offset store.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use mirror_fsm::{
    FetchError, FetchResponse, Fetcher, GroupOffset, ListedTopic, SourceAcl, SourceAcls, SourceConfigs,
    SourceDescription, Sources,
};
use partition_log::Isolation;

use crate::Node;

/// Other nodes of the process, by name; see the module docs.
#[derive(Debug, Default, Clone)]
pub struct NodeSources {
    nodes: BTreeMap<String, Arc<Node>>,
}

impl NodeSources {
    /// No sources yet.
    pub fn new() -> Self {
        NodeSources::default()
    }

    /// Makes `node` reachable as `address`.
    pub fn with(mut self, address: impl Into<String>, node: Arc<Node>) -> Self {
        self.nodes.insert(address.into(), node);
        self
    }
}

fn unreachable(address: &str) -> FetchError {
    FetchError::new(format!("no source node at {address}"), true)
}

/// Whether `topic` on `node` (reached as `address`) is still the topic a link recorded the id `expected` of (as a
/// Kafka source answers a fetch by topic id, ADR 0050): another id is a final error naming both — the topic was
/// deleted and created again, and its log is not the one mirrored — and no topic of that name a retryable one (a
/// missing answer is no evidence). Nothing is checked without an expected id.
pub async fn check_topic_id(
    node: &Node,
    address: &str,
    topic: &str,
    expected: Option<[u8; 16]>,
) -> Result<(), FetchError> {
    let Some(expected) = expected else {
        return Ok(());
    };
    match node.topic_id(topic).await {
        Some(found) if found == expected => Ok(()),
        Some(found) => Err(FetchError::new(
            format!(
                "topic {topic} at {address} has topic id {}, not {} as when this link was created: it was deleted \
                 and created again, and its log is not the one mirrored here (UNKNOWN_TOPIC_ID); nothing was \
                 truncated or appended",
                mirror_fsm::topic_id_text(found),
                mirror_fsm::topic_id_text(expected),
            ),
            false,
        )),
        None => Err(FetchError::new(
            format!(
                "topic {topic} (id {}) does not exist at {address} now: deleted, or not created again yet; \
                 waiting, nothing truncated",
                mirror_fsm::topic_id_text(expected),
            ),
            true,
        )),
    }
}

/// What `node`, reached as `address`, tells a mirror about itself and `topics` (a topic it lacks is an error
/// naming it): for every in-process implementation of [`Sources`].
pub async fn describe_node(
    node: &Node,
    address: &str,
    topics: &[String],
) -> Result<SourceDescription, FetchError> {
    let existing = node.topic_partitions().await;
    let mut partitions = BTreeMap::new();
    for topic in topics {
        let count = existing
            .get(topic)
            .ok_or_else(|| FetchError::new(format!("topic {topic} does not exist at {address}"), false))?;
        partitions.insert(topic.clone(), u32::try_from(*count).unwrap_or(u32::MAX));
    }
    let mut configs = BTreeMap::new();
    for topic in topics {
        if let Some(overrides) = node.topic_overrides(topic).await {
            configs.insert(topic.clone(), overrides);
        }
    }
    let mut topic_ids = BTreeMap::new();
    for topic in topics {
        if let Some(id) = node.topic_id(topic).await {
            topic_ids.insert(topic.clone(), id);
        }
    }
    Ok(SourceDescription {
        cluster_id: node.config().cluster_id.clone(),
        partitions,
        topic_ids,
        configs: SourceConfigs::Read(configs),
    })
}

#[async_trait]
impl Sources for NodeSources {
    async fn describe(&self, address: &str, topics: &[String]) -> Result<SourceDescription, FetchError> {
        let node = self.nodes.get(address).ok_or_else(|| unreachable(address))?;
        describe_node(node, address, topics).await
    }

    /// A node holds ACLs whether or not a broker in front of it authorizes with them: it always answers them.
    async fn acls(&self, address: &str) -> SourceAcls {
        let Some(node) = self.nodes.get(address) else {
            return SourceAcls::Failed(unreachable(address).to_string());
        };
        let acls = node
            .acls()
            .await
            .iter()
            .map(|binding| SourceAcl {
                resource_type: binding.resource_type.code(),
                resource_name: binding.resource_name.clone(),
                pattern_type: binding.pattern_type.code(),
                principal: binding.principal.clone(),
                host: binding.host.clone(),
                operation: binding.operation.code(),
                permission: binding.permission.code(),
            })
            .collect();
        SourceAcls::Read {
            cluster_id: node.config().cluster_id.clone(),
            acls,
        }
    }

    async fn list_topics(&self, address: &str) -> Result<Vec<ListedTopic>, FetchError> {
        let node = self.nodes.get(address).ok_or_else(|| unreachable(address))?;
        Ok(node
            .topic_partitions()
            .await
            .into_keys()
            .map(|name| ListedTopic {
                internal: crate::node::reserved_topic_name(&name).is_some(),
                name,
            })
            .collect())
    }

    async fn group_offsets(&self, address: &str, topics: &[String]) -> Result<Vec<GroupOffset>, FetchError> {
        let node = self.nodes.get(address).ok_or_else(|| unreachable(address))?;
        Ok(node.committed_offsets_on(topics).await)
    }

    fn fetcher(&self, address: &str, topic: &str, partition: i32) -> Box<dyn Fetcher> {
        Box::new(NodeFetcher {
            address: address.to_owned(),
            node: self.nodes.get(address).cloned(),
            topic: topic.to_owned(),
            partition,
            last_stable: AtomicI64::new(-1),
            expected_topic_id: None,
        })
    }
}

/// One partition of another node as a mirror's source.
#[derive(Debug)]
pub struct NodeFetcher {
    address: String,
    node: Option<Arc<Node>>,
    topic: String,
    partition: i32,
    /// The source's last stable offset at the latest fetch (−1 before the first).
    last_stable: AtomicI64,
    /// The topic's id at the source when the link was created ([`Fetcher::expect_topic_id`]).
    expected_topic_id: Option<[u8; 16]>,
}

impl NodeFetcher {
    async fn slot(&self) -> Result<Arc<crate::PartitionSlot>, FetchError> {
        let node = self.node.as_ref().ok_or_else(|| unreachable(&self.address))?;
        check_topic_id(node, &self.address, &self.topic, self.expected_topic_id).await?;
        node.partition(&self.topic, self.partition).await.ok_or_else(|| {
            FetchError::new(
                format!(
                    "{}-{} does not exist at {}",
                    self.topic, self.partition, self.address
                ),
                false,
            )
        })
    }
}

fn closed() -> FetchError {
    FetchError::new("the source partition is closed".to_owned(), true)
}

fn retryable(error: impl std::fmt::Display) -> FetchError {
    FetchError::new(error.to_string(), true)
}

#[async_trait(?Send)]
impl Fetcher for NodeFetcher {
    async fn fetch(&mut self, from_offset: i64, max_bytes: usize) -> Result<FetchResponse, FetchError> {
        let slot = self.slot().await?;
        let guard = slot.lock().await;
        let source = &guard.as_ref().ok_or_else(closed)?.leader;
        let fetched = source
            .read(from_offset, max_bytes, Isolation::ReadCommitted)
            .await
            .map_err(FetchError::from_log_read)?;
        self.last_stable
            .store(source.last_stable_offset(), Ordering::Relaxed);
        let cluster_id = self
            .node
            .as_ref()
            .map(|node| node.config().cluster_id.clone())
            .unwrap_or_default();
        Ok(FetchResponse {
            source_cluster_id: cluster_id,
            batches: fetched.batches,
            buffers: fetched.buffers,
        })
    }

    async fn last_mirrored_offset(&mut self, mirrored_from: &str) -> Result<Option<i64>, FetchError> {
        let slot = self.slot().await?;
        let guard = slot.lock().await;
        let source = &guard.as_ref().ok_or_else(closed)?.leader;
        mirror_fsm::last_mirrored_offset(source, mirrored_from)
            .await
            .map_err(retryable)
    }

    async fn log_start_offset(&mut self) -> Result<i64, FetchError> {
        let slot = self.slot().await?;
        let guard = slot.lock().await;
        Ok(guard.as_ref().ok_or_else(closed)?.leader.log_start_offset())
    }

    async fn cluster_id(&mut self) -> Result<String, FetchError> {
        let node = self.node.as_ref().ok_or_else(|| unreachable(&self.address))?;
        check_topic_id(node, &self.address, &self.topic, self.expected_topic_id).await?;
        Ok(node.config().cluster_id.clone())
    }

    fn expect_topic_id(&mut self, topic_id: [u8; 16]) {
        self.expected_topic_id = Some(topic_id);
    }

    fn source_last_stable_offset(&self) -> Option<i64> {
        Some(self.last_stable.load(Ordering::Relaxed)).filter(|offset| *offset >= 0)
    }
}
