//! The storage conformance suite on the sled backend.

use std::path::Path;

use storage::conformance::DirBackend;
use storage_sled::{SledConfig, SledStorage};

fn open(dir: &Path) -> SledStorage {
    SledStorage::open(SledConfig::new(dir)).unwrap()
}

fn backend() -> DirBackend<SledStorage> {
    let dir = tempfile::tempdir().unwrap();
    DirBackend::new(dir.path().to_owned(), dir, open, SledStorage::fail_next_sync)
}

storage::conformance_suite!(backend());
