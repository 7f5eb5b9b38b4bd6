//! The Kafka-semantics scenarios on `storage-fs` (Kafka's directory layout) in a temporary directory.

use std::path::Path;

use storage::conformance::DirBackend;
use storage_fs::{FsConfig, FsStorage};

fn open(dir: &Path) -> FsStorage {
    FsStorage::open(FsConfig {
        segment_bytes: 2048,
        index_interval_bytes: 512,
        ..FsConfig::new(dir)
    })
    .unwrap()
}

fn backend() -> DirBackend<FsStorage> {
    let dir = tempfile::tempdir().unwrap();
    DirBackend::new(dir.path().to_owned(), dir, open, FsStorage::fail_next_sync)
}

partition_log::kafka_semantics_suite!(backend());
