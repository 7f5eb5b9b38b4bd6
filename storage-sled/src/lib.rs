//! Partition storage on [sled](https://docs.rs/sled/0.34.7) 0.34.7.
//!
//! One sled database per store; one tree per partition (`partition/{topic}-{partition}`). The partition layout
//! (keys, atomic writes, syncs, poisoning) is `storage`'s shared ordered key-value core ([`storage::kv`]); this
//! crate maps its four key spaces onto one tree by a tag byte:
//!
//! ```text
//! b'b' + key   Batches        b's' + key   Snapshots
//! b'a' + key   Aborted        b'M' + key   Meta
//! ```
//!
//! A write of one key is a `Tree::insert`, a write of several one `sled::Batch` on the tree (both atomic; the
//! batch costs sled two buffer write-outs, see `SledKv::put_one`). sled's background flusher is switched off: data
//! is durable only after a sync, which calls `Db::flush` and `fdatasync`s sled's log file ([`SLED_LOG_FILE`]) —
//! one at a time per store, shared by every caller that asked while the one before ran (`storage::flush_group`).
//!
//! sled has no read-only mode (opening a database writes to it), so [`SledStorage::open_read_only`] opens a
//! private copy of the directory: inspecting a store never changes it, at the cost of copying it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use storage::kv::{KeyRange, KvOp, KvPartition, OrderedKv, Space, StorePoison, Visit};
use storage::{BlockingPartition, BlockingStore, OpenMode, PartitionId, StorageError};

use storage::flush_group::FlushGroup;

const TREE_PREFIX: &str = "partition/";

fn backend_error(error: sled::Error) -> StorageError {
    StorageError::Backend {
        backend: "sled",
        message: error.to_string(),
    }
}

fn tag(space: Space) -> u8 {
    match space {
        Space::Batches => b'b',
        Space::Snapshots => b's',
        Space::Aborted => b'a',
        Space::Meta => b'M',
    }
}

fn tagged(space: Space, key: &[u8]) -> Vec<u8> {
    let mut stored = Vec::with_capacity(1 + key.len());
    stored.push(tag(space));
    stored.extend_from_slice(key);
    stored
}

/// The exclusive upper bound of a range in `space` (`None`: the end of the space).
fn tagged_upper(space: Space, upper: Option<&[u8]>) -> Vec<u8> {
    match upper {
        Some(upper) => tagged(space, upper),
        None => vec![tag(space) + 1],
    }
}

/// Options of the sled backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SledConfig {
    /// The database directory.
    pub data_dir: PathBuf,
    /// sled's page cache, in bytes.
    pub cache_capacity: u64,
    /// sled's log segment size for a new database (a power of two, 256 B–16 MiB). An existing database keeps the
    /// size it was created with (sled refuses to change it).
    pub segment_size: usize,
}

/// The segment size of new databases: 8 MiB rather than sled's 512 KiB.
///
/// sled 0.34.7 deadlocks under frequent flushes with small segments (upstream spacejam/sled#1412, reproduced
/// here within ~60–120 MiB of 1 KiB writes flushed every MiB): when a segment at the end of the file is freed, its
/// segment accountant queues a file truncation on sled's I/O thread pool, and later waits for it *while holding
/// the accountant's mutex*; the pool's workers are all writing sealed buffers, each blocked on that mutex, and the
/// pool spawns a new worker only when many tasks are queued — so the truncation never runs. Larger segments make
/// segment turnover (and truncations) rare; [`UNFLUSHED_SEGMENT_FRACTION`] keeps the workers from all being busy.
/// The race is sled's and is avoided, not removed.
pub const DEFAULT_SEGMENT_SIZE: usize = 8 << 20;

/// The store flushes itself whenever a write brings what was written since its last flush to `segment_size /
/// UNFLUSHED_SEGMENT_FRACTION` bytes (1 MiB with [`DEFAULT_SEGMENT_SIZE`]), synced or not.
///
/// sled has no back-pressure on its write-out: every full buffer (one segment) is handed to its I/O pool, and a
/// writer that outpaces the disk queues them without bound — memory grows by a segment per queued buffer, a later
/// flush waits for the whole queue, and with every worker busy the truncation deadlock above can strike. Flushing
/// every eighth of a segment keeps at most a buffer or two in flight, so a worker is always free. Measured with
/// raw sled and 512 KiB segments: 1 KiB writes flushed every MiB deadlocked in 6 of 6 runs (after 6–253 MiB), the
/// same writes flushed every 64 KiB completed 4 of 4 (ADR 0022, docs/benchmarks.md).
pub const UNFLUSHED_SEGMENT_FRACTION: u64 = 8;

impl SledConfig {
    /// Defaults under `data_dir` (64 MiB cache, [`DEFAULT_SEGMENT_SIZE`]).
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        SledConfig {
            data_dir: data_dir.into(),
            cache_capacity: 64 * 1024 * 1024,
            segment_size: DEFAULT_SEGMENT_SIZE,
        }
    }

    /// The segment size an existing database was created with (sled's `conf` file), if there is one.
    fn existing_segment_size(&self) -> Option<usize> {
        let conf = std::fs::read_to_string(self.data_dir.join("conf")).ok()?;
        conf.lines()
            .find_map(|line| line.strip_prefix("segment_size: "))
            .and_then(|value| value.trim().parse().ok())
    }
}

/// The sled store.
#[derive(Debug, Clone)]
pub struct SledStorage {
    db: sled::Db,
    poison: Arc<StorePoison>,
    unflushed: Arc<UnflushedBytes>,
    flushes: Arc<FlushGroup>,
    /// sled's log file, synced after each flush (see [`SLED_LOG_FILE`]).
    log_file: Arc<std::fs::File>,
    /// Opened by [`SledStorage::open_read_only`]: the private copy the database runs on (removed with the last
    /// handle); creating, deleting or opening a partition for writing is refused.
    read_only_copy: Option<Arc<tempfile::TempDir>>,
}

/// sled's log file in the database directory (sled 0.34.7's `Config::db_path`).
///
/// `Db::flush` writes sled's buffers out and waits for them with `sync_file_range`, which neither flushes the
/// drive's write cache nor persists the file's new size: what a flush acknowledged could be lost to a power
/// failure (not to a process crash). With the background flusher off, sled never calls `fsync` in normal
/// operation (`strace` of a sled failover run: 3 `fsync` calls, all at start-up, against 87,642
/// `sync_file_range`). A store's sync therefore also `fdatasync`s this file, once per grouped flush (ADR 0027).
/// Values larger than a quarter of a segment are written by sled as separate blob files that it never syncs;
/// that remains sled's.
pub const SLED_LOG_FILE: &str = "db";

/// What the store's partitions wrote since the database was last flushed, against the bound that triggers a flush
/// ([`UNFLUSHED_SEGMENT_FRACTION`]); shared by every partition, since sled's write-out is the database's.
#[derive(Debug)]
struct UnflushedBytes {
    bytes: AtomicU64,
    bound: u64,
}

impl SledStorage {
    /// Opens (or creates) the database.
    ///
    /// sled locks its directory; a handle dropped just before may still hold the lock while its threads wind
    /// down, so a lock held elsewhere is retried for up to [`Self::LOCK_WAIT`] before it is reported.
    pub fn open(config: SledConfig) -> Result<Self, StorageError> {
        let started = std::time::Instant::now();
        let segment_size = config.existing_segment_size().unwrap_or(config.segment_size);
        if !segment_size.is_power_of_two() || !(256..=1 << 24).contains(&segment_size) {
            return Err(StorageError::Backend {
                backend: "sled",
                message: format!("segment size {segment_size}: a power of two from 256 B to 16 MiB"),
            });
        }
        let db = loop {
            match sled::Config::new()
                .path(&config.data_dir)
                .cache_capacity(config.cache_capacity)
                .segment_size(segment_size)
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
        let log_file = std::fs::File::open(config.data_dir.join(SLED_LOG_FILE)).map_err(|error| {
            StorageError::Backend {
                backend: "sled",
                message: format!("opening sled's log file `{SLED_LOG_FILE}` to sync it: {error}"),
            }
        })?;
        Ok(SledStorage {
            db,
            log_file: Arc::new(log_file),
            poison: Arc::default(),
            unflushed: Arc::new(UnflushedBytes {
                bytes: AtomicU64::new(0),
                bound: segment_size as u64 / UNFLUSHED_SEGMENT_FRACTION,
            }),
            flushes: Arc::default(),
            read_only_copy: None,
        })
    }

    /// Opens a store for inspection: the database directory is copied to a private temporary directory and the
    /// copy is opened (sled has no read-only mode, and opening a database writes to it), so the original is left
    /// byte for byte as it was. A missing directory is an error. Creating, deleting or opening a partition for
    /// writing answers [`StorageError::ReadOnlyStore`]. The copy costs the database's size in disk space and the
    /// time to read it; a database being written while it is copied opens as after a crash at that moment.
    pub fn open_read_only(config: SledConfig) -> Result<Self, StorageError> {
        let copy = tempfile::Builder::new()
            .prefix("mirrorlog-sled-read-only-")
            .tempdir()
            .map_err(|error| StorageError::io("creating the read-only copy's directory", error))?;
        copy_dir(&config.data_dir, copy.path())?;
        let mut storage = Self::open(SledConfig {
            data_dir: copy.path().to_owned(),
            ..config
        })?;
        storage.read_only_copy = Some(Arc::new(copy));
        Ok(storage)
    }

    /// Refuses a change when the store is read-only.
    fn writable(&self, operation: impl FnOnce() -> String) -> Result<(), StorageError> {
        if self.read_only_copy.is_some() {
            return Err(StorageError::ReadOnlyStore {
                backend: "sled",
                operation: operation(),
            });
        }
        Ok(())
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

    fn kv(&self, id: &PartitionId) -> Result<SledKv, StorageError> {
        let tree = self.db.open_tree(Self::tree_name(id)).map_err(backend_error)?;
        Ok(SledKv {
            db: self.db.clone(),
            tree,
            unflushed: self.unflushed.clone(),
            flushes: self.flushes.clone(),
            log_file: self.log_file.clone(),
            poison: self.poison.clone(),
        })
    }
}

impl BlockingStore for SledStorage {
    fn create(&self, id: &PartitionId) -> Result<Box<dyn BlockingPartition>, StorageError> {
        self.writable(|| format!("create partition {id}"))?;
        if self.exists(id)? {
            return Err(StorageError::AlreadyExists(id.clone()));
        }
        Ok(Box::new(KvPartition::create(
            id,
            self.kv(id)?,
            self.poison.clone(),
        )?))
    }

    fn open(&self, id: &PartitionId, mode: OpenMode) -> Result<Box<dyn BlockingPartition>, StorageError> {
        if mode == OpenMode::ReadWrite {
            self.writable(|| format!("open partition {id} for writing"))?;
        }
        if !self.exists(id)? {
            return Err(StorageError::NotFound(id.clone()));
        }
        Ok(Box::new(KvPartition::open(
            id,
            self.kv(id)?,
            self.poison.clone(),
        )?))
    }

    fn list(&self) -> Result<Vec<PartitionId>, StorageError> {
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

    fn delete(&self, id: &PartitionId) -> Result<(), StorageError> {
        self.writable(|| format!("delete partition {id}"))?;
        if !self.exists(id)? {
            return Err(StorageError::NotFound(id.clone()));
        }
        self.db.drop_tree(Self::tree_name(id)).map_err(backend_error)?;
        Ok(())
    }
}

/// Copies the directory tree `from` into the existing directory `to` (regular files and directories; sled
/// makes nothing else).
fn copy_dir(from: &std::path::Path, to: &std::path::Path) -> Result<(), StorageError> {
    let entries = std::fs::read_dir(from)
        .map_err(|error| StorageError::io(format!("reading {} to copy it", from.display()), error))?;
    for entry in entries {
        let entry = entry.map_err(|error| StorageError::io(format!("reading {}", from.display()), error))?;
        let target = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|error| StorageError::io(format!("reading {}", entry.path().display()), error))?;
        if kind.is_dir() {
            std::fs::create_dir(&target)
                .map_err(|error| StorageError::io(format!("creating {}", target.display()), error))?;
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).map_err(|error| {
                StorageError::io(
                    format!("copying {} for a read-only open", entry.path().display()),
                    error,
                )
            })?;
        }
    }
    Ok(())
}

/// One partition's tree.
struct SledKv {
    db: sled::Db,
    tree: sled::Tree,
    unflushed: Arc<UnflushedBytes>,
    flushes: Arc<FlushGroup>,
    log_file: Arc<std::fs::File>,
    poison: Arc<StorePoison>,
}

impl OrderedKv for SledKv {
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Bytes>, StorageError> {
        Ok(self
            .tree
            .get(tagged(space, key))
            .map_err(backend_error)?
            .map(|value| Bytes::copy_from_slice(&value)))
    }

    fn scan(&self, range: KeyRange<'_>, visit: Visit<'_>) -> Result<(), StorageError> {
        let bounds = tagged(range.space, range.lower)..tagged_upper(range.space, range.upper);
        let keys = self.tree.range(bounds);
        let entries: Box<dyn Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>>> = if range.reverse {
            Box::new(keys.rev())
        } else {
            Box::new(keys)
        };
        for entry in entries {
            let (key, value) = entry.map_err(backend_error)?;
            if !visit(key.get(1..).unwrap_or_default(), &value)? {
                break;
            }
        }
        Ok(())
    }

    /// Writes `ops`; flushes when asked to or when the store's unflushed bytes reach their bound. A failed flush is
    /// returned either way; one the caller did not ask for poisons the store here (a synced write's failure
    /// poisons it in the partition layer).
    fn write(&self, mut ops: Vec<KvOp>, sync: bool) -> Result<(), StorageError> {
        let bytes = match (ops.pop(), ops.is_empty()) {
            (Some(KvOp::Put(space, key, value)), true) => self.put_one(space, &key, &value)?,
            (last, _) => {
                ops.extend(last);
                self.apply_atomically(ops)?
            }
        };
        let unflushed = self.unflushed.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if sync {
            self.sync()?;
        } else if unflushed >= self.unflushed.bound {
            self.sync().inspect_err(|error| {
                self.poison
                    .poison(format!("sled's bounding flush failed: {error}"))
            })?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<(), StorageError> {
        // Zeroed before the flush: what is written while it runs counts towards the next one.
        self.unflushed.bytes.store(0, Ordering::Relaxed);
        self.flushes
            .sync(|| {
                self.db.flush().map_err(|error| error.to_string())?;
                self.log_file
                    .sync_data()
                    .map_err(|error| format!("syncing sled's log file: {error}"))
            })
            .map_err(|message| StorageError::Backend {
                backend: "sled",
                message,
            })
    }
}

impl SledKv {
    /// One key written with `Tree::insert`, which is atomic by itself. `apply_batch` would also do, but sled
    /// makes every batch recoverable as a unit by sealing and writing out its I/O buffer before and after the
    /// batch's manifest — two disk writes with a `sync_file_range` each, whether or not the caller syncs. A
    /// metadata write is a single key; on a failover of 1,000 partitions this alone took the STOPPING phase
    /// from 1.9 s to 0.6 s (docs/benchmarks.md, thirteenth session). Returns the bytes written.
    fn put_one(&self, space: Space, key: &[u8], value: &[u8]) -> Result<u64, StorageError> {
        self.tree
            .insert(tagged(space, key), value)
            .map_err(backend_error)?;
        Ok((1 + key.len() + value.len()) as u64)
    }

    /// Several operations as one `sled::Batch`: all of them survive a crash or none. Returns the bytes written.
    fn apply_atomically(&self, ops: Vec<KvOp>) -> Result<u64, StorageError> {
        let mut batch = sled::Batch::default();
        let mut bytes = 0u64;
        for op in ops {
            match op {
                KvOp::Put(space, key, value) => {
                    bytes += (1 + key.len() + value.len()) as u64;
                    batch.insert(tagged(space, &key), value.as_ref())
                }
                KvOp::DeleteRange(space, lower, upper) => {
                    let range = self
                        .tree
                        .range(tagged(space, &lower)..tagged_upper(space, upper.as_deref()));
                    for key in range.keys() {
                        let key = key.map_err(backend_error)?;
                        bytes += key.len() as u64;
                        batch.remove(key);
                    }
                }
            }
        }
        self.tree.apply_batch(batch).map_err(backend_error)?;
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::PartitionId;

    fn put(value_len: usize) -> Vec<KvOp> {
        vec![KvOp::Put(
            Space::Meta,
            b"key".to_vec(),
            Bytes::from(vec![7; value_len]),
        )]
    }

    #[test]
    fn unsynced_writes_flush_the_store_once_an_eighth_of_a_segment_is_unflushed() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = SledConfig::new(dir.path());
        config.segment_size = 64 << 10;
        let store = SledStorage::open(config).unwrap();
        assert_eq!(store.unflushed.bound, 8 << 10);
        let kv = store.kv(&PartitionId::new("t", 0).unwrap()).unwrap();
        kv.write(put(4100), false).unwrap();
        let after_one = store.unflushed.bytes.load(Ordering::Relaxed);
        assert_eq!(after_one, 4104, "below the bound nothing is flushed");
        kv.write(put(4100), false).unwrap();
        assert_eq!(
            store.unflushed.bytes.load(Ordering::Relaxed),
            0,
            "the write that reached 8 KiB flushed the store"
        );
        kv.write(put(10), true).unwrap();
        assert_eq!(
            store.unflushed.bytes.load(Ordering::Relaxed),
            0,
            "a synced write flushes too"
        );
    }
}
