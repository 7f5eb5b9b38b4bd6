//! No fsync runs on an executor thread (issue 33, item 4): the durable workload on storage-fs, whose file system
//! is wrapped so that every file and directory sync checks the thread it runs on (a segment roll inside an append
//! included), and whose store is wrapped by `NoSyncOnWorkers` as sled and RocksDB are in their own crates.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use std::io;
use std::path::Path;
use std::sync::Arc;

use storage_fs::vfs::{Entry, OpenFor, Vfs, VfsFile};
use storage_fs::{FsConfig, FsStorage, PooledFs};
use storage_testkit::executor_guard::{guarded_runtime, NoSyncOnWorkers, WorkerThreads};

/// A file system whose syncs check that they run off the executor.
#[derive(Debug)]
struct SyncGuardFs {
    inner: PooledFs,
    threads: WorkerThreads,
}

#[derive(Debug)]
struct SyncGuardFile {
    inner: Box<dyn VfsFile>,
    threads: WorkerThreads,
}

impl VfsFile for SyncGuardFile {
    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }

    fn read_vec_at(&self, len: usize, offset: u64) -> io::Result<Vec<u8>> {
        self.inner.read_vec_at(len, offset)
    }

    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.append(bytes)
    }

    fn append_parts(&mut self, parts: &mut [io::IoSlice<'_>]) -> io::Result<()> {
        self.inner.append_parts(parts)
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }

    fn sync(&self) -> io::Result<()> {
        self.threads.check("a file fsync");
        self.inner.sync()
    }
}

impl Vfs for SyncGuardFs {
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir(path)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.inner.is_dir(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<Entry>> {
        self.inner.read_dir(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_dir_all(path)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.threads.check("a directory fsync");
        self.inner.sync_dir(path)
    }
    fn open(&self, path: &Path, how: OpenFor) -> io::Result<Box<dyn VfsFile>> {
        Ok(Box::new(SyncGuardFile {
            inner: self.inner.open(path, how)?,
            threads: self.threads.clone(),
        }))
    }
}

#[test]
fn no_fsync_runs_on_an_executor_thread_on_fs() {
    let (runtime, threads) = guarded_runtime(2);
    let dir = tempfile::tempdir().unwrap();
    let vfs = Arc::new(SyncGuardFs {
        inner: PooledFs::new(1024),
        threads: threads.clone(),
    });
    // Small segments: the workload's appends roll several (each roll syncs the old segment and the directory).
    let config = FsConfig {
        segment_bytes: 4096,
        ..FsConfig::new(dir.path())
    };
    let store = FsStorage::open_on(config, vfs).unwrap();
    let store = NoSyncOnWorkers::new(store, threads.clone());
    runtime.block_on(async {
        tokio::spawn(async move { partition_log_testkit::executor::durable_operations(&store).await })
            .await
            .unwrap()
    });
    assert_eq!(threads.count(), 2);
    assert_eq!(threads.violations(), Vec::<String>::new());
}
