//! The durable list of mirror links: one JSON record in the metadata of the internal partition
//! [`MIRROR_LINKS_PARTITION`], rewritten whole (atomically and durably, as every metadata record is) when a link
//! is created or a failover is requested.
//!
//! Each mirrored partition keeps its own state machine's record beside its log (`mirror-fsm`'s `mirror.state`);
//! the registry says which partitions belong to which link and whether an operator asked them to fail over. The
//! request is recorded **before** STOPPING begins, so a crash between the two still fails the partition over on
//! restart (the model check found that a request not persisted is lost, docs/model-check.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Node, NodeError};

/// The internal partition holding the registry.
pub const MIRROR_LINKS_PARTITION: &str = "__mirrorlog_mirror_links";

/// The metadata key of the registry record.
const LINKS_KEY: &str = "mirror.links";

/// The registry record's format version.
const FORMAT_VERSION: u32 = 1;

/// One link: a source cluster and the topics mirrored from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkRecord {
    /// The link's name (unique on this node).
    pub name: String,
    /// The source's bootstrap address (`host:port`).
    pub source: String,
    /// The source's cluster id when the link was created (every fetch session checks it again).
    pub source_cluster_id: String,
    /// How the link reaches the source (Kafka client settings, secrets included: the node must reconnect after a
    /// restart); empty: PLAINTEXT. Never shown unredacted (`mirror_admin::shown_settings`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub source_config: BTreeMap<String, String>,
    /// The mirrored topics.
    pub topics: BTreeMap<String, TopicRecord>,
    /// What an operator may change while the link runs (`mirror alter`; `link_config`), recorded beside the
    /// fields above in the same JSON object.
    #[serde(flatten)]
    pub settings: LinkSettings,
    /// The ACLs this link created here from its source's (`acl_sync`): the only ones it may delete.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub synced_acls: Vec<kafka_auth::acl::AclBinding>,
}

/// A link's settings (`link_config` names them as Kafka-style keys). Each absent field is its default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkSettings {
    /// Topic include patterns (`filters`): the source topics they select are added as the source creates them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// Topic exclude patterns: a topic they match is never added, and one already mirrored is stopped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Group include patterns: the groups whose offsets are copied (none: every group).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups_include: Vec<String>,
    /// Group exclude patterns: groups whose offsets are never copied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups_exclude: Vec<String>,
    /// How often the link's source topics are checked (partitions added, topics the patterns select); `None`:
    /// the node's interval (`serve --mirror-metadata-refresh-ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_refresh_interval_ms: Option<i64>,
    /// How often the link's group offsets are copied; `None`: the node's interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_sync_interval_ms: Option<i64>,
    /// Topic configs not taken from the source (`mirror.topic.properties.exclude`); `None`: KIP-1279's list
    /// (`link_config::DEFAULT_TOPIC_PROPERTIES_EXCLUDE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_properties_exclude: Option<Vec<String>>,
    /// ACL rules (`mirror.acl.include`, `acl_sync`): the source's ACLs they select are created here; none: ACLs
    /// are not synced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acl_include: Vec<String>,
    /// The most one round asks of the link's source (`mirror.fetch.max.bytes`); `None`: 2 MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch_max_bytes: Option<i64>,
    /// The most one partition's answer in a round carries (`mirror.max.partition.fetch.bytes`); `None`: 2 MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_partition_fetch_bytes: Option<i64>,
    /// The longest wait between a FAILED partition's retries (`mirror.retry.backoff.max.ms`); `None`: 30 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_backoff_max_ms: Option<i64>,
}

impl LinkSettings {
    /// Whether the topic config `name` is taken from the source (and so refused to a local change while the topic
    /// is mirrored).
    pub fn syncs_config(&self, name: &str) -> bool {
        match &self.topic_properties_exclude {
            Some(excluded) => !excluded.iter().any(|excluded| excluded == name),
            None => !super::link_config::DEFAULT_TOPIC_PROPERTIES_EXCLUDE.contains(&name),
        }
    }
}

/// One mirrored topic of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRecord {
    /// Its partition count (the source's when the link was created).
    pub partitions: u32,
    /// An operator asked it to fail over (`mirror failover` or `promote`): its partitions go through STOPPING,
    /// also after a restart, and never start mirroring again under this link.
    pub failover_requested: bool,
    /// The topic's id at the source when the link was created, where the source has topic ids (32 hex digits);
    /// absent for a source without them, and in links recorded before ids were. Every preparation of a partition
    /// checks it against the source's topic of that name (`Fetcher::expect_topic_id`).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "topic_id_hex")]
    pub source_topic_id: Option<[u8; 16]>,
}

/// A topic id in the registry: 32 lower-case hex digits.
mod topic_id_hex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(id: &Option<[u8; 16]>, serializer: S) -> Result<S::Ok, S::Error> {
        match id {
            Some(id) => {
                serializer.serialize_str(&id.iter().map(|byte| format!("{byte:02x}")).collect::<String>())
            }
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<[u8; 16]>, D::Error> {
        let Some(text) = Option::<String>::deserialize(deserializer)? else {
            return Ok(None);
        };
        let bad = || serde::de::Error::custom(format!("a topic id is 32 hex digits, not {text:?}"));
        if text.len() != 32 || !text.is_ascii() {
            return Err(bad());
        }
        let mut id = [0u8; 16];
        for (index, byte) in id.iter_mut().enumerate() {
            let digits = text.get(index * 2..index * 2 + 2).ok_or_else(bad)?;
            *byte = u8::from_str_radix(digits, 16).map_err(|_| bad())?;
        }
        Ok(Some(id))
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Registry {
    version: u32,
    links: Vec<LinkRecord>,
}

impl Node {
    /// The mirror links recorded on this node (none on a node that never mirrored).
    pub async fn mirror_links(&self) -> Result<Vec<LinkRecord>, NodeError> {
        let guard = self.mirror_registry.lock().await;
        let Some(log) = guard.as_ref() else {
            return Err(NodeError::Mirror("the node is closed".to_owned()));
        };
        let Some(bytes) = log.metadata(LINKS_KEY).await? else {
            return Ok(Vec::new());
        };
        let registry: Registry = serde_json::from_slice(&bytes)
            .map_err(|error| NodeError::Mirror(format!("the mirror link registry is corrupt: {error}")))?;
        if registry.version != FORMAT_VERSION {
            return Err(NodeError::Mirror(format!(
                "the mirror link registry has format version {}, this build reads {FORMAT_VERSION}",
                registry.version
            )));
        }
        Ok(registry.links)
    }

    /// Replaces the recorded mirror links (durable when this returns).
    pub async fn put_mirror_links(&self, links: &[LinkRecord]) -> Result<(), NodeError> {
        let record = serde_json::to_vec(&Registry {
            version: FORMAT_VERSION,
            links: links.to_vec(),
        })
        .map_err(|error| NodeError::Mirror(format!("cannot encode the mirror link registry: {error}")))?;
        let mut guard = self.mirror_registry.lock().await;
        let Some(log) = guard.as_mut() else {
            return Err(NodeError::Mirror("the node is closed".to_owned()));
        };
        Ok(log.put_metadata(LINKS_KEY, &record).await?)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test fails by panicking

    use super::TopicRecord;

    #[test]
    fn a_topic_record_keeps_its_source_topic_id_as_hex_and_reads_records_written_without_one() {
        let record = TopicRecord {
            partitions: 3,
            failover_requested: false,
            source_topic_id: Some(std::array::from_fn(|index| index as u8 * 17)),
        };
        let json = serde_json::to_string(&record).unwrap();
        assert!(
            json.contains(r#""source_topic_id":"00112233445566778899aabbccddeeff""#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<TopicRecord>(&json).unwrap(), record);
        let older: TopicRecord =
            serde_json::from_str(r#"{"partitions":2,"failover_requested":false}"#).unwrap();
        assert_eq!(older.source_topic_id, None);
        assert!(!serde_json::to_string(&older).unwrap().contains("source_topic_id"));
        for bad in [r#""0011""#, r#""zz112233445566778899aabbccddeeff""#, "7"] {
            let text = format!(r#"{{"partitions":2,"failover_requested":false,"source_topic_id":{bad}}}"#);
            assert!(serde_json::from_str::<TopicRecord>(&text).is_err(), "{text}");
        }
    }
}
