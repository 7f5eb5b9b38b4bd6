//! The storage conformance suite on the file-system backend, with small segments so reads and truncations cross
//! segment boundaries.

use async_trait::async_trait;
use storage::conformance::Backend;
use storage::{PartitionId, Storage};
use storage_fs::{FsConfig, FsStorage};

struct Fs {
    dir: tempfile::TempDir,
    faults: std::sync::Mutex<Option<FsStorage>>,
}

impl Fs {
    fn new() -> Self {
        Fs {
            dir: tempfile::tempdir().unwrap(),
            faults: std::sync::Mutex::new(None),
        }
    }

    fn config(&self) -> FsConfig {
        FsConfig {
            segment_bytes: 4 * 1024,
            index_interval_bytes: 512,
            ..FsConfig::new(self.dir.path())
        }
    }
}

#[async_trait]
impl Backend for Fs {
    async fn store(&self) -> Box<dyn Storage> {
        let store = FsStorage::open(self.config()).unwrap();
        *self.faults.lock().unwrap() = Some(store.clone());
        Box::new(store)
    }

    fn fail_next_sync(&self, id: &PartitionId) -> bool {
        match &*self.faults.lock().unwrap() {
            Some(store) => {
                store.fail_next_sync(id);
                true
            }
            None => false,
        }
    }
}

storage::conformance_suite!(Fs::new());
