//! What a broker is started with.

use std::net::SocketAddr;
use std::time::Duration;

use storage_config::StorageConfig;

/// A broker's settings; [`BrokerConfig::new`] gives Kafka's defaults where Kafka has one.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Where to listen (loopback by default: there is no authentication and no TLS).
    pub listen: SocketAddr,
    /// The cluster id Metadata answers.
    pub cluster_id: String,
    /// The storage backend and its data directory.
    pub storage: StorageConfig,
    /// Create a topic a Metadata request names when it does not exist (`auto.create.topics.enable`).
    pub auto_create_topics: bool,
    /// Partitions of an auto-created topic (`num.partitions`).
    pub default_partitions: u32,
    /// Topics to create at start-up when missing: `(name, partitions)`.
    pub topics: Vec<(String, u32)>,
    /// The largest request accepted (`socket.request.max.bytes`); a larger frame closes the connection.
    pub max_request_bytes: usize,
    /// `transactional.id.expiration.ms`.
    pub transactional_id_expiration_ms: i64,
    /// `transaction.max.timeout.ms`.
    pub max_transaction_timeout_ms: i64,
    /// `producer.id.expiration.ms` (idempotent producers' state in each partition).
    pub producer_id_expiration_ms: i64,
    /// How often timed-out transactions are aborted and idle ids expired
    /// (`transaction.abort.timed.out.transaction.cleanup.interval.ms`, scaled down).
    pub housekeeping_interval: Duration,
    /// Test-only faults.
    pub faults: Faults,
}

/// Faults a test switches on (`mirrorlog serve --fault-…`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Faults {
    /// The fraction (0.0–1.0) of produce requests whose records are appended but whose response is lost: the
    /// connection closes instead of answering, as when an acknowledgement is lost on the network.
    pub drop_produce_responses: f64,
}

impl BrokerConfig {
    /// A broker on `listen` over `storage`, with Kafka's defaults.
    pub fn new(listen: SocketAddr, storage: StorageConfig) -> Self {
        BrokerConfig {
            listen,
            cluster_id: "mirrorlog".to_owned(),
            storage,
            auto_create_topics: true,
            default_partitions: 1,
            topics: Vec::new(),
            max_request_bytes: 100 << 20,
            transactional_id_expiration_ms: 604_800_000,
            max_transaction_timeout_ms: 900_000,
            producer_id_expiration_ms: 86_400_000,
            housekeeping_interval: Duration::from_secs(10),
            faults: Faults::default(),
        }
    }
}
