//! Bridges the producer-state manager's synchronous [`SnapshotStore`] to the asynchronous storage trait.
//!
//! The manager reads, writes and deletes snapshots synchronously; the storage is async. [`SnapshotMirror`] keeps
//! the offsets (and, when loaded, the bytes) of the partition's snapshots, records the manager's writes and
//! deletes, and [`SnapshotMirror::flush`] applies them to storage in order. Bytes are loaded only for the
//! operations that read (rebuilds), and dropped once written.

use std::collections::BTreeMap;

use bytes::Bytes;
use producer_state::SnapshotStore;
use storage::PartitionStorage;

use crate::Result;

/// A pending change to the stored snapshots.
#[derive(Debug, Clone)]
enum Change {
    Put(i64, Bytes),
    Delete(i64),
}

/// The partition's snapshots as the manager sees them; see the module docs.
#[derive(Debug, Default)]
pub(crate) struct SnapshotMirror {
    /// offset → bytes when loaded (`None`: stored, not loaded).
    snapshots: BTreeMap<i64, Option<Bytes>>,
    pending: Vec<Change>,
}

impl SnapshotMirror {
    /// The snapshots stored in `storage` (offsets only).
    pub(crate) async fn scan(storage: &dyn PartitionStorage) -> Result<Self> {
        let snapshots = storage
            .snapshot_offsets()
            .await?
            .into_iter()
            .map(|offset| (offset, None))
            .collect();
        Ok(SnapshotMirror {
            snapshots,
            pending: Vec::new(),
        })
    }

    /// Loads the bytes of every snapshot not loaded yet (before the manager reads them).
    pub(crate) async fn load_all(&mut self, storage: &dyn PartitionStorage) -> Result<()> {
        let missing: Vec<i64> = self
            .snapshots
            .iter()
            .filter(|(_, bytes)| bytes.is_none())
            .map(|(offset, _)| *offset)
            .collect();
        for offset in missing {
            match storage.snapshot_at_or_below(offset).await? {
                Some((found, bytes)) if found == offset => {
                    self.snapshots.insert(offset, Some(bytes));
                }
                // Gone from storage since the scan: forget it.
                _ => {
                    self.snapshots.remove(&offset);
                }
            }
        }
        Ok(())
    }

    /// Applies the manager's writes and deletes to storage, in order, and drops the loaded bytes.
    pub(crate) async fn flush(&mut self, storage: &mut dyn PartitionStorage) -> Result<()> {
        for change in std::mem::take(&mut self.pending) {
            match change {
                Change::Put(offset, bytes) => storage.put_snapshot(offset, bytes).await?,
                Change::Delete(offset) => storage.delete_snapshot(offset).await?,
            }
        }
        for bytes in self.snapshots.values_mut() {
            *bytes = None;
        }
        Ok(())
    }

    /// Offsets of the snapshots, ascending.
    pub(crate) fn offsets(&self) -> Vec<i64> {
        self.snapshots.keys().copied().collect()
    }
}

impl SnapshotStore for SnapshotMirror {
    fn offsets(&self) -> Vec<i64> {
        SnapshotMirror::offsets(self)
    }

    fn read(&self, offset: i64) -> Option<Vec<u8>> {
        self.snapshots
            .get(&offset)
            .and_then(|bytes| bytes.as_ref())
            .map(|bytes| bytes.to_vec())
    }

    fn write(&mut self, offset: i64, bytes: Vec<u8>) {
        let bytes = Bytes::from(bytes);
        self.snapshots.insert(offset, Some(bytes.clone()));
        self.pending.push(Change::Put(offset, bytes));
    }

    fn delete(&mut self, offset: i64) {
        self.snapshots.remove(&offset);
        self.pending.push(Change::Delete(offset));
    }

    fn latest(&self) -> Option<i64> {
        self.snapshots.keys().next_back().copied()
    }
}
