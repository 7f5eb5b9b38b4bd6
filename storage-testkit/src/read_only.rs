//! Read-only opens change nothing: a store written and closed, then opened for inspection (listing, every
//! partition opened read-only and read to its end, snapshots and metadata read), must leave its directory byte for
//! byte as it was, and must refuse to create, delete or open a partition for writing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use storage::{BlockingStore, Durability, OpenMode, PartitionId, StorageError};

use crate::conformance::run_of_batches;

/// Every regular file under `dir` with its bytes, and every directory (as an empty entry), by relative path.
pub fn directory_contents(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut contents = BTreeMap::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let relative = path.strip_prefix(dir).unwrap().to_owned();
            if entry.file_type().unwrap().is_dir() {
                contents.insert(relative, None);
                pending.push(path);
            } else {
                contents.insert(relative, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    contents
}

/// Fills a store in `dir` with two partitions (batches, a snapshot, metadata, a synced tail and an unsynced one),
/// closes it, then inspects it through `open_read_only` and checks that the directory did not change.
pub fn inspection_leaves_the_store_unchanged<S, W, R>(dir: &Path, open_read_write: W, open_read_only: R)
where
    S: BlockingStore,
    W: Fn(&Path) -> S,
    R: Fn(&Path) -> Result<S, StorageError>,
{
    let ids = [
        PartitionId::new("orders", 0).unwrap(),
        PartitionId::new("orders", 1).unwrap(),
    ];
    {
        let store = open_read_write(dir);
        for (index, id) in ids.iter().enumerate() {
            let mut partition = store.create(id).unwrap();
            partition.append(&run_of_batches(0, 3 + index)).unwrap();
            partition
                .put_snapshot(2, Bytes::from_static(b"snapshot"))
                .unwrap();
            partition.put_metadata("mirror.state", b"mirroring").unwrap();
            partition.flush(Durability::Sync).unwrap();
            let end = partition.log_end_offset();
            partition.append(&run_of_batches(end, 2)).unwrap();
        }
    }
    let before = directory_contents(dir);

    let store = open_read_only(dir).unwrap();
    assert_eq!(store.list().unwrap(), ids.to_vec());
    for id in &ids {
        let partition = store.open(id, OpenMode::ReadOnly).unwrap();
        let mut offset = partition.log_start_offset();
        while offset < partition.log_end_offset() {
            let batches = partition.read(offset, 1 << 20).unwrap();
            let last = batches.last().expect("a read below the log end returns a batch");
            offset = last.last_offset() + 1;
        }
        assert_eq!(offset, partition.log_end_offset());
        assert_eq!(partition.snapshot_offsets().unwrap(), vec![2]);
        assert_eq!(
            partition.metadata("mirror.state").unwrap().as_deref(),
            Some(&b"mirroring"[..])
        );
        assert!(matches!(
            store.open(id, OpenMode::ReadWrite).err(),
            Some(StorageError::ReadOnlyStore { .. })
        ));
    }
    let fresh = PartitionId::new("fresh", 0).unwrap();
    assert!(matches!(
        store.create(&fresh).err(),
        Some(StorageError::ReadOnlyStore { .. })
    ));
    assert!(matches!(
        store.delete(&ids[0]),
        Err(StorageError::ReadOnlyStore { .. })
    ));
    drop(store);

    let after = directory_contents(dir);
    let changed: Vec<&PathBuf> = before
        .keys()
        .chain(after.keys())
        .filter(|path| before.get(*path) != after.get(*path))
        .collect();
    assert!(changed.is_empty(), "a read-only open changed {changed:?}");
}
