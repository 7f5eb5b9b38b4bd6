//! The simulated world: clusters, each one `node::Node` — the code `mirrorlog serve` runs — with a leader and a
//! follower replica of every partition on a real storage backend and its transaction coordinator's log on the
//! leader's store, and its mirror links (`node::mirror::MirrorLinks`, reaching their sources over a simulated
//! network that applies the run's [`Strategy`]); and the clients, which speak Kafka's
//! request values to the nodes (Produce, InitProducerId, AddPartitionsToTxn, EndTxn at the versions a current
//! client uses) and act on the error codes they get back. All nodes share one simulated clock ([`SimClock`]).
//! [`World::run`] executes a [`Script`] step by step in one task: every choice was made when the script was
//! generated, so the same script gives the same run.
//!
//! The clients behave as Kafka's do (kafka-semantics §9): an idempotent producer whose producer is refused
//! (`OUT_OF_ORDER_SEQUENCE_NUMBER`, `INVALID_PRODUCER_EPOCH`, …) is re-created with a new producer id; a
//! transactional producer re-initialises on a fatal coordinator error and aborts on an abortable one; an
//! application follows its [`AppPolicy`]. What each error means to a client is `KafkaError::client_class`, the
//! one classification the project has. Every refusal a client hears is counted in [`ClientErrors`]: a
//! refusal is visible, not silent, and is not an anomaly.

use std::collections::BTreeMap;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use kafka_types::{ProducerEpoch, ProducerId, TransactionalId};
use node::mirror::MirrorLinks;
use node::{Clock, Node, NodeConfig};
use producer_state::StateSummary;
use record_format::RecordBatch;
use storage::Storage;
use storage_config::StorageConfig;

use crate::logview::{all_batches, committed_records};
use crate::script::{AppPolicy, ClientKind, Script, Step};
use crate::strategy::Strategy;
use crate::truth::Truth;
use crate::SimError;

mod clients;
mod coordinator;
mod links;
mod network;
mod offsets;
mod rewinds;
mod sources;
pub mod versions;

/// The simulated clock every node of a run reads: it moves a step at a time, and one millisecond on every
/// reading, so that no two transaction markers share a timestamp (the oracle names a marker's transaction by its
/// timestamp, which mirroring copies with the bytes).
#[derive(Debug)]
pub struct SimClock(AtomicI64);

impl SimClock {
    fn new(start_ms: i64) -> Self {
        SimClock(AtomicI64::new(start_ms))
    }

    /// Moves the clock forward by `ms`.
    fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    /// Moves the clock forward to `ms` (never back).
    fn advance_to(&self, ms: i64) {
        self.0.fetch_max(ms, Ordering::SeqCst);
    }
}

impl Clock for SimClock {
    fn now_ms(&self) -> i64 {
        self.0.fetch_add(1, Ordering::SeqCst)
    }
}

/// Milliseconds a step takes on the simulated clock.
const STEP_MS: i64 = 1_000;
/// Transaction timeout the clients ask for.
const TRANSACTION_TIMEOUT_MS: i32 = 60_000;

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

impl FetchBound {
    /// The isolation a fetch up to this bound reads with.
    fn isolation(self) -> partition_log::Isolation {
        match self {
            FetchBound::LastStableOffset => partition_log::Isolation::ReadCommitted,
            FetchBound::HighWatermark => partition_log::Isolation::ReadUncommitted,
        }
    }
}

/// A deliberate bug the verdict's tests switch on, to show that the verdict notices it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Mutation {
    /// A failover stops fetching but never runs STOPPING: no barrier, and the partition stays read-only.
    FailoverNeverCompletes,
    /// The barrier strategies' failover opens the partition without the cut, the ABORT markers and the barrier
    /// (as `none` does; `StoppingDeparture::NoBarrier`).
    NoBarrier,
    /// `barrier+advance` does not move the destination's producer-id allocator past the mirrored ids.
    AllocatorNotAdvanced,
    /// `barrier+advance` moves the allocator past the ids its links copied only, not past the source's report of
    /// the ids it issued (the data-only advance before ADR 0047): an id the source issued but nothing mirrored
    /// carried is issued again.
    AdvancePastCopiedIdsOnly,
    /// STOPPING without its cut to the last stable offset: the ABORT markers and the barrier land after whatever
    /// open transactions the link copied, and close them (`StoppingDeparture::NoStableCut`).
    NoLsoCut,
    /// STOPPING records the last mirrored offset as the log end before its cut to the LSO, not after: a later
    /// failback aligns the old source with a position the new one cut.
    LastMirroredBeforeTheCut,
    /// The barrier resets producer state on the leader only: follower replicas take another cluster id, so under
    /// writer scope they never apply their own cluster's barrier.
    LeaderOnlyBarrier,
    /// The links copy no consumer-group offsets: an application that moves finds no committed position.
    NoOffsetSync,
    /// The links never check their sources' topics (`MirrorLinks::set_source_topic_check_interval_ms(None)`): a
    /// partition added at a source is never mirrored.
    GrowthNotFollowed,
    /// The sources are described without their topic ids (a source that has none): a link records no id, so a
    /// topic deleted and created again at the source is fetched on as if it were the one mirrored.
    TopicIdsIgnored,
    /// A session that resumes after a transient source error aligns again as a new one, and a source that never
    /// answers the private question (Apache Kafka) counts as "never mirrored from us": the mirror is emptied and
    /// copied again (issue 50's "a retry wipes the partition"; `MirrorDriver::realign_on_retry`).
    TruncateOnRetry,
}

/// Refusals the clients heard, by Kafka error name (visible errors, not anomalies).
pub type ClientErrors = BTreeMap<String, u64>;

/// One cluster: a node (leader and follower replicas, the coordinator on the leader's store) and, once it is a
/// mirror's destination, its mirror links (the node's own, over the simulated network).
struct Cluster {
    node: Arc<Node>,
    /// The topics it has (each with the script's partitions).
    topics: std::collections::BTreeSet<String>,
    /// Its mirror links, opened when it first mirrors.
    links: Option<MirrorLinks>,
    /// The largest producer id its links copied, by source and topic.
    copied_ids: sources::CopiedIds,
}

/// A running mirror link: `dest` mirrors `topic` from `source` through a link of `dest`'s node named after the
/// topic (a topic belongs to one link).
struct Link {
    source: String,
    dest: String,
    topic: String,
    /// The source's topic was deleted and created again since the link started ([`Step::RecreateTopic`]): the
    /// batches each partition of the topic it mirrored held then. The mirror is judged against them, and holds
    /// nothing of the new topic.
    source_before_recreation: Option<BTreeMap<i32, Vec<RecordBatch>>>,
}

/// A client and what it holds.
#[derive(Debug, Clone)]
struct Client {
    cluster: String,
    topic: String,
    kind: ClientKind,
    producer: Option<(ProducerId, ProducerEpoch)>,
    /// The next sequence number per partition of its topic.
    sequences: BTreeMap<i32, i32>,
    /// The partition its next batch goes to (a pending batch's, until it is acknowledged); producers take turns
    /// over the topic's partitions, applications stay on partition 0.
    partition: i32,
    /// A batch written whose acknowledgement was lost, with its record ids: sent again next time.
    pending: Option<(RecordBatch, Vec<u64>)>,
    /// The last refusal the client heard.
    last_refusal: Option<kafka_types::KafkaError>,
    in_txn: bool,
    /// The partitions the open transaction holds (meaningful while `in_txn`).
    txn_partitions: std::collections::BTreeSet<i32>,
    txn_records: Vec<u64>,
    dead: Option<String>,
    /// Applications: whether the open transaction holds their group's offsets partition yet.
    offsets_in_txn: bool,
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
    /// The partition it read (its name as in [`Finished::logs`]: partition 0 of its input topic).
    pub input: String,
    /// The partition it wrote (partition 0 of its output topic).
    pub output: String,
}

/// A partition's leader log as its topic's deletion found it.
#[derive(Debug, Clone)]
pub struct DeletedLog {
    /// The cluster.
    pub cluster: String,
    /// The partition, named as in [`Finished::logs`].
    pub log: String,
    /// Its batches.
    pub batches: Vec<RecordBatch>,
    /// What a read_committed consumer saw: the record ids, in order.
    pub committed_view: Vec<u64>,
    /// Its last stable offset.
    pub last_stable_offset: i64,
}

/// A run's end state, handed to the oracle.
pub struct Finished {
    /// The ground truth.
    pub truth: Truth,
    /// Every cluster's leader logs by (cluster, partition), as batches: a partition is named by its topic when
    /// topics have one partition, else `topic-N`.
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
    /// Partitions a failover stopped mirroring that were still read-only at the end (with no link into them).
    pub read_only_after_failover: Vec<String>,
    /// Clients still holding a batch that was never acknowledged at the end, after a last flush, with the last
    /// refusal they heard.
    pub unacknowledged: Vec<String>,
    /// Records a failover's source acknowledged (plain, or committed) that a read_committed consumer of the
    /// destination could not see when it took over: the failover's loss window, not silent loss (record ids).
    pub failover_window: std::collections::BTreeSet<u64>,
    /// Records acknowledged in a topic an operator deleted since ([`Step::RecreateTopic`], and the mirror the
    /// operator deletes after it): gone with it, not lost. (A failback's fresh mirror deletes a topic too, and
    /// keeps holding its records to the loss check.)
    pub deleted_records: std::collections::BTreeSet<u64>,
    /// The logs of every topic deleted during the run, as they were just before: judged by the oracle as the logs
    /// at the end are, but for the loss check (their records are gone) and committed records they hide.
    pub deleted_logs: Vec<DeletedLog>,
    /// Links that failed because their source's topic was created again, each with its failure, whose mirror the
    /// simulated operator deleted and whose link it created afresh (not failed links: the remedy followed).
    pub remedied: Vec<String>,
    /// Client operations executed (produce attempts, transaction ends, initialisations).
    pub operations: u64,
    /// (cluster, topic, producer id) under which two or more real clients sent batches, with the clients.
    pub shared_ids: Vec<String>,
    /// Requests mirror links sent that met one of the network's faults (0 without [`Step::SourceFault`]s).
    pub faults_met: u64,
    /// Mirror rounds answered from a fetch ahead (as `serve` fetches the next round while it writes one), and
    /// fetches ahead that were lost, over every destination's links.
    pub rounds_fetched_ahead: node::mirror::RoundsAhead,
    /// Mirrors whose producer state differed from their source's as a planned failover began (caught up, same
    /// bytes): what the barrier's scope does to a cluster that stores another cluster's barrier. Reported, not
    /// an anomaly: a mirror validates nothing it stores, and its own barrier clears its state before it is
    /// writable.
    pub state_drift: Vec<String>,
}

/// The simulated world; see the module docs.
pub struct World {
    strategy: Strategy,
    /// Partitions of every topic (the script's).
    partitions: u32,
    storage: SimStorage,
    dir: Option<tempfile::TempDir>,
    clusters: BTreeMap<String, Cluster>,
    links: Vec<Link>,
    clients: BTreeMap<String, Client>,
    truth: Truth,
    clock: Arc<SimClock>,
    next_record: u64,
    client_errors: ClientErrors,
    divergences: Vec<String>,
    state_drift: Vec<String>,
    failed_links: Vec<String>,
    /// (cluster, topic) of every partition a failover stopped mirroring.
    failed_over: std::collections::BTreeSet<(String, String)>,
    /// Records a failover's source acknowledged that its destination never received.
    failover_window: std::collections::BTreeSet<u64>,
    /// Records acknowledged in a topic an operator deleted since.
    deleted_records: std::collections::BTreeSet<u64>,
    deleted_logs: Vec<DeletedLog>,
    /// Mirrors the simulated operator deleted and created afresh after their source's topic was created again.
    remedies: usize,
    remedied: Vec<String>,
    operations: u64,
    /// The client whose transaction each transactional id last opened (the owner of the markers that end it).
    txn_owners: BTreeMap<TransactionalId, String>,
    /// What mirror links fetch up to.
    fetch_bound: FetchBound,
    /// The deliberate bug switched on, if any.
    mutation: Option<Mutation>,
    /// The network between clusters: Kafka-like sources and the faults queued on each.
    network: network::Network,
    /// The real clients that sent batches under each (cluster, topic, producer id).
    senders: BTreeMap<(String, String, i64), std::collections::BTreeSet<String>>,
    /// A topic grew ([`Step::AddPartition`]): the links check their sources' topics at every round.
    topics_check_every_round: bool,
}

impl World {
    /// A world with the script's clusters, nothing in them yet.
    pub async fn new(script: &Script, strategy: Strategy, storage: SimStorage) -> Result<Self, SimError> {
        Self::new_mutated(script, strategy, storage, None).await
    }

    /// Like [`World::new`], with a deliberate bug switched on (see [`Mutation`]; the verdict's own tests).
    pub async fn new_mutated(
        script: &Script,
        strategy: Strategy,
        storage: SimStorage,
        mutation: Option<Mutation>,
    ) -> Result<Self, SimError> {
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
            partitions: script.partitions,
            storage,
            dir,
            clusters: BTreeMap::new(),
            links: Vec::new(),
            clients: BTreeMap::new(),
            truth: Truth::default(),
            clock: Arc::new(SimClock::new(1_000_000)),
            next_record: 0,
            client_errors: ClientErrors::new(),
            divergences: Vec::new(),
            state_drift: Vec::new(),
            failed_links: Vec::new(),
            failed_over: std::collections::BTreeSet::new(),
            failover_window: std::collections::BTreeSet::new(),
            deleted_records: std::collections::BTreeSet::new(),
            deleted_logs: Vec::new(),
            remedies: 0,
            remedied: Vec::new(),
            operations: 0,
            senders: BTreeMap::new(),
            topics_check_every_round: false,
            txn_owners: BTreeMap::new(),
            fetch_bound: FetchBound::LastStableOffset,
            mutation,
            network: network::Network::default(),
        };
        if !(1..=crate::script::MAX_PARTITIONS).contains(&script.partitions) {
            // A replayed file says how many: run what it says, or say why not.
            return Err(SimError::Setup(format!(
                "{} partitions per topic: use 1 to {}",
                script.partitions,
                crate::script::MAX_PARTITIONS
            )));
        }
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
            let cluster = world.new_cluster(name).await?;
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

    async fn new_cluster(&self, name: &str) -> Result<Cluster, SimError> {
        let mut config = NodeConfig::new(self.storage.config().clone());
        config.cluster_id = name.to_owned();
        config.auto_create_topics = false;
        config.barrier_scope = self.strategy.barrier_scope();
        config.record_delivered_markers = true;
        // Topic ids from the cluster's name: a run is the same every time.
        config.topic_id_seed = Some(name.bytes().fold(0xC1A5_7E00_u64, |seed, byte| {
            seed.wrapping_mul(31).wrapping_add(u64::from(byte))
        }));
        if self.mutation == Some(Mutation::LeaderOnlyBarrier) {
            config.follower_cluster_id = Some(format!("{name}-follower"));
        }
        let node = Node::open_replicated(
            config,
            (name.to_owned(), 9092),
            self.open_store(name, "leader")?,
            vec![self.open_store(name, "follower")?],
            Arc::clone(&self.clock) as Arc<dyn Clock>,
        )
        .await
        .map_err(|error| SimError::Setup(format!("cluster {name}: {error}")))?;
        Ok(Cluster {
            node: Arc::new(node),
            topics: std::collections::BTreeSet::new(),
            links: None,
            copied_ids: sources::CopiedIds::default(),
        })
    }

    /// The simulated time (each reading moves it by a millisecond; see [`SimClock`]).
    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The node of `cluster`.
    fn node(&self, cluster: &str) -> Option<&Node> {
        self.clusters.get(cluster).map(|state| &*state.node)
    }

    /// The partitions of `topic` on `cluster`: as many as its node holds (a topic grows by
    /// [`Step::AddPartition`], and a mirror of it by its link), or the script's count where it holds none.
    pub(super) async fn partition_numbers(&self, cluster: &str, topic: &str) -> std::ops::Range<i32> {
        let held = match self.node(cluster) {
            Some(node) => node.topic_partitions().await.get(topic).copied(),
            None => None,
        };
        let count = held.map_or(self.partitions, |held| u32::try_from(held).unwrap_or(u32::MAX));
        0..i32::try_from(count).unwrap_or(i32::MAX)
    }

    /// A partition's name in findings: the topic alone for partition 0 when the script's topics have one partition
    /// (a partition added later is `topic-N`), else `topic-N`.
    pub(super) fn log_name(&self, topic: &str, partition: i32) -> String {
        if self.partitions == 1 && partition == 0 {
            topic.to_owned()
        } else {
            format!("{topic}-{partition}")
        }
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
        self.clock.advance(STEP_MS);
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
                if let Some(node) = self.node(cluster) {
                    node.advance_producer_ids_past(*past)
                        .await
                        .map_err(SimError::node)?;
                }
            }
            Step::BehaveAsKafka { cluster } => self.network.behave_as_kafka(cluster),
            Step::AddPartition { cluster, topic } => self.add_partition(cluster, topic).await?,
            Step::RecreateTopic { cluster, topic } => self.recreate_topic(cluster, topic).await?,
            Step::SourceFault {
                cluster,
                fault,
                count,
            } => self.network.queue(cluster, *fault, *count),
        }
        self.abort_timed_out().await?;
        self.expire_producers().await;
        Ok(())
    }

    /// The brokers' periodic producer expiration (Kafka's `producer.id.expiration.check.interval.ms`), on every
    /// replica: run every step, so leader, follower and a recovered replica (whose replay does not expire)
    /// compare at the same point.
    async fn expire_producers(&mut self) {
        for state in self.clusters.values() {
            state.node.expire_producers().await;
        }
    }

    // ---- partitions and replication -------------------------------------------------------------------------

    /// Creates `topic` (with the script's partitions) on `cluster` unless it is there; false when it cannot be (no such
    /// cluster, or a name Kafka refuses).
    async fn ensure_partition(&mut self, cluster: &str, topic: &str) -> Result<bool, SimError> {
        let Some(state) = self.clusters.get_mut(cluster) else {
            return Ok(false);
        };
        if state.topics.contains(topic) {
            return Ok(true);
        }
        match state.node.create_topic(topic, self.partitions).await {
            Ok(()) | Err(kafka_types::KafkaError::TopicAlreadyExists) => {
                state.topics.insert(topic.to_owned());
                Ok(true)
            }
            Err(kafka_types::KafkaError::KafkaStorageError) => Err(SimError::Storage(format!(
                "{cluster}: creating {topic} failed (the reason is on stderr)"
            ))),
            Err(_) => Ok(false),
        }
    }

    /// An operator's CreatePartitions: `topic` on `cluster` gains one partition (a topic a link mirrors into
    /// `cluster` is refused, as `serve` refuses `kafka-topics --alter` there; the refusal is counted with the
    /// clients'). From then on every cluster's links check their sources' topics at every round (but under the
    /// [`Mutation::GrowthNotFollowed`] mutant), so the next mirror step meets the growth as a metadata refresh that
    /// came due.
    async fn add_partition(&mut self, cluster: &str, topic: &str) -> Result<(), SimError> {
        let held = match self.clusters.get(cluster) {
            Some(state) if state.topics.contains(topic) => {
                state.node.topic_partitions().await.get(topic).copied()
            }
            _ => None,
        };
        let Some(count) = held.and_then(|held| i32::try_from(held + 1).ok()) else {
            return Ok(());
        };
        if !self.grow_topic(cluster, topic, count).await? {
            return Ok(());
        }
        if !self.topics_check_every_round && self.mutation != Some(Mutation::GrowthNotFollowed) {
            self.topics_check_every_round = true;
            for links in self
                .clusters
                .values_mut()
                .filter_map(|state| state.links.as_mut())
            {
                links.set_source_topic_check_interval_ms(Some(0));
            }
        }
        self.replicate(cluster, topic).await
    }

    /// An operator deletes `topic` on `cluster` and creates it again with as many partitions (DeleteTopics, then
    /// CreateTopics; see [`Self::delete_topic`]).
    async fn recreate_topic(&mut self, cluster: &str, topic: &str) -> Result<(), SimError> {
        let count = self.partition_numbers(cluster, topic).await.end;
        if !self.delete_topic(cluster, topic, true).await? {
            return Ok(());
        }
        let Some(node) = self.node(cluster) else {
            return Ok(());
        };
        match node
            .create_topic(topic, u32::try_from(count).unwrap_or(u32::MAX))
            .await
        {
            Ok(()) => {}
            Err(kafka_types::KafkaError::KafkaStorageError) => {
                return Err(SimError::Storage(format!(
                    "{cluster}: creating {topic} again failed (the reason is on stderr)"
                )))
            }
            Err(error) => {
                return Err(SimError::Setup(format!(
                    "{cluster}: creating {topic} again: {error}"
                )))
            }
        }
        self.operations += 1;
        self.replicate(cluster, topic).await
    }

    /// An operator deletes `topic` on `cluster` (DeleteTopics; a topic a link mirrors into `cluster` is refused,
    /// counted with the clients' refusals): whether it was deleted. Each link reading it keeps the batches it had,
    /// to judge its mirror by. With `records_go`, what its partitions held is gone with them — its acknowledged
    /// records, and those of transactions open on it, are [`Finished::deleted_records`]; without (a failback's
    /// fresh mirror, which copies back what the new source holds and whose loss the failover's window counted),
    /// the loss check still holds every record to be where it was acknowledged.
    pub(super) async fn delete_topic(
        &mut self,
        cluster: &str,
        topic: &str,
        records_go: bool,
    ) -> Result<bool, SimError> {
        let partitions = self.partition_numbers(cluster, topic).await;
        let held_topic = self
            .clusters
            .get(cluster)
            .is_some_and(|state| state.topics.contains(topic));
        if !held_topic {
            return Ok(false);
        }
        // Judged as it was before it goes: its replicas' state, and its logs (by the oracle, as the logs at the end).
        // (Taken back if the deletion is refused: the topic stays, and is judged where it ends.)
        let divergences_before = self.divergences.len();
        self.compare_replicas(cluster, topic, "before its deletion")
            .await?;
        let mut held = BTreeMap::new();
        let mut logs = Vec::new();
        for partition in partitions.clone() {
            let slot = self.leader(cluster, topic, partition).await?;
            let guard = slot.lock().await;
            let Some(replicas) = guard.as_ref() else {
                return Err(SimError::Setup(format!(
                    "{cluster}/{} is closed",
                    self.log_name(topic, partition)
                )));
            };
            let leader = &replicas.leader;
            let batches = all_batches(leader).await?;
            held.insert(partition, batches.clone());
            logs.push(DeletedLog {
                cluster: cluster.to_owned(),
                log: self.log_name(topic, partition),
                batches,
                committed_view: committed_records(leader, leader.log_start_offset())
                    .await?
                    .into_iter()
                    .map(|(_, id)| id)
                    .collect(),
                last_stable_offset: leader.last_stable_offset(),
            });
        }
        let Some(node) = self.node(cluster) else {
            return Ok(false);
        };
        if let Err(refusal) = node.delete_topic(topic).await {
            *self
                .client_errors
                .entry(refusal.error.name().to_owned())
                .or_default() += 1;
            self.divergences.truncate(divergences_before);
            return Ok(false);
        }
        self.operations += 1;
        self.deleted_logs.extend(logs);
        if records_go {
            self.forget_records_of(cluster, topic, &held);
        }
        for link in &mut self.links {
            if link.source == cluster && link.topic == topic && link.source_before_recreation.is_none() {
                link.source_before_recreation = Some(held.clone());
            }
        }
        Ok(true)
    }

    /// Counts the records of `topic` on `cluster` that went with its deletion as [`Finished::deleted_records`]:
    /// those acknowledged there that its partitions held (`held`, by partition, as the deletion found them; one
    /// acknowledged there and missing already was lost before, and stays judged as such), and those of
    /// transactions open on it.
    fn forget_records_of(&mut self, cluster: &str, topic: &str, held: &BTreeMap<i32, Vec<RecordBatch>>) {
        let in_log: std::collections::BTreeSet<(String, u64)> = held
            .iter()
            .flat_map(|(partition, batches)| {
                let name = self.log_name(topic, *partition);
                batches
                    .iter()
                    .flat_map(crate::logview::record_ids)
                    .map(move |id| (name.clone(), id))
            })
            .collect();
        let acknowledged = self.truth.records.iter().filter(|(id, record)| {
            record.acked_on.as_deref() == Some(cluster) && in_log.contains(&(record.topic.clone(), **id))
        });
        let mut gone: Vec<u64> = acknowledged.map(|(id, _)| *id).collect();
        // A transaction open on the topic: a commit after the deletion would find the new topic's partitions.
        for client in self.clients.values() {
            if client.cluster == cluster && client.topic == topic && client.in_txn {
                gone.extend(client.txn_records.iter().copied());
            }
        }
        self.deleted_records.extend(gone);
    }

    /// Sends `cluster` a CreatePartitions request growing `topic` to `count` partitions, as `kafka-topics --alter
    /// --partitions` does: whether it was granted (a refusal is counted with the clients').
    pub(super) async fn grow_topic(
        &mut self,
        cluster: &str,
        topic: &str,
        count: i32,
    ) -> Result<bool, SimError> {
        use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
        use kafka_protocol::messages::{CreatePartitionsRequest, TopicName};

        let Some(node) = self.node(cluster) else {
            return Ok(false);
        };
        let mut grown = CreatePartitionsTopic::default();
        grown.name = TopicName(clients::protocol_string(topic));
        grown.count = count;
        grown.assignments = None;
        let mut request = CreatePartitionsRequest::default();
        request.topics = vec![grown];
        request.timeout_ms = 30_000;
        let response = node.create_partitions(request, versions::CREATE_PARTITIONS).await;
        self.operations += 1;
        let Some(code) = response
            .results
            .iter()
            .map(|result| result.error_code)
            .find(|&code| code != kafka_types::NO_ERROR)
        else {
            return Ok(true);
        };
        let error = kafka_types::KafkaError::from_code(code);
        if error == Some(kafka_types::KafkaError::KafkaStorageError) {
            return Err(SimError::Storage(format!(
                "{cluster}: adding partitions to {topic} failed (the reason is on stderr)"
            )));
        }
        let name = error.map_or_else(|| format!("error code {code}"), |error| error.name().to_owned());
        *self.client_errors.entry(name).or_default() += 1;
        Ok(false)
    }

    /// The follower catches up with the leader (the node's replication: cut back first where its history left
    /// the leader's), and the leader's high watermark follows the follower (acks=all with one follower).
    async fn replicate(&mut self, cluster: &str, topic: &str) -> Result<(), SimError> {
        let Some(node) = self.node(cluster) else {
            return Ok(());
        };
        for partition in self.partition_numbers(cluster, topic).await {
            node.replicate(topic, partition).await.map_err(SimError::node)?;
        }
        Ok(())
    }

    async fn crash_replica(&mut self, cluster: &str, topic: &str) -> Result<(), SimError> {
        let Some(node) = self.node(cluster) else {
            return Ok(());
        };
        // The crash: the followers' in-memory state is gone; each reopens from what its storage holds.
        for partition in self.partition_numbers(cluster, topic).await {
            node.restart_follower(topic, partition, 0)
                .await
                .map_err(SimError::node)?;
        }
        self.compare_replicas(cluster, topic, "after a follower crash")
            .await
    }

    /// Records a divergence when a partition's leader and follower producer state differ.
    async fn compare_replicas(&mut self, cluster: &str, topic: &str, when: &str) -> Result<(), SimError> {
        for partition in self.partition_numbers(cluster, topic).await {
            let Some(node) = self.node(cluster) else {
                return Ok(());
            };
            let summaries = node
                .replica_summaries(topic, partition)
                .await
                .map_err(SimError::node)?;
            let mut summaries = summaries.into_iter().map(comparable);
            let Some(leader) = summaries.next() else {
                continue;
            };
            let name = self.log_name(topic, partition);
            for follower in summaries {
                if leader != follower {
                    self.divergences.push(format!(
                        "{cluster}/{name} {when}: leader {leader:?} vs follower {follower:?}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Before a planned failover of `dest`: when the link has caught up (both leaders end at the same offset,
    /// ids untransformed), records whether the mirror's producer state differs from its source's, and how.
    pub(super) async fn compare_mirror_state(
        &mut self,
        source: &str,
        dest: &str,
        topic: &str,
    ) -> Result<(), SimError> {
        if self.strategy.transforms_producer_ids() {
            return Ok(());
        }
        for partition in self.partition_numbers(dest, topic).await {
            self.compare_mirror_partition(source, dest, topic, partition)
                .await?;
        }
        Ok(())
    }

    /// [`Self::compare_mirror_state`] for one partition.
    async fn compare_mirror_partition(
        &mut self,
        source: &str,
        dest: &str,
        topic: &str,
        partition: i32,
    ) -> Result<(), SimError> {
        let (Some(source_node), Some(dest_node)) = (self.node(source), self.node(dest)) else {
            return Ok(());
        };
        let of_source = source_node
            .replica_summaries(topic, partition)
            .await
            .map_err(SimError::node)?;
        let of_dest = dest_node
            .replica_summaries(topic, partition)
            .await
            .map_err(SimError::node)?;
        let (Some(of_source), Some(of_dest)) = (of_source.into_iter().next(), of_dest.into_iter().next())
        else {
            return Ok(());
        };
        if of_source.log_end_offset != of_dest.log_end_offset {
            return Ok(());
        }
        let kept: Vec<i64> = of_dest
            .producers
            .keys()
            .filter(|id| !of_source.producers.contains_key(id))
            .copied()
            .collect();
        let dropped: Vec<i64> = of_source
            .producers
            .keys()
            .filter(|id| !of_dest.producers.contains_key(id))
            .copied()
            .collect();
        let differing: Vec<String> = of_dest
            .producers
            .iter()
            .filter_map(|(id, entry)| {
                let other = of_source.producers.get(id)?;
                (other != entry).then(|| format!("{id} (mirror {entry:?}, source {other:?})"))
            })
            .collect();
        if kept.is_empty()
            && dropped.is_empty()
            && differing.is_empty()
            && of_source.ongoing_transactions == of_dest.ongoing_transactions
        {
            return Ok(());
        }
        let name = self.log_name(topic, partition);
        self.state_drift.push(format!(
            "{dest}/{name} mirroring {source} at offset {}: producers only the mirror holds {kept:?}, only the source {dropped:?}, held differently [{}]",
            of_dest.log_end_offset,
            differing.join(", ")
        ));
        Ok(())
    }

    /// The end of a run: every open transaction commits, the transaction timeout passes (so each coordinator
    /// aborts what a client that moved away left open, as Kafka's does after `transaction.timeout.ms`), every
    /// link catches up. Judging before the timeout would call a transaction abandoned seconds ago stuck forever.
    async fn drain(&mut self) -> Result<(), SimError> {
        let names: Vec<String> = self.clients.keys().cloned().collect();
        for name in &names {
            self.end_txn(name, true).await?;
        }
        self.clock.advance(i64::from(TRANSACTION_TIMEOUT_MS) + STEP_MS);
        self.abort_timed_out().await?;
        // A producer flushes before it closes: a batch still waiting for its acknowledgement goes once more.
        for name in &names {
            let Some(client) = self.clients.get(name) else {
                continue;
            };
            if client.dead.is_none() && client.transactional_id().is_none() {
                if let Some((batch, ids)) = client.pending.clone() {
                    self.send(name, batch, ids, false).await?;
                }
            }
        }
        // A mirror the operator created afresh in a round (its source's topic was created again) copies at the
        // next, and a link reading from it (a chain) meets the new topic's id there: one more round per link.
        for _ in 0..=self.links.len() {
            let remedies = self.remedies;
            self.mirror_all().await?;
            if self.remedies == remedies {
                break;
            }
        }
        Ok(())
    }

    /// What a read_committed consumer of a partition's leader on `cluster` sees: (offset, record id).
    async fn committed_view(
        &self,
        cluster: &str,
        topic: &str,
        partition: i32,
    ) -> Result<Vec<(i64, u64)>, SimError> {
        let slot = self.leader(cluster, topic, partition).await?;
        let guard = slot.lock().await;
        match guard.as_ref() {
            Some(replicas) => {
                let log = &replicas.leader;
                committed_records(log, log.log_start_offset()).await
            }
            None => Ok(Vec::new()),
        }
    }

    /// Notes the records `source` acknowledged in `topic` that `dest` does not hold as it takes over.
    pub(super) async fn note_failover_window(
        &mut self,
        source: &str,
        dest: &str,
        topic: &str,
    ) -> Result<(), SimError> {
        for partition in self.partition_numbers(source, topic).await {
            self.note_partition_window(source, dest, topic, partition).await?;
        }
        Ok(())
    }

    /// [`Self::note_failover_window`] for one partition.
    async fn note_partition_window(
        &mut self,
        source: &str,
        dest: &str,
        topic: &str,
        partition: i32,
    ) -> Result<(), SimError> {
        // Every record of the source's log its client was told is stored: plain records, and committed ones —
        // also those behind a transaction the loss left open, which a read_committed consumer there cannot reach.
        let mut on_source = Vec::new();
        for batch in self.leader_batches(source, topic, partition).await? {
            if batch.is_control() {
                continue;
            }
            let Ok(records) = batch.records() else {
                continue;
            };
            for record in records.iter().flatten() {
                if let Some(id) = crate::logview::header(&record, crate::truth::RECORD_HEADER)
                    .and_then(|value| value.parse::<u64>().ok())
                {
                    on_source.push((record.offset, id));
                }
            }
        }
        // A partition the source added that the link had not met yet: the destination holds none of it.
        let on_dest: std::collections::BTreeSet<u64> =
            if self.partition_numbers(dest, topic).await.contains(&partition) {
                self.committed_view(dest, topic, partition)
                    .await?
                    .into_iter()
                    .map(|(_, id)| id)
                    .collect()
            } else {
                std::collections::BTreeSet::new()
            };
        let lost: Vec<u64> = on_source
            .into_iter()
            .map(|(_, id)| id)
            .filter(|id| !on_dest.contains(id))
            .filter(|id| {
                self.truth.records.get(id).is_some_and(|truth| {
                    truth.acked_on.as_deref() == Some(source)
                        && matches!(
                            truth.status,
                            crate::truth::Status::Plain | crate::truth::Status::Committed
                        )
                })
            })
            .collect();
        self.failover_window.extend(lost);
        Ok(())
    }

    /// Partitions a failover stopped mirroring that are still read-only (and no link mirrors into now).
    async fn read_only_after_failover(&self) -> Result<Vec<String>, SimError> {
        let mut found = Vec::new();
        for (cluster, topic) in &self.failed_over {
            if self
                .links
                .iter()
                .any(|link| &link.dest == cluster && &link.topic == topic)
            {
                continue;
            }
            for partition in self.partition_numbers(cluster, topic).await {
                let slot = self.leader(cluster, topic, partition).await?;
                let guard = slot.lock().await;
                if guard
                    .as_ref()
                    .is_some_and(|replicas| replicas.leader.is_read_only())
                {
                    found.push(format!("{cluster}/{}", self.log_name(topic, partition)));
                }
            }
        }
        Ok(found)
    }

    /// Invariant 5 for every running link: where source and destination both hold an offset, they hold the same
    /// batch (after the strategy's producer-id transform). A destination that kept bytes its source cut (or
    /// never had) has diverged.
    async fn compare_mirrors(&mut self) -> Result<(), SimError> {
        let mut found = Vec::new();
        let mut pairs = Vec::new();
        for link in &self.links {
            let (held, of_source) = (
                self.partition_numbers(&link.dest, &link.topic).await,
                self.partition_numbers(&link.source, &link.topic).await,
            );
            if held.end < of_source.end && link.source_before_recreation.is_none() {
                // After the drain every link has met its source's topics: a partition the source added is mirrored.
                found.push(format!(
                    "{}/{}: mirror of {} holds {} partition(s) where its source has {}",
                    link.dest, link.topic, link.source, held.end, of_source.end
                ));
            }
            pairs.extend(held.map(|partition| (link, partition)));
        }
        for (link, partition) in pairs {
            found.extend(self.mirror_divergence(link, partition).await?);
        }
        self.divergences.extend(found);
        Ok(())
    }

    /// Where the destination of `link` holds, in `partition`, a batch its source does not hold the same (after the
    /// strategy's producer-id transform) — judged against what the source topic held when it was deleted and
    /// created again, if it was: then any batch that topic never held is two topics' logs mixed.
    async fn mirror_divergence(&self, link: &Link, partition: i32) -> Result<Option<String>, SimError> {
        let recreated = link.source_before_recreation.as_ref();
        let source_batches = match recreated {
            Some(held) => held.get(&partition).cloned().unwrap_or_default(),
            None => self.leader_batches(&link.source, &link.topic, partition).await?,
        };
        let dest_batches = self.leader_batches(&link.dest, &link.topic, partition).await?;
        let name = self.log_name(&link.topic, partition);
        let by_offset: BTreeMap<i64, &RecordBatch> = source_batches
            .iter()
            .map(|batch| (batch.base_offset(), batch))
            .collect();
        for batch in &dest_batches {
            let offset = batch.base_offset();
            let Some(original) = by_offset.get(&offset) else {
                if recreated.is_some() {
                    return Ok(Some(format!(
                        "{}/{name}: mirror of {} holds a batch at offset {offset} that the topic it mirrored never \
                         held: the source's topic was deleted and created again, and the two topics' logs mixed",
                        link.dest, link.source
                    )));
                }
                if source_batches
                    .last()
                    .is_some_and(|last| offset < last.next_offset())
                {
                    return Ok(Some(format!(
                        "{}/{name}: mirror of {} holds a batch at offset {offset} where its source has none",
                        link.dest, link.source
                    )));
                }
                continue;
            };
            if self.as_mirrored(original).as_bytes() != batch.as_bytes() {
                return Ok(Some(format!(
                    "{}/{name}: mirror of {} differs from its source at offset {offset}",
                    link.dest, link.source
                )));
            }
        }
        Ok(None)
    }

    /// `original` as a mirror of it holds it: after the strategy's producer-id transform.
    fn as_mirrored(&self, original: &RecordBatch) -> RecordBatch {
        let mut mirrored = original.clone();
        let mapped = self.strategy.map_producer_id(mirrored.producer_id());
        if mapped != mirrored.producer_id() {
            mirrored.set_producer(mapped, mirrored.producer_epoch(), mirrored.base_sequence());
        }
        mirrored
    }

    /// Every batch of the leader log of a partition of `topic` on `cluster`.
    async fn leader_batches(
        &self,
        cluster: &str,
        topic: &str,
        partition: i32,
    ) -> Result<Vec<RecordBatch>, SimError> {
        let slot = self.leader(cluster, topic, partition).await?;
        let guard = slot.lock().await;
        match guard.as_ref() {
            Some(replicas) => all_batches(&replicas.leader).await,
            None => Err(SimError::Setup(format!(
                "{cluster}/{} is closed",
                self.log_name(topic, partition)
            ))),
        }
    }

    async fn finish(mut self) -> Result<Finished, SimError> {
        self.expire_producers().await;
        self.compare_mirrors().await?;
        let read_only_after_failover = self.read_only_after_failover().await?;
        let unacknowledged: Vec<String> = self
            .clients
            .iter()
            .filter(|(_, client)| client.dead.is_none())
            .filter_map(|(name, client)| {
                let (_, ids) = client.pending.as_ref()?;
                Some(format!(
                    "{name} on {}: {} record(s) never acknowledged (last refusal: {})",
                    client.cluster,
                    ids.len(),
                    client.last_refusal.map_or("none", |error| error.name())
                ))
            })
            .collect();
        let mut logs = BTreeMap::new();
        let mut committed_views = BTreeMap::new();
        let mut last_stable_offsets = BTreeMap::new();
        let keys: Vec<(String, String)> = self
            .clusters
            .iter()
            .flat_map(|(cluster, state)| {
                state
                    .topics
                    .iter()
                    .map(move |topic| (cluster.clone(), topic.clone()))
            })
            .collect();
        for (cluster, topic) in &keys {
            self.compare_replicas(cluster, topic, "at the end").await?;
            // Recovery: a fresh copy of the follower from its storage must reach the same state again.
            if let Some(node) = self.node(cluster) {
                for partition in self.partition_numbers(cluster, topic).await {
                    node.restart_follower(topic, partition, 0)
                        .await
                        .map_err(SimError::node)?;
                }
            }
            self.compare_replicas(cluster, topic, "after recovery").await?;
            for partition in self.partition_numbers(cluster, topic).await {
                let key = (cluster.clone(), self.log_name(topic, partition));
                let slot = self.leader(cluster, topic, partition).await?;
                let guard = slot.lock().await;
                let Some(replicas) = guard.as_ref() else {
                    continue;
                };
                let leader = &replicas.leader;
                let batches = all_batches(leader).await?;
                let view = committed_records(leader, leader.log_start_offset()).await?;
                last_stable_offsets.insert(key.clone(), leader.last_stable_offset());
                committed_views.insert(key.clone(), view.into_iter().map(|(_, id)| id).collect());
                logs.insert(key, batches);
            }
        }
        let mut apps = Vec::new();
        for (name, client) in &self.clients {
            let ClientKind::App {
                input,
                policy,
                transactional_id,
            } = &client.kind
            else {
                continue;
            };
            // The committed position is what the application's cluster holds, not what the client remembers.
            let position = self
                .committed_offset(&client.cluster, transactional_id, input)
                .await
                .unwrap_or(0);
            apps.push(AppOutcome {
                client: name.clone(),
                policy: *policy,
                dead: client.dead.clone(),
                recoveries: client.recoveries,
                cluster: client.cluster.clone(),
                position,
                input: self.log_name(input, 0),
                output: self.log_name(&client.topic, 0),
            });
        }
        let mut rounds_fetched_ahead = node::mirror::RoundsAhead::default();
        for links in self
            .clusters
            .values()
            .filter_map(|cluster| cluster.links.as_ref())
        {
            let ahead = links.fetched_ahead();
            rounds_fetched_ahead.used += ahead.used;
            rounds_fetched_ahead.lost += ahead.lost;
        }
        Ok(Finished {
            truth: self.truth,
            logs,
            committed_views,
            last_stable_offsets,
            divergences: self.divergences,
            state_drift: self.state_drift,
            faults_met: self.network.faults_met(),
            rounds_fetched_ahead,
            apps,
            client_errors: self.client_errors,
            failed_links: self.failed_links,
            read_only_after_failover,
            unacknowledged,
            failover_window: self.failover_window,
            deleted_records: self.deleted_records,
            deleted_logs: self.deleted_logs,
            remedied: self.remedied,
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
        let script = Script::new(vec!["a".to_owned()], Vec::new());
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let world = runtime
            .block_on(World::new(
                &script,
                Strategy::Barrier,
                SimStorage::from_config(config.clone()),
            ))
            .unwrap();
        let run_dir = world.dir.as_ref().unwrap().path().to_owned();
        assert!(
            run_dir.starts_with(parent.path()),
            "{run_dir:?} is outside the configured data_dir"
        );
        let leader = world.store_config("a", "leader");
        assert_eq!(leader, config.with_data_dir(&run_dir.join("a").join("leader")));
        assert_eq!(
            world.clusters["a"].node.config().storage.durability(),
            storage::Durability::Buffered
        );
        drop(world);
        assert!(!run_dir.exists(), "the run's directory outlived it");
    }
}
