//! The node's state: topics and their partition logs, the transaction coordinator, the group offset store,
//! and the operations several APIs share (creating topics, writing transaction markers, housekeeping, closing).
//!
//! **Locks.** Each partition log has its own lock; the coordinator and the offset store have one each. The order
//! is always coordinator → partition → offsets, so EndTxn (which writes markers while holding the coordinator)
//! cannot deadlock with a produce. A storage call under a partition's lock blocks only that partition: fsyncs and
//! database calls run on the blocking pool (ADR 0010), never on the runtime's threads.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_types::{CoordinatorEpoch, KafkaError};
use partition_log::{LogConfig, PartitionLog};
use producer_state::PsmConfig;
use storage::{PartitionId, Storage};
use tokio::sync::{watch, Mutex, RwLock};
use txn_coordinator::{CoordinatorConfig, DurableCoordinator, MarkerFailure, MarkerRequest, Outcome};

use crate::config::NodeConfig;
use crate::offsets::{GroupOffsets, OFFSETS_PARTITION};
use crate::{Clock, NodeError};

/// The internal partition holding the transaction coordinator's log.
pub const TXN_STATE_PARTITION: &str = "__transaction_state";

/// The topic transaction markers name for group offsets (Kafka's).
const CONSUMER_OFFSETS: &str = "__consumer_offsets";

/// How many rounds a marker is re-sent before the transaction is left to housekeeping.
const MARKER_ROUNDS: usize = 3;

/// One partition's log, or `None` once the node has closed it.
pub type PartitionSlot = Mutex<Option<PartitionLog>>;

/// One cluster node; see the module docs.
pub struct Node {
    pub(crate) config: NodeConfig,
    clock: Arc<dyn Clock>,
    /// Host and port Metadata and FindCoordinator answer.
    pub(crate) advertised: (String, i32),
    storage: Box<dyn Storage>,
    log_config: LogConfig,
    topics: RwLock<BTreeMap<String, Vec<Arc<PartitionSlot>>>>,
    pub(crate) coordinator: Mutex<DurableCoordinator>,
    pub(crate) offsets: Mutex<GroupOffsets>,
    appended: watch::Sender<u64>,
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
        let now = clock.now_ms();
        let log_config = LogConfig {
            durability: config.storage.durability(),
            producer_state: PsmConfig {
                producer_id_expiration_ms: config.producer_id_expiration_ms,
                max_transaction_timeout_ms: config.max_transaction_timeout_ms,
                cluster_id: Some(config.cluster_id.clone()),
                ..PsmConfig::default()
            },
            ..LogConfig::default()
        };
        let mut topics: BTreeMap<String, Vec<Arc<PartitionSlot>>> = BTreeMap::new();
        let mut internal = BTreeMap::new();
        let mut repairs = Vec::new();
        for id in storage.list().await? {
            if id.topic() == TXN_STATE_PARTITION || id.topic() == OFFSETS_PARTITION {
                internal.insert(id.topic().to_owned(), id);
                continue;
            }
            let (mut log, report) =
                PartitionLog::open(storage.open(&id).await?, log_config.clone(), now).await?;
            if !report.storage.is_clean() {
                repairs.push((id.clone(), report.storage));
            }
            // The only replica: everything its log holds is committed.
            let end = log.log_end_offset();
            log.advance_high_watermark(end);
            let partitions = topics.entry(id.topic().to_owned()).or_default();
            if id.partition() as usize != partitions.len() {
                return Err(NodeError::Topic {
                    name: id.topic().to_owned(),
                    reason: format!("partition {} found without the ones before it", id.partition()),
                });
            }
            partitions.push(Arc::new(Mutex::new(Some(log))));
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
        let (appended, _) = watch::channel(0);
        let broker = Node {
            clock,
            advertised,
            storage,
            log_config,
            topics: RwLock::new(topics),
            coordinator: Mutex::new(coordinator),
            offsets: Mutex::new(offsets),
            appended,
            config,
            repairs,
        };
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

    /// The partition count of each topic (internal partitions are not topics).
    pub async fn topic_partitions(&self) -> BTreeMap<String, usize> {
        let topics = self.topics.read().await;
        topics
            .iter()
            .map(|(name, partitions)| (name.clone(), partitions.len()))
            .collect()
    }

    /// Creates a topic with `partitions` partitions.
    pub async fn create_topic(&self, name: &str, partitions: u32) -> Result<(), KafkaError> {
        if name.starts_with("__") {
            return Err(KafkaError::InvalidTopic);
        }
        if partitions == 0 || partitions > 10_000 {
            return Err(KafkaError::InvalidPartitions);
        }
        let mut topics = self.topics.write().await;
        if topics.contains_key(name) {
            return Err(KafkaError::TopicAlreadyExists);
        }
        let mut logs = Vec::new();
        for partition in 0..partitions {
            let id = PartitionId::new(name, partition).map_err(|_| KafkaError::InvalidTopic)?;
            let created = match self.storage.create(&id).await {
                Ok(storage) => {
                    PartitionLog::open(storage, self.log_config.clone(), self.clock.now_ms()).await
                }
                Err(error) => Err(error.into()),
            };
            match created {
                Ok((log, _)) => logs.push(Arc::new(Mutex::new(Some(log)))),
                Err(error) => {
                    // The client hears KAFKA_STORAGE_ERROR; the operator reads why (a full disk, a descriptor
                    // limit with its numbers, …).
                    eprintln!("mirrorlog: creating partition {id}: {error}");
                    return Err(KafkaError::KafkaStorageError);
                }
            }
        }
        topics.insert(name.to_owned(), logs);
        Ok(())
    }

    /// What opening the topic partitions repaired, partition by partition (empty after a clean shutdown).
    pub fn repairs(&self) -> &[(PartitionId, storage::OpenReport)] {
        &self.repairs
    }

    /// Tells long-polling fetches that records were appended.
    pub fn notify_appended(&self) {
        self.appended
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }

    /// A receiver that wakes when records are appended.
    pub fn subscribe_appended(&self) -> watch::Receiver<u64> {
        self.appended.subscribe()
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
        let Some(log) = guard.as_mut() else {
            return Err(MarkerFailure::Retriable);
        };
        let written = log
            .write_marker(
                marker.commit,
                marker.producer_id.get(),
                marker.epoch.get(),
                marker.coordinator_epoch.get(),
                self.clock.now_ms(),
            )
            .await;
        match written {
            Ok(_) => {
                log.flush_acknowledged()
                    .await
                    .map_err(|_| MarkerFailure::Retriable)?;
                let end = log.log_end_offset();
                log.advance_high_watermark(end);
                drop(guard);
                self.notify_appended();
                Ok(())
            }
            Err(error) => Err(error
                .kafka_error()
                .map_or(MarkerFailure::Retriable, MarkerFailure::of)),
        }
    }

    /// Periodic work: abort transactions past their timeout, expire idle transactional ids and producers.
    pub async fn housekeeping(&self) -> Result<(), NodeError> {
        let now = self.clock.now_ms();
        {
            let mut coordinator = self.coordinator.lock().await;
            let timed_out = coordinator.coordinator().abort_timed_out(now);
            let (_answer, markers) = coordinator.apply(timed_out, now).await?;
            self.deliver_markers(&mut coordinator, markers).await?;
            let expired = coordinator.coordinator().expire_transactional_ids(now);
            let (_answer, _no_markers) = coordinator.apply(expired, now).await?;
        }
        let slots: Vec<Arc<PartitionSlot>> = {
            let topics = self.topics.read().await;
            topics.values().flatten().cloned().collect()
        };
        for slot in slots {
            if let Some(log) = slot.lock().await.as_mut() {
                log.remove_expired_producers(now);
            }
        }
        Ok(())
    }

    /// Closes every partition log cleanly (snapshot, sync, high watermark, clean-shutdown mark) and the offset
    /// store. Requests arriving afterwards find no log and are answered with a storage error.
    pub async fn close(&self) -> Result<(), NodeError> {
        let slots: Vec<Arc<PartitionSlot>> = {
            let topics = self.topics.read().await;
            topics.values().flatten().cloned().collect()
        };
        let mut first_error = None;
        for slot in slots {
            if let Some(log) = slot.lock().await.take() {
                if let Err(error) = log.close().await {
                    first_error.get_or_insert(NodeError::Log(error));
                }
            }
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}
