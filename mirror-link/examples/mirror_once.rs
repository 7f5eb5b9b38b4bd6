//! Mirrors one partition of a Kafka-compatible cluster into a storage-fs partition directory and, with
//! `--failover`, fails it over (the barrier written): the reference-Kafka suite runs it against Apache Kafka.
//!
//! ```text
//! cargo run -p mirror-link --example mirror_once -- BOOTSTRAP TOPIC PARTITION SOURCE_CLUSTER_ID DATA_DIR [--failover]
//! ```
//!
//! Prints one JSON line: the state the mirror ended in, the source's cluster id, the destination's log end.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test tool fails by panicking, with the reason

use mirror_fsm::{Event, MirrorDriver};
use mirror_link::{FetcherConfig, KafkaFetcher};
use partition_log::{LogConfig, PartitionLog};
use producer_state::PsmConfig;
use storage::PartitionId;
use storage_config::StorageConfig;

const LOCAL_CLUSTER: &str = "mirror-once";

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bootstrap, topic, partition, source_cluster, data_dir, rest @ ..] = args.as_slice() else {
        eprintln!("usage: mirror_once BOOTSTRAP TOPIC PARTITION SOURCE_CLUSTER_ID DATA_DIR [--failover]");
        std::process::exit(2);
    };
    let failover = rest.iter().any(|arg| arg == "--failover");
    let partition: i32 = partition.parse().expect("a partition number");
    let store = StorageConfig::for_backend(storage_config::Backend::Fs, std::path::Path::new(data_dir))
        .open()
        .expect("the data directory");
    let id = PartitionId::new(
        topic.as_str(),
        u32::try_from(partition).expect("a partition number"),
    )
    .expect("a partition name");
    let storage = match store.open(&id).await {
        Ok(storage) => storage,
        Err(_) => store.create(&id).await.expect("a new partition"),
    };
    let config = LogConfig {
        producer_state: PsmConfig {
            cluster_id: Some(LOCAL_CLUSTER.to_owned()),
            ..PsmConfig::default()
        },
        ..LogConfig::default()
    };
    let (mut log, _) = PartitionLog::open(storage, config, 0)
        .await
        .expect("the partition log");
    let mut fetcher = KafkaFetcher::new(FetcherConfig::new(bootstrap.as_str()), topic.as_str(), partition);
    let mut driver = MirrorDriver::recover(&mut log, &mut fetcher, LOCAL_CLUSTER)
        .await
        .expect("the mirror's state");
    if driver.state().session().is_none() {
        let start = Event::Start {
            source_cluster_id: source_cluster.clone(),
        };
        driver
            .handle(&mut log, &mut fetcher, start)
            .await
            .expect("a start");
    }
    driver.catch_up(&mut log, &mut fetcher).await.expect("a catch-up");
    if failover {
        driver
            .handle(&mut log, &mut fetcher, Event::Stop)
            .await
            .expect("a failover");
    }
    let state = format!("{:?}", driver.state().kind());
    let end = log.log_end_offset();
    log.close().await.expect("a clean close");
    println!(
        "{{\"state\": \"{state}\", \"source_cluster_id\": \"{}\", \"log_end_offset\": {end}}}",
        fetcher.source_cluster_id().unwrap_or_default()
    );
}
