//! Partition storage in Apache Kafka's own on-disk layout, so Kafka's tools and ours read each other's files.
//!
//! ```text
//! {data_dir}/{topic}-{partition}/
//!     00000000000000000000.log        batches back to back (segments rolled by size)
//!     00000000000000000000.index      sparse offset index: (u32 relative offset, u32 position)
//!     00000000000000000000.timeindex  sparse time index: (i64 timestamp, u32 relative offset)
//!     00000000000000000000.txnindex   aborted transactions (34-byte entries), created on first use
//!     00000000000000000042.snapshot   producer snapshots (Kafka's format, written by producer-state)
//!     mirrorlog.metadata              our small durable records (mirror state, log start offset, …)
//! ```
//!
//! Opening a partition validates every segment batch by batch (length, magic, CRC, growing offsets), rebuilds
//! the indexes from what is valid, cuts a torn or corrupt tail and drops any later segment, and reports all of
//! it ([`OpenReport`]). Snapshots are written to a temporary file, fsynced and renamed; a metadata change is a frame
//! appended to `mirrorlog.metadata` and synced (ADR 0019). A failed
//! sync poisons the partition (enforced for every backend by `storage::checked`). The backend is blocking; the
//! async traits run its calls off the executor (`storage::offload`, ADR 0010). Open files are pooled under a
//! budget of descriptors ([`pool`], ADR 0031), so a store holds tens of thousands of partitions under the
//! process's limit.

mod closer;
pub mod files;
pub mod metadata;
pub mod partition;
pub mod pool;
pub mod segment;
pub mod sim;
pub mod vfs;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use storage::{BlockingPartition, BlockingStore, OpenMode, PartitionId, StorageError};

pub use partition::FsPartition;
pub use pool::PooledFs;
pub use storage::OpenReport;
pub use vfs::{RealFs, Vfs};

/// Kafka's default `segment.bytes` (1 GiB).
pub const DEFAULT_SEGMENT_BYTES: u64 = 1 << 30;
/// Kafka's default `index.interval.bytes`.
pub const DEFAULT_INDEX_INTERVAL_BYTES: u64 = 4096;

/// Options of the file-system backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsConfig {
    /// Directory holding one directory per partition.
    pub data_dir: PathBuf,
    /// Roll to a new segment past this size (Kafka's `segment.bytes`); at most `i32::MAX`.
    pub segment_bytes: u64,
    /// Bytes between sparse index entries (Kafka's `index.interval.bytes`).
    pub index_interval_bytes: u64,
    /// The most file descriptors the store keeps open (`None`: half the process's limit, [`pool::default_budget`]);
    /// files beyond it reopen when used.
    pub max_open_files: Option<usize>,
}

impl FsConfig {
    /// Kafka's defaults under `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        FsConfig {
            data_dir: data_dir.into(),
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            index_interval_bytes: DEFAULT_INDEX_INTERVAL_BYTES,
            max_open_files: None,
        }
    }
}

/// The file-system store.
#[derive(Debug, Clone)]
pub struct FsStorage {
    config: FsConfig,
    vfs: Arc<dyn Vfs>,
}

impl FsStorage {
    /// Opens (creating if needed) the data directory, on the real file system with its open files pooled under
    /// `max_open_files`.
    pub fn open(config: FsConfig) -> Result<Self, StorageError> {
        let budget = config.max_open_files.unwrap_or_else(pool::default_budget);
        Self::open_on(config, Arc::new(PooledFs::new(budget)))
    }

    /// Opens an existing store to inspect it, perhaps while a broker runs on it: nothing in the data directory
    /// changes here (partitions are then opened read-only, `Storage::open_read_only`).
    pub fn open_inspecting(config: FsConfig) -> Result<Self, StorageError> {
        check_segment_bytes(&config)?;
        let budget = config.max_open_files.unwrap_or_else(pool::default_budget);
        Ok(FsStorage {
            config,
            vfs: Arc::new(PooledFs::new(budget)),
        })
    }

    /// Opens the store on another file system (the power-loss simulator in tests).
    pub fn open_on(config: FsConfig, vfs: Arc<dyn Vfs>) -> Result<Self, StorageError> {
        check_segment_bytes(&config)?;
        create_dir_durably(vfs.as_ref(), &config.data_dir)?;
        // Cleaners' rewrites a stop or a crash left staged and never installed: the segments they were to
        // replace are whole.
        let staging = config.data_dir.join(STAGING_DIR);
        if vfs.is_dir(&staging) {
            vfs.remove_dir_all(&staging)
                .map_err(|e| StorageError::io(format!("removing {}", staging.display()), e))?;
        }
        Ok(FsStorage { config, vfs })
    }

    fn dir(&self, id: &PartitionId) -> PathBuf {
        self.config.data_dir.join(id.dir_name())
    }

    /// Opens a partition as its concrete type (for its [`OpenReport`] and segment views).
    pub fn open_partition(&self, id: &PartitionId, mode: OpenMode) -> Result<FsPartition, StorageError> {
        let dir = self.dir(id);
        if !self.vfs.is_dir(&dir) {
            return Err(StorageError::NotFound(id.clone()));
        }
        FsPartition::open(id, dir, self.config.clone(), Arc::clone(&self.vfs), mode)
    }

    /// Opens a partition directory anywhere read-only (e.g. for `mirrorlog dump`); the name must be
    /// `{topic}-{partition}`. Nothing on disk changes.
    pub fn open_dir(dir: &Path) -> Result<FsPartition, StorageError> {
        let name = dir
            .file_name()
            .and_then(|name| name.to_str())
            .ok_or_else(|| StorageError::Config(format!("{} has no usable name", dir.display())))?;
        let id = PartitionId::from_dir_name(name)?;
        let parent = dir.parent().unwrap_or_else(|| Path::new("."));
        FsPartition::open(
            &id,
            dir.to_owned(),
            FsConfig::new(parent),
            Arc::new(RealFs),
            OpenMode::ReadOnly,
        )
    }
}

fn check_segment_bytes(config: &FsConfig) -> Result<(), StorageError> {
    if config.segment_bytes < 1024 || config.segment_bytes > i32::MAX as u64 {
        return Err(StorageError::Config(format!(
            "segment size {} must be between 1 KiB and {} bytes",
            config.segment_bytes,
            i32::MAX
        )));
    }
    Ok(())
}

/// Creates `dir` and any missing parents, and syncs the parent of each one created, so that a partition made
/// durable inside it cannot vanish with its data directory at a power loss.
fn create_dir_durably(vfs: &dyn Vfs, dir: &Path) -> Result<(), StorageError> {
    let missing: Vec<&Path> = dir.ancestors().take_while(|path| !vfs.is_dir(path)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    vfs.create_dir_all(dir)
        .map_err(|e| StorageError::io(format!("creating {}", dir.display()), e))?;
    for created in missing.iter().rev() {
        let parent = match created.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        files::sync_dir(vfs, parent)?;
    }
    Ok(())
}

/// The directory, in the data directory, where log cleaners stage their rewrites (`partition::FsStager`): not a
/// partition's name, so listing skips it; removed when the store opens.
pub(crate) const STAGING_DIR: &str = "cleaning.tmp";

impl BlockingStore for FsStorage {
    fn create(&self, id: &PartitionId) -> Result<Box<dyn BlockingPartition>, StorageError> {
        let dir = self.dir(id);
        if self.vfs.exists(&dir) {
            return Err(StorageError::AlreadyExists(id.clone()));
        }
        let partition = FsPartition::create(id, dir, self.config.clone(), Arc::clone(&self.vfs))?;
        files::sync_dir(self.vfs.as_ref(), &self.config.data_dir)?;
        Ok(Box::new(partition))
    }

    fn open(&self, id: &PartitionId, mode: OpenMode) -> Result<Box<dyn BlockingPartition>, StorageError> {
        Ok(Box::new(self.open_partition(id, mode)?))
    }

    fn list(&self) -> Result<Vec<PartitionId>, StorageError> {
        let entries = self
            .vfs
            .read_dir(&self.config.data_dir)
            .map_err(|e| StorageError::io(format!("listing {}", self.config.data_dir.display()), e))?;
        let mut ids = Vec::new();
        for entry in entries {
            if !entry.is_dir {
                continue;
            }
            if let Ok(id) = PartitionId::from_dir_name(&entry.name) {
                ids.push(id);
            }
        }
        ids.sort();
        Ok(ids)
    }

    fn delete(&self, id: &PartitionId) -> Result<(), StorageError> {
        let dir = self.dir(id);
        if !self.vfs.is_dir(&dir) {
            return Err(StorageError::NotFound(id.clone()));
        }
        self.vfs
            .remove_dir_all(&dir)
            .map_err(|e| StorageError::io(format!("deleting {}", dir.display()), e))?;
        files::sync_dir(self.vfs.as_ref(), &self.config.data_dir)
    }
}
