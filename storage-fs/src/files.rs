//! File names of Kafka's partition directory and the few file operations every writer here needs.
//!
//! Kafka names a segment's files after its base offset, zero-padded to 20 digits: `00000000000000000042.log`,
//! `.index`, `.timeindex`, `.txnindex`; producer snapshots after the map end offset: `….snapshot`. Our own
//! partition metadata lives in `mirrorlog.metadata` (Kafka ignores files it does not know).

use std::path::{Path, PathBuf};

use storage::StorageError;

use crate::vfs::{OpenFor, Vfs};

/// Segment data.
pub const LOG_SUFFIX: &str = "log";
/// Sparse offset index.
pub const INDEX_SUFFIX: &str = "index";
/// Sparse time index.
pub const TIME_INDEX_SUFFIX: &str = "timeindex";
/// Aborted-transaction index.
pub const TXN_INDEX_SUFFIX: &str = "txnindex";
/// Producer snapshot.
pub const SNAPSHOT_SUFFIX: &str = "snapshot";
/// Our partition metadata file.
pub const METADATA_FILE: &str = "mirrorlog.metadata";
/// Suffix of files being written before their atomic rename.
pub const TEMP_SUFFIX: &str = "tmp";

/// `{offset:020}.{suffix}` in `dir`.
pub fn offset_file(dir: &Path, offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{offset:020}.{suffix}"))
}

/// What a file in a partition directory is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirEntry {
    /// A `.log`, `.index`, `.timeindex` or `.txnindex` of a segment.
    Segment {
        /// The segment's base offset.
        base_offset: i64,
        /// Which of its files.
        suffix: String,
    },
    /// A producer snapshot.
    Snapshot {
        /// Its offset.
        offset: i64,
    },
    /// Our metadata file.
    Metadata,
    /// A leftover of an interrupted write (ours) or of Kafka's deferred deletes and compaction.
    Leftover,
    /// Anything else: left alone and reported.
    Unknown,
}

/// Classifies a file name.
pub fn classify(name: &str) -> DirEntry {
    if name == METADATA_FILE {
        return DirEntry::Metadata;
    }
    if [".tmp", ".deleted", ".cleaned", ".swap"]
        .iter()
        .any(|end| name.ends_with(end))
    {
        return DirEntry::Leftover;
    }
    let Some((stem, suffix)) = name.split_once('.') else {
        return DirEntry::Unknown;
    };
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return DirEntry::Unknown;
    }
    let Ok(offset) = stem.parse::<i64>() else {
        return DirEntry::Unknown;
    };
    match suffix {
        SNAPSHOT_SUFFIX => DirEntry::Snapshot { offset },
        LOG_SUFFIX | INDEX_SUFFIX | TIME_INDEX_SUFFIX | TXN_INDEX_SUFFIX => DirEntry::Segment {
            base_offset: offset,
            suffix: suffix.to_owned(),
        },
        _ => DirEntry::Unknown,
    }
}

/// Makes a directory's entries (creations, renames, removals) durable.
pub fn sync_dir(vfs: &dyn Vfs, dir: &Path) -> Result<(), StorageError> {
    vfs.sync_dir(dir)
        .map_err(|e| StorageError::io(format!("syncing directory {}", dir.display()), e))
}

/// Writes `bytes` to `path` atomically and durably: temp file, fsync, rename, fsync of the directory.
pub fn write_atomically(vfs: &dyn Vfs, path: &Path, bytes: &[u8]) -> Result<(), StorageError> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let mut temp = path.as_os_str().to_owned();
    temp.push(".");
    temp.push(TEMP_SUFFIX);
    let temp = PathBuf::from(temp);
    let io = |what: &str, e| StorageError::io(format!("{what} {}", temp.display()), e);
    let mut file = vfs
        .open(&temp, OpenFor::CreateEmpty)
        .map_err(|e| io("creating", e))?;
    file.append(bytes).map_err(|e| io("writing", e))?;
    file.sync().map_err(|e| io("syncing", e))?;
    drop(file);
    vfs.rename(&temp, path).map_err(|e| io("renaming", e))?;
    sync_dir(vfs, dir)
}

/// Appends `bytes` to the existing file `path` and syncs it (the file's directory entry must be durable already).
pub fn append_durably(vfs: &dyn Vfs, path: &Path, bytes: &[u8]) -> Result<(), StorageError> {
    let io = |what: &str, e| StorageError::io(format!("{what} {}", path.display()), e);
    let mut file = vfs.open(path, OpenFor::Append).map_err(|e| io("opening", e))?;
    file.append(bytes).map_err(|e| io("appending to", e))?;
    file.sync().map_err(|e| io("syncing", e))
}

/// Cuts the existing file `path` to `len` bytes and syncs the cut (a torn tail found on a read-write open).
pub fn cut_durably(vfs: &dyn Vfs, path: &Path, len: u64) -> Result<(), StorageError> {
    vfs.open(path, OpenFor::Append)
        .and_then(|mut file| {
            file.set_len(len)?;
            file.sync()
        })
        .map_err(|e| StorageError::io(format!("cutting the torn tail of {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_file_names_are_classified() {
        assert_eq!(
            classify("00000000000000000042.log"),
            DirEntry::Segment {
                base_offset: 42,
                suffix: "log".into()
            }
        );
        assert_eq!(
            classify("00000000000000000042.snapshot"),
            DirEntry::Snapshot { offset: 42 }
        );
        assert_eq!(classify("00000000000000000042.snapshot.tmp"), DirEntry::Leftover);
        assert_eq!(classify("00000000000000000042.log.deleted"), DirEntry::Leftover);
        assert_eq!(classify(METADATA_FILE), DirEntry::Metadata);
        for unknown in [
            "leader-epoch-checkpoint",
            "42.log",
            "0000000000000000004x.log",
            "00000000000000000042.foo",
        ] {
            assert_eq!(classify(unknown), DirEntry::Unknown, "{unknown}");
        }
        assert_eq!(
            offset_file(Path::new("/d"), 7, "index"),
            PathBuf::from("/d/00000000000000000007.index")
        );
    }
}
