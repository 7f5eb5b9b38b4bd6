//! A storage-fs partition built from the shared segment vector: `mirrorlog dump` of the directory gives the
//! vector's fields, its snapshot and txn-index views show the replayed producer state, and `mirrorlog partitions`
//! opens the store a config file names.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use bytes::Bytes;
use producer_state::snapshot::encode_snapshot;
use producer_state::{replay, ProducerStateManager, PsmConfig};
use record_format::BatchIter;
use serde_json::Value;
use storage::{Durability, PartitionId, Storage};
use storage_fs::{FsConfig, FsStorage};

use common::{assert_covers, json_lines, manifest_cases, mirrorlog, vectors_dir};

fn segment_case() -> Value {
    manifest_cases()
        .into_iter()
        .find(|case| case["category"] == "segment")
        .unwrap()
}

/// Writes the segment vector's batches, the replayed snapshot and aborted index into a new partition.
async fn build_partition(data_dir: &std::path::Path) {
    let case = segment_case();
    let bytes = std::fs::read(vectors_dir().join(case["file"].as_str().unwrap())).unwrap();
    let batches: Vec<_> = BatchIter::new(Bytes::from(bytes))
        .map(|found| found.unwrap().batch)
        .collect();
    let store = FsStorage::open(FsConfig {
        segment_bytes: 2048,
        ..FsConfig::new(data_dir)
    })
    .unwrap();
    let mut partition = store
        .create(&PartitionId::new("orders", 0).unwrap())
        .await
        .unwrap();
    partition.append(&batches).await.unwrap();
    let replayed = replay(ProducerStateManager::new(PsmConfig::default()), &batches).unwrap();
    for aborted in &replayed.aborted {
        partition.append_aborted_txn(*aborted).await.unwrap();
    }
    let mut producers: Vec<_> = replayed.manager.producers().collect();
    producers.sort_by_key(|entry| entry.producer_id);
    let snapshot = encode_snapshot(producers.into_iter());
    partition
        .put_snapshot(replayed.manager.map_end_offset(), Bytes::from(snapshot))
        .await
        .unwrap();
    partition.flush(Durability::Sync).await.unwrap();
}

#[tokio::test]
async fn dump_of_a_partition_directory_matches_the_vector_across_segments() {
    let data = tempfile::tempdir().unwrap();
    build_partition(data.path()).await;
    let dir = data.path().join("orders-0");
    let logs = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|e| e == "log")
        })
        .count();
    assert!(logs > 1, "the 2 KiB segments roll: {logs} segments");

    let output = mirrorlog(&["dump", dir.to_str().unwrap(), "--json"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let lines = json_lines(&output);
    let expected = segment_case()["batches"].as_array().unwrap().clone();
    assert_eq!(lines.len(), expected.len());
    for (line, batch) in lines.iter().zip(&expected) {
        let mut batch = batch.clone();
        // File offsets restart in every segment file.
        batch.as_object_mut().unwrap().remove("file_offset");
        assert_covers(&batch, line, "segment_mixed");
    }
}

#[tokio::test]
async fn snapshot_and_txn_index_views_show_the_replayed_state() {
    let data = tempfile::tempdir().unwrap();
    build_partition(data.path()).await;
    let dir = data.path().join("orders-0");
    let output = mirrorlog(&[
        "dump",
        dir.to_str().unwrap(),
        "--json",
        "--snapshots",
        "--txn-index",
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let lines = json_lines(&output);
    let snapshot: Vec<&Value> = lines
        .iter()
        .filter(|line| line.get("snapshot").is_some())
        .collect();
    let expected = &segment_case()["producer_state_after_replay"]["producers"];
    assert_eq!(snapshot.len(), expected.as_object().unwrap().len());
    for entry in snapshot {
        let id = entry["producer_id"].to_string();
        assert_eq!(entry["producer_epoch"], expected[&id]["producer_epoch"]);
        assert_eq!(entry["last_sequence"], expected[&id]["last_sequence"]);
        assert_eq!(entry["last_offset"], expected[&id]["last_data_offset"]);
        assert_eq!(
            entry["current_txn_first_offset"],
            expected[&id]["ongoing_txn_first_offset"]
        );
    }
    let aborted: Vec<&Value> = lines
        .iter()
        .filter(|line| line.get("txn_index").is_some())
        .collect();
    assert_eq!(aborted.len(), 1);
    assert_eq!(
        (
            &aborted[0]["producer_id"],
            &aborted[0]["first_offset"],
            &aborted[0]["last_offset"]
        ),
        (&Value::from(5003), &Value::from(19), &Value::from(23))
    );
    let text = mirrorlog(&["dump", dir.to_str().unwrap(), "--txn-index"]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("version: 0 producerId: 5003 firstOffset: 19 lastOffset: 23"),
        "{text}"
    );
}

/// Runs `mirrorlog partitions` on an fs store config for `data_dir`; expects success and returns the output.
fn list_fs_partitions(data_dir: &std::path::Path) -> String {
    let config = data_dir.join("storage.toml");
    std::fs::write(&config, format!("backend = \"fs\"\ndata_dir = {data_dir:?}\n")).unwrap();
    let output = mirrorlog(&["partitions", "--config", config.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
async fn partitions_lists_the_store_a_config_names() {
    let data = tempfile::tempdir().unwrap();
    build_partition(data.path()).await;
    let text = list_fs_partitions(data.path());
    assert!(text.contains("backend fs"), "{text}");
    assert!(
        text.contains("orders-0: log start 0 log end 48 snapshots 1"),
        "{text}"
    );
}

/// Every file of a directory with its bytes.
fn directory_contents(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    files.sort();
    files
}

#[tokio::test]
async fn partitions_of_a_torn_directory_reports_the_damage_and_writes_nothing() {
    let data = tempfile::tempdir().unwrap();
    build_partition(data.path()).await;
    let dir = data.path().join("orders-0");
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .collect();
    logs.sort();
    assert!(logs.len() >= 2, "the vector spans several segments");
    let length = std::fs::metadata(&logs[0]).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&logs[0])
        .unwrap()
        .set_len(length - 1)
        .unwrap();
    let before = directory_contents(&dir);
    let text = list_fs_partitions(data.path());
    assert!(text.contains("needs repair"), "{text}");
    assert_eq!(
        directory_contents(&dir),
        before,
        "listing wrote to the partition directory"
    );
}

#[test]
fn partitions_of_a_missing_data_directory_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("absent");
    let config = dir.path().join("storage.toml");
    std::fs::write(&config, format!("backend = \"fs\"\ndata_dir = {missing:?}\n")).unwrap();
    let output = mirrorlog(&["partitions", "--config", config.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(!missing.exists());
}

/// Only a build without RocksDB has a backend to miss (with `--features rocks` the test is not built).
#[cfg(not(feature = "rocks"))]
#[test]
fn a_config_naming_a_backend_missing_from_the_build_names_its_feature() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("storage.toml");
    std::fs::write(
        &config,
        format!("backend = \"rocks\"\ndata_dir = {:?}\n", dir.path()),
    )
    .unwrap();
    let output = mirrorlog(&["partitions", "--config", config.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8(output.stderr)
        .unwrap()
        .contains("--features rocks"));
}

/// Producer state's `SnapshotStore` over a storage partition (the way a partition log will connect them).
struct StoredSnapshots<'a> {
    runtime: &'a tokio::runtime::Runtime,
    partition: Box<dyn storage::PartitionStorage>,
}

impl producer_state::SnapshotStore for StoredSnapshots<'_> {
    fn offsets(&self) -> Vec<i64> {
        self.runtime.block_on(self.partition.snapshot_offsets()).unwrap()
    }

    fn read(&self, offset: i64) -> Option<Vec<u8>> {
        self.runtime
            .block_on(self.partition.snapshot_at_or_below(offset))
            .unwrap()
            .filter(|(found, _)| *found == offset)
            .map(|(_, bytes)| bytes.to_vec())
    }

    fn write(&mut self, offset: i64, bytes: Vec<u8>) {
        self.runtime
            .block_on(self.partition.put_snapshot(offset, Bytes::from(bytes)))
            .unwrap();
    }

    fn delete(&mut self, offset: i64) {
        self.runtime
            .block_on(self.partition.delete_snapshot(offset))
            .unwrap();
    }
}

#[test]
fn a_corrupt_snapshot_file_falls_back_to_the_previous_one() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let data = tempfile::tempdir().unwrap();
    let store = FsStorage::open(FsConfig::new(data.path())).unwrap();
    let id = PartitionId::new("orders", 0).unwrap();
    let partition = runtime.block_on(store.create(&id)).unwrap();
    let mut snapshots = StoredSnapshots {
        runtime: &runtime,
        partition,
    };
    let mut live = ProducerStateManager::new(PsmConfig::default());
    for (offset, sequence) in [(0, 0), (1, 1)] {
        let mut builder = record_format::BatchBuilder::new()
            .base_offset(offset)
            .producer(7, 0, sequence);
        builder.add(0, None, Some(b"v"), &[]);
        let batch = builder.build().unwrap();
        live.append_batches(
            [&batch],
            producer_state::AppendOrigin::Client,
            producer_state::TransactionVersion::Unknown,
        )
        .unwrap();
        live.take_snapshot(&mut snapshots).unwrap();
    }
    let latest = data.path().join("orders-0/00000000000000000002.snapshot");
    let bytes = std::fs::read(&latest).unwrap();
    std::fs::write(&latest, &bytes[..bytes.len() / 2]).unwrap();

    let mut recovered = ProducerStateManager::new(PsmConfig::default());
    recovered.truncate_and_reload(&mut snapshots, 0, 2, 0);
    assert_eq!(recovered.map_end_offset(), 1, "loaded the snapshot at offset 1");
    assert_eq!(recovered.producer(7).unwrap().last_seq(), 0);
    assert!(!latest.exists(), "the corrupt snapshot file was deleted");
}

/// A `.txnindex` whose last entry a crash tore: `dump` prints the whole entries, then a `truncated` error at the
/// byte where the torn one starts, and exits 2 (corrupt input) — Kafka's reader would skip it silently.
#[test]
fn dump_of_a_torn_txn_index_reports_the_torn_entry() {
    let dir = tempfile::tempdir().unwrap();
    let entry = record_format::AbortedTxn {
        producer_id: 4,
        first_offset: 10,
        last_offset: 12,
        last_stable_offset: 10,
    };
    let mut bytes = entry.encode().to_vec();
    bytes.extend_from_slice(&entry.encode()[..17]);
    let path = dir.path().join("00000000000000000000.txnindex");
    std::fs::write(&path, &bytes).unwrap();
    let output = mirrorlog(&["dump", "--json", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let lines = json_lines(&output);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["producer_id"], 4);
    assert_eq!(lines[1]["error"]["category"], "truncated");
    assert_eq!(lines[1]["error"]["file_offset"], 34);
}

/// Every file under `dir` with its bytes, recursively (a database directory has subdirectories).
fn tree_contents(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                files.push((path, bytes));
            }
        }
    }
    files.sort();
    files
}

/// `partitions` and `dump` of a key-value store's directory: `partitions` lists what the store holds, `dump`
/// refuses a directory that is not a partition directory, and neither changes a byte.
async fn inspection_leaves_a_database_directory_unchanged(backend: storage_config::Backend) {
    let data = tempfile::tempdir().unwrap();
    let db = data.path().join("db");
    {
        let store = storage_config::StorageConfig::for_backend(backend, &db)
            .open()
            .unwrap();
        let mut partition = store
            .create(&PartitionId::new("orders", 0).unwrap())
            .await
            .unwrap();
        let case = segment_case();
        let bytes = std::fs::read(vectors_dir().join(case["file"].as_str().unwrap())).unwrap();
        let batches: Vec<_> = BatchIter::new(Bytes::from(bytes))
            .map(|found| found.unwrap().batch)
            .collect();
        partition.append(&batches).await.unwrap();
        partition.flush(Durability::Sync).await.unwrap();
    }
    let before = tree_contents(&db);
    let config = data.path().join("storage.toml");
    std::fs::write(&config, format!("backend = \"{backend}\"\ndata_dir = {db:?}\n")).unwrap();
    let output = mirrorlog(&["partitions", "--config", config.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("orders-0: log start 0 log end 48"), "{text}");
    let dump = mirrorlog(&["dump", db.to_str().unwrap()]);
    assert_ne!(dump.status.code(), Some(0), "{dump:?}");
    assert!(
        tree_contents(&db) == before,
        "inspecting the {backend} store changed its directory"
    );
}

#[tokio::test]
async fn partitions_and_dump_leave_a_sled_directory_byte_identical() {
    inspection_leaves_a_database_directory_unchanged(storage_config::Backend::Sled).await;
}

#[cfg(feature = "rocks")]
#[tokio::test]
async fn partitions_and_dump_leave_a_rocks_directory_byte_identical() {
    inspection_leaves_a_database_directory_unchanged(storage_config::Backend::Rocks).await;
}
