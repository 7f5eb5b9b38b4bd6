//! The file operations the backend makes, behind one small trait, so a test can put the power-loss simulator
//! ([`crate::sim::SimFs`]) where the real file system ([`RealFs`]) normally is.
//!
//! The list is deliberately short — exactly what `storage-fs` needs: create, list and remove directories and
//! files, rename within a directory, read a whole small file, open a file for appending or reading, and the two
//! kinds of sync (a file's data, a directory's entries). Anything that must survive a crash goes through one of
//! the two syncs; the simulator keeps everything else volatile.

use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

/// How a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenFor {
    /// Reading only; a write through the handle fails.
    Read,
    /// Reading and appending, the file must exist.
    Append,
    /// Reading and appending, created empty when missing.
    AppendOrCreate,
    /// Reading and appending, created when missing and emptied when present.
    CreateEmpty,
}

/// A directory entry: its name and whether it is a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The file name.
    pub name: String,
    /// True for a directory.
    pub is_dir: bool,
}

/// The file system under the backend.
pub trait Vfs: Send + Sync + Debug {
    /// Creates one directory (its parent must exist).
    fn create_dir(&self, path: &Path) -> io::Result<()>;
    /// Creates a directory and any missing parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// True when `path` is a directory.
    fn is_dir(&self, path: &Path) -> bool;
    /// True when anything exists at `path`.
    fn exists(&self, path: &Path) -> bool;
    /// The entries of a directory, in no particular order.
    fn read_dir(&self, path: &Path) -> io::Result<Vec<Entry>>;
    /// Removes a directory and everything under it.
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Renames a file, replacing `to` atomically (across directories of one file system too: a cleaner's staged
    /// segments move from the staging directory into the partition's).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Reads a whole file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Makes a directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Opens a file.
    fn open(&self, path: &Path, how: OpenFor) -> io::Result<Box<dyn VfsFile>>;
}

/// An open file.
pub trait VfsFile: Send + Sync + Debug {
    /// Its current length.
    fn size(&self) -> io::Result<u64>;
    /// Fills `buf` from `offset`; fails if the file ends first.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// `len` bytes from `offset` in a new buffer; fails if the file ends first. By default a zeroed buffer that
    /// [`read_exact_at`](Self::read_exact_at) fills; [`RealFs`] reads into it without zeroing it first.
    fn read_vec_at(&self, len: usize, offset: u64) -> io::Result<Vec<u8>> {
        let mut buffer = vec![0; len];
        self.read_exact_at(&mut buffer, offset)?;
        Ok(buffer)
    }
    /// Writes all of `bytes` at the end of the file.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Writes `parts` back to back at the end of the file, without joining them first (`writev` in
    /// [`RealFs`], which may advance the slices). Like any write, an interrupted one may leave a prefix. By
    /// default, one append per part.
    fn append_parts(&mut self, parts: &mut [IoSlice<'_>]) -> io::Result<()> {
        parts.iter().try_for_each(|part| self.append(part))
    }
    /// Cuts (or extends with zeros) the file to `len` bytes.
    fn set_len(&mut self, len: u64) -> io::Result<()>;
    /// Makes the file's data and length durable (`fdatasync`).
    fn sync(&self) -> io::Result<()>;
}

/// The real file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealFs;

impl Vfs for RealFs {
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir(path)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<Entry>> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            entries.push(Entry {
                name: entry.file_name().to_string_lossy().into_owned(),
                // `file_type` does not follow symlinks; a symlinked partition directory still counts.
                is_dir: entry.path().is_dir(),
            });
        }
        Ok(entries)
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }

    fn open(&self, path: &Path, how: OpenFor) -> io::Result<Box<dyn VfsFile>> {
        Ok(Box::new(RealFile(open_real(path, how)?, Mutex::new(()))))
    }
}

/// Opens a file of the real file system as `how` says.
pub(crate) fn open_real(path: &Path, how: OpenFor) -> io::Result<File> {
    match how {
        OpenFor::Read => File::open(path),
        OpenFor::Append | OpenFor::AppendOrCreate | OpenFor::CreateEmpty => {
            let file = OpenOptions::new()
                .read(true)
                .append(true)
                .create(how != OpenFor::Append)
                .open(path)?;
            // `O_APPEND` and `O_TRUNC` do not combine in `OpenOptions`: empty it after opening.
            if how == OpenFor::CreateEmpty {
                file.set_len(0)?;
            }
            Ok(file)
        }
    }
}

/// Reads `len` bytes at `offset` through the file's cursor (the caller holds the cursor's lock) into memory not
/// zeroed first: zeroing a fetched megabyte before reading over it cost 12 % of a mirror's fetching thread.
pub(crate) fn read_vec_through_cursor(mut file: &File, len: usize, offset: u64) -> io::Result<Vec<u8>> {
    let mut buffer = Vec::new();
    buffer
        .try_reserve_exact(len)
        .map_err(|error| io::Error::new(io::ErrorKind::OutOfMemory, error))?;
    file.seek(SeekFrom::Start(offset))?;
    file.take(len as u64).read_to_end(&mut buffer)?;
    if buffer.len() < len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "{len} bytes wanted at {offset}, the file ends after {}",
                buffer.len()
            ),
        ));
    }
    Ok(buffer)
}

/// Writes every part, in order, with as few `writev` calls as the kernel allows.
pub(crate) fn write_all_vectored(mut file: &File, parts: &mut [IoSlice<'_>]) -> io::Result<()> {
    // Linux takes at most 1,024 buffers per `writev` (IOV_MAX).
    const MAX_BUFFERS: usize = 1024;
    for mut left in parts.chunks_mut(MAX_BUFFERS) {
        IoSlice::advance_slices(&mut left, 0);
        while !left.is_empty() {
            match file.write_vectored(left) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(written) => IoSlice::advance_slices(&mut left, written),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
    }
    Ok(())
}

/// A file of [`RealFs`], and the lock of its cursor: [`VfsFile::read_vec_at`] reads through the cursor (std reads
/// into memory it has not zeroed only that way), one reader at a time. Appends ignore the cursor (`O_APPEND`).
#[derive(Debug)]
struct RealFile(File, Mutex<()>);

impl VfsFile for RealFile {
    fn size(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }

    fn read_vec_at(&self, len: usize, offset: u64) -> io::Result<Vec<u8>> {
        let _cursor = self.1.lock().unwrap_or_else(PoisonError::into_inner);
        read_vec_through_cursor(&self.0, len, offset)
    }

    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.0.write_all(bytes)
    }

    fn append_parts(&mut self, parts: &mut [IoSlice<'_>]) -> io::Result<()> {
        write_all_vectored(&self.0, parts)
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn sync(&self) -> io::Result<()> {
        self.0.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_a_range_into_a_new_buffer_returns_exactly_those_bytes_and_leaves_appends_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut file = RealFs.open(&path, OpenFor::CreateEmpty).unwrap();
        let bytes: Vec<u8> = (0..=255).cycle().take(10_000).collect();
        file.append(&bytes).unwrap();
        assert_eq!(file.read_vec_at(3_000, 5_000).unwrap(), bytes[5_000..8_000]);
        // The read moved the cursor; an append still goes to the end.
        file.append(b"tail").unwrap();
        assert_eq!(file.read_vec_at(4, 10_000).unwrap(), b"tail");
        assert_eq!(file.read_vec_at(0, 10_004).unwrap(), Vec::<u8>::new());
        let short = file.read_vec_at(10, 9_998).unwrap_err();
        assert_eq!(short.kind(), io::ErrorKind::UnexpectedEof, "{short}");
    }
}
