//! What running storage calls off the executor costs (ADR 0010): the same 1 KiB appends (no sync) made
//!
//! - directly on the backend's blocking partition (no contract checks, no thread hand-off: the floor);
//! - through the async trait inside a tokio runtime (the contract's checks, and the call handed to the blocking
//!   pool unless the backend says appends are cheap);
//!
//! for the in-memory backend made to look blocking (every append handed off: the pure hand-off cost) and
//! storage-fs (a `write(2)` per append, which runs on the caller's thread).
//! Medians of five runs; the ratio is the async path's time over the direct one.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::path::Path;
use std::time::{Duration, Instant};

use storage::{BlockingStore, MemoryStorage, PartitionId, Storage};
use storage_bench::{batches, median};

const RUNS: usize = 5;
const APPENDS: usize = 20_000;

fn id() -> PartitionId {
    PartitionId::new("offload", 0).unwrap()
}

/// Appends every batch through the blocking backend trait.
fn direct(store: &dyn BlockingStore, work: &[record_format::RecordBatch]) -> Duration {
    let mut partition = store.create(&id()).unwrap();
    let started = Instant::now();
    for batch in work {
        partition.append(std::slice::from_ref(batch)).unwrap();
    }
    started.elapsed()
}

/// Appends every batch through the async trait.
async fn offloaded(store: &dyn Storage, work: &[record_format::RecordBatch]) -> Duration {
    let mut partition = store.create(&id()).await.unwrap();
    let started = Instant::now();
    for batch in work {
        partition.append(std::slice::from_ref(batch)).await.unwrap();
    }
    started.elapsed()
}

/// A memory store that reports that it may block, so the async path hands its calls to the blocking pool.
#[derive(Clone)]
struct HandedOff(MemoryStorage);

impl BlockingStore for HandedOff {
    fn create(&self, id: &PartitionId) -> storage::Result<Box<dyn storage::BlockingPartition>> {
        BlockingStore::create(&self.0, id)
    }
    fn open(
        &self,
        id: &PartitionId,
        mode: storage::OpenMode,
    ) -> storage::Result<Box<dyn storage::BlockingPartition>> {
        BlockingStore::open(&self.0, id, mode)
    }
    fn list(&self) -> storage::Result<Vec<PartitionId>> {
        BlockingStore::list(&self.0)
    }
    fn delete(&self, id: &PartitionId) -> storage::Result<()> {
        BlockingStore::delete(&self.0, id)
    }
}

fn fs(dir: &Path) -> storage_fs::FsStorage {
    storage_fs::FsStorage::open(storage_fs::FsConfig::new(dir)).unwrap()
}

fn report(name: &str, direct: Vec<Duration>, offloaded: Vec<Duration>) {
    let per = |d: Duration| d.as_nanos() as f64 / APPENDS as f64;
    let (direct, offloaded) = (per(median(direct)), per(median(offloaded)));
    println!(
        "| {name} | {direct:.0} ns | {offloaded:.0} ns | +{:.0} ns | {:.2} |",
        offloaded - direct,
        offloaded / direct
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let work = batches(1024, APPENDS * 1024);
    println!("| backend | direct (blocking trait) | async trait | added per append | ratio |");
    println!("|---|---|---|---|---|");
    let (mut ours, mut base) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        base.push(direct(&MemoryStorage::new(), &work));
        let store = HandedOff(MemoryStorage::new());
        ours.push(runtime.block_on(async { offloaded(&store, &work).await }));
    }
    report("memory, handed off (spawn_blocking per call)", base, ours);
    let (mut ours, mut base) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let dir = tempfile::tempdir().unwrap();
        base.push(direct(&fs(dir.path()), &work));
        let dir = tempfile::tempdir().unwrap();
        let store = fs(dir.path());
        ours.push(runtime.block_on(async { offloaded(&store, &work).await }));
    }
    report("fs, 1 KiB, no sync (on the caller's thread)", base, ours);
}
