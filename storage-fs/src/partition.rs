//! One partition directory: segments in offset order, producer snapshots, the metadata file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use record_format::{AbortedTxn, BatchBuffers, RecordBatch};
use storage::partition::select_aborted;
use storage::{
    BlockingPartition, Durability, OpenMode, OpenReport, PartitionId, SegmentSummary, StorageError,
};

use crate::files::{
    append_durably, classify, cut_durably, offset_file, sync_dir, write_atomically, DirEntry, INDEX_SUFFIX,
    LOG_SUFFIX, METADATA_FILE, SNAPSHOT_SUFFIX, TIME_INDEX_SUFFIX,
};
use crate::metadata;
use crate::segment::Segment;
use crate::vfs::{OpenFor, Vfs};
use crate::FsConfig;

/// Writes a cleaner's rewrite beside a partition's segments, without the partition: each segment's new log, and the
/// offset and time indexes built from it, synced, in a directory of its own under the store's
/// [`crate::STAGING_DIR`] (Kafka's cleaner stages its `.cleaned` files the same way);
/// [`FsPartition::install_staged`] renames them over the segment's files. Outside the partition's directory, so
/// that a staging still running when its topic is deleted neither holds the deletion up nor leaves files where
/// the topic created again under the name lives; a directory per staging, so that two never share a file. The
/// store's next open removes whatever was never installed.
struct FsStager {
    vfs: Arc<dyn Vfs>,
    /// The store's staging directory.
    root: PathBuf,
    index_interval: u64,
    /// The partition's staged segments, opened (scanned, indexed) here.
    prepared: PreparedSegments,
}

/// Staged segments opened by their staging, by the path of their staged log, until the partition installs them
/// or their staging is dropped: the scan of a new segment's log that opening it costs is done without the
/// partition, and installing it only renames its files and takes the open segment (a 1 GiB segment kept whole
/// is read at staging, not while produce and fetch wait). Shared by a partition and its stagers.
type PreparedSegments = Arc<std::sync::Mutex<BTreeMap<PathBuf, Segment>>>;

fn lock_prepared(prepared: &PreparedSegments) -> std::sync::MutexGuard<'_, BTreeMap<PathBuf, Segment>> {
    prepared.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Numbers each staging of this process, for a directory of its own.
static STAGINGS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl storage::blocking::RewriteStager for FsStager {
    fn stage(
        &self,
        bases: &[i64],
        to: i64,
        batches: &[RecordBatch],
    ) -> Result<(Vec<(i64, PathBuf)>, storage::StagingCleanup), StorageError> {
        // Named by number alone: a topic's name would make it too long for some file systems.
        let number = STAGINGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let staging = self.root.join(number.to_string());
        let cleanup = {
            let (vfs, staging) = (self.vfs.clone(), staging.clone());
            let prepared = self.prepared.clone();
            // Should removing it fail, the store's next open removes it. Its segments not installed are taken out
            // of the map under its lock and closed after it.
            storage::StagingCleanup::new(move || {
                let leftover = {
                    let mut map = lock_prepared(&prepared);
                    let paths: Vec<PathBuf> = map
                        .keys()
                        .filter(|path| path.starts_with(&staging))
                        .cloned()
                        .collect();
                    paths
                        .into_iter()
                        .filter_map(|path| map.remove(&path))
                        .map(Segment::retire)
                        .collect::<Vec<_>>()
                };
                // Their files are the staging's, about to go, or (after an installation cut short) renamed into
                // the partition: closing them must write nothing.
                crate::closer::close_retired(leftover);
                let _ = vfs.remove_dir_all(&staging);
            })
        };
        self.vfs
            .create_dir_all(&staging)
            .map_err(|e| StorageError::io(format!("creating {}", staging.display()), e))?;
        // On an error below, `cleanup` is dropped and removes what was written.
        let mut files = Vec::with_capacity(bases.len());
        for (index, &base) in bases.iter().enumerate() {
            let end = bases.get(index + 1).copied().unwrap_or(to);
            let bytes: Vec<u8> = batches
                .iter()
                .filter(|batch| (base..end).contains(&batch.base_offset()))
                .flat_map(|batch| batch.as_bytes().iter().copied())
                .collect();
            let path = offset_file(&staging, base, LOG_SUFFIX);
            let io = |what: &str, e| StorageError::io(format!("{what} {}", path.display()), e);
            let mut file = self
                .vfs
                .open(&path, OpenFor::CreateEmpty)
                .map_err(|e| io("creating", e))?;
            file.append(&bytes).map_err(|e| io("writing", e))?;
            file.sync().map_err(|e| io("syncing", e))?;
            drop(file);
            // Opening the staged segment builds its indexes and writes them beside it, durably; the open segment
            // waits for the installation.
            let (staged, _recovery) = Segment::open(
                &self.vfs,
                &staging,
                base,
                self.index_interval,
                OpenMode::ReadWrite,
            )?;
            lock_prepared(&self.prepared).insert(path.clone(), staged);
            files.push((base, path));
        }
        sync_dir(self.vfs.as_ref(), &staging)?;
        Ok((files, cleanup))
    }
}

/// Our own metadata record for the log start offset (user keys cannot start with `@`).
const LOG_START_KEY: &str = "@log-start-offset";

/// A partition stored in Kafka's directory layout.
#[derive(Debug)]
pub struct FsPartition {
    id: PartitionId,
    dir: PathBuf,
    config: FsConfig,
    vfs: Arc<dyn Vfs>,
    segments: BTreeMap<i64, Segment>,
    log_start: i64,
    snapshots: BTreeSet<i64>,
    metadata: BTreeMap<String, Vec<u8>>,
    report: OpenReport,
    /// Set on open when a segment has a `.txnindex`: an earlier process may have created it without syncing its
    /// directory entry, so the first sync syncs the directory too.
    directory_unsynced: bool,
    /// Length of the metadata journal on disk.
    metadata_len: u64,
    /// True once this process wrote the metadata journal: a change can then be one appended frame. The first
    /// change after an open rewrites the file, so that nothing an earlier process left unsynced (its last frame,
    /// the directory entry of its last rewrite) is built upon.
    metadata_appendable: bool,
    /// Staged segments its stagers opened, for [`Self::install_staged`].
    prepared: PreparedSegments,
}

/// The metadata journal is rewritten as one frame once it would grow past this.
const METADATA_JOURNAL_MAX: u64 = 64 * 1024;

impl FsPartition {
    /// Creates the directory with one empty segment at offset 0.
    pub(crate) fn create(
        id: &PartitionId,
        dir: PathBuf,
        config: FsConfig,
        vfs: Arc<dyn Vfs>,
    ) -> Result<Self, StorageError> {
        vfs.create_dir(&dir)
            .map_err(|e| StorageError::io(format!("creating {}", dir.display()), e))?;
        let segment = Segment::create(&vfs, &dir, 0)?;
        sync_dir(vfs.as_ref(), &dir)?;
        Ok(FsPartition {
            id: id.clone(),
            dir,
            config,
            vfs,
            segments: BTreeMap::from([(0, segment)]),
            log_start: 0,
            snapshots: BTreeSet::new(),
            metadata: BTreeMap::new(),
            report: OpenReport::default(),
            directory_unsynced: false,
            metadata_len: 0,
            metadata_appendable: false,
            prepared: PreparedSegments::default(),
        })
    }

    /// Opens a partition directory, validating every segment and cutting a torn tail (see [`OpenReport`]).
    /// Read-only, nothing on disk changes: what would be cut, dropped, rebuilt or removed is reported, and the
    /// partition ends before the first torn tail.
    pub fn open(
        id: &PartitionId,
        dir: PathBuf,
        config: FsConfig,
        vfs: Arc<dyn Vfs>,
        mode: OpenMode,
    ) -> Result<Self, StorageError> {
        let writes = mode == OpenMode::ReadWrite;
        let mut report = OpenReport::default();
        let mut segment_bases = BTreeSet::new();
        let mut snapshots = BTreeSet::new();
        let mut metadata_records = BTreeMap::new();
        let mut metadata_len = 0;
        let entries = vfs
            .read_dir(&dir)
            .map_err(|e| StorageError::io(format!("listing {}", dir.display()), e))?;
        for entry in entries {
            let name = entry.name;
            let path = dir.join(&name);
            match classify(&name) {
                DirEntry::Segment { base_offset, suffix } if suffix == "log" => {
                    segment_bases.insert(base_offset);
                }
                DirEntry::Segment { .. } => {}
                DirEntry::Snapshot { offset } => {
                    snapshots.insert(offset);
                }
                DirEntry::Metadata => {
                    let bytes = vfs
                        .read(&path)
                        .map_err(|e| StorageError::io(format!("reading {}", path.display()), e))?;
                    let decoded = metadata::decode(&bytes)?;
                    if let Some(reason) = decoded.torn_tail {
                        let torn = bytes.len() as u64 - decoded.valid_len;
                        if writes {
                            cut_durably(vfs.as_ref(), &path, decoded.valid_len)?;
                        }
                        report.metadata_torn_tail = Some((torn, reason));
                    }
                    metadata_records = decoded.records;
                    metadata_len = decoded.valid_len;
                }
                DirEntry::Leftover => {
                    // A `.tmp` is an interrupted atomic write; a `.cleaned` a cleaner's staged rewrite never
                    // installed (ours or Kafka's, which deletes them at load too): the files they would have
                    // replaced are whole.
                    let interrupted = name.ends_with(".tmp") || name.ends_with(".cleaned");
                    if interrupted && !writes {
                        report.removed_leftovers.push(name);
                    } else if interrupted {
                        let removed = if vfs.is_dir(&path) {
                            vfs.remove_dir_all(&path)
                        } else {
                            vfs.remove_file(&path)
                        };
                        removed.map_err(|e| StorageError::io(format!("removing {}", path.display()), e))?;
                        report.removed_leftovers.push(name);
                    } else {
                        report.unknown_files.push(name);
                    }
                }
                DirEntry::Unknown => report.unknown_files.push(name),
            }
        }
        let mut segments = BTreeMap::new();
        let mut bases = segment_bases.into_iter();
        for base in bases.by_ref() {
            let (segment, recovery) =
                Segment::open_uncut(&vfs, &dir, base, config.index_interval_bytes, mode)?;
            if let Some((bytes, reason)) = recovery.truncated {
                report.truncated.push((base, bytes, reason));
            }
            if recovery.rebuilt_indexes {
                report.rebuilt_indexes.push(base);
            }
            let torn = report.truncated.last().is_some_and(|(b, _, _)| *b == base);
            segments.insert(base, segment);
            if torn {
                break;
            }
        }
        // Nothing may follow a torn tail: later segments were written after data that is now gone. They go newest
        // first and durably, so a crash in between leaves a shorter log, never one with a hole.
        // Only then is the torn tail cut (a cut that became durable first would, with a later segment surviving,
        // leave a hole that looks like a compacted gap).
        let dropped: Vec<i64> = bases.collect();
        if writes && !dropped.is_empty() {
            for &base in dropped.iter().rev() {
                Segment::delete_files_of(vfs.as_ref(), &dir, base)?;
            }
            sync_dir(vfs.as_ref(), &dir)?;
        }
        report.dropped_segments.extend(dropped);
        if writes {
            for segment in segments.values_mut() {
                segment.cut_torn_tail()?;
            }
        }
        let stored_log_start = match metadata_records.get(LOG_START_KEY) {
            Some(bytes) => Some(i64::from_be_bytes(bytes.as_slice().try_into().map_err(|_| {
                StorageError::Corrupt {
                    what: METADATA_FILE.into(),
                    reason: "log start offset is not 8 bytes".into(),
                }
            })?)),
            None => None,
        };
        if segments.is_empty() {
            if !writes {
                return Err(StorageError::Corrupt {
                    what: dir.display().to_string(),
                    reason: "the partition directory holds no segment".into(),
                });
            }
            // Every segment gone (a power loss while the partition was being emptied): the log starts again
            // where the metadata says it starts.
            let base = stored_log_start.unwrap_or(0).max(0);
            segments.insert(base, Segment::create(&vfs, &dir, base)?);
            sync_dir(vfs.as_ref(), &dir)?;
        }
        let first_base = segments.keys().next().copied().unwrap_or(0);
        let log_start = stored_log_start.unwrap_or(first_base);
        let mut partition = FsPartition {
            id: id.clone(),
            dir,
            config,
            vfs,
            segments,
            log_start,
            snapshots,
            metadata: metadata_records,
            report,
            directory_unsynced: false,
            metadata_len,
            metadata_appendable: false,
            prepared: PreparedSegments::default(),
        };
        // The one file created without an immediate directory sync is a `.txnindex` (its first entry's sync does
        // it); one an earlier process created may still lack its entry, so the first sync syncs the directory.
        partition.directory_unsynced = writes
            && partition
                .segments
                .values()
                .any(|segment| !segment.aborted.is_empty());
        // The aborted-transaction index never reaches past the log.
        let log_end = partition.log_end_offset();
        for segment in partition.segments.values_mut() {
            segment
                .aborted
                .retain(|entry| entry.survives_truncation_to(log_end));
        }
        if writes && partition.log_start > log_end {
            // A power loss took unsynced data the acknowledged log start had already moved past: what is left is
            // below the log start, so the log restarts empty there (as Kafka's recovery does).
            partition
                .report
                .dropped_segments
                .extend(partition.segments.keys().copied());
            partition.empty_at(partition.log_start)?;
            return Ok(partition);
        }
        partition.log_start = partition.log_start.clamp(first_base, log_end.max(first_base));
        Ok(partition)
    }

    /// What opening found and repaired.
    pub fn open_report(&self) -> &OpenReport {
        &self.report
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The segments, by base offset.
    pub fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.segments.values()
    }

    fn active(&mut self) -> &mut Segment {
        // A partition always has at least one segment (create and open guarantee it).
        self.segments
            .values_mut()
            .next_back()
            .unwrap_or_else(|| unreachable!("a partition always has a segment"))
    }

    /// Starts a new segment. The old one is synced first: only the last segment may lose data at a power loss,
    /// so a lost tail is always the end of the log (had a later segment survived it, the log would have a hole
    /// that looks like a compacted gap, and recovery could not tell).
    fn roll(&mut self, base_offset: i64) -> Result<(), StorageError> {
        if let Some(active) = self.segments.values_mut().next_back() {
            // The segment becomes inactive: its time index ends with its largest timestamp (Kafka's
            // `onBecomeInactiveSegment`).
            active.seal_time_index();
            active.write_pending_indexes()?;
            active.sync()?;
        }
        let segment = Segment::create(&self.vfs, &self.dir, base_offset)?;
        sync_dir(self.vfs.as_ref(), &self.dir)?;
        self.segments.insert(base_offset, segment);
        Ok(())
    }

    /// Rewrites the inactive segment at `base` to hold `batches` (a cleaner's rewrite): its new `.log` is written
    /// beside it and renamed over it (atomic: a crash leaves the old file or the new one, and a `.tmp` the next open
    /// removes), then the segment is opened again, which rebuilds its offset and time indexes from the new file;
    /// its `.txnindex` stays as it is (the aborted transactions it names are still the partition's).
    fn rewrite_segment(&mut self, base: i64, batches: &[&RecordBatch]) -> Result<(), StorageError> {
        let bytes: Vec<u8> = batches
            .iter()
            .flat_map(|batch| batch.as_bytes().iter().copied())
            .collect();
        if let Some(old) = self.segments.get_mut(&base) {
            old.write_pending_indexes()?;
        }
        write_atomically(
            self.vfs.as_ref(),
            &offset_file(&self.dir, base, LOG_SUFFIX),
            &bytes,
        )?;
        self.reopen_segment(base)
    }

    /// Reads the segment at `base` again, its files replaced: the old segment's handles go (its files are the new
    /// one's now), then the segment is opened (indexes rebuilt, or found equal to the ones on disk).
    fn reopen_segment(&mut self, base: i64) -> Result<(), StorageError> {
        // Opened before the old one goes: should the open fail, the map keeps a segment at `base` (reads of it
        // then fail rather than find a hole).
        let (segment, _recovery) = Segment::open(
            &self.vfs,
            &self.dir,
            base,
            self.config.index_interval_bytes,
            OpenMode::ReadWrite,
        )?;
        let replaced = self.segments.insert(base, segment);
        crate::closer::close_retired(replaced.into_iter().map(Segment::retire).collect());
        Ok(())
    }

    fn needs_roll(segment: &Segment, batch: &RecordBatch, segment_bytes: u64) -> bool {
        segment.first_batch_offset.is_some()
            && (segment.size + batch.size() as u64 > segment_bytes
                || batch.last_offset() - segment.base_offset > i64::from(i32::MAX))
    }

    /// Makes the current records durable: one frame appended to the journal and synced, or the file rewritten
    /// atomically (the first change after an open, a version 1 file, a journal grown past its limit).
    fn save_metadata(&mut self) -> Result<(), StorageError> {
        let path = self.dir.join(METADATA_FILE);
        let frame = metadata::encode_frame(&self.metadata);
        let end = self.metadata_len.saturating_add(frame.len() as u64);
        if self.metadata_appendable && end <= METADATA_JOURNAL_MAX {
            // A failed append may leave part of a frame behind: were the handle used again, the next change
            // would rewrite the file rather than append after it.
            self.metadata_appendable = false;
            append_durably(self.vfs.as_ref(), &path, &frame)?;
            self.metadata_len = end;
            self.metadata_appendable = true;
            return Ok(());
        }
        let bytes = metadata::encode_file(&self.metadata);
        // Until the rewrite is durable, an append would land in a file that may not be the one named.
        self.metadata_appendable = false;
        write_atomically(self.vfs.as_ref(), &path, &bytes)?;
        self.metadata_len = bytes.len() as u64;
        self.metadata_appendable = true;
        Ok(())
    }

    fn empty_at(&mut self, offset: i64) -> Result<(), StorageError> {
        let mut gone = Vec::new();
        for segment in std::mem::take(&mut self.segments).into_values() {
            segment.delete_files()?;
            gone.push(segment.retire());
        }
        crate::closer::close_retired(gone);
        let segment = Segment::create(&self.vfs, &self.dir, offset)?;
        self.segments.insert(offset, segment);
        sync_dir(self.vfs.as_ref(), &self.dir)?;
        self.log_start = offset;
        self.metadata
            .insert(LOG_START_KEY.into(), offset.to_be_bytes().to_vec());
        self.save_metadata()
    }
}

impl BlockingPartition for FsPartition {
    fn id(&self) -> &PartitionId {
        &self.id
    }

    fn log_start_offset(&self) -> i64 {
        self.log_start
    }

    fn log_end_offset(&self) -> i64 {
        self.segments
            .values()
            .next_back()
            .map_or(0, |segment| segment.next_offset)
    }

    fn open_report(&self) -> OpenReport {
        self.report.clone()
    }

    /// An unsynced append is one `write` into the page cache (a roll, which creates files and syncs the old segment
    /// and the directory, is the exception: [`Self::append_is_cheap`] says which append rolls).
    fn appends_are_cheap(&self) -> bool {
        true
    }

    /// Cheap unless it rolls: an append that does not fit the active segment syncs (the old segment, the
    /// directory), so it runs off the executor.
    fn append_is_cheap(&self, batches: &[RecordBatch]) -> bool {
        let Some(active) = self.segments.values().next_back() else {
            return false;
        };
        let size: u64 = batches.iter().map(|batch| batch.size() as u64).sum();
        let last_offset = batches
            .last()
            .map_or(active.base_offset, RecordBatch::last_offset);
        active.first_batch_offset.is_none()
            || (active.size + size <= self.config.segment_bytes
                && last_offset - active.base_offset <= i64::from(i32::MAX))
    }

    /// Reads are one `pread` of a range, normally from the page cache; metadata, snapshot offsets and the
    /// aborted index are in memory.
    fn reads_are_cheap(&self) -> bool {
        true
    }

    fn append(&mut self, batches: &[RecordBatch]) -> Result<(), StorageError> {
        self.append_with_buffers(batches, &BatchBuffers::default())
    }

    fn append_with_buffers(
        &mut self,
        batches: &[RecordBatch],
        buffers: &BatchBuffers,
    ) -> Result<(), StorageError> {
        let mut start = 0;
        while start < batches.len() {
            if Self::needs_roll(
                self.segments
                    .values()
                    .next_back()
                    .unwrap_or_else(|| unreachable!()),
                &batches[start],
                self.config.segment_bytes,
            ) {
                self.roll(batches[start].base_offset())?;
            }
            // Take the longest run that fits the active segment.
            let segment = self
                .segments
                .values()
                .next_back()
                .unwrap_or_else(|| unreachable!());
            let mut size = segment.size;
            let mut end = start;
            while end < batches.len() {
                let batch = &batches[end];
                let fits = size + batch.size() as u64 <= self.config.segment_bytes
                    && batch.last_offset() - segment.base_offset <= i64::from(i32::MAX);
                if end > start && !fits {
                    break;
                }
                size += batch.size() as u64;
                end += 1;
            }
            let index_interval = self.config.index_interval_bytes;
            self.active()
                .append(&batches[start..end], buffers, index_interval)?;
            start = end;
        }
        Ok(())
    }

    fn read(&self, from_offset: i64, max_bytes: usize) -> Result<Vec<RecordBatch>, StorageError> {
        self.read_with_buffers(from_offset, max_bytes)
            .map(|(batches, _)| batches)
    }

    /// Each segment's part of the range is one `pread` into one buffer, and its batches are slices of it.
    fn read_with_buffers(
        &self,
        from_offset: i64,
        max_bytes: usize,
    ) -> Result<(Vec<RecordBatch>, BatchBuffers), StorageError> {
        let mut out = Vec::new();
        let mut buffers = BatchBuffers::default();
        let mut budget = max_bytes;
        let first = self
            .segments
            .range(..=from_offset)
            .next_back()
            .map_or(i64::MIN, |(base, _)| *base);
        for segment in self.segments.range(first..).map(|(_, segment)| segment) {
            segment.read(from_offset, &mut budget, &mut out, &mut buffers)?;
            if budget == 0 {
                break;
            }
        }
        Ok((out, buffers))
    }

    fn truncate_to(&mut self, offset: i64) -> Result<(), StorageError> {
        let holder = self
            .segments
            .range(..=offset)
            .next_back()
            .map_or(offset, |(base, _)| *base);
        // Later segments go first, the last one first, and durably before the holder is cut: interrupted at any
        // point, what is left is a prefix of the log, never a log with a hole in it.
        let later = self.segments.split_off(&(holder + 1));
        for segment in later.values().rev() {
            segment.delete_files()?;
        }
        if !later.is_empty() {
            sync_dir(self.vfs.as_ref(), &self.dir)?;
        }
        crate::closer::close_retired(later.into_values().map(Segment::retire).collect());
        let index_interval = self.config.index_interval_bytes;
        if let Some(segment) = self.segments.get_mut(&holder) {
            segment.truncate_to(offset, index_interval)?;
        }
        // Truncating into a gap between batches: the log still ends at `offset`.
        if self.log_end_offset() < offset {
            self.roll(offset)?;
        }
        Ok(())
    }

    fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), StorageError> {
        self.empty_at(offset)
    }

    fn segments(&self, from_offset: i64, max: usize) -> Result<Vec<SegmentSummary>, StorageError> {
        let first = self
            .segments
            .range(..=from_offset)
            .next_back()
            .map_or(from_offset, |(&base, _)| base);
        Ok(self
            .segments
            .range(first..)
            .take(max)
            .map(|(_, segment)| SegmentSummary {
                base_offset: segment.base_offset,
                next_offset: segment.next_offset,
                size_bytes: segment.size,
                max_timestamp: segment.max_timestamp(),
            })
            .collect())
    }

    fn size_bytes(&self) -> Result<u64, StorageError> {
        Ok(self.segments.values().map(|segment| segment.size).sum())
    }

    fn replace_batches(&mut self, from: i64, to: i64, batches: &[RecordBatch]) -> Result<(), StorageError> {
        let invalid = |reason: &str| StorageError::InvalidRewrite {
            from,
            to,
            reason: reason.to_owned(),
        };
        let active = self.segments.keys().next_back().copied().unwrap_or(0);
        if !(self.segments.contains_key(&from) && self.segments.contains_key(&to) && to <= active) {
            return Err(invalid("storage-fs rewrites whole segments below the active one"));
        }
        let bases: Vec<i64> = self.segments.range(from..to).map(|(&base, _)| base).collect();
        for (index, &base) in bases.iter().enumerate() {
            let end = bases.get(index + 1).copied().unwrap_or(to);
            let inside: Vec<&RecordBatch> = batches
                .iter()
                .filter(|batch| (base..end).contains(&batch.base_offset()))
                .collect();
            self.rewrite_segment(base, &inside)?;
        }
        Ok(())
    }

    fn rewrite_stager(&self) -> Option<Arc<dyn storage::blocking::RewriteStager>> {
        Some(Arc::new(FsStager {
            vfs: self.vfs.clone(),
            root: self.config.data_dir.join(crate::STAGING_DIR),
            index_interval: self.config.index_interval_bytes,
            prepared: self.prepared.clone(),
        }))
    }

    /// Each staged segment's indexes and log renamed over its own and the segment its staging opened taken in
    /// place of the old one (its `.txnindex` read), then a sync of the directory: the partition is held for
    /// renames, not for writing, syncing or scanning the new segments. Refused, the staged files removed, when the
    /// range's segments are not the ones staged.
    fn install_staged(&mut self, from: i64, to: i64, files: Vec<(i64, PathBuf)>) -> Result<(), StorageError> {
        let active = self.segments.keys().next_back().copied().unwrap_or(0);
        let bases: Vec<i64> = self.segments.range(from..to).map(|(&base, _)| base).collect();
        let staged: Vec<i64> = files.iter().map(|(base, _)| *base).collect();
        if !(self.segments.contains_key(&from) && self.segments.contains_key(&to) && to <= active)
            || bases != staged
        {
            // The staging's files go with its cleanup, when the caller drops the refused rewrite.
            return Err(StorageError::InvalidRewrite {
                from,
                to,
                reason: "the segments staged are not the range's segments below the active one".to_owned(),
            });
        }
        for (base, path) in files {
            if let Some(old) = self.segments.get_mut(&base) {
                old.write_pending_indexes()?;
            }
            let staging = path.parent().unwrap_or(&self.dir);
            // The indexes first, the log last: a crash in between leaves the old log with new indexes, which the
            // next open finds wrong and rebuilds (they are derived data).
            for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX] {
                let (from_path, to_path) = (
                    offset_file(staging, base, suffix),
                    offset_file(&self.dir, base, suffix),
                );
                self.vfs
                    .rename(&from_path, &to_path)
                    .map_err(|e| StorageError::io(format!("renaming {}", from_path.display()), e))?;
            }
            // The segment its staging opened, now under its own name; opened here only when the staging did not
            // (a staging from before this process, which its open would have removed, never comes here).
            let prepared = lock_prepared(&self.prepared).remove(&path);
            match prepared {
                Some(mut segment) => {
                    segment.adopt(&self.dir)?;
                    let replaced = self.segments.insert(base, segment);
                    crate::closer::close_retired(replaced.into_iter().map(Segment::retire).collect());
                }
                None => self.reopen_segment(base)?,
            }
            // Segment by segment, in order, as the rewrite in place: a crash never keeps a later segment's
            // rewrite without an earlier one's.
            sync_dir(self.vfs.as_ref(), &self.dir)?;
        }
        Ok(())
    }

    fn roll_segment(&mut self) -> Result<(), StorageError> {
        let log_end = self.log_end_offset();
        if self.active().first_batch_offset.is_some() {
            self.roll(log_end)?;
        }
        Ok(())
    }

    fn delete_before(&mut self, offset: i64) -> Result<(), StorageError> {
        // Retention that reaches the log end takes the active segment too: a new empty one starts at the log end
        // first (Kafka rolls before it deletes an expired active segment), so the old one's files can go.
        let log_end = self.log_end_offset();
        if offset == log_end && self.active().first_batch_offset.is_some() {
            self.roll(log_end)?;
        }
        self.log_start = offset;
        self.metadata
            .insert(LOG_START_KEY.into(), offset.to_be_bytes().to_vec());
        self.save_metadata()?;
        // Whole segments below the new start go; the active one always stays.
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        let mut gone = Vec::new();
        for pair in bases.windows(2) {
            if pair[1] <= offset {
                if let Some(segment) = self.segments.remove(&pair[0]) {
                    segment.delete_files()?;
                    gone.push(segment.retire());
                }
            }
        }
        crate::closer::close_retired(gone);
        sync_dir(self.vfs.as_ref(), &self.dir)
    }

    fn flush(&mut self, durability: Durability) -> Result<(), StorageError> {
        if durability == Durability::Buffered {
            // Every log write already went to the operating system; the index entries go now.
            for segment in self.segments.values_mut() {
                segment.write_pending_indexes()?;
            }
            return Ok(());
        }
        for segment in self.segments.values_mut() {
            segment.sync()?;
        }
        if self.directory_unsynced {
            sync_dir(self.vfs.as_ref(), &self.dir)?;
            self.directory_unsynced = false;
        }
        Ok(())
    }

    fn put_snapshot(&mut self, offset: i64, bytes: Bytes) -> Result<(), StorageError> {
        write_atomically(
            self.vfs.as_ref(),
            &offset_file(&self.dir, offset, SNAPSHOT_SUFFIX),
            &bytes,
        )?;
        self.snapshots.insert(offset);
        Ok(())
    }

    fn snapshot_at_or_below(&self, offset: i64) -> Result<Option<(i64, Bytes)>, StorageError> {
        let Some(&found) = self.snapshots.range(..=offset).next_back() else {
            return Ok(None);
        };
        let path = offset_file(&self.dir, found, SNAPSHOT_SUFFIX);
        let bytes = self
            .vfs
            .read(&path)
            .map_err(|e| StorageError::io(format!("reading {}", path.display()), e))?;
        Ok(Some((found, Bytes::from(bytes))))
    }

    fn snapshot_offsets(&self) -> Result<Vec<i64>, StorageError> {
        Ok(self.snapshots.iter().copied().collect())
    }

    fn delete_snapshot(&mut self, offset: i64) -> Result<(), StorageError> {
        let path = offset_file(&self.dir, offset, SNAPSHOT_SUFFIX);
        match self.vfs.remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StorageError::io(format!("deleting {}", path.display()), e)),
        }
        self.snapshots.remove(&offset);
        Ok(())
    }

    fn append_aborted_txn(&mut self, entry: AbortedTxn) -> Result<(), StorageError> {
        // Filed with the segment holding the marker (the active one when the log appends the marker first, as
        // Kafka does), so truncation and retention remove it with its marker.
        let holder = self
            .segments
            .range(..=entry.last_offset)
            .next_back()
            .map(|(base, _)| *base);
        match holder.and_then(|base| self.segments.get_mut(&base)) {
            Some(segment) => segment.append_aborted(entry),
            None => self.active().append_aborted(entry),
        }
    }

    fn last_aborted_txn(&self) -> Result<Option<AbortedTxn>, StorageError> {
        Ok(self
            .segments
            .values()
            .rev()
            .find_map(|segment| segment.aborted.last().copied()))
    }

    fn aborted_txns(&self, from_offset: i64, upper_bound: i64) -> Result<Vec<AbortedTxn>, StorageError> {
        let all: Vec<AbortedTxn> = self
            .segments
            .values()
            .flat_map(|segment| segment.aborted.iter().copied())
            .collect();
        Ok(select_aborted(&all, from_offset, upper_bound))
    }

    fn put_metadata(&mut self, key: &str, value: &[u8]) -> Result<(), StorageError> {
        self.metadata.insert(key.to_owned(), value.to_vec());
        self.save_metadata()
    }

    fn metadata(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.metadata.get(key).cloned())
    }
}
