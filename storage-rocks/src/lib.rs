//! Partition storage on RocksDB.
//!
//! One database per store with four column families; every key starts with the partition's key prefix
//! (`u16 length | "{topic}-{partition}"`), so partitions are contiguous ranges:
//!
//! ```text
//! batches   prefix + base offset (8 bytes, order-preserving)  → the batch's bytes, as received
//! snapshots prefix + offset                                   → a producer snapshot
//! aborted   prefix + last offset + first offset               → an aborted-transaction entry (34 bytes)
//! meta      prefix + 'm' + key / prefix + '@start' / '@end'   → metadata records, log start and end offsets
//! ```
//!
//! Every change is one `WriteBatch` across the column families (a batch append and the new log end offset land
//! together). Appends are written without sync; `flush(Sync)` syncs the write-ahead log; metadata and snapshot
//! writes use synced writes. A failed sync poisons the store.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use record_format::{AbortedTxn, RecordBatch};
use rocksdb::{ColumnFamilyDescriptor, Direction, IteratorMode, Options, WriteBatch, WriteOptions, DB};
use storage::partition::{
    check_aborted_txn, check_append, check_delete_before, check_metadata_key, check_read_offset,
    select_aborted, truncation, Truncation,
};
use storage::{Durability, PartitionId, PartitionStorage, Storage, StorageError};

const BATCHES: &str = "batches";
const SNAPSHOTS: &str = "snapshots";
const ABORTED: &str = "aborted";
const META: &str = "meta";
const COLUMN_FAMILIES: [&str; 4] = [BATCHES, SNAPSHOTS, ABORTED, META];

fn backend_error(error: rocksdb::Error) -> StorageError {
    StorageError::Backend {
        backend: "rocksdb",
        message: error.to_string(),
    }
}

/// Options of the RocksDB backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RocksConfig {
    /// The database directory.
    pub data_dir: PathBuf,
}

impl RocksConfig {
    /// Defaults under `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        RocksConfig {
            data_dir: data_dir.into(),
        }
    }
}

#[derive(Debug, Default)]
struct Shared {
    poisoned: Mutex<Option<String>>,
    fail_next_sync: Mutex<BTreeSet<PartitionId>>,
}

/// The RocksDB store.
#[derive(Clone)]
pub struct RocksStorage {
    db: Arc<DB>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for RocksStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksStorage")
            .field("path", &self.db.path())
            .finish()
    }
}

fn prefix(id: &PartitionId) -> Vec<u8> {
    let name = id.dir_name();
    let mut out = Vec::with_capacity(2 + name.len());
    out.extend_from_slice(&(name.len() as u16).to_be_bytes());
    out.extend_from_slice(name.as_bytes());
    out
}

fn with_offset(prefix: &[u8], offset: i64) -> Vec<u8> {
    let mut key = Vec::with_capacity(prefix.len() + 8);
    key.extend_from_slice(prefix);
    key.extend_from_slice(&((offset as u64) ^ (1 << 63)).to_be_bytes());
    key
}

/// An aborted-transaction entry's key: by last offset, then first offset (a barrier aborts several
/// transactions at one offset).
fn aborted_key(prefix: &[u8], entry: &AbortedTxn) -> Vec<u8> {
    let mut key = with_offset(prefix, entry.last_offset);
    key.extend_from_slice(&((entry.first_offset as u64) ^ (1 << 63)).to_be_bytes());
    key
}

/// The offset a key starts with after the prefix (batches, snapshots: the whole key; aborted entries: the last
/// offset).
fn key_offset(prefix: &[u8], key: &[u8]) -> Option<i64> {
    let raw: [u8; 8] = key.strip_prefix(prefix)?.get(..8)?.try_into().ok()?;
    Some((u64::from_be_bytes(raw) ^ (1 << 63)) as i64)
}

fn with_suffix(prefix: &[u8], suffix: &[u8]) -> Vec<u8> {
    [prefix, suffix].concat()
}

impl RocksStorage {
    /// Opens (or creates) the database.
    pub fn open(config: RocksConfig) -> Result<Self, StorageError> {
        let mut options = Options::default();
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        let families = COLUMN_FAMILIES
            .iter()
            .map(|name| ColumnFamilyDescriptor::new(*name, Options::default()));
        let db = DB::open_cf_descriptors(&options, &config.data_dir, families).map_err(backend_error)?;
        Ok(RocksStorage {
            db: Arc::new(db),
            shared: Arc::default(),
        })
    }

    /// Makes the next sync of `id` fail (tests of poisoning).
    pub fn fail_next_sync(&self, id: &PartitionId) {
        self.shared
            .fail_next_sync
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone());
    }

    fn exists(&self, id: &PartitionId) -> Result<bool, StorageError> {
        let db = Db(&self.db);
        Ok(db.get(META, &with_suffix(&prefix(id), b"@end"))?.is_some())
    }

    fn partition(&self, id: &PartitionId) -> Result<RocksPartition, StorageError> {
        let prefix = prefix(id);
        let db = Db(&self.db);
        let read_i64 = |suffix: &[u8]| -> Result<i64, StorageError> {
            Ok(db
                .get(META, &with_suffix(&prefix, suffix))?
                .and_then(|value| value.as_slice().try_into().ok())
                .map_or(0, i64::from_be_bytes))
        };
        let log_start = read_i64(b"@start")?;
        let log_end = read_i64(b"@end")?;
        let mut partition = RocksPartition {
            id: id.clone(),
            prefix,
            db: self.db.clone(),
            shared: self.shared.clone(),
            log_start,
            log_end,
            last_aborted: None,
        };
        partition.last_aborted = partition.last_aborted_entry()?;
        Ok(partition)
    }
}

/// A key and its value as RocksDB returns them.
type Entry = (Box<[u8]>, Box<[u8]>);

/// Column-family access with errors mapped.
struct Db<'a>(&'a DB);

impl<'a> Db<'a> {
    fn cf(&self, name: &str) -> Result<&'a rocksdb::ColumnFamily, StorageError> {
        self.0.cf_handle(name).ok_or_else(|| StorageError::Backend {
            backend: "rocksdb",
            message: format!("column family {name} missing"),
        })
    }

    fn get(&self, family: &str, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        self.0.get_cf(self.cf(family)?, key).map_err(backend_error)
    }

    /// Entries of `family` from `start` in `direction`, while their key starts with `prefix`.
    fn scan(
        &self,
        family: &str,
        prefix: &[u8],
        start: &[u8],
        direction: Direction,
    ) -> Result<Vec<Entry>, StorageError> {
        let mut out = Vec::new();
        for entry in self
            .0
            .iterator_cf(self.cf(family)?, IteratorMode::From(start, direction))
        {
            let (key, value) = entry.map_err(backend_error)?;
            if !key.starts_with(prefix) {
                break;
            }
            out.push((key, value));
        }
        Ok(out)
    }

    /// The first entry of `family` at or before `key` (in key order) within `prefix`.
    fn at_or_before(&self, family: &str, prefix: &[u8], key: &[u8]) -> Result<Option<Entry>, StorageError> {
        let mut iterator = self
            .0
            .iterator_cf(self.cf(family)?, IteratorMode::From(key, Direction::Reverse));
        match iterator.next() {
            Some(entry) => {
                let (found, value) = entry.map_err(backend_error)?;
                Ok(found.starts_with(prefix).then_some((found, value)))
            }
            None => Ok(None),
        }
    }
}

fn decode_aborted(value: &[u8]) -> Result<AbortedTxn, StorageError> {
    let bytes: &[u8; record_format::txn_index::ABORTED_TXN_LEN] =
        value.try_into().map_err(|_| StorageError::Corrupt {
            what: "rocksdb aborted-transaction entry".into(),
            reason: format!("{} bytes", value.len()),
        })?;
    AbortedTxn::decode(bytes).map_err(|e| StorageError::Corrupt {
        what: "rocksdb aborted-transaction entry".into(),
        reason: e.to_string(),
    })
}

#[async_trait]
impl Storage for RocksStorage {
    async fn create(&self, id: &PartitionId) -> Result<Box<dyn PartitionStorage>, StorageError> {
        if self.exists(id)? {
            return Err(StorageError::AlreadyExists(id.clone()));
        }
        let partition = self.partition(id)?;
        let db = Db(&self.db);
        let mut batch = WriteBatch::default();
        batch.put_cf(
            db.cf(META)?,
            with_suffix(&partition.prefix, b"@start"),
            0i64.to_be_bytes(),
        );
        batch.put_cf(
            db.cf(META)?,
            with_suffix(&partition.prefix, b"@end"),
            0i64.to_be_bytes(),
        );
        partition.write(batch, true)?;
        Ok(Box::new(partition))
    }

    async fn open(&self, id: &PartitionId) -> Result<Box<dyn PartitionStorage>, StorageError> {
        if !self.exists(id)? {
            return Err(StorageError::NotFound(id.clone()));
        }
        *self.shared.poisoned.lock().unwrap_or_else(|p| p.into_inner()) = None;
        Ok(Box::new(self.partition(id)?))
    }

    async fn list(&self) -> Result<Vec<PartitionId>, StorageError> {
        let db = Db(&self.db);
        let mut ids = Vec::new();
        for entry in self.db.iterator_cf(db.cf(META)?, IteratorMode::Start) {
            let (key, _) = entry.map_err(backend_error)?;
            let Some(length) = key
                .get(..2)
                .map(|l| usize::from(u16::from_be_bytes([l[0], l[1]])))
            else {
                continue;
            };
            if key.get(2 + length..) != Some(b"@end") {
                continue;
            }
            if let Some(id) = key
                .get(2..2 + length)
                .and_then(|name| std::str::from_utf8(name).ok())
                .and_then(|name| PartitionId::from_dir_name(name).ok())
            {
                ids.push(id);
            }
        }
        ids.sort();
        Ok(ids)
    }

    async fn delete(&self, id: &PartitionId) -> Result<(), StorageError> {
        if !self.exists(id)? {
            return Err(StorageError::NotFound(id.clone()));
        }
        let partition = self.partition(id)?;
        let db = Db(&self.db);
        let mut batch = WriteBatch::default();
        for family in COLUMN_FAMILIES {
            for (key, _) in db.scan(family, &partition.prefix, &partition.prefix, Direction::Forward)? {
                batch.delete_cf(db.cf(family)?, key);
            }
        }
        partition.write(batch, true)
    }
}

/// One partition: a key range in each column family.
pub struct RocksPartition {
    id: PartitionId,
    prefix: Vec<u8>,
    db: Arc<DB>,
    shared: Arc<Shared>,
    log_start: i64,
    log_end: i64,
    last_aborted: Option<AbortedTxn>,
}

impl std::fmt::Debug for RocksPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksPartition").field("id", &self.id).finish()
    }
}

impl RocksPartition {
    fn db(&self) -> Db<'_> {
        Db(&self.db)
    }

    fn writable(&self) -> Result<(), StorageError> {
        match self
            .shared
            .poisoned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            Some(reason) => Err(StorageError::Poisoned { reason }),
            None => Ok(()),
        }
    }

    fn poison(&self, reason: String) -> StorageError {
        *self.shared.poisoned.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason.clone());
        StorageError::Poisoned { reason }
    }

    fn write(&self, batch: WriteBatch, sync: bool) -> Result<(), StorageError> {
        let mut options = WriteOptions::default();
        options.set_sync(sync);
        match self.db.write_opt(batch, &options) {
            Ok(()) => Ok(()),
            Err(error) if sync => Err(self.poison(error.to_string())),
            Err(error) => Err(backend_error(error)),
        }
    }

    fn decode_batch(&self, key: &[u8], value: &[u8]) -> Result<RecordBatch, StorageError> {
        RecordBatch::decode(Bytes::copy_from_slice(value)).map_err(|e| StorageError::Corrupt {
            what: format!(
                "rocksdb batch at offset {}",
                key_offset(&self.prefix, key).unwrap_or(-1)
            ),
            reason: e.to_string(),
        })
    }

    /// Base and last offset of the batch starting before `offset`.
    fn batch_before(&self, offset: i64) -> Result<Option<(i64, i64)>, StorageError> {
        let Some(key_limit) = offset.checked_sub(1) else {
            return Ok(None);
        };
        match self
            .db()
            .at_or_before(BATCHES, &self.prefix, &with_offset(&self.prefix, key_limit))?
        {
            Some((key, value)) => {
                let batch = self.decode_batch(&key, &value)?;
                Ok(Some((batch.base_offset(), batch.last_offset())))
            }
            None => Ok(None),
        }
    }

    fn last_aborted_entry(&self) -> Result<Option<AbortedTxn>, StorageError> {
        self.db()
            .at_or_before(ABORTED, &self.prefix, &with_offset(&self.prefix, i64::MAX))?
            .map(|(_, value)| decode_aborted(&value))
            .transpose()
    }

    fn delete_range(
        &self,
        batch: &mut WriteBatch,
        family: &str,
        from: i64,
        to: i64,
    ) -> Result<(), StorageError> {
        let db = self.db();
        for (key, _) in db.scan(
            family,
            &self.prefix,
            &with_offset(&self.prefix, from),
            Direction::Forward,
        )? {
            if key_offset(&self.prefix, &key).is_some_and(|offset| offset >= to) {
                break;
            }
            batch.delete_cf(db.cf(family)?, key);
        }
        Ok(())
    }

    fn put_offsets(&self, batch: &mut WriteBatch, start: i64, end: i64) -> Result<(), StorageError> {
        let meta = self.db().cf(META)?;
        batch.put_cf(meta, with_suffix(&self.prefix, b"@start"), start.to_be_bytes());
        batch.put_cf(meta, with_suffix(&self.prefix, b"@end"), end.to_be_bytes());
        Ok(())
    }

    fn empty_at(&mut self, offset: i64) -> Result<(), StorageError> {
        let mut batch = WriteBatch::default();
        self.delete_range(&mut batch, BATCHES, i64::MIN, i64::MAX)?;
        self.delete_range(&mut batch, ABORTED, i64::MIN, i64::MAX)?;
        self.put_offsets(&mut batch, offset, offset)?;
        self.write(batch, true)?;
        self.log_start = offset;
        self.log_end = offset;
        self.last_aborted = None;
        Ok(())
    }
}

#[async_trait]
impl PartitionStorage for RocksPartition {
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
        let family = self.db().cf(BATCHES)?;
        let mut write = WriteBatch::default();
        for batch in batches {
            write.put_cf(
                family,
                with_offset(&self.prefix, batch.base_offset()),
                batch.as_bytes(),
            );
        }
        self.put_offsets(&mut write, self.log_start, next)?;
        self.write(write, false)?;
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
        let family = self.db().cf(BATCHES)?;
        let start_key = with_offset(&self.prefix, start);
        for entry in self
            .db
            .iterator_cf(family, IteratorMode::From(&start_key, Direction::Forward))
        {
            let (key, value) = entry.map_err(backend_error)?;
            if !key.starts_with(&self.prefix) {
                break;
            }
            if !out.is_empty() && total.saturating_add(value.len()) > max_bytes {
                break;
            }
            total = total.saturating_add(value.len());
            out.push(self.decode_batch(&key, &value)?);
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
        let mut batch = WriteBatch::default();
        self.delete_range(&mut batch, BATCHES, offset, i64::MAX)?;
        self.delete_range(&mut batch, ABORTED, offset, i64::MAX)?;
        self.put_offsets(&mut batch, self.log_start, offset)?;
        self.write(batch, true)?;
        self.log_end = offset;
        self.last_aborted = self.last_aborted_entry()?;
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
        let keep_from = match self.batch_before(offset)? {
            Some((base, last)) if last >= offset => base,
            _ => offset,
        };
        let mut batch = WriteBatch::default();
        self.delete_range(&mut batch, BATCHES, i64::MIN, keep_from)?;
        self.put_offsets(&mut batch, offset, self.log_end)?;
        self.write(batch, true)?;
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
        if injected {
            return Err(self.poison("injected sync failure".into()));
        }
        self.db
            .flush_wal(true)
            .map_err(|error| self.poison(error.to_string()))
    }

    async fn put_snapshot(&mut self, offset: i64, bytes: Bytes) -> Result<(), StorageError> {
        self.writable()?;
        let mut batch = WriteBatch::default();
        batch.put_cf(self.db().cf(SNAPSHOTS)?, with_offset(&self.prefix, offset), bytes);
        self.write(batch, true)
    }

    async fn snapshot_at_or_below(&self, offset: i64) -> Result<Option<(i64, Bytes)>, StorageError> {
        Ok(self
            .db()
            .at_or_before(SNAPSHOTS, &self.prefix, &with_offset(&self.prefix, offset))?
            .and_then(|(key, value)| Some((key_offset(&self.prefix, &key)?, Bytes::from(value.into_vec())))))
    }

    async fn snapshot_offsets(&self) -> Result<Vec<i64>, StorageError> {
        Ok(self
            .db()
            .scan(SNAPSHOTS, &self.prefix, &self.prefix, Direction::Forward)?
            .iter()
            .filter_map(|(key, _)| key_offset(&self.prefix, key))
            .collect())
    }

    async fn delete_snapshot(&mut self, offset: i64) -> Result<(), StorageError> {
        self.writable()?;
        let mut batch = WriteBatch::default();
        batch.delete_cf(self.db().cf(SNAPSHOTS)?, with_offset(&self.prefix, offset));
        self.write(batch, true)
    }

    async fn append_aborted_txn(&mut self, entry: AbortedTxn) -> Result<(), StorageError> {
        self.writable()?;
        check_aborted_txn(self.last_aborted.as_ref(), &entry)?;
        let mut batch = WriteBatch::default();
        batch.put_cf(
            self.db().cf(ABORTED)?,
            aborted_key(&self.prefix, &entry),
            entry.encode(),
        );
        self.write(batch, false)?;
        self.last_aborted = Some(entry);
        Ok(())
    }

    async fn aborted_txns(
        &self,
        from_offset: i64,
        upper_bound: i64,
    ) -> Result<Vec<AbortedTxn>, StorageError> {
        let entries = self
            .db()
            .scan(
                ABORTED,
                &self.prefix,
                &with_offset(&self.prefix, from_offset),
                Direction::Forward,
            )?
            .iter()
            .map(|(_, value)| decode_aborted(value))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(select_aborted(&entries, from_offset, upper_bound))
    }

    async fn put_metadata(&mut self, key: &str, value: &[u8]) -> Result<(), StorageError> {
        check_metadata_key(key)?;
        self.writable()?;
        let mut batch = WriteBatch::default();
        batch.put_cf(
            self.db().cf(META)?,
            with_suffix(&self.prefix, format!("m{key}").as_bytes()),
            value,
        );
        self.write(batch, true)
    }

    async fn metadata(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        check_metadata_key(key)?;
        self.db()
            .get(META, &with_suffix(&self.prefix, format!("m{key}").as_bytes()))
    }
}
