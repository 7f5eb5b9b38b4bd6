//! Choosing a storage backend from a TOML file.
//!
//! ```toml
//! backend = "fs"                 # fs | sled | rocks | memory
//! data_dir = "/var/lib/mirrorlog"
//! segment_bytes = 1073741824     # fs: roll segments past this size (Kafka's segment.bytes)
//! index_interval_bytes = 4096    # fs: bytes between sparse index entries
//! durability = "sync"            # sync | buffered: what "flush" means for the log's writers
//! ```
//!
//! Unknown keys are errors (a typo must not silently fall back to a default). `rocks` needs the `rocks` cargo
//! feature; a build without it says so.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use storage::{Durability, Storage, StorageError};

/// The parsed configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// Which backend.
    pub backend: String,
    /// Where it keeps its data (not used by `memory`).
    pub data_dir: Option<PathBuf>,
    /// fs: segment size.
    pub segment_bytes: Option<u64>,
    /// fs: index interval.
    pub index_interval_bytes: Option<u64>,
    /// `sync` (default) or `buffered`.
    pub durability: Option<String>,
}

impl StorageConfig {
    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<Self, StorageError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| StorageError::io(format!("reading {}", path.display()), e))?;
        Self::parse(&text)
    }

    /// Parses config text.
    pub fn parse(text: &str) -> Result<Self, StorageError> {
        toml::from_str(text).map_err(|error| StorageError::Config(error.to_string()))
    }

    /// The durability mode.
    pub fn durability(&self) -> Result<Durability, StorageError> {
        match self.durability.as_deref() {
            None | Some("sync") => Ok(Durability::Sync),
            Some("buffered") => Ok(Durability::Buffered),
            Some(other) => Err(StorageError::Config(format!(
                "durability {other:?} is not one of \"sync\", \"buffered\""
            ))),
        }
    }

    fn data_dir(&self) -> Result<&Path, StorageError> {
        self.data_dir
            .as_deref()
            .ok_or_else(|| StorageError::Config(format!("backend {:?} needs data_dir", self.backend)))
    }

    fn refuse_fs_options(&self) -> Result<(), StorageError> {
        if self.segment_bytes.is_some() || self.index_interval_bytes.is_some() {
            return Err(StorageError::Config(format!(
                "segment_bytes and index_interval_bytes are options of the fs backend, not {:?}",
                self.backend
            )));
        }
        Ok(())
    }

    /// Opens the configured store.
    pub fn open(&self) -> Result<Box<dyn Storage>, StorageError> {
        self.durability()?;
        match self.backend.as_str() {
            "fs" => {
                let mut config = storage_fs::FsConfig::new(self.data_dir()?);
                if let Some(segment_bytes) = self.segment_bytes {
                    config.segment_bytes = segment_bytes;
                }
                if let Some(interval) = self.index_interval_bytes {
                    config.index_interval_bytes = interval;
                }
                Ok(Box::new(storage_fs::FsStorage::open(config)?))
            }
            "sled" => {
                self.refuse_fs_options()?;
                Ok(Box::new(storage_sled::SledStorage::open(
                    storage_sled::SledConfig::new(self.data_dir()?),
                )?))
            }
            "rocks" => {
                self.refuse_fs_options()?;
                self.open_rocks()
            }
            "memory" => {
                self.refuse_fs_options()?;
                Ok(Box::new(storage::MemoryStorage::new()))
            }
            other => Err(StorageError::Config(format!(
                "unknown backend {other:?}; expected \"fs\", \"sled\", \"rocks\" or \"memory\""
            ))),
        }
    }

    #[cfg(feature = "rocks")]
    fn open_rocks(&self) -> Result<Box<dyn Storage>, StorageError> {
        Ok(Box::new(storage_rocks::RocksStorage::open(
            storage_rocks::RocksConfig::new(self.data_dir()?),
        )?))
    }

    #[cfg(not(feature = "rocks"))]
    fn open_rocks(&self) -> Result<Box<dyn Storage>, StorageError> {
        Err(StorageError::BackendNotCompiled {
            backend: "rocks".into(),
            feature: "rocks",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_error(config: &StorageConfig) -> String {
        match config.open() {
            Ok(_) => panic!("{config:?} opened"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn fs_config_is_parsed_with_its_options() {
        let config = StorageConfig::parse(
            "backend = \"fs\"\ndata_dir = \"/tmp/x\"\nsegment_bytes = 4096\ndurability = \"buffered\"\n",
        )
        .unwrap();
        assert_eq!(config.segment_bytes, Some(4096));
        assert_eq!(config.durability().unwrap(), Durability::Buffered);
    }

    #[test]
    fn unknown_keys_backends_and_modes_are_errors() {
        assert!(StorageConfig::parse("backend = \"fs\"\ndata_dri = \"/x\"\n").is_err());
        let unknown = StorageConfig::parse("backend = \"lmdb\"\ndata_dir = \"/x\"\n").unwrap();
        assert!(open_error(&unknown).contains("unknown backend"));
        let mode = StorageConfig::parse("backend = \"memory\"\ndurability = \"eventually\"\n").unwrap();
        assert!(mode.open().is_err());
        let misplaced =
            StorageConfig::parse("backend = \"sled\"\ndata_dir = \"/x\"\nsegment_bytes = 1\n").unwrap();
        assert!(open_error(&misplaced).contains("fs backend"));
        let missing_dir = StorageConfig::parse("backend = \"fs\"\n").unwrap();
        assert!(open_error(&missing_dir).contains("data_dir"));
    }

    #[cfg(not(feature = "rocks"))]
    #[test]
    fn rocks_without_its_feature_names_the_feature() {
        let config = StorageConfig::parse("backend = \"rocks\"\ndata_dir = \"/tmp/never\"\n").unwrap();
        let error = open_error(&config);
        assert!(error.contains("--features rocks"), "{error}");
    }
}
