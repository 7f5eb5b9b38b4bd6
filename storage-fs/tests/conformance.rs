//! The storage conformance suite on the file-system backend, with small segments so reads and truncations cross
//! segment boundaries.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::path::Path;

use storage_fs::{FsConfig, FsStorage};
use storage_testkit::conformance::DirBackend;

fn open(dir: &Path) -> FsStorage {
    FsStorage::open(FsConfig {
        segment_bytes: 4 * 1024,
        index_interval_bytes: 512,
        ..FsConfig::new(dir)
    })
    .unwrap()
}

fn backend() -> DirBackend<FsStorage> {
    DirBackend::temporary(open)
}

storage_testkit::conformance_suite!(backend());
