//! The in-memory reference backend.
//!
//! Everything lives in memory shared by every handle of the same [`MemoryStorage`], so reopening a partition
//! sees what was written (there is no crash to survive). It implements the backend traits as plainly as
//! possible and is the yardstick the conformance suite was written against. Its calls never block, so they run
//! on the caller's thread.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use record_format::{AbortedTxn, RecordBatch};

use crate::blocking::{BlockingPartition, BlockingStore, OpenMode};
use crate::error::StorageError;
use crate::id::PartitionId;
use crate::partition::{select_aborted, BatchMap, Durability};
use crate::Result;

#[derive(Debug, Default)]
struct PartitionData {
    log_start: i64,
    log_end: i64,
    batches: BatchMap<RecordBatch>,
    snapshots: BTreeMap<i64, Bytes>,
    aborted: Vec<AbortedTxn>,
    metadata: BTreeMap<String, Vec<u8>>,
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
}

impl BlockingStore for MemoryStorage {
    fn create(&self, id: &PartitionId) -> Result<Box<dyn BlockingPartition>> {
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

    fn open(&self, id: &PartitionId, _mode: OpenMode) -> Result<Box<dyn BlockingPartition>> {
        let shared = self
            .partitions()
            .get(id)
            .cloned()
            .ok_or_else(|| StorageError::NotFound(id.clone()))?;
        Ok(Box::new(MemoryPartition {
            id: id.clone(),
            shared,
        }))
    }

    fn list(&self) -> Result<Vec<PartitionId>> {
        Ok(self.partitions().keys().cloned().collect())
    }

    fn delete(&self, id: &PartitionId) -> Result<()> {
        self.partitions()
            .remove(id)
            .map(|_| ())
            .ok_or_else(|| StorageError::NotFound(id.clone()))
    }

    fn never_blocks(&self) -> bool {
        true
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
}

fn empty_at(data: &mut PartitionData, offset: i64) {
    data.batches = BatchMap::new();
    data.aborted.clear();
    data.log_start = offset;
    data.log_end = offset;
}

impl BlockingPartition for MemoryPartition {
    fn id(&self) -> &PartitionId {
        &self.id
    }

    fn log_start_offset(&self) -> i64 {
        self.data().log_start
    }

    fn log_end_offset(&self) -> i64 {
        self.data().log_end
    }

    fn append(&mut self, batches: &[RecordBatch]) -> Result<()> {
        let mut data = self.data();
        for batch in batches {
            data.batches.insert(batch, batch.clone());
            data.log_end = batch.next_offset();
        }
        Ok(())
    }

    fn read(&self, from_offset: i64, max_bytes: usize) -> Result<Vec<RecordBatch>> {
        Ok(self.data().batches.read_plan(from_offset, max_bytes))
    }

    fn size_bytes(&self) -> Result<u64> {
        let data = self.data();
        Ok(data.batches.iter().map(|(_, _, size, _)| size as u64).sum())
    }

    fn truncate_to(&mut self, offset: i64) -> Result<()> {
        let mut data = self.data();
        data.batches.check_boundary(offset)?;
        data.batches.split_off(offset);
        data.aborted.retain(|entry| entry.survives_truncation_to(offset));
        data.log_end = offset;
        Ok(())
    }

    fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<()> {
        let mut data = self.data();
        empty_at(&mut data, offset);
        Ok(())
    }

    fn replace_batches(&mut self, from: i64, to: i64, batches: &[RecordBatch]) -> Result<()> {
        let mut data = self.data();
        let after = data.batches.split_off(to);
        data.batches.split_off(from);
        for batch in batches.iter().chain(after.iter().map(|(_, batch)| batch)) {
            data.batches.insert(batch, batch.clone());
        }
        Ok(())
    }

    fn delete_before(&mut self, offset: i64) -> Result<()> {
        let mut data = self.data();
        data.batches.remove_below(offset);
        data.log_start = offset;
        Ok(())
    }

    fn flush(&mut self, _durability: Durability) -> Result<()> {
        Ok(())
    }

    fn put_snapshot(&mut self, offset: i64, bytes: Bytes) -> Result<()> {
        self.data().snapshots.insert(offset, bytes);
        Ok(())
    }

    fn snapshot_at_or_below(&self, offset: i64) -> Result<Option<(i64, Bytes)>> {
        Ok(self
            .data()
            .snapshots
            .range(..=offset)
            .next_back()
            .map(|(offset, bytes)| (*offset, bytes.clone())))
    }

    fn snapshot_offsets(&self) -> Result<Vec<i64>> {
        Ok(self.data().snapshots.keys().copied().collect())
    }

    fn delete_snapshot(&mut self, offset: i64) -> Result<()> {
        self.data().snapshots.remove(&offset);
        Ok(())
    }

    fn append_aborted_txn(&mut self, entry: AbortedTxn) -> Result<()> {
        self.data().aborted.push(entry);
        Ok(())
    }

    fn last_aborted_txn(&self) -> Result<Option<AbortedTxn>> {
        Ok(self.data().aborted.last().copied())
    }

    fn aborted_txns(&self, from_offset: i64, upper_bound: i64) -> Result<Vec<AbortedTxn>> {
        Ok(select_aborted(&self.data().aborted, from_offset, upper_bound))
    }

    fn put_metadata(&mut self, key: &str, value: &[u8]) -> Result<()> {
        self.data().metadata.insert(key.to_owned(), value.to_vec());
        Ok(())
    }

    fn metadata(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.data().metadata.get(key).cloned())
    }
}
