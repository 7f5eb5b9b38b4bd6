//! The storage configuration file and the one registry that turns it into a store.
//!
//! ```toml
//! backend = "fs"                 # fs | sled | rocks | memory
//! data_dir = "/var/lib/mirrorlog"
//! segment_bytes = 1073741824     # fs only: roll segments past this size (Kafka's segment.bytes)
//! index_interval_bytes = 4096    # fs only: bytes between sparse index entries
//! max_open_files = 8192          # fs only: descriptors kept open (default: half of `ulimit -n`)
//! durability = "sync"            # sync | buffered: what an acknowledged write waits for
//! ```
//!
//! The schema is a serde enum tagged by `backend`, so each backend accepts exactly its own keys: unknown keys,
//! an fs option on another backend, a missing `data_dir` are errors naming the key (a typo must not silently
//! fall back to a default). `rocks` needs the `rocks` cargo feature; a build without it says so.
//!
//! Every tool opens stores through [`StorageConfig::open`] (read-write) or [`StorageConfig::open_read_only`]
//! (inspection: nothing is created or repaired); the CLI, the benchmark and the simulator share this registry.
//! `durability` reaches the partition log through [`StorageConfig::durability`] →
//! `partition_log::LogConfig::durability`, which `PartitionLog::flush_acknowledged` applies.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use storage::{Durability, Storage, StorageError};

/// Why a configuration could not be read or opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The text is not a valid configuration.
    #[error("invalid storage configuration: {0}")]
    Invalid(String),
    /// The configuration names a backend this build does not include.
    #[error("storage backend {backend:?} is not in this build; rebuild with `--features {feature}`")]
    BackendNotCompiled {
        /// The backend named.
        backend: &'static str,
        /// The cargo feature that adds it.
        feature: &'static str,
    },
    /// A read-only open of a data directory that does not exist (inspection never creates one).
    #[error("data directory {0} does not exist")]
    MissingDataDir(PathBuf),
    /// The store refused to open.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// What an acknowledged write waits for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DurabilityMode {
    /// Durable on disk (fsync, or the database's synced write): survives a machine crash.
    #[default]
    Sync,
    /// Handed to the operating system: survives a process crash, not a machine crash.
    Buffered,
}

impl From<DurabilityMode> for Durability {
    fn from(mode: DurabilityMode) -> Self {
        match mode {
            DurabilityMode::Sync => Durability::Sync,
            DurabilityMode::Buffered => Durability::Buffered,
        }
    }
}

/// The file-system backend's options.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsOptions {
    /// The directory holding one directory per partition.
    pub data_dir: PathBuf,
    /// Roll segments past this size (default: Kafka's 1 GiB).
    pub segment_bytes: Option<u64>,
    /// Bytes between sparse index entries (default: Kafka's 4096).
    pub index_interval_bytes: Option<u64>,
    /// The most file descriptors the store keeps open (default: half the process's limit).
    pub max_open_files: Option<usize>,
    /// What an acknowledged write waits for.
    #[serde(default)]
    pub durability: DurabilityMode,
}

/// An embedded database backend's options.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DbOptions {
    /// The database directory.
    pub data_dir: PathBuf,
    /// What an acknowledged write waits for.
    #[serde(default)]
    pub durability: DurabilityMode,
}

/// The in-memory backend's options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryOptions {
    /// What an acknowledged write waits for (memory keeps nothing across a restart either way).
    #[serde(default)]
    pub durability: DurabilityMode,
}

/// A parsed storage configuration; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "backend", rename_all = "lowercase")]
pub enum StorageConfig {
    /// Kafka's directory layout (`storage-fs`).
    Fs(FsOptions),
    /// sled 0.34.7 (`storage-sled`).
    Sled(DbOptions),
    /// RocksDB (`storage-rocks`, with the `rocks` feature).
    Rocks(DbOptions),
    /// In memory (tests, the simulator).
    Memory(MemoryOptions),
}

/// A storage backend, by the name a config's `backend` key gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Backend {
    /// Kafka's directory layout (`storage-fs`).
    Fs,
    /// sled 0.34.7 (`storage-sled`).
    Sled,
    /// RocksDB (`storage-rocks`, with the `rocks` feature).
    Rocks,
    /// In memory.
    Memory,
}

impl Backend {
    /// Every backend, in the order the docs list them.
    pub const ALL: [Backend; 4] = [Backend::Fs, Backend::Sled, Backend::Rocks, Backend::Memory];

    /// The name a config file uses.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Fs => "fs",
            Backend::Sled => "sled",
            Backend::Rocks => "rocks",
            Backend::Memory => "memory",
        }
    }

    /// True when this build can open the backend (RocksDB needs the `rocks` feature).
    pub fn is_compiled(self) -> bool {
        self != Backend::Rocks || cfg!(feature = "rocks")
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Backend {
    type Err = ConfigError;

    fn from_str(name: &str) -> Result<Self, ConfigError> {
        Backend::ALL
            .into_iter()
            .find(|backend| backend.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Backend::ALL.iter().map(|backend| backend.name()).collect();
                ConfigError::Invalid(format!("unknown backend {name:?}; expected one of {names:?}"))
            })
    }
}

impl StorageConfig {
    /// The largest config file read (a real one is a few hundred bytes).
    pub const MAX_FILE_BYTES: u64 = 1 << 20;

    /// Reads and parses a config file (a regular file of at most [`Self::MAX_FILE_BYTES`]: a FIFO or a device such
    /// as `/dev/zero` is refused before it is opened).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let metadata = std::fs::metadata(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        if !metadata.is_file() || metadata.len() > Self::MAX_FILE_BYTES {
            return Err(ConfigError::Invalid(format!(
                "{} is not a regular file of at most {} bytes",
                path.display(),
                Self::MAX_FILE_BYTES
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text)
    }

    /// Parses config text.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|error| ConfigError::Invalid(error.message().to_owned()))
    }

    /// A backend's configuration with its defaults, under `data_dir` (ignored by `memory`).
    pub fn for_backend(backend: Backend, data_dir: &Path) -> Self {
        let db = || DbOptions {
            data_dir: data_dir.to_owned(),
            durability: DurabilityMode::default(),
        };
        match backend {
            Backend::Fs => StorageConfig::Fs(FsOptions {
                data_dir: data_dir.to_owned(),
                segment_bytes: None,
                index_interval_bytes: None,
                max_open_files: None,
                durability: DurabilityMode::default(),
            }),
            Backend::Sled => StorageConfig::Sled(db()),
            Backend::Rocks => StorageConfig::Rocks(db()),
            Backend::Memory => StorageConfig::Memory(MemoryOptions::default()),
        }
    }

    /// The same configuration — every option kept — with its data under `data_dir` instead (a simulator gives each
    /// cluster and replica a directory of its own); `memory` is returned as it is.
    pub fn with_data_dir(&self, data_dir: &Path) -> Self {
        let mut config = self.clone();
        match &mut config {
            StorageConfig::Fs(options) => options.data_dir = data_dir.to_owned(),
            StorageConfig::Sled(options) | StorageConfig::Rocks(options) => {
                options.data_dir = data_dir.to_owned()
            }
            StorageConfig::Memory(_) => {}
        }
        config
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        match self {
            StorageConfig::Fs(_) => Backend::Fs,
            StorageConfig::Sled(_) => Backend::Sled,
            StorageConfig::Rocks(_) => Backend::Rocks,
            StorageConfig::Memory(_) => Backend::Memory,
        }
    }

    /// What an acknowledged write waits for.
    pub fn durability(&self) -> Durability {
        match self {
            StorageConfig::Fs(options) => options.durability,
            StorageConfig::Sled(options) | StorageConfig::Rocks(options) => options.durability,
            StorageConfig::Memory(options) => options.durability,
        }
        .into()
    }

    /// The data directory (`None` for memory).
    pub fn data_dir(&self) -> Option<&Path> {
        match self {
            StorageConfig::Fs(options) => Some(&options.data_dir),
            StorageConfig::Sled(options) | StorageConfig::Rocks(options) => Some(&options.data_dir),
            StorageConfig::Memory(_) => None,
        }
    }

    /// True when this build can open the configured backend.
    pub fn is_compiled(&self) -> bool {
        self.backend().is_compiled()
    }

    /// Opens the configured store for reading and writing (creating the data directory if needed).
    pub fn open(&self) -> Result<Box<dyn Storage>, ConfigError> {
        match self {
            StorageConfig::Fs(options) => Ok(Box::new(storage_fs::FsStorage::open(fs_config(options))?)),
            StorageConfig::Sled(options) => Ok(Box::new(storage_sled::SledStorage::open(
                storage_sled::SledConfig::new(&options.data_dir),
            )?)),
            StorageConfig::Rocks(options) => open_rocks(options),
            StorageConfig::Memory(_) => Ok(Box::new(storage::MemoryStorage::new())),
        }
    }

    /// Opens the configured store for inspection: nothing in the data directory changes. A missing data directory
    /// is an error (nothing is created); fs opens partitions with `Storage::open_read_only`, which repairs
    /// nothing; RocksDB opens in its read-only mode; sled, which has none, opens a private copy of the database
    /// (`storage_sled::SledStorage::open_read_only`). On sled and RocksDB, creating or deleting a partition and
    /// opening one for writing are refused.
    pub fn open_read_only(&self) -> Result<Box<dyn Storage>, ConfigError> {
        if let Some(dir) = self.data_dir() {
            if !dir.is_dir() {
                return Err(ConfigError::MissingDataDir(dir.to_owned()));
            }
        }
        match self {
            StorageConfig::Sled(options) => Ok(Box::new(storage_sled::SledStorage::open_read_only(
                storage_sled::SledConfig::new(&options.data_dir),
            )?)),
            StorageConfig::Rocks(options) => open_rocks_read_only(options),
            // A running broker may be using the data directory: its cleaners' staged rewrites stay.
            StorageConfig::Fs(options) => Ok(Box::new(storage_fs::FsStorage::open_inspecting(fs_config(
                options,
            ))?)),
            StorageConfig::Memory(_) => self.open(),
        }
    }
}

/// The fs backend's config from the storage config's options.
fn fs_config(options: &FsOptions) -> storage_fs::FsConfig {
    let mut config = storage_fs::FsConfig::new(&options.data_dir);
    if let Some(segment_bytes) = options.segment_bytes {
        config.segment_bytes = segment_bytes;
    }
    if let Some(interval) = options.index_interval_bytes {
        config.index_interval_bytes = interval;
    }
    config.max_open_files = options.max_open_files;
    config
}

#[cfg(feature = "rocks")]
fn open_rocks(options: &DbOptions) -> Result<Box<dyn Storage>, ConfigError> {
    Ok(Box::new(storage_rocks::RocksStorage::open(
        storage_rocks::RocksConfig::new(&options.data_dir),
    )?))
}

#[cfg(feature = "rocks")]
fn open_rocks_read_only(options: &DbOptions) -> Result<Box<dyn Storage>, ConfigError> {
    Ok(Box::new(storage_rocks::RocksStorage::open_read_only(
        storage_rocks::RocksConfig::new(&options.data_dir),
    )?))
}

#[cfg(not(feature = "rocks"))]
fn open_rocks(_options: &DbOptions) -> Result<Box<dyn Storage>, ConfigError> {
    Err(ConfigError::BackendNotCompiled {
        backend: "rocks",
        feature: "rocks",
    })
}

#[cfg(not(feature = "rocks"))]
fn open_rocks_read_only(options: &DbOptions) -> Result<Box<dyn Storage>, ConfigError> {
    open_rocks(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_error(text: &str) -> String {
        match StorageConfig::parse(text) {
            Ok(config) => panic!("{text:?} parsed as {config:?}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn fs_config_is_parsed_with_its_options() {
        let config = StorageConfig::parse(
            "backend = \"fs\"\ndata_dir = \"/tmp/x\"\nsegment_bytes = 4096\ndurability = \"buffered\"\n",
        )
        .unwrap();
        let StorageConfig::Fs(options) = &config else {
            panic!("{config:?}");
        };
        assert_eq!(options.segment_bytes, Some(4096));
        assert_eq!(config.durability(), Durability::Buffered);
        assert_eq!(config.data_dir(), Some(Path::new("/tmp/x")));
    }

    #[test]
    fn with_data_dir_moves_the_data_and_keeps_every_other_option() {
        let config = StorageConfig::parse(
            "backend = \"fs\"\ndata_dir = \"/a\"\nsegment_bytes = 4096\nindex_interval_bytes = 64\ndurability = \"buffered\"\n",
        )
        .unwrap();
        let moved = config.with_data_dir(Path::new("/b"));
        assert_eq!(moved.data_dir(), Some(Path::new("/b")));
        let (StorageConfig::Fs(before), StorageConfig::Fs(after)) = (&config, &moved) else {
            panic!("{moved:?}");
        };
        assert_eq!(
            (after.segment_bytes, after.index_interval_bytes, after.durability),
            (
                before.segment_bytes,
                before.index_interval_bytes,
                before.durability
            )
        );
    }

    #[test]
    fn backend_names_round_trip_and_unknown_ones_are_named_in_the_error() {
        for backend in Backend::ALL {
            assert_eq!(backend.name().parse::<Backend>().unwrap(), backend);
            assert_eq!(
                StorageConfig::for_backend(backend, Path::new("/x")).backend(),
                backend
            );
        }
        let error = "lmdb".parse::<Backend>().unwrap_err().to_string();
        assert!(error.contains("lmdb"), "{error}");
    }

    #[test]
    fn durability_defaults_to_sync() {
        let config = StorageConfig::parse("backend = \"memory\"\n").unwrap();
        assert_eq!(config.durability(), Durability::Sync);
    }

    #[test]
    fn unknown_keys_backends_and_modes_are_errors_naming_them() {
        assert!(parse_error("backend = \"fs\"\ndata_dri = \"/x\"\n").contains("data_dri"));
        assert!(parse_error("backend = \"lmdb\"\ndata_dir = \"/x\"\n").contains("lmdb"));
        assert!(parse_error("backend = \"memory\"\ndurability = \"eventually\"\n").contains("eventually"));
        assert!(
            parse_error("backend = \"sled\"\ndata_dir = \"/x\"\nsegment_bytes = 1\n")
                .contains("segment_bytes")
        );
        assert!(parse_error("backend = \"fs\"\n").contains("data_dir"));
        assert!(parse_error("data_dir = \"/x\"\n").contains("backend"));
    }

    #[test]
    fn read_only_open_never_creates_the_data_directory() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nothing-here");
        for backend in [Backend::Fs, Backend::Sled] {
            let config = StorageConfig::for_backend(backend, &missing);
            assert!(matches!(
                config.open_read_only(),
                Err(ConfigError::MissingDataDir(_))
            ));
            assert!(!missing.exists(), "{backend} created {}", missing.display());
        }
    }

    #[cfg(not(feature = "rocks"))]
    #[test]
    fn rocks_without_its_feature_names_the_feature() {
        let config = StorageConfig::parse("backend = \"rocks\"\ndata_dir = \"/tmp/never\"\n").unwrap();
        let error = config.open().err().unwrap().to_string();
        assert!(error.contains("--features rocks"), "{error}");
    }
}
