//! Helpers of the mirror links' integration tests: `serve` brokers on loopback, records produced straight into a
//! node, a partition's log end and bytes, and the administration requests `mirrorlog mirror` sends.

use std::sync::Arc;
use std::time::{Duration, Instant};

use broker::{BrokerConfig, Server};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use node::mirror::{AdminRequest, AdminResponse};
use node::{Node, NodeConfig};
use record_format::{BatchBuilder, RecordBatch};
use storage_config::{Backend, StorageConfig};

/// A node on the fs backend under `dir`, named `cluster_id`, with `topics` (name, partitions).
pub fn config(dir: &std::path::Path, cluster_id: &str, topics: &[(&str, u32)]) -> NodeConfig {
    let mut config = NodeConfig::new(StorageConfig::for_backend(Backend::Fs, dir));
    config.cluster_id = cluster_id.to_owned();
    config.topics = topics.iter().map(|(name, n)| ((*name).to_owned(), *n)).collect();
    config
}

/// A running `serve` broker: its address, its node, what stops it and its task.
pub type Serving = (
    String,
    Arc<Node>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
);

/// A `serve` node on an ephemeral loopback port, advertising `advertised` when given (else its own address).
pub async fn serve(node: NodeConfig, advertised: Option<std::net::SocketAddr>) -> Serving {
    let mut config = BrokerConfig::new("127.0.0.1:0".parse().unwrap(), node.storage.clone());
    config.listeners[0].advertised = advertised.map(|address| (address.ip().to_string(), address.port()));
    config.node = node;
    serve_with(config).await
}

/// A `serve` broker as `config` says; see [`serve`].
pub async fn serve_with(config: BrokerConfig) -> Serving {
    serve_with_metrics(config).await.0
}

/// A `serve` broker as `config` says, and the address its metrics endpoint bound (`config.metrics_listen`).
pub async fn serve_with_metrics(config: BrokerConfig) -> (Serving, Option<std::net::SocketAddr>) {
    let server = Server::bind(config).await.unwrap();
    let metrics = server.metrics_addr();
    let address = server.local_addr().unwrap().to_string();
    let node = server.node().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        server
            .run(async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    ((address, node, stop, running), metrics)
}

/// Stops every broker of `running`, in order, and waits for each.
pub async fn stop_all(running: Vec<(tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>)>) {
    for (stop, task) in running {
        stop.send(()).unwrap();
        task.await.unwrap();
    }
}

/// Produces one batch of `count` records to `partition` of `topic`; the error code.
pub async fn produce_records(node: &Node, topic: &str, partition: i32, count: usize) -> i16 {
    let mut builder = BatchBuilder::new();
    for index in 0..count {
        builder.add(0, None, Some(format!("record {index}").as_bytes()), &[]);
    }
    let mut data = PartitionProduceData::default();
    data.index = partition;
    data.records = Some(builder.build().unwrap().into_bytes());
    let mut produced = TopicProduceData::default();
    produced.name = TopicName(StrBytes::from_string(topic.to_owned()));
    produced.partition_data = vec![data];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 10_000;
    request.topic_data = vec![produced];
    let response = node.produce(request, 8).await;
    response.responses[0].partition_responses[0].error_code
}

/// `partition` of `topic`: its log end.
pub async fn log_end(node: &Node, topic: &str, partition: i32) -> i64 {
    let slot = node.partition(topic, partition).await.unwrap();
    let guard = slot.lock().await;
    guard.as_ref().unwrap().leader.log_end_offset()
}

/// `partition` of `topic`: how many times its leader log was truncated since it opened.
pub async fn truncations(node: &Node, topic: &str, partition: i32) -> u64 {
    let slot = node.partition(topic, partition).await.unwrap();
    let guard = slot.lock().await;
    guard.as_ref().unwrap().leader.truncations()
}

/// Every batch of `partition` of `topic`, as bytes.
pub async fn log_bytes(node: &Node, topic: &str, partition: i32) -> Vec<bytes::Bytes> {
    let slot = node.partition(topic, partition).await.unwrap();
    let guard = slot.lock().await;
    let log = &guard.as_ref().unwrap().leader;
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let batches = log.read_for_replica(offset, 1 << 20).await.unwrap();
        let Some(last) = batches.last() else { break };
        offset = last.next_offset();
        out.extend(batches.into_iter().map(RecordBatch::into_bytes));
    }
    out
}

/// Sends `request` to the administration listener at `address`, as `mirrorlog mirror` does.
pub async fn admin(address: &str, request: AdminRequest) -> AdminResponse {
    mirror_link::admin::call(
        address,
        &request,
        Duration::from_secs(60),
        &mirror_link::ClientSecurity::plaintext(),
    )
    .await
    .unwrap()
}

/// Creates link `link` at `dest` mirroring `topic` from `source`; panics when refused.
pub async fn create(dest: &str, link: &str, source: &str, topic: &str) {
    let created = admin(
        dest,
        AdminRequest::Create {
            link: link.to_owned(),
            source: source.to_owned(),
            topics: vec![topic.to_owned()],
            source_config: Default::default(),
            include: Vec::new(),
            exclude: Vec::new(),
        },
    )
    .await;
    assert!(created.ok, "{created:?}");
}

/// Waits (polling, up to `within`) until `node`'s `partition` of `topic` reaches `end`; how long it took.
pub async fn until_log_end(node: &Node, topic: &str, partition: i32, end: i64, within: Duration) -> Duration {
    let started = Instant::now();
    while log_end(node, topic, partition).await < end {
        assert!(
            started.elapsed() < within,
            "{topic}-{partition} did not reach offset {end} within {within:?} (it is at {})",
            log_end(node, topic, partition).await
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    started.elapsed()
}
