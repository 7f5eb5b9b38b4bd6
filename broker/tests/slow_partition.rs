//! A slow fsync on one partition holds back only that partition: a produce to another partition, on another
//! connection, is answered while the slow one is still syncing (storage calls run on the blocking pool and each
//! partition has its own lock).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use std::time::Duration;

use common::produce;
use storage::PartitionId;
use storage_testkit::FaultyStore;

use broker::{BrokerConfig, Server};
use storage_config::StorageConfig;

const SLOW_SYNC: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_sync_on_one_partition_does_not_delay_another() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fs = storage_fs::FsStorage::open(storage_fs::FsConfig::new(dir.path())).expect("fs");
    let store = FaultyStore::new(fs);
    let faults = store.faults().clone();
    let mut config = BrokerConfig::new(
        "127.0.0.1:0".parse().expect("address"),
        StorageConfig::for_backend(storage_config::Backend::Fs, dir.path()),
    );
    config.node.topics = vec![("orders".to_owned(), 2)];
    let server = Server::bind_on(config, Box::new(store)).await.expect("bind");
    let address = server.local_addr().expect("address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));

    faults.delay_syncs(&PartitionId::new("orders", 0).expect("id"), SLOW_SYNC);
    let slow = tokio::spawn(produce(address, 0, common::valid_batch()));
    tokio::time::sleep(Duration::from_millis(200)).await; // the slow produce is in its sync now
    let (fast_error, fast_latency) = produce(address, 1, common::valid_batch()).await;
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
