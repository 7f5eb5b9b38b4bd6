//! The Kafka-semantics scenarios on `storage-fs` (Kafka's directory layout) in a temporary directory.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::path::Path;

use storage_fs::{FsConfig, FsStorage};
use storage_testkit::conformance::DirBackend;

fn open(dir: &Path) -> FsStorage {
    FsStorage::open(FsConfig {
        segment_bytes: 2048,
        index_interval_bytes: 512,
        ..FsConfig::new(dir)
    })
    .unwrap()
}

fn backend() -> DirBackend<FsStorage> {
    DirBackend::temporary(open)
}

partition_log_testkit::kafka_semantics_suite!(backend());
