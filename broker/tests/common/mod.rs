//! Helpers of the broker's integration tests: a produce request over a raw connection, and a request sent through
//! the broker's dispatch with its answer decoded as a client reads it.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::time::{Duration, Instant};

pub mod mirror;
pub mod pki;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use record_format::BatchBuilder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An in-process broker over memory storage holding `topics` (name, partitions), without auto-creation.
pub async fn memory_broker(topics: &[(&str, u32)]) -> broker::Node {
    memory_broker_with(topics, |_| {}).await
}

/// [`memory_broker`], its config changed by `adjust` before it opens.
pub async fn memory_broker_with(
    topics: &[(&str, u32)],
    adjust: impl FnOnce(&mut broker::NodeConfig),
) -> broker::Node {
    let storage =
        storage_config::StorageConfig::for_backend(storage_config::Backend::Memory, std::path::Path::new(""));
    let mut config = broker::NodeConfig::new(storage.clone());
    config.topics = topics
        .iter()
        .map(|(name, partitions)| ((*name).to_owned(), *partitions))
        .collect();
    config.auto_create_topics = false;
    adjust(&mut config);
    broker::Node::open_on(
        config,
        ("127.0.0.1".to_owned(), 9092),
        storage.open().expect("store"),
        std::sync::Arc::new(node::SystemClock),
    )
    .await
    .expect("broker")
}

/// One record, as a client batch.
pub fn valid_batch() -> Bytes {
    let mut builder = BatchBuilder::new();
    builder.add(0, None, Some(b"value"), &[]);
    builder.build().expect("batch").into_bytes()
}

fn produce_frame(correlation_id: i32, topic_name: &str, partitions: &[(i32, Bytes)]) -> Bytes {
    let mut topic = produce_request::TopicProduceData::default();
    topic.name = TopicName(StrBytes::from_string(topic_name.to_owned()));
    topic.partition_data = partitions
        .iter()
        .map(|(partition, records)| {
            let mut data = produce_request::PartitionProduceData::default();
            data.index = *partition;
            data.records = Some(records.clone());
            data
        })
        .collect();
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 30_000;
    request.topic_data = vec![topic];
    let mut body = BytesMut::new();
    body.put_i16(ApiKey::Produce as i16);
    body.put_i16(8);
    body.put_i32(correlation_id);
    body.put_i16(-1);
    request.encode(&mut body, 8).expect("encode");
    let mut frame = BytesMut::new();
    frame.put_i32(body.len() as i32);
    frame.put_slice(&body);
    frame.freeze()
}

/// Produces `records` (acks=-1) to `orders`/`partition` on a new connection: the partition's error code and the
/// round-trip time.
pub async fn produce(address: std::net::SocketAddr, partition: i32, records: Bytes) -> (i16, Duration) {
    produce_to(address, "orders", partition, records).await
}

/// Produces `records` (acks=-1) to `topic`/`partition` on a new connection: the partition's error code and the
/// round-trip time.
pub async fn produce_to(
    address: std::net::SocketAddr,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> (i16, Duration) {
    let (errors, elapsed) = produce_partitions(address, topic, &[(partition, records)]).await;
    (errors[0], elapsed)
}

/// Produces to several partitions of `topic` in one request (acks=-1) on a new connection: each partition's
/// error code, in request order, and the round-trip time.
#[allow(dead_code)] // not every test binary produces to several partitions
pub async fn produce_partitions(
    address: std::net::SocketAddr,
    topic: &str,
    partitions: &[(i32, Bytes)],
) -> (Vec<i16>, Duration) {
    let started = Instant::now();
    let mut stream = TcpStream::connect(address).await.expect("connect");
    stream
        .write_all(&produce_frame(1, topic, partitions))
        .await
        .expect("write");
    let size = stream.read_i32().await.expect("size");
    let mut body = vec![0u8; size as usize];
    stream.read_exact(&mut body).await.expect("body");
    let mut body = Bytes::from(body).slice(4..);
    let response = ProduceResponse::decode(&mut body, 8).expect("response");
    let errors = response.responses[0]
        .partition_responses
        .iter()
        .map(|answer| answer.error_code)
        .collect();
    (errors, started.elapsed())
}

/// Sends `request` at `version` through the broker's dispatch and decodes the answer as a client would; `None`
/// when the broker answers nothing (acks=0). Panics, naming the pair, when the response cannot be encoded or read.
pub async fn call<Q, A>(broker: &broker::Node, key: ApiKey, version: i16, request: &Q) -> Option<A>
where
    Q: Encodable,
    A: Decodable,
{
    call_as(broker, &broker::Caller::anonymous(broker), key, version, request).await
}

/// [`call`] from `caller` (its principal and the broker's authorizer).
pub async fn call_as<Q, A>(
    broker: &broker::Node,
    caller: &broker::Caller,
    key: ApiKey,
    version: i16,
    request: &Q,
) -> Option<A>
where
    Q: Encodable,
    A: Decodable,
{
    let mut body = BytesMut::new();
    request
        .encode(&mut body, version)
        .unwrap_or_else(|error| panic!("the test's {key:?} v{version} request does not encode: {error}"));
    let frame = broker::frame::Request {
        api_key: key as i16,
        version,
        correlation_id: 7,
        client_id: Some("every-version".to_owned()),
        body: body.freeze(),
    };
    let reply = broker::handle_from(broker, &frame, caller)
        .await
        .unwrap_or_else(|error| panic!("{key:?} v{version}: {error}"));
    let broker::Reply::Frame(bytes, _) = reply else {
        return None;
    };
    let mut rest: Bytes = bytes.slice(8..);
    if key.response_header_version(version) >= 1 {
        // The response header's tagged-field section: the broker writes none.
        assert_eq!(rest.first(), Some(&0), "{key:?} v{version}: response header tags");
        rest = rest.slice(1..);
    }
    let answer = A::decode(&mut rest, version)
        .unwrap_or_else(|error| panic!("{key:?} v{version}: the response does not decode: {error}"));
    assert!(
        rest.is_empty(),
        "{key:?} v{version}: {} bytes after the response",
        rest.len()
    );
    Some(answer)
}

/// A bound broker serving in a task of the test's runtime until [`Serving::shutdown`].
pub struct Serving {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), broker::BrokerError>>,
}

impl Serving {
    /// Runs `server` until [`Self::shutdown`].
    pub fn run(server: broker::Server) -> Self {
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        Serving {
            stop: Some(stop),
            task,
        }
    }

    /// Stops the broker and checks it shut down cleanly within 10 s.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("graceful shutdown within 10 s")
            .expect("server task");
        result.expect("clean close");
    }
}
