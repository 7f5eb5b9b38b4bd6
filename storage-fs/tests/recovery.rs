//! What opening a damaged partition directory does: every case gives a clear error or a documented recovery
//! (reported in `OpenReport`), never a panic. Also the byte formats Kafka's tools read.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::path::{Path, PathBuf};

use bytes::Bytes;
use record_format::{AbortedTxn, RecordBatch};
use storage::{Durability, OpenMode, PartitionId, PartitionStorage, Storage};
use storage_fs::{FsConfig, FsStorage};
use storage_testkit::conformance::run_of_batches;

fn config(dir: &Path) -> FsConfig {
    FsConfig {
        segment_bytes: 8 * 1024,
        index_interval_bytes: 256,
        ..FsConfig::new(dir)
    }
}

fn pid() -> PartitionId {
    PartitionId::new("orders", 0).unwrap()
}

/// A partition with `count` batches over several segments, synced; returns the batches and the partition dir.
async fn written(dir: &Path, count: usize) -> (Vec<RecordBatch>, PathBuf) {
    let store = FsStorage::open(config(dir)).unwrap();
    let mut partition = store.create(&pid()).await.unwrap();
    let batches = run_of_batches(0, count);
    partition.append(&batches).await.unwrap();
    partition.flush(Durability::Sync).await.unwrap();
    (batches, dir.join("orders-0"))
}

fn files_with(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort();
    files
}

async fn read_all(partition: &dyn PartitionStorage) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let mut offset = partition.log_start_offset();
    while offset < partition.log_end_offset() {
        let batches = partition.read(offset, 1 << 20).await.unwrap();
        offset = batches.last().unwrap().next_offset();
        out.extend(batches);
    }
    out
}

#[tokio::test]
async fn flipped_byte_in_the_tail_segment_cuts_the_log_before_that_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (batches, partition_dir) = written(dir.path(), 30).await;
    let last_log = files_with(&partition_dir, ".log").pop().unwrap();
    let mut bytes = std::fs::read(&last_log).unwrap();
    let flip_at = bytes.len() - 5;
    bytes[flip_at] ^= 0x40;
    std::fs::write(&last_log, &bytes).unwrap();

    let store = FsStorage::open(config(dir.path())).unwrap();
    let partition = store.open(&pid()).await.unwrap();
    let report = partition.open_report().clone();
    assert_eq!(report.truncated.len(), 1, "{report:?}");
    assert!(report.truncated[0].2.contains("crc"), "{report:?}");
    let survivors = read_all(&*partition).await;
    assert_eq!(
        survivors.len(),
        batches.len() - 1,
        "only the damaged last batch goes"
    );
    for (kept, original) in survivors.iter().zip(&batches) {
        assert_eq!(kept.as_bytes(), original.as_bytes());
    }
    assert_eq!(
        partition.log_end_offset(),
        batches[batches.len() - 2].next_offset()
    );
}

/// Every file of a directory with its bytes, to show an open changed nothing.
fn directory_contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn read_only_open_reports_a_torn_middle_segment_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (batches, partition_dir) = written(dir.path(), 30).await;
    let logs = files_with(&partition_dir, ".log");
    assert!(logs.len() >= 3, "the test needs several segments");
    let length = std::fs::metadata(&logs[1]).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&logs[1])
        .unwrap()
        .set_len(length - 3)
        .unwrap();
    std::fs::write(partition_dir.join("00000000000000000000.snapshot.tmp"), b"half").unwrap();
    std::fs::remove_file(files_with(&partition_dir, ".index").remove(0)).unwrap();
    let before = directory_contents(&partition_dir);

    let store = FsStorage::open(config(dir.path())).unwrap();
    let partition = store.open_read_only(&pid()).await.unwrap();
    let report = partition.open_report().clone();
    assert_eq!(report.truncated.len(), 1, "{report:?}");
    assert_eq!(report.dropped_segments.len(), logs.len() - 2, "{report:?}");
    assert_eq!(report.removed_leftovers.len(), 1, "{report:?}");
    assert!(!report.rebuilt_indexes.is_empty(), "{report:?}");
    let survivors = read_all(&*partition).await;
    assert!(!survivors.is_empty() && survivors.len() < batches.len());
    for (survivor, original) in survivors.iter().zip(&batches) {
        assert_eq!(survivor.as_bytes(), original.as_bytes());
    }
    drop(partition);
    assert_eq!(
        directory_contents(&partition_dir),
        before,
        "a read-only open wrote to the directory"
    );
}

#[tokio::test]
async fn torn_middle_segment_drops_every_later_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (batches, partition_dir) = written(dir.path(), 30).await;
    let logs = files_with(&partition_dir, ".log");
    assert!(logs.len() >= 3, "the test needs several segments");
    let middle = &logs[1];
    let length = std::fs::metadata(middle).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(middle)
        .unwrap()
        .set_len(length - 3)
        .unwrap();

    let partition = FsStorage::open(config(dir.path()))
        .unwrap()
        .open(&pid())
        .await
        .unwrap();
    let report = partition.open_report();
    assert_eq!(report.truncated.len(), 1);
    assert_eq!(report.dropped_segments.len(), logs.len() - 2);
    let survivors = read_all(&*partition).await;
    assert!(survivors.len() < batches.len());
    for (kept, original) in survivors.iter().zip(&batches) {
        assert_eq!(
            kept.as_bytes(),
            original.as_bytes(),
            "nothing after the torn tail, nothing changed before"
        );
    }
}

#[tokio::test]
async fn truncated_index_is_rebuilt_and_reads_still_use_it() {
    let dir = tempfile::tempdir().unwrap();
    let (batches, partition_dir) = written(dir.path(), 30).await;
    let index = files_with(&partition_dir, ".index").remove(0);
    let original = std::fs::read(&index).unwrap();
    assert!(original.len() >= 16, "the first segment has index entries");
    std::fs::write(&index, &original[..original.len() - 5]).unwrap();

    let partition = FsStorage::open(config(dir.path()))
        .unwrap()
        .open(&pid())
        .await
        .unwrap();
    assert!(!partition.open_report().rebuilt_indexes.is_empty());
    assert_eq!(
        std::fs::read(&index).unwrap(),
        original,
        "rebuilt to the same entries"
    );
    for batch in &batches {
        let found = partition.read(batch.last_offset(), 1).await.unwrap();
        assert_eq!(found[0].as_bytes(), batch.as_bytes());
    }
}

#[tokio::test]
async fn garbage_file_in_the_directory_is_reported_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (batches, partition_dir) = written(dir.path(), 5).await;
    std::fs::write(partition_dir.join("notes.txt"), b"hello").unwrap();
    std::fs::write(partition_dir.join("00000000000000000099.snapshot.tmp"), b"half").unwrap();
    let partition = FsStorage::open(config(dir.path()))
        .unwrap()
        .open(&pid())
        .await
        .unwrap();
    assert_eq!(
        partition.open_report().unknown_files,
        vec!["notes.txt".to_owned()]
    );
    assert_eq!(partition.open_report().removed_leftovers.len(), 1);
    assert!(partition_dir.join("notes.txt").exists());
    assert_eq!(read_all(&*partition).await.len(), batches.len());
}

#[tokio::test]
async fn garbage_in_a_segment_file_is_cut_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let (_, partition_dir) = written(dir.path(), 1).await;
    let log = files_with(&partition_dir, ".log").pop().unwrap();
    std::fs::write(&log, vec![0xAB; 500]).unwrap();
    let partition = FsStorage::open(config(dir.path()))
        .unwrap()
        .open(&pid())
        .await
        .unwrap();
    assert_eq!(partition.open_report().truncated[0].1, 500);
    assert_eq!(partition.log_end_offset(), 0);
}

/// A new partition whose metadata says MIRRORING; returns its store, the partition and the metadata file's path.
async fn partition_with_metadata(dir: &Path) -> (FsStorage, Box<dyn PartitionStorage>, PathBuf) {
    let store = FsStorage::open(config(dir)).unwrap();
    let mut partition = store.create(&pid()).await.unwrap();
    partition
        .put_metadata("mirror-state", b"MIRRORING")
        .await
        .unwrap();
    (store, partition, dir.join("orders-0/mirrorlog.metadata"))
}

#[tokio::test]
async fn corrupt_metadata_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let (store, partition, path) = partition_with_metadata(dir.path()).await;
    drop(partition);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[6] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let error = store.open_partition(&pid(), OpenMode::ReadWrite).unwrap_err();
    assert!(error.to_string().contains("mirrorlog.metadata"), "{error}");
}

#[tokio::test]
async fn metadata_changes_are_appended_and_a_torn_last_change_is_reported_and_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut partition, path) = partition_with_metadata(dir.path()).await;
    let first = std::fs::metadata(&path).unwrap().len();
    partition.put_metadata("mirror-state", b"STOPPING").await.unwrap();
    let second = std::fs::metadata(&path).unwrap().len();
    assert!(
        second > first,
        "the second change is appended ({first} then {second} bytes)"
    );
    drop(partition);
    // Half of a third change: what a crash during its append leaves.
    let mut bytes = std::fs::read(&path).unwrap();
    let change = bytes[first as usize..].to_vec();
    bytes.extend_from_slice(&change[..change.len() / 2]);
    std::fs::write(&path, &bytes).unwrap();

    let read_only = store.open_partition(&pid(), OpenMode::ReadOnly).unwrap();
    let (torn, reason) = read_only.open_report().metadata_torn_tail.clone().unwrap();
    assert_eq!(torn as usize, change.len() / 2, "{reason}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "a read-only open writes nothing"
    );
    drop(read_only);

    let mut partition = store.open(&pid()).await.unwrap();
    assert_eq!(
        partition.metadata("mirror-state").await.unwrap().as_deref(),
        Some(&b"STOPPING"[..])
    );
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        second,
        "the torn change is cut"
    );
    partition.put_metadata("mirror-state", b"STOPPED").await.unwrap();
    drop(partition);
    let partition = store.open(&pid()).await.unwrap();
    assert_eq!(
        partition.metadata("mirror-state").await.unwrap().as_deref(),
        Some(&b"STOPPED"[..])
    );
}

#[tokio::test]
async fn txn_index_file_matches_kafkas_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStorage::open(config(dir.path())).unwrap();
    let mut partition = store.create(&pid()).await.unwrap();
    partition.append(&run_of_batches(0, 80)).await.unwrap();
    assert!(
        partition.log_end_offset() > 130,
        "the marker offset is in the log"
    );
    let entry = AbortedTxn {
        producer_id: 7,
        first_offset: 100,
        last_offset: 130,
        last_stable_offset: 100,
    };
    partition.append_aborted_txn(entry).await.unwrap();
    partition.flush(Durability::Sync).await.unwrap();
    let files = files_with(&dir.path().join("orders-0"), ".txnindex");
    assert_eq!(files.len(), 1);
    let hex: String = std::fs::read(&files[0])
        .unwrap()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        hex,
        "00000000000000000007000000000000006400000000000000820000000000000064"
    );
    drop(partition);
    let reopened = store.open(&pid()).await.unwrap();
    assert_eq!(reopened.aborted_txns(0, i64::MAX).await.unwrap(), vec![entry]);
}

#[tokio::test]
async fn snapshot_files_are_named_and_stored_as_kafka_does() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStorage::open(config(dir.path())).unwrap();
    let mut partition = store.create(&pid()).await.unwrap();
    let empty_snapshot = Bytes::from_static(&[0x00, 0x01, 0x48, 0x67, 0x4b, 0xc7, 0, 0, 0, 0]);
    partition.put_snapshot(42, empty_snapshot.clone()).await.unwrap();
    let path = dir.path().join("orders-0/00000000000000000042.snapshot");
    assert_eq!(std::fs::read(path).unwrap(), empty_snapshot.to_vec());
}

#[tokio::test]
async fn offset_index_entries_point_at_the_batch_holding_their_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _) = written(dir.path(), 40).await;
    let partition = FsStorage::open(config(dir.path()))
        .unwrap()
        .open_partition(&pid(), OpenMode::ReadWrite)
        .unwrap();
    let mut checked = 0;
    for segment in partition.segments() {
        let log = std::fs::read(storage_fs::files::offset_file(
            partition.dir(),
            segment.base_offset,
            "log",
        ))
        .unwrap();
        for entry in segment.index() {
            let at = entry.position as usize;
            let base = i64::from_be_bytes(log[at..at + 8].try_into().unwrap());
            let delta = i32::from_be_bytes(log[at + 23..at + 27].try_into().unwrap());
            assert_eq!(
                base + i64::from(delta) - segment.base_offset,
                i64::from(entry.relative_offset)
            );
            checked += 1;
        }
    }
    assert!(checked > 5, "only {checked} index entries");
}

/// Opening scans segments in chunks (1 MiB): batches that straddle a chunk boundary, and one larger than a chunk,
/// are validated whole, and a flipped byte past the first chunk still cuts the tail there.
#[tokio::test]
async fn opening_validates_batches_across_and_beyond_scan_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStorage::open(FsConfig::new(dir.path())).unwrap();
    let mut partition = store.create(&pid()).await.unwrap();
    let big = |offset: i64, len: usize| {
        let mut builder = record_format::BatchBuilder::new().base_offset(offset);
        builder.add(0, None, Some(&vec![(offset % 251) as u8; len]), &[]);
        builder.build().unwrap()
    };
    // 3 MiB batches cross chunk boundaries; the 9 MiB one is larger than a chunk.
    let batches: Vec<RecordBatch> = (0..5)
        .map(|offset| big(offset, 3 << 20))
        .chain([big(5, 9 << 20), big(6, 1 << 20)])
        .collect();
    partition.append(&batches).await.unwrap();
    partition.flush(Durability::Sync).await.unwrap();
    drop(partition);
    drop(store);
    let store = FsStorage::open(FsConfig::new(dir.path())).unwrap();
    let partition = store.open(&pid()).await.unwrap();
    assert_eq!(partition.log_end_offset(), 7);
    let read = partition.read(0, usize::MAX).await.unwrap();
    assert_eq!(read.len(), 7);
    for (a, b) in read.iter().zip(&batches) {
        assert_eq!(a.as_bytes(), b.as_bytes());
    }
    drop(partition);
    drop(store);
    // Damage the fifth batch (past the first chunk): the log is cut before it.
    let log = files_with(&dir.path().join("orders-0"), ".log").remove(0);
    let mut bytes = std::fs::read(&log).unwrap();
    let fifth: usize = batches[..4].iter().map(RecordBatch::size).sum();
    bytes[fifth + 100] ^= 0xff;
    std::fs::write(&log, bytes).unwrap();
    let store = FsStorage::open(FsConfig::new(dir.path())).unwrap();
    let partition = store.open(&pid()).await.unwrap();
    assert_eq!(partition.log_end_offset(), 4);
}

/// A `.txnindex` a power loss left with a zero-filled entry (a lost write) and a torn last entry: a read-only open
/// reports it, keeps the entries before the damage and writes nothing; a writable open cuts the file there, so a
/// later entry is not appended after garbage, and that entry survives a reopen.
#[tokio::test]
async fn torn_or_zero_filled_txn_index_entries_are_cut_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let (batches, partition_dir) = written(dir.path(), 6).await;
    let first = AbortedTxn {
        producer_id: 9,
        first_offset: batches[0].base_offset(),
        last_offset: batches[1].base_offset(),
        last_stable_offset: batches[0].base_offset(),
    };
    {
        let store = FsStorage::open(config(dir.path())).unwrap();
        let mut partition = store.open(&pid()).await.unwrap();
        partition.append_aborted_txn(first).await.unwrap();
        partition.flush(Durability::Sync).await.unwrap();
    }
    let index = files_with(&partition_dir, ".txnindex").pop().unwrap();
    let mut bytes = std::fs::read(&index).unwrap();
    bytes.extend_from_slice(&[0; 34]);
    bytes.extend_from_slice(&first.encode()[..17]);
    std::fs::write(&index, &bytes).unwrap();

    let before = directory_contents(&partition_dir);
    let store = FsStorage::open(config(dir.path())).unwrap();
    let read_only = store.open_read_only(&pid()).await.unwrap();
    assert_eq!(read_only.aborted_txns(0, i64::MAX).await.unwrap(), vec![first]);
    assert!(!read_only.open_report().rebuilt_indexes.is_empty());
    drop(read_only);
    assert_eq!(
        directory_contents(&partition_dir),
        before,
        "a read-only open wrote"
    );

    let mut partition = store.open(&pid()).await.unwrap();
    assert_eq!(partition.aborted_txns(0, i64::MAX).await.unwrap(), vec![first]);
    assert_eq!(
        std::fs::metadata(&index).unwrap().len(),
        34,
        "cut after the last whole entry"
    );
    let second = AbortedTxn {
        producer_id: 10,
        last_offset: batches[2].base_offset(),
        ..first
    };
    partition.append_aborted_txn(second).await.unwrap();
    partition.flush(Durability::Sync).await.unwrap();
    drop(partition);
    let reopened = store.open(&pid()).await.unwrap();
    assert_eq!(
        reopened.aborted_txns(0, i64::MAX).await.unwrap(),
        vec![first, second]
    );
}

/// The time index entries of a `.timeindex` file: (timestamp, absolute offset).
fn time_index(path: &Path) -> Vec<(i64, i64)> {
    let base: i64 = path.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    std::fs::read(path)
        .unwrap()
        .chunks_exact(12)
        .map(|entry| {
            let timestamp = i64::from_be_bytes(entry[..8].try_into().unwrap());
            let relative = u32::from_be_bytes(entry[8..].try_into().unwrap());
            (timestamp, base + i64::from(relative))
        })
        .collect()
}

#[tokio::test]
async fn a_closed_segment_s_time_index_ends_with_its_largest_timestamp_as_kafka_s_does() {
    let dir = tempfile::tempdir().unwrap();
    // Sparse entries far apart (4 KiB) and small batches: the sparse index alone misses each segment's last batch.
    let store = FsStorage::open(FsConfig {
        segment_bytes: 8 * 1024,
        index_interval_bytes: 4096,
        ..FsConfig::new(dir.path())
    })
    .unwrap();
    let mut partition = store.create(&pid()).await.unwrap();
    let batches: Vec<RecordBatch> = (0..300)
        .map(|offset| storage_testkit::conformance::batch(offset, 1, 20))
        .collect();
    partition.append(&batches).await.unwrap();
    partition.flush(Durability::Sync).await.unwrap();
    drop(partition);
    let partition_dir = dir.path().join("orders-0");
    let logs = files_with(&partition_dir, "log");
    assert!(logs.len() >= 2, "the batches span several segments");
    for log in &logs {
        let base: i64 = log.file_stem().unwrap().to_str().unwrap().parse().unwrap();
        let in_segment: Vec<&RecordBatch> = batches
            .iter()
            .filter(|batch| {
                batch.base_offset() >= base
                    && logs
                        .iter()
                        .map(|other| {
                            other
                                .file_stem()
                                .unwrap()
                                .to_str()
                                .unwrap()
                                .parse::<i64>()
                                .unwrap()
                        })
                        .filter(|other| *other > base)
                        .all(|next| batch.base_offset() < next)
            })
            .collect();
        let largest = in_segment
            .iter()
            .map(|batch| batch.max_timestamp())
            .max()
            .unwrap();
        let holder = in_segment
            .iter()
            .filter(|batch| batch.max_timestamp() == largest)
            .map(|batch| batch.last_offset())
            .next()
            .unwrap();
        let entries = time_index(&log.with_extension("timeindex"));
        assert_eq!(
            entries.last(),
            Some(&(largest, holder)),
            "{}: the time index must end with the segment's largest timestamp",
            log.display()
        );
    }
}
