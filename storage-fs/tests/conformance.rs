//! The storage conformance suite on the file-system backend, with small segments so reads and truncations cross
//! segment boundaries.

use std::path::Path;

use storage::conformance::DirBackend;
use storage_fs::{FsConfig, FsStorage};

fn open(dir: &Path) -> FsStorage {
    FsStorage::open(FsConfig {
        segment_bytes: 4 * 1024,
        index_interval_bytes: 512,
        ..FsConfig::new(dir)
    })
    .unwrap()
}

fn backend() -> DirBackend<FsStorage> {
    let dir = tempfile::tempdir().unwrap();
    DirBackend::new(dir.path().to_owned(), dir, open, FsStorage::fail_next_sync)
}

storage::conformance_suite!(backend());
