//! Crash safety of the file-system backend: the shared SIGKILL test (`storage_testkit::crash`, 50 seeded kills), and in
//! half of the rounds the last segment is also cut at a random byte past the acknowledged data — what a power
//! loss may do to unsynced pages — so torn tails are exercised too.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::path::Path;

use storage::Storage;
use storage_fs::{FsConfig, FsStorage};
use storage_testkit::crash::{child_writer, kill_and_verify, Rng};

fn open(dir: &Path) -> Box<dyn Storage> {
    let config = FsConfig {
        segment_bytes: 16 * 1024,
        index_interval_bytes: 1024,
        ..FsConfig::new(dir)
    };
    Box::new(FsStorage::open(config).unwrap())
}

/// Cuts the last segment at a random byte after the acknowledged offset `acked` (unsynced data).
fn tear_unsynced_tail(dir: &Path, acked: i64, rng: &mut Rng) {
    let Ok(entries) = std::fs::read_dir(dir.join("crash-0")) else {
        return;
    };
    let Some(last_log) = entries
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .max()
    else {
        return;
    };
    let bytes = std::fs::read(&last_log).unwrap();
    let mut unsynced_from = bytes.len() as u64;
    for found in record_format::SegmentReader::new(&bytes[..], Some(bytes.len() as u64)) {
        let Ok(found) = found else { break };
        if found.batch.base_offset() >= acked {
            unsynced_from = found.file_offset;
            break;
        }
    }
    if unsynced_from < bytes.len() as u64 {
        let cut = rng.between(unsynced_from, bytes.len() as u64);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&last_log)
            .unwrap()
            .set_len(cut)
            .unwrap();
    }
}

#[test]
#[ignore = "the child process of sigkill_at_random_points_loses_no_acknowledged_batch"]
fn crash_child_writer() {
    child_writer(open);
}

#[tokio::test]
async fn sigkill_at_random_points_loses_no_acknowledged_batch() {
    let dir = tempfile::tempdir().unwrap();
    let summary = kill_and_verify(
        dir.path(),
        "crash_child_writer",
        50,
        0x6d69_7272_6f72,
        open,
        Some(&tear_unsynced_tail),
    )
    .await;
    eprintln!("{summary:?}");
}
