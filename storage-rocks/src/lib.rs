//! Partition storage on RocksDB.
//!
//! One database per store with four column families, one per key space of `storage`'s shared ordered
//! key-value core ([`storage::kv`], which owns the partition layout, atomic writes, syncs and poisoning). Every
//! key starts with the partition's prefix (`u16 length | "{topic}-{partition}"`), so a partition is a
//! contiguous range of each family:
//!
//! ```text
//! batches  snapshots  aborted  meta      ← column families (Space::Batches, ::Snapshots, ::Aborted, ::Meta)
//! ```
//!
//! A write is one `WriteBatch` across the families; synced writes and `flush(Sync)` sync the write-ahead log.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use rocksdb::{
    BlockBasedOptions, ColumnFamilyDescriptor, DBCompressionType, InfoLogger, IteratorMode, LogLevel,
    Options, ReadOptions, WriteBatch, WriteOptions, DB,
};
use storage::flush_group::FlushGroup;
use storage::kv::{KeyRange, KvOp, KvPartition, OrderedKv, Space, StorePoison, Visit};
use storage::{BlockingPartition, BlockingStore, OpenMode, PartitionId, StorageError};

const COLUMN_FAMILIES: [&str; 4] = ["batches", "snapshots", "aborted", "meta"];
/// The log end key of the shared layout (a partition exists when it is written).
const LOG_END_KEY: &[u8] = b"@end";
/// Longer than any key of the shared layout (16 bytes at most), all 0xff: the exclusive end of a partition.
const PAST_EVERY_KEY: [u8; 17] = [0xff; 17];

fn family(space: Space) -> &'static str {
    match space {
        Space::Batches => COLUMN_FAMILIES[0],
        Space::Snapshots => COLUMN_FAMILIES[1],
        Space::Aborted => COLUMN_FAMILIES[2],
        Space::Meta => COLUMN_FAMILIES[3],
    }
}

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

/// The RocksDB store.
#[derive(Clone)]
pub struct RocksStorage {
    db: Arc<DB>,
    poison: Arc<StorePoison>,
    /// The write-ahead log's syncs: concurrent callers share one (group commit).
    flushes: Arc<FlushGroup>,
    /// Opened with [`RocksStorage::open_read_only`]: nothing in the directory changes.
    read_only: bool,
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
    // Partition names are at most 249 + 11 bytes (Kafka's topic-name limit), well within a u16.
    out.extend_from_slice(&(name.len() as u16).to_be_bytes());
    out.extend_from_slice(name.as_bytes());
    out
}

impl RocksStorage {
    /// Opens (or creates) the database.
    pub fn open(config: RocksConfig) -> Result<Self, StorageError> {
        let mut options = Options::default();
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        // Flushes and compactions on more than one background thread (RocksDB's default is one).
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        options.increase_parallelism(i32::try_from(cores).unwrap_or(2));
        let db =
            DB::open_cf_descriptors(&options, &config.data_dir, Self::families()).map_err(backend_error)?;
        Ok(RocksStorage {
            db: Arc::new(db),
            poison: Arc::default(),
            flushes: Arc::default(),
            read_only: false,
        })
    }

    /// Opens an existing database for inspection, with RocksDB's read-only mode: nothing in the directory changes
    /// (no lock, no write-ahead-log replay written back, no compaction, and RocksDB's info log goes to stderr at
    /// error level instead of a `LOG` file, which a read-write open would rotate). A missing database is an
    /// error. Creating, deleting or opening a partition for writing answers [`StorageError::ReadOnlyStore`].
    pub fn open_read_only(config: RocksConfig) -> Result<Self, StorageError> {
        // RocksDB would create a missing directory before failing to find a database in it.
        if !config.data_dir.is_dir() {
            return Err(StorageError::io(
                format!("opening {} read-only", config.data_dir.display()),
                std::io::Error::new(std::io::ErrorKind::NotFound, "no database directory"),
            ));
        }
        let mut options = Options::default();
        options.set_info_logger(InfoLogger::new_stderr_logger(LogLevel::Error, Some("rocksdb")));
        let db = DB::open_cf_descriptors_read_only(&options, &config.data_dir, Self::families(), false)
            .map_err(backend_error)?;
        Ok(RocksStorage {
            db: Arc::new(db),
            poison: Arc::default(),
            flushes: Arc::default(),
            read_only: true,
        })
    }

    fn families() -> impl Iterator<Item = ColumnFamilyDescriptor> {
        COLUMN_FAMILIES.iter().map(|name| {
            let options = if *name == family(Space::Batches) {
                batch_family_options()
            } else {
                Options::default()
            };
            ColumnFamilyDescriptor::new(*name, options)
        })
    }

    /// Refuses a change when the store is read-only.
    fn writable(&self, operation: impl FnOnce() -> String) -> Result<(), StorageError> {
        if self.read_only {
            return Err(StorageError::ReadOnlyStore {
                backend: "rocksdb",
                operation: operation(),
            });
        }
        Ok(())
    }

    fn kv(&self, id: &PartitionId) -> RocksKv {
        RocksKv {
            db: self.db.clone(),
            flushes: self.flushes.clone(),
            prefix: prefix(id),
        }
    }
}

impl BlockingStore for RocksStorage {
    fn create(&self, id: &PartitionId) -> Result<Box<dyn BlockingPartition>, StorageError> {
        self.writable(|| format!("create partition {id}"))?;
        let kv = self.kv(id);
        if KvPartition::exists(&kv)? {
            return Err(StorageError::AlreadyExists(id.clone()));
        }
        Ok(Box::new(KvPartition::create(id, kv, self.poison.clone())?))
    }

    fn open(&self, id: &PartitionId, mode: OpenMode) -> Result<Box<dyn BlockingPartition>, StorageError> {
        if mode == OpenMode::ReadWrite {
            self.writable(|| format!("open partition {id} for writing"))?;
        }
        let kv = self.kv(id);
        if !KvPartition::exists(&kv)? {
            return Err(StorageError::NotFound(id.clone()));
        }
        Ok(Box::new(KvPartition::open(id, kv, self.poison.clone())?))
    }

    fn list(&self) -> Result<Vec<PartitionId>, StorageError> {
        let meta = cf(&self.db, Space::Meta)?;
        let mut ids = Vec::new();
        for entry in self.db.iterator_cf(meta, IteratorMode::Start) {
            let (key, _) = entry.map_err(backend_error)?;
            let Some(length) = key
                .get(..2)
                .map(|l| usize::from(u16::from_be_bytes([l[0], l[1]])))
            else {
                continue;
            };
            if key.get(2 + length..) != Some(LOG_END_KEY) {
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

    fn delete(&self, id: &PartitionId) -> Result<(), StorageError> {
        self.writable(|| format!("delete partition {id}"))?;
        let kv = self.kv(id);
        if !KvPartition::exists(&kv)? {
            return Err(StorageError::NotFound(id.clone()));
        }
        let ops = [Space::Batches, Space::Snapshots, Space::Aborted, Space::Meta]
            .into_iter()
            .map(|space| KvOp::DeleteRange(space, Vec::new(), None))
            .collect();
        kv.write(ops, true)
    }
}

/// The batches' column family: values are whole record batches (KiB to MiB), written once and read in key
/// order. No block compression (producers compress batches themselves; compressing them again costs CPU for
/// nothing), and 64 KiB blocks so that a sequential scan reads few, large blocks.
fn batch_family_options() -> Options {
    let mut options = Options::default();
    options.set_compression_type(DBCompressionType::None);
    let mut table = BlockBasedOptions::default();
    table.set_block_size(64 * 1024);
    options.set_block_based_table_factory(&table);
    options
}

/// How far ahead a scan reads (RocksDB's default grows from 8 KiB).
const SCAN_READAHEAD: usize = 2 << 20;

fn cf(db: &DB, space: Space) -> Result<&rocksdb::ColumnFamily, StorageError> {
    db.cf_handle(family(space)).ok_or_else(|| StorageError::Backend {
        backend: "rocksdb",
        message: format!("column family {} missing", family(space)),
    })
}

/// One partition: a key range in each column family.
struct RocksKv {
    db: Arc<DB>,
    flushes: Arc<FlushGroup>,
    prefix: Vec<u8>,
}

impl RocksKv {
    fn key(&self, key: &[u8]) -> Vec<u8> {
        [self.prefix.as_slice(), key].concat()
    }

    fn upper(&self, upper: Option<&[u8]>) -> Vec<u8> {
        self.key(upper.unwrap_or(&PAST_EVERY_KEY))
    }
}

impl OrderedKv for RocksKv {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Bytes>, StorageError> {
        Ok(self
            .db
            .get_cf(cf(&self.db, space)?, self.key(key))
            .map_err(backend_error)?
            .map(Bytes::from))
    }

    fn scan(&self, range: KeyRange<'_>, visit: Visit<'_>) -> Result<(), StorageError> {
        let (lower, upper) = (self.key(range.lower), self.upper(range.upper));
        // Bounded, read-ahead, borrowing iteration: RocksDB stops at the bounds itself, reads the files ahead of
        // a sequential scan, and keys and values are visited in place (no copy per entry).
        let mut options = ReadOptions::default();
        options.set_iterate_lower_bound(lower.clone());
        options.set_iterate_upper_bound(upper.clone());
        options.set_readahead_size(SCAN_READAHEAD);
        let mut iterator = self.db.raw_iterator_cf_opt(cf(&self.db, range.space)?, options);
        if range.reverse {
            iterator.seek_to_last();
        } else {
            iterator.seek(&lower);
        }
        while iterator.valid() {
            let (Some(key), Some(value)) = (iterator.key(), iterator.value()) else {
                break;
            };
            if !visit(&key[self.prefix.len()..], value)? {
                return Ok(());
            }
            if range.reverse {
                iterator.prev();
            } else {
                iterator.next();
            }
        }
        iterator.status().map_err(backend_error)
    }

    fn write(&self, ops: Vec<KvOp>, sync: bool) -> Result<(), StorageError> {
        let mut batch = WriteBatch::default();
        for op in ops {
            match op {
                KvOp::Put(space, key, value) => batch.put_cf(cf(&self.db, space)?, self.key(&key), value),
                KvOp::DeleteRange(space, lower, upper) => batch.delete_range_cf(
                    cf(&self.db, space)?,
                    self.key(&lower),
                    self.upper(upper.as_deref()),
                ),
            }
        }
        let mut options = WriteOptions::default();
        options.set_sync(sync);
        self.db.write_opt(batch, &options).map_err(backend_error)
    }

    /// Syncs the write-ahead log, sharing the sync with every caller that asked while the one before ran.
    fn sync(&self) -> Result<(), StorageError> {
        self.flushes
            .sync(|| self.db.flush_wal(true))
            .map_err(|message| StorageError::Backend {
                backend: "rocksdb",
                message,
            })
    }
}
