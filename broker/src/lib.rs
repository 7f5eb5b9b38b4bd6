//! `mirrorlog serve`: the wire front end of a [`Node`] (crate `node`), so that real Kafka clients (librdkafka,
//! kafka-python, the Java client, …) can produce idempotently and transactionally and consume with either
//! isolation level against mirrorlog.
//!
//! The node, node 0, leads every partition (one replica: the high watermark follows the log end once the
//! records are as durable as the storage config says) and answers request values; this crate reads frames,
//! checks and decodes requests at the versions it advertises, and encodes the node's answers. Message codecs come
//! from `kafka-protocol`; record batches stay raw bytes and go through `record-format` and `partition-log`.
//!
//! - [`server`] — accept loop, connections (requests answered in order), housekeeping, graceful shutdown.
//! - [`frame`] — Kafka's framing and request headers, bounded by `max_request_bytes`.
//! - [`shape`] — the layout check every request body passes before it is decoded (`kafka-protocol` allocates
//!   from unchecked array counts; the crate `kafka-shape`, shared with the mirror link's responses).
//! - [`versions`] — the advertised API versions.
//! - [`mirror`] — the node's mirror links on their own thread, and mirror administration on a private API key.
//! - `api` — decoding, dispatch to the node, ApiVersions, the response frame.
//!
//! - [`listener`] — Kafka's listener URLs and security protocols; [`tls`] — rustls for SSL and SASL_SSL
//!   listeners and the principal of a client certificate; [`sasl`] — SaslHandshake / SaslAuthenticate with PLAIN
//!   and SCRAM against the node's stored credentials, nothing else served before authentication.
//!
//! - [`authorize`] — ACL authorization of every API before the node (`serve --authorizer acl`, ADR 0057).
//! - [`metrics`] — the Prometheus endpoint (`serve --metrics-listen`, ADR 0058): requests, latency, bytes,
//!   connections, and every mirrored partition's state and lag.

mod api;
pub mod authorize;
pub mod config;
mod error;
pub mod frame;
pub mod listener;
pub mod metrics;
pub mod mirror;
pub mod sasl;
pub mod server;
pub mod tls;
/// The shape check every request body passes before it is decoded (`kafka-shape`).
pub use kafka_shape as shape;
pub mod versions;

pub use api::{decode, handle, handle_from, Caller, Decoded, Reply, RequestError};
pub use config::{BrokerConfig, Faults};
pub use error::BrokerError;
pub use listener::{ListenerConfig, SecurityProtocol};
pub use node::{Node, NodeConfig};
pub use sasl::SaslMechanism;
pub use server::Server;
pub use tls::TlsConfig;
