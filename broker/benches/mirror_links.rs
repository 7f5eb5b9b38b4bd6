//! Mirroring between two `serve` nodes as a user runs it (issue 35, item 5): the destination's mirror links
//! created and failed over through the administration API `mirrorlog mirror` uses (the same JSON request on the
//! private API key; the CLI adds only its process start), the source a second in-process `serve` on fs.
//!
//! - **catch-up**: a link created on a fresh destination, timed until every partition has caught up with the
//!   source's last stable offset (polled with `describe`), for 1 partition and for 100 partitions holding the
//!   same bytes, against a raw TCP copy of the source's segment files over loopback into one file, 1 MiB at a
//!   time, in the same run (alternating, ADR 0024). `MIRRORLOG_BENCH_MIB` lists the sizes (default `512,1024`:
//!   512 MiB fits one segment; 1 GiB is the "1 GiB of lag", where one partition's log rolls a segment,
//!   which syncs the old one); `MIRRORLOG_BENCH_ROWS` selects rows (default `1,100,failover`).
//! - **failover**: 1,000 mirrored partitions (a few batches each) failed over by one `failover` request, timed to
//!   its answer (target ≤ 2 s).
//!
//! Every timed run starts after `sync(1)` (no dirty pages left by the run before). Prints Markdown: runs, medians
//! and the ratio of medians.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark fails by panicking

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use broker::{BrokerConfig, Server};
use node::mirror::{AdminRequest, AdminResponse};
use record_format::{BatchBuilder, RecordBatch};
use storage_config::{Backend, StorageConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BATCH_VALUE: usize = 1024 - 80;
const RUNS: usize = 5;
const FAILOVER_PARTITIONS: u32 = 1000;

fn megabytes() -> Vec<usize> {
    std::env::var("MIRRORLOG_BENCH_MIB")
        .unwrap_or_else(|_| "512,1024".to_owned())
        .split(',')
        .map(|size| {
            size.trim()
                .parse()
                .expect("MIRRORLOG_BENCH_MIB: sizes in MiB, comma-separated")
        })
        .collect()
}

/// A running `serve` on fs under `dir`; its address and the handle that stops it.
struct Running {
    address: String,
    stop: Arc<tokio::sync::Notify>,
    serving: tokio::task::JoinHandle<Result<(), broker::BrokerError>>,
}

impl Running {
    async fn stop(self) {
        self.stop.notify_one();
        self.serving.await.unwrap().unwrap();
    }
}

/// Opens a `serve` node on fs under `dir` (topics created, not yet serving).
async fn bind(dir: &Path, cluster_id: &str, topics: &[(&str, u32)]) -> Server {
    let storage = StorageConfig::for_backend(Backend::Fs, dir);
    let mut config = BrokerConfig::new("127.0.0.1:0".parse().unwrap(), storage);
    config.node.cluster_id = cluster_id.to_owned();
    config.node.topics = topics.iter().map(|(name, n)| ((*name).to_owned(), *n)).collect();
    Server::bind(config).await.unwrap()
}

fn run(server: Server) -> Running {
    let address = server.local_addr().unwrap().to_string();
    let stop = Arc::new(tokio::sync::Notify::new());
    let stopped = stop.clone();
    let serving = tokio::spawn(async move { server.run(async move { stopped.notified().await }).await });
    Running {
        address,
        stop,
        serving,
    }
}

/// Appends `bytes` worth of 1 KiB batches to each of `topic`'s `partitions` partitions of the node; the bytes
/// written in all.
async fn fill(server: &Server, topic: &str, partitions: u32, bytes_each: usize) -> u64 {
    let value = vec![7u8; BATCH_VALUE];
    let mut written = 0u64;
    for partition in 0..partitions as i32 {
        let slot = server.node().partition(topic, partition).await.unwrap();
        let mut guard = slot.lock().await;
        let log = &mut guard.as_mut().unwrap().leader;
        let mut offset = 0i64;
        let mut in_partition = 0usize;
        while in_partition < bytes_each {
            let count = ((bytes_each - in_partition) / 1024).clamp(1, 1024) as i64;
            let batches: Vec<RecordBatch> = (0..count)
                .map(|index| {
                    let mut builder = BatchBuilder::new().base_offset(offset + index);
                    builder.add(1_700_000_000_000, None, Some(&value), &[]);
                    builder.build().unwrap()
                })
                .collect();
            let size: usize = batches.iter().map(RecordBatch::size).sum();
            in_partition += size;
            offset += count;
            log.append_as_follower(batches).await.unwrap();
        }
        let end = log.log_end_offset();
        log.advance_high_watermark(end);
        log.flush(storage::Durability::Buffered).await.unwrap();
        written += in_partition as u64;
    }
    written
}

async fn admin(address: &str, request: &AdminRequest) -> AdminResponse {
    mirror_link::admin::call(
        address,
        request,
        Duration::from_secs(120),
        &mirror_link::ClientSecurity::plaintext(),
    )
    .await
    .unwrap()
}

/// Creates link `bench` on `dest` for `topic` and waits until every partition has caught up: the time the
/// `create` request took (topics created, every partition's mirror started) and the time from its answer to
/// caught up.
async fn catch_up(dest: &str, source: &str, topic: &str) -> (Duration, Duration) {
    let started = Instant::now();
    let created = admin(
        dest,
        &AdminRequest::Create {
            link: "bench".to_owned(),
            source: source.to_owned(),
            topics: vec![topic.to_owned()],
            source_config: Default::default(),
            include: Vec::new(),
            exclude: Vec::new(),
        },
    )
    .await;
    assert!(created.ok, "{created:?}");
    let created_in = started.elapsed();
    let started = Instant::now();
    let describe = AdminRequest::Describe {
        link: "bench".to_owned(),
        topics: Vec::new(),
    };
    loop {
        let answer = admin(dest, &describe).await;
        let caught_up = answer
            .links
            .iter()
            .flat_map(|link| &link.partitions)
            .all(|partition| partition.state == "MIRRORING" && partition.lag_offsets == Some(0));
        if caught_up {
            return (created_in, started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The `.log` segment files of every partition of `topic` under the source's data directory.
fn segments(dir: &Path, topic: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(&format!("{topic}-")))
        })
        .flat_map(|partition| {
            std::fs::read_dir(partition)
                .unwrap()
                .map(|entry| entry.unwrap().path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
                .collect::<Vec<_>>()
        })
        .collect();
    files.sort();
    files
}

/// The baseline: the segment files streamed over a loopback socket into one file, 1 MiB at a time.
async fn raw_copy(files: &[PathBuf], target: &Path) -> Duration {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let sources = files.to_vec();
    let sender = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buffer = vec![0u8; 1 << 20];
        for source in sources {
            let mut file = tokio::fs::File::open(&source).await.unwrap();
            loop {
                let read = file.read(&mut buffer).await.unwrap();
                if read == 0 {
                    break;
                }
                socket.write_all(&buffer[..read]).await.unwrap();
            }
        }
    });
    let started = Instant::now();
    let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
    let mut out = tokio::fs::File::create(target).await.unwrap();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = socket.read(&mut buffer).await.unwrap();
        if read == 0 {
            break;
        }
        out.write_all(&buffer[..read]).await.unwrap();
    }
    out.flush().await.unwrap();
    let elapsed = started.elapsed();
    sender.await.unwrap();
    elapsed
}

/// Writes back every dirty page (`sync(1)`), so that each timed run starts with the same clean page cache
/// instead of paying for the run before it.
fn settle() {
    let _ = std::process::Command::new("sync").status();
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Catch-up of `partitions` partitions holding `mib` MiB in all, against the raw copy; one table row.
async fn catch_up_row(data: &Path, mib: usize, partitions: u32) {
    let topic = format!("mirrored-{partitions}");
    let source_dir = data.join(format!("source-{partitions}"));
    let source = bind(&source_dir, "bench-source", &[(&topic, partitions)]).await;
    let bytes = fill(&source, &topic, partitions, (mib << 20) / partitions as usize).await;
    let source = run(source);
    let files = segments(&source_dir, &topic);
    let total_mib = bytes as f64 / f64::from(1 << 20);
    let (mut mirrored, mut copied, mut creates) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..RUNS {
        let target = data.join(format!("dest-{partitions}-{round}"));
        let mirror_rate = || async {
            settle();
            let dest = run(bind(&target, "bench-destination", &[]).await);
            let (created, elapsed) = catch_up(&dest.address, &source.address, &topic).await;
            dest.stop().await;
            (total_mib / elapsed.as_secs_f64(), created.as_secs_f64() * 1000.0)
        };
        let copy_rate = || async {
            std::fs::create_dir_all(&target).unwrap();
            settle();
            total_mib / raw_copy(&files, &target.join("copy.log")).await.as_secs_f64()
        };
        let (rate, created) = if round % 2 == 0 {
            let mirror = mirror_rate().await;
            copied.push(copy_rate().await);
            mirror
        } else {
            copied.push(copy_rate().await);
            mirror_rate().await
        };
        mirrored.push(rate);
        creates.push(created);
        std::fs::remove_dir_all(&target).unwrap();
    }
    source.stop().await;
    std::fs::remove_dir_all(&source_dir).unwrap();
    let (mirror_median, copy_median) = (median(mirrored.clone()), median(copied.clone()));
    println!(
        "| catch-up, {partitions} partition(s), {total_mib:.0} MiB | {mirrored:.0?} | {mirror_median:.0} | \
         {copied:.0?} | {copy_median:.0} | {:.2} |",
        mirror_median / copy_median
    );
    println!(
        "| `create` of the link ({partitions} partition(s): topic created, mirrors started) | {creates:.0?} ms | {:.0} ms | | | |",
        median(creates.clone())
    );
}

/// Failover of 1,000 mirrored partitions by one request; the median time of the runs.
async fn failover_row(data: &Path) {
    let topic = "many";
    let source_dir = data.join("source-many");
    let source = bind(&source_dir, "bench-source", &[(topic, FAILOVER_PARTITIONS)]).await;
    fill(&source, topic, FAILOVER_PARTITIONS, 4 << 10).await;
    let source = run(source);
    let mut times = Vec::new();
    for round in 0..RUNS {
        let target = data.join(format!("dest-many-{round}"));
        settle();
        let dest = run(bind(&target, "bench-destination", &[]).await);
        let _ = catch_up(&dest.address, &source.address, topic).await;
        let started = Instant::now();
        let answer = admin(
            &dest.address,
            &AdminRequest::Failover {
                link: "bench".to_owned(),
                topics: Vec::new(),
            },
        )
        .await;
        let elapsed = started.elapsed();
        assert!(answer.ok, "{:?}", answer.error);
        assert_eq!(answer.links[0].partitions.len(), FAILOVER_PARTITIONS as usize);
        times.push(elapsed.as_secs_f64() * 1000.0);
        dest.stop().await;
        std::fs::remove_dir_all(&target).unwrap();
    }
    source.stop().await;
    println!(
        "| failover of {FAILOVER_PARTITIONS} mirrored partitions (one `failover` request) | {times:.0?} ms | {:.0} ms | \
         | | target ≤ 2,000 ms |",
        median(times.clone())
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let data = tempfile::tempdir().unwrap();
    let sizes = megabytes();
    println!("| what (1 KiB batches, loopback, fs) | mirror MiB/s (runs) | median | raw copy MiB/s (runs) | median | ratio |");
    println!("|---|---|---|---|---|---|");
    let rows = std::env::var("MIRRORLOG_BENCH_ROWS").unwrap_or_else(|_| "1,100,failover".to_owned());
    let rows: Vec<&str> = rows.split(',').map(str::trim).collect();
    for mib in sizes {
        for partitions in [1, 100] {
            if rows.contains(&partitions.to_string().as_str()) {
                catch_up_row(data.path(), mib, partitions).await;
            }
        }
    }
    if rows.contains(&"failover") {
        failover_row(data.path()).await;
    }
}
