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
//! A write is one `sled::Batch` on the tree. sled's background flusher is switched off: data is durable only
//! after a sync, which calls `Db::flush`.
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use storage::kv::{KeyRange, KvOp, KvPartition, OrderedKv, Space, StorePoison, Visit};
use storage::{BlockingPartition, BlockingStore, OpenMode, PartitionId, StorageError};

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
/// pool spawns a new worker only when a task is queued — so the truncation never runs. Larger segments make
/// segment turnover (and truncations) rare: 1 GiB with a flush every MiB completes (storage-bench's `sled-soak`,
/// docs/benchmarks.md). The race is sled's and is narrowed, not removed.
pub const DEFAULT_SEGMENT_SIZE: usize = 8 << 20;

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
        Ok(SledStorage {
            db,
            poison: Arc::default(),
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

    fn kv(&self, id: &PartitionId) -> Result<SledKv, StorageError> {
        let tree = self.db.open_tree(Self::tree_name(id)).map_err(backend_error)?;
        Ok(SledKv {
            db: self.db.clone(),
            tree,
        })
    }
}

impl BlockingStore for SledStorage {
    fn create(&self, id: &PartitionId) -> Result<Box<dyn BlockingPartition>, StorageError> {
        if self.exists(id)? {
            return Err(StorageError::AlreadyExists(id.clone()));
        }
        Ok(Box::new(KvPartition::create(
            id,
            self.kv(id)?,
            self.poison.clone(),
        )?))
    }

    fn open(&self, id: &PartitionId, _mode: OpenMode) -> Result<Box<dyn BlockingPartition>, StorageError> {
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
        if !self.exists(id)? {
            return Err(StorageError::NotFound(id.clone()));
        }
        self.db.drop_tree(Self::tree_name(id)).map_err(backend_error)?;
        Ok(())
    }
}

/// One partition's tree.
struct SledKv {
    db: sled::Db,
    tree: sled::Tree,
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

    fn write(&self, ops: Vec<KvOp>, sync: bool) -> Result<(), StorageError> {
        let mut batch = sled::Batch::default();
        for op in ops {
            match op {
                KvOp::Put(space, key, value) => batch.insert(tagged(space, &key), value.as_ref()),
                KvOp::DeleteRange(space, lower, upper) => {
                    let range = self
                        .tree
                        .range(tagged(space, &lower)..tagged_upper(space, upper.as_deref()));
                    for key in range.keys() {
                        batch.remove(key.map_err(backend_error)?);
                    }
                }
            }
        }
        self.tree.apply_batch(batch).map_err(backend_error)?;
        if sync {
            self.sync()?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<(), StorageError> {
        self.db.flush().map(|_| ()).map_err(backend_error)
    }
}
