//! The simulated world: clusters (a transaction coordinator and, per topic, a leader and a follower
//! [`PartitionLog`] on a real storage backend), mirror links driven by `mirror-fsm` under a [`Strategy`], and
//! the clients. [`World::run`] executes a [`Script`] step by step in one task: every choice was made when the
//! script was generated, so the same script gives the same run.
//!
//! The clients behave as Kafka's do (kafka-semantics §9): an idempotent producer whose producer is refused
//! (`OUT_OF_ORDER_SEQUENCE_NUMBER`, `INVALID_PRODUCER_EPOCH`, …) is re-created with a new producer id; a
//! transactional producer re-initialises on a fatal coordinator error and aborts on an abortable one; an
//! application follows its [`AppPolicy`]. Every refusal a client hears is counted in [`ClientErrors`]: a
//! refusal is visible, not silent, and is not an anomaly.

use std::collections::BTreeMap;

use async_trait::async_trait;
use kafka_types::{CoordinatorEpoch, ProducerEpoch, ProducerId, TransactionalId};
use mirror_fsm::{FetchError, FetchResponse, Fetcher, LocalFetcher, MirrorDriver, SharedLog};
use partition_log::{LogConfig, LogError, PartitionLog};
use producer_state::{PsmConfig, StateSummary};
use record_format::RecordBatch;
use storage::{PartitionId, Storage};
use storage_config::StorageConfig;
use txn_coordinator::{Coordinator, CoordinatorConfig, ProducerIdManager, Write};

use crate::logview::{all_batches, committed_records, common_prefix_end, READ_BYTES};
use crate::script::{AppPolicy, ClientKind, Script, Step};
use crate::strategy::Strategy;
use crate::truth::Truth;
use crate::SimError;

mod clients;
mod coordinator;
mod links;

/// Milliseconds a step takes on the simulated clock.
const STEP_MS: i64 = 1_000;
/// Transaction timeout the clients ask for.
const TRANSACTION_TIMEOUT_MS: i64 = 60_000;

/// Where the partitions live: a storage configuration, every option of which (durability, segment and index
/// sizes) each cluster's stores use. Each run's stores go to a fresh temporary directory, made inside the
/// configuration's `data_dir` (which must exist) and removed at the end of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimStorage(StorageConfig);

impl SimStorage {
    /// In memory.
    pub fn memory() -> Self {
        SimStorage(StorageConfig::for_backend(
            storage_config::Backend::Memory,
            std::path::Path::new(""),
        ))
    }

    /// A backend with its defaults, under the system's temporary directory.
    pub fn backend(backend: storage_config::Backend) -> Self {
        SimStorage(StorageConfig::for_backend(backend, &std::env::temp_dir()))
    }

    /// Every option of `config`.
    pub fn from_config(config: StorageConfig) -> Self {
        SimStorage(config)
    }

    /// The backend's name.
    pub fn name(&self) -> &'static str {
        self.0.backend().name()
    }

    /// The configuration runs use.
    pub fn config(&self) -> &StorageConfig {
        &self.0
    }
}

/// How far a mirror link fetches from its source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FetchBound {
    /// Up to the source's last stable offset, as `mirror-fsm`'s fetcher does (ADR 0009): open transactions are
    /// not copied.
    #[default]
    LastStableOffset,
    /// Up to the source's high watermark, as a follower fetches: open transactions are copied too (a mirror
    /// built on replica fetching without the LSO bound).
    HighWatermark,
}

/// Refusals the clients heard, by Kafka error name (visible errors, not anomalies).
pub type ClientErrors = BTreeMap<String, u64>;

/// The source side of a link: the in-process fetcher, with the strategy's producer-id transform applied to
/// every batch it returns, remembering the largest producer id it copied (for `barrier+advance`).
pub struct SimFetcher {
    inner: LocalFetcher,
    source: SharedLog,
    bound: FetchBound,
    strategy: Strategy,
    /// The largest producer id of a batch this link copied (−1: none).
    pub max_producer_id: i64,
}

#[async_trait(?Send)]
impl Fetcher for SimFetcher {
    async fn fetch(&mut self, from_offset: i64, max_bytes: usize) -> Result<FetchResponse, FetchError> {
        let mut response = match self.bound {
            FetchBound::LastStableOffset => self.inner.fetch(from_offset, max_bytes).await?,
            FetchBound::HighWatermark => {
                let source = self.source.try_read().map_err(|_| FetchError {
                    message: "the source log is being written".to_owned(),
                    retryable: true,
                })?;
                let fetched = source
                    .read(from_offset, max_bytes, partition_log::Isolation::ReadUncommitted)
                    .await
                    .map_err(|error| FetchError {
                        message: error.to_string(),
                        retryable: true,
                    })?;
                FetchResponse {
                    source_cluster_id: self.inner.reported_cluster_id.clone(),
                    batches: fetched.batches,
                    buffers: fetched.buffers,
                }
            }
        };
        for batch in &mut response.batches {
            let mapped = self.strategy.map_producer_id(batch.producer_id());
            if mapped != batch.producer_id() {
                batch.set_producer(mapped, batch.producer_epoch(), batch.base_sequence());
            }
            self.max_producer_id = self.max_producer_id.max(batch.producer_id());
        }
        Ok(response)
    }

    async fn last_mirrored_offset(&mut self, mirrored_from: &str) -> Result<Option<i64>, FetchError> {
        self.inner.last_mirrored_offset(mirrored_from).await
    }

    async fn log_start_offset(&mut self) -> Result<i64, FetchError> {
        self.inner.log_start_offset().await
    }
}

/// A topic's replicas on one cluster.
struct Replicas {
    leader: SharedLog,
    follower: PartitionLog,
    /// The leader may have been truncated since the follower last caught up.
    leader_truncated: bool,
}

/// One cluster.
struct Cluster {
    coordinator: Coordinator,
    /// The coordinator's durable records (its transaction-state log).
    coordinator_log: Vec<Write>,
    coordinator_epoch: i32,
    leader_store: Box<dyn Storage>,
    follower_store: Box<dyn Storage>,
    partitions: BTreeMap<String, Replicas>,
    log_config: LogConfig,
}

/// A running mirror link.
struct Link {
    source: String,
    dest: String,
    topic: String,
    driver: MirrorDriver,
    fetcher: SimFetcher,
}

/// A client and what it holds.
#[derive(Debug, Clone)]
struct Client {
    cluster: String,
    topic: String,
    kind: ClientKind,
    producer: Option<(ProducerId, ProducerEpoch)>,
    next_sequence: i32,
    /// A batch written whose acknowledgement was lost, with its record ids: sent again next time.
    pending: Option<(RecordBatch, Vec<u64>)>,
    in_txn: bool,
    txn_records: Vec<u64>,
    dead: Option<String>,
    /// Applications: the committed input offset, the offset read up to in the open transaction, recoveries.
    position: i64,
    read_position: i64,
    recoveries: u64,
}

impl Client {
    fn transactional_id(&self) -> Option<TransactionalId> {
        match &self.kind {
            ClientKind::Idempotent => None,
            ClientKind::Transactional { transactional_id } | ClientKind::App { transactional_id, .. } => {
                Some(TransactionalId(transactional_id.clone()))
            }
        }
    }
}

/// What an application ended as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppOutcome {
    /// The application's client name.
    pub client: String,
    /// Its policy.
    pub policy: AppPolicy,
    /// Why it died (`None`: alive).
    pub dead: Option<String>,
    /// How many times it closed dirty and resumed from its committed position.
    pub recoveries: u64,
    /// The cluster it ended on and its committed input position there.
    pub cluster: String,
    /// The committed position.
    pub position: i64,
    /// The topics it read and wrote.
    pub input: String,
    /// Its output topic.
    pub output: String,
}

/// A run's end state, handed to the oracle.
pub struct Finished {
    /// The ground truth.
    pub truth: Truth,
    /// Every cluster's leader logs by (cluster, topic), as batches.
    pub logs: BTreeMap<(String, String), Vec<RecordBatch>>,
    /// What a read_committed consumer of each leader log sees: the record ids, in order.
    pub committed_views: BTreeMap<(String, String), Vec<u64>>,
    /// Each leader log's last stable offset.
    pub last_stable_offsets: BTreeMap<(String, String), i64>,
    /// Partitions whose leader, follower or recovered producer state differed, with what differed.
    pub divergences: Vec<String>,
    /// The applications.
    pub apps: Vec<AppOutcome>,
    /// Refusals the clients heard.
    pub client_errors: ClientErrors,
    /// Mirror links that went FAILED, with the reason.
    pub failed_links: Vec<String>,
    /// Client operations executed (produce attempts, transaction ends, initialisations).
    pub operations: u64,
    /// (cluster, topic, producer id) under which two or more real clients sent batches, with the clients.
    pub shared_ids: Vec<String>,
}

/// The simulated world; see the module docs.
pub struct World {
    strategy: Strategy,
    storage: SimStorage,
    dir: Option<tempfile::TempDir>,
    clusters: BTreeMap<String, Cluster>,
    links: Vec<Link>,
    clients: BTreeMap<String, Client>,
    truth: Truth,
    clock: i64,
    next_record: u64,
    client_errors: ClientErrors,
    divergences: Vec<String>,
    failed_links: Vec<String>,
    operations: u64,
    /// The client whose transaction each transactional id last opened (the owner of the markers that end it).
    txn_owners: BTreeMap<TransactionalId, String>,
    /// What mirror links fetch up to.
    fetch_bound: FetchBound,
    /// The real clients that sent batches under each (cluster, topic, producer id).
    senders: BTreeMap<(String, String, i64), std::collections::BTreeSet<String>>,
}

impl World {
    /// A world with the script's clusters, nothing in them yet.
    pub fn new(script: &Script, strategy: Strategy, storage: SimStorage) -> Result<Self, SimError> {
        let dir = match storage.config().data_dir() {
            None => None,
            Some(parent) => Some(
                tempfile::Builder::new()
                    .prefix("mirrorlog-simulate-")
                    .tempdir_in(parent)
                    .map_err(|error| {
                        SimError::Setup(format!("a run directory in {}: {error}", parent.display()))
                    })?,
            ),
        };
        let mut world = World {
            strategy,
            storage,
            dir,
            clusters: BTreeMap::new(),
            links: Vec::new(),
            clients: BTreeMap::new(),
            truth: Truth::default(),
            clock: 1_000_000,
            next_record: 0,
            client_errors: ClientErrors::new(),
            divergences: Vec::new(),
            failed_links: Vec::new(),
            operations: 0,
            senders: BTreeMap::new(),
            txn_owners: BTreeMap::new(),
            fetch_bound: FetchBound::LastStableOffset,
        };
        for name in &script.clusters {
            // Names come from scripts (a `--replay` file): they become directory names, so only plain ones.
            let plain = !name.is_empty()
                && name.len() <= 64
                && name != "."
                && name != ".."
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !plain {
                return Err(SimError::Setup(format!(
                    "cluster name {name:?}: use 1 to 64 ASCII letters, digits, '-', '_' or '.'"
                )));
            }
            let cluster = world.new_cluster(name)?;
            world.clusters.insert(name.clone(), cluster);
        }
        Ok(world)
    }

    /// The configuration of one cluster's replica store: the run's, under the run's directory.
    fn store_config(&self, cluster: &str, replica: &str) -> StorageConfig {
        match &self.dir {
            Some(dir) => self
                .storage
                .config()
                .with_data_dir(&dir.path().join(cluster).join(replica)),
            None => self.storage.config().clone(),
        }
    }

    fn open_store(&self, cluster: &str, replica: &str) -> Result<Box<dyn Storage>, SimError> {
        self.store_config(cluster, replica)
            .open()
            .map_err(|error| SimError::Setup(error.to_string()))
    }

    fn new_cluster(&self, name: &str) -> Result<Cluster, SimError> {
        let log_config = LogConfig {
            durability: self.storage.config().durability(),
            producer_state: PsmConfig {
                cluster_id: Some(name.to_owned()),
                barrier_scope: self.strategy.barrier_scope(),
                ..PsmConfig::default()
            },
            ..LogConfig::default()
        };
        Ok(Cluster {
            coordinator: Coordinator::new(
                CoordinatorConfig::default(),
                ProducerIdManager::recover(None),
                CoordinatorEpoch(0),
            ),
            coordinator_log: Vec::new(),
            coordinator_epoch: 0,
            leader_store: self.open_store(name, "leader")?,
            follower_store: self.open_store(name, "follower")?,
            partitions: BTreeMap::new(),
            log_config,
        })
    }

    /// Sets how far mirror links fetch (default: the last stable offset).
    pub fn with_fetch_bound(mut self, bound: FetchBound) -> Self {
        self.fetch_bound = bound;
        self
    }

    /// Runs every step, then drains (open transactions end, links catch up) and hands the end state over.
    pub async fn run(mut self, script: &Script) -> Result<Finished, SimError> {
        for step in &script.steps {
            self.step(step).await?;
        }
        self.drain().await?;
        self.finish().await
    }

    /// Executes one step (see [`Step`]); steps naming what does not exist do nothing.
    pub async fn step(&mut self, step: &Step) -> Result<(), SimError> {
        self.clock += STEP_MS;
        match step {
            Step::Start { source, dest, topic } => self.start_link(source, dest, topic).await?,
            Step::Mirror => self.mirror_all().await?,
            Step::Connect {
                client,
                cluster,
                topic,
                kind,
            } => self.connect(client, cluster, topic, kind).await?,
            Step::Produce {
                client,
                records,
                lose_ack,
            } => self.produce(client, *records, *lose_ack).await?,
            Step::EndTxn { client, commit } => self.end_txn(client, *commit).await?,
            Step::Stop { dest, topic } => self.stop_link(dest, topic).await?,
            Step::Move {
                client,
                cluster,
                keep_ids,
            } => self.move_client(client, cluster, *keep_ids).await?,
            Step::CrashReplica { cluster, topic } => self.crash_replica(cluster, topic).await?,
            Step::CrashCoordinator { cluster } => self.crash_coordinator(cluster).await?,
            Step::ExpireIds => self.expire_ids().await?,
            Step::AdvanceIds { cluster, past } => {
                if let Some(state) = self.clusters.get_mut(cluster) {
                    let outcome = state.coordinator.advance_producer_ids_past(*past);
                    state.coordinator_log.extend(outcome.writes);
                }
            }
        }
        self.abort_timed_out().await?;
        self.expire_producers().await;
        Ok(())
    }

    /// The brokers' periodic producer expiration (Kafka's `producer.id.expiration.check.interval.ms`), on every
    /// replica: run every step, so leader, follower and a recovered replica (whose replay does not expire)
    /// compare at the same point.
    async fn expire_producers(&mut self) {
        for state in self.clusters.values_mut() {
            for replicas in state.partitions.values_mut() {
                replicas.leader.write().await.remove_expired_producers(self.clock);
                replicas.follower.remove_expired_producers(self.clock);
            }
        }
    }

    // ---- partitions and replication -------------------------------------------------------------------------

    async fn ensure_partition(&mut self, cluster: &str, topic: &str) -> Result<bool, SimError> {
        let Some(state) = self.clusters.get_mut(cluster) else {
            return Ok(false);
        };
        if state.partitions.contains_key(topic) {
            return Ok(true);
        }
        let id = PartitionId::new(topic, 0).map_err(|error| SimError::Setup(error.to_string()))?;
        let leader = state.leader_store.create(&id).await.map_err(SimError::storage)?;
        let follower = state
            .follower_store
            .create(&id)
            .await
            .map_err(SimError::storage)?;
        let (leader, _) = PartitionLog::open(leader, state.log_config.clone(), 0)
            .await
            .map_err(SimError::log)?;
        let (follower, _) = PartitionLog::open(follower, state.log_config.clone(), 0)
            .await
            .map_err(SimError::log)?;
        state.partitions.insert(
            topic.to_owned(),
            Replicas {
                leader: mirror_fsm::shared(leader),
                follower,
                leader_truncated: false,
            },
        );
        Ok(true)
    }

    /// The follower catches up with the leader (cutting back first if the leader was truncated), and the
    /// leader's high watermark follows the follower (acks=all with one follower).
    async fn replicate(&mut self, cluster: &str, topic: &str) -> Result<(), SimError> {
        let now = self.clock;
        let Some(replicas) = self
            .clusters
            .get_mut(cluster)
            .and_then(|state| state.partitions.get_mut(topic))
        else {
            return Ok(());
        };
        let mut leader = replicas.leader.write().await;
        let follower = &mut replicas.follower;
        if replicas.leader_truncated || follower.log_end_offset() > leader.log_end_offset() {
            let common = common_prefix_end(&leader, follower).await?;
            if common < follower.log_end_offset() {
                follower.truncate_to(common, now).await.map_err(SimError::log)?;
            }
            replicas.leader_truncated = false;
        }
        while follower.log_end_offset() < leader.log_end_offset() {
            let batches = leader
                .read_for_replica(follower.log_end_offset(), READ_BYTES)
                .await
                .map_err(SimError::log)?;
            if batches.is_empty() {
                break;
            }
            follower
                .append_as_follower(batches)
                .await
                .map_err(SimError::log)?;
        }
        let end = follower.log_end_offset();
        leader.advance_high_watermark(end);
        follower.advance_high_watermark(end);
        Ok(())
    }

    async fn crash_replica(&mut self, cluster: &str, topic: &str) -> Result<(), SimError> {
        let Some(state) = self.clusters.get_mut(cluster) else {
            return Ok(());
        };
        let Some(replicas) = state.partitions.get_mut(topic) else {
            return Ok(());
        };
        let id = PartitionId::new(topic, 0).map_err(|error| SimError::Setup(error.to_string()))?;
        // The crash: the follower's in-memory state is gone; it reopens from what its storage holds.
        let storage = state.follower_store.open(&id).await.map_err(SimError::storage)?;
        let (recovered, _) = PartitionLog::open(storage, state.log_config.clone(), self.clock)
            .await
            .map_err(SimError::log)?;
        // Kafka's periodic producer expiration runs on a recovered replica too (replay does not expire).
        replicas.follower = recovered;
        replicas.follower.remove_expired_producers(self.clock);
        self.replicate(cluster, topic).await?;
        self.compare_replicas(cluster, topic, "after a follower crash")
            .await
    }

    /// Records a divergence when the leader's and the follower's producer state differ.
    async fn compare_replicas(&mut self, cluster: &str, topic: &str, when: &str) -> Result<(), SimError> {
        let Some(replicas) = self
            .clusters
            .get(cluster)
            .and_then(|state| state.partitions.get(topic))
        else {
            return Ok(());
        };
        let leader = replicas.leader.read().await;
        let (a, b) = (
            comparable(leader.summary().await.map_err(SimError::log)?),
            comparable(replicas.follower.summary().await.map_err(SimError::log)?),
        );
        drop(leader);
        if a != b {
            self.divergences.push(format!(
                "{cluster}/{topic} {when}: leader {a:?} vs follower {b:?}"
            ));
        }
        Ok(())
    }

    /// The end of a run: every open transaction commits, every link catches up.
    async fn drain(&mut self) -> Result<(), SimError> {
        let names: Vec<String> = self.clients.keys().cloned().collect();
        for name in names {
            self.end_txn(&name, true).await?;
        }
        self.mirror_all().await
    }

    /// Invariant 5 for every running link: where source and destination both hold an offset, they hold the same
    /// batch (after the strategy's producer-id transform). A destination that kept bytes its source cut (or
    /// never had) has diverged.
    async fn compare_mirrors(&mut self) -> Result<(), SimError> {
        let mut found = Vec::new();
        for link in &self.links {
            let source = self.leader(&link.source, &link.topic)?;
            let dest = self.leader(&link.dest, &link.topic)?;
            let source_batches = all_batches(&*source.read().await).await?;
            let dest_batches = all_batches(&*dest.read().await).await?;
            let by_offset: BTreeMap<i64, &RecordBatch> = source_batches
                .iter()
                .map(|batch| (batch.base_offset(), batch))
                .collect();
            for batch in &dest_batches {
                let Some(original) = by_offset.get(&batch.base_offset()) else {
                    if source_batches
                        .last()
                        .is_some_and(|last| batch.base_offset() < last.next_offset())
                    {
                        found.push(format!(
                            "{}/{}: mirror of {} holds a batch at offset {} where its source has none",
                            link.dest,
                            link.topic,
                            link.source,
                            batch.base_offset()
                        ));
                        break;
                    }
                    continue;
                };
                let mut expected = (*original).clone();
                let mapped = self.strategy.map_producer_id(expected.producer_id());
                if mapped != expected.producer_id() {
                    expected.set_producer(mapped, expected.producer_epoch(), expected.base_sequence());
                }
                if expected.as_bytes() != batch.as_bytes() {
                    found.push(format!(
                        "{}/{}: mirror of {} differs from its source at offset {}",
                        link.dest,
                        link.topic,
                        link.source,
                        batch.base_offset()
                    ));
                    break;
                }
            }
        }
        self.divergences.extend(found);
        Ok(())
    }

    async fn finish(mut self) -> Result<Finished, SimError> {
        self.expire_producers().await;
        self.compare_mirrors().await?;
        let mut logs = BTreeMap::new();
        let mut committed_views = BTreeMap::new();
        let mut last_stable_offsets = BTreeMap::new();
        let keys: Vec<(String, String)> = self
            .clusters
            .iter()
            .flat_map(|(cluster, state)| {
                state
                    .partitions
                    .keys()
                    .map(move |topic| (cluster.clone(), topic.clone()))
            })
            .collect();
        for (cluster, topic) in &keys {
            self.compare_replicas(cluster, topic, "at the end").await?;
            // Recovery: a fresh copy of the follower from its storage must reach the same state again.
            let Some(state) = self.clusters.get_mut(cluster) else {
                continue;
            };
            let Some(replicas) = state.partitions.get_mut(topic) else {
                continue;
            };
            let id =
                PartitionId::new(topic.as_str(), 0).map_err(|error| SimError::Setup(error.to_string()))?;
            let storage = state.follower_store.open(&id).await.map_err(SimError::storage)?;
            let (mut recovered, _) = PartitionLog::open(storage, state.log_config.clone(), self.clock)
                .await
                .map_err(SimError::log)?;
            let leader = replicas.leader.read().await;
            recovered.advance_high_watermark(leader.high_watermark());
            // Replay does not expire producers; the broker's periodic expiration does (leader and follower ran it).
            recovered.remove_expired_producers(self.clock);
            let (a, b) = (
                comparable(leader.summary().await.map_err(SimError::log)?),
                comparable(recovered.summary().await.map_err(SimError::log)?),
            );
            if a != b {
                self.divergences.push(format!(
                    "{cluster}/{topic} after recovery: leader {a:?} vs recovered {b:?}"
                ));
            }
            replicas.follower = recovered;
            let batches = all_batches(&leader).await?;
            let view = committed_records(&leader, leader.log_start_offset()).await?;
            last_stable_offsets.insert((cluster.clone(), topic.clone()), leader.last_stable_offset());
            committed_views.insert(
                (cluster.clone(), topic.clone()),
                view.into_iter().map(|(_, id)| id).collect(),
            );
            logs.insert((cluster.clone(), topic.clone()), batches);
        }
        let apps = self
            .clients
            .iter()
            .filter_map(|(name, client)| match &client.kind {
                ClientKind::App { input, policy, .. } => Some(AppOutcome {
                    client: name.clone(),
                    policy: *policy,
                    dead: client.dead.clone(),
                    recoveries: client.recoveries,
                    cluster: client.cluster.clone(),
                    position: client.position,
                    input: input.clone(),
                    output: client.topic.clone(),
                }),
                _ => None,
            })
            .collect();
        Ok(Finished {
            truth: self.truth,
            logs,
            committed_views,
            last_stable_offsets,
            divergences: self.divergences,
            apps,
            client_errors: self.client_errors,
            failed_links: self.failed_links,
            operations: self.operations,
            shared_ids: self
                .senders
                .iter()
                .filter(|(_, clients)| clients.len() > 1)
                .map(|((cluster, topic, id), clients)| {
                    let clients: Vec<&str> = clients.iter().map(String::as_str).collect();
                    format!("{cluster}/{topic} producer id {id}: {}", clients.join(", "))
                })
                .collect(),
        })
    }
}

fn error_name(error: &LogError) -> String {
    error
        .kafka_error()
        .map_or_else(|| "storage".to_owned(), |kafka| kafka.name().to_owned())
}

/// A summary with the fields replicas must agree on (the high watermark is each replica's own).
fn comparable(mut summary: StateSummary) -> StateSummary {
    summary.last_stable_offset = 0;
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configured_store_keeps_every_option_under_the_runs_own_directory() {
        let parent = tempfile::tempdir().unwrap();
        let config = StorageConfig::parse(&format!(
            "backend = \"fs\"\ndata_dir = {:?}\nsegment_bytes = 4096\ndurability = \"buffered\"\n",
            parent.path()
        ))
        .unwrap();
        let script = Script {
            clusters: vec!["a".to_owned()],
            steps: Vec::new(),
        };
        let world = World::new(
            &script,
            Strategy::Barrier,
            SimStorage::from_config(config.clone()),
        )
        .unwrap();
        let run_dir = world.dir.as_ref().unwrap().path().to_owned();
        assert!(
            run_dir.starts_with(parent.path()),
            "{run_dir:?} is outside the configured data_dir"
        );
        let leader = world.store_config("a", "leader");
        assert_eq!(leader, config.with_data_dir(&run_dir.join("a").join("leader")));
        assert_eq!(
            world.clusters["a"].log_config.durability,
            storage::Durability::Buffered
        );
        drop(world);
        assert!(!run_dir.exists(), "the run's directory outlived it");
    }
}
