//! The storage conformance suite on the sled backend.

use async_trait::async_trait;
use storage::conformance::Backend;
use storage::{PartitionId, Storage};
use storage_sled::{SledConfig, SledStorage};

struct Sled {
    dir: tempfile::TempDir,
    last: std::sync::Mutex<Option<SledStorage>>,
}

impl Sled {
    fn new() -> Self {
        Sled {
            dir: tempfile::tempdir().unwrap(),
            last: std::sync::Mutex::new(None),
        }
    }
}

#[async_trait]
impl Backend for Sled {
    async fn store(&self) -> Box<dyn Storage> {
        // sled holds a lock on its directory while a `Db` is alive: release the previous one first.
        self.last.lock().unwrap().take();
        let store = SledStorage::open(SledConfig::new(self.dir.path())).unwrap();
        *self.last.lock().unwrap() = Some(store.clone());
        Box::new(store)
    }

    fn fail_next_sync(&self, id: &PartitionId) -> bool {
        match &*self.last.lock().unwrap() {
            Some(store) => {
                store.fail_next_sync(id);
                true
            }
            None => false,
        }
    }
}

storage::conformance_suite!(Sled::new());
