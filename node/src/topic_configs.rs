//! Topics' config overrides, durable: one JSON record in the metadata of the internal partition
//! [`TOPIC_CONFIGS_PARTITION`], rewritten whole (atomically and durably, as every metadata record is) when a topic
//! is created with overrides or its configs are altered. What each config means and which values are accepted is
//! crate `topic-config`'s; this module keeps the overrides and the settings the produce path enforces
//! ([`TopicSettings`], computed once per change, read per produce).
//!
//! A topic's record is written **before** its partitions are created, so a topic is never seen without its
//! configs; a record left by a creation that crashed before its partitions names a topic that does not exist,
//! which nothing reads, and the next creation of that name writes its own.
//!
//! The record also holds each topic's **topic id** (KIP-516): 16 random bytes drawn at creation (a version-4
//! UUID, never all zeros, whose text does not begin with `-`, as Kafka draws them), so a topic deleted and created
//! again under the same name has another id. A topic from a data directory written before ids were kept gets one
//! when the node opens ([`TopicConfigs::assign_missing_ids`]), as Kafka gives ids to topics that had none.

use std::collections::{BTreeMap, BTreeSet};

use kafka_types::KafkaError;
use partition_log::PartitionLog;
use serde::{Deserialize, Serialize};
use topic_config::{BrokerSettings, ConfigError, Described, Overrides, TopicSettings};

use crate::config::NodeConfig;
use crate::{Node, NodeError};

/// The internal partition holding the record.
pub const TOPIC_CONFIGS_PARTITION: &str = "__mirrorlog_topic_configs";

/// The metadata key of the record.
const CONFIGS_KEY: &str = "topic.configs";

/// The record's format version: 2 since it holds topic ids. A build that reads only version 1 refuses it rather
/// than rewrite it without them (every link that recorded an id would then take the topics for new ones); this
/// build reads both.
const FORMAT_VERSION: u32 = 2;

/// The format versions this build reads (1: before topic ids).
const READABLE_VERSIONS: [u32; 2] = [1, FORMAT_VERSION];

#[derive(Debug, Serialize, Deserialize)]
struct Record {
    version: u32,
    /// Topic → config name → value, for topics with at least one override.
    topics: BTreeMap<String, BTreeMap<String, String>>,
    /// Topics whose deletion was decided and may not be finished (their partitions are deleted from the highest
    /// down, so what is left is always partitions 0..k; the next open finishes the job).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    deleting: BTreeSet<String>,
    /// Topic → its topic id, as Kafka prints it (URL-safe base64 without padding).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    ids: BTreeMap<String, String>,
}

/// The overrides of every topic, their store, and the broker settings topics fall back to.
#[derive(Debug)]
pub(crate) struct TopicConfigs {
    store: Option<PartitionLog>,
    overrides: BTreeMap<String, Overrides>,
    settings: BTreeMap<String, TopicSettings>,
    broker: BrokerSettings,
    /// The settings of a topic without overrides.
    defaults: TopicSettings,
    /// Topics being deleted (see [`Record::deleting`]).
    deleting: BTreeSet<String>,
    /// Each topic's id (see the module docs).
    ids: BTreeMap<String, [u8; 16]>,
    /// The same, by id ([`TopicConfigs::topic_named_by`]: a DeleteTopics or Metadata by id asks it once per entry).
    names: BTreeMap<[u8; 16], String>,
    /// Where new ids come from.
    id_source: IdSource,
    /// The stored record is of an older format: the next [`TopicConfigs::assign_missing_ids`] writes it anew.
    stale_format: bool,
}

/// Where new topic ids come from: the operating system's randomness, or (the simulator) a seeded sequence. A
/// seeded sequence starts again when its node opens again, so it may draw a deleted topic's id anew: the
/// simulator opens each node once.
#[derive(Debug)]
enum IdSource {
    Random,
    #[cfg_attr(not(feature = "simulator"), allow(dead_code))]
    Seeded(u64),
}

impl IdSource {
    fn of(config: &NodeConfig) -> Self {
        #[cfg(feature = "simulator")]
        if let Some(seed) = config.topic_id_seed {
            return IdSource::Seeded(seed);
        }
        let _ = config;
        IdSource::Random
    }

    /// 16 bytes.
    fn draw(&mut self) -> Result<[u8; 16], NodeError> {
        let mut id = [0u8; 16];
        match self {
            IdSource::Random => getrandom::fill(&mut id).map_err(|error| NodeError::Topic {
                name: TOPIC_CONFIGS_PARTITION.to_owned(),
                reason: format!("no randomness for a topic id: {error}"),
            })?,
            IdSource::Seeded(state) => {
                for half in id.chunks_mut(8) {
                    // SplitMix64: each step a well-mixed 64-bit word.
                    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                    let mut word = *state;
                    word = (word ^ (word >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                    word = (word ^ (word >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                    word ^= word >> 31;
                    half.copy_from_slice(&word.to_be_bytes());
                }
            }
        }
        Ok(id)
    }
}

/// Each topic of `ids` by its id.
fn names_of(ids: &BTreeMap<String, [u8; 16]>) -> BTreeMap<[u8; 16], String> {
    ids.iter().map(|(name, id)| (*id, name.clone())).collect()
}

impl TopicConfigs {
    /// Reads the record from `store`; a stored override this build refuses is an error naming it.
    pub(crate) async fn open(store: PartitionLog, config: &NodeConfig) -> Result<Self, NodeError> {
        let broker = broker_settings(config);
        let mut overrides = BTreeMap::new();
        let mut deleting = BTreeSet::new();
        let mut ids = BTreeMap::new();
        let mut stale_format = false;
        if let Some(bytes) = store.metadata(CONFIGS_KEY).await? {
            let record: Record = serde_json::from_slice(&bytes).map_err(|error| NodeError::Topic {
                name: TOPIC_CONFIGS_PARTITION.to_owned(),
                reason: format!("the topic config record is corrupt: {error}"),
            })?;
            if !READABLE_VERSIONS.contains(&record.version) {
                return Err(NodeError::Topic {
                    name: TOPIC_CONFIGS_PARTITION.to_owned(),
                    reason: format!(
                        "the topic config record has format version {}, this build reads versions 1 and \
                         {FORMAT_VERSION}",
                        record.version
                    ),
                });
            }
            deleting = record.deleting;
            stale_format = record.version < FORMAT_VERSION;
            for (topic, text) in record.ids {
                let id = mirror_fsm::topic_id_from_text(&text).ok_or_else(|| NodeError::Topic {
                    name: topic.clone(),
                    reason: format!("its stored topic id {text:?} is not 16 bytes of URL-safe base64"),
                })?;
                ids.insert(topic, id);
            }
            for (topic, map) in record.topics {
                let checked = Overrides::from_stored(map).map_err(|error| NodeError::Topic {
                    name: topic.clone(),
                    reason: format!("its stored config is refused by this build: {error}"),
                })?;
                overrides.insert(topic, checked);
            }
        }
        let defaults = Overrides::default().settings(&broker);
        let settings = overrides
            .iter()
            .map(|(topic, overrides)| (topic.clone(), overrides.settings(&broker)))
            .collect();
        Ok(TopicConfigs {
            store: Some(store),
            overrides,
            settings,
            broker,
            defaults,
            deleting,
            names: names_of(&ids),
            ids,
            id_source: IdSource::of(config),
            stale_format,
        })
    }

    /// The id of `topic`, if it has one (every topic the node holds has one once it is open).
    pub(crate) fn topic_id(&self, topic: &str) -> Option<[u8; 16]> {
        self.ids.get(topic).copied()
    }

    /// The topic named by `id`, if any.
    pub(crate) fn topic_named_by(&self, id: [u8; 16]) -> Option<&str> {
        self.names.get(&id).map(String::as_str)
    }

    /// Keeps `ids`, and the map by id beside them.
    fn set_ids(&mut self, ids: BTreeMap<String, [u8; 16]>) {
        self.names = names_of(&ids);
        self.ids = ids;
    }

    /// Records `topic` as created now: a new id and its `overrides` (durable when this returns). A record a
    /// crashed creation left for the name is replaced.
    pub(crate) async fn create(&mut self, topic: &str, overrides: Overrides) -> Result<[u8; 16], NodeError> {
        let mut ids = self.ids.clone();
        let id = new_topic_id(&mut self.id_source, &self.names)?;
        ids.insert(topic.to_owned(), id);
        let deleting = self.deleting.clone();
        self.write(topic, &overrides, &deleting, &ids).await?;
        self.log_kept(topic, &overrides);
        self.keep(topic, overrides);
        self.set_ids(ids);
        Ok(id)
    }

    /// A new id no topic has, given to none (a creation only validated).
    pub(crate) fn unused_id(&mut self) -> Result<[u8; 16], NodeError> {
        new_topic_id(&mut self.id_source, &self.names)
    }

    /// Gives each of `topics` that has no id one (a data directory from before ids were kept), in one durable
    /// write; ids of topics not among them (a creation that crashed before its partitions) are dropped with it.
    pub(crate) async fn assign_missing_ids(&mut self, topics: &BTreeSet<String>) -> Result<(), NodeError> {
        let mut ids: BTreeMap<String, [u8; 16]> = self
            .ids
            .iter()
            .filter(|(name, _)| topics.contains(*name))
            .map(|(name, id)| (name.clone(), *id))
            .collect();
        let missing: Vec<&String> = topics.iter().filter(|name| !ids.contains_key(*name)).collect();
        if missing.is_empty() && ids.len() == self.ids.len() && !self.stale_format {
            return Ok(());
        }
        let mut names = names_of(&ids);
        for name in missing {
            let id = new_topic_id(&mut self.id_source, &names)?;
            ids.insert(name.clone(), id);
            names.insert(id, name.clone());
        }
        let (deleting, topic) = (
            self.deleting.clone(),
            topics.iter().next().cloned().unwrap_or_default(),
        );
        let overrides = self.overrides(&topic);
        self.write(&topic, &overrides, &deleting, &ids).await?;
        self.set_ids(ids);
        self.stale_format = false;
        Ok(())
    }

    /// Topics whose deletion may not be finished.
    pub(crate) fn deleting(&self) -> &BTreeSet<String> {
        &self.deleting
    }

    /// The settings the produce path enforces on `topic`.
    pub(crate) fn settings(&self, topic: &str) -> TopicSettings {
        self.settings.get(topic).copied().unwrap_or(self.defaults)
    }

    /// The overrides of `topic` (none recorded: empty).
    pub(crate) fn overrides(&self, topic: &str) -> Overrides {
        self.overrides.get(topic).cloned().unwrap_or_default()
    }

    /// The broker settings topics fall back to.
    pub(crate) fn broker(&self) -> &BrokerSettings {
        &self.broker
    }

    /// Records `overrides` as `topic`'s (durable when this returns; nothing written when nothing changes).
    pub(crate) async fn put(&mut self, topic: &str, overrides: Overrides) -> Result<(), NodeError> {
        let held = self.overrides.get(topic);
        if held == Some(&overrides) || (held.is_none() && overrides.as_map().is_empty()) {
            return Ok(());
        }
        let (deleting, ids) = (self.deleting.clone(), self.ids.clone());
        self.write(topic, &overrides, &deleting, &ids).await?;
        self.log_kept(topic, &overrides);
        self.keep(topic, overrides);
        Ok(())
    }

    /// Records that `topic` is being deleted (`deleting`) or is gone (not): its overrides and its id go with it.
    /// Durable when this returns.
    pub(crate) async fn mark_deletion(&mut self, topic: &str, deleting: bool) -> Result<(), NodeError> {
        let mut set = self.deleting.clone();
        if deleting {
            set.insert(topic.to_owned());
        } else {
            set.remove(topic);
        }
        let mut ids = self.ids.clone();
        ids.remove(topic);
        self.write(topic, &Overrides::default(), &set, &ids).await?;
        self.keep(topic, Overrides::default());
        self.deleting = set;
        self.set_ids(ids);
        Ok(())
    }

    /// Writes the record with `topic`'s overrides replaced by `overrides`, the deletions `deleting` and the ids
    /// `ids`.
    async fn write(
        &mut self,
        topic: &str,
        overrides: &Overrides,
        deleting: &BTreeSet<String>,
        ids: &BTreeMap<String, [u8; 16]>,
    ) -> Result<(), NodeError> {
        let mut topics: BTreeMap<String, BTreeMap<String, String>> = self
            .overrides
            .iter()
            .filter(|(name, _)| name.as_str() != topic)
            .map(|(name, overrides)| (name.clone(), overrides.as_map().clone()))
            .collect();
        if !overrides.as_map().is_empty() {
            topics.insert(topic.to_owned(), overrides.as_map().clone());
        }
        let record = serde_json::to_vec(&Record {
            version: FORMAT_VERSION,
            topics,
            deleting: deleting.clone(),
            ids: ids
                .iter()
                .map(|(name, id)| (name.clone(), mirror_fsm::topic_id_text(*id)))
                .collect(),
        })
        .map_err(|error| NodeError::Topic {
            name: topic.to_owned(),
            reason: format!("cannot encode the topic config record: {error}"),
        })?;
        let store = self.store.as_mut().ok_or_else(|| NodeError::Topic {
            name: topic.to_owned(),
            reason: "the node is closed".to_owned(),
        })?;
        store.put_metadata(CONFIGS_KEY, &record).await?;
        Ok(())
    }

    /// One WARN line per override `serve` keeps without enforcing it yet.
    fn log_kept(&self, topic: &str, overrides: &Overrides) {
        for (name, value) in overrides.kept_not_enforced() {
            tracing::warn!(
                topic,
                config = name,
                value,
                "recorded; serve keeps data without deleting, compacting or rolling by it yet"
            );
        }
    }

    /// Holds `overrides` as `topic`'s in memory (after the record was written).
    fn keep(&mut self, topic: &str, overrides: Overrides) {
        if overrides.as_map().is_empty() {
            self.overrides.remove(topic);
            self.settings.remove(topic);
        } else {
            self.settings
                .insert(topic.to_owned(), overrides.settings(&self.broker));
            self.overrides.insert(topic.to_owned(), overrides);
        }
    }

    /// Writes `record` as the stored record, as another build would have (tests of what this one reads).
    #[cfg(test)]
    pub(crate) async fn put_raw(&mut self, record: &[u8]) -> Result<(), NodeError> {
        match self.store.as_mut() {
            Some(store) => Ok(store.put_metadata(CONFIGS_KEY, record).await?),
            None => Ok(()),
        }
    }

    /// Closes the store.
    pub(crate) async fn close(&mut self) -> Result<(), NodeError> {
        match self.store.take() {
            Some(store) => Ok(store.close().await?),
            None => Ok(()),
        }
    }
}

/// A new topic id unlike every id in `held`: a random version-4 UUID whose text does not begin with `-` (Kafka
/// draws again for those, which a command line would read as a flag).
fn new_topic_id(source: &mut IdSource, held: &BTreeMap<[u8; 16], String>) -> Result<[u8; 16], NodeError> {
    loop {
        let mut id = source.draw()?;
        id[6] = (id[6] & 0x0f) | 0x40;
        id[8] = (id[8] & 0x3f) | 0x80;
        // Base64's first character is the first byte's top six bits; 62 is `-` in the URL-safe alphabet.
        if id[0] >> 2 != 62 && !held.contains_key(&id) {
            return Ok(id);
        }
    }
}

/// The broker settings `serve` was given that differ from Kafka's defaults, by Kafka's broker config name.
fn broker_settings(config: &NodeConfig) -> BrokerSettings {
    let defaults = NodeConfig::new(config.storage.clone());
    let mut settings = BrokerSettings::new();
    if config.max_message_bytes != defaults.max_message_bytes {
        settings.insert(
            "message.max.bytes".to_owned(),
            config.max_message_bytes.to_string(),
        );
    }
    if config.max_timestamp_ahead_ms != defaults.max_timestamp_ahead_ms {
        settings.insert(
            "log.message.timestamp.after.max.ms".to_owned(),
            config.max_timestamp_ahead_ms.to_string(),
        );
    }
    if config.max_timestamp_behind_ms != defaults.max_timestamp_behind_ms {
        settings.insert(
            "log.message.timestamp.before.max.ms".to_owned(),
            config.max_timestamp_behind_ms.to_string(),
        );
    }
    if config.log_retention_ms != defaults.log_retention_ms {
        settings.insert("log.retention.ms".to_owned(), config.log_retention_ms.to_string());
    }
    if config.log_retention_bytes != defaults.log_retention_bytes {
        settings.insert(
            "log.retention.bytes".to_owned(),
            config.log_retention_bytes.to_string(),
        );
    }
    settings
}

/// Why a config request was refused: the Kafka error and the message beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigRefusal {
    /// The error code's error.
    pub error: KafkaError,
    /// What the answer's `error_message` says.
    pub message: Option<String>,
}

impl From<KafkaError> for ConfigRefusal {
    fn from(error: KafkaError) -> Self {
        ConfigRefusal { error, message: None }
    }
}

impl From<ConfigError> for ConfigRefusal {
    fn from(error: ConfigError) -> Self {
        let kafka = match error {
            ConfigError::NullSet(_) | ConfigError::UnknownOperation { .. } => KafkaError::InvalidRequest,
            _ => KafkaError::InvalidConfig,
        };
        ConfigRefusal {
            error: kafka,
            message: Some(error.to_string()),
        }
    }
}

impl Node {
    /// The settings the produce path enforces on `topic` (Kafka's defaults and the broker's for a topic without
    /// overrides).
    pub async fn topic_settings(&self, topic: &str) -> TopicSettings {
        self.topic_configs.read().await.settings(topic)
    }

    /// Replaces the overrides of the mirror topic `topic` with what `take` makes of its current ones, under the
    /// configs' lock (durable when this returns): a mirror link taking its source's configs, which no local
    /// refusal applies to. The overrides recorded, or `None` when they did not change.
    pub async fn sync_mirror_topic_configs(
        &self,
        topic: &str,
        take: impl FnOnce(&BTreeMap<String, String>) -> Overrides,
    ) -> Result<Option<Overrides>, ConfigRefusal> {
        let topics = self.topics.read().await;
        if !topics.contains_key(topic) {
            return Err(KafkaError::UnknownTopicOrPartition.into());
        }
        let mut configs = self.topic_configs.write().await;
        let current = configs.overrides(topic);
        let synced = take(current.as_map());
        if synced == current {
            return Ok(None);
        }
        configs.put(topic, synced.clone()).await.map_err(|error| {
            tracing::error!(topic, %error, "recording a topic's configs failed");
            ConfigRefusal::from(KafkaError::KafkaStorageError)
        })?;
        Ok(Some(synced))
    }

    /// The configs set on `topic` (its overrides: name → value), `None` when no such topic exists.
    pub async fn topic_overrides(&self, topic: &str) -> Option<BTreeMap<String, String>> {
        if !self.topics.read().await.contains_key(topic) {
            return None;
        }
        Some(self.topic_configs.read().await.overrides(topic).as_map().clone())
    }

    /// Every config of the topic `topic` (or those in `keys`) with its value and source.
    pub async fn describe_topic_configs(
        &self,
        topic: &str,
        keys: Option<&[&str]>,
    ) -> Result<Vec<Described>, ConfigRefusal> {
        check_topic_name(topic)?;
        if !self.topics.read().await.contains_key(topic) {
            // Kafka answers an unknown topic here without a message.
            return Err(ConfigRefusal {
                error: KafkaError::UnknownTopicOrPartition,
                message: Some(String::new()),
            });
        }
        let configs = self.topic_configs.read().await;
        Ok(configs.overrides(topic).describe(configs.broker(), keys))
    }

    /// Replaces the overrides of `topic` with what `alter` makes of them (durable when this returns); with
    /// `validate_only`, only checks.
    pub async fn alter_topic_configs(
        &self,
        topic: &str,
        alter: impl FnOnce(&Overrides) -> Result<Overrides, ConfigError>,
        validate_only: bool,
    ) -> Result<(), ConfigRefusal> {
        check_topic_name(topic)?;
        // Read before the config locks: the registry has a lock of its own.
        let mirrored_by = self
            .mirror_links()
            .await
            .map_err(|error| {
                tracing::error!(%error, "reading the mirror links failed");
                ConfigRefusal::from(KafkaError::KafkaStorageError)
            })?
            .into_iter()
            .find(|link| {
                link.topics
                    .get(topic)
                    .is_some_and(|record| !record.failover_requested)
            });
        let topics = self.topics.read().await;
        let mut configs = self.topic_configs.write().await;
        // The configs are checked first, as Kafka checks them before it looks for the topic.
        let current = configs.overrides(topic);
        let altered = alter(&current)?;
        if !topics.contains_key(topic) {
            return Err(ConfigRefusal {
                error: KafkaError::UnknownTopicOrPartition,
                message: Some(format!("The topic '{topic}' does not exist.")),
            });
        }
        if let Some(link) = mirrored_by {
            refuse_synced_changes(topic, &link, current.as_map(), altered.as_map())?;
        }
        if validate_only {
            return Ok(());
        }
        configs.put(topic, altered).await.map_err(|error| {
            tracing::error!(topic, %error, "recording a topic's configs failed");
            ConfigRefusal::from(KafkaError::KafkaStorageError)
        })
    }
}

/// A change to a config a mirror link takes from its source is refused while the topic is mirrored (ADR 0059):
/// the next check would put the source's value back. The configs the link does not sync are the topic's own.
fn refuse_synced_changes(
    topic: &str,
    link: &crate::mirror::LinkRecord,
    current: &BTreeMap<String, String>,
    altered: &BTreeMap<String, String>,
) -> Result<(), ConfigRefusal> {
    let changed: Vec<&String> = current
        .keys()
        .chain(altered.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|name| current.get(*name) != altered.get(*name) && link.settings.syncs_config(name))
        .collect();
    match changed.first() {
        None => Ok(()),
        Some(name) => Err(ConfigRefusal {
            error: KafkaError::PolicyViolation,
            message: Some(format!(
                "config {name} of topic {topic} is taken from the source of mirror link {} while the topic is \
                 mirrored: change it at the source, fail the topic over, or add it to the link's \
                 mirror.topic.properties.exclude",
                link.name
            )),
        }),
    }
}

/// An empty or invalid topic name is INVALID_TOPIC_EXCEPTION, saying why as Kafka says it.
pub(crate) fn check_topic_name(topic: &str) -> Result<(), ConfigRefusal> {
    let why = if topic.is_empty() {
        "the empty string is not allowed".to_owned()
    } else if topic == "." || topic == ".." {
        format!("'{topic}' is not allowed")
    } else if topic.len() > 249 {
        format!("the length of '{topic}' is longer than the max allowed length 249")
    } else if !topic
        .bytes()
        .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
    {
        format!("'{topic}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'")
    } else {
        return Ok(());
    };
    Err(ConfigRefusal {
        error: KafkaError::InvalidTopic,
        message: Some(format!("Topic name is invalid: {why}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_topic_id_is_drawn_again_while_a_topic_holds_the_one_drawn() {
        let seed = 7;
        let first = new_topic_id(&mut IdSource::Seeded(seed), &BTreeMap::new()).unwrap();
        let held: BTreeMap<[u8; 16], String> = [(first, "orders".to_owned())].into();
        let next = new_topic_id(&mut IdSource::Seeded(seed), &held).unwrap();
        assert_ne!(
            next, first,
            "the same seed drew the held id first, and drew again"
        );
        assert_eq!((next[6] >> 4, next[8] >> 6), (4, 2), "a version-4, RFC 4122 UUID");
    }
}
