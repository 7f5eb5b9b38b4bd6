//! The storage conformance suite and the partition log's Kafka-semantics scenarios on the sled backend.

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

/// The partition log's Kafka-semantics scenarios on this backend.
mod kafka_semantics {
    use super::backend;
    partition_log::kafka_semantics_suite!(backend());
}
