//! The source side of a mirror link over the Kafka protocol (issue 35, item 1): [`KafkaFetcher`] implements
//! `mirror-fsm`'s [`Fetcher`](mirror_fsm::Fetcher) for one partition of any Kafka-compatible cluster —
//! `mirrorlog serve` or Apache Kafka — so a `MirrorDriver` copies it batch for batch.
//!
//! - [`bootstrap`] — a source's address list (`host:port[,host:port…]`, as `bootstrap.servers`) and Metadata
//!   from whichever of its brokers answers.
//! - [`connection`] — [`KafkaConnection`]: one TCP connection to a broker, requests framed and answered in
//!   order, every response's size checked against a bound before a byte of it is read into memory, every call
//!   under a timeout.
//! - [`cluster`] — [`SourceCluster`]: the connections to one source, one per source broker, shared by every
//!   partition mirrored from it; a session (ApiVersions, Metadata — the source's cluster id, checked by the
//!   machine on every fetch — and the partitions' leaders); one Fetch per broker for many partitions.
//! - [`fetcher`] — [`KafkaFetcher`]: one partition over a [`SourceCluster`], fetched as a consumer at
//!   `read_committed` (so no further than the source's last stable offset, ADR 0009), batches kept as the source
//!   stored them (their CRCs
//!   are checked by the machine, never re-encoded), a partial trailing batch dropped, batches wholly before the
//!   requested offset skipped; errors classified as retryable (the connection, leadership) or not (corrupt bytes,
//!   an offset the source no longer has).
//! - [`sources`] — [`KafkaSources`]: `mirror-fsm`'s [`Sources`](mirror_fsm::Sources) over the protocol, what a
//!   node's mirror links use to describe a source (its cluster id, partition counts) and fetch from it.
//! - `configs` — a source topic's overrides (DescribeConfigs), which a link takes for its mirror topic.
//! - `acls` — a source's ACLs (DescribeAcls), which a link's ACL rules sync.
//! - [`admin`] — [`admin::call`]: one mirror administration request to a broker, as `mirrorlog mirror` sends it.
//! - [`peer`] — the last mirrored offset a mirrorlog source recorded for us (failback alignment), asked on its
//!   private administration key; a source that is not mirrorlog counts as never having mirrored from us.
//! - [`security`] — [`ClientSecurity`]: TLS and SASL (PLAIN, SCRAM) to a secured broker, from a Kafka client
//!   properties file; [`KafkaConnection::connect_secured`] runs the handshakes.
//! - [`error`] — [`LinkError`].
//!
//! Every response is walked by `kafka_shape::check_response` before `kafka-protocol` decodes it: a source that
//! announces two billion topics in a few bytes is refused, not allocated for.
//!
//! What it does not do yet: fetch sessions (KIP-227; every fetch is a full one).

pub(crate) mod acls;
pub mod admin;
pub mod bootstrap;
pub mod cluster;
pub(crate) mod configs;
pub mod connection;
pub mod error;
pub mod fetcher;
pub mod peer;
pub mod security;
pub mod sources;

pub use cluster::SourceCluster;
pub use connection::KafkaConnection;
pub use error::LinkError;
pub use fetcher::{FetcherConfig, KafkaFetcher};
pub use security::ClientSecurity;
pub use sources::KafkaSources;
