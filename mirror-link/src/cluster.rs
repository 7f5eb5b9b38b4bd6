//! [`SourceCluster`]: the connections to one source cluster, shared by every partition mirrored from it — one
//! connection per source broker, whatever the number of partitions — and the Fetch that asks each broker for all
//! the partitions it leads at once.
//!
//! A session starts with Metadata from any broker that answers ([`crate::bootstrap`]: the connections kept, the
//! bootstrap list, then the brokers the last answer named): the source's cluster id (every answer carries it,
//! and the mirror machine checks it on every fetch), its brokers and the leaders of the partitions asked about.
//! A topic or partition the answer gives an error for (deleted, no leader during an election) fails only its own
//! partitions, with the error Kafka named; the others go on. A connection that fails, or a leadership error, ends
//! the session; the next call opens a new one (the machine retries with backoff). Memory is bounded by the request: at most the round's `FetchLimits` (per partition and
//! per answer, the latter never above [`MAX_RESPONSE_BYTES`]) plus one batch larger than the limit, which Kafka
//! returns whole — checked against the size field before a byte of the answer is read.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    fetch_request, ApiKey, BrokerId, FetchRequest, FetchResponse, ListGroupsRequest, ListGroupsResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse, OffsetFetchRequest,
    OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use mirror_fsm::{
    FetchError, FetchLimits, FetchResponse as Fetched, FetchedPartition, GroupOffset, PartitionFetch,
};
use record_format::{BatchBuffers, BatchIter, DecodeError, ErrorCategory, RecordBatch, SegmentError};
use uuid::Uuid;

use crate::bootstrap::{bootstrap_servers, in_order, metadata_from_any, Reach};
use crate::connection::KafkaConnection;
use crate::error::LinkError;
use crate::fetcher::FetcherConfig;
use kafka_types::KafkaError;

/// Fetch versions the link speaks: 4 (record format v2, isolation levels) to 13 (topics named by id). A request
/// is sent at 12 at most when a topic in it has no id (a source before topic ids, or a link recorded without one).
const FETCH_VERSIONS: (i16, i16) = (4, 13);
/// The first Fetch version that names topics by id rather than by name.
const FETCH_BY_TOPIC_ID: i16 = 13;
/// Metadata versions: 2 (the cluster id) to 12 (topic ids from 10).
const METADATA_VERSIONS: (i16, i16) = (2, 12);
/// ListOffsets versions: 1 (offsets, not lists) to 5.
const LIST_OFFSETS_VERSIONS: (i16, i16) = (1, 5);
/// ListGroups versions: 0 to 2 (the last before the flexible ones).
const LIST_GROUPS_VERSIONS: (i16, i16) = (0, 2);
/// OffsetFetch versions: 2 (a null topic list asks for every committed offset) to 5 (the last before the flexible
/// ones).
const OFFSET_FETCH_VERSIONS: (i16, i16) = (2, 5);
/// `read_committed`: a fetch stops at the last stable offset.
const READ_COMMITTED: i8 = 1;
/// ListOffsets' timestamp for a partition's log start.
const EARLIEST: i64 = -2;
/// ListOffsets' timestamp for a partition's end (its last stable offset, asked `read_committed`).
const LATEST: i64 = -1;
/// The most one Fetch answer may carry (Kafka's `fetch.max.bytes` default is 50 MiB).
pub const MAX_RESPONSE_BYTES: usize = 32 << 20;
/// Kafka's `OFFSET_OUT_OF_RANGE`: the source holds no such offset (evidence for the resume check).
const OFFSET_OUT_OF_RANGE: i16 = KafkaError::OffsetOutOfRange.code();
/// The errors of a partition's Fetch answer that say the session's metadata is stale (the partition moved, or
/// its topic changed): the next round asks for Metadata again, as Kafka's consumer does.
const STALE_METADATA_ERRORS: [i16; 6] = [
    KafkaError::UnknownTopicOrPartition.code(),
    KafkaError::NotLeaderOrFollower.code(),
    KafkaError::FencedLeaderEpoch.code(),
    KafkaError::UnknownLeaderEpoch.code(),
    KafkaError::UnknownTopicId.code(),
    KafkaError::InconsistentTopicId.code(),
];

/// The errors of a Fetch by topic id that say the source has no topic of that id (anymore).
const TOPIC_ID_ERRORS: [i16; 2] = [
    KafkaError::UnknownTopicId.code(),
    KafkaError::InconsistentTopicId.code(),
];

/// The most brokers of the source's answer remembered for a new session (an answer is the source's input).
const MAX_KNOWN_BROKERS: usize = 64;
/// The most addresses one session's opening tries (each may cost a call's timeout).
const MAX_CANDIDATES: usize = 16;

/// Kafka's `UNKNOWN_TOPIC_OR_PARTITION`: a partition the answer does not hold.
const UNKNOWN_TOPIC_OR_PARTITION: i16 = KafkaError::UnknownTopicOrPartition.code();
/// Kafka's `LEADER_NOT_AVAILABLE`: a partition without a leader (an election under way).
const LEADER_NOT_AVAILABLE: i16 = KafkaError::LeaderNotAvailable.code();

/// Kafka's UNKNOWN_TOPIC_OR_PARTITION.
const UNKNOWN_TOPIC: i16 = KafkaError::UnknownTopicOrPartition.code();

/// Kafka's TOPIC_AUTHORIZATION_FAILED.
const TOPIC_AUTHORIZATION_FAILED: i16 = KafkaError::TopicAuthorizationFailed.code();

/// A partition's key.
type Partition = (String, i32);

/// The connections and metadata of one source cluster; see the module docs.
#[derive(Debug)]
pub struct SourceCluster {
    config: FetcherConfig,
    session: Option<Session>,
    /// Every topic asked about, so a new session's Metadata covers them all.
    topics: BTreeSet<String>,
    /// The brokers the source's last Metadata answer named: where a new session asks when the bootstrap list
    /// does not answer.
    known_brokers: Vec<String>,
}

#[derive(Debug)]
struct Session {
    cluster_id: String,
    /// Broker addresses by node id.
    brokers: BTreeMap<i32, String>,
    /// Each partition's leader (node id).
    leaders: BTreeMap<Partition, i32>,
    /// One connection per broker address (a bootstrap one under its bootstrap address).
    connections: BTreeMap<String, KafkaConnection>,
    /// Topics the answer gave an error for, with the error.
    topic_errors: BTreeMap<String, i16>,
    /// Partitions the answer gave an error for or no leader, with the error.
    partition_errors: BTreeMap<Partition, i16>,
    /// Each topic's id, where the answer gave one (Metadata v10 and later, not all zero).
    topic_ids: BTreeMap<String, [u8; 16]>,
    /// When its Metadata was asked: older than [`FetcherConfig::metadata_max_age`], it is asked again.
    asked_at: Instant,
}

impl Session {
    /// The address of `partition`'s leader, or why there is none: the error the source gave for its topic or for
    /// it, `UNKNOWN_TOPIC_OR_PARTITION` when the answer left it out, a leader the answer did not name a broker for.
    fn leader_address(&self, partition: &Partition) -> Result<String, LinkError> {
        let what = format!("Metadata of {}-{}", partition.0, partition.1);
        if let Some(&leader) = self.leaders.get(partition) {
            return self
                .brokers
                .get(&leader)
                .cloned()
                .ok_or_else(|| LinkError::Kafka {
                    what,
                    code: LEADER_NOT_AVAILABLE,
                    detail: format!(" (leader {leader} is not among the brokers the source named)"),
                });
        }
        let (code, detail) = match (
            self.topic_errors.get(&partition.0),
            self.partition_errors.get(partition),
        ) {
            (Some(&code), _) => (code, " (for the topic)".to_owned()),
            (None, Some(&code)) => (code, String::new()),
            (None, None) => (
                UNKNOWN_TOPIC_OR_PARTITION,
                " (no such partition at the source)".to_owned(),
            ),
        };
        Err(LinkError::Kafka { what, code, detail })
    }
}

impl SourceCluster {
    /// A source reached at `config.bootstrap`; it connects at its first call.
    pub fn new(config: FetcherConfig) -> Self {
        SourceCluster {
            config,
            session: None,
            topics: BTreeSet::new(),
            known_brokers: Vec::new(),
        }
    }

    /// The source's cluster id, once a session is open.
    pub fn cluster_id(&self) -> Option<&str> {
        self.session.as_ref().map(|session| session.cluster_id.as_str())
    }

    /// The largest answer accepted on a connection fetching `max_bytes`.
    fn response_bound(&self, max_bytes: usize) -> usize {
        max_bytes
            .saturating_add(self.config.max_batch_bytes)
            .saturating_add(1 << 16)
    }

    /// The session, Metadata asked again when the leader of one of `partitions` is not known; a partition still
    /// without a leader after it is the caller's to report ([`Session::leader_address`]).
    async fn session(&mut self, partitions: &[Partition]) -> Result<&mut Session, LinkError> {
        let max_age = self.config.metadata_max_age;
        let unknown = self.session.is_none()
            || partitions.iter().any(|partition| {
                self.session
                    .as_ref()
                    .is_none_or(|session| !session.leaders.contains_key(partition))
            });
        let old = self
            .session
            .as_ref()
            .is_some_and(|session| session.asked_at.elapsed() >= max_age);
        if unknown || old {
            self.topics
                .extend(partitions.iter().map(|(topic, _)| topic.clone()));
            self.refresh_session().await?;
        }
        self.session
            .as_mut()
            .ok_or_else(|| LinkError::Refused("no session".to_owned()))
    }

    /// Metadata for every topic asked about so far, from the first broker that answers: those `connections`
    /// reach, the bootstrap list, the brokers the last answer named.
    async fn open_session(
        &mut self,
        mut connections: BTreeMap<String, KafkaConnection>,
    ) -> Result<Session, LinkError> {
        let bootstrap = bootstrap_servers(&self.config.bootstrap)?;
        let mut candidates = in_order(connections.keys(), &[&bootstrap, &self.known_brokers]);
        // Each address costs up to a timeout: a session asks at most this many, the next call the rest again.
        candidates.truncate(MAX_CANDIDATES);
        let reach = Reach {
            client_id: &self.config.client_id,
            timeout: self.config.timeout,
            response_bound: self.response_bound(MAX_RESPONSE_BYTES),
            security: &self.config.security,
        };
        let (metadata, cluster_id, _answered) = {
            let asked: Vec<String> = self.topics.iter().cloned().collect();
            metadata_from_any(&candidates, &mut connections, Some(&asked), &reach).await?
        };
        let brokers: BTreeMap<i32, String> = metadata
            .brokers
            .iter()
            .map(|broker| {
                (
                    broker.node_id.0,
                    format!("{}:{}", broker.host.as_str(), broker.port),
                )
            })
            .collect();
        self.known_brokers = brokers.values().take(MAX_KNOWN_BROKERS).cloned().collect();
        let mut leaders = BTreeMap::new();
        let mut topic_errors = BTreeMap::new();
        let mut partition_errors = BTreeMap::new();
        let topic_ids = topic_ids(&metadata);
        for topic in &metadata.topics {
            let Some(name) = topic.name.as_ref() else {
                continue;
            };
            if topic.error_code != 0 {
                topic_errors.insert(name.as_str().to_owned(), topic.error_code);
                continue;
            }
            for partition in &topic.partitions {
                let key = (name.as_str().to_owned(), partition.partition_index);
                if partition.error_code != 0 {
                    partition_errors.insert(key, partition.error_code);
                } else if partition.leader_id.0 < 0 || !brokers.contains_key(&partition.leader_id.0) {
                    // No leader, or one the answer names no broker for: asked again at the next call.
                    partition_errors.insert(key, LEADER_NOT_AVAILABLE);
                } else {
                    leaders.insert(key, partition.leader_id.0);
                }
            }
        }
        Ok(Session {
            cluster_id,
            brokers,
            leaders,
            connections,
            topic_errors,
            partition_errors,
            topic_ids,
            asked_at: Instant::now(),
        })
    }

    async fn connect(&self, address: &str) -> Result<KafkaConnection, LinkError> {
        KafkaConnection::connect_secured(
            address,
            &self.config.client_id,
            self.config.timeout,
            self.response_bound(MAX_RESPONSE_BYTES),
            &self.config.security,
        )
        .await
    }

    /// After a failure, as a retryable or final fetch error: a broken connection (I/O, a timeout, an answer that
    /// could not be read) ends the session — connections closed, the next call reconnects and checks the cluster
    /// id again; a stale-metadata answer makes the next call ask for Metadata again, on the connections it has; a
    /// partition's own error leaves the session to the others.
    fn failed(&mut self, error: &LinkError) -> FetchError {
        match error {
            LinkError::Kafka { code, .. } => {
                if STALE_METADATA_ERRORS.contains(code) || *code == LEADER_NOT_AVAILABLE {
                    self.forget_leaders();
                }
            }
            LinkError::Refused(_) | LinkError::BadAddress { .. } => {}
            _ => self.session = None,
        }
        error.as_fetch_error()
    }

    /// Makes the next call ask for Metadata again, keeping the connections.
    fn forget_leaders(&mut self) {
        if let Some(session) = self.session.as_mut() {
            session.leaders.clear();
            session.topic_errors.clear();
            session.partition_errors.clear();
        }
    }

    /// The connection to `partition`'s leader (opened when first needed) and the broker's address.
    async fn leader_connection(
        &mut self,
        partition: &Partition,
    ) -> Result<(&mut KafkaConnection, String), LinkError> {
        let session = self.session(std::slice::from_ref(partition)).await?;
        let address = session.leader_address(partition)?;
        let connection = self.connection_to(&address).await?;
        Ok((connection, address))
    }

    /// Whether the source lets this link read each of `topics`: one Fetch of each topic's partition 0 at offset 0
    /// (Kafka checks READ before the offset, so an offset gone still proves the right). TOPIC_AUTHORIZATION_FAILED
    /// is the error returned, naming the topic; any other answer is left to the mirror's own rounds.
    pub async fn check_readable(&mut self, topics: &[String]) -> Result<(), FetchError> {
        let wanted: Vec<PartitionFetch> = topics
            .iter()
            .map(|topic| PartitionFetch {
                topic: topic.clone(),
                partition: 0,
                // Past any log end: a broker checks READ before the offset, so the answer is the right or
                // OFFSET_OUT_OF_RANGE, never a batch (at offset 0 the first batch would come whole, up to a MiB).
                offset: i64::MAX,
                topic_id: None,
            })
            .collect();
        let answers = self.fetch(&wanted, FetchLimits::single(1), 0).await;
        for (fetch, answer) in wanted.iter().zip(answers) {
            if let Err(error) = answer {
                if error.code == Some(TOPIC_AUTHORIZATION_FAILED) {
                    return Err(FetchError::new(
                        format!(
                            "the link may not read topic {} at the source ({error}): grant its principal READ on \
                             the topic, or its partitions would fail at their first fetch",
                            fetch.topic
                        ),
                        false,
                    )
                    .with_code(TOPIC_AUTHORIZATION_FAILED));
                }
            }
        }
        Ok(())
    }

    /// Every ACL of the source, from any of its brokers (the session's connections reused).
    pub async fn acls(&mut self) -> mirror_fsm::SourceAcls {
        match self.read_acls().await {
            Ok(acls) => acls,
            Err(error) => mirror_fsm::SourceAcls::Failed(error.to_string()),
        }
    }

    async fn read_acls(&mut self) -> Result<mirror_fsm::SourceAcls, LinkError> {
        if self.session.is_none() {
            let session = self.open_session(BTreeMap::new()).await?;
            self.session = Some(session);
        }
        let (address, cluster_id) = self
            .session
            .as_ref()
            .and_then(|session| {
                let address = session.brokers.values().next().cloned()?;
                Some((address, session.cluster_id.clone()))
            })
            .ok_or_else(|| LinkError::Refused("the source's Metadata named no broker".to_owned()))?;
        let connection = self.connection_to(&address).await?;
        crate::acls::every_acl(connection, &address, cluster_id).await
    }

    /// The offsets the source's consumer groups committed on partitions of `topics`: each broker lists the groups
    /// it coordinates (ListGroups) and answers every offset they committed (OffsetFetch with no topic list), on
    /// the connections the fetches use. Groups of other protocol types than `consumer` (Connect workers) are
    /// left out; groups that only committed offsets are in.
    ///
    /// A failure leaves the session to the fetches (a source that does not serve these APIs must not cost them
    /// their connections); a broken connection is the fetches' to notice.
    pub async fn group_offsets(&mut self, topics: &BTreeSet<String>) -> Result<Vec<GroupOffset>, FetchError> {
        self.read_group_offsets(topics)
            .await
            .map_err(|error| error.as_fetch_error())
    }

    async fn read_group_offsets(&mut self, topics: &BTreeSet<String>) -> Result<Vec<GroupOffset>, LinkError> {
        if self.session.is_none() {
            let session = self.open_session(BTreeMap::new()).await?;
            self.session = Some(session);
        }
        let addresses: BTreeSet<String> = self
            .session
            .as_ref()
            .map(|session| session.brokers.values().cloned().collect())
            .unwrap_or_default();
        let mut offsets = Vec::new();
        for address in addresses {
            let connection = self.connection_to(&address).await?;
            let version = connection.version(ApiKey::ListGroups, LIST_GROUPS_VERSIONS)?;
            let listed: ListGroupsResponse = connection
                .call(ApiKey::ListGroups, version, &ListGroupsRequest::default())
                .await?;
            if listed.error_code != 0 {
                return Err(LinkError::Kafka {
                    what: format!("ListGroups at {address}"),
                    code: listed.error_code,
                    detail: String::new(),
                });
            }
            let fetch_version = connection.version(ApiKey::OffsetFetch, OFFSET_FETCH_VERSIONS)?;
            // Consumer groups, and groups that only committed offsets (no protocol type), as Kafka's admin client
            // counts consumer groups.
            let consumers = listed
                .groups
                .iter()
                .filter(|g| matches!(g.protocol_type.as_str(), "consumer" | ""));
            for listed in consumers {
                let mut request = OffsetFetchRequest::default();
                request.group_id = listed.group_id.clone();
                request.topics = None;
                let answer: OffsetFetchResponse = connection
                    .call(ApiKey::OffsetFetch, fetch_version, &request)
                    .await?;
                if answer.error_code != 0 {
                    // A group gone or moving between the two requests: the next sync sees it again.
                    continue;
                }
                for topic in answer.topics.iter().filter(|t| topics.contains(t.name.as_str())) {
                    for partition in topic
                        .partitions
                        .iter()
                        .filter(|p| p.error_code == 0 && p.committed_offset >= 0)
                    {
                        offsets.push(GroupOffset {
                            group: listed.group_id.as_str().to_owned(),
                            topic: topic.name.as_str().to_owned(),
                            partition: partition.partition_index,
                            offset: partition.committed_offset,
                            metadata: partition.metadata.as_ref().map(|m| m.as_str().to_owned()),
                        });
                    }
                }
            }
        }
        Ok(offsets)
    }

    /// The session's connection to the broker at `address` (opened when first needed).
    async fn connection_to(&mut self, address: &str) -> Result<&mut KafkaConnection, LinkError> {
        if !self
            .session
            .as_ref()
            .is_some_and(|session| session.connections.contains_key(address))
        {
            let connection = self.connect(address).await?;
            if let Some(session) = self.session.as_mut() {
                session.connections.insert(address.to_owned(), connection);
            }
        }
        self.session
            .as_mut()
            .and_then(|session| session.connections.get_mut(address))
            .ok_or_else(|| LinkError::Refused("no session".to_owned()))
    }

    /// The last mirrored offset the leader of `topic`/`partition` recorded for the cluster `mirrored_from`, when
    /// the source is a mirrorlog node ([`crate::peer`]); `None` otherwise.
    pub async fn last_mirrored_at_peer(
        &mut self,
        topic: &str,
        partition: i32,
        mirrored_from: &str,
    ) -> Result<Option<i64>, LinkError> {
        let (_, address) = self.leader_connection(&(topic.to_owned(), partition)).await?;
        crate::peer::last_mirrored_offset(
            &address,
            &self.config.client_id,
            self.config.timeout,
            &self.config.security,
            mirrored_from,
            topic,
            partition,
        )
        .await
    }

    /// One round for `wanted`: one Fetch per leader, `read_committed`, each partition's whole batches from its
    /// offset; the answers in `wanted`'s order.
    pub async fn fetch(
        &mut self,
        wanted: &[PartitionFetch],
        limits: FetchLimits,
        max_wait_ms: i32,
    ) -> Vec<Result<FetchedPartition, FetchError>> {
        let keys: Vec<Partition> = wanted
            .iter()
            .map(|fetch| (fetch.topic.clone(), fetch.partition))
            .collect();
        if let Err(error) = self.session(&keys).await {
            let error = self.failed(&error);
            return wanted.iter().map(|_| Err(error.clone())).collect();
        }
        let mut by_leader: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        let mut answers: Vec<Option<Result<FetchedPartition, FetchError>>> =
            wanted.iter().map(|_| None).collect();
        if let Some(session) = &self.session {
            for (index, key) in keys.iter().enumerate() {
                match session.leader_address(key) {
                    Ok(address) => by_leader.entry(address).or_default().push(index),
                    // This partition alone: its topic deleted, its leader being elected.
                    Err(error) => answers[index] = Some(Err(error.as_fetch_error())),
                }
            }
        }
        for (address, indexes) in by_leader {
            let asked: Vec<&PartitionFetch> = indexes.iter().map(|&index| &wanted[index]).collect();
            match self.fetch_from(&address, &asked, limits, max_wait_ms).await {
                Ok(results) => {
                    for (index, result) in indexes.into_iter().zip(results) {
                        answers[index] = Some(result);
                    }
                }
                Err(error) => {
                    let error = self.failed(&error);
                    for index in indexes {
                        answers[index] = Some(Err(error.clone()));
                    }
                }
            }
        }
        answers
            .into_iter()
            .map(|answer| {
                answer.unwrap_or_else(|| Err(FetchError::new("no answer for the partition".to_owned(), true)))
            })
            .collect()
    }

    /// One Fetch to the broker at `address` (the leader of every partition in `asked` when the round began).
    async fn fetch_from(
        &mut self,
        address: &str,
        asked: &[&PartitionFetch],
        limits: FetchLimits,
        max_wait_ms: i32,
    ) -> Result<Vec<Result<FetchedPartition, FetchError>>, LinkError> {
        // The session the round was grouped under, or a new one if a failure ended it meanwhile: the partitions
        // go to the broker the round found leading them (one that no longer does answers NOT_LEADER_OR_FOLLOWER).
        self.session(&[]).await?;
        // Each topic by the id the link recorded, else the one Metadata gave: a request names topics by id only
        // when every topic in it has one.
        let ids: BTreeMap<&str, [u8; 16]> = asked
            .iter()
            .filter_map(|fetch| {
                let id = fetch.topic_id.or_else(|| {
                    self.session
                        .as_ref()
                        .and_then(|session| session.topic_ids.get(&fetch.topic).copied())
                });
                id.map(|id| (fetch.topic.as_str(), id))
            })
            .collect();
        let by_id = asked.iter().all(|fetch| ids.contains_key(fetch.topic.as_str()));
        let connection = self.connection_to(address).await?;
        let highest = if by_id {
            FETCH_VERSIONS.1
        } else {
            FETCH_BY_TOPIC_ID - 1
        };
        let version = connection.version(ApiKey::Fetch, (FETCH_VERSIONS.0, highest))?;
        let by_id = version >= FETCH_BY_TOPIC_ID;
        let per_partition = i32::try_from(limits.per_partition).unwrap_or(i32::MAX);
        let mut request = FetchRequest::default();
        request.replica_id = BrokerId(-1);
        request.max_wait_ms = max_wait_ms;
        request.min_bytes = 1;
        request.max_bytes = i32::try_from(limits.total.min(MAX_RESPONSE_BYTES)).unwrap_or(i32::MAX);
        request.isolation_level = READ_COMMITTED;
        // Sessionless: every fetch is a full fetch (KIP-227's final epoch).
        request.session_id = 0;
        request.session_epoch = -1;
        let mut topics: BTreeMap<&str, Vec<fetch_request::FetchPartition>> = BTreeMap::new();
        for fetch in asked {
            let mut partition = fetch_request::FetchPartition::default();
            partition.partition = fetch.partition;
            partition.fetch_offset = fetch.offset;
            partition.partition_max_bytes = per_partition;
            partition.log_start_offset = -1;
            partition.current_leader_epoch = -1;
            topics.entry(fetch.topic.as_str()).or_default().push(partition);
        }
        request.topics = topics
            .into_iter()
            .map(|(name, partitions)| {
                let mut topic = fetch_request::FetchTopic::default();
                match ids.get(name).filter(|_| by_id) {
                    Some(id) => topic.topic_id = Uuid::from_bytes(*id),
                    None => topic.topic = TopicName(StrBytes::from_string(name.to_owned())),
                }
                topic.partitions = partitions;
                topic
            })
            .collect();
        let response: FetchResponse = connection.call(ApiKey::Fetch, version, &request).await?;
        if response.error_code != 0 {
            return Err(LinkError::Kafka {
                what: format!("Fetch from {address}"),
                code: response.error_code,
                detail: String::new(),
            });
        }
        let cluster_id = self.cluster_id().unwrap_or_default().to_owned();
        let mut stale = false;
        let results = asked
            .iter()
            .map(|fetch| {
                let what = format!("Fetch of {}-{} at {}", fetch.topic, fetch.partition, fetch.offset);
                let asked_id = ids.get(fetch.topic.as_str()).filter(|_| by_id);
                let data = response
                    .responses
                    .iter()
                    .filter(|answer| match asked_id {
                        Some(id) => answer.topic_id.as_bytes() == id,
                        None => answer.topic.as_str() == fetch.topic,
                    })
                    .flat_map(|answer| answer.partitions.iter())
                    .find(|answer| answer.partition_index == fetch.partition);
                let Some(data) = data else {
                    return Err(FetchError::new(
                        format!("{what}: the source's answer leaves the partition out"),
                        true,
                    ));
                };
                if data.error_code != 0 {
                    stale |= STALE_METADATA_ERRORS.contains(&data.error_code);
                    let detail = match asked_id {
                        Some(id) if TOPIC_ID_ERRORS.contains(&data.error_code) => format!(
                            " (asked by topic id {}: the topic was deleted, or created again with another id)",
                            mirror_fsm::topic_id_text(*id)
                        ),
                        _ => String::new(),
                    };
                    let error = LinkError::Kafka {
                        what: format!("{what} from {address}"),
                        code: data.error_code,
                        detail,
                    };
                    if data.error_code == OFFSET_OUT_OF_RANGE {
                        return Err(FetchError::offset_out_of_range(error.to_string()));
                    }
                    return Err(error.as_fetch_error());
                }
                let records = data.records.clone().unwrap_or_default();
                let batches = whole_batches_from(records.clone(), fetch.offset, self.config.max_batch_bytes)
                    .map_err(|error| FetchError::new(format!("{what}: {error}"), error.retryable()))?;
                Ok(FetchedPartition {
                    response: Fetched {
                        source_cluster_id: cluster_id.clone(),
                        batches,
                        buffers: BatchBuffers::new(vec![records]),
                    },
                    last_stable_offset: (data.last_stable_offset >= 0).then_some(data.last_stable_offset),
                })
            })
            .collect();
        if stale {
            // A partition moved: the next round asks for Metadata again, on the connections it has.
            self.forget_leaders();
        }
        Ok(results)
    }

    /// The source's cluster id from Metadata asked now (for `topic`, with every topic asked about so far; the
    /// session's connections kept and its leaders refreshed), checked against `expected_topic_id` when given: a
    /// topic of that name with another id is a final error that names both ids, and no topic of that name (or one
    /// without an id) a retryable one. A preparation calls it before
    /// anything is truncated, so nothing is ever truncated on the word of a recreated topic. The partition itself
    /// may still have no leader; its fetch says so.
    pub async fn verified_cluster_id(
        &mut self,
        topic: &str,
        expected_topic_id: Option<[u8; 16]>,
    ) -> Result<String, FetchError> {
        match self.fresh_identity(topic).await {
            Ok((cluster_id, Some(found))) if expected_topic_id.is_some_and(|expected| expected != found) => {
                Err(FetchError::new(
                    format!(
                        "topic {topic} at the source (cluster {cluster_id}) has topic id {}, not {} as when this \
                         link was created: it was deleted and created again, and its log is not the one mirrored \
                         here; nothing was truncated or appended",
                        mirror_fsm::topic_id_text(found),
                        mirror_fsm::topic_id_text(expected_topic_id.unwrap_or_default()),
                    ),
                    false,
                ))
            }
            // Absent now (deleted; or created again and not yet in this broker's metadata): what comes next may be
            // another topic's log, and a missing answer is no evidence, so the preparation waits — retryably —
            // rather than ask the log start or the batches of a name that may no longer be the mirrored topic.
            Ok((cluster_id, None)) if expected_topic_id.is_some() => {
                // A topic the answer names with an error of its own (no right to describe it, …) is that error,
                // classified as such; only an unknown topic is the wait below.
                let answered = self.session_topic_error(topic);
                if let Some(code) = answered.filter(|code| *code != UNKNOWN_TOPIC) {
                    let error = LinkError::Kafka {
                        what: format!("Metadata of topic {topic}"),
                        code,
                        detail: String::new(),
                    };
                    return Err(self.failed(&error));
                }
                let waiting = FetchError::new(
                    format!(
                        "topic {topic} (id {}) is not in the Metadata of the source (cluster {cluster_id}) now \
                         ({}): deleted, or created again and not yet known to the broker asked; waiting, nothing \
                         truncated",
                        mirror_fsm::topic_id_text(expected_topic_id.unwrap_or_default()),
                        answered.map_or_else(|| "absent from the answer".to_owned(), crate::error::kafka_error_name),
                    ),
                    true,
                );
                // The source's answer names the failure in `describe` and the metrics (UNKNOWN_TOPIC_OR_PARTITION).
                Err(match answered {
                    Some(code) => waiting.with_code(code),
                    None => waiting,
                })
            }
            Ok((cluster_id, _)) => Ok(cluster_id),
            Err(error) => Err(self.failed(&error)),
        }
    }

    /// The error the session's Metadata answered for `topic`, if any.
    fn session_topic_error(&self, topic: &str) -> Option<i16> {
        self.session
            .as_ref()
            .and_then(|session| session.topic_errors.get(topic).copied())
    }

    /// The source's cluster id and `topic`'s id (`None`: the source has no ids, or not that topic now) from
    /// Metadata asked now (the session's connections kept), so a preparation never trusts a remembered answer.
    async fn fresh_identity(&mut self, topic: &str) -> Result<(String, Option<[u8; 16]>), LinkError> {
        self.topics.insert(topic.to_owned());
        let session = self.refresh_session().await?;
        Ok((session.cluster_id.clone(), session.topic_ids.get(topic).copied()))
    }

    /// A new session from Metadata asked now, keeping the old session's connections; the session is gone when no
    /// broker answers.
    async fn refresh_session(&mut self) -> Result<&Session, LinkError> {
        let connections = self
            .session
            .take()
            .map(|session| session.connections)
            .unwrap_or_default();
        let session = self.open_session(connections).await?;
        Ok(self.session.insert(session))
    }

    /// The log start offset of `topic`/`partition` (ListOffsets, earliest).
    pub async fn earliest_offset(&mut self, topic: &str, partition: i32) -> Result<i64, FetchError> {
        match self.list_offset(topic, partition, EARLIEST).await {
            Ok(offset) => Ok(offset),
            Err(error) => Err(self.failed(&error)),
        }
    }

    /// The last stable offset of each of `partitions` now (ListOffsets v2+, latest, `read_committed`): what a
    /// paused partition's lag is measured against, since no round asks for it. A source before ListOffsets v2
    /// answers its high watermark there, which is as far as a `read_committed` fetch could go without
    /// transactions; each partition's error stands alone.
    pub async fn last_stable_offsets(
        &mut self,
        partitions: &[(String, i32)],
    ) -> Vec<Result<i64, FetchError>> {
        let mut answers = Vec::with_capacity(partitions.len());
        for (topic, partition) in partitions {
            let answer = match self.list_offset(topic, *partition, LATEST).await {
                Ok(offset) => Ok(offset),
                Err(error) => Err(self.failed(&error)),
            };
            answers.push(answer);
        }
        answers
    }

    /// ListOffsets of one partition at `timestamp` ([`EARLIEST`]: its log start; [`LATEST`]: its last stable
    /// offset, asked `read_committed`).
    async fn list_offset(&mut self, topic: &str, partition: i32, timestamp: i64) -> Result<i64, LinkError> {
        let key = (topic.to_owned(), partition);
        let (connection, address) = self.leader_connection(&key).await?;
        let version = connection.version(ApiKey::ListOffsets, LIST_OFFSETS_VERSIONS)?;
        let mut wanted = ListOffsetsPartition::default();
        wanted.partition_index = partition;
        wanted.timestamp = timestamp;
        wanted.current_leader_epoch = -1;
        let mut list_topic = ListOffsetsTopic::default();
        list_topic.name = TopicName(StrBytes::from_string(topic.to_owned()));
        list_topic.partitions = vec![wanted];
        let mut request = ListOffsetsRequest::default();
        request.replica_id = BrokerId(-1);
        // v2 and later (a v1 request cannot carry it, and answers the high watermark).
        if version >= 2 {
            request.isolation_level = READ_COMMITTED;
        }
        request.topics = vec![list_topic];
        let response: ListOffsetsResponse = connection.call(ApiKey::ListOffsets, version, &request).await?;
        let what = format!("ListOffsets of {topic}-{partition}");
        let answer = response
            .topics
            .iter()
            .filter(|answer| answer.name.as_str() == topic)
            .flat_map(|answer| answer.partitions.iter())
            .find(|answer| answer.partition_index == partition)
            .ok_or_else(|| LinkError::Malformed {
                address: address.clone(),
                what: what.clone(),
                reason: "the partition asked for is missing".to_owned(),
            })?;
        match answer.error_code {
            0 => Ok(answer.offset),
            code => Err(LinkError::Kafka {
                what,
                code,
                detail: String::new(),
            }),
        }
    }
}

/// The topic ids of a Metadata answer (v10 and later), all-zero ones left out.
pub(crate) fn topic_ids(metadata: &MetadataResponse) -> BTreeMap<String, [u8; 16]> {
    metadata
        .topics
        .iter()
        .filter(|topic| !topic.topic_id.is_nil())
        .filter_map(|topic| {
            let name = topic.name.as_ref()?;
            Some((name.as_str().to_owned(), *topic.topic_id.as_bytes()))
        })
        .collect()
}

/// Metadata of `topics` (`None`: every topic) from the source broker on `connection` (at `address`), never creating a topic there (the
/// field exists from Metadata v4; before it, a broker decides alone): the answer and the source's cluster id.
pub(crate) async fn source_metadata(
    connection: &mut KafkaConnection,
    topics: Option<&[String]>,
    address: &str,
) -> Result<(MetadataResponse, String), LinkError> {
    let version = connection.version(ApiKey::Metadata, METADATA_VERSIONS)?;
    let mut request = MetadataRequest::default();
    // `None` asks for every topic (a null list; an empty one asks for none).
    request.topics = topics.map(|topics| {
        topics
            .iter()
            .map(|name| {
                let mut topic = MetadataRequestTopic::default();
                topic.name = Some(TopicName(StrBytes::from_string(name.clone())));
                topic
            })
            .collect()
    });
    request.allow_auto_topic_creation = version < 4;
    let metadata: MetadataResponse = connection.call(ApiKey::Metadata, version, &request).await?;
    let cluster_id = metadata
        .cluster_id
        .as_ref()
        .map(|id| id.as_str().to_owned())
        .ok_or_else(|| LinkError::Malformed {
            address: address.to_owned(),
            what: format!("Metadata from {address}"),
            reason: "no cluster id".to_owned(),
        })?;
    Ok((metadata, cluster_id))
}

/// The whole batches of a fetched record set from `from_offset` on: those wholly before it skipped, the one
/// holding it kept (a source returns the batch holding the offset), a partial last batch dropped (a response ends
/// where its byte limit fell), offsets going backwards refused. Length and magic are checked here, the CRC by the
/// machine. A batch that claims more than `max_batch_bytes` is refused, cut off or not: no later answer could
/// bring it whole, and dropping it as a partial tail would stall the partition in silence.
pub(crate) fn whole_batches_from(
    records: bytes::Bytes,
    from_offset: i64,
    max_batch_bytes: usize,
) -> Result<Vec<RecordBatch>, LinkError> {
    let mut batches: Vec<RecordBatch> = Vec::new();
    for found in BatchIter::unverified(records) {
        let batch = match found {
            Ok(found) => found.batch,
            Err(SegmentError::Corrupt {
                error: DecodeError::Truncated { needed, .. },
                file_offset,
                ..
            }) if needed > max_batch_bytes as u64 => {
                return Err(LinkError::Refused(format!(
                    "the batch at byte {file_offset} of the answer claims {needed} bytes; at most {max_batch_bytes} \
                     are accepted"
                )))
            }
            // The response ended inside a batch: what came before it is whole.
            Err(SegmentError::Corrupt { error, .. }) if error.category() == ErrorCategory::Truncated => break,
            Err(error) => return Err(LinkError::Refused(format!("a fetched batch: {error}"))),
        };
        if batch.last_offset() < from_offset {
            continue;
        }
        // A first batch holding `from_offset` (a source whose log starts inside a batch) is kept whole: the
        // driver starts an empty log at its base offset, as Kafka's follower does, and refuses it otherwise.
        if let Some(previous) = batches.last() {
            if batch.base_offset() <= previous.last_offset() {
                return Err(LinkError::Refused(format!(
                    "offsets go backwards: batch at {} after one ending at {}",
                    batch.base_offset(),
                    previous.last_offset()
                )));
            }
        }
        batches.push(batch);
    }
    Ok(batches)
}
