//! Mirror links isolated from one another (issue 50, item 4; ADR 0049): a `serve` destination mirrors one topic
//! from a healthy source and one from a source behind a proxy that holds every answer for seconds. While that
//! source is slow, the healthy link's records arrive in well under its delay, and `describe` and `list` answer in
//! well under it too: rounds stay in flight, and a step never waits for a source. The slow link still delivers.
//! When the source stops answering altogether, its partition fails with a message and the healthy link still goes
//! on; once the proxy passes answers again a probe sees it, the partition is retried, and both mirrors are
//! byte-identical to their sources.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use std::sync::atomic::{AtomicU64, Ordering};
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
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How long the slow source's proxy holds each answer.
const SLOW: Duration = Duration::from_secs(4);

fn config(dir: &std::path::Path, cluster_id: &str, topics: &[(&str, u32)]) -> NodeConfig {
    let mut config = NodeConfig::new(StorageConfig::for_backend(Backend::Fs, dir));
    config.cluster_id = cluster_id.to_owned();
    config.topics = topics.iter().map(|(name, n)| ((*name).to_owned(), *n)).collect();
    config
}

/// A `serve` node on an ephemeral loopback port, advertising `advertised` when given (else its own address): its
/// address, its node, what stops it and its task.
async fn serve(
    node: NodeConfig,
    advertised: Option<std::net::SocketAddr>,
) -> (
    String,
    Arc<Node>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let mut config = BrokerConfig::new("127.0.0.1:0".parse().unwrap(), node.storage.clone());
    config.advertised = advertised.map(|address| (address.ip().to_string(), address.port()));
    config.node = node;
    serve_with(config).await
}

/// A `serve` broker as `config` says; see [`serve`].
async fn serve_with(
    config: BrokerConfig,
) -> (
    String,
    Arc<Node>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let server = Server::bind(config).await.unwrap();
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
    (address, node, stop, running)
}

/// A TCP proxy on `listener` to `upstream` that holds every chunk of the upstream's answers for the delay in
/// `delay_ms` (read at each chunk, so it can change while connections are open).
fn delaying_proxy(listener: TcpListener, upstream: String, delay_ms: Arc<AtomicU64>) {
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(&upstream).await else {
                continue;
            };
            let (mut client_read, mut client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
            });
            let delay_ms = Arc::clone(&delay_ms);
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 64 << 10];
                loop {
                    let read = match server_read.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => read,
                    };
                    let delay = delay_ms.load(Ordering::Relaxed);
                    if delay > 0 {
                        tokio::time::sleep(Duration::from_millis(delay)).await;
                    }
                    if client_write.write_all(&buffer[..read]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
}

/// Produces one batch of `count` records to partition 0 of `topic`; the error code.
async fn produce(node: &Node, topic: &str, count: usize) -> i16 {
    let mut builder = BatchBuilder::new();
    for index in 0..count {
        builder.add(0, None, Some(format!("record {index}").as_bytes()), &[]);
    }
    let mut data = PartitionProduceData::default();
    data.index = 0;
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

/// Partition 0 of `topic`: its log end.
async fn log_end(node: &Node, topic: &str) -> i64 {
    let slot = node.partition(topic, 0).await.unwrap();
    let guard = slot.lock().await;
    guard.as_ref().unwrap().leader.log_end_offset()
}

/// Every batch of partition 0 of `topic`, as bytes.
async fn log_bytes(node: &Node, topic: &str) -> Vec<bytes::Bytes> {
    let slot = node.partition(topic, 0).await.unwrap();
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

async fn admin(address: &str, request: AdminRequest) -> AdminResponse {
    broker::mirror::call(address, &request, Duration::from_secs(60))
        .await
        .unwrap()
}

async fn create(dest: &str, link: &str, source: &str, topic: &str) {
    let created = admin(
        dest,
        AdminRequest::Create {
            link: link.to_owned(),
            source: source.to_owned(),
            topics: vec![topic.to_owned()],
        },
    )
    .await;
    assert!(created.ok, "{created:?}");
}

/// Waits (polling, up to `within`) until `node`'s partition 0 of `topic` reaches `end`; how long it took.
async fn until_log_end(node: &Node, topic: &str, end: i64, within: Duration) -> Duration {
    let started = Instant::now();
    while log_end(node, topic).await < end {
        assert!(
            started.elapsed() < within,
            "{topic} did not reach offset {end} within {within:?} (it is at {})",
            log_end(node, topic).await
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    started.elapsed()
}

/// Five times: two records produced at the healthy source, how long they took to reach the destination, and how
/// long `describe` of each link and `list` took to answer there. `end` is the healthy topic's log end before.
async fn healthy_link_meanwhile(
    healthy: &Node,
    dest: &Node,
    dest_address: &str,
    end: i64,
) -> (Vec<Duration>, Vec<Duration>) {
    let mut arrivals = Vec::new();
    let mut answers = Vec::new();
    for round in 0..5 {
        assert_eq!(produce(healthy, "fast", 2).await, 0);
        let end = end + 2 * (round + 1);
        arrivals.push(until_log_end(dest, "fast", end, Duration::from_secs(60)).await);
        for request in [
            AdminRequest::Describe {
                link: "from-healthy".to_owned(),
                topics: Vec::new(),
            },
            AdminRequest::Describe {
                link: "from-slow".to_owned(),
                topics: Vec::new(),
            },
            AdminRequest::List,
        ] {
            let asked = Instant::now();
            let answer = admin(dest_address, request).await;
            answers.push(asked.elapsed());
            assert!(answer.ok, "{answer:?}");
        }
    }
    (arrivals, answers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_or_silent_source_delays_neither_another_links_records_nor_describe_and_list() {
    let dir = tempfile::tempdir().unwrap();
    let (healthy_address, healthy, stop_healthy, healthy_running) = serve(
        config(&dir.path().join("healthy"), "cluster-healthy", &[("fast", 1)]),
        None,
    )
    .await;
    // The slow source advertises its proxy, so every connection of the link to it goes through the proxy.
    let proxy_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_address = proxy_listener.local_addr().unwrap();
    let (slow_address, slow, stop_slow, slow_running) = serve(
        config(&dir.path().join("slow"), "cluster-slow", &[("slow", 1)]),
        Some(proxy_address),
    )
    .await;
    let delay_ms = Arc::new(AtomicU64::new(0));
    delaying_proxy(proxy_listener, slow_address, Arc::clone(&delay_ms));
    let proxy = proxy_address.to_string();
    let (dest_address, dest, stop_dest, dest_running) =
        serve(config(&dir.path().join("dest"), "cluster-dest", &[]), None).await;
    create(&dest_address, "from-healthy", &healthy_address, "fast").await;
    create(&dest_address, "from-slow", &proxy, "slow").await;
    assert_eq!(produce(&healthy, "fast", 3).await, 0);
    assert_eq!(produce(&slow, "slow", 3).await, 0);
    until_log_end(&dest, "fast", 3, Duration::from_secs(30)).await;
    until_log_end(&dest, "slow", 3, Duration::from_secs(30)).await;

    // Every answer read from here on is held, the one to the round now in flight included.
    delay_ms.store(SLOW.as_millis() as u64, Ordering::Relaxed);
    assert_eq!(produce(&slow, "slow", 1).await, 0);

    let (arrivals, answers) = healthy_link_meanwhile(&healthy, &dest, &dest_address, 3).await;
    let slowest_arrival = arrivals.iter().max().copied().unwrap_or_default();
    let slowest_answer = answers.iter().max().copied().unwrap_or_default();
    println!("slow source ({SLOW:?} per answer): arrivals {arrivals:?}, administration answers {answers:?}");
    // The slow source holds each answer for SLOW; a step that waited for it would show it here.
    assert!(
        slowest_arrival < SLOW / 2,
        "the healthy link's records took up to {slowest_arrival:?} to arrive while the other source took {SLOW:?} \
         per answer: {arrivals:?}"
    );
    assert!(
        slowest_answer < SLOW / 2,
        "describe and list took up to {slowest_answer:?} while a source took {SLOW:?} per answer: {answers:?}"
    );

    // The slow link still mirrors, at its source's pace.
    until_log_end(&dest, "slow", 4, Duration::from_secs(60)).await;

    // The source stops answering at all: its round times out and its partition fails, saying why, while the
    // healthy link goes on as before; its retries wait for probes, which run apart.
    delay_ms.store(3_600_000, Ordering::Relaxed);
    let failed_at = Instant::now();
    let failure = loop {
        let answer = admin(
            &dest_address,
            AdminRequest::Describe {
                link: "from-slow".to_owned(),
                topics: Vec::new(),
            },
        )
        .await;
        let partition = answer.links[0].partitions[0].clone();
        if partition.state == "FAILED" {
            break partition.error.unwrap_or_default();
        }
        assert!(failed_at.elapsed() < Duration::from_secs(60), "{answer:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!failure.is_empty(), "a FAILED partition says why");
    let (arrivals, answers) = healthy_link_meanwhile(&healthy, &dest, &dest_address, 13).await;
    println!("silent source: {failure}; arrivals {arrivals:?}, administration answers {answers:?}");
    let slowest = arrivals.iter().chain(&answers).max().copied().unwrap_or_default();
    assert!(
        slowest < SLOW / 2,
        "with a silent source, the healthy link and administration took up to {slowest:?}: {arrivals:?} {answers:?}"
    );

    // The source answers again: a probe sees it, the partition is retried and catches up; both mirrors are
    // byte-identical to their sources.
    delay_ms.store(0, Ordering::Relaxed);
    assert_eq!(produce(&slow, "slow", 2).await, 0);
    until_log_end(&dest, "slow", 6, Duration::from_secs(90)).await;
    assert_eq!(log_bytes(&dest, "fast").await, log_bytes(&healthy, "fast").await);
    assert_eq!(log_bytes(&dest, "slow").await, log_bytes(&slow, "slow").await);

    for (stop, running) in [
        (stop_dest, dest_running),
        (stop_slow, slow_running),
        (stop_healthy, healthy_running),
    ] {
        stop.send(()).unwrap();
        running.await.unwrap();
    }
}

/// A source that goes away (its port refuses connections) long enough for its partitions' backoff to grow, then
/// comes back on the same address with its data, less one topic another link mirrored (deleted while it was
/// down): a probe sees the source within its 2 s cap and the partition catches up; the deleted topic's link fails
/// alone, naming Kafka's error — whether a source answers is never judged by one of its topics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_comes_back_without_one_topic_is_mirrored_again_within_seconds() {
    let dir = tempfile::tempdir().unwrap();
    // "a-gone" sorts first: its partition is the first FAILED one a step looks at.
    let source_config = config(
        &dir.path().join("source"),
        "cluster-source",
        &[("fast", 1), ("a-gone", 1)],
    );
    let (source_address, source, stop_source, source_running) = serve(source_config.clone(), None).await;
    let (dest_address, dest, stop_dest, dest_running) =
        serve(config(&dir.path().join("dest"), "cluster-dest", &[]), None).await;
    create(&dest_address, "from-source", &source_address, "fast").await;
    create(&dest_address, "from-gone", &source_address, "a-gone").await;
    assert_eq!(produce(&source, "fast", 3).await, 0);
    until_log_end(&dest, "fast", 3, Duration::from_secs(30)).await;

    stop_source.send(()).unwrap();
    source_running.await.unwrap();
    drop(source);
    let state = |answer: AdminResponse| answer.links[0].partitions[0].clone();
    let describe = |link: &str| AdminRequest::Describe {
        link: link.to_owned(),
        topics: Vec::new(),
    };
    let started = Instant::now();
    while state(admin(&dest_address, describe("from-source")).await).state != "FAILED" {
        assert!(started.elapsed() < Duration::from_secs(30));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Away for 8 s: uncapped, the probes' backoff would have reached several seconds. Meanwhile an operator
    // deletes the other topic's partition.
    std::fs::remove_dir_all(dir.path().join("source").join("a-gone-0")).unwrap();
    tokio::time::sleep(Duration::from_secs(8)).await;

    let mut source_config = source_config;
    source_config.topics.retain(|(name, _)| name != "a-gone");
    let mut config = BrokerConfig::new(source_address.parse().unwrap(), source_config.storage.clone());
    config.node = source_config;
    let (_, source, stop_source, source_running) = serve_with(config).await;
    let back = Instant::now();
    assert_eq!(produce(&source, "fast", 2).await, 0);
    until_log_end(&dest, "fast", 5, Duration::from_secs(30)).await;
    println!("caught up {:?} after the source came back", back.elapsed());
    assert!(back.elapsed() < Duration::from_secs(10), "{:?}", back.elapsed());
    assert_eq!(log_bytes(&dest, "fast").await, log_bytes(&source, "fast").await);
    let gone = loop {
        let gone = state(admin(&dest_address, describe("from-gone")).await);
        if gone
            .error
            .as_deref()
            .is_some_and(|error| error.contains("UNKNOWN_TOPIC_OR_PARTITION"))
        {
            break gone;
        }
        assert!(back.elapsed() < Duration::from_secs(30), "{gone:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(gone.state, "FAILED", "{gone:?}");
    for (stop, running) in [(stop_dest, dest_running), (stop_source, source_running)] {
        stop.send(()).unwrap();
        running.await.unwrap();
    }
}
