//! No sync or database write of RocksDB runs on an executor thread (issue 33, item 4): the partition log's
//! durable workload, every backend call checked (`storage_testkit::executor_guard`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use storage_rocks::{RocksConfig, RocksStorage};
use storage_testkit::executor_guard::{guarded_runtime, NoSyncOnWorkers};

#[test]
fn no_sync_or_database_write_runs_on_an_executor_thread_on_rocks() {
    let (runtime, threads) = guarded_runtime(2);
    let dir = tempfile::tempdir().unwrap();
    let store = NoSyncOnWorkers::new(
        RocksStorage::open(RocksConfig::new(dir.path())).unwrap(),
        threads.clone(),
    );
    runtime.block_on(async {
        tokio::spawn(async move { partition_log_testkit::executor::durable_operations(&store).await })
            .await
            .unwrap()
    });
    assert_eq!(threads.violations(), Vec::<String>::new());
}
