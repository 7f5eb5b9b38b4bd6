//! [`PooledFs`]: the real file system with a budget of open file descriptors, so that a store of tens of
//! thousands of partitions (three files each: log, offset index, time index) runs under the process's limit.
//!
//! Every file the store opens is a [`PooledFile`]: a path and, while it is in the pool, an open descriptor. A
//! file whose descriptor was closed to make room reopens itself at its next use (by path, for reading, or for
//! appending — never creating or emptying it again); all reads and writes are positional or appends, so nothing
//! depends on a descriptor's cursor. When the pool is full, the files least recently used (by a coarse clock that
//! advances once per eviction round) give up their descriptors, an eighth of the budget at a time, skipping any
//! in use at that moment.
//!
//! **Nothing written is lost by closing.** A file written since its last sync is synced before its descriptor
//! closes. Should that sync fail, the error is kept and returned by the file's next sync, so the partition's
//! storage is poisoned exactly as if its own sync had failed (a descriptor opened later would not see the
//! write-back error).
//!
//! The budget defaults to half of the process's soft `RLIMIT_NOFILE` (read from `/proc/self/limits`; the other
//! half is for sockets and everything else), at least [`MIN_BUDGET`]. When the system refuses a descriptor all the
//! same (`EMFILE`, `ENFILE`), the error says so, with the limit and the budget.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use crate::vfs::{Entry, OpenFor, RealFs, Vfs, VfsFile};

/// The smallest budget a store runs with, whatever the limit says.
pub const MIN_BUDGET: usize = 64;

/// The budget when the process's limit cannot be read.
const FALLBACK_BUDGET: usize = 1024;

/// The soft limit on open file descriptors of this process (`/proc/self/limits`), if it can be read and is finite.
pub fn open_files_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|line| line.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// The default budget: half the process's limit (see the module docs).
pub fn default_budget() -> usize {
    open_files_limit()
        .map_or(FALLBACK_BUDGET, |limit| limit / 2)
        .max(MIN_BUDGET)
}

/// The real file system with a budget of open descriptors; see the module docs.
#[derive(Clone)]
pub struct PooledFs {
    pool: Arc<Pool>,
}

impl fmt::Debug for PooledFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledFs")
            .field("budget", &self.pool.budget)
            .field("open", &self.open_descriptors())
            .finish()
    }
}

impl PooledFs {
    /// A file system that keeps at most `budget` descriptors open (at least [`MIN_BUDGET`]).
    pub fn new(budget: usize) -> Self {
        PooledFs {
            pool: Arc::new(Pool {
                budget: budget.max(MIN_BUDGET),
                open: AtomicUsize::new(0),
                clock: AtomicU64::new(0),
                files: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The most descriptors kept open.
    pub fn budget(&self) -> usize {
        self.pool.budget
    }

    /// Descriptors open now.
    pub fn open_descriptors(&self) -> usize {
        self.pool.open.load(Ordering::Relaxed)
    }

    /// [`Vfs::open`], as the concrete file.
    pub fn open_file(&self, path: &Path, how: OpenFor) -> io::Result<PooledFile> {
        self.pool.make_room();
        let file = crate::vfs::open_real(path, how).map_err(|error| self.pool.explain(path, error))?;
        Ok(PooledFile {
            slot: self.pool.register(path, how != OpenFor::Read, file),
            cursor: Mutex::new(()),
        })
    }
}

/// What the pool shares: the budget, the count of open descriptors, the clock and every live file.
struct Pool {
    budget: usize,
    open: AtomicUsize,
    clock: AtomicU64,
    /// Every file opened through the pool and still alive (pruned at each eviction round).
    files: Mutex<Vec<Weak<Slot>>>,
}

/// One file: its path, its descriptor while it has one, and what eviction needs to know.
struct Slot {
    path: PathBuf,
    writable: bool,
    pool: Arc<Pool>,
    descriptor: Mutex<Option<File>>,
    /// The pool's clock at the last use.
    last_used: AtomicU64,
    /// Written since the last sync.
    dirty: AtomicBool,
    /// A sync made at eviction that failed: the next sync reports it.
    deferred: Mutex<Option<io::Error>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if lock(&self.descriptor).is_some() {
            self.pool.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Pool {
    /// Closes descriptors of other files until one more fits the budget (an eighth of the budget at a time).
    fn make_room(&self) {
        if self.open.load(Ordering::Relaxed) < self.budget {
            return;
        }
        let mut files = lock(&self.files);
        if self.open.load(Ordering::Relaxed) < self.budget {
            return;
        }
        self.clock.fetch_add(1, Ordering::Relaxed);
        files.retain(|file| file.strong_count() > 0);
        let mut candidates: Vec<(u64, Arc<Slot>)> = files
            .iter()
            .filter_map(Weak::upgrade)
            .map(|slot| (slot.last_used.load(Ordering::Relaxed), slot))
            .collect();
        candidates.sort_by_key(|(last_used, _)| *last_used);
        let wanted = (self.budget / 8).max(1);
        let mut closed = 0;
        for (_, slot) in candidates {
            if closed == wanted {
                break;
            }
            // A file in use (its own caller, the one asking for room) is skipped, never waited for.
            let Ok(mut descriptor) = slot.descriptor.try_lock() else {
                continue;
            };
            let Some(file) = descriptor.take() else {
                continue;
            };
            if slot.dirty.swap(false, Ordering::Relaxed) {
                if let Err(error) = file.sync_data() {
                    *lock(&slot.deferred) = Some(error);
                }
            }
            drop(file);
            self.open.fetch_sub(1, Ordering::Relaxed);
            closed += 1;
        }
    }

    fn register(self: &Arc<Self>, path: &Path, writable: bool, file: File) -> Arc<Slot> {
        let slot = Arc::new(Slot {
            path: path.to_owned(),
            writable,
            pool: Arc::clone(self),
            descriptor: Mutex::new(Some(file)),
            last_used: AtomicU64::new(self.clock.load(Ordering::Relaxed)),
            dirty: AtomicBool::new(false),
            deferred: Mutex::new(None),
        });
        self.open.fetch_add(1, Ordering::Relaxed);
        let mut files = lock(&self.files);
        // Files closed for good leave dead entries; a store that never fills its budget has no eviction round to
        // drop them, so they go whenever the list doubles (amortised: each push pays for one entry's check).
        if files.len() == files.capacity() && files.len() >= MIN_BUDGET {
            files.retain(|file| file.strong_count() > 0);
        }
        files.push(Arc::downgrade(&slot));
        drop(files);
        slot
    }

    /// Names a refused descriptor as what it is: a resource limit, with the numbers.
    fn explain(&self, path: &Path, error: io::Error) -> io::Error {
        const EMFILE: i32 = 24;
        const ENFILE: i32 = 23;
        match error.raw_os_error() {
            Some(EMFILE) | Some(ENFILE) => io::Error::new(
                error.kind(),
                format!(
                    "opening {}: {error} — out of file descriptors (process limit {}, this store keeps at most {} \
                     open; raise `ulimit -n` or lower `max_open_files`)",
                    path.display(),
                    open_files_limit().map_or_else(|| "unknown".to_owned(), |limit| limit.to_string()),
                    self.budget
                ),
            ),
            _ => error,
        }
    }
}

/// A file of [`PooledFs`]; see the module docs.
pub struct PooledFile {
    slot: Arc<Slot>,
    /// Serialises reads through the descriptor's cursor ([`VfsFile::read_vec_at`]).
    cursor: Mutex<()>,
}

impl fmt::Debug for PooledFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledFile")
            .field("path", &self.slot.path)
            .finish()
    }
}

impl PooledFile {
    /// Runs `call` on the file's descriptor, reopening it first when it was closed to make room.
    fn with<T>(&self, call: impl FnOnce(&File) -> io::Result<T>) -> io::Result<T> {
        let slot = &self.slot;
        let mut descriptor = lock(&slot.descriptor);
        slot.last_used
            .store(slot.pool.clock.load(Ordering::Relaxed), Ordering::Relaxed);
        let file = match descriptor.take() {
            Some(file) => file,
            None => {
                slot.pool.make_room();
                let reopened = if slot.writable {
                    OpenOptions::new().read(true).append(true).open(&slot.path)
                } else {
                    File::open(&slot.path)
                };
                let file = reopened.map_err(|error| slot.pool.explain(&slot.path, error))?;
                slot.pool.open.fetch_add(1, Ordering::Relaxed);
                file
            }
        };
        let result = call(&file);
        *descriptor = Some(file);
        result
    }

    fn written<T>(&self, result: io::Result<T>) -> io::Result<T> {
        self.slot.dirty.store(true, Ordering::Relaxed);
        result
    }
}

impl VfsFile for PooledFile {
    fn size(&self) -> io::Result<u64> {
        self.with(|file| Ok(file.metadata()?.len()))
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.with(|file| file.read_exact_at(buf, offset))
    }

    fn read_vec_at(&self, len: usize, offset: u64) -> io::Result<Vec<u8>> {
        // As `RealFs`: through the cursor, one reader at a time.
        let _cursor = lock(&self.cursor);
        self.with(|file| crate::vfs::read_vec_through_cursor(file, len, offset))
    }

    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let result = self.with(|mut file| file.write_all(bytes));
        self.written(result)
    }

    fn append_parts(&mut self, parts: &mut [IoSlice<'_>]) -> io::Result<()> {
        let result = self.with(|file| crate::vfs::write_all_vectored(file, parts));
        self.written(result)
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        let result = self.with(|file| file.set_len(len));
        self.written(result)
    }

    fn sync(&self) -> io::Result<()> {
        if let Some(error) = lock(&self.slot.deferred).take() {
            return Err(error);
        }
        // Cleared before the sync: a write racing with it marks the file again.
        self.slot.dirty.store(false, Ordering::Relaxed);
        self.with(File::sync_data)
    }
}

impl Vfs for PooledFs {
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        RealFs.create_dir(path)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        RealFs.create_dir_all(path)
    }

    fn is_dir(&self, path: &Path) -> bool {
        RealFs.is_dir(path)
    }

    fn exists(&self, path: &Path) -> bool {
        RealFs.exists(path)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<Entry>> {
        self.pool.make_room();
        RealFs
            .read_dir(path)
            .map_err(|error| self.pool.explain(path, error))
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_dir_all(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealFs.rename(from, to)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.pool.make_room();
        RealFs.read(path).map_err(|error| self.pool.explain(path, error))
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.pool.make_room();
        RealFs
            .sync_dir(path)
            .map_err(|error| self.pool.explain(path, error))
    }

    fn open(&self, path: &Path, how: OpenFor) -> io::Result<Box<dyn VfsFile>> {
        Ok(Box::new(self.open_file(path, how)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(fs: &PooledFs, path: &Path, bytes: &[u8]) -> PooledFile {
        let mut file = fs.open_file(path, OpenFor::CreateEmpty).unwrap();
        file.append(bytes).unwrap();
        file
    }

    #[test]
    fn files_beyond_the_budget_give_up_their_descriptors_and_reopen_where_they_were() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PooledFs::new(MIN_BUDGET);
        let mut files: Vec<PooledFile> = (0..MIN_BUDGET * 3)
            .map(|index| {
                write(
                    &fs,
                    &dir.path().join(format!("{index}.log")),
                    format!("file {index};").as_bytes(),
                )
            })
            .collect();
        assert!(
            fs.open_descriptors() <= MIN_BUDGET,
            "{} open",
            fs.open_descriptors()
        );
        for (index, file) in files.iter_mut().enumerate() {
            file.append(b" more").unwrap();
            let expected = format!("file {index}; more");
            assert_eq!(file.read_vec_at(expected.len(), 0).unwrap(), expected.as_bytes());
            assert_eq!(file.size().unwrap(), expected.len() as u64);
            assert!(fs.open_descriptors() <= MIN_BUDGET);
        }
        drop(files);
        assert_eq!(fs.open_descriptors(), 0);
    }

    #[test]
    fn a_reopened_file_is_neither_created_again_nor_emptied() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PooledFs::new(MIN_BUDGET);
        let path = dir.path().join("kept.log");
        let mut kept = write(&fs, &path, b"kept");
        kept.sync().unwrap();
        let _others: Vec<_> = (0..MIN_BUDGET * 2)
            .map(|index| write(&fs, &dir.path().join(format!("{index}")), b"x"))
            .collect();
        std::fs::remove_file(&path).unwrap();
        // Its descriptor was closed to make room: reopening finds the file gone rather than making a new one.
        assert!(kept.append(b"!").is_err());
        assert!(!path.exists());
    }

    #[test]
    fn a_written_file_is_synced_before_its_descriptor_closes() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PooledFs::new(MIN_BUDGET);
        let written = write(&fs, &dir.path().join("written.log"), b"data");
        assert!(written.slot.dirty.load(Ordering::Relaxed));
        let _others: Vec<_> = (0..MIN_BUDGET * 2)
            .map(|index| write(&fs, &dir.path().join(format!("{index}")), b"x"))
            .collect();
        assert!(
            lock(&written.slot.descriptor).is_none(),
            "the oldest file was closed"
        );
        assert!(!written.slot.dirty.load(Ordering::Relaxed), "and synced first");
        written.sync().unwrap();
    }

    #[test]
    fn a_failed_sync_at_eviction_is_reported_by_the_next_sync() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PooledFs::new(MIN_BUDGET);
        let file = write(&fs, &dir.path().join("failing.log"), b"data");
        *lock(&file.slot.deferred) = Some(io::Error::other("injected write-back failure"));
        assert!(file.sync().is_err());
        file.sync().unwrap();
    }

    #[test]
    fn files_closed_for_good_do_not_accumulate_in_the_registry() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PooledFs::new(1 << 20);
        for index in 0..10_000 {
            drop(write(&fs, &dir.path().join(format!("{}", index % 8)), b"x"));
        }
        let registered = lock(&fs.pool.files).len();
        assert!(
            registered <= 2 * MIN_BUDGET,
            "{registered} entries for no live file"
        );
    }

    #[test]
    fn the_limit_is_read_from_the_process() {
        if let Some(limit) = open_files_limit() {
            assert!(limit > 0);
            assert_eq!(default_budget(), (limit / 2).max(MIN_BUDGET));
        }
    }
}
