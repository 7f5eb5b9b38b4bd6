//! One segment: its `.log` file and the sparse `.index` / `.timeindex` and the `.txnindex` beside it.
//!
//! Indexes follow Kafka's `LogSegment.append`: before appending a batch, if more than `index_interval_bytes`
//! were written since the last entry, the offset index gets (batch last offset − base, batch position) and the
//! time index (max timestamp so far − if it grew, its offset − base). Offset index entries are 8 bytes
//! (`u32 relative offset | u32 position`), time index entries 12 (`i64 timestamp | u32 relative offset`).
//!
//! Opening a segment scans its log batch by batch (length, magic, CRC, growing offsets) and rebuilds both
//! indexes from what is valid; the index files on disk are rewritten when they differ. A torn or corrupt tail is
//! cut and reported. Reads use the offset index to find where to start scanning.

use std::io::IoSlice;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use record_format::batch::{check_batch_prefix, offsets, LOG_OVERHEAD};
use record_format::txn_index::ABORTED_TXN_LEN;
use record_format::{AbortedTxn, BatchBuffers, RecordBatch};
use storage::{OpenMode, StorageError};

use crate::files::{
    offset_file, write_atomically, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
};
use crate::vfs::{OpenFor, Vfs, VfsFile};

/// Bytes of a batch header needed to know its offsets and size.
const HEADER_PROBE: usize = offsets::LAST_OFFSET_DELTA + 4;
/// Offset index entry size.
const INDEX_ENTRY: usize = 8;
/// Time index entry size.
const TIME_INDEX_ENTRY: usize = 12;

/// An offset index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// Largest offset of the indexed batch, relative to the segment base.
    pub relative_offset: u32,
    /// Byte position of the batch in the log file.
    pub position: u32,
}

/// A time index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeEntry {
    /// Largest timestamp up to the entry.
    pub timestamp: i64,
    /// Offset holding it, relative to the segment base.
    pub relative_offset: u32,
}

/// What opening a segment found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SegmentRecovery {
    /// Bytes cut from a torn or corrupt tail, with the reason.
    pub truncated: Option<(u64, String)>,
    /// The index files had to be rewritten.
    pub rebuilt_indexes: bool,
}

/// The in-memory state of one segment.
#[derive(Debug)]
pub struct Segment {
    /// The segment's base offset (its file names).
    pub base_offset: i64,
    dir: PathBuf,
    vfs: Arc<dyn Vfs>,
    log: Box<dyn VfsFile>,
    /// The index files, open for appending (`None` in a read-only open, which writes nothing).
    index_file: Option<Box<dyn VfsFile>>,
    time_index_file: Option<Box<dyn VfsFile>>,
    /// Valid bytes of the log.
    pub size: u64,
    index: Vec<IndexEntry>,
    time_index: Vec<TimeEntry>,
    /// How many entries of `index` / `time_index` the files hold. Appends only add entries in memory; they reach
    /// the files on flush, sync and roll (the files are derived data: opening rebuilds them from the log when they
    /// lag, so a crash loses nothing). One write per append, as for a raw file.
    index_persisted: usize,
    time_index_persisted: usize,
    /// Aborted transactions whose markers are in this segment.
    pub aborted: Vec<AbortedTxn>,
    bytes_since_index: u64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    /// Offset after the last batch (the base offset when empty).
    pub next_offset: i64,
    /// Base offset of the first batch, if any.
    pub first_batch_offset: Option<i64>,
    /// Written since the last sync.
    pub dirty: bool,
    /// The `.txnindex` was created since the last sync: its directory entry needs a sync too.
    txn_index_created: bool,
    /// The `.txnindex` was written since the last sync (or, after an open, may hold what an earlier process did
    /// not sync).
    txn_index_unsynced: bool,
    /// Its files are gone (removed, or renamed over by a rewrite): closing it writes nothing ([`Self::retire`]).
    retired: bool,
}

/// The part of a [`Segment`] an append changes before its write (see [`Segment::append`]).
#[derive(Debug, Clone, Copy)]
struct Tracking {
    size: u64,
    index_len: usize,
    time_index_len: usize,
    bytes_since_index: u64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    next_offset: i64,
    first_batch_offset: Option<i64>,
}

fn io_error(what: &str, path: &Path, error: std::io::Error) -> StorageError {
    StorageError::io(format!("{what} {}", path.display()), error)
}

fn open_rw(vfs: &dyn Vfs, path: &Path, create: bool) -> Result<Box<dyn VfsFile>, StorageError> {
    let how = if create {
        OpenFor::AppendOrCreate
    } else {
        OpenFor::Append
    };
    vfs.open(path, how).map_err(|e| io_error("opening", path, e))
}

/// A batch's place in the log file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchSpan {
    position: u64,
    base_offset: i64,
    last_offset: i64,
    size: u64,
}

impl Drop for Segment {
    /// A writable segment closes as Kafka's does: its time index ends with its largest timestamp (best effort:
    /// the indexes are derived data, checked and rebuilt on every open).
    fn drop(&mut self) {
        if self.time_index_file.is_some() && !self.retired {
            self.seal_time_index();
            let _ = self.write_pending_indexes();
        }
    }
}

impl Segment {
    fn path(&self, suffix: &str) -> PathBuf {
        offset_file(&self.dir, self.base_offset, suffix)
    }

    /// Creates an empty segment (its files exist when this returns; the caller syncs the directory).
    pub fn create(vfs: &Arc<dyn Vfs>, dir: &Path, base_offset: i64) -> Result<Self, StorageError> {
        let create_empty = |suffix: &str| {
            let path = offset_file(dir, base_offset, suffix);
            vfs.open(&path, OpenFor::CreateEmpty)
                .map_err(|e| io_error("creating", &path, e))
        };
        let log = create_empty(LOG_SUFFIX)?;
        let index_file = create_empty(INDEX_SUFFIX)?;
        let time_index_file = create_empty(TIME_INDEX_SUFFIX)?;
        let txn_index = offset_file(dir, base_offset, TXN_INDEX_SUFFIX);
        if vfs.exists(&txn_index) {
            vfs.remove_file(&txn_index)
                .map_err(|e| io_error("removing", &txn_index, e))?;
        }
        let mut segment = Segment::empty(
            vfs,
            dir,
            base_offset,
            log,
            Some(index_file),
            Some(time_index_file),
        );
        segment.dirty = true;
        Ok(segment)
    }

    /// A segment with open files and nothing accounted yet.
    fn empty(
        vfs: &Arc<dyn Vfs>,
        dir: &Path,
        base_offset: i64,
        log: Box<dyn VfsFile>,
        index_file: Option<Box<dyn VfsFile>>,
        time_index_file: Option<Box<dyn VfsFile>>,
    ) -> Self {
        Segment {
            base_offset,
            dir: dir.to_owned(),
            vfs: Arc::clone(vfs),
            log,
            index_file,
            time_index_file,
            size: 0,
            index: Vec::new(),
            time_index: Vec::new(),
            index_persisted: 0,
            time_index_persisted: 0,
            aborted: Vec::new(),
            bytes_since_index: 0,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            next_offset: base_offset,
            first_batch_offset: None,
            dirty: false,
            txn_index_created: false,
            txn_index_unsynced: false,
            retired: false,
        }
    }

    /// Opens an existing segment, validating its log and rebuilding its indexes (see the module docs). Read-only,
    /// nothing is written: a torn tail is reported (and reads stop before it) but not cut, and index files that
    /// differ are reported but not rewritten.
    pub fn open(
        vfs: &Arc<dyn Vfs>,
        dir: &Path,
        base_offset: i64,
        index_interval: u64,
        mode: OpenMode,
    ) -> Result<(Self, SegmentRecovery), StorageError> {
        let (mut segment, recovery) = Self::open_uncut(vfs, dir, base_offset, index_interval, mode)?;
        if mode == OpenMode::ReadWrite {
            segment.cut_torn_tail()?;
        }
        Ok((segment, recovery))
    }

    /// [`Segment::open`], except that a writable open leaves a torn tail on disk (reads already stop before it):
    /// the caller removes what must go first and then calls [`Segment::cut_torn_tail`].
    pub(crate) fn open_uncut(
        vfs: &Arc<dyn Vfs>,
        dir: &Path,
        base_offset: i64,
        index_interval: u64,
        mode: OpenMode,
    ) -> Result<(Self, SegmentRecovery), StorageError> {
        let log_path = offset_file(dir, base_offset, LOG_SUFFIX);
        let log = match mode {
            OpenMode::ReadWrite => open_rw(vfs.as_ref(), &log_path, false)?,
            OpenMode::ReadOnly => vfs
                .open(&log_path, OpenFor::Read)
                .map_err(|e| io_error("opening", &log_path, e))?,
        };
        let length = log.size().map_err(|e| io_error("reading", &log_path, e))?;
        let (index_file, time_index_file) = match mode {
            OpenMode::ReadWrite => (
                Some(open_rw(
                    vfs.as_ref(),
                    &offset_file(dir, base_offset, INDEX_SUFFIX),
                    true,
                )?),
                Some(open_rw(
                    vfs.as_ref(),
                    &offset_file(dir, base_offset, TIME_INDEX_SUFFIX),
                    true,
                )?),
            ),
            OpenMode::ReadOnly => (None, None),
        };
        let mut segment = Segment::empty(vfs, dir, base_offset, log, index_file, time_index_file);
        let mut recovery = SegmentRecovery::default();
        let torn = segment.scan(length, index_interval)?;
        // As Kafka's segment recovery: the rebuilt time index ends with the segment's largest timestamp.
        segment.seal_time_index();
        if mode == OpenMode::ReadOnly {
            recovery.truncated = torn
                .or_else(|| (segment.size != length).then(|| "trailing bytes".to_owned()))
                .map(|reason| (length - segment.size, reason));
            recovery.rebuilt_indexes = segment.indexes_differ_on_disk();
            segment.index_persisted = segment.index.len();
            segment.time_index_persisted = segment.time_index.len();
            recovery.rebuilt_indexes |= segment.load_txn_index(mode)?;
            return Ok((segment, recovery));
        }
        if let Some(reason) = torn {
            recovery.truncated = Some((length - segment.size, reason));
        }
        recovery.rebuilt_indexes = segment.write_indexes_if_changed()?;
        recovery.rebuilt_indexes |= segment.load_txn_index(mode)?;
        // What an earlier process wrote may still be only in the page cache: the first sync after opening syncs
        // it, or a sync with nothing appended since the open would promise durability it never made.
        segment.dirty = true;
        segment.txn_index_unsynced = !segment.aborted.is_empty();
        Ok((segment, recovery))
    }

    /// Marks a segment whose files are gone — removed, or renamed over by a rewrite — so that closing it writes
    /// nothing; [`crate::closer::close_retired`] then closes it off the caller's thread.
    pub(crate) fn retire(mut self) -> Self {
        self.retired = true;
        self
    }

    /// Takes this segment, opened where a cleaner staged it, as the segment of its base offset in `dir`, its
    /// files renamed there: its files are opened again under their new names (a pooled file that lost its
    /// descriptor reopens by name, and the staging's names are gone — three opens, nothing read), its paths name
    /// `dir` from now on, and its aborted transactions are read from `dir`'s `.txnindex`, which a rewrite keeps.
    /// As after an open, its first sync syncs it.
    pub(crate) fn adopt(&mut self, dir: &Path) -> Result<(), StorageError> {
        self.dir = dir.to_path_buf();
        let vfs = self.vfs.clone();
        self.log = open_rw(vfs.as_ref(), &self.path(LOG_SUFFIX), false)?;
        if self.index_file.is_some() {
            self.index_file = Some(open_rw(vfs.as_ref(), &self.path(INDEX_SUFFIX), false)?);
        }
        if self.time_index_file.is_some() {
            self.time_index_file = Some(open_rw(vfs.as_ref(), &self.path(TIME_INDEX_SUFFIX), false)?);
        }
        self.aborted.clear();
        self.load_txn_index(OpenMode::ReadWrite)?;
        self.dirty = true;
        self.txn_index_unsynced = !self.aborted.is_empty();
        Ok(())
    }

    /// Cuts the log file after its last valid batch, durably (nothing when it ends there).
    pub(crate) fn cut_torn_tail(&mut self) -> Result<(), StorageError> {
        let path = self.path(LOG_SUFFIX);
        let length = self.log.size().map_err(|e| io_error("reading", &path, e))?;
        if length > self.size {
            self.log
                .set_len(self.size)
                .and_then(|()| self.log.sync())
                .map_err(|e| io_error("cutting the torn tail of", &path, e))?;
        }
        Ok(())
    }

    /// Bytes read at a time when scanning a segment on open.
    const SCAN_CHUNK: usize = 1 << 20;

    /// Validates the log's batches in order (structure, CRC, growing offsets), accounting each; stops at the
    /// first bad one and returns why (the valid prefix is `self.size`). Reads large chunks and checks batches in
    /// place, so a healthy segment costs one copy and one CRC pass.
    fn scan(&mut self, length: u64, index_interval: u64) -> Result<Option<String>, StorageError> {
        let mut chunk_len = Self::SCAN_CHUNK;
        // One buffer for the whole scan: batches are checked and dropped before the next chunk, so it is taken
        // back each time (no new allocation, no zeroing, no page faults per chunk).
        let mut buffer = bytes::BytesMut::new();
        while self.size < length {
            let start = self.size;
            let want = chunk_len.min(usize::try_from(length - start).unwrap_or(usize::MAX));
            if buffer.len() < want {
                buffer.resize(want, 0);
            }
            buffer.truncate(want);
            self.log
                .read_exact_at(&mut buffer, start)
                .map_err(|e| io_error("reading", &self.path(LOG_SUFFIX), e))?;
            let chunk = std::mem::take(&mut buffer).freeze();
            let mut at = 0usize;
            let mut grew = false;
            while at < chunk.len() {
                let position = start + at as u64;
                let problem = |error: &dyn std::fmt::Display| {
                    Ok(Some(format!("{error} (batch at file offset {position})")))
                };
                let Some(prefix) = chunk
                    .get(at..at + LOG_OVERHEAD)
                    .and_then(|p| <&[u8; LOG_OVERHEAD]>::try_from(p).ok())
                else {
                    if position + LOG_OVERHEAD as u64 > length {
                        return problem(&record_format::DecodeError::Truncated {
                            needed: LOG_OVERHEAD as u64,
                            available: length - position,
                        });
                    }
                    break; // the prefix continues in the next chunk
                };
                let total = match check_batch_prefix(prefix, length - position, i32::MAX as usize) {
                    Ok(total) => total,
                    Err(error) => return problem(&error),
                };
                if at + total > chunk.len() {
                    // The batch continues past this chunk: read again from it, with room for all of it
                    // (`total` is within the file: `check_batch_prefix` checked it against what is left).
                    chunk_len = chunk_len.max(total);
                    grew = true;
                    break;
                }
                let batch = match RecordBatch::decode(chunk.slice(at..at + total)) {
                    Ok(batch) => batch,
                    Err(error) => return problem(&error),
                };
                if batch.base_offset() < self.next_offset || batch.last_offset() < batch.base_offset() {
                    return problem(&format!(
                        "batch at offset {} does not follow offset {}",
                        batch.base_offset(),
                        self.next_offset
                    ));
                }
                if batch.last_offset() - self.base_offset > i64::from(i32::MAX) {
                    return problem(&format!(
                        "batch at offset {} is too far from the segment base",
                        batch.base_offset()
                    ));
                }
                self.track(&batch, index_interval);
                at += total;
            }
            if self.size == start && !grew {
                return Ok(Some(format!("unreadable batch at file offset {start}")));
            }
            buffer = chunk.try_into_mut().unwrap_or_default();
        }
        Ok(None)
    }

    /// What [`Segment::track`] changes, to take an append back.
    fn tracking(&self) -> Tracking {
        Tracking {
            size: self.size,
            index_len: self.index.len(),
            time_index_len: self.time_index.len(),
            bytes_since_index: self.bytes_since_index,
            max_timestamp: self.max_timestamp,
            offset_of_max_timestamp: self.offset_of_max_timestamp,
            next_offset: self.next_offset,
            first_batch_offset: self.first_batch_offset,
        }
    }

    fn restore_tracking(&mut self, before: Tracking) {
        self.size = before.size;
        self.index.truncate(before.index_len);
        self.time_index.truncate(before.time_index_len);
        self.bytes_since_index = before.bytes_since_index;
        self.max_timestamp = before.max_timestamp;
        self.offset_of_max_timestamp = before.offset_of_max_timestamp;
        self.next_offset = before.next_offset;
        self.first_batch_offset = before.first_batch_offset;
    }

    /// Accounts for a batch at the end of the log: indexes, offsets, size.
    fn track(&mut self, batch: &RecordBatch, index_interval: u64) {
        let position = self.size;
        if batch.max_timestamp() > self.max_timestamp {
            self.max_timestamp = batch.max_timestamp();
            self.offset_of_max_timestamp = batch.last_offset();
        }
        if self.bytes_since_index > index_interval {
            self.index.push(IndexEntry {
                relative_offset: (batch.last_offset() - self.base_offset) as u32,
                position: position as u32,
            });
            self.push_largest_timestamp();
            self.bytes_since_index = 0;
        }
        self.bytes_since_index += batch.size() as u64;
        self.size += batch.size() as u64;
        self.next_offset = batch.next_offset();
        self.first_batch_offset.get_or_insert(batch.base_offset());
    }

    /// Ends the time index with the segment's largest timestamp and its offset, if the last entry does not hold
    /// it already (Kafka's `LogSegment.onBecomeInactiveSegment`, `close` and `recover`: a closed segment's time
    /// index always ends with its largest timestamp, which Kafka reads as the segment's, e.g. for ListOffsets by
    /// timestamp and for time-based retention).
    pub fn seal_time_index(&mut self) {
        if self.first_batch_offset.is_none() || self.max_timestamp < 0 {
            return;
        }
        self.push_largest_timestamp();
    }

    /// Appends (largest timestamp so far, its offset) to the time index unless its last entry holds it.
    fn push_largest_timestamp(&mut self) {
        if self
            .time_index
            .last()
            .is_none_or(|last| self.max_timestamp > last.timestamp)
        {
            self.time_index.push(TimeEntry {
                timestamp: self.max_timestamp,
                relative_offset: (self.offset_of_max_timestamp - self.base_offset) as u32,
            });
        }
    }

    fn encode_indexes(&self) -> (Vec<u8>, Vec<u8>) {
        self.encode_indexes_from(0, 0)
    }

    /// The index entries from the given positions on, in their file formats.
    fn encode_indexes_from(&self, index_from: usize, time_from: usize) -> (Vec<u8>, Vec<u8>) {
        let new_index = self.index.get(index_from..).unwrap_or_default();
        let mut index = Vec::with_capacity(new_index.len() * INDEX_ENTRY);
        for entry in new_index {
            index.extend_from_slice(&entry.relative_offset.to_be_bytes());
            index.extend_from_slice(&entry.position.to_be_bytes());
        }
        let new_time_index = self.time_index.get(time_from..).unwrap_or_default();
        let mut time_index = Vec::with_capacity(new_time_index.len() * TIME_INDEX_ENTRY);
        for entry in new_time_index {
            time_index.extend_from_slice(&entry.timestamp.to_be_bytes());
            time_index.extend_from_slice(&entry.relative_offset.to_be_bytes());
        }
        (index, time_index)
    }

    /// True when the index files on disk differ from the indexes rebuilt from the log.
    fn indexes_differ_on_disk(&self) -> bool {
        let (index, time_index) = self.encode_indexes();
        let differs =
            |suffix: &str, bytes: &[u8]| self.vfs.read(&self.path(suffix)).unwrap_or_default() != bytes;
        differs(INDEX_SUFFIX, &index) || differs(TIME_INDEX_SUFFIX, &time_index)
    }

    /// Rewrites the index files when they differ from the in-memory indexes. Returns whether it did.
    fn write_indexes_if_changed(&mut self) -> Result<bool, StorageError> {
        let (index, time_index) = self.encode_indexes();
        let mut rewrote = false;
        for (suffix, bytes) in [(INDEX_SUFFIX, &index), (TIME_INDEX_SUFFIX, &time_index)] {
            let path = self.path(suffix);
            let on_disk = self.vfs.read(&path).unwrap_or_default();
            if &on_disk != bytes {
                write_atomically(self.vfs.as_ref(), &path, bytes)?;
                rewrote = true;
            }
        }
        if rewrote {
            self.index_file = Some(open_rw(self.vfs.as_ref(), &self.path(INDEX_SUFFIX), true)?);
            self.time_index_file = Some(open_rw(self.vfs.as_ref(), &self.path(TIME_INDEX_SUFFIX), true)?);
        }
        self.index_persisted = self.index.len();
        self.time_index_persisted = self.time_index.len();
        Ok(rewrote)
    }

    /// Loads the `.txnindex`. Its entries must be whole, not all zeros, and hold markers of this segment's valid
    /// part in order;
    /// from the first that is not (a write a power loss tore or lost), the index is cut — on disk too when the
    /// segment is writable, so later entries are not appended after garbage. Returns whether it cut anything.
    fn load_txn_index(&mut self, mode: OpenMode) -> Result<bool, StorageError> {
        let path = self.path(TXN_INDEX_SUFFIX);
        let bytes = match self.vfs.read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_error("reading", &path, e)),
        };
        let mut previous_marker = i64::MIN;
        for chunk in bytes.chunks_exact(ABORTED_TXN_LEN) {
            let Some(Ok(entry)) = <&[u8; ABORTED_TXN_LEN]>::try_from(chunk)
                .ok()
                .map(AbortedTxn::decode)
            else {
                break;
            };
            let in_segment = entry.last_offset >= self.base_offset && entry.last_offset < self.next_offset;
            // All zeros: a write lost at a power loss while a later one reached the disk (a real entry never is:
            // a transaction's data precedes its marker, so offset 0 cannot be both).
            let lost_write = chunk.iter().all(|&byte| byte == 0);
            if lost_write
                || !in_segment
                || entry.first_offset > entry.last_offset
                || entry.last_offset < previous_marker
            {
                break;
            }
            previous_marker = entry.last_offset;
            self.aborted.push(entry);
        }
        let whole = (self.aborted.len() * ABORTED_TXN_LEN) as u64;
        if whole == bytes.len() as u64 {
            return Ok(false);
        }
        if mode == OpenMode::ReadWrite {
            crate::files::cut_durably(self.vfs.as_ref(), &path, whole)?;
        }
        Ok(true)
    }

    /// Appends batches (already checked to follow the log) in one `write` or `writev`. Their index entries are
    /// computed first, while the headers are still in cache (a write of a fetched megabyte evicts them), kept in
    /// memory until [`Segment::write_pending_indexes`], and taken back if the write fails.
    pub fn append(
        &mut self,
        batches: &[RecordBatch],
        buffers: &BatchBuffers,
        index_interval: u64,
    ) -> Result<(), StorageError> {
        let before = self.tracking();
        for batch in batches {
            self.track(batch, index_interval);
        }
        let written = if let [batch] = batches {
            self.log.append(batch.as_bytes())
        } else if let Some(bytes) = buffers.contiguous(batches) {
            // A fetched range lying back to back in the buffer it was read into: one `write` of that slice (about
            // a third cheaper than a `writev` of 1 KiB batches, issue 16).
            self.log.append(bytes)
        } else {
            // Batches elsewhere: one `writev` of the batches where they are, no copy into one buffer.
            let mut parts: Vec<IoSlice<'_>> = batches
                .iter()
                .map(|batch| IoSlice::new(batch.as_bytes()))
                .collect();
            self.log.append_parts(&mut parts)
        };
        if let Err(error) = written {
            self.restore_tracking(before);
            return Err(io_error("appending to", &self.path(LOG_SUFFIX), error));
        }
        self.dirty = true;
        Ok(())
    }

    /// Writes the index entries appended since the last call to the index files.
    pub fn write_pending_indexes(&mut self) -> Result<(), StorageError> {
        if self.index.len() == self.index_persisted && self.time_index.len() == self.time_index_persisted {
            return Ok(());
        }
        let (index, time_index) = self.encode_indexes_from(self.index_persisted, self.time_index_persisted);
        let index_path = self.path(INDEX_SUFFIX);
        Self::writable(&mut self.index_file, &index_path)?
            .append(&index)
            .map_err(|e| io_error("appending to", &index_path, e))?;
        let time_index_path = self.path(TIME_INDEX_SUFFIX);
        Self::writable(&mut self.time_index_file, &time_index_path)?
            .append(&time_index)
            .map_err(|e| io_error("appending to", &time_index_path, e))?;
        self.index_persisted = self.index.len();
        self.time_index_persisted = self.time_index.len();
        Ok(())
    }

    /// An index file open for writing (a read-only segment has none; the storage contract never writes to one).
    fn writable<'a>(
        file: &'a mut Option<Box<dyn VfsFile>>,
        path: &Path,
    ) -> Result<&'a mut Box<dyn VfsFile>, StorageError> {
        file.as_mut().ok_or_else(|| StorageError::Corrupt {
            what: path.display().to_string(),
            reason: "the segment was opened read-only".into(),
        })
    }

    /// Records an aborted transaction in this segment's `.txnindex`.
    pub fn append_aborted(&mut self, entry: AbortedTxn) -> Result<(), StorageError> {
        let path = self.path(TXN_INDEX_SUFFIX);
        self.txn_index_created |= self.aborted.is_empty() && !self.vfs.exists(&path);
        let mut file = open_rw(self.vfs.as_ref(), &path, true)?;
        file.append(&entry.encode())
            .map_err(|e| io_error("appending to", &path, e))?;
        self.aborted.push(entry);
        self.dirty = true;
        self.txn_index_unsynced = true;
        Ok(())
    }

    /// Makes everything written durable.
    pub fn sync(&mut self) -> Result<(), StorageError> {
        if !self.dirty {
            return Ok(());
        }
        // The sparse indexes go to the page cache but are not synced: they are derived data, checked against the
        // log and rebuilt on every open, so syncing them would buy nothing.
        self.write_pending_indexes()?;
        self.log
            .sync()
            .map_err(|e| io_error("syncing", &self.path(LOG_SUFFIX), e))?;
        if self.txn_index_unsynced {
            let path = self.path(TXN_INDEX_SUFFIX);
            self.vfs
                .open(&path, OpenFor::Read)
                .and_then(|file| file.sync())
                .map_err(|e| io_error("syncing", &path, e))?;
            self.txn_index_unsynced = false;
        }
        if self.txn_index_created {
            crate::files::sync_dir(self.vfs.as_ref(), &self.dir)?;
            self.txn_index_created = false;
        }
        self.dirty = false;
        Ok(())
    }

    /// Reads the first bytes of the batch at `position` and returns its span.
    fn span_at(&self, position: u64) -> Result<BatchSpan, StorageError> {
        let mut header = [0u8; HEADER_PROBE];
        self.log
            .read_exact_at(&mut header, position)
            .map_err(|e| io_error("reading", &self.path(LOG_SUFFIX), e))?;
        let mut prefix = [0u8; LOG_OVERHEAD];
        prefix.copy_from_slice(&header[..LOG_OVERHEAD]);
        let size = check_batch_prefix(&prefix, self.size - position, usize::MAX).map_err(|e| {
            StorageError::Corrupt {
                what: format!("{} at position {position}", self.path(LOG_SUFFIX).display()),
                reason: e.to_string(),
            }
        })? as u64;
        let base_offset = i64::from_be_bytes(header[..8].try_into().unwrap_or_default());
        let delta = i32::from_be_bytes(
            header[offsets::LAST_OFFSET_DELTA..]
                .try_into()
                .unwrap_or_default(),
        );
        Ok(BatchSpan {
            position,
            base_offset,
            last_offset: base_offset.wrapping_add(i64::from(delta)),
            size,
        })
    }

    /// The first batch ending at or after `offset`, found from the index; `None` past the last batch.
    fn find(&self, offset: i64) -> Result<Option<BatchSpan>, StorageError> {
        let relative = offset
            .saturating_sub(self.base_offset)
            .clamp(0, i64::from(u32::MAX)) as u32;
        let start = match self
            .index
            .partition_point(|entry| entry.relative_offset <= relative)
        {
            0 => 0,
            after => u64::from(self.index[after - 1].position),
        };
        let mut position = start;
        while position < self.size {
            let span = self.span_at(position)?;
            if span.last_offset >= offset {
                return Ok(Some(span));
            }
            position += span.size;
        }
        Ok(None)
    }

    /// Appends to `out` whole batches from the one holding `offset`, while they fit in `budget` (the first one
    /// always, when `out` is empty), reading the range with one `pread`. Batches are served as stored, their
    /// structure checked but not their CRC: every batch was CRC-checked when it was appended or when the segment
    /// was opened, and consumers check CRCs themselves (as Kafka serves fetches). `budget` is set to 0 when a
    /// batch did not fit, so the caller stops; it keeps what is left when the segment ended first. The buffer
    /// read into joins `buffers` (the batches are slices of it).
    pub fn read(
        &self,
        offset: i64,
        budget: &mut usize,
        out: &mut Vec<RecordBatch>,
        buffers: &mut BatchBuffers,
    ) -> Result<(), StorageError> {
        let Some(span) = self.find(offset)? else {
            return Ok(());
        };
        let first = span.size as usize;
        if !out.is_empty() && first > *budget {
            *budget = 0;
            return Ok(());
        }
        let left_in_segment = self.size.saturating_sub(span.position);
        let want = (*budget).max(first) as u64;
        let len = usize::try_from(want.min(left_in_segment)).unwrap_or(usize::MAX);
        let buffer = self
            .log
            .read_vec_at(len, span.position)
            .map_err(|e| io_error("reading", &self.path(LOG_SUFFIX), e))?;
        let chunk = Bytes::from(buffer);
        buffers.push(chunk.clone());
        let corrupt = |at: usize, reason: String| StorageError::Corrupt {
            what: format!(
                "{} at position {}",
                self.path(LOG_SUFFIX).display(),
                span.position + at as u64
            ),
            reason,
        };
        let mut at = 0usize;
        while let Some(prefix) = chunk
            .get(at..at + LOG_OVERHEAD)
            .and_then(|p| <&[u8; LOG_OVERHEAD]>::try_from(p).ok())
        {
            let total = check_batch_prefix(prefix, u64::MAX, i32::MAX as usize)
                .map_err(|e| corrupt(at, e.to_string()))?;
            if at + total > chunk.len() || (!out.is_empty() && total > *budget) {
                // The next batch does not fit in what is left of the budget.
                *budget = 0;
                return Ok(());
            }
            let batch =
                RecordBatch::parse(chunk.slice(at..at + total)).map_err(|e| corrupt(at, e.to_string()))?;
            *budget = budget.saturating_sub(total);
            out.push(batch);
            at += total;
        }
        if (at as u64) < left_in_segment {
            // The range ended on a batch boundary inside the segment: the budget is spent.
            *budget = 0;
        }
        Ok(())
    }

    /// Cuts the segment before `offset`, which must not fall inside a batch; the indexes and the txn index are
    /// cut with it. Returns false if a batch straddles `offset`.
    pub fn truncate_to(&mut self, offset: i64, index_interval: u64) -> Result<(), StorageError> {
        let cut = match self.find(offset)? {
            None => self.size,
            Some(span) if span.base_offset >= offset => span.position,
            Some(span) => {
                return Err(StorageError::NotABatchBoundary {
                    offset,
                    base_offset: span.base_offset,
                    last_offset: span.last_offset,
                })
            }
        };
        let log_path = self.path(LOG_SUFFIX);
        self.log
            .set_len(cut)
            .map_err(|e| io_error("truncating", &log_path, e))?;
        self.log.sync().map_err(|e| io_error("syncing", &log_path, e))?;
        let aborted: Vec<AbortedTxn> = self
            .aborted
            .iter()
            .filter(|a| a.survives_truncation_to(offset))
            .copied()
            .collect();
        if aborted.len() != self.aborted.len() {
            let bytes: Vec<u8> = aborted.iter().flat_map(AbortedTxn::encode).collect();
            write_atomically(self.vfs.as_ref(), &self.path(TXN_INDEX_SUFFIX), &bytes)?;
        }
        // Rebuild the in-memory state from what is left, exactly as opening would; what was written and not yet
        // synced (a `.txnindex` entry) still needs the next sync.
        let (dirty, txn_index_created, txn_index_unsynced) =
            (self.dirty, self.txn_index_created, self.txn_index_unsynced);
        let (reopened, _) = Segment::open(
            &self.vfs,
            &self.dir,
            self.base_offset,
            index_interval,
            OpenMode::ReadWrite,
        )?;
        // The old state goes without writing: its pending index entries may name batches the cut removed, and
        // its handles may be the live files' (an index the reopen found equal is not rewritten).
        drop(std::mem::replace(self, reopened).retire());
        self.dirty = dirty;
        self.txn_index_created = txn_index_created;
        self.txn_index_unsynced = txn_index_unsynced && !self.aborted.is_empty();
        Ok(())
    }

    /// Removes the segment's files.
    pub fn delete_files(&self) -> Result<(), StorageError> {
        Self::delete_files_of(self.vfs.as_ref(), &self.dir, self.base_offset)
    }

    /// Removes the files of the segment at `base_offset` in `dir` without opening it, its `.log` first (the file
    /// that makes it a segment).
    pub(crate) fn delete_files_of(vfs: &dyn Vfs, dir: &Path, base_offset: i64) -> Result<(), StorageError> {
        for suffix in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX] {
            let path = offset_file(dir, base_offset, suffix);
            match vfs.remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error("deleting", &path, e)),
            }
        }
        Ok(())
    }

    /// The offset index (for tests and tools).
    pub fn index(&self) -> &[IndexEntry] {
        &self.index
    }

    /// The largest timestamp of its batches (−1 when it holds none): what time retention compares.
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }

    /// The time index (for tests and tools).
    pub fn time_index(&self) -> &[TimeEntry] {
        &self.time_index
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimFs;
    use storage_testkit::conformance::run_of_batches;

    #[test]
    fn a_failed_append_takes_its_index_entries_and_offsets_back() {
        let fs = SimFs::new();
        let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
        vfs.create_dir_all(Path::new("/data/p-0")).unwrap();
        let mut segment = Segment::create(&vfs, Path::new("/data/p-0"), 0).unwrap();
        let batches = run_of_batches(0, 20);
        let (first, rest) = batches.split_at(10);
        segment.append(first, &BatchBuffers::default(), 256).unwrap();
        let before = segment.tracking();
        assert!(before.index_len > 0, "the first appends made index entries");
        fs.power_fails_at(fs.stats().mutations + 1);
        assert!(segment.append(rest, &BatchBuffers::default(), 256).is_err());
        let after = segment.tracking();
        assert_eq!(
            (
                after.size,
                after.next_offset,
                after.index_len,
                after.time_index_len
            ),
            (
                before.size,
                before.next_offset,
                before.index_len,
                before.time_index_len
            )
        );
        assert_eq!(after.bytes_since_index, before.bytes_since_index);
        assert_eq!(after.max_timestamp, before.max_timestamp);
    }

    #[test]
    fn a_range_appended_with_the_buffer_it_was_read_into_is_one_write_of_the_same_bytes() {
        let fs = SimFs::new();
        let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
        let segment_in = |name: &str| {
            let dir = Path::new("/data").join(name);
            vfs.create_dir_all(&dir).unwrap();
            Segment::create(&vfs, &dir, 0).unwrap()
        };
        let mut source = segment_in("source");
        let batches = run_of_batches(0, 20);
        source.append(&batches, &BatchBuffers::default(), 256).unwrap();
        let (mut budget, mut read, mut buffers) = (1 << 20, Vec::new(), BatchBuffers::default());
        source.read(0, &mut budget, &mut read, &mut buffers).unwrap();
        assert_eq!((read.len(), buffers.len()), (20, 1));

        let mut whole = segment_in("whole");
        let before = fs.stats().mutations;
        whole.append(&read, &buffers, 256).unwrap();
        assert_eq!(
            fs.stats().mutations - before,
            1,
            "one write of the buffer's slice"
        );

        // Without the buffer, the batches are written where they are (the simulated file system has no `writev`:
        // one write each).
        let mut scattered = segment_in("scattered");
        let before = fs.stats().mutations;
        scattered.append(&read, &BatchBuffers::default(), 256).unwrap();
        assert_eq!(fs.stats().mutations - before, 20);

        let log = |segment: &Segment| fs.read_file(&segment.path(LOG_SUFFIX)).unwrap();
        assert_eq!(log(&whole), log(&source));
        assert_eq!(log(&scattered), log(&source));
        assert_eq!(whole.index, scattered.index);
        assert_eq!(whole.time_index, scattered.time_index);
    }
}
