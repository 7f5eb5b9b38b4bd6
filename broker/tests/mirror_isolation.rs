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

mod common;

use broker::BrokerConfig;
use common::mirror::*;
use node::mirror::{AdminRequest, AdminResponse};
use node::Node;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How long the slow source's proxy holds each answer.
const SLOW: Duration = Duration::from_secs(4);

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
        assert_eq!(produce_records(healthy, "fast", 0, 2).await, 0);
        let end = end + 2 * (round + 1);
        arrivals.push(until_log_end(dest, "fast", 0, end, Duration::from_secs(60)).await);
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
    assert_eq!(produce_records(&healthy, "fast", 0, 3).await, 0);
    assert_eq!(produce_records(&slow, "slow", 0, 3).await, 0);
    until_log_end(&dest, "fast", 0, 3, Duration::from_secs(30)).await;
    until_log_end(&dest, "slow", 0, 3, Duration::from_secs(30)).await;

    // Every answer read from here on is held, the one to the round now in flight included.
    delay_ms.store(SLOW.as_millis() as u64, Ordering::Relaxed);
    assert_eq!(produce_records(&slow, "slow", 0, 1).await, 0);

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
    until_log_end(&dest, "slow", 0, 4, Duration::from_secs(60)).await;

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
    assert_eq!(produce_records(&slow, "slow", 0, 2).await, 0);
    until_log_end(&dest, "slow", 0, 6, Duration::from_secs(90)).await;
    assert_eq!(
        log_bytes(&dest, "fast", 0).await,
        log_bytes(&healthy, "fast", 0).await
    );
    assert_eq!(
        log_bytes(&dest, "slow", 0).await,
        log_bytes(&slow, "slow", 0).await
    );

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
    assert_eq!(produce_records(&source, "fast", 0, 3).await, 0);
    until_log_end(&dest, "fast", 0, 3, Duration::from_secs(30)).await;

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
    assert_eq!(produce_records(&source, "fast", 0, 2).await, 0);
    until_log_end(&dest, "fast", 0, 5, Duration::from_secs(30)).await;
    println!("caught up {:?} after the source came back", back.elapsed());
    assert!(back.elapsed() < Duration::from_secs(10), "{:?}", back.elapsed());
    assert_eq!(
        log_bytes(&dest, "fast", 0).await,
        log_bytes(&source, "fast", 0).await
    );
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

/// A `create` against a source that accepts connections and never answers: the source is asked in a task of its
/// own, so while the create waits out its deadline the other link's records keep arriving and `list` answers at
/// once; then the create is refused, naming the source, and nothing was created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_against_a_silent_source_holds_up_no_other_link() {
    let dir = tempfile::tempdir().unwrap();
    let (healthy_address, healthy, stop_healthy, healthy_running) = serve(
        config(&dir.path().join("healthy"), "cluster-healthy", &[("fast", 1)]),
        None,
    )
    .await;
    let (dest_address, dest, stop_dest, dest_running) =
        serve(config(&dir.path().join("dest"), "cluster-dest", &[]), None).await;
    create(&dest_address, "from-healthy", &healthy_address, "fast").await;
    // A source that takes connections and answers nothing: what a hung broker looks like.
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_address = silent.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((connection, _)) = silent.accept().await {
            held.push(connection);
        }
    });
    let request = AdminRequest::Create {
        link: "from-silent".to_owned(),
        source: silent_address.clone(),
        topics: vec!["slow".to_owned()],
        source_config: Default::default(),
        include: Vec::new(),
        exclude: Vec::new(),
    };
    let (dest_for_create, asked) = (dest_address.clone(), Instant::now());
    let creating = tokio::spawn(async move { admin(&dest_for_create, request).await });

    let mut arrivals = Vec::new();
    let mut answers = Vec::new();
    let mut end = 0;
    while !creating.is_finished() {
        assert_eq!(produce_records(&healthy, "fast", 0, 2).await, 0);
        end += 2;
        arrivals.push(until_log_end(&dest, "fast", 0, end, Duration::from_secs(60)).await);
        let listed = Instant::now();
        let answer = admin(&dest_address, AdminRequest::List).await;
        answers.push(listed.elapsed());
        assert!(answer.ok, "{answer:?}");
    }
    let refused = creating.await.unwrap();
    let waited = asked.elapsed();
    arrivals.sort();
    answers.sort();
    println!(
        "create against a silent source refused after {waited:.1?}; meanwhile {} arrivals (median {:?}, max {:?}), \
         list answered in median {:?}, max {:?}",
        arrivals.len(),
        arrivals[arrivals.len() / 2],
        arrivals.last().unwrap(),
        answers[answers.len() / 2],
        answers.last().unwrap()
    );
    assert!(!refused.ok && refused.links.is_empty(), "{refused:?}");
    let error = refused.error.unwrap();
    assert_eq!(error.category, "source", "{error:?}");
    assert!(error.message.contains(&silent_address), "{error:?}");
    // The create waited for its source (seconds); the other link and `list` did not wait for the create.
    assert!(waited > SLOW / 2, "the silent source answered? {waited:?}");
    let slowest = arrivals.iter().chain(&answers).max().copied().unwrap_or_default();
    assert!(
        slowest < SLOW / 2,
        "while a create waited for a silent source: {arrivals:?} {answers:?}"
    );
    let listed = admin(&dest_address, AdminRequest::List).await;
    assert_eq!(listed.links.len(), 1, "{listed:?}");
    stop_all(vec![(stop_dest, dest_running), (stop_healthy, healthy_running)]).await;
}
