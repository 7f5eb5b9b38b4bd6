//! The broker's metrics in Prometheus form (`serve --metrics-listen HOST:PORT`, issue 53, ADR 0058): what the
//! request path counts as it runs ([`BrokerMetrics`]: requests by API and version, their latency, bytes in and
//! out, connections) and, read at each scrape, the node's size and every mirrored partition's state and lag from
//! the mirror links' own state (the `list` answer `mirrorlog mirror describe` prints: nothing is asked of a
//! source to answer a scrape).
//!
//! Names follow Prometheus's conventions: the `mirrorlog_` prefix, base units (seconds, bytes), `_total` on
//! counters; a value that is not known (the lag of a partition whose source has not answered yet) is left out,
//! never written as 0. The text is OpenMetrics (`prometheus-client`'s encoder), which Prometheus scrapes.
//! [`http`] serves it.

pub mod errors;
pub mod http;

use std::time::Duration;

use errors::ErrorCounts;

use node::mirror::LinkStatus;
use node::Node;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::fmt::Write as _;

/// The mirror partition states a partition's `state` metric has a line for (KIP-1279's prototype's names, as
/// `describe` prints them).
pub const MIRROR_STATES: [&str; 6] = [
    "LOG_TRUNCATION",
    "MIRRORING",
    "PAUSED",
    "STOPPING",
    "STOPPED",
    "FAILED",
];

/// A request's API as a label: the key when the broker serves it (or the mirror administration key), else
/// [`ApiLabel::UNSUPPORTED`]. Kept as the key, so counting a request allocates nothing; Kafka's name is written only
/// when a scrape encodes it.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
struct ApiLabel(i16);

impl ApiLabel {
    /// Every key and version the broker does not serve.
    const UNSUPPORTED: ApiLabel = ApiLabel(i16::MIN);
}

impl EncodeLabelValue for ApiLabel {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        if self.0 == crate::mirror::MIRROR_ADMIN_API_KEY {
            return encoder.write_str("MirrorAdmin");
        }
        match kafka_protocol::messages::ApiKey::try_from(self.0) {
            Ok(key) if *self != ApiLabel::UNSUPPORTED => write!(encoder, "{key:?}"),
            _ => encoder.write_str("unsupported"),
        }
    }
}

/// A request's labels: the API by Kafka's name, and the version asked.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    api: ApiLabel,
    version: i16,
}

/// A Kafka error code as a label: Kafka's name of it (`NOT_LEADER_OR_FOLLOWER`), written only when a scrape
/// encodes it. The broker answers only the codes of Kafka's table, so the label set stays bounded.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
struct ErrorLabel(i16);

impl EncodeLabelValue for ErrorLabel {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        match kafka_types::KafkaError::from_code(self.0) {
            Some(error) => encoder.write_str(error.name()),
            None => write!(encoder, "UNKNOWN_CODE_{}", self.0),
        }
    }
}

/// An error's labels: the API by Kafka's name, and the error by Kafka's name.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    api: ApiLabel,
    error: ErrorLabel,
}

/// A latency's labels: the API by Kafka's name.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ApiLabels {
    api: ApiLabel,
}

/// A mirrored partition's labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartitionLabels {
    link: String,
    topic: String,
    partition: i32,
}

/// A mirrored partition's labels, with why a round failed.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartitionErrorLabels {
    link: String,
    topic: String,
    partition: i32,
    error: String,
}

/// A mirrored partition's state labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    link: String,
    topic: String,
    partition: i32,
    state: String,
}

/// A state's label, alone.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateOnlyLabels {
    state: &'static str,
}

/// A link's labels, with a state.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LinkStateLabels {
    link: String,
    state: String,
}

/// A link's labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LinkLabels {
    link: String,
}

type LatencyFamily = Family<ApiLabels, Histogram, fn() -> Histogram>;

/// 100 µs to ~26 s in ×4 steps: a produce acknowledged from memory to a long poll that waited its full time.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_1, 4.0, 10))
}

/// What the request path counts; cheap to update (atomics under a read lock per label set), shared by every
/// connection.
#[derive(Debug)]
pub struct BrokerMetrics {
    requests: Family<RequestLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    latency: LatencyFamily,
    received_bytes: Counter,
    sent_bytes: Counter,
    connections_open: Gauge,
    connections_accepted: Counter,
}

impl Default for BrokerMetrics {
    fn default() -> Self {
        BrokerMetrics {
            requests: Family::default(),
            errors: Family::default(),
            latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            received_bytes: Counter::default(),
            sent_bytes: Counter::default(),
            connections_open: Gauge::default(),
            connections_accepted: Counter::default(),
        }
    }
}

/// The labels of a request: Kafka's name of its API (`Produce`, `Fetch`, …) and its version when the broker
/// serves that pair (or the mirror administration key, `MirrorAdmin`); anything else a client sends is counted
/// under `api="unsupported"`, version −1 — the label sets stay bounded by the version table, whatever the
/// clients send.
fn request_labels(api_key: i16, version: i16) -> RequestLabels {
    let served = (api_key == crate::mirror::MIRROR_ADMIN_API_KEY && version == 0)
        || kafka_protocol::messages::ApiKey::try_from(api_key)
            .is_ok_and(|key| crate::versions::supported(key, version));
    if served {
        RequestLabels {
            api: ApiLabel(api_key),
            version,
        }
    } else {
        RequestLabels {
            api: ApiLabel::UNSUPPORTED,
            version: -1,
        }
    }
}

impl BrokerMetrics {
    /// One request answered (or answered with nothing, as acks=0 produce): its API, version, time taken and the
    /// Kafka error codes in its answer.
    pub fn request(&self, api_key: i16, version: i16, took: Duration, errors: &ErrorCounts) {
        let labels = request_labels(api_key, version);
        self.latency
            .get_or_create(&ApiLabels { api: labels.api })
            .observe(took.as_secs_f64());
        for (code, count) in errors.iter() {
            self.errors
                .get_or_create(&ErrorLabels {
                    api: labels.api,
                    error: ErrorLabel(code),
                })
                .inc_by(u64::from(count));
        }
        self.requests.get_or_create(&labels).inc();
    }

    /// Bytes read from clients (frames with their size field).
    pub fn received(&self, bytes: usize) {
        self.received_bytes
            .inc_by(u64::try_from(bytes).unwrap_or(u64::MAX));
    }

    /// Bytes written to clients (frames with their size field).
    pub fn sent(&self, bytes: usize) {
        self.sent_bytes.inc_by(u64::try_from(bytes).unwrap_or(u64::MAX));
    }

    /// A connection accepted; the guard counts it open until dropped.
    pub fn connection_opened(&self) -> OpenConnection {
        self.connections_accepted.inc();
        self.connections_open.inc();
        OpenConnection {
            open: self.connections_open.clone(),
        }
    }

    /// The text of a scrape: these counters, `node`'s size and the mirror links' `links`.
    pub async fn render(&self, node: &Node, links: &[LinkStatus]) -> String {
        let mut registry = Registry::with_prefix("mirrorlog");
        registry.register(
            "requests",
            "Requests answered, by API and version",
            self.requests.clone(),
        );
        registry.register(
            "request_errors",
            "Kafka error codes in the answers, by API and error (each partition's counts; NONE is not counted)",
            self.errors.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time from a request read to its answer written, by API",
            self.latency.clone(),
        );
        registry.register(
            "network_received_bytes",
            "Bytes read from client connections",
            self.received_bytes.clone(),
        );
        registry.register(
            "network_sent_bytes",
            "Bytes written to client connections",
            self.sent_bytes.clone(),
        );
        registry.register(
            "connections",
            "Client connections open",
            self.connections_open.clone(),
        );
        registry.register(
            "connections_accepted",
            "Client connections accepted",
            self.connections_accepted.clone(),
        );
        register_node(&mut registry, node).await;
        register_mirrors(&mut registry, links);
        let mut text = String::new();
        // Writing to a String cannot fail; an encoder error would be a bug in a metric, left out of the answer.
        if encode(&mut text, &registry).is_err() {
            text.clear();
        }
        text
    }
}

/// Counts a connection open while it lives ([`BrokerMetrics::connection_opened`]).
#[derive(Debug)]
pub struct OpenConnection {
    open: Gauge,
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.open.dec();
    }
}

fn gauge(value: i64) -> Gauge {
    let gauge = Gauge::default();
    gauge.set(value);
    gauge
}

async fn register_node(registry: &mut Registry, node: &Node) {
    let topics = node.topic_partitions().await;
    let partitions: usize = topics.values().sum();
    registry.register(
        "topics",
        "Topics on this broker (its internal partitions are not topics)",
        gauge(i64::try_from(topics.len()).unwrap_or(i64::MAX)),
    );
    registry.register(
        "partitions",
        "Partitions of those topics, all led by this broker",
        gauge(i64::try_from(partitions).unwrap_or(i64::MAX)),
    );
    let counts = node.gauges().await;
    let by_state = |counts: &std::collections::BTreeMap<&'static str, usize>, states: &[&'static str]| {
        let family: Family<StateOnlyLabels, Gauge> = Family::default();
        // Every state has a line, 0 when nothing is in it.
        for state in states {
            family
                .get_or_create(&StateOnlyLabels { state })
                .set(i64::try_from(counts.get(state).copied().unwrap_or(0)).unwrap_or(i64::MAX));
        }
        family
    };
    registry.register(
        "consumer_groups",
        "Consumer groups by Kafka's state name (a group known only by its committed offsets is Empty)",
        by_state(&counts.groups_by_state, &GROUP_STATES),
    );
    registry.register(
        "transactional_ids",
        "Transactional ids the coordinator holds, by Kafka's transaction state (Ongoing: a transaction open)",
        by_state(&counts.transactions_by_state, &TRANSACTION_STATES),
    );
    registry.register(
        "producer_ids",
        "Producer ids the partitions' producer states hold (one per partition a producer wrote to)",
        gauge(i64::try_from(counts.producer_ids).unwrap_or(i64::MAX)),
    );
}

/// The group states a `consumer_groups` line is written for (Kafka's names, as ListGroups answers them).
const GROUP_STATES: [&str; 4] = ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable"];

/// The transaction states a `transactional_ids` line is written for (Kafka's names; `Dead` ids are not listed).
const TRANSACTION_STATES: [&str; 7] = [
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "PrepareEpochFence",
];

/// Every mirrored partition's gauges, and each link's partitions by state.
fn register_mirrors(registry: &mut Registry, links: &[LinkStatus]) {
    let state: Family<StateLabels, Gauge> = Family::default();
    let lag_records: Family<PartitionLabels, Gauge> = Family::default();
    let lag_seconds: Family<PartitionLabels, Gauge<f64, std::sync::atomic::AtomicU64>> = Family::default();
    let log_end: Family<PartitionLabels, Gauge> = Family::default();
    let last_mirrored: Family<PartitionLabels, Gauge> = Family::default();
    let source_lso: Family<PartitionLabels, Gauge> = Family::default();
    let truncations: Family<PartitionLabels, Counter> = Family::default();
    let offsets_mirrored: Family<PartitionLabels, Counter> = Family::default();
    let batches_mirrored: Family<PartitionLabels, Counter> = Family::default();
    let failed_rounds: Family<PartitionErrorLabels, Counter> = Family::default();
    let retries: Family<PartitionLabels, Counter> = Family::default();
    let bytes_fetched: Family<PartitionLabels, Counter> = Family::default();
    let offsets_fetched: Family<PartitionLabels, Counter> = Family::default();
    let bytes_mirrored: Family<PartitionLabels, Counter> = Family::default();
    let by_state: Family<LinkStateLabels, Gauge> = Family::default();
    let warnings: Family<LinkLabels, Gauge> = Family::default();
    let topics_discovered: Family<LinkLabels, Counter> = Family::default();
    let config_changes: Family<LinkLabels, Counter> = Family::default();
    let acls_created: Family<LinkLabels, Counter> = Family::default();
    let acls_deleted: Family<LinkLabels, Counter> = Family::default();
    let last_check: Family<LinkLabels, Gauge<f64, std::sync::atomic::AtomicU64>> = Family::default();
    for link in links {
        let labels = LinkLabels {
            link: link.name.clone(),
        };
        let activity = &link.activity;
        for (family, value) in [
            (&topics_discovered, activity.topics_discovered),
            (&config_changes, activity.config_changes),
            (&acls_created, activity.acls_created),
            (&acls_deleted, activity.acls_deleted),
        ] {
            family.get_or_create(&labels).inc_by(value);
        }
        if let Some(checked_ms) = activity.last_check_ms {
            // Milliseconds since the epoch to seconds, Prometheus's base unit (exact below 2^53 ms).
            #[allow(clippy::cast_precision_loss)]
            last_check.get_or_create(&labels).set(checked_ms as f64 / 1000.0);
        }
        for name in MIRROR_STATES {
            // Every state has a line, 0 when no partition is in it.
            by_state
                .get_or_create(&LinkStateLabels {
                    link: link.name.clone(),
                    state: name.to_owned(),
                })
                .set(0);
        }
        warnings
            .get_or_create(&LinkLabels {
                link: link.name.clone(),
            })
            .set(i64::try_from(link.warnings.len()).unwrap_or(i64::MAX));
        for partition in &link.partitions {
            let labels = PartitionLabels {
                link: link.name.clone(),
                topic: partition.topic.clone(),
                partition: partition.partition,
            };
            for name in MIRROR_STATES {
                state
                    .get_or_create(&StateLabels {
                        link: link.name.clone(),
                        topic: partition.topic.clone(),
                        partition: partition.partition,
                        state: name.to_owned(),
                    })
                    .set(i64::from(partition.state == name));
            }
            by_state
                .get_or_create(&LinkStateLabels {
                    link: link.name.clone(),
                    state: partition.state.clone(),
                })
                .inc();
            // A value not known (no answer from the source yet) is left out, never written as 0.
            for (family, value) in [
                (&lag_records, partition.lag_offsets),
                (&log_end, Some(partition.log_end_offset)),
                (&last_mirrored, partition.last_mirrored_offset),
                (&source_lso, partition.source_last_stable_offset),
            ] {
                if let Some(value) = value {
                    family.get_or_create(&labels).set(value);
                }
            }
            if let Some(lag_ms) = partition.lag_ms {
                // Milliseconds to seconds, Prometheus's base unit; exact for any lag below 2^53 ms.
                #[allow(clippy::cast_precision_loss)]
                lag_seconds.get_or_create(&labels).set(lag_ms as f64 / 1000.0);
            }
            for (family, value) in [
                (&truncations, partition.truncations),
                (&offsets_mirrored, partition.offsets_mirrored),
                (&batches_mirrored, partition.batches_mirrored),
                (&retries, partition.retries),
                (&bytes_fetched, partition.bytes_fetched),
                (&offsets_fetched, partition.offsets_fetched),
                (&bytes_mirrored, partition.bytes_mirrored),
            ] {
                family.get_or_create(&labels).inc_by(value);
            }
            for (error, count) in &partition.failed_rounds_by_error {
                failed_rounds
                    .get_or_create(&PartitionErrorLabels {
                        link: link.name.clone(),
                        topic: partition.topic.clone(),
                        partition: partition.partition,
                        error: error.clone(),
                    })
                    .inc_by(*count);
            }
        }
    }
    registry.register(
        "mirror_partition_state",
        "1 for the state a mirrored partition is in, 0 for the others",
        state,
    );
    registry.register(
        "mirror_partition_lag_records",
        "Offsets the mirror is behind its source's last stable offset (absent until the source answered)",
        lag_records,
    );
    registry.register(
        "mirror_partition_lag_seconds",
        "How long the mirror has been behind its source's last stable offset (0 when caught up)",
        lag_seconds,
    );
    registry.register(
        "mirror_partition_log_end_offset",
        "Where the mirrored partition's log ends here",
        log_end,
    );
    registry.register(
        "mirror_partition_last_mirrored_offset",
        "The last offset mirrored (the log end while mirroring, the cut once stopped)",
        last_mirrored,
    );
    registry.register(
        "mirror_partition_source_last_stable_offset",
        "The source's last stable offset in its latest answer",
        source_lso,
    );
    registry.register(
        "mirror_partition_truncations",
        "Times the partition's log was cut back since serve started (a new mirror's alignment counts once)",
        truncations,
    );
    registry.register(
        "mirror_partition_offsets_mirrored",
        "Offsets written by the mirror since serve started (records and transaction markers)",
        offsets_mirrored,
    );
    registry.register(
        "mirror_partition_batches_mirrored",
        "Batches written by the mirror since serve started",
        batches_mirrored,
    );
    registry.register(
        "mirror_partition_failed_rounds",
        "Rounds of the partition that failed since serve started, by why (a retry that fails again counts again)",
        failed_rounds,
    );
    registry.register(
        "mirror_partition_retries",
        "Times the partition was retried once FAILED since serve started",
        retries,
    );
    registry.register(
        "mirror_partition_fetched_bytes",
        "Bytes of the batches the source answered since serve started",
        bytes_fetched,
    );
    registry.register(
        "mirror_partition_offsets_fetched",
        "Offsets the batches the source answered span since serve started (records and markers, written or not)",
        offsets_fetched,
    );
    registry.register(
        "mirror_partition_mirrored_bytes",
        "Bytes of the batches written by the mirror since serve started",
        bytes_mirrored,
    );
    registry.register(
        "mirror_link_partitions",
        "A link's partitions, by state",
        by_state,
    );
    registry.register(
        "mirror_link_warnings",
        "What a link found at its source and cannot follow (describe's warnings)",
        warnings,
    );
    registry.register(
        "mirror_link_topics_discovered",
        "Source topics the link's include patterns added since serve started",
        topics_discovered,
    );
    registry.register(
        "mirror_link_config_changes",
        "Times a mirror topic's configs changed to follow its source topic's since serve started",
        config_changes,
    );
    registry.register(
        "mirror_link_acls_created",
        "ACLs the link created here from its source's since serve started",
        acls_created,
    );
    registry.register(
        "mirror_link_acls_deleted",
        "ACLs the link created and deleted here once no longer at its source (or selected) since serve started",
        acls_deleted,
    );
    registry.register(
        "mirror_link_last_check_timestamp_seconds",
        "When the link's last source check (partition counts, configs, topics by pattern, ACLs) was applied",
        last_check,
    );
}
