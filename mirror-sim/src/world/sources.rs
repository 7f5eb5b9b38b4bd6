//! The simulated network between clusters: [`SimSources`], the [`Sources`] a destination node's
//! `node::mirror::MirrorLinks` reach their source clusters through — the same link code `mirrorlog serve` runs,
//! with an in-process transport that applies the run's [`Strategy`] on the way.
//!
//! A mirror round is `serve`'s ([`SimSources::fetch_many`]: one request per source and round, answering every
//! partition within the round's limits); the per-partition [`Fetcher`] answers the alignment questions and a
//! partition's first fetch. A [`SimFetcher`] reads the source node's leader log up to its last stable offset (or its high watermark under
//! [`FetchBound::HighWatermark`]), applies the strategy's producer-id transform to every batch it returns, and
//! records the largest producer id it copied (for `barrier+advance`, which moves the destination's allocator past
//! it at the failover). It takes the source partition's lock without waiting: a source being written is a
//! retryable fetch error, as a busy remote source would be. The source's consumer group offsets are read from its
//! node's offset store, for the links' offset sync.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use mirror_fsm::{
    FetchError, FetchLimits, FetchResponse, FetchedPartition, Fetcher, GroupOffset, PartitionFetch,
    SourceDescription, Sources,
};
use node::Node;

use super::network::{Network, Passage};
use super::{FetchBound, SimClock};
use crate::strategy::Strategy;

/// What a destination's links learnt about a source's producer ids, by (source cluster, topic).
pub(super) type CopiedIds = Arc<Mutex<BTreeMap<(String, String), SourceIds>>>;

/// What one link learnt about its source's producer ids (ADR 0047).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SourceIds {
    /// The largest producer id it copied (−1: none).
    pub(super) highest_copied: i64,
    /// The source's report at the last fetch that reached it: every id the source issued is below this.
    pub(super) issued_below: i64,
}

impl SourceIds {
    /// The id the destination's allocator must move past so that it issues none the source issued or the link
    /// copied (`None`: nothing to move past).
    pub(super) fn advance_past(self) -> Option<i64> {
        let past = self.highest_copied.max(self.issued_below.saturating_sub(1));
        (past >= 0).then_some(past)
    }

    /// What both `self` and `other` learnt.
    pub(super) fn merged(self, other: SourceIds) -> SourceIds {
        SourceIds {
            highest_copied: self.highest_copied.max(other.highest_copied),
            issued_below: self.issued_below.max(other.issued_below),
        }
    }
}

/// Every cluster of the run as a source, by name, seen from one destination; see the module docs.
pub(super) struct SimSources {
    pub(super) nodes: BTreeMap<String, Arc<Node>>,
    pub(super) bound: FetchBound,
    pub(super) strategy: Strategy,
    /// Where this destination's fetchers record the ids they copied.
    pub(super) copied_ids: CopiedIds,
    /// The network every request crosses.
    pub(super) network: Network,
    /// The run's clock (a slow answer moves it).
    pub(super) clock: Arc<SimClock>,
    /// Describe the sources without their topic ids, as a source without them answers (the
    /// `TopicIdsIgnored` mutant).
    pub(super) without_topic_ids: bool,
}

fn unreachable(address: &str) -> FetchError {
    FetchError::new(format!("no cluster named {address}"), true)
}

fn retryable(error: impl std::fmt::Display) -> FetchError {
    FetchError::new(error.to_string(), true)
}

#[async_trait]
impl Sources for SimSources {
    async fn describe(&self, address: &str, topics: &[String]) -> Result<SourceDescription, FetchError> {
        let node = self.nodes.get(address).ok_or_else(|| unreachable(address))?;
        self.network.cross(address, "Metadata", &self.clock)?;
        let mut description = node::mirror::describe_node(node, address, topics).await?;
        if self.without_topic_ids {
            description.topic_ids.clear();
        }
        Ok(description)
    }

    async fn group_offsets(&self, address: &str, topics: &[String]) -> Result<Vec<GroupOffset>, FetchError> {
        let node = self.nodes.get(address).ok_or_else(|| unreachable(address))?;
        Ok(node.committed_offsets_on(topics).await)
    }

    fn fetcher(&self, address: &str, topic: &str, partition: i32) -> Box<dyn Fetcher> {
        Box::new(self.sim_fetcher(address, topic, partition))
    }

    /// One round as `serve` fetches it: one Fetch request to the source (a simulated cluster is one broker), which
    /// meets the network once — an error fails every partition of the round — and answers each partition within
    /// `limits` (partitions after the round's total is spent come back empty; a first batch larger than the
    /// limits comes whole, as Kafka sends it).
    async fn fetch_many(
        &self,
        address: &str,
        wanted: &[PartitionFetch],
        limits: FetchLimits,
    ) -> Option<Vec<Result<FetchedPartition, FetchError>>> {
        let passage = match self.network.cross(address, "Fetch", &self.clock) {
            Ok(passage) => passage,
            Err(error) => return Some(wanted.iter().map(|_| Err(error.clone())).collect()),
        };
        let mut left = limits.total;
        let mut answers = Vec::with_capacity(wanted.len());
        for fetch in wanted {
            let mut fetcher = self.sim_fetcher(address, &fetch.topic, fetch.partition);
            fetcher.expected_topic_id = fetch.topic_id;
            let max_bytes = limits.per_partition.min(left);
            let answer = if max_bytes == 0 {
                Ok((
                    FetchResponse {
                        source_cluster_id: address.to_owned(),
                        batches: Vec::new(),
                        buffers: record_format::BatchBuffers::new(Vec::new()),
                    },
                    None,
                ))
            } else {
                fetcher
                    .read_at(fetch.offset, max_bytes, passage)
                    .await
                    .map(|(response, end)| (response, Some(end)))
            };
            answers.push(answer.map(|(response, last_stable_offset)| {
                let bytes: usize = response.batches.iter().map(|batch| batch.as_bytes().len()).sum();
                left = left.saturating_sub(bytes);
                FetchedPartition {
                    response,
                    last_stable_offset,
                }
            }));
        }
        Some(answers)
    }
}

impl SimSources {
    /// The fetcher of one partition at `address`.
    fn sim_fetcher(&self, address: &str, topic: &str, partition: i32) -> SimFetcher {
        SimFetcher {
            source: self.nodes.get(address).cloned(),
            source_cluster_id: address.to_owned(),
            topic: topic.to_owned(),
            partition,
            bound: self.bound,
            strategy: self.strategy,
            copied_ids: Arc::clone(&self.copied_ids),
            network: self.network.clone(),
            clock: Arc::clone(&self.clock),
            expected_topic_id: None,
        }
    }
}

/// One partition of a source cluster, fetched over the simulated network; see the module docs.
pub(super) struct SimFetcher {
    source: Option<Arc<Node>>,
    source_cluster_id: String,
    topic: String,
    partition: i32,
    bound: FetchBound,
    strategy: Strategy,
    copied_ids: CopiedIds,
    network: Network,
    clock: Arc<SimClock>,
    /// The topic's id at the source when the link was created: asked by it, as `serve`'s rounds ask a source
    /// with topic ids (a topic deleted and created again is another topic; ADR 0050).
    expected_topic_id: Option<[u8; 16]>,
}

impl SimFetcher {
    /// The request named `what` crosses the network to the source.
    fn cross(&self, what: &str) -> Result<Passage, FetchError> {
        self.network.cross(&self.source_cluster_id, what, &self.clock)
    }

    /// Runs `read` on the source's leader log, locked without waiting.
    async fn with_source<T>(
        &self,
        read: impl AsyncFnOnce(&partition_log::PartitionLog) -> Result<T, FetchError>,
    ) -> Result<T, FetchError> {
        let node = self
            .source
            .as_ref()
            .ok_or_else(|| unreachable(&self.source_cluster_id))?;
        node::mirror::check_topic_id(node, &self.source_cluster_id, &self.topic, self.expected_topic_id)
            .await?;
        let slot = node.partition(&self.topic, self.partition).await.ok_or_else(|| {
            FetchError::new(
                format!(
                    "{}-{} does not exist on {}",
                    self.topic, self.partition, self.source_cluster_id
                ),
                false,
            )
        })?;
        let guard = slot
            .try_lock()
            .map_err(|_| retryable("the source log is being written"))?;
        let replicas = guard
            .as_ref()
            .ok_or_else(|| retryable("the source partition is closed"))?;
        read(&replicas.leader).await
    }
}

impl SimFetcher {
    /// One fetch from `from_offset`, the network already crossed (`passage`): the answer, with the producer-id
    /// transform applied and the ids it copied recorded, and the source's bound (its last stable offset, or its
    /// high watermark under [`FetchBound::HighWatermark`]) as the answer reports it.
    async fn read_at(
        &self,
        from_offset: i64,
        max_bytes: usize,
        passage: Passage,
    ) -> Result<(FetchResponse, i64), FetchError> {
        let (isolation, bound) = (self.bound.isolation(), self.bound);
        let (mut fetched, end) = self
            .with_source(async |source| {
                let end = match bound {
                    FetchBound::LastStableOffset => source.last_stable_offset(),
                    FetchBound::HighWatermark => source.high_watermark(),
                };
                let fetched = source
                    .read(from_offset, max_bytes, isolation)
                    .await
                    .map_err(FetchError::from_log_read)?;
                Ok((fetched, end))
            })
            .await?;
        if passage == Passage::FirstBatchOnly && fetched.batches.len() > 1 {
            fetched.batches.truncate(1);
            fetched.buffers = record_format::BatchBuffers::new(Vec::new());
        }
        let mut response = FetchResponse {
            source_cluster_id: self.source_cluster_id.clone(),
            batches: fetched.batches,
            buffers: fetched.buffers,
        };
        let mut copied = -1;
        for batch in &mut response.batches {
            let mapped = self.strategy.map_producer_id(batch.producer_id());
            if mapped != batch.producer_id() {
                batch.set_producer(mapped, batch.producer_epoch(), batch.base_sequence());
            }
            copied = copied.max(batch.producer_id());
        }
        // The source's report travels with its answer: an id it issued after this fetch is not in it.
        let issued_below = match &self.source {
            Some(node) => node.producer_ids_issued_below().await,
            None => 0,
        };
        let mut ids = self.copied_ids.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = ids
            .entry((self.source_cluster_id.clone(), self.topic.clone()))
            .or_insert(SourceIds {
                highest_copied: -1,
                issued_below: 0,
            });
        entry.highest_copied = entry.highest_copied.max(copied);
        entry.issued_below = entry.issued_below.max(issued_below);
        Ok((response, end))
    }
}

#[async_trait(?Send)]
impl Fetcher for SimFetcher {
    async fn fetch(&mut self, from_offset: i64, max_bytes: usize) -> Result<FetchResponse, FetchError> {
        let passage = self.cross("Fetch")?;
        Ok(self.read_at(from_offset, max_bytes, passage).await?.0)
    }

    async fn last_mirrored_offset(&mut self, mirrored_from: &str) -> Result<Option<i64>, FetchError> {
        self.cross("the last mirrored offset")?;
        if self.network.is_kafka_like(&self.source_cluster_id) {
            // Apache Kafka closes the connection on the private key; `mirror-link` reads that as "never mirrored
            // from us" (a new session's alignment only: a resumed one compares batches instead).
            return Ok(None);
        }
        self.with_source(async |source| {
            mirror_fsm::last_mirrored_offset(source, mirrored_from)
                .await
                .map_err(retryable)
        })
        .await
    }

    async fn log_start_offset(&mut self) -> Result<i64, FetchError> {
        self.cross("ListOffsets")?;
        self.with_source(async |source| Ok(source.log_start_offset()))
            .await
    }

    async fn cluster_id(&mut self) -> Result<String, FetchError> {
        // Reachable or not, as a fetch finds it.
        self.cross("Metadata")?;
        self.with_source(async |_| Ok(())).await?;
        Ok(self.source_cluster_id.clone())
    }

    fn expect_topic_id(&mut self, topic_id: [u8; 16]) {
        self.expected_topic_id = Some(topic_id);
    }
}
