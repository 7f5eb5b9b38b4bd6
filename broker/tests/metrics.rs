//! The Prometheus endpoint (`serve --metrics-listen`, issue 53 item 7, ADR 0058), scraped as Prometheus scrapes
//! it and read with a Prometheus text parser: a destination mirroring two partitions shows each one's state and
//! lag, the lag falls to 0 once the mirror has caught up, rises while the link is paused and the source written,
//! and falls to 0 again on resume; a link's counters count the topics its patterns added and the configs it
//! followed; the request counters count what clients sent by API and version, and a path
//! other than `/metrics` is a 404. A client sending API keys and versions nobody serves adds
//! one label set, not one per key.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use std::collections::HashMap;
use std::time::{Duration, Instant};

mod common;

use broker::BrokerConfig;
use common::mirror::*;
use node::mirror::AdminRequest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One HTTP/1.1 exchange; the status code and the body.
async fn http_get(address: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_owned())
}

/// A scrape, parsed: each sample's value by its name and labels (`name{a="x",b="y"}`, labels sorted).
async fn scrape(address: std::net::SocketAddr) -> HashMap<String, f64> {
    let (status, body) = http_get(address, "/metrics").await;
    assert_eq!(status, 200, "{body}");
    let lines = body.lines().map(|line| Ok(line.to_owned()));
    let parsed = prometheus_parse::Scrape::parse(lines).unwrap();
    parsed
        .samples
        .into_iter()
        .filter_map(|sample| {
            let value = match sample.value {
                prometheus_parse::Value::Counter(value)
                | prometheus_parse::Value::Gauge(value)
                | prometheus_parse::Value::Untyped(value) => value,
                _ => return None,
            };
            let mut labels: Vec<(String, String)> = sample
                .labels
                .iter()
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            labels.sort();
            let labels: Vec<String> = labels
                .into_iter()
                .map(|(key, value)| format!("{key}=\"{value}\""))
                .collect();
            Some((format!("{}{{{}}}", sample.metric, labels.join(",")), value))
        })
        .collect()
}

/// Scrapes (polling) until `done` holds, up to 30 s; that scrape.
async fn until_scraped(
    address: std::net::SocketAddr,
    done: impl Fn(&HashMap<String, f64>) -> bool,
) -> HashMap<String, f64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let scraped = scrape(address).await;
        if done(&scraped) {
            return scraped;
        }
        assert!(Instant::now() < deadline, "never so within 30 s: {scraped:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A destination `serve` under `dir` (cluster `cluster-b`) with its metrics endpoint on an ephemeral port.
async fn with_metrics(dir: &std::path::Path) -> (Serving, std::net::SocketAddr) {
    let node = config(dir, "cluster-b", &[]);
    let mut broker = BrokerConfig::new("127.0.0.1:0".parse().unwrap(), node.storage.clone());
    broker.node = node;
    broker.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let (serving, metrics) = serve_with_metrics(broker).await;
    (serving, metrics.unwrap())
}

/// Sends an administration request that must succeed.
async fn link_action(dest: &str, request: AdminRequest) {
    let answer = admin(dest, request).await;
    assert!(answer.ok, "{answer:?}");
}

fn partition_sample(name: &str, partition: i32) -> String {
    format!("{name}{{link=\"a-to-b\",partition=\"{partition}\",topic=\"orders\"}}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_shows_each_mirrored_partitions_state_and_a_lag_that_falls_to_zero() {
    let dir = tempfile::tempdir().unwrap();
    let (source_address, source, stop_source, source_running) =
        serve(config(&dir.path().join("a"), "cluster-a", &[("orders", 2)]), None).await;
    assert_eq!(produce_records(&source, "orders", 0, 5).await, 0);
    assert_eq!(produce_records(&source, "orders", 1, 3).await, 0);
    let ((dest_address, dest, stop_dest, dest_running), metrics) = with_metrics(&dir.path().join("b")).await;

    // Before any link: the broker's own metrics, no mirror samples.
    let before = scrape(metrics).await;
    assert_eq!(before["mirrorlog_connections{}"], 0.0, "{before:?}");
    assert!(!before
        .keys()
        .any(|key| key.starts_with("mirrorlog_mirror_partition")));

    create(&dest_address, "a-to-b", &source_address, "orders").await;
    until_log_end(&dest, "orders", 0, 5, Duration::from_secs(30)).await;
    until_log_end(&dest, "orders", 1, 3, Duration::from_secs(30)).await;
    // The lag is known once the source answered a round, and 0 once that round was written.
    let caught_up = until_scraped(metrics, |scraped| {
        (0..2).all(|p| {
            scraped.get(&partition_sample("mirrorlog_mirror_partition_lag_records", p)) == Some(&0.0)
        })
    })
    .await;
    for (partition, end) in [(0, 5.0), (1, 3.0)] {
        let sample = |name: &str| caught_up[&partition_sample(name, partition)];
        assert_eq!(sample("mirrorlog_mirror_partition_log_end_offset"), end);
        assert_eq!(
            sample("mirrorlog_mirror_partition_source_last_stable_offset"),
            end
        );
        assert_eq!(sample("mirrorlog_mirror_partition_lag_seconds"), 0.0);
        assert_eq!(sample("mirrorlog_mirror_partition_offsets_mirrored_total"), end);
        assert_eq!(sample("mirrorlog_mirror_partition_batches_mirrored_total"), 1.0);
        // Every byte the source answered was written, the log's bytes; no round failed, nothing was retried.
        let written: usize = log_bytes(&dest, "orders", partition)
            .await
            .iter()
            .map(|batch| batch.len())
            .sum();
        assert_eq!(
            sample("mirrorlog_mirror_partition_mirrored_bytes_total"),
            written as f64
        );
        assert_eq!(
            sample("mirrorlog_mirror_partition_fetched_bytes_total"),
            written as f64
        );
        assert_eq!(sample("mirrorlog_mirror_partition_retries_total"), 0.0);
        assert!(
            !caught_up
                .keys()
                .any(|key| key.starts_with("mirrorlog_mirror_partition_failed_rounds_total")),
            "{caught_up:?}"
        );
        let state = |state: &str| {
            caught_up[&format!(
                "mirrorlog_mirror_partition_state{{link=\"a-to-b\",partition=\"{partition}\",state=\"{state}\",topic=\"orders\"}}"
            )]
        };
        assert_eq!(state("MIRRORING"), 1.0);
        assert_eq!(state("FAILED"), 0.0);
    }
    assert_eq!(
        caught_up["mirrorlog_mirror_link_partitions{link=\"a-to-b\",state=\"MIRRORING\"}"],
        2.0
    );
    // The administration request that created the link is counted under its own name.
    assert!(caught_up["mirrorlog_requests_total{api=\"MirrorAdmin\",version=\"0\"}"] >= 1.0);
    assert!(caught_up["mirrorlog_network_received_bytes_total{}"] > 0.0);
    assert!(caught_up["mirrorlog_connections_accepted_total{}"] >= 1.0);

    let (status, _) = http_get(metrics, "/").await;
    assert_eq!(status, 404);

    // Paused, the mirror falls behind: its lag rises as the source is written (the links ask a paused
    // partition's source for its last stable offset every group-sync interval, 5 s), and falls to 0 on resume.
    link_action(
        &dest_address,
        AdminRequest::Pause {
            link: "a-to-b".to_owned(),
            topics: Vec::new(),
        },
    )
    .await;
    assert_eq!(produce_records(&source, "orders", 0, 4).await, 0);
    let lag_of_0 = partition_sample("mirrorlog_mirror_partition_lag_records", 0);
    let behind = until_scraped(metrics, |scraped| scraped.get(&lag_of_0) == Some(&4.0)).await;
    assert_eq!(
        behind["mirrorlog_mirror_partition_state{link=\"a-to-b\",partition=\"0\",state=\"PAUSED\",topic=\"orders\"}"],
        1.0
    );
    assert_eq!(
        behind[&partition_sample("mirrorlog_mirror_partition_log_end_offset", 0)],
        5.0
    );
    link_action(
        &dest_address,
        AdminRequest::Resume {
            link: "a-to-b".to_owned(),
            topics: Vec::new(),
        },
    )
    .await;
    let resumed = until_scraped(metrics, |scraped| scraped.get(&lag_of_0) == Some(&0.0)).await;
    assert_eq!(log_end(&dest, "orders", 0).await, 9);
    assert_eq!(
        resumed[&partition_sample("mirrorlog_mirror_partition_offsets_mirrored_total", 0)],
        9.0
    );
    assert_eq!(
        resumed[&partition_sample("mirrorlog_mirror_partition_batches_mirrored_total", 0)],
        2.0
    );

    stop_all(vec![(stop_dest, dest_running), (stop_source, source_running)]).await;
}

/// Issue 53, item 7: a link's counters — a topic its include patterns added, a config change it followed — and
/// when its last source check was applied, with the link's refresh interval set live by `alter`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_counts_the_topics_a_links_patterns_added_and_the_configs_it_followed() {
    let dir = tempfile::tempdir().unwrap();
    let (source_address, source, stop_source, source_running) = serve(
        config(&dir.path().join("a"), "cluster-a", &[("orders.eu", 1)]),
        None,
    )
    .await;
    let ((dest_address, _dest, stop_dest, dest_running), metrics) = with_metrics(&dir.path().join("b")).await;
    link_action(
        &dest_address,
        AdminRequest::Create {
            link: "by-pattern".to_owned(),
            source: source_address.clone(),
            topics: Vec::new(),
            source_config: Default::default(),
            include: vec![r"orders\..*".to_owned()],
            exclude: Vec::new(),
        },
    )
    .await;
    link_action(
        &dest_address,
        AdminRequest::Alter {
            link: "by-pattern".to_owned(),
            set: [("mirror.metadata.refresh.interval.ms".to_owned(), "100".to_owned())].into(),
            delete: Vec::new(),
            source_config: None,
        },
    )
    .await;
    let sample = |name: &str| format!("{name}{{link=\"by-pattern\"}}");
    let discovered = sample("mirrorlog_mirror_link_topics_discovered_total");
    let checked = until_scraped(metrics, |scraped| scraped.get(&discovered) == Some(&0.0)).await;
    let last_check = sample("mirrorlog_mirror_link_last_check_timestamp_seconds");
    let epoch_seconds = |scraped: &HashMap<String, f64>| scraped.get(&last_check).copied().unwrap_or(0.0);
    assert!(
        epoch_seconds(&checked) == 0.0 || epoch_seconds(&checked) > 1.0e9,
        "{checked:?}"
    );

    source.create_topic("orders.us", 1).await.unwrap();
    let found = until_scraped(metrics, |scraped| scraped.get(&discovered) == Some(&1.0)).await;
    assert!(epoch_seconds(&found) > 1.0e9, "{found:?}");
    source
        .alter_topic_configs(
            "orders.eu",
            |current| {
                current.altered(&[topic_config::Operation {
                    name: "retention.ms",
                    op: 0,
                    value: Some("3600000"),
                }])
            },
            false,
        )
        .await
        .unwrap();
    let changes = sample("mirrorlog_mirror_link_config_changes_total");
    let followed = until_scraped(metrics, |scraped| scraped.get(&changes) == Some(&1.0)).await;
    assert!(epoch_seconds(&followed) >= epoch_seconds(&found));
    assert_eq!(followed[&sample("mirrorlog_mirror_link_acls_created_total")], 0.0);

    stop_all(vec![(stop_dest, dest_running), (stop_source, source_running)]).await;
}

/// A round that fails is counted under Kafka's name of the error the source answered, and the partition's
/// retries are counted: the source topic deleted under a mirror answers UNKNOWN_TOPIC_OR_PARTITION to every fetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_round_is_counted_under_the_sources_error_and_its_retries_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (source_address, source, stop_source, source_running) =
        serve(config(&dir.path().join("a"), "cluster-a", &[("orders", 1)]), None).await;
    assert_eq!(produce_records(&source, "orders", 0, 2).await, 0);
    let ((dest_address, dest, stop_dest, dest_running), metrics) = with_metrics(&dir.path().join("b")).await;
    create(&dest_address, "a-to-b", &source_address, "orders").await;
    until_log_end(&dest, "orders", 0, 2, Duration::from_secs(30)).await;

    source.delete_topic("orders").await.unwrap();
    let failed = "mirrorlog_mirror_partition_failed_rounds_total{error=\"UNKNOWN_TOPIC_OR_PARTITION\",link=\"a-to-b\",partition=\"0\",topic=\"orders\"}".to_owned();
    let retries = partition_sample("mirrorlog_mirror_partition_retries_total", 0);
    let scraped = until_scraped(metrics, |scraped| {
        scraped.get(&failed).is_some_and(|count| *count >= 2.0)
            && scraped.get(&retries).is_some_and(|count| *count >= 1.0)
    })
    .await;
    // Every failed round is the source's answer: none is counted under another name.
    let other: Vec<&String> = scraped
        .keys()
        .filter(|key| key.starts_with("mirrorlog_mirror_partition_failed_rounds_total") && **key != failed)
        .collect();
    assert!(other.is_empty(), "{other:?}");
    // The log mirrored before the deletion stays.
    assert_eq!(log_end(&dest, "orders", 0).await, 2);

    stop_all(vec![(stop_dest, dest_running), (stop_source, source_running)]).await;
}

/// The error codes in the broker's answers are counted by API and Kafka's name of the error, once per partition
/// refused; the node's consumer groups, transactional ids and producer ids are gauges read at the scrape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_counts_answered_errors_by_api_and_the_nodes_groups_transactions_and_producers() {
    use kafka_protocol::messages::{
        offset_commit_request, GroupId, InitProducerIdRequest, OffsetCommitRequest, TopicName,
        TransactionalId,
    };
    use kafka_protocol::protocol::StrBytes;

    let dir = tempfile::tempdir().unwrap();
    let node = config(dir.path(), "cluster-b", &[("orders", 1)]);
    let mut broker = BrokerConfig::new("127.0.0.1:0".parse().unwrap(), node.storage.clone());
    broker.node = node;
    broker.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let ((address, node, stop, running), metrics) = serve_with_metrics(broker).await;
    let metrics = metrics.unwrap();
    let address: std::net::SocketAddr = address.parse().unwrap();

    // Two partitions that do not exist, one produce each; one that does, by an idempotent producer.
    for partition in [5, 6] {
        let (error, _) = common::produce_to(address, "orders", partition, common::valid_batch()).await;
        assert_eq!(error, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    }
    let mut idempotent = record_format::BatchBuilder::new().producer(4000, 0, 0);
    idempotent.add(0, None, Some(b"value"), &[]);
    let (error, _) = common::produce_to(address, "orders", 0, idempotent.build().unwrap().into_bytes()).await;
    assert_eq!(error, 0);

    let mut commit = OffsetCommitRequest::default();
    commit.group_id = GroupId(StrBytes::from_static_str("reporting"));
    let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
    topic.name = TopicName(StrBytes::from_static_str("orders"));
    let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
    partition.committed_offset = 1;
    topic.partitions.push(partition);
    commit.topics.push(topic);
    let committed = node.offset_commit(commit, 2).await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    let mut init = InitProducerIdRequest::default();
    init.transactional_id = Some(TransactionalId(StrBytes::from_static_str("payments")));
    init.transaction_timeout_ms = 60_000;
    assert_eq!(node.init_producer_id(init, 1).await.error_code, 0);

    let scraped = scrape(metrics).await;
    assert_eq!(
        scraped["mirrorlog_request_errors_total{api=\"Produce\",error=\"UNKNOWN_TOPIC_OR_PARTITION\"}"], 2.0,
        "{scraped:?}"
    );
    assert_eq!(
        scraped
            .keys()
            .filter(|key| key.starts_with("mirrorlog_request_errors_total"))
            .count(),
        1,
        "only the refused partitions count: {scraped:?}"
    );
    assert_eq!(
        scraped["mirrorlog_requests_total{api=\"Produce\",version=\"8\"}"],
        3.0
    );
    assert_eq!(scraped["mirrorlog_consumer_groups{state=\"Empty\"}"], 1.0);
    assert_eq!(scraped["mirrorlog_consumer_groups{state=\"Stable\"}"], 0.0);
    assert_eq!(scraped["mirrorlog_transactional_ids{state=\"Empty\"}"], 1.0);
    assert_eq!(scraped["mirrorlog_transactional_ids{state=\"Ongoing\"}"], 0.0);
    assert_eq!(scraped["mirrorlog_producer_ids{}"], 1.0);
    stop_all(vec![(stop, running)]).await;
}

/// Requests under API keys and versions the broker does not serve share one label set: a client cannot grow the
/// metrics by sending made-up keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unserved_api_keys_and_versions_are_counted_under_one_label_set() {
    let dir = tempfile::tempdir().unwrap();
    let ((address, _node, stop, running), metrics) = with_metrics(dir.path()).await;
    // ApiVersions at a version past the served range is answered (UNSUPPORTED_VERSION, v0 body), as Kafka does.
    for version in [100i16, 200, 300] {
        let mut stream = TcpStream::connect(&address).await.unwrap();
        let mut frame = Vec::new();
        frame.extend_from_slice(&18i16.to_be_bytes());
        frame.extend_from_slice(&version.to_be_bytes());
        frame.extend_from_slice(&7i32.to_be_bytes());
        frame.extend_from_slice(&(-1i16).to_be_bytes());
        let mut sized = (frame.len() as i32).to_be_bytes().to_vec();
        sized.extend_from_slice(&frame);
        stream.write_all(&sized).await.unwrap();
        let size = stream.read_i32().await.unwrap();
        let mut answer = vec![0u8; size as usize];
        stream.read_exact(&mut answer).await.unwrap();
    }
    let scraped = scrape(metrics).await;
    let request_sets: Vec<&String> = scraped
        .keys()
        .filter(|key| key.starts_with("mirrorlog_requests_total"))
        .collect();
    assert_eq!(
        request_sets,
        vec!["mirrorlog_requests_total{api=\"unsupported\",version=\"-1\"}"],
        "{scraped:?}"
    );
    assert_eq!(
        scraped["mirrorlog_requests_total{api=\"unsupported\",version=\"-1\"}"],
        3.0
    );
    // Each answer says UNSUPPORTED_VERSION, counted under the same bounded label.
    assert_eq!(
        scraped["mirrorlog_request_errors_total{api=\"unsupported\",error=\"UNSUPPORTED_VERSION\"}"],
        3.0
    );
    stop_all(vec![(stop, running)]).await;
}
