//! A slow fsync on one partition holds back only that partition: a produce to another partition, on another
//! connection, is answered while the slow one is still syncing (storage calls run on the blocking pool and each
//! partition has its own lock).

use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use record_format::BatchBuilder;
use storage::PartitionId;
use storage_testkit::FaultyStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use broker::{BrokerConfig, Server};
use storage_config::StorageConfig;

const SLOW_SYNC: Duration = Duration::from_secs(2);

fn produce_frame(correlation_id: i32, partition: i32) -> Bytes {
    let mut builder = BatchBuilder::new();
    builder.add(0, None, Some(b"value"), &[]);
    let mut data = produce_request::PartitionProduceData::default();
    data.index = partition;
    data.records = Some(builder.build().expect("batch").into_bytes());
    let mut topic = produce_request::TopicProduceData::default();
    topic.name = TopicName(StrBytes::from_static_str("orders"));
    topic.partition_data = vec![data];
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

async fn produce(address: std::net::SocketAddr, partition: i32) -> (i16, Duration) {
    let started = Instant::now();
    let mut stream = TcpStream::connect(address).await.expect("connect");
    stream
        .write_all(&produce_frame(1, partition))
        .await
        .expect("write");
    let size = stream.read_i32().await.expect("size");
    let mut body = vec![0u8; size as usize];
    stream.read_exact(&mut body).await.expect("body");
    let mut body = Bytes::from(body).slice(4..);
    let response = ProduceResponse::decode(&mut body, 8).expect("response");
    (
        response.responses[0].partition_responses[0].error_code,
        started.elapsed(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_sync_on_one_partition_does_not_delay_another() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fs = storage_fs::FsStorage::open(storage_fs::FsConfig::new(dir.path())).expect("fs");
    let store = FaultyStore::new(fs);
    let faults = store.faults().clone();
    let mut config = BrokerConfig::new(
        "127.0.0.1:0".parse().expect("address"),
        StorageConfig::for_backend("fs", dir.path()).expect("config"),
    );
    config.topics = vec![("orders".to_owned(), 2)];
    let server = Server::bind_on(config, Box::new(store)).await.expect("bind");
    let address = server.local_addr().expect("address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));

    faults.delay_syncs(&PartitionId::new("orders", 0).expect("id"), SLOW_SYNC);
    let slow = tokio::spawn(produce(address, 0));
    tokio::time::sleep(Duration::from_millis(200)).await; // the slow produce is in its sync now
    let (fast_error, fast_latency) = produce(address, 1).await;
    assert_eq!(fast_error, 0);
    assert!(
        fast_latency < Duration::from_millis(1000),
        "the other partition waited {fast_latency:?} behind a {SLOW_SYNC:?} sync"
    );
    let (slow_error, slow_latency) = slow.await.expect("slow produce");
    assert_eq!(slow_error, 0);
    assert!(
        slow_latency >= SLOW_SYNC,
        "the fault did not slow the first partition ({slow_latency:?})"
    );

    let _ = stop.send(());
    task.await.expect("server task").expect("clean close");
}
