//! The in-memory reference backend.
//!
//! Everything lives in memory shared by every handle of the same [`MemoryStorage`], so reopening a partition
//! sees what was written (there is no crash to survive). It implements the traits as plainly as possible and is
//! the yardstick the conformance suite was written against. A test can make the next sync of a partition fail
//! ([`MemoryStorage::fail_next_sync`]) to check poisoning.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use bytes::Bytes;
use record_format::{AbortedTxn, RecordBatch};

use crate::error::StorageError;
use crate::id::PartitionId;
use crate::partition::{
    check_aborted_txn, check_append, check_delete_before, check_metadata_key, check_read_offset,
    select_aborted, truncation, BatchMap, Durability, PartitionStorage, Storage, Truncation,
};
use crate::Result;

#[derive(Debug, Default)]
struct PartitionData {
    log_start: i64,
    log_end: i64,
    batches: BatchMap<RecordBatch>,
    snapshots: BTreeMap<i64, Bytes>,
    aborted: Vec<AbortedTxn>,
    metadata: BTreeMap<String, Vec<u8>>,
    poisoned: Option<String>,
    fail_next_sync: bool,
}

type Shared = Arc<Mutex<PartitionData>>;

fn lock(data: &Mutex<PartitionData>) -> MutexGuard<'_, PartitionData> {
    // A panic while holding the lock cannot leave the data half-updated in a way later calls would trust more
    // than a fresh read, so a poisoned mutex is simply taken over.
    data.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The in-memory store; clones share the same partitions.
#[derive(Debug, Clone, Default)]
pub struct MemoryStorage {
    partitions: Arc<Mutex<BTreeMap<PartitionId, Shared>>>,
}

impl MemoryStorage {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn partitions(&self) -> MutexGuard<'_, BTreeMap<PartitionId, Shared>> {
        self.partitions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Makes the next `flush(Durability::Sync)` of `id` fail (and poison the partition). Returns false if the
    /// partition does not exist.
    pub fn fail_next_sync(&self, id: &PartitionId) -> bool {
        match self.partitions().get(id) {
            Some(shared) => {
                lock(shared).fail_next_sync = true;
                true
            }
            None => false,
        }
    }
}

#[async_trait]
impl Storage for MemoryStorage {
    async fn create(&self, id: &PartitionId) -> Result<Box<dyn PartitionStorage>> {
        let mut partitions = self.partitions();
        if partitions.contains_key(id) {
            return Err(StorageError::AlreadyExists(id.clone()));
        }
        let shared = Shared::default();
        partitions.insert(id.clone(), shared.clone());
        Ok(Box::new(MemoryPartition {
            id: id.clone(),
            shared,
        }))
    }

    async fn open(&self, id: &PartitionId) -> Result<Box<dyn PartitionStorage>> {
        let shared = self
            .partitions()
            .get(id)
            .cloned()
            .ok_or_else(|| StorageError::NotFound(id.clone()))?;
        // Reopening clears poisoning, as reopening a file-backed partition re-reads what is durable.
        {
            let mut data = lock(&shared);
            data.poisoned = None;
            data.fail_next_sync = false;
        }
        Ok(Box::new(MemoryPartition {
            id: id.clone(),
            shared,
        }))
    }

    async fn list(&self) -> Result<Vec<PartitionId>> {
        Ok(self.partitions().keys().cloned().collect())
    }

    async fn delete(&self, id: &PartitionId) -> Result<()> {
        self.partitions()
            .remove(id)
            .map(|_| ())
            .ok_or_else(|| StorageError::NotFound(id.clone()))
    }
}

/// A handle to one in-memory partition.
#[derive(Debug)]
pub struct MemoryPartition {
    id: PartitionId,
    shared: Shared,
}

impl MemoryPartition {
    fn data(&self) -> MutexGuard<'_, PartitionData> {
        lock(&self.shared)
    }

    /// The data, refusing if an earlier sync failed.
    fn writable(&self) -> Result<MutexGuard<'_, PartitionData>> {
        let data = self.data();
        match &data.poisoned {
            Some(reason) => Err(StorageError::Poisoned {
                reason: reason.clone(),
            }),
            None => Ok(data),
        }
    }
}

fn empty_at(data: &mut PartitionData, offset: i64) {
    data.batches = BatchMap::new();
    data.aborted.clear();
    data.log_start = offset;
    data.log_end = offset;
}

#[async_trait]
impl PartitionStorage for MemoryPartition {
    fn id(&self) -> &PartitionId {
        &self.id
    }

    fn log_start_offset(&self) -> i64 {
        self.data().log_start
    }

    fn log_end_offset(&self) -> i64 {
        self.data().log_end
    }

    async fn append(&mut self, batches: &[RecordBatch]) -> Result<()> {
        let mut data = self.writable()?;
        let next = check_append(data.log_end, batches)?;
        for batch in batches {
            data.batches.insert(batch, batch.clone());
        }
        data.log_end = next;
        Ok(())
    }

    async fn read(&self, from_offset: i64, max_bytes: usize) -> Result<Vec<RecordBatch>> {
        let data = self.data();
        check_read_offset(from_offset, data.log_start, data.log_end)?;
        Ok(data.batches.read_plan(from_offset, max_bytes))
    }

    async fn truncate_to(&mut self, offset: i64) -> Result<()> {
        let mut data = self.writable()?;
        match truncation(offset, data.log_start, data.log_end) {
            Truncation::Nothing => return Ok(()),
            Truncation::EmptyAt(offset) => {
                empty_at(&mut data, offset);
                return Ok(());
            }
            Truncation::CutAt(_) => {}
        }
        data.batches.check_boundary(offset)?;
        data.batches.split_off(offset);
        data.aborted.retain(|entry| entry.last_offset < offset);
        data.log_end = offset;
        Ok(())
    }

    async fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<()> {
        let mut data = self.writable()?;
        empty_at(&mut data, offset);
        Ok(())
    }

    async fn delete_before(&mut self, offset: i64) -> Result<()> {
        let mut data = self.writable()?;
        if !check_delete_before(offset, data.log_start, data.log_end)? {
            return Ok(());
        }
        data.batches.remove_below(offset);
        data.log_start = offset;
        Ok(())
    }

    async fn flush(&mut self, durability: Durability) -> Result<()> {
        let mut data = self.writable()?;
        if durability == Durability::Sync && std::mem::take(&mut data.fail_next_sync) {
            let reason = "injected sync failure".to_owned();
            data.poisoned = Some(reason.clone());
            return Err(StorageError::Poisoned { reason });
        }
        Ok(())
    }

    async fn put_snapshot(&mut self, offset: i64, bytes: Bytes) -> Result<()> {
        self.writable()?.snapshots.insert(offset, bytes);
        Ok(())
    }

    async fn snapshot_at_or_below(&self, offset: i64) -> Result<Option<(i64, Bytes)>> {
        Ok(self
            .data()
            .snapshots
            .range(..=offset)
            .next_back()
            .map(|(offset, bytes)| (*offset, bytes.clone())))
    }

    async fn snapshot_offsets(&self) -> Result<Vec<i64>> {
        Ok(self.data().snapshots.keys().copied().collect())
    }

    async fn delete_snapshot(&mut self, offset: i64) -> Result<()> {
        self.writable()?.snapshots.remove(&offset);
        Ok(())
    }

    async fn append_aborted_txn(&mut self, entry: AbortedTxn) -> Result<()> {
        let mut data = self.writable()?;
        check_aborted_txn(data.aborted.last(), &entry)?;
        data.aborted.push(entry);
        Ok(())
    }

    async fn aborted_txns(&self, from_offset: i64, upper_bound: i64) -> Result<Vec<AbortedTxn>> {
        Ok(select_aborted(&self.data().aborted, from_offset, upper_bound))
    }

    async fn put_metadata(&mut self, key: &str, value: &[u8]) -> Result<()> {
        check_metadata_key(key)?;
        self.writable()?.metadata.insert(key.to_owned(), value.to_vec());
        Ok(())
    }

    async fn metadata(&self, key: &str) -> Result<Option<Vec<u8>>> {
        check_metadata_key(key)?;
        Ok(self.data().metadata.get(key).cloned())
    }
}
