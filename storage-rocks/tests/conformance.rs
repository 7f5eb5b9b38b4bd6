//! The storage conformance suite, the partition log's Kafka-semantics scenarios and the SIGKILL crash test on
//! the RocksDB backend.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::path::Path;

use storage::Storage;
use storage_rocks::{RocksConfig, RocksStorage};
use storage_testkit::conformance::DirBackend;
use storage_testkit::crash::{child_writer, kill_and_verify};

fn open(dir: &Path) -> RocksStorage {
    RocksStorage::open(RocksConfig::new(dir)).unwrap()
}

fn backend() -> DirBackend<RocksStorage> {
    DirBackend::temporary(open)
}

mod conformance {
    use super::backend;
    storage_testkit::conformance_suite!(backend());
}

/// The partition log's Kafka-semantics scenarios on this backend (in this binary, so RocksDB is linked once).
mod kafka_semantics {
    use super::backend;
    partition_log_testkit::kafka_semantics_suite!(backend());
}

fn open_boxed(dir: &Path) -> Box<dyn Storage> {
    Box::new(open(dir))
}

#[test]
#[ignore = "the child process of sigkill_at_random_points_loses_no_acknowledged_batch"]
fn crash_child_writer() {
    child_writer(open_boxed);
}

#[tokio::test]
async fn sigkill_at_random_points_loses_no_acknowledged_batch() {
    let dir = tempfile::tempdir().unwrap();
    let summary = kill_and_verify(
        dir.path(),
        "crash_child_writer",
        50,
        0x726f_636b,
        open_boxed,
        None,
    )
    .await;
    eprintln!("{summary:?}");
}
