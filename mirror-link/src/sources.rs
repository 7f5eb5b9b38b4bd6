//! [`KafkaSources`]: source clusters reached over the Kafka protocol, as a node's mirror links need them — a
//! source's cluster id and partition counts (Metadata) and a [`KafkaFetcher`] per mirrored partition.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use kafka_protocol::messages::MetadataResponse;
use mirror_fsm::{
    FetchError, FetchLimits, FetchedPartition, Fetcher, GroupOffset, ListedTopic, PartitionFetch, SourceAcls,
    SourceConfigs, SourceDescription, Sources,
};
use tokio::sync::Mutex;

use crate::cluster::SourceCluster;
use crate::error::LinkError;
use crate::fetcher::{FetcherConfig, KafkaFetcher};

/// The largest Metadata answer accepted while describing a source (a few topics' partitions).
const DESCRIBE_RESPONSE_BYTES: usize = 16 << 20;

/// The largest Metadata answer accepted while listing a source's topics (every topic with its partitions: about
/// 100 bytes a partition, so some 600,000 partitions).
const LIST_RESPONSE_BYTES: usize = 64 << 20;

/// Sources over the Kafka protocol; every fetcher it makes uses `template` with the source's address, and all
/// the partitions of one source share its connections (one per source broker, [`SourceCluster`]).
#[derive(Debug)]
pub struct KafkaSources {
    template: FetcherConfig,
    clusters: std::sync::Mutex<BTreeMap<String, Arc<Mutex<SourceCluster>>>>,
    /// How each secured source is reached ([`Sources::configure_client`]), or why its settings were refused;
    /// a source not named here is reached as `template` says.
    #[allow(clippy::type_complexity)]
    security:
        std::sync::Mutex<BTreeMap<String, (BTreeMap<String, String>, Result<crate::ClientSecurity, String>)>>,
}

impl KafkaSources {
    /// Sources whose fetchers are configured as `template` (its bootstrap address is replaced by each source's).
    pub fn new(template: FetcherConfig) -> Self {
        KafkaSources {
            template,
            clusters: std::sync::Mutex::new(BTreeMap::new()),
            security: std::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// How the source at `address` is reached, or why its settings were refused.
    fn security_of(&self, address: &str) -> Result<crate::ClientSecurity, LinkError> {
        let security = self
            .security
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match security.get(address).map(|(_, security)| security) {
            None => Ok(self.template.security.clone()),
            Some(Ok(security)) => Ok(security.clone()),
            Some(Err(reason)) => Err(LinkError::BadAddress {
                given: address.to_owned(),
                reason: format!("the link's source settings are refused: {reason}"),
            }),
        }
    }

    /// The shared connections to the source at `address`.
    fn cluster(&self, address: &str) -> Result<Arc<Mutex<SourceCluster>>, LinkError> {
        let clusters = || {
            self.clusters
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        // Every round asks for its source's cluster: the settings are looked up only for a new one (and
        // `configure_client`, which takes the two locks in the other order, is never waited for under this one).
        if let Some(cluster) = clusters().get(address) {
            return Ok(Arc::clone(cluster));
        }
        let security = self.security_of(address)?;
        Ok(Arc::clone(clusters().entry(address.to_owned()).or_insert_with(
            || {
                let mut config = self.template.clone();
                config.bootstrap = address.to_owned();
                config.security = security;
                Arc::new(Mutex::new(SourceCluster::new(config)))
            },
        )))
    }

    /// Metadata of `topics` (`None`: every topic) from the first broker of `address` (a bootstrap list) that
    /// answers within `response_bound` bytes: the answer, the source's cluster id, the broker that answered.
    async fn metadata_answer(
        &self,
        address: &str,
        topics: Option<&[String]>,
        response_bound: usize,
        connections: &mut BTreeMap<String, crate::connection::KafkaConnection>,
    ) -> Result<(MetadataResponse, String, String), LinkError> {
        let security = self.security_of(address)?;
        self.metadata_with(address, topics, response_bound, connections, &security)
            .await
    }

    /// [`Self::metadata_answer`] on connections secured by `security`.
    async fn metadata_with(
        &self,
        address: &str,
        topics: Option<&[String]>,
        response_bound: usize,
        connections: &mut BTreeMap<String, crate::connection::KafkaConnection>,
        security: &crate::ClientSecurity,
    ) -> Result<(MetadataResponse, String, String), LinkError> {
        let candidates = crate::bootstrap::bootstrap_servers(address)?;
        let reach = crate::bootstrap::Reach {
            client_id: &self.template.client_id,
            timeout: self.template.timeout,
            response_bound,
            security,
        };
        crate::bootstrap::metadata_from_any(&candidates, connections, topics, &reach).await
    }

    /// The source's cluster id and partition counts, from the first broker of `address` (a bootstrap list) that
    /// answers.
    async fn metadata(&self, address: &str, topics: &[String]) -> Result<SourceDescription, LinkError> {
        let mut connections = BTreeMap::new();
        let (metadata, cluster_id, address) = self
            .metadata_answer(address, Some(topics), DESCRIBE_RESPONSE_BYTES, &mut connections)
            .await?;
        let address = address.as_str();
        let what = format!("Metadata of {} at {address}", topics.join(", "));
        let mut partitions = BTreeMap::new();
        for wanted in topics {
            let answer = metadata
                .topics
                .iter()
                .find(|topic| topic.name.as_ref().is_some_and(|name| name.as_str() == wanted))
                .ok_or_else(|| LinkError::Malformed {
                    address: address.to_owned(),
                    what: what.clone(),
                    reason: format!("topic {wanted} is missing from the answer"),
                })?;
            if answer.error_code != 0 {
                return Err(LinkError::Kafka {
                    what: format!("topic {wanted} at {address}"),
                    code: answer.error_code,
                    detail: String::new(),
                });
            }
            let count = u32::try_from(answer.partitions.len()).unwrap_or(u32::MAX);
            // Partitions numbered 0..count, none missing: a mirror topic gets the same numbering.
            let numbered = (0..answer.partitions.len()).all(|index| {
                answer
                    .partitions
                    .iter()
                    .any(|p| p.partition_index as usize == index)
            });
            if count == 0 || !numbered {
                return Err(LinkError::Malformed {
                    address: address.to_owned(),
                    what: what.clone(),
                    reason: format!("topic {wanted} has no partitions numbered 0..{count}"),
                });
            }
            partitions.insert(wanted.clone(), count);
        }
        let topic_ids = crate::cluster::topic_ids(&metadata)
            .into_iter()
            .filter(|(name, _)| partitions.contains_key(name))
            .collect();
        // The topics' configs, from the broker that answered (a source that cannot say is no reason to refuse the
        // description: the link mirrors, and says why its configs are not synced).
        let configs = match connections.get_mut(address) {
            Some(connection) if !topics.is_empty() => {
                match crate::configs::topic_overrides(connection, topics, address).await {
                    Ok(overrides) => SourceConfigs::Read(overrides),
                    Err(error) => SourceConfigs::Failed(error.to_string()),
                }
            }
            _ => SourceConfigs::Read(BTreeMap::new()),
        };
        Ok(SourceDescription {
            cluster_id,
            partitions,
            topic_ids,
            configs,
        })
    }
}

#[async_trait]
impl Sources for KafkaSources {
    async fn describe(&self, address: &str, topics: &[String]) -> Result<SourceDescription, FetchError> {
        self.metadata(address, topics)
            .await
            .map_err(|error| error.as_fetch_error())
    }

    /// Kafka has no call listing topic names alone: Metadata for every topic, as `AdminClient.listTopics` asks.
    async fn list_topics(&self, address: &str) -> Result<Vec<ListedTopic>, FetchError> {
        let (metadata, _, _) = self
            .metadata_answer(address, None, LIST_RESPONSE_BYTES, &mut BTreeMap::new())
            .await
            .map_err(|error| error.as_fetch_error())?;
        Ok(metadata
            .topics
            .iter()
            .filter(|topic| topic.error_code == 0)
            .filter_map(|topic| {
                Some(ListedTopic {
                    name: topic.name.as_ref()?.as_str().to_owned(),
                    internal: topic.is_internal,
                })
            })
            .collect())
    }

    fn configure_client(&self, address: &str, settings: &BTreeMap<String, String>) -> Result<(), FetchError> {
        // Stored settings are self-contained (no file paths): nothing is relative to a directory.
        let mut configured = self
            .security
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let refused = match configured.get(address) {
            Some((held, security)) if held == settings => security.as_ref().err().cloned(),
            _ => {
                let security =
                    crate::ClientSecurity::from_settings(settings.clone(), std::path::Path::new("/"))
                        .map_err(|error| error.to_string());
                let refused = security.as_ref().err().cloned();
                configured.insert(address.to_owned(), (settings.clone(), security));
                // Connections made with other settings are not reused.
                self.clusters
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(address);
                refused
            }
        };
        match refused {
            None => Ok(()),
            Some(reason) => Err(FetchError::new(
                format!("the source settings for {address} are refused: {reason}"),
                false,
            )),
        }
    }

    async fn verify_client(
        &self,
        address: &str,
        settings: &BTreeMap<String, String>,
    ) -> Result<String, FetchError> {
        let security = crate::ClientSecurity::from_settings(settings.clone(), std::path::Path::new("/"))
            .map_err(|error| FetchError::new(format!("the source settings are refused: {error}"), false))?;
        // Connections of their own, dropped after: the link's stay as they are until the settings are recorded.
        let mut connections = BTreeMap::new();
        self.metadata_with(
            address,
            Some(&[]),
            DESCRIBE_RESPONSE_BYTES,
            &mut connections,
            &security,
        )
        .await
        .map(|(_, cluster_id, _)| cluster_id)
        .map_err(|error| error.as_fetch_error())
    }

    fn fetcher(&self, address: &str, topic: &str, partition: i32) -> Box<dyn Fetcher> {
        match self.cluster(address) {
            Ok(cluster) => Box::new(KafkaFetcher::on(
                cluster,
                self.template.max_wait,
                topic,
                partition,
            )),
            Err(error) => Box::new(RefusedSource(error.to_string())),
        }
    }

    async fn fetch_many(
        &self,
        address: &str,
        wanted: &[PartitionFetch],
        limits: FetchLimits,
    ) -> Option<Vec<Result<FetchedPartition, FetchError>>> {
        let max_wait_ms = i32::try_from(self.template.max_wait.as_millis()).unwrap_or(i32::MAX);
        let cluster = match self.cluster(address) {
            Ok(cluster) => cluster,
            Err(error) => {
                let refused = FetchError::new(error.to_string(), false);
                return Some(wanted.iter().map(|_| Err(refused.clone())).collect());
            }
        };
        let mut cluster = cluster.lock().await;
        Some(cluster.fetch(wanted, limits, max_wait_ms).await)
    }

    async fn last_stable_offsets(
        &self,
        address: &str,
        partitions: &[(String, i32)],
    ) -> Option<Vec<Result<i64, FetchError>>> {
        let cluster = match self.cluster(address) {
            Ok(cluster) => cluster,
            Err(error) => {
                let refused = FetchError::new(error.to_string(), false);
                return Some(partitions.iter().map(|_| Err(refused.clone())).collect());
            }
        };
        let mut cluster = cluster.lock().await;
        Some(cluster.last_stable_offsets(partitions).await)
    }

    async fn check_readable(&self, address: &str, topics: &[String]) -> Result<(), FetchError> {
        if topics.is_empty() {
            return Ok(());
        }
        let cluster = self.cluster(address).map_err(|error| error.as_fetch_error())?;
        let mut cluster = cluster.lock().await;
        cluster.check_readable(topics).await
    }

    async fn acls(&self, address: &str) -> SourceAcls {
        match self.cluster(address) {
            Ok(cluster) => cluster.lock().await.acls().await,
            Err(error) => SourceAcls::Failed(error.to_string()),
        }
    }

    async fn group_offsets(&self, address: &str, topics: &[String]) -> Result<Vec<GroupOffset>, FetchError> {
        let cluster = self
            .cluster(address)
            .map_err(|error| FetchError::new(error.to_string(), false))?;
        let mut cluster = cluster.lock().await;
        cluster.group_offsets(&topics.iter().cloned().collect()).await
    }
}

/// The fetcher of a source whose settings were refused: every call says why.
#[derive(Debug)]
struct RefusedSource(String);

impl RefusedSource {
    fn refused(&self) -> FetchError {
        FetchError::new(self.0.clone(), false)
    }
}

#[async_trait(?Send)]
impl Fetcher for RefusedSource {
    async fn fetch(
        &mut self,
        _from_offset: i64,
        _max_bytes: usize,
    ) -> Result<mirror_fsm::FetchResponse, FetchError> {
        Err(self.refused())
    }

    async fn last_mirrored_offset(&mut self, _mirrored_from: &str) -> Result<Option<i64>, FetchError> {
        Err(self.refused())
    }

    async fn log_start_offset(&mut self) -> Result<i64, FetchError> {
        Err(self.refused())
    }

    async fn cluster_id(&mut self) -> Result<String, FetchError> {
        Err(self.refused())
    }
}
