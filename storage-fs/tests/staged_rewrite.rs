//! A log cleaner's rewrite in two halves (ADR 0055): staged without the partition — new segment logs and their
//! indexes in the store's staging directory, synced, the log unchanged — then installed with it by renames. A
//! staging whose segments changed before the installation is refused and its files removed; one a crash
//! interrupted leaves the log as it was, its files removed by the store's next open.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use std::path::{Path, PathBuf};

use record_format::RecordBatch;
use storage::{Durability, PartitionId, PartitionStorage, StagedRewrite, Storage, StorageError};
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

/// The staged segment files (logs and indexes) under the store's staging directory.
fn cleaned_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(stagings) = std::fs::read_dir(dir.join("cleaning.tmp")) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = stagings
        .flat_map(|staging| std::fs::read_dir(staging.unwrap().path()).unwrap())
        .map(|entry| entry.unwrap().path())
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

/// A partition of several segments, and the range of its first two (whole segments below the active one) with
/// every other batch of it kept.
async fn written(
    dir: &Path,
) -> (
    Box<dyn PartitionStorage>,
    Vec<RecordBatch>,
    (i64, i64),
    Vec<RecordBatch>,
) {
    let store = FsStorage::open(config(dir)).unwrap();
    let mut partition = store.create(&pid()).await.unwrap();
    let batches = run_of_batches(0, 60);
    partition.append(&batches).await.unwrap();
    partition.flush(Durability::Sync).await.unwrap();
    let units = partition.segments(0, 10).await.unwrap();
    assert!(units.len() >= 4, "several segments: {}", units.len());
    let (from, to) = (units[0].base_offset, units[2].base_offset);
    let kept: Vec<RecordBatch> = batches
        .iter()
        .filter(|batch| batch.base_offset() < to && batch.base_offset() % 2 == 0)
        .cloned()
        .collect();
    (partition, batches, (from, to), kept)
}

#[tokio::test]
async fn a_staged_rewrite_changes_nothing_until_it_is_installed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut partition, batches, (from, to), kept) = written(dir.path()).await;
    let staged = partition
        .reader()
        .stage_rewrite(from, to, kept.clone())
        .await
        .unwrap();
    let StagedRewrite::Files { ref files, .. } = staged else {
        panic!("storage-fs stages files: {staged:?}");
    };
    assert_eq!(files.len(), 2, "one log per segment of the range");
    assert_eq!(
        cleaned_files(dir.path()).len(),
        6,
        "each with its offset and time indexes"
    );
    assert_eq!(read_all(partition.as_ref()).await, batches, "the log as it was");

    partition.install_rewrite(staged).await.unwrap();
    assert!(cleaned_files(dir.path()).is_empty(), "renamed into place");
    let after: Vec<RecordBatch> = batches
        .iter()
        .filter(|batch| batch.base_offset() >= to || batch.base_offset() % 2 == 0)
        .cloned()
        .collect();
    assert_eq!(read_all(partition.as_ref()).await, after);
    drop(partition);
    // And so after an open (the indexes rebuilt from the new logs).
    let store = FsStorage::open(config(dir.path())).unwrap();
    let reopened = store.open(&pid()).await.unwrap();
    assert_eq!(read_all(reopened.as_ref()).await, after);
}

#[tokio::test]
async fn a_staging_whose_segments_changed_is_refused_and_its_files_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut partition, _batches, (from, to), kept) = written(dir.path()).await;
    let staged = partition.reader().stage_rewrite(from, to, kept).await.unwrap();
    // The log cut back into the range: its second segment is gone.
    let second = partition.segments(0, 10).await.unwrap()[1].base_offset;
    partition.truncate_to(second).await.unwrap();
    let refused = partition.install_rewrite(staged).await.unwrap_err();
    assert!(
        matches!(refused, StorageError::InvalidRewrite { .. }),
        "{refused}"
    );
    assert!(cleaned_files(dir.path()).is_empty());
}

#[tokio::test]
async fn a_staging_a_crash_interrupted_leaves_the_log_and_its_files_go_at_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let (partition, batches, (from, to), kept) = written(dir.path()).await;
    let _staged = partition.reader().stage_rewrite(from, to, kept).await.unwrap();
    drop(partition);
    assert_eq!(cleaned_files(dir.path()).len(), 6);
    let store = FsStorage::open(config(dir.path())).unwrap();
    let reopened = store.open(&pid()).await.unwrap();
    assert!(cleaned_files(dir.path()).is_empty());
    assert_eq!(read_all(reopened.as_ref()).await, batches);
}

#[tokio::test]
async fn a_staged_rewrite_dropped_uninstalled_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (partition, batches, (from, to), kept) = written(dir.path()).await;
    let staged = partition.reader().stage_rewrite(from, to, kept).await.unwrap();
    assert_eq!(cleaned_files(dir.path()).len(), 6);
    // A pass dropped because its log moved, or its partition deleted: the staging goes with it.
    drop(staged);
    assert!(cleaned_files(dir.path()).is_empty());
    assert_eq!(read_all(partition.as_ref()).await, batches);
}

/// The installation takes the segments the staging opened (scanned and indexed without the partition): it reads
/// none of their logs — a segment kept whole, up to Kafka's 1 GiB, is not read while produce and fetch wait — and
/// the installed segment still knows the aborted transactions its `.txnindex` holds.
#[tokio::test]
async fn an_installation_reads_no_staged_log_and_keeps_the_segments_aborted_transactions() {
    let fs = storage_fs::sim::SimFs::new();
    let store = FsStorage::open_on(config(Path::new("/data")), std::sync::Arc::new(fs.clone())).unwrap();
    let mut partition = store.create(&pid()).await.unwrap();
    let batches = run_of_batches(0, 60);
    // An aborted transaction whose marker is the fifth batch: its entry lands in the first segment's index.
    partition.append(&batches[..5]).await.unwrap();
    let aborted = record_format::AbortedTxn {
        producer_id: 7,
        first_offset: batches[1].base_offset(),
        last_offset: batches[4].base_offset(),
        last_stable_offset: batches[1].base_offset(),
    };
    partition.append_aborted_txn(aborted).await.unwrap();
    partition.append(&batches[5..]).await.unwrap();
    partition.flush(Durability::Sync).await.unwrap();
    let units = partition.segments(0, 10).await.unwrap();
    let (from, to) = (units[0].base_offset, units[2].base_offset);
    let kept: Vec<RecordBatch> = batches
        .iter()
        .filter(|batch| batch.base_offset() < to && batch.base_offset() % 2 == 0)
        .cloned()
        .collect();
    let kept_bytes: u64 = kept.iter().map(|batch| batch.size() as u64).sum();
    let staged = partition.reader().stage_rewrite(from, to, kept).await.unwrap();

    let before = fs.stats().bytes_read;
    partition.install_rewrite(staged).await.unwrap();
    let read = fs.stats().bytes_read - before;
    assert!(
        read < kept_bytes / 8,
        "the installation read {read} bytes; the new segments hold {kept_bytes}"
    );
    assert_eq!(
        partition
            .aborted_txns(0, partition.log_end_offset())
            .await
            .unwrap(),
        [aborted]
    );
    let expected: Vec<RecordBatch> = batches
        .iter()
        .filter(|batch| batch.base_offset() >= to || batch.base_offset() % 2 == 0)
        .cloned()
        .collect();
    assert_eq!(read_all(partition.as_ref()).await, expected);
    // The installed segments go on taking what a segment takes: retention removes them.
    partition.delete_before(to).await.unwrap();
    assert_eq!(partition.log_start_offset(), to);
    assert_eq!(
        read_all(partition.as_ref()).await,
        expected[expected.iter().position(|b| b.base_offset() >= to).unwrap()..]
    );
}

/// The installed segments are the partition's files under their own names: once the descriptor pool has closed
/// their descriptors (more files open than its budget), reading them reopens the partition's files — not the
/// staging's, which are gone — and so do a sync and a truncation into them.
#[tokio::test]
async fn installed_segments_reopen_by_their_own_names_once_the_pool_closed_their_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let pooled = FsConfig {
        max_open_files: Some(storage_fs::pool::MIN_BUDGET),
        ..config(dir.path())
    };
    let store = FsStorage::open(pooled).unwrap();
    let mut partition = store.create(&pid()).await.unwrap();
    let batches = run_of_batches(0, 60);
    partition.append(&batches).await.unwrap();
    partition.flush(Durability::Sync).await.unwrap();
    let units = partition.segments(0, 10).await.unwrap();
    let (from, to) = (units[0].base_offset, units[2].base_offset);
    let kept: Vec<RecordBatch> = batches
        .iter()
        .filter(|batch| batch.base_offset() < to && batch.base_offset() % 2 == 0)
        .cloned()
        .collect();
    let staged = partition.reader().stage_rewrite(from, to, kept).await.unwrap();
    partition.install_rewrite(staged).await.unwrap();
    // Other partitions' files, kept open, take every descriptor of the budget.
    let mut others = Vec::new();
    for number in 0..storage_fs::pool::MIN_BUDGET {
        let mut other = store
            .create(&PartitionId::new("other", number as u32).unwrap())
            .await
            .unwrap();
        other.append(&run_of_batches(0, 3)).await.unwrap();
        other.flush(Durability::Sync).await.unwrap();
        others.push(other);
    }
    let expected: Vec<RecordBatch> = batches
        .iter()
        .filter(|batch| batch.base_offset() >= to || batch.base_offset() % 2 == 0)
        .cloned()
        .collect();
    assert_eq!(read_all(partition.as_ref()).await, expected);
    partition.flush(Durability::Sync).await.unwrap();
    // A truncation into the first installed segment cuts its log through its handle.
    let cut = expected[1].next_offset();
    partition.truncate_to(cut).await.unwrap();
    assert_eq!(read_all(partition.as_ref()).await, expected[..2]);
    drop(partition);
    let reopened = store.open(&pid()).await.unwrap();
    assert_eq!(read_all(reopened.as_ref()).await, expected[..2]);
}
