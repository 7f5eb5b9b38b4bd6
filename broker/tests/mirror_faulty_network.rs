//! A mirror link over a faulty network (issue 50, item 6): a `serve` destination mirrors a 3-partition topic from a
//! `serve` source through a TCP proxy that reads the source's answers frame by frame and, on a fixed plan, cuts
//! one in the middle and closes the connection, closes the connection instead of answering, holds an answer past
//! the link's deadline, or delays one — on each of the first connections the link opens, while a producer writes.
//! Once the faults are spent the mirror catches up within seconds, holds the source's batches byte for byte,
//! never truncated a partition (the source lost nothing, so nothing justified a truncation), and fails over with
//! one barrier per partition.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::mirror::*;
use node::mirror::AdminRequest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 3;

/// What the proxy does to one answer frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Half the frame, then the connection closes.
    CutMidAnswer,
    /// The connection closes instead of the frame.
    Close,
    /// The frame is held past the link's request deadline (10 s), and the connection closes.
    Stall,
    /// The frame arrives 700 ms late.
    Delay,
}

/// The plan: connection `c` (in the order the proxy accepted them) meets `PLAN[c]` at its answer frame number
/// `c % 2` (its first or second answer: some connections of the link carry one question only); connections after
/// the plan pass everything.
const PLAN: [Fault; 8] = [
    Fault::CutMidAnswer,
    Fault::Close,
    Fault::Delay,
    Fault::CutMidAnswer,
    Fault::Stall,
    Fault::Close,
    Fault::CutMidAnswer,
    Fault::Delay,
];

/// What the proxy did.
#[derive(Default)]
struct Met {
    connections: AtomicUsize,
    faults: AtomicUsize,
    /// Planned connections that have ended (faulted, or closed by the link before their planned answer).
    planned_ended: AtomicUsize,
}

/// The largest answer frame the proxy relays (the link asks for at most 32 MiB).
const MAX_FRAME_BYTES: usize = 64 << 20;

/// Reads one answer frame (size and body) from `upstream`; `None` when it closed or announced a size out of
/// bounds (the connection is then closed).
async fn frame(upstream: &mut tokio::net::tcp::OwnedReadHalf) -> Option<Vec<u8>> {
    let size = upstream.read_i32().await.ok()?;
    let mut frame = size.to_be_bytes().to_vec();
    let body = usize::try_from(size)
        .ok()
        .filter(|body| *body <= MAX_FRAME_BYTES)?;
    frame.resize(4 + body, 0);
    upstream.read_exact(&mut frame[4..]).await.ok()?;
    Some(frame)
}

/// The proxy on `listener` to `upstream`; see the module docs.
fn faulty_proxy(listener: TcpListener, upstream: String, met: Arc<Met>) {
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(&upstream).await else {
                continue;
            };
            let number = met.connections.fetch_add(1, Ordering::SeqCst);
            let planned = PLAN.get(number).map(|fault| (*fault, number % 2));
            let (mut client_read, mut client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            let requests = tokio::spawn(async move {
                let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
            });
            let met = Arc::clone(&met);
            tokio::spawn(async move {
                let mut answered = 0;
                while let Some(frame) = frame(&mut server_read).await {
                    let fault = planned.and_then(|(fault, at)| (answered == at).then_some(fault));
                    answered += 1;
                    if let Some(fault) = fault {
                        met.faults.fetch_add(1, Ordering::SeqCst);
                        match fault {
                            Fault::CutMidAnswer => {
                                let _ = client_write.write_all(&frame[..frame.len() / 2]).await;
                                break;
                            }
                            Fault::Close => break,
                            Fault::Stall => {
                                tokio::time::sleep(Duration::from_secs(12)).await;
                                break;
                            }
                            Fault::Delay => tokio::time::sleep(Duration::from_millis(700)).await,
                        }
                    }
                    if client_write.write_all(&frame).await.is_err() {
                        break;
                    }
                }
                // Closing the proxy's side of both directions: the link sees the connection end.
                requests.abort();
                let _ = client_write.shutdown().await;
                if planned.is_some() {
                    met.planned_ended.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_over_a_faulty_network_catches_up_byte_for_byte_without_truncating_and_fails_over() {
    let dir = tempfile::tempdir().unwrap();
    // The source advertises the proxy, so every connection the link opens to it goes through the proxy.
    let proxy_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_address = proxy_listener.local_addr().unwrap();
    let (source_address, source, stop_source, source_running) = serve(
        config(
            &dir.path().join("source"),
            "cluster-source",
            &[(TOPIC, PARTITIONS as u32)],
        ),
        Some(proxy_address),
    )
    .await;
    let met = Arc::new(Met::default());
    faulty_proxy(proxy_listener, source_address, Arc::clone(&met));
    let (dest_address, dest, stop_dest, dest_running) =
        serve(config(&dir.path().join("dest"), "cluster-dest", &[]), None).await;
    // The faults may meet the create itself. When the source's description was cut, nothing was created and the
    // operator runs the command again; when the partitions' alignment was, the answer shows them FAILED, and the
    // link exists and retries them.
    let create = AdminRequest::Create {
        link: "faulty".to_owned(),
        source: proxy_address.to_string(),
        topics: vec![TOPIC.to_owned()],
        source_config: Default::default(),
        include: Vec::new(),
        exclude: Vec::new(),
    };
    let mut attempts = 0;
    loop {
        let created = admin(&dest_address, create.clone()).await;
        attempts += 1;
        if created.links.len() == 1 {
            break;
        }
        let refused = created.error.as_ref().map(|error| error.category.as_str());
        assert!(refused == Some("source") && attempts < 10, "{created:?}");
    }

    // A producer writes while the plan runs out, and a little after.
    let started = Instant::now();
    let mut batches = 0;
    // Each partition's truncation count once it holds a batch: a new session's alignment of the empty log counts
    // as one (the log restarts at the source's log start); any later one removed batches it held.
    let mut aligned: Vec<Option<u64>> = vec![None; PARTITIONS as usize];
    while met.planned_ended.load(Ordering::SeqCst) < PLAN.len() || batches < 300 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the plan is not spent after 120 s: {} of {} faults on {} connections",
            met.faults.load(Ordering::SeqCst),
            PLAN.len(),
            met.connections.load(Ordering::SeqCst)
        );
        let partition = batches % PARTITIONS;
        assert_eq!(
            produce_records(&source, TOPIC, partition, 1 + batches as usize % 4).await,
            0
        );
        batches += 1;
        for (partition, count) in (0..PARTITIONS).zip(aligned.iter_mut()) {
            if count.is_none() && log_end(&dest, TOPIC, partition).await > 0 {
                *count = Some(truncations(&dest, TOPIC, partition).await);
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let spent = Instant::now();
    let mut ends = Vec::new();
    for partition in 0..PARTITIONS {
        let end = log_end(&source, TOPIC, partition).await;
        until_log_end(&dest, TOPIC, partition, end, Duration::from_secs(60)).await;
        ends.push(end);
    }
    let caught_up = spent.elapsed();
    println!(
        "{} faults on {} connections over {:.1?}; {batches} batches; caught up {caught_up:.1?} after the writer stopped, the plan spent",
        met.faults.load(Ordering::SeqCst),
        met.connections.load(Ordering::SeqCst),
        spent - started
    );
    // Which planned connections live to their planned answer depends on what the link asks on each; most do.
    assert!(
        met.faults.load(Ordering::SeqCst) >= PLAN.len() / 2,
        "only {} of the {} planned faults were met",
        met.faults.load(Ordering::SeqCst),
        PLAN.len()
    );
    assert!(caught_up < Duration::from_secs(30), "{caught_up:?}");
    for partition in 0..PARTITIONS {
        assert_eq!(
            log_bytes(&dest, TOPIC, partition).await,
            log_bytes(&source, TOPIC, partition).await,
            "partition {partition}"
        );
        assert_eq!(
            Some(truncations(&dest, TOPIC, partition).await),
            aligned[partition as usize],
            "partition {partition}: a retry truncated what the source still has"
        );
    }

    let failover = admin(
        &dest_address,
        AdminRequest::Failover {
            link: "faulty".to_owned(),
            topics: Vec::new(),
        },
    )
    .await;
    assert!(failover.ok, "{failover:?}");
    for status in &failover.links[0].partitions {
        let end = ends[usize::try_from(status.partition).unwrap()];
        assert_eq!(status.state, "STOPPED", "{status:?}");
        assert_eq!(
            (status.barrier_offset, status.log_end_offset),
            (Some(end), end + 1),
            "one barrier, after every mirrored batch: {status:?}"
        );
    }
    stop_all(vec![(stop_dest, dest_running), (stop_source, source_running)]).await;
}
