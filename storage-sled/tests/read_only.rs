//! A read-only open of a sled store (a private copy) leaves the database directory byte for byte as it was.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use storage_sled::{SledConfig, SledStorage};

#[test]
fn inspecting_a_sled_store_leaves_its_directory_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    storage_testkit::read_only::inspection_leaves_the_store_unchanged(
        dir.path(),
        |path| SledStorage::open(SledConfig::new(path)).unwrap(),
        |path| SledStorage::open_read_only(SledConfig::new(path)),
    );
}

#[test]
fn a_read_only_open_of_a_missing_directory_fails_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    assert!(SledStorage::open_read_only(SledConfig::new(&missing)).is_err());
    assert!(!missing.exists());
}
