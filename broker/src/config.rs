//! What a broker is started with: the node's settings and the wire front end's own.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kafka_auth::acl::AuthorizerConfig;
use node::NodeConfig;

use crate::listener::ListenerConfig;
use crate::sasl::SaslMechanism;
use crate::tls::TlsConfig;
use storage_config::StorageConfig;

/// A broker's settings; [`BrokerConfig::new`] gives Kafka's defaults where Kafka has one.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Where to listen and how (Kafka's `listeners` and `advertised.listeners`): one listener per security
    /// protocol at most, the first answering requests that name no listener.
    pub listeners: Vec<ListenerConfig>,
    /// The certificate and key of SSL and SASL_SSL listeners, and the CA of client certificates.
    pub tls: Option<TlsConfig>,
    /// The mechanisms SASL listeners offer (Kafka's `sasl.enabled.mechanisms`; all three by default).
    pub sasl_mechanisms: Vec<SaslMechanism>,
    /// How long a connection may take to finish its TLS handshake and SASL authentication before it is closed.
    pub authentication_timeout: Duration,
    /// The ACL authorizer (Kafka's `authorizer.class.name` = `StandardAuthorizer`, with `super.users` and
    /// `allow.everyone.if.no.acl.found`); `None`: no authorizer, every request is allowed.
    pub authorizer: Option<Arc<AuthorizerConfig>>,
    /// The node behind the listener: cluster id, storage, topics, Kafka's broker settings.
    pub node: NodeConfig,
    /// The largest request accepted (`socket.request.max.bytes`); a larger frame closes the connection.
    pub max_request_bytes: usize,
    /// How often timed-out transactions are aborted and idle ids expired
    /// (`transaction.abort.timed.out.transaction.cleanup.interval.ms`, scaled down).
    pub housekeeping_interval: Duration,
    /// How long the log cleaner waits between rounds of compaction passes (`log.cleaner.backoff.ms`; 15 s).
    pub cleaner_backoff: Duration,
    /// How often retention deletes what topics no longer keep (`log.retention.check.interval.ms`; 5 minutes).
    pub retention_check_interval: Duration,
    /// How often mirror links compare their topics with the source's and add the partitions the source gained
    /// (KIP-1279's `mirror.metadata.refresh.interval.ms`; 30 s).
    pub mirror_metadata_refresh: Duration,
    /// Where the Prometheus metrics endpoint listens (`serve --metrics-listen`; `None`: no endpoint).
    pub metrics_listen: Option<SocketAddr>,
    /// Test-only faults.
    pub faults: Faults,
}

/// Faults a test switches on (`mirrorlog serve --fault-…`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Faults {
    /// The fraction (0.0–1.0) of produce requests whose records are appended but whose response is lost: the
    /// connection closes instead of answering, as when an acknowledgement is lost on the network.
    pub drop_produce_responses: f64,
    /// A pause after each step of a mirror failover's STOPPING, so a test can kill the process in the middle.
    pub stopping_step_pause: Option<Duration>,
}

impl BrokerConfig {
    /// A broker with one PLAINTEXT listener on `listen` over `storage`, with Kafka's defaults.
    pub fn new(listen: SocketAddr, storage: StorageConfig) -> Self {
        BrokerConfig {
            listeners: vec![ListenerConfig::plaintext(listen)],
            tls: None,
            sasl_mechanisms: SaslMechanism::ALL.to_vec(),
            authentication_timeout: Duration::from_secs(10),
            authorizer: None,
            node: NodeConfig::new(storage),
            max_request_bytes: 100 << 20,
            housekeeping_interval: Duration::from_secs(10),
            retention_check_interval: Duration::from_secs(300),
            cleaner_backoff: Duration::from_secs(15),
            mirror_metadata_refresh: Duration::from_millis(
                node::mirror::source_topics::SOURCE_TOPIC_CHECK_INTERVAL_MS.unsigned_abs(),
            ),
            metrics_listen: None,
            faults: Faults::default(),
        }
    }
}
