//! Partition storage on [sled](https://docs.rs/sled/0.34.7) 0.34.7.
//!
//! One sled database per store; one tree per partition (`partition/{topic}-{partition}`), with keys
//!
//! ```text
//! b'b' + base offset (8 bytes, order-preserving)   → the batch's bytes, as received
//! b's' + offset                                    → a producer snapshot
//! b'a' + last offset + first offset                → an aborted-transaction entry (Kafka's 34 bytes)
//! b'm' + key                                       → a metadata record
//! b'@' + "start" / "end"                           → log start and end offsets
//! ```
//!
//! Every change is one atomic `sled::Batch` on the partition's tree (a batch append and the new log end offset
//! land together). sled's background flusher is switched off: data is durable only after `flush(Sync)`, which
//! calls `Db::flush`; a failed flush poisons the store.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use record_format::batch::LOG_OVERHEAD;
use record_format::{AbortedTxn, RecordBatch};
use storage::partition::{
    check_aborted_txn, check_append, check_delete_before, check_metadata_key, check_read_offset,
    select_aborted, truncation, Truncation,
};
use storage::{Durability, PartitionId, PartitionStorage, Storage, StorageError};

const TREE_PREFIX: &str = "partition/";
const BATCH: u8 = b'b';
const SNAPSHOT: u8 = b's';
const ABORTED: u8 = b'a';
const METADATA: u8 = b'm';
const LOG_START: &[u8] = b"@start";
const LOG_END: &[u8] = b"@end";

fn backend_error(error: sled::Error) -> StorageError {
    StorageError::Backend {
        backend: "sled",
        message: error.to_string(),
    }
}

/// An offset as a key suffix that sorts like the number (sign bit flipped).
fn offset_key(tag: u8, offset: i64) -> [u8; 9] {
    let mut key = [tag; 9];
    key[1..].copy_from_slice(&((offset as u64) ^ (1 << 63)).to_be_bytes());
    key
}

/// An aborted-transaction entry's key: by last offset, then first offset (a barrier aborts several
/// transactions at one offset).
fn aborted_key(entry: &AbortedTxn) -> [u8; 17] {
    let mut key = [0; 17];
    key[..9].copy_from_slice(&offset_key(ABORTED, entry.last_offset));
    key[9..].copy_from_slice(&((entry.first_offset as u64) ^ (1 << 63)).to_be_bytes());
    key
}

fn key_offset(key: &[u8]) -> Option<i64> {
    let raw: [u8; 8] = key.get(1..9)?.try_into().ok()?;
    Some((u64::from_be_bytes(raw) ^ (1 << 63)) as i64)
}

fn decode_i64(value: Option<sled::IVec>) -> Option<i64> {
    value
        .and_then(|v| v.as_ref().try_into().ok())
        .map(i64::from_be_bytes)
}

/// Options of the sled backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SledConfig {
    /// The database directory.
    pub data_dir: PathBuf,
    /// sled's page cache, in bytes.
    pub cache_capacity: u64,
}

impl SledConfig {
    /// Defaults under `data_dir` (64 MiB cache).
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        SledConfig {
            data_dir: data_dir.into(),
            cache_capacity: 64 * 1024 * 1024,
        }
    }
}

#[derive(Debug, Default)]
struct Shared {
    poisoned: Mutex<Option<String>>,
    fail_next_sync: Mutex<BTreeSet<PartitionId>>,
}

impl Shared {
    fn poisoned(&self) -> Option<String> {
        self.poisoned.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn poison(&self, reason: String) {
        *self.poisoned.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason);
    }
}

/// The sled store.
#[derive(Debug, Clone)]
pub struct SledStorage {
    db: sled::Db,
    shared: Arc<Shared>,
}

impl SledStorage {
    /// Opens (or creates) the database.
    ///
    /// sled locks its directory; a handle dropped just before may still hold the lock while its threads wind
    /// down, so a lock held elsewhere is retried for up to [`Self::LOCK_WAIT`] before it is reported.
    pub fn open(config: SledConfig) -> Result<Self, StorageError> {
        let started = std::time::Instant::now();
        let db = loop {
            match sled::Config::new()
                .path(&config.data_dir)
                .cache_capacity(config.cache_capacity)
                .flush_every_ms(None)
                .open()
            {
                // sled reports a held lock as an `Other` I/O error with this message.
                Err(sled::Error::Io(error))
                    if error.to_string().starts_with("could not acquire lock")
                        && started.elapsed() < Self::LOCK_WAIT =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                result => break result.map_err(backend_error)?,
            }
        };
        Ok(SledStorage {
            db,
            shared: Arc::default(),
        })
    }

    /// How long `open` waits for a directory lock held by a handle that is closing.
    pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

    fn tree_name(id: &PartitionId) -> String {
        format!("{TREE_PREFIX}{}", id.dir_name())
    }

    fn exists(&self, id: &PartitionId) -> Result<bool, StorageError> {
        Ok(self
            .db
            .tree_names()
            .iter()
            .any(|name| name.as_ref() == Self::tree_name(id).as_bytes()))
    }

    /// Makes the next sync of `id` fail (tests of poisoning).
    pub fn fail_next_sync(&self, id: &PartitionId) {
        self.shared
            .fail_next_sync
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone());
    }

    fn partition(&self, id: &PartitionId) -> Result<SledPartition, StorageError> {
        let tree = self.db.open_tree(Self::tree_name(id)).map_err(backend_error)?;
        let log_start = decode_i64(tree.get(LOG_START).map_err(backend_error)?).unwrap_or(0);
        let log_end = decode_i64(tree.get(LOG_END).map_err(backend_error)?).unwrap_or(0);
        let last_aborted = tree
            .scan_prefix([ABORTED])
            .next_back()
            .transpose()
            .map_err(backend_error)?
            .and_then(|(_, value)| decode_aborted(&value).ok());
        Ok(SledPartition {
            id: id.clone(),
            db: self.db.clone(),
            tree,
            shared: self.shared.clone(),
            log_start,
            log_end,
            last_aborted,
        })
    }
}

fn decode_aborted(value: &[u8]) -> Result<AbortedTxn, StorageError> {
    let bytes: &[u8; record_format::txn_index::ABORTED_TXN_LEN] =
        value.try_into().map_err(|_| StorageError::Corrupt {
            what: "sled aborted-transaction entry".into(),
            reason: format!("{} bytes", value.len()),
        })?;
    AbortedTxn::decode(bytes).map_err(|e| StorageError::Corrupt {
        what: "sled aborted-transaction entry".into(),
        reason: e.to_string(),
    })
}

#[async_trait]
impl Storage for SledStorage {
    async fn create(&self, id: &PartitionId) -> Result<Box<dyn PartitionStorage>, StorageError> {
        if self.exists(id)? {
            return Err(StorageError::AlreadyExists(id.clone()));
        }
        let partition = self.partition(id)?;
        let mut batch = sled::Batch::default();
        batch.insert(LOG_START, &0i64.to_be_bytes());
        batch.insert(LOG_END, &0i64.to_be_bytes());
        partition.tree.apply_batch(batch).map_err(backend_error)?;
        Ok(Box::new(partition))
    }

    async fn open(&self, id: &PartitionId) -> Result<Box<dyn PartitionStorage>, StorageError> {
        if !self.exists(id)? {
            return Err(StorageError::NotFound(id.clone()));
        }
        // Reopening clears poisoning; what sled recovered is what was durable.
        *self.shared.poisoned.lock().unwrap_or_else(|p| p.into_inner()) = None;
        Ok(Box::new(self.partition(id)?))
    }

    async fn list(&self) -> Result<Vec<PartitionId>, StorageError> {
        let mut ids: Vec<PartitionId> = self
            .db
            .tree_names()
            .iter()
            .filter_map(|name| {
                std::str::from_utf8(name)
                    .ok()?
                    .strip_prefix(TREE_PREFIX)
                    .map(str::to_owned)
            })
            .filter_map(|name| PartitionId::from_dir_name(&name).ok())
            .collect();
        ids.sort();
        Ok(ids)
    }

    async fn delete(&self, id: &PartitionId) -> Result<(), StorageError> {
        if !self.exists(id)? {
            return Err(StorageError::NotFound(id.clone()));
        }
        self.db.drop_tree(Self::tree_name(id)).map_err(backend_error)?;
        Ok(())
    }
}

/// One partition's tree.
#[derive(Debug)]
pub struct SledPartition {
    id: PartitionId,
    db: sled::Db,
    tree: sled::Tree,
    shared: Arc<Shared>,
    log_start: i64,
    log_end: i64,
    last_aborted: Option<AbortedTxn>,
}

impl SledPartition {
    fn writable(&self) -> Result<(), StorageError> {
        match self.shared.poisoned() {
            Some(reason) => Err(StorageError::Poisoned { reason }),
            None => Ok(()),
        }
    }

    fn apply(&self, batch: sled::Batch) -> Result<(), StorageError> {
        self.tree.apply_batch(batch).map_err(backend_error)
    }

    /// The stored batch at `key`, checked.
    fn decode_batch(key: &[u8], value: sled::IVec) -> Result<RecordBatch, StorageError> {
        RecordBatch::decode(Bytes::copy_from_slice(&value)).map_err(|e| StorageError::Corrupt {
            what: format!("sled batch at offset {}", key_offset(key).unwrap_or(-1)),
            reason: e.to_string(),
        })
    }

    /// Base and last offset of the batch starting before `offset`, if any.
    fn batch_before(&self, offset: i64) -> Result<Option<(i64, i64)>, StorageError> {
        let Some((key, value)) = self
            .tree
            .get_lt(offset_key(BATCH, offset))
            .map_err(backend_error)?
        else {
            return Ok(None);
        };
        if key.first() != Some(&BATCH) || value.len() < LOG_OVERHEAD + 15 {
            return Ok(None);
        }
        let batch = Self::decode_batch(&key, value)?;
        Ok(Some((batch.base_offset(), batch.last_offset())))
    }

    fn empty_at(&mut self, offset: i64) -> Result<(), StorageError> {
        let mut batch = sled::Batch::default();
        for tag in [BATCH, ABORTED] {
            for key in self.tree.scan_prefix([tag]).keys() {
                batch.remove(key.map_err(backend_error)?);
            }
        }
        batch.insert(LOG_START, &offset.to_be_bytes());
        batch.insert(LOG_END, &offset.to_be_bytes());
        self.apply(batch)?;
        self.log_start = offset;
        self.log_end = offset;
        self.last_aborted = None;
        Ok(())
    }
}

#[async_trait]
impl PartitionStorage for SledPartition {
    fn id(&self) -> &PartitionId {
        &self.id
    }

    fn log_start_offset(&self) -> i64 {
        self.log_start
    }

    fn log_end_offset(&self) -> i64 {
        self.log_end
    }

    async fn append(&mut self, batches: &[RecordBatch]) -> Result<(), StorageError> {
        self.writable()?;
        let next = check_append(self.log_end, batches)?;
        let mut write = sled::Batch::default();
        for batch in batches {
            write.insert(&offset_key(BATCH, batch.base_offset()), batch.as_bytes().as_ref());
        }
        write.insert(LOG_END, &next.to_be_bytes());
        self.apply(write)?;
        self.log_end = next;
        Ok(())
    }

    async fn read(&self, from_offset: i64, max_bytes: usize) -> Result<Vec<RecordBatch>, StorageError> {
        check_read_offset(from_offset, self.log_start, self.log_end)?;
        let start = match self.batch_before(from_offset + 1)? {
            Some((base, last)) if last >= from_offset => base,
            _ => from_offset,
        };
        let mut out = Vec::new();
        let mut total = 0usize;
        for entry in self
            .tree
            .range(offset_key(BATCH, start)..offset_key(BATCH, i64::MAX))
        {
            let (key, value) = entry.map_err(backend_error)?;
            if !out.is_empty() && total.saturating_add(value.len()) > max_bytes {
                break;
            }
            total = total.saturating_add(value.len());
            out.push(Self::decode_batch(&key, value)?);
        }
        Ok(out)
    }

    async fn truncate_to(&mut self, offset: i64) -> Result<(), StorageError> {
        self.writable()?;
        match truncation(offset, self.log_start, self.log_end) {
            Truncation::Nothing => return Ok(()),
            Truncation::EmptyAt(offset) => return self.empty_at(offset),
            Truncation::CutAt(_) => {}
        }
        if let Some((base, last)) = self.batch_before(offset)? {
            if last >= offset {
                return Err(StorageError::NotABatchBoundary {
                    offset,
                    base_offset: base,
                    last_offset: last,
                });
            }
        }
        let mut batch = sled::Batch::default();
        for key in self
            .tree
            .range(offset_key(BATCH, offset)..=offset_key(BATCH, i64::MAX))
            .keys()
        {
            batch.remove(key.map_err(backend_error)?);
        }
        for key in self
            .tree
            .range(offset_key(ABORTED, offset)..=offset_key(ABORTED, i64::MAX))
            .keys()
        {
            batch.remove(key.map_err(backend_error)?);
        }
        batch.insert(LOG_END, &offset.to_be_bytes());
        self.apply(batch)?;
        self.log_end = offset;
        self.last_aborted = self
            .tree
            .scan_prefix([ABORTED])
            .next_back()
            .transpose()
            .map_err(backend_error)?
            .map(|(_, value)| decode_aborted(&value))
            .transpose()?;
        Ok(())
    }

    async fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), StorageError> {
        self.writable()?;
        self.empty_at(offset)
    }

    async fn delete_before(&mut self, offset: i64) -> Result<(), StorageError> {
        self.writable()?;
        if !check_delete_before(offset, self.log_start, self.log_end)? {
            return Ok(());
        }
        // Batches wholly below the new start go; one straddling it stays readable.
        let keep_from = match self.batch_before(offset)? {
            Some((base, last)) if last >= offset => base,
            _ => offset,
        };
        let mut batch = sled::Batch::default();
        for key in self
            .tree
            .range(offset_key(BATCH, i64::MIN)..offset_key(BATCH, keep_from))
            .keys()
        {
            batch.remove(key.map_err(backend_error)?);
        }
        batch.insert(LOG_START, &offset.to_be_bytes());
        self.apply(batch)?;
        self.log_start = offset;
        Ok(())
    }

    async fn flush(&mut self, durability: Durability) -> Result<(), StorageError> {
        self.writable()?;
        if durability == Durability::Buffered {
            return Ok(());
        }
        let injected = self
            .shared
            .fail_next_sync
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
        let result = if injected {
            Err("injected sync failure".to_owned())
        } else {
            self.db.flush().map(|_| ()).map_err(|e| e.to_string())
        };
        result.map_err(|reason| {
            self.shared.poison(reason.clone());
            StorageError::Poisoned { reason }
        })
    }

    async fn put_snapshot(&mut self, offset: i64, bytes: Bytes) -> Result<(), StorageError> {
        self.writable()?;
        self.tree
            .insert(offset_key(SNAPSHOT, offset), bytes.as_ref())
            .map_err(backend_error)?;
        // Snapshot writes are durable when they return.
        self.flush(Durability::Sync).await
    }

    async fn snapshot_at_or_below(&self, offset: i64) -> Result<Option<(i64, Bytes)>, StorageError> {
        let found = self
            .tree
            .range(offset_key(SNAPSHOT, i64::MIN)..=offset_key(SNAPSHOT, offset))
            .next_back()
            .transpose()
            .map_err(backend_error)?;
        Ok(found.and_then(|(key, value)| Some((key_offset(&key)?, Bytes::copy_from_slice(&value)))))
    }

    async fn snapshot_offsets(&self) -> Result<Vec<i64>, StorageError> {
        self.tree
            .scan_prefix([SNAPSHOT])
            .keys()
            .map(|key| {
                key.map_err(backend_error)
                    .map(|key| key_offset(&key).unwrap_or(-1))
            })
            .collect()
    }

    async fn delete_snapshot(&mut self, offset: i64) -> Result<(), StorageError> {
        self.writable()?;
        self.tree
            .remove(offset_key(SNAPSHOT, offset))
            .map_err(backend_error)?;
        Ok(())
    }

    async fn append_aborted_txn(&mut self, entry: AbortedTxn) -> Result<(), StorageError> {
        self.writable()?;
        check_aborted_txn(self.last_aborted.as_ref(), &entry)?;
        self.tree
            .insert(aborted_key(&entry), entry.encode().as_ref())
            .map_err(backend_error)?;
        self.last_aborted = Some(entry);
        Ok(())
    }

    async fn aborted_txns(
        &self,
        from_offset: i64,
        upper_bound: i64,
    ) -> Result<Vec<AbortedTxn>, StorageError> {
        let mut entries = Vec::new();
        for entry in self
            .tree
            .range(offset_key(ABORTED, from_offset)..=offset_key(ABORTED, i64::MAX))
        {
            let (_, value) = entry.map_err(backend_error)?;
            entries.push(decode_aborted(&value)?);
        }
        Ok(select_aborted(&entries, from_offset, upper_bound))
    }

    async fn put_metadata(&mut self, key: &str, value: &[u8]) -> Result<(), StorageError> {
        check_metadata_key(key)?;
        self.writable()?;
        let mut stored_key = vec![METADATA];
        stored_key.extend_from_slice(key.as_bytes());
        self.tree.insert(stored_key, value).map_err(backend_error)?;
        self.flush(Durability::Sync).await
    }

    async fn metadata(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        check_metadata_key(key)?;
        let mut stored_key = vec![METADATA];
        stored_key.extend_from_slice(key.as_bytes());
        Ok(self
            .tree
            .get(stored_key)
            .map_err(backend_error)?
            .map(|value| value.to_vec()))
    }
}
