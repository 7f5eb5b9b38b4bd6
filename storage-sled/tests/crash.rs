//! Crash safety of the sled backend: the shared SIGKILL test (`storage_testkit::crash`, 50 seeded kills).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::path::Path;

use storage::Storage;
use storage_sled::{SledConfig, SledStorage};
use storage_testkit::crash::{child_writer, kill_and_verify};

fn open(dir: &Path) -> Box<dyn Storage> {
    Box::new(SledStorage::open(SledConfig::new(dir)).unwrap())
}

#[test]
#[ignore = "the child process of sigkill_at_random_points_loses_no_acknowledged_batch"]
fn crash_child_writer() {
    child_writer(open);
}

#[tokio::test]
async fn sigkill_at_random_points_loses_no_acknowledged_batch() {
    let dir = tempfile::tempdir().unwrap();
    let summary = kill_and_verify(dir.path(), "crash_child_writer", 50, 0x736c_6564, open, None).await;
    eprintln!("{summary:?}");
}
