//! storage-fs's read-only open over a crafted partition directory: the input is split into the files of one
//! partition (a `.log`, its `.index`, `.timeindex` and `.txnindex`, a second segment, a `.snapshot` and the
//! metadata file); the directory is opened read-only and read whole. Asserted: no panic, and **nothing on disk
//! changes** — the same files with the same bytes afterwards (issue 13: inspection never writes).
#![no_main]

use std::collections::BTreeMap;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use storage::{BlockingStore, OpenMode, PartitionId};

const FILES: [&str; 8] = [
    "00000000000000000000.log",
    "00000000000000000000.index",
    "00000000000000000000.timeindex",
    "00000000000000000000.txnindex",
    "00000000000000000005.log",
    "00000000000000000005.snapshot",
    "mirrorlog.metadata",
    "00000000000000000005.index",
];

fn listing(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let bytes = std::fs::read(&path).unwrap_or_default();
        files.insert(path.display().to_string(), bytes);
    }
    files
}

fuzz_target!(|data: &[u8]| {
    let Ok(root) = tempfile::tempdir() else { return };
    let dir = root.path().join("t-0");
    if std::fs::create_dir(&dir).is_err() {
        return;
    }
    // Split the input at 0xFF 0xFE 0xFD separators into at most eight files.
    let mut rest = data;
    for name in FILES {
        let (part, tail) = match rest.windows(3).position(|w| w == [0xff, 0xfe, 0xfd]) {
            Some(at) => (&rest[..at], &rest[at + 3..]),
            None => (rest, &[][..]),
        };
        if std::fs::write(dir.join(name), part).is_err() {
            return;
        }
        rest = tail;
        if rest.is_empty() {
            break;
        }
    }
    let before = listing(&dir);
    let Ok(store) = storage_fs::FsStorage::open(storage_fs::FsConfig::new(root.path())) else {
        return;
    };
    let Ok(id) = PartitionId::new("t", 0) else { return };
    if let Ok(partition) = store.open(&id, OpenMode::ReadOnly) {
        let mut offset = partition.log_start_offset();
        while offset < partition.log_end_offset() {
            match partition.read(offset, 1 << 20) {
                Ok(batches) => match batches.last() {
                    Some(last) if last.next_offset() > offset => offset = last.next_offset(),
                    _ => break,
                },
                Err(_) => break,
            }
        }
        let _ = partition.snapshot_offsets();
        let _ = partition.aborted_txns(i64::MIN, i64::MAX);
        let _ = partition.metadata("log.high-watermark");
    }
    assert_eq!(listing(&dir), before, "a read-only open changed the partition directory");
});
