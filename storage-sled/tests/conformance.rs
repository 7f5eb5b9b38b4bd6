//! The storage conformance suite and the partition log's Kafka-semantics scenarios on the sled backend.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::path::Path;

use storage_sled::{SledConfig, SledStorage};
use storage_testkit::conformance::DirBackend;

fn open(dir: &Path) -> SledStorage {
    SledStorage::open(SledConfig::new(dir)).unwrap()
}

fn backend() -> DirBackend<SledStorage> {
    DirBackend::temporary(open)
}

storage_testkit::conformance_suite!(backend());

/// The partition log's Kafka-semantics scenarios on this backend.
mod kafka_semantics {
    use super::backend;
    partition_log_testkit::kafka_semantics_suite!(backend());
}
