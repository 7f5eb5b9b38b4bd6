//! A slow fsync on one partition holds back only that partition: a produce to another partition, on another
//! connection, is answered while the slow one is still syncing (held by the test, with no timing involved) (storage calls run on the blocking pool and each
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

/// The longest a test waits for held syncs to begin.
const HOLD_WAIT: Duration = Duration::from_secs(60);

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
    let faults = broker.faults.clone();
    let release = faults.release_on_drop();
    // Both partitions' syncs are held until released: were they run one after the other, the second could only
    // begin once the first gave up its hold.
    faults.hold_syncs(&orders(0));
    faults.hold_syncs(&orders(1));
    let address = broker.address;
    let batches = [(0, common::valid_batch()), (1, common::valid_batch())];
    let produced = tokio::spawn(async move { produce_partitions(address, "orders", &batches).await });
    tokio::time::timeout(HOLD_WAIT, faults.held_syncs_begun(2))
        .await
        .expect("both partitions' syncs were under way at once");
    drop(release);
    let (errors, _) = produced.await.expect("produce");
    assert_eq!(errors, vec![0, 0]);
    assert_eq!(faults.held_syncs_expired(), 0, "released, not given up");
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

    let release = faults.release_on_drop();
    faults.hold_syncs(&orders(0));
    let slow = tokio::spawn(produce(address, 0, common::valid_batch()));
    // The slow produce is in its sync now, and stays there until released.
    tokio::time::timeout(HOLD_WAIT, faults.held_syncs_begun(1))
        .await
        .expect("the slow produce's sync began");
    let (fast_error, _) = produce(address, 1, common::valid_batch()).await;
    assert_eq!(fast_error, 0);
    assert!(
        !slow.is_finished(),
        "the held produce was answered before its sync"
    );
    drop(release);
    let (slow_error, _) = slow.await.expect("slow produce");
    assert_eq!(slow_error, 0);
    assert_eq!(
        faults.held_syncs_expired(),
        0,
        "the other partition's produce was answered only once the held sync gave up"
    );

    broker.stop().await.expect("clean close");
}
