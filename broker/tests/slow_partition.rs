//! A slow fsync on one partition holds back only that partition: a produce to another partition, on another
//! connection, is answered while the slow one is still syncing (storage calls run on the blocking pool and each
//! partition has its own lock). Within one produce request the partitions' syncs run side by side, and a failed
//! one refuses only its own partition.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use std::time::Duration;

use common::{produce, produce_partitions};
use storage::PartitionId;
use storage_testkit::FaultyStore;

use broker::{BrokerConfig, Server};
use storage_config::StorageConfig;

const SLOW_SYNC: Duration = Duration::from_secs(2);

/// A running broker on fs behind a [`FaultyStore`], with topic `orders` of two partitions.
struct FaultyBroker {
    address: std::net::SocketAddr,
    faults: std::sync::Arc<storage_testkit::StoreFaults>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), broker::BrokerError>>,
    _dir: tempfile::TempDir,
}

impl FaultyBroker {
    async fn start() -> Self {
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
        FaultyBroker {
            address,
            faults,
            stop,
            task,
            _dir: dir,
        }
    }

    /// Stops the broker: how it closed.
    async fn stop(self) -> Result<(), broker::BrokerError> {
        let _ = self.stop.send(());
        self.task.await.expect("server task")
    }
}

fn orders(partition: u32) -> PartitionId {
    PartitionId::new("orders", partition).expect("id")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_partitions_of_one_produce_request_sync_side_by_side() {
    let broker = FaultyBroker::start().await;
    broker.faults.delay_syncs(&orders(0), SLOW_SYNC);
    broker.faults.delay_syncs(&orders(1), SLOW_SYNC);
    let batches = [(0, common::valid_batch()), (1, common::valid_batch())];
    let (errors, latency) = produce_partitions(broker.address, "orders", &batches).await;
    assert_eq!(errors, vec![0, 0]);
    assert!(
        latency >= SLOW_SYNC,
        "the fault did not slow the syncs ({latency:?})"
    );
    assert!(
        latency < SLOW_SYNC * 2,
        "two partitions' {SLOW_SYNC:?} syncs took {latency:?}: one after the other"
    );
    broker.stop().await.expect("clean close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sync_refuses_only_its_partition_of_a_produce_request() {
    let broker = FaultyBroker::start().await;
    broker.faults.fail_next_sync(&orders(0));
    let batches = [(0, common::valid_batch()), (1, common::valid_batch())];
    let (errors, _) = produce_partitions(broker.address, "orders", &batches).await;
    let kafka_storage_error = kafka_types::KafkaError::KafkaStorageError.code();
    assert_eq!(errors, vec![kafka_storage_error, 0]);
    let closed = broker.stop().await;
    assert!(
        matches!(&closed, Err(error) if error.to_string().contains("injected sync failure")),
        "the partition whose sync failed cannot close cleanly: {closed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_sync_on_one_partition_does_not_delay_another() {
    let broker = FaultyBroker::start().await;
    let (address, faults) = (broker.address, broker.faults.clone());

    faults.delay_syncs(&orders(0), SLOW_SYNC);
    let slow = tokio::spawn(produce(address, 0, common::valid_batch()));
    // The slow produce is in its sync now.
    tokio::time::timeout(Duration::from_secs(60), faults.delayed_syncs_begun(1))
        .await
        .expect("the slow produce's sync began");
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

    broker.stop().await.expect("clean close");
}
