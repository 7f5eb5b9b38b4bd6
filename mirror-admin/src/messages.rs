//! The mirror administration requests and answers: what `mirrorlog mirror …` asks a node and what it answers, as JSON
//! values (ADR 0040 puts them on a private API key of the Kafka port). Every action answers with the status of
//! the partitions it touched, so a script reads one shape.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One administration request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum AdminRequest {
    /// Create a link mirroring `topics` from `source` into new topics of the same names and partition counts, and
    /// every source topic `include` selects, now and as the source creates them (ADR 0059).
    Create {
        /// The link's name.
        link: String,
        /// The source's bootstrap address.
        source: String,
        /// The topics to mirror by name.
        topics: Vec<String>,
        /// Regexes a source topic's whole name may match to be mirrored (KIP-1279's `mirror.topics.include`);
        /// empty: only `topics`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        include: Vec<String>,
        /// Regexes that keep a topic out even when included (`mirror.topics.exclude`); empty with `include`
        /// given: `__.*`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        exclude: Vec<String>,
        /// How the link reaches the source: Kafka client settings (`security.protocol`, `sasl.*`, `ssl.*`, PEM
        /// stores inline), kept with the link; empty: PLAINTEXT.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        source_config: BTreeMap<String, String>,
    },
    /// Like `Create`, into topics this node already holds with the source's partition counts (failback: a
    /// former source mirrors from its former destination; the state machine aligns the logs).
    Reverse {
        /// The link's name.
        link: String,
        /// The source's bootstrap address.
        source: String,
        /// The topics to mirror.
        topics: Vec<String>,
        /// How the link reaches the source: Kafka client settings (`security.protocol`, `sasl.*`, `ssl.*`, PEM
        /// stores inline), kept with the link; empty: PLAINTEXT.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        source_config: BTreeMap<String, String>,
    },
    /// Every link with every partition's status.
    List,
    /// The status of a link's partitions (`topics` empty: all of them).
    Describe {
        /// The link.
        link: String,
        /// A subset of its topics, or empty.
        topics: Vec<String>,
    },
    /// Change a link's configuration while it runs (`link_config`): `set` keys to values, `delete` keys back to
    /// their defaults — checked whole before anything changes, then recorded and in effect at once. A mirrored
    /// topic the new exclude patterns match is stopped, as `Failover` stops it (KIP-1279; ADR 0059).
    Alter {
        /// The link.
        link: String,
        /// Keys and their new values.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        set: BTreeMap<String, String>,
        /// Keys back to their defaults.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        delete: Vec<String>,
        /// New client settings for reaching the source (`mirror alter --source-config FILE`: rotated
        /// credentials, a new trust store), self-contained as at `create`; `None`: unchanged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source_config: Option<BTreeMap<String, String>>,
    },
    /// A link's configuration: every key with its value and whether it is the default.
    DescribeConfig {
        /// The link.
        link: String,
    },
    /// Stop fetching; the partitions stay read-only.
    Pause {
        /// The link.
        link: String,
        /// A subset of its topics, or empty.
        topics: Vec<String>,
    },
    /// Fetch again after a pause.
    Resume {
        /// The link.
        link: String,
        /// A subset of its topics, or empty.
        topics: Vec<String>,
    },
    /// Fail over now: STOPPING (fetcher removed, cut to the last stable offset, last mirrored offset persisted,
    /// the `MIRROR_PID_RESET` barrier written), then writable — whatever the lag.
    Failover {
        /// The link.
        link: String,
        /// A subset of its topics, or empty.
        topics: Vec<String>,
    },
    /// Forget a link: its partitions stop fetching and stay as they are — a failed-over one writable, any other
    /// read-only (`Reverse` from the cluster it mirrored adopts such a topic again). Refused while a partition's
    /// failover is under way (STOPPING, failed at a STOPPING step, or asked for and not begun).
    Delete {
        /// The link.
        link: String,
    },
    /// Wait until the mirror has caught up with the source's last stable offset (the source must answer), then
    /// fail over; gives up after `timeout_ms` without failing anything over.
    Promote {
        /// The link.
        link: String,
        /// A subset of its topics, or empty.
        topics: Vec<String>,
        /// How long to wait for the lag to reach zero.
        timeout_ms: u64,
    },
    /// This node's last mirrored offset of a partition it mirrored from the cluster `source_cluster_id` (where
    /// its failover cut), in `last_mirrored_offset` (absent: it never mirrored the partition from there). A
    /// former source asks it when it mirrors back (failback), to align its log instead of copying it again.
    LastMirrored {
        /// The cluster the partition was mirrored from: the one asking.
        source_cluster_id: String,
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
}

/// The answer to every request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminResponse {
    /// The action completed (for a failover: every partition it named is STOPPED).
    pub ok: bool,
    /// Why it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<AdminFailure>,
    /// The links the action touched, with their partitions' status (absent from an answer: none — the failback
    /// question's answer needs none, and a peer may leave it out).
    #[serde(default)]
    pub links: Vec<LinkStatus>,
    /// The answer to `LastMirrored`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_mirrored_offset: Option<i64>,
}

/// A failed action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminFailure {
    /// `invalid_request`, `unknown_link`, `unknown_topic`, `already_exists`, `source` (the source cannot be
    /// reached or refused), `storage`, `timeout`, `failed` (a partition ended FAILED or not STOPPED).
    pub category: String,
    /// What happened, for a person.
    pub message: String,
}

/// A link and its partitions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkStatus {
    /// The link's name.
    pub name: String,
    /// The source's bootstrap address.
    pub source: String,
    /// The source's cluster id.
    pub source_cluster_id: String,
    /// How the link reaches the source, secrets redacted ([`shown_settings`]); absent for PLAINTEXT.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_config: Vec<String>,
    /// The link's include patterns: source topics they select are mirrored as they appear; absent: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// The link's exclude patterns; absent: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Each partition of the topics asked about.
    pub partitions: Vec<PartitionStatus>,
    /// What the link found at the source and cannot do yet, e.g. a topic that gained partitions there
    /// (`source_topics`); absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The link's configuration, every key (`describe --config` and `alter` answers only); absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<ConfigEntry>,
    /// What the link's source checks did since `serve` started (the metrics' link counters).
    #[serde(default)]
    pub activity: LinkActivity,
}

/// What a link's periodic source checks did since `serve` started (topics found by its patterns, configs and
/// ACLs taken from its source), and when the last one was applied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkActivity {
    /// Source topics the link's include patterns added.
    #[serde(default)]
    pub topics_discovered: u64,
    /// Times a mirror topic's configs changed to follow its source topic's.
    #[serde(default)]
    pub config_changes: u64,
    /// ACLs the link created here from its source's.
    #[serde(default)]
    pub acls_created: u64,
    /// ACLs the link deleted here once its source no longer had them (or its rules no longer selected them).
    #[serde(default)]
    pub acls_deleted: u64,
    /// When the link's last source check was applied (milliseconds since the Unix epoch); absent before the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_check_ms: Option<i64>,
}

/// One key of a link's configuration ([`AdminRequest::DescribeConfig`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigEntry {
    /// The key (`mirror.topics.include`, …).
    pub name: String,
    /// Its value (lists comma-separated).
    pub value: String,
    /// Whether the value is the default.
    pub default: bool,
}

/// One mirrored partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStatus {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The state, in the names of KIP-1279's prototype (`MirrorPartitionState`): LOG_TRUNCATION (aligning with
    /// the source before fetching), MIRRORING, PAUSED, STOPPING, STOPPED, FAILED.
    pub state: String,
    /// Where this partition's log ends.
    pub log_end_offset: i64,
    /// The last offset mirrored: the log end while mirroring, the offset STOPPING cut to once stopped.
    pub last_mirrored_offset: Option<i64>,
    /// The source's last stable offset in its latest answer.
    pub source_last_stable_offset: Option<i64>,
    /// Offsets the mirror is behind the source's last stable offset (while mirroring, once the source answered).
    pub lag_offsets: Option<i64>,
    /// How long the mirror has been behind (0 when caught up).
    pub lag_ms: Option<i64>,
    /// Where the barrier is, once a failover stopped the partition.
    pub barrier_offset: Option<i64>,
    /// How many times the partition's log was cut back since `serve` started: aligning a new mirror's empty log
    /// with its source counts once; any later cut removed batches the mirror held (a failback's alignment, or a
    /// source that proved the logs diverged). A retry after a transient fault never cuts (issue 50).
    #[serde(default)]
    pub truncations: u64,
    /// Offsets written by the mirror since `serve` started (records and transaction markers).
    #[serde(default)]
    pub offsets_mirrored: u64,
    /// Batches written by the mirror since `serve` started.
    #[serde(default)]
    pub batches_mirrored: u64,
    /// Rounds of this partition that failed since `serve` started (each retry that failed again counts).
    #[serde(default)]
    pub failed_rounds: u64,
    /// Those rounds by why they failed: Kafka's name of the source's error, or `CONNECTION`, `SOURCE_REFUSED`,
    /// `BATCH_REFUSED`, `STEP`, `RETRY`, `STORAGE` (`node::mirror::round_errors`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed_rounds_by_error: BTreeMap<String, u64>,
    /// Times the partition was retried once FAILED since `serve` started.
    #[serde(default)]
    pub retries: u64,
    /// Bytes of the batches the source answered since `serve` started.
    #[serde(default)]
    pub bytes_fetched: u64,
    /// Offsets the batches the source answered span since `serve` started (records and markers; written or not).
    #[serde(default)]
    pub offsets_fetched: u64,
    /// Bytes of the batches written since `serve` started.
    #[serde(default)]
    pub bytes_mirrored: u64,
    /// The latest error (a FAILED partition's failure, or a fetch that failed and is retried).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl AdminResponse {
    /// A failed action's answer.
    pub fn failed(category: &str, message: impl Into<String>, links: Vec<LinkStatus>) -> Self {
        AdminResponse {
            ok: false,
            error: Some(AdminFailure {
                category: category.to_owned(),
                message: message.into(),
            }),
            links,
            last_mirrored_offset: None,
        }
    }
}

/// A link's source settings as `describe`, `list` and `--json` show them: every key, the values of secrets (the
/// JAAS line, which holds the password, and private keys) replaced by `[redacted]`, PEM certificates by their
/// count.
pub fn shown_settings(settings: &BTreeMap<String, String>) -> Vec<String> {
    settings
        .iter()
        .map(|(key, value)| {
            let value = match key.as_str() {
                "sasl.jaas.config" | "ssl.keystore.key" => "[redacted]".to_owned(),
                "ssl.truststore.certificates" | "ssl.keystore.certificate.chain" => {
                    format!(
                        "[{} PEM certificates]",
                        value.matches("BEGIN CERTIFICATE").count()
                    )
                }
                _ => value.clone(),
            };
            format!("{key}={value}")
        })
        .collect()
}
