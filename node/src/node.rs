//! The node's state: topics and their partition logs, the transaction coordinator, the group offset store,
//! and the operations several APIs share (creating topics, writing transaction markers, housekeeping, closing).
//!
//! **Replicas.** A node opened with follower stores keeps, for every topic partition, a follower log on each
//! (in-cluster replication as `partition_log::ReplicaSet` does it): each acknowledged write — a produce, a marker —
//! waits until every follower has caught up (acks=all with in-sync followers) and the high watermark follows the
//! slowest. `serve` has no followers: its high watermark follows its own log end.
//!
//! **Locks.** Each partition (leader and followers) has its own lock; the coordinator and the offset store have one each. The order
//! is always coordinator → partition → offsets, so EndTxn (which writes markers while holding the coordinator)
//! cannot deadlock with a produce. A storage call under a partition's lock blocks only that partition: fsyncs and
//! database calls run on the blocking pool (ADR 0010), never on the runtime's threads.

use std::collections::BTreeMap;
use std::sync::Arc;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI32, Ordering};

use kafka_types::{CoordinatorEpoch, KafkaError, TransactionalId};
use partition_log::{LogConfig, PartitionLog, ReplicaSet};
use producer_state::{PsmConfig, StateSummary};
use storage::{PartitionId, Storage};
use tokio::sync::{Mutex, RwLock};
use topic_config::{Described, Overrides};
use txn_coordinator::{CoordinatorConfig, DurableCoordinator, MarkerFailure, MarkerRequest, Outcome};

use crate::config::NodeConfig;
use crate::mirror::registry::MIRROR_LINKS_PARTITION;
use crate::offsets::{GroupOffsets, OFFSETS_PARTITION};
use crate::topic_configs::{TopicConfigs, TOPIC_CONFIGS_PARTITION};
use crate::{Clock, NodeError};

/// The internal partition holding the transaction coordinator's log.
pub const TXN_STATE_PARTITION: &str = "__transaction_state";

/// KRaft's metadata log, which no client may create: Kafka refuses it before it authorizes.
pub const CLUSTER_METADATA_TOPIC: &str = "__cluster_metadata";

/// Why a topic may not be created under `name`, if it may not: Kafka's internal topic names (serve keeps that
/// state in internal logs of its own, one of them under `__transaction_state`) and the names of serve's own
/// internal logs (`__mirrorlog_…`). Any other name beginning with `__` is a topic like any other, as in Kafka.
pub fn reserved_topic_name(name: &str) -> Option<String> {
    const KAFKA_INTERNAL: [&str; 4] = [
        CLUSTER_METADATA_TOPIC,
        "__consumer_offsets",
        "__share_group_state",
        TXN_STATE_PARTITION,
    ];
    (KAFKA_INTERNAL.contains(&name) || name.starts_with("__mirrorlog_"))
        .then(|| format!("Creation of internal topic {name} is prohibited."))
}

/// Whether a topic `name` of `partitions` partitions may be created beside `topics`: the checks every creation
/// makes, and a creation only validated makes too.
fn creatable<T>(name: &str, partitions: u32, topics: &BTreeMap<String, T>) -> Result<(), KafkaError> {
    if reserved_topic_name(name).is_some() {
        return Err(KafkaError::InvalidRequest);
    }
    if partitions == 0 || partitions > MAX_PARTITIONS {
        return Err(KafkaError::InvalidPartitions);
    }
    if topics.contains_key(name) {
        return Err(KafkaError::TopicAlreadyExists);
    }
    PartitionId::new(name, 0).map_err(|_| KafkaError::InvalidTopic)?;
    Ok(())
}

/// The topic transaction markers name for group offsets (Kafka's).
const CONSUMER_OFFSETS: &str = "__consumer_offsets";

/// How many rounds a marker is re-sent before the transaction is left to housekeeping.
const MARKER_ROUNDS: usize = 3;

/// The most partitions a topic may have here.
pub(crate) const MAX_PARTITIONS: u32 = 10_000;

/// One partition's replicas (the leader, and the followers when the node has follower stores), or `None` once
/// the node has closed it.
pub type PartitionSlot = Mutex<Option<ReplicaSet>>;

/// A transaction marker the coordinator's driver tried to write, as [`Node::take_delivered_markers`] reports it.
#[cfg(feature = "simulator")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveredMarker {
    /// The transaction it ends.
    pub transactional_id: TransactionalId,
    /// The partition it was written to.
    pub partition: PartitionId,
    /// COMMIT or ABORT.
    pub commit: bool,
    /// The marker batch's timestamp.
    pub timestamp: i64,
    /// Why the partition refused it (`None`: written).
    pub refused: Option<KafkaError>,
}

/// The host and port clients reach this node at through one listener (Kafka's `advertised.listeners`): Metadata,
/// DescribeCluster and FindCoordinator answer the endpoint of the listener a request came in on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The host name or address.
    pub host: String,
    /// The port.
    pub port: i32,
}

/// One cluster node; see the module docs.
pub struct Node {
    pub(crate) config: NodeConfig,
    pub(crate) clock: Arc<dyn Clock>,
    /// The host and port Metadata and FindCoordinator answer when the caller names no listener's.
    pub(crate) advertised: Endpoint,
    pub(crate) storage: Box<dyn Storage>,
    /// One store per follower replica (empty: the leader is the only replica).
    pub(crate) follower_stores: Vec<Box<dyn Storage>>,
    log_config: LogConfig,
    /// The followers' configuration: the leader's, with `NodeConfig::follower_cluster_id` when it is set.
    follower_log_config: LogConfig,
    pub(crate) topics: RwLock<BTreeMap<String, Vec<Arc<PartitionSlot>>>>,
    pub(crate) coordinator: Mutex<DurableCoordinator>,
    /// The coordinator's epoch: it grows each time the coordinator is reloaded from its log.
    coordinator_epoch: AtomicI32,
    /// Markers delivered since the last [`Node::take_delivered_markers`] (kept only when the config asks).
    #[cfg(feature = "simulator")]
    delivered: Mutex<Vec<DeliveredMarker>>,
    pub(crate) offsets: Mutex<GroupOffsets>,
    /// Consumer groups' members and generations (in memory).
    pub(crate) membership: crate::membership::Membership,
    /// When committed offsets were last looked at for expiry (`offsets.retention.check.interval.ms`).
    offsets_checked_at: std::sync::atomic::AtomicI64,
    /// The internal partition whose metadata holds the mirror links (`crate::mirror::registry`).
    pub(crate) mirror_registry: Mutex<Option<PartitionLog>>,
    /// Topics' config overrides and the settings produce enforces (`crate::topic_configs`). Locked after
    /// `topics` where both are held.
    pub(crate) topic_configs: RwLock<TopicConfigs>,
    /// SCRAM credentials and ACLs (`crate::users`).
    pub(crate) users: RwLock<crate::users::SecurityStore>,
    /// Long-polling fetches, woken by the partitions they wait on (`crate::wakeups`).
    pub(crate) fetch_wakeups: crate::wakeups::FetchWakeups,
    /// The log cleaner's I/O budget (`log.cleaner.io.max.bytes.per.second`), shared by every pass.
    pub(crate) cleaner_throttle: crate::cleaner_throttle::CleanerThrottle,
    /// Partitions whose storage opening repaired something (a torn tail cut, a segment dropped, an index
    /// rebuilt, …), with what it did.
    repairs: Vec<(PartitionId, storage::OpenReport)>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("advertised", &self.advertised)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// Opens the storage, every partition log (recovering those not closed cleanly), the coordinator (re-sending
    /// the markers of transactions it was completing) and the offset store; creates the configured topics.
    /// `advertised` is the host and port Metadata and FindCoordinator answer; the clock is the wall clock.
    pub async fn open(config: NodeConfig, advertised: (String, i32)) -> Result<Self, NodeError> {
        let storage = config.storage.open()?;
        Self::open_on(config, advertised, storage, Arc::new(crate::SystemClock)).await
    }

    /// Like [`Self::open`], over a store the caller opened (tests wrap one to slow or fail it; the simulator
    /// gives each node its own) and with the caller's clock; the storage config then only says what durability
    /// acknowledged writes wait for.
    pub async fn open_on(
        config: NodeConfig,
        advertised: (String, i32),
        storage: Box<dyn Storage>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, NodeError> {
        Self::open_replicated(config, advertised, storage, Vec::new(), clock).await
    }

    /// Like [`Self::open_on`], with a follower replica of every topic partition on each of `follower_stores`
    /// (see the module docs).
    pub async fn open_replicated(
        config: NodeConfig,
        advertised: (String, i32),
        storage: Box<dyn Storage>,
        follower_stores: Vec<Box<dyn Storage>>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, NodeError> {
        let now = clock.now_ms();
        let log_config = LogConfig {
            durability: config.storage.durability(),
            producer_state: PsmConfig {
                producer_id_expiration_ms: config.producer_id_expiration_ms,
                max_transaction_timeout_ms: config.max_transaction_timeout_ms,
                cluster_id: Some(config.cluster_id.clone()),
                barrier_scope: config.barrier_scope,
                ..PsmConfig::default()
            },
            ..LogConfig::default()
        };
        #[cfg_attr(not(feature = "simulator"), allow(unused_mut))]
        let mut follower_log_config = log_config.clone();
        #[cfg(feature = "simulator")]
        if let Some(id) = &config.follower_cluster_id {
            follower_log_config.producer_state.cluster_id = Some(id.clone());
        }
        let mut topics: BTreeMap<String, Vec<Arc<PartitionSlot>>> = BTreeMap::new();
        let mut internal = BTreeMap::new();
        let mut repairs = Vec::new();
        let mut follower_partitions = Vec::new();
        for store in &follower_stores {
            follower_partitions.push(store.list().await?.into_iter().collect::<BTreeSet<_>>());
        }
        for id in storage.list().await? {
            if [
                TXN_STATE_PARTITION,
                OFFSETS_PARTITION,
                MIRROR_LINKS_PARTITION,
                TOPIC_CONFIGS_PARTITION,
                crate::users::SECURITY_PARTITION,
            ]
            .contains(&id.topic())
            {
                internal.insert(id.topic().to_owned(), id);
                continue;
            }
            let (log, report) = PartitionLog::open(storage.open(&id).await?, log_config.clone(), now).await?;
            if !report.storage.is_clean() {
                repairs.push((id.clone(), report.storage));
            }
            let mut followers = Vec::new();
            for (store, existing) in follower_stores.iter().zip(&follower_partitions) {
                let follower_storage = if existing.contains(&id) {
                    store.open(&id).await?
                } else {
                    store.create(&id).await?
                };
                followers.push(
                    PartitionLog::open(follower_storage, follower_log_config.clone(), now)
                        .await?
                        .0,
                );
            }
            let mut replicas = ReplicaSet::new(log, followers);
            // Followers catch up; with none, everything the leader holds is committed.
            replicas.replicate(now).await?;
            let partitions = topics.entry(id.topic().to_owned()).or_default();
            if id.partition() as usize != partitions.len() {
                return Err(NodeError::Topic {
                    name: id.topic().to_owned(),
                    reason: format!("partition {} found without the ones before it", id.partition()),
                });
            }
            partitions.push(Arc::new(Mutex::new(Some(replicas))));
        }
        let open_internal = |name: &str| {
            let existing = internal.get(name).cloned();
            let storage = &storage;
            let name = name.to_owned();
            async move {
                match existing {
                    Some(id) => storage.open(&id).await,
                    None => storage.create(&PartitionId::new(name, 0)?).await,
                }
            }
        };
        let coordinator_config = CoordinatorConfig {
            max_transaction_timeout_ms: config.max_transaction_timeout_ms,
            transactional_id_expiration_ms: config.transactional_id_expiration_ms,
        };
        let (coordinator, markers) = DurableCoordinator::open(
            open_internal(TXN_STATE_PARTITION).await?,
            coordinator_config,
            CoordinatorEpoch(0),
        )
        .await?;
        let offsets = GroupOffsets::open(
            open_internal(OFFSETS_PARTITION).await?,
            config.storage.durability(),
            clock.clone(),
        )
        .await?;
        let (mirror_registry, _) = PartitionLog::open(
            open_internal(MIRROR_LINKS_PARTITION).await?,
            log_config.clone(),
            now,
        )
        .await?;
        let (topic_config_store, _) = PartitionLog::open(
            open_internal(TOPIC_CONFIGS_PARTITION).await?,
            log_config.clone(),
            now,
        )
        .await?;
        let topic_configs = TopicConfigs::open(topic_config_store, &config).await?;
        let users = crate::users::SecurityStore::open(
            crate::users::open_store(
                storage.as_ref(),
                internal.get(crate::users::SECURITY_PARTITION),
                log_config.clone(),
                now,
            )
            .await?,
        )
        .await?;
        let membership = crate::membership::Membership::restore(
            offsets.stored_groups().clone(),
            now,
            config.group_initial_rebalance_delay_ms,
        );
        let broker = Node {
            mirror_registry: Mutex::new(Some(mirror_registry)),
            topic_configs: RwLock::new(topic_configs),
            users: RwLock::new(users),
            clock,
            advertised: Endpoint {
                host: advertised.0,
                port: advertised.1,
            },
            storage,
            follower_stores,
            coordinator_epoch: AtomicI32::new(0),
            #[cfg(feature = "simulator")]
            delivered: Mutex::new(Vec::new()),
            log_config,
            follower_log_config,
            topics: RwLock::new(topics),
            coordinator: Mutex::new(coordinator),
            offsets: Mutex::new(offsets),
            membership,
            offsets_checked_at: std::sync::atomic::AtomicI64::new(now),
            fetch_wakeups: crate::wakeups::FetchWakeups::default(),
            cleaner_throttle: crate::cleaner_throttle::CleanerThrottle::new(
                config.cleaner_io_max_bytes_per_second,
            ),
            config,
            repairs,
        };
        // Deletions a crash interrupted are finished before anything is served.
        let interrupted: Vec<String> = broker
            .topic_configs
            .read()
            .await
            .deleting()
            .iter()
            .cloned()
            .collect();
        for name in interrupted {
            let slots = broker.topics.write().await.remove(&name).unwrap_or_default();
            for slot in &slots {
                drop(slot.lock().await.take());
            }
            broker
                .finish_deletion(&name, u32::try_from(slots.len()).unwrap_or(u32::MAX))
                .await?;
        }
        // Topics from a data directory written before topic ids were kept get theirs now.
        let held: std::collections::BTreeSet<String> = broker.topics.read().await.keys().cloned().collect();
        broker
            .topic_configs
            .write()
            .await
            .assign_missing_ids(&held)
            .await?;
        for (name, partitions) in broker.config.topics.clone() {
            match broker.create_topic(&name, partitions).await {
                Ok(()) | Err(KafkaError::TopicAlreadyExists) => {}
                Err(error) => {
                    return Err(NodeError::Topic {
                        name,
                        reason: format!("cannot be created ({error})"),
                    })
                }
            }
        }
        let mut coordinator = broker.coordinator.lock().await;
        broker.deliver_markers(&mut coordinator, markers).await?;
        drop(coordinator);
        Ok(broker)
    }

    /// The node's clock.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The endpoint Metadata, DescribeCluster and FindCoordinator answer for a caller that came in through no
    /// listener of its own (the first listener's).
    pub fn advertised(&self) -> &Endpoint {
        &self.advertised
    }

    /// The node's settings.
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// The partition log of `topic`/`partition`, if it exists.
    pub async fn partition(&self, topic: &str, partition: i32) -> Option<Arc<PartitionSlot>> {
        let topics = self.topics.read().await;
        let index = usize::try_from(partition).ok()?;
        topics.get(topic)?.get(index).cloned()
    }

    /// Why `slot`, looked up as `topic`/`partition`, held no log: UNKNOWN_TOPIC_OR_PARTITION when the topic was
    /// deleted (or deleted and created again) since — Kafka's answer for a partition it no longer has — else
    /// KAFKA_STORAGE_ERROR (the log went offline). Call it without holding the slot's lock.
    pub(crate) async fn missing_log_error(
        &self,
        topic: &str,
        partition: i32,
        slot: &Arc<PartitionSlot>,
    ) -> KafkaError {
        match self.partition(topic, partition).await {
            Some(current) if Arc::ptr_eq(&current, slot) => KafkaError::KafkaStorageError,
            _ => KafkaError::UnknownTopicOrPartition,
        }
    }

    /// Every consumer group's committed offsets on partitions of `topics` (what a mirror of this node copies
    /// with the data), by group, topic and partition.
    pub async fn committed_offsets_on(&self, topics: &[String]) -> Vec<mirror_fsm::GroupOffset> {
        let topics: std::collections::BTreeSet<&str> = topics.iter().map(String::as_str).collect();
        let offsets = self.offsets.lock().await;
        offsets
            .on_topics(&topics)
            .into_iter()
            .map(|(group, topic, partition, committed)| mirror_fsm::GroupOffset {
                group: group.to_owned(),
                topic: topic.to_owned(),
                partition,
                offset: committed.offset,
                metadata: committed.metadata.clone(),
            })
            .collect()
    }

    /// The partition count of each topic (internal partitions are not topics).
    pub async fn topic_partitions(&self) -> BTreeMap<String, usize> {
        let topics = self.topics.read().await;
        topics
            .iter()
            .map(|(name, partitions)| (name.clone(), partitions.len()))
            .collect()
    }

    /// The topic id of `topic` (KIP-516; see `crate::topic_configs`), if the node holds it.
    pub async fn topic_id(&self, topic: &str) -> Option<[u8; 16]> {
        // The record may name a topic whose creation failed after it was written: only a held topic has an id.
        let topics = self.topics.read().await;
        let id = self.topic_configs.read().await.topic_id(topic);
        id.filter(|_| topics.contains_key(topic))
    }

    /// The topic whose id is `id`, if the node holds one.
    pub async fn topic_named_by(&self, id: [u8; 16]) -> Option<String> {
        let topics = self.topics.read().await;
        let name = self
            .topic_configs
            .read()
            .await
            .topic_named_by(id)
            .map(str::to_owned);
        name.filter(|name| topics.contains_key(name))
    }

    /// Creates a topic with `partitions` partitions and Kafka's default configs.
    pub async fn create_topic(&self, name: &str, partitions: u32) -> Result<(), KafkaError> {
        self.create_topic_with(name, partitions, false, Overrides::default())
            .await
            .map(|_| ())
    }

    /// Creates a topic with `partitions` partitions and the config `overrides` (recorded before any partition
    /// exists: see `crate::topic_configs`); answers the new topic's id.
    pub async fn create_topic_with_configs(
        &self,
        name: &str,
        partitions: u32,
        overrides: Overrides,
    ) -> Result<[u8; 16], KafkaError> {
        self.create_topic_with(name, partitions, false, overrides).await
    }

    /// Every config a topic created now with `overrides` would have, in name order, with its value and source
    /// (what CreateTopics v5+ answers, as DescribeConfigs would describe the topic).
    pub async fn configs_of_new_topic(&self, overrides: &Overrides) -> Vec<Described> {
        let configs = self.topic_configs.read().await;
        let mut described = overrides.describe(configs.broker(), None);
        described.sort_by(|a, b| a.value.name.cmp(&b.value.name));
        described
    }

    /// Whether a topic `name` of `partitions` partitions could be created now, by the checks every creation makes
    /// (CreateTopics asks before it creates, and for `validate_only`).
    pub async fn check_new_topic(&self, name: &str, partitions: u32) -> Result<(), KafkaError> {
        creatable(name, partitions, &*self.topics.read().await)
    }

    /// Each held topic whose name has a `.` or a `_`, by that name with every `.` made `_` (Kafka's metric names
    /// make such names alike, and its CreateTopics refuses a new one alike to an existing one).
    pub async fn topics_by_collision_name(&self) -> BTreeMap<String, String> {
        self.topics
            .read()
            .await
            .keys()
            .filter(|name| name.contains(['.', '_']))
            .map(|name| (name.replace('.', "_"), name.clone()))
            .collect()
    }

    /// A fresh topic id, which no topic holds: what CreateTopics v7 answers for a creation it only validated, as
    /// Kafka draws one.
    pub async fn unused_topic_id(&self) -> Result<[u8; 16], KafkaError> {
        self.topic_configs.write().await.unused_id().map_err(|error| {
            tracing::error!(%error, "drawing a topic id failed");
            KafkaError::KafkaStorageError
        })
    }

    /// Creates a topic whose partitions are read-only from the start (durably, before any client can see the
    /// topic): a mirror topic, which its mirror link then aligns and fills.
    pub async fn create_read_only_topic(&self, name: &str, partitions: u32) -> Result<(), KafkaError> {
        self.create_topic_with(name, partitions, true, Overrides::default())
            .await
            .map(|_| ())
    }

    /// Creates a read-only topic (a mirror topic) with the config `overrides` its source's topic has.
    pub async fn create_read_only_topic_with_configs(
        &self,
        name: &str,
        partitions: u32,
        overrides: Overrides,
    ) -> Result<(), KafkaError> {
        self.create_topic_with(name, partitions, true, overrides)
            .await
            .map(|_| ())
    }

    /// Creates a topic; answers its id.
    async fn create_topic_with(
        &self,
        name: &str,
        partitions: u32,
        read_only: bool,
        overrides: Overrides,
    ) -> Result<[u8; 16], KafkaError> {
        let mut topics = self.topics.write().await;
        creatable(name, partitions, &topics)?;
        let id = match self.topic_configs.write().await.create(name, overrides).await {
            Ok(id) => id,
            Err(error) => {
                tracing::error!(topic = name, %error, "recording a topic's configs failed");
                return Err(KafkaError::KafkaStorageError);
            }
        };
        let mut logs = Vec::new();
        for partition in 0..partitions {
            logs.push(self.create_partition(name, partition, read_only).await?);
        }
        topics.insert(name.to_owned(), logs);
        Ok(id)
    }

    /// Adds partitions to the topic `name` until it has `partitions`. Counts only grow, as in Kafka's
    /// CreatePartitions; the new partitions are created in order, each durably, so a crash part-way leaves a topic
    /// of fewer partitions, never one with a gap.
    pub async fn add_partitions(&self, name: &str, partitions: u32) -> Result<(), KafkaError> {
        self.add_partitions_with(name, partitions, false).await
    }

    /// Like [`Self::add_partitions`], read-only from the start: a mirror link following its source's topic, which
    /// gained partitions.
    pub async fn add_read_only_partitions(&self, name: &str, partitions: u32) -> Result<(), KafkaError> {
        self.add_partitions_with(name, partitions, true).await
    }

    async fn add_partitions_with(
        &self,
        name: &str,
        partitions: u32,
        read_only: bool,
    ) -> Result<(), KafkaError> {
        if partitions > MAX_PARTITIONS {
            return Err(KafkaError::InvalidPartitions);
        }
        let mut topics = self.topics.write().await;
        let logs = topics.get_mut(name).ok_or(KafkaError::UnknownTopicOrPartition)?;
        let held = u32::try_from(logs.len()).unwrap_or(u32::MAX);
        if partitions <= held {
            return Err(KafkaError::InvalidPartitions);
        }
        for partition in held..partitions {
            logs.push(self.create_partition(name, partition, read_only).await?);
        }
        Ok(())
    }

    /// Creates one partition of `name` (read-only from the start when `read_only`).
    async fn create_partition(
        &self,
        name: &str,
        partition: u32,
        read_only: bool,
    ) -> Result<Arc<PartitionSlot>, KafkaError> {
        let id = PartitionId::new(name, partition).map_err(|_| KafkaError::InvalidTopic)?;
        let created = match self.create_replicas(&id).await {
            Ok(mut replicas) if read_only => replicas
                .leader
                .set_read_only(true)
                .await
                .map(|()| replicas)
                .map_err(NodeError::Log),
            created => created,
        };
        match created {
            Ok(replicas) => Ok(Arc::new(Mutex::new(Some(replicas)))),
            Err(error) => {
                // The client hears KAFKA_STORAGE_ERROR; the operator reads why (a full disk, a descriptor
                // limit with its numbers, …).
                tracing::error!(partition = %id, %error, "creating a partition failed");
                Err(KafkaError::KafkaStorageError)
            }
        }
    }

    /// A new partition's leader and followers.
    async fn create_replicas(&self, id: &PartitionId) -> Result<ReplicaSet, NodeError> {
        let now = self.clock.now_ms();
        let (leader, _) =
            PartitionLog::open(self.storage.create(id).await?, self.log_config.clone(), now).await?;
        let mut followers = Vec::new();
        for store in &self.follower_stores {
            followers.push(
                PartitionLog::open(store.create(id).await?, self.follower_log_config.clone(), now)
                    .await?
                    .0,
            );
        }
        Ok(ReplicaSet::new(leader, followers))
    }

    /// What opening the topic partitions repaired, partition by partition (empty after a clean shutdown).
    pub fn repairs(&self) -> &[(PartitionId, storage::OpenReport)] {
        &self.repairs
    }

    /// Tells the long-polling fetches waiting on `topic`'s `partition` that it changed (records appended, the
    /// high watermark or the last stable offset moved).
    pub fn wake_fetches(&self, topic: &str, partition: i32) {
        self.fetch_wakeups.wake(topic, partition);
    }

    /// How many long-polling fetches wait for records on `topic`'s `partition` (a test waits on it to know a
    /// fetch is parked before it writes).
    pub fn long_polls_waiting_on(&self, topic: &str, partition: i32) -> usize {
        self.fetch_wakeups.waiting_on(topic, partition)
    }

    /// Makes an outcome durable, writes its markers (completing the transactions) and returns its answer; a
    /// storage failure of the coordinator's log is `COORDINATOR_NOT_AVAILABLE`-like: the answer does not go out.
    pub async fn coordinate<T>(
        &self,
        coordinator: &mut DurableCoordinator,
        outcome: Outcome<T>,
    ) -> Result<T, KafkaError> {
        let (answer, markers) = match coordinator.apply(outcome, self.clock.now_ms()).await {
            Ok(applied) => applied,
            Err(_) => return Err(KafkaError::UnknownServerError),
        };
        if self.deliver_markers(coordinator, markers).await.is_err() {
            return Err(KafkaError::UnknownServerError);
        }
        answer
    }

    /// Writes markers (COORDINATOR origin) and reports each back to the coordinator, re-sending retriable
    /// failures a bounded number of rounds. A marker for `__consumer_offsets` ends the producer's staged offset
    /// commits instead. Each data partition's high watermark moves past its marker once it is durable.
    pub async fn deliver_markers(
        &self,
        coordinator: &mut DurableCoordinator,
        mut markers: Vec<MarkerRequest>,
    ) -> Result<(), NodeError> {
        for _round in 0..MARKER_ROUNDS {
            if markers.is_empty() {
                break;
            }
            let mut resent = Vec::new();
            for marker in std::mem::take(&mut markers) {
                let written = self.write_marker(&marker).await;
                let now = self.clock.now_ms();
                let outcome = match written {
                    Ok(()) => coordinator.coordinator().marker_written(
                        &marker.transactional_id,
                        &marker.partition,
                        now,
                    ),
                    Err(failure) => coordinator.coordinator().marker_failed(
                        &marker.transactional_id,
                        &marker.partition,
                        failure,
                        now,
                    ),
                };
                let (_answer, more) = coordinator.apply(outcome, now).await?;
                resent.extend(more);
            }
            markers = resent;
        }
        Ok(())
    }

    async fn write_marker(&self, marker: &MarkerRequest) -> Result<(), MarkerFailure> {
        let topic = marker.partition.topic();
        if topic == CONSUMER_OFFSETS {
            let mut offsets = self.offsets.lock().await;
            return offsets
                .end(
                    marker.producer_id.get(),
                    marker.partition.partition(),
                    marker.commit,
                )
                .await
                .map_err(|_| MarkerFailure::Retriable);
        }
        let Some(slot) = self.partition(topic, marker.partition.partition() as i32).await else {
            // The topic is gone: no producer can write to it either.
            return Err(MarkerFailure::Unsupported);
        };
        let mut guard = slot.lock().await;
        let Some(replicas) = guard.as_mut() else {
            return Err(MarkerFailure::Retriable);
        };
        let timestamp = self.clock.now_ms();
        let written = replicas
            .leader
            .write_marker(
                marker.commit,
                marker.producer_id.get(),
                marker.epoch.get(),
                marker.coordinator_epoch.get(),
                timestamp,
            )
            .await;
        let refused = written.as_ref().err().map(|error| error.kafka_error());
        self.record_delivered(
            marker,
            timestamp,
            refused.map(|kafka| kafka.unwrap_or(KafkaError::KafkaStorageError)),
        )
        .await;
        match written {
            Ok(_) => self
                .acknowledge_marker(replicas, timestamp)
                .await
                .map_err(|_| MarkerFailure::Retriable),
            Err(error) => Err(error
                .kafka_error()
                .map_or(MarkerFailure::Retriable, MarkerFailure::of)),
        }
    }

    /// Makes a marker just appended to `replicas`' leader as durable as acknowledged writes are, replicated (the
    /// high watermark moves past it), and wakes long-polling fetches.
    pub(crate) async fn acknowledge_marker(
        &self,
        replicas: &mut ReplicaSet,
        timestamp: i64,
    ) -> Result<(), partition_log::LogError> {
        replicas.leader.flush_acknowledged().await?;
        replicas.replicate(timestamp).await?;
        let id = replicas.leader.id();
        self.wake_fetches(id.topic(), i32::try_from(id.partition()).unwrap_or(i32::MAX));
        Ok(())
    }

    #[cfg(not(feature = "simulator"))]
    async fn record_delivered(&self, _marker: &MarkerRequest, _timestamp: i64, _refused: Option<KafkaError>) {
    }

    #[cfg(feature = "simulator")]
    async fn record_delivered(&self, marker: &MarkerRequest, timestamp: i64, refused: Option<KafkaError>) {
        if self.config.record_delivered_markers {
            self.delivered.lock().await.push(DeliveredMarker {
                transactional_id: marker.transactional_id.clone(),
                partition: marker.partition.clone(),
                commit: marker.commit,
                timestamp,
                refused,
            });
        }
    }

    /// The markers delivered to topic partitions since the last call (always empty unless
    /// [`NodeConfig::record_delivered_markers`] is set): a simulator names each marker's transaction by them.
    #[cfg(feature = "simulator")]
    pub async fn take_delivered_markers(&self) -> Vec<DeliveredMarker> {
        std::mem::take(&mut *self.delivered.lock().await)
    }

    /// Periodic work: abort transactions past their timeout, expire idle transactional ids and producers, and
    /// rewrite the group offset log and the transaction log as their live state when it is due.
    pub async fn housekeeping(&self) -> Result<(), NodeError> {
        self.abort_timed_out_transactions().await?;
        self.expire_transactional_ids().await?;
        self.expire_producers().await;
        self.compact_offsets().await?;
        self.compact_transaction_log().await?;
        self.expire_offsets_if_due().await?;
        Ok(())
    }

    /// Deletes the committed offsets `offsets.retention.minutes` expired, and the groups left with none, once
    /// `offsets.retention.check.interval.ms` has passed since the last look (the first, one interval after the
    /// node opened, as Kafka's coordinator schedules it). Returns what went (nothing when not due).
    pub async fn expire_offsets_if_due(&self) -> Result<crate::offsets::Expired, NodeError> {
        use std::sync::atomic::Ordering;
        let now = self.clock.now_ms();
        let last = self.offsets_checked_at.load(Ordering::SeqCst);
        if now.saturating_sub(last) < self.config.offsets_retention_check_interval_ms {
            return Ok(crate::offsets::Expired::default());
        }
        self.offsets_checked_at.store(now, Ordering::SeqCst);
        self.expire_offsets(now).await
    }

    /// Deletes the committed offsets expired at `now_ms` ([`crate::offsets::GroupOffsets::expire`]), and forgets
    /// the groups left with none.
    pub async fn expire_offsets(&self, now_ms: i64) -> Result<crate::offsets::Expired, NodeError> {
        let mut offsets = self.offsets.lock().await;
        let mut expired = offsets
            .expire(now_ms, self.config.offsets_retention_ms, |group| {
                self.membership.offsets_expiry(group)
            })
            .await?;
        // Under the offsets lock, as DeleteGroups forgets a group: no commit lands in between. Empty when its
        // offsets expired; a member that joined since keeps the group (without offsets).
        for group in &expired.groups {
            self.membership.delete_idle(group);
        }
        // An Empty group that never committed (or whose offsets went otherwise) goes too, as Kafka's check removes
        // every Empty group without offsets — with its stored membership, durably.
        let empty: Vec<String> = self
            .membership
            .list()
            .into_iter()
            .filter(|(group, _, state)| {
                *state == crate::membership::GroupState::Empty && !offsets.has_group(group)
            })
            .map(|(group, _, _)| group)
            .collect();
        for group in empty {
            if self.membership.delete_idle(&group) {
                offsets.delete_group(&group).await?;
                expired.groups.push(group);
            }
        }
        drop(offsets);
        if expired.offsets > 0 || !expired.groups.is_empty() {
            tracing::info!(
                offsets = expired.offsets,
                groups = ?expired.groups,
                "committed offsets expired (offsets.retention.minutes)"
            );
        }
        Ok(expired)
    }

    /// Rewrites the group offset log as its live state once it holds enough history (`offsets::GroupOffsets::
    /// snapshot_if_due`), so that a start replays state, not history.
    pub async fn compact_offsets(&self) -> Result<bool, NodeError> {
        self.offsets.lock().await.snapshot_if_due().await
    }

    /// Rewrites the transaction log as its live state once it holds enough history
    /// (`txn_coordinator::DurableCoordinator::snapshot_if_due`), so that a start replays state, not history.
    pub async fn compact_transaction_log(&self) -> Result<bool, NodeError> {
        let now = self.clock.now_ms();
        Ok(self.coordinator.lock().await.snapshot_if_due(now).await?)
    }

    /// Aborts every transaction past its timeout (markers written) and returns their transactional ids.
    pub async fn abort_timed_out_transactions(&self) -> Result<Vec<TransactionalId>, NodeError> {
        let now = self.clock.now_ms();
        let mut coordinator = self.coordinator.lock().await;
        let timed_out = coordinator.coordinator().abort_timed_out(now);
        let mut aborted: Vec<TransactionalId> = timed_out
            .markers
            .iter()
            .map(|marker| marker.transactional_id.clone())
            .collect();
        aborted.dedup();
        let (_answer, markers) = coordinator.apply(timed_out, now).await?;
        self.deliver_markers(&mut coordinator, markers).await?;
        Ok(aborted)
    }

    /// Removes transactional ids idle for longer than `transactional.id.expiration.ms`.
    pub async fn expire_transactional_ids(&self) -> Result<(), NodeError> {
        let now = self.clock.now_ms();
        let mut coordinator = self.coordinator.lock().await;
        let expired = coordinator.coordinator().expire_transactional_ids(now);
        let (_answer, _no_markers) = coordinator.apply(expired, now).await?;
        Ok(())
    }

    /// Kafka's periodic producer expiration (`producer.id.expiration.ms`), on every replica of every partition.
    pub async fn expire_producers(&self) {
        let now = self.clock.now_ms();
        for slot in self.all_partitions().await {
            if let Some(replicas) = slot.lock().await.as_mut() {
                replicas.leader.remove_expired_producers(now);
                for follower in &mut replicas.followers {
                    follower.remove_expired_producers(now);
                }
            }
        }
    }

    /// Every producer id this node's coordinator has issued is below this bound (see
    /// `Coordinator::producer_ids_issued_below`): what a mirrorlog source can report to its mirrors' allocators.
    pub async fn producer_ids_issued_below(&self) -> i64 {
        let mut coordinator = self.coordinator.lock().await;
        coordinator.coordinator().producer_ids_issued_below()
    }

    /// Makes every producer id the coordinator issues from now on greater than `id` (a destination that took
    /// over a source's producer ids moves past them).
    pub async fn advance_producer_ids_past(&self, id: i64) -> Result<(), NodeError> {
        let now = self.clock.now_ms();
        let mut coordinator = self.coordinator.lock().await;
        let outcome = coordinator.coordinator().advance_producer_ids_past(id);
        let (_answer, _no_markers) = coordinator.apply(outcome, now).await?;
        Ok(())
    }

    /// Reloads the transaction coordinator from its log under the next coordinator epoch, as a new coordinator
    /// does after the old one crashed, and re-sends the markers of the transactions it was completing.
    pub async fn reload_coordinator(&self) -> Result<(), NodeError> {
        let mut coordinator = self.coordinator.lock().await;
        let id = PartitionId::new(TXN_STATE_PARTITION, 0)?;
        let epoch = self.coordinator_epoch.fetch_add(1, Ordering::SeqCst) + 1;
        let (reloaded, markers) = DurableCoordinator::open(
            self.storage.open(&id).await?,
            self.coordinator_config(),
            CoordinatorEpoch(epoch),
        )
        .await?;
        *coordinator = reloaded;
        self.deliver_markers(&mut coordinator, markers).await
    }

    fn coordinator_config(&self) -> CoordinatorConfig {
        CoordinatorConfig {
            max_transaction_timeout_ms: self.config.max_transaction_timeout_ms,
            transactional_id_expiration_ms: self.config.transactional_id_expiration_ms,
        }
    }

    /// Brings every follower of `topic`/`partition` up to its leader (cutting back a follower whose history left
    /// the leader's) and moves the high watermarks; a write through the node does this itself, a caller that
    /// wrote to the leader directly (a mirror driver) calls it.
    pub async fn replicate(&self, topic: &str, partition: i32) -> Result<(), NodeError> {
        let Some(slot) = self.partition(topic, partition).await else {
            return Ok(());
        };
        if let Some(replicas) = slot.lock().await.as_mut() {
            replicas.replicate(self.clock.now_ms()).await?;
        }
        Ok(())
    }

    /// Crashes follower `index` of `topic`/`partition`: its memory is lost and it reopens from what its store
    /// holds (producer state from snapshots and replay, expired producers removed as the periodic check would),
    /// then catches up.
    pub async fn restart_follower(&self, topic: &str, partition: i32, index: usize) -> Result<(), NodeError> {
        let (Some(slot), Some(store)) = (
            self.partition(topic, partition).await,
            self.follower_stores.get(index),
        ) else {
            return Ok(());
        };
        let mut guard = slot.lock().await;
        let Some(replicas) = guard.as_mut() else {
            return Ok(());
        };
        let now = self.clock.now_ms();
        let id = replicas.leader.id().clone();
        // A process crash keeps what the follower handed its storage (the page cache survives it): held appends
        // of a key-value store are written before the storage is opened again beside the old handle. A follower
        // whose log is offline or poisoned cannot write them; reopening is what recovers it, so its failure is
        // not the restart's.
        if let Some(crashed) = replicas.followers.get_mut(index) {
            let _ = crashed.flush(storage::Durability::Buffered).await;
        }
        let (mut recovered, _) =
            PartitionLog::open(store.open(&id).await?, self.follower_log_config.clone(), now).await?;
        recovered.remove_expired_producers(now);
        replicas.replace_follower(index, recovered)?;
        replicas.replicate(now).await?;
        Ok(())
    }

    /// The producer-state summary of each replica of `topic`/`partition`, the leader's first (empty when the
    /// partition does not exist or is closed).
    pub async fn replica_summaries(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Vec<StateSummary>, NodeError> {
        let Some(slot) = self.partition(topic, partition).await else {
            return Ok(Vec::new());
        };
        let guard = slot.lock().await;
        let Some(replicas) = guard.as_ref() else {
            return Ok(Vec::new());
        };
        let mut summaries = vec![replicas.leader.summary().await?];
        for follower in &replicas.followers {
            summaries.push(follower.summary().await?);
        }
        Ok(summaries)
    }

    async fn all_partitions(&self) -> Vec<Arc<PartitionSlot>> {
        let topics = self.topics.read().await;
        topics.values().flatten().cloned().collect()
    }

    /// Closes every partition log cleanly (snapshot, sync, high watermark, clean-shutdown mark) and the offset
    /// store. Requests arriving afterwards find no log and are answered with a storage error.
    pub async fn close(&self) -> Result<(), NodeError> {
        let mut first_error = None;
        for slot in self.all_partitions().await {
            if let Some(replicas) = slot.lock().await.take() {
                let (leader, followers) = replicas.into_parts();
                for log in std::iter::once(leader).chain(followers) {
                    if let Err(error) = log.close().await {
                        first_error.get_or_insert(NodeError::Log(error));
                    }
                }
            }
        }
        if let Err(error) = self.topic_configs.write().await.close().await {
            first_error.get_or_insert(error);
        }
        if let Err(error) = self.users.write().await.close().await {
            first_error.get_or_insert(error);
        }
        if let Some(registry) = self.mirror_registry.lock().await.take() {
            if let Err(error) = registry.close().await {
                first_error.get_or_insert(NodeError::Log(error));
            }
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}
