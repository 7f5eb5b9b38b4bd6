//! `mirrorlog serve`: a Kafka wire-protocol broker over the partition log, producer state and the transaction
//! coordinator, so that real Kafka clients (librdkafka, kafka-python) can produce idempotently and
//! transactionally and consume with either isolation level against mirrorlog.
//!
//! One broker, node 0, leads every partition (one replica: the high watermark follows the log end once the
//! records are as durable as the storage config says). Frames and message codecs come from `kafka-protocol`;
//! record batches stay raw bytes and go through `record-format` and `partition-log`.
//!
//! - [`server`] — accept loop, connections (requests answered in order), housekeeping, graceful shutdown.
//! - [`frame`] — Kafka's framing and request headers, bounded by `max_request_bytes`.
//! - [`shape`] — the layout check every request body passes before it is decoded (`kafka-protocol` allocates
//!   from unchecked array counts; the crate `kafka-shape`, shared with the mirror link's responses).
//! - [`versions`] — the advertised API versions.
//! - `api` — one handler per API.
//! - [`broker`] — topics, partition logs, the coordinator, markers, housekeeping.
//! - [`offsets`] — the group offset store (OffsetCommit, OffsetFetch, TxnOffsetCommit).
//!
//! There is no authentication and no TLS: the broker listens on loopback unless told otherwise.

mod api;
pub mod broker;
pub mod config;
mod error;
pub mod frame;
pub mod offsets;
pub mod server;
/// The shape check every request body passes before it is decoded (`kafka-shape`).
pub use kafka_shape as shape;
pub mod versions;

pub use api::{decode, handle, Decoded, Reply, RequestError};
pub use broker::Broker;
pub use config::{BrokerConfig, Faults};
pub use error::BrokerError;
pub use server::Server;

/// Milliseconds since the Unix epoch (the clock producer state and the coordinator are given).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        })
}
