//! The conformance suite on the in-memory reference backend.

use async_trait::async_trait;
use storage::conformance::Backend;
use storage::{MemoryStorage, PartitionId, Storage};

struct Memory(MemoryStorage);

#[async_trait]
impl Backend for Memory {
    async fn store(&self) -> Box<dyn Storage> {
        Box::new(self.0.clone())
    }

    fn fail_next_sync(&self, id: &PartitionId) -> bool {
        self.0.fail_next_sync(id)
    }
}

storage::conformance_suite!(Memory(MemoryStorage::new()));
