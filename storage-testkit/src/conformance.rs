//! The conformance suite every storage backend runs.
//!
//! A backend crate implements [`Backend`] for a factory of fresh stores (usually a [`DirBackend`]) and expands
//! [`conformance_suite!`](crate::conformance_suite) in its tests; every check below becomes a named
//! `#[tokio::test]` on a multi-threaded runtime, so backend calls really run on the blocking pool. The checks are the contract of
//! [`storage::PartitionStorage`]: ordering and byte identity, offset growth, truncation at every boundary, reads
//! across batch (and segment) boundaries, retention, snapshots, the aborted-transaction index, metadata, reopening,
//! and poisoning after a failed sync.
//! Every store the suite opens is wrapped in a [`FaultyStore`], so the poisoning check runs on every backend.

use async_trait::async_trait;
use bytes::Bytes;
use record_format::{AbortedTxn, BatchBuilder, RecordBatch};

use storage::{
    BlockingStore, Durability, MemoryStorage, PartitionId, PartitionStorage, Storage, StorageError,
};

use crate::faulty_store::{FaultyStore, StoreFaults};

/// A source of stores for the suite.
#[async_trait]
pub trait Backend: Send + Sync {
    /// Opens the store. Called again to "reopen": the new store must see everything made durable before.
    async fn store(&self) -> Box<dyn Storage>;

    /// The switches of the stores this backend opens.
    fn faults(&self) -> &StoreFaults;
}

/// The in-memory reference backend: every `store()` is a clone sharing the same partitions, so "reopening" sees
/// everything written before (an in-process restart, not a power loss).
#[derive(Debug, Clone)]
pub struct MemoryBackend(pub FaultyStore<MemoryStorage>);

impl Default for MemoryBackend {
    fn default() -> Self {
        MemoryBackend(FaultyStore::new(MemoryStorage::new()))
    }
}

#[async_trait]
impl Backend for MemoryBackend {
    async fn store(&self) -> Box<dyn Storage> {
        Box::new(self.0.clone())
    }

    fn faults(&self) -> &StoreFaults {
        self.0.faults()
    }
}

/// A backend whose stores live in one directory and are reopened from it; at most one store is open at a time
/// (embedded databases lock their directory). `guard` keeps the directory alive (a `TempDir`).
pub struct DirBackend<S> {
    dir: std::path::PathBuf,
    _guard: Box<dyn std::any::Any + Send + Sync>,
    open: fn(&std::path::Path) -> S,
    faults: std::sync::Arc<StoreFaults>,
    last: std::sync::Mutex<Option<FaultyStore<S>>>,
}

impl<S> DirBackend<S> {
    /// A backend over `dir`, opening stores with `open`.
    pub fn new(
        dir: std::path::PathBuf,
        guard: impl std::any::Any + Send + Sync,
        open: fn(&std::path::Path) -> S,
    ) -> Self {
        DirBackend {
            dir,
            _guard: Box::new(guard),
            open,
            faults: std::sync::Arc::default(),
            last: std::sync::Mutex::new(None),
        }
    }

    /// A backend over a fresh temporary directory.
    pub fn temporary(open: fn(&std::path::Path) -> S) -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self::new(dir.path().to_owned(), dir, open)
    }
}

#[async_trait]
impl<S: BlockingStore + Clone> Backend for DirBackend<S> {
    async fn store(&self) -> Box<dyn Storage> {
        self.last.lock().unwrap().take();
        let store = FaultyStore::with_faults((self.open)(&self.dir), self.faults.clone());
        *self.last.lock().unwrap() = Some(store.clone());
        Box::new(store)
    }

    fn faults(&self) -> &StoreFaults {
        &self.faults
    }
}

/// A data batch of `records` records with `value_size`-byte values at `base_offset`.
pub fn batch(base_offset: i64, records: u32, value_size: usize) -> RecordBatch {
    let mut builder = BatchBuilder::new()
        .base_offset(base_offset)
        .producer(7, 0, base_offset as i32);
    for i in 0..records {
        let value = vec![(base_offset as u8).wrapping_add(i as u8); value_size];
        builder.add(1_700_000_000_000 + base_offset, Some(b"key"), Some(&value), &[]);
    }
    builder.build().unwrap()
}

/// Batches back to back from offset `start`: batch `i` holds `1 + i % 3` records of `100 + 37 * i` bytes.
pub fn run_of_batches(start: i64, count: usize) -> Vec<RecordBatch> {
    let mut batches = Vec::with_capacity(count);
    let mut offset = start;
    for i in 0..count {
        let records = 1 + (i % 3) as u32;
        let found = batch(offset, records, 100 + 37 * (i % 50));
        offset = found.next_offset();
        batches.push(found);
    }
    batches
}

fn pid() -> PartitionId {
    PartitionId::new("conformance", 0).unwrap()
}

async fn fresh(backend: &dyn Backend) -> (Box<dyn Storage>, Box<dyn PartitionStorage>) {
    let store = backend.store().await;
    let partition = store.create(&pid()).await.unwrap();
    (store, partition)
}

async fn read_all(partition: &dyn PartitionStorage) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let mut offset = partition.log_start_offset();
    while offset < partition.log_end_offset() {
        let batches = partition.read(offset, 64 * 1024).await.unwrap();
        assert!(
            !batches.is_empty(),
            "read at {offset} below the log end returned nothing"
        );
        offset = batches.last().unwrap().next_offset();
        out.extend(batches);
    }
    out
}

fn assert_same(actual: &[RecordBatch], expected: &[RecordBatch]) {
    assert_eq!(actual.len(), expected.len(), "batch count");
    for (a, e) in actual.iter().zip(expected) {
        assert_eq!(a.as_bytes(), e.as_bytes(), "batch at {} differs", e.base_offset());
    }
}

fn aborted(producer_id: i64, first_offset: i64, last_offset: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id,
        first_offset,
        last_offset,
        last_stable_offset: first_offset,
    }
}

/// Batches come back in order, byte for byte, and the offsets track them.
pub async fn appends_are_read_back_in_order_and_byte_identical(backend: &dyn Backend) {
    let (_store, mut partition) = fresh(backend).await;
    assert_eq!((partition.log_start_offset(), partition.log_end_offset()), (0, 0));
    let batches = run_of_batches(0, 40);
    partition.append(&batches[..10]).await.unwrap();
    for batch in &batches[10..] {
        partition.append(std::slice::from_ref(batch)).await.unwrap();
    }
    assert_eq!(partition.log_end_offset(), batches.last().unwrap().next_offset());
    assert_same(&read_all(partition.as_ref()).await, &batches);
}

/// An append whose offsets do not grow is refused whole.
pub async fn appends_with_offsets_that_do_not_grow_are_refused_whole(backend: &dyn Backend) {
    let (_store, mut partition) = fresh(backend).await;
    let batches = run_of_batches(0, 3);
    partition.append(&batches).await.unwrap();
    let end = partition.log_end_offset();
    let overlapping = batch(end - 1, 1, 10);
    assert!(matches!(
        partition.append(&[overlapping]).await,
        Err(StorageError::NonMonotonicOffsets { .. })
    ));
    let good = batch(end, 2, 10);
    let backwards = batch(end + 1, 1, 10);
    assert!(
        partition.append(&[good, backwards]).await.is_err(),
        "second batch inside the first"
    );
    assert_eq!(
        partition.log_end_offset(),
        end,
        "nothing of a refused append is written"
    );
    assert_same(&read_all(partition.as_ref()).await, &batches);
}

/// Gaps between batches are kept (a compacted source log).
pub async fn offsets_may_skip_as_in_a_compacted_log(backend: &dyn Backend) {
    let (_store, mut partition) = fresh(backend).await;
    let first = batch(0, 2, 10);
    let after_gap = batch(10, 1, 10);
    partition
        .append(&[first.clone(), after_gap.clone()])
        .await
        .unwrap();
    assert_eq!(partition.log_end_offset(), 11);
    assert_same(
        &partition.read(5, 1 << 20).await.unwrap(),
        std::slice::from_ref(&after_gap),
    );
    assert_same(&partition.read(1, 1 << 20).await.unwrap(), &[first, after_gap]);
}

/// A read starts at the batch holding the offset, stops at the byte budget, and returns at least one batch.
pub async fn reads_return_whole_batches_within_the_budget(backend: &dyn Backend) {
    let (_store, mut partition) = fresh(backend).await;
    let batches = run_of_batches(0, 30);
    partition.append(&batches).await.unwrap();
    for (index, batch) in batches.iter().enumerate() {
        for offset in batch.base_offset()..=batch.last_offset() {
            let one = partition.read(offset, 1).await.unwrap();
            assert_same(&one, std::slice::from_ref(batch));
            let budget = batch.size() + batches.get(index + 1).map_or(0, RecordBatch::size);
            let two = partition.read(offset, budget).await.unwrap();
            assert_same(&two, &batches[index..(index + 2).min(batches.len())]);
        }
    }
    assert!(partition
        .read(partition.log_end_offset(), 1 << 20)
        .await
        .unwrap()
        .is_empty());
}

/// A range read with the buffers it lies in is the same range a plain read gives, and appended elsewhere with
/// those buffers it is stored byte for byte — including a batch changed after the read, which no longer lies in
/// the buffers (a backend that writes the buffers' bytes must write the batches' own).
pub async fn a_range_appended_with_the_buffers_it_was_read_into_is_stored_byte_for_byte(
    backend: &dyn Backend,
) {
    let (store, mut source) = fresh(backend).await;
    let batches = run_of_batches(0, 30);
    source.append(&batches[..10]).await.unwrap();
    source.append(&batches[10..]).await.unwrap();
    let (read, buffers) = source.read_with_buffers(0, 1 << 20).await.unwrap();
    assert_same(&read, &source.read(0, 1 << 20).await.unwrap());
    assert_same(&read, &batches);

    let mut copy = store
        .create(&PartitionId::new("conformance", 1).unwrap())
        .await
        .unwrap();
    copy.append_with_buffers(&read, &buffers).await.unwrap();
    assert_eq!(copy.log_end_offset(), source.log_end_offset());
    assert_same(&read_all(copy.as_ref()).await, &batches);

    let mut changed = read.clone();
    changed[3].set_partition_leader_epoch(77);
    let mut edited = store
        .create(&PartitionId::new("conformance", 2).unwrap())
        .await
        .unwrap();
    edited.append_with_buffers(&changed, &buffers).await.unwrap();
    assert_same(&read_all(edited.as_ref()).await, &changed);
    assert!(
        matches!(
            edited.append_with_buffers(&read, &buffers).await,
            Err(StorageError::NonMonotonicOffsets { .. })
        ),
        "the contract's checks apply"
    );
}

/// Offsets outside `[log_start, log_end]` are errors.
pub async fn reads_outside_the_log_are_errors(backend: &dyn Backend) {
    let (_store, mut partition) = fresh(backend).await;
    partition.append(&run_of_batches(0, 5)).await.unwrap();
    let end = partition.log_end_offset();
    for offset in [-1, end + 1, i64::MAX] {
        assert!(matches!(
            partition.read(offset, 100).await,
            Err(StorageError::OffsetOutOfRange { .. })
        ));
    }
}

/// Truncating at every batch boundary leaves exactly the batches before it, cuts the aborted index there, and
/// the log continues from the new end.
pub async fn truncation_at_every_batch_boundary(backend: &dyn Backend) {
    let batches = run_of_batches(0, 12);
    let boundaries: Vec<i64> = batches.iter().map(RecordBatch::base_offset).collect();
    for (kept, &boundary) in boundaries.iter().enumerate() {
        let store = backend.store().await;
        let id = PartitionId::new("truncation", kept as u32).unwrap();
        let mut partition = store.create(&id).await.unwrap();
        partition.append(&batches).await.unwrap();
        for batch in &batches {
            partition
                .append_aborted_txn(aborted(1, batch.base_offset(), batch.last_offset()))
                .await
                .unwrap();
        }
        partition.truncate_to(boundary).await.unwrap();
        assert_eq!(partition.log_end_offset(), boundary);
        assert_same(&read_all(partition.as_ref()).await, &batches[..kept]);
        let index = partition.aborted_txns(0, i64::MAX).await.unwrap();
        assert!(
            index.iter().all(|entry| entry.last_offset < boundary),
            "index cut at {boundary}"
        );
        assert_eq!(index.len(), kept);
        let again = run_of_batches(boundary, 2);
        partition.append(&again).await.unwrap();
        assert_same(
            &read_all(partition.as_ref()).await,
            &[&batches[..kept], &again[..]].concat(),
        );
    }
}

/// Truncating inside a batch is refused; at or past the end it does nothing.
pub async fn truncation_inside_a_batch_is_refused(backend: &dyn Backend) {
    let (_store, mut partition) = fresh(backend).await;
    let batches = run_of_batches(0, 3);
    partition.append(&batches).await.unwrap();
    let multi = batches
        .iter()
        .find(|b| b.last_offset() > b.base_offset())
        .unwrap();
    assert!(matches!(
        partition.truncate_to(multi.base_offset() + 1).await,
        Err(StorageError::NotABatchBoundary { .. })
    ));
    let end = partition.log_end_offset();
    partition.truncate_to(end + 10).await.unwrap();
    assert_eq!(partition.log_end_offset(), end);
    assert_same(&read_all(partition.as_ref()).await, &batches);
}

/// A full truncation restarts the log at any offset.
pub async fn truncate_fully_restarts_the_log(backend: &dyn Backend) {
    let (_store, mut partition) = fresh(backend).await;
    partition.append(&run_of_batches(0, 5)).await.unwrap();
    partition.append_aborted_txn(aborted(1, 0, 2)).await.unwrap();
    partition.truncate_fully_and_start_at(1_000).await.unwrap();
    assert_eq!(
        (partition.log_start_offset(), partition.log_end_offset()),
        (1_000, 1_000)
    );
    assert!(partition.aborted_txns(0, i64::MAX).await.unwrap().is_empty());
    let batches = run_of_batches(1_000, 3);
    partition.append(&batches).await.unwrap();
    assert_same(&read_all(partition.as_ref()).await, &batches);
}

/// Retention moves the log start; reads below it fail; it cannot pass the log end.
pub async fn delete_before_moves_the_log_start(backend: &dyn Backend) {
    let (_store, mut partition) = fresh(backend).await;
    let batches = run_of_batches(0, 20);
    partition.append(&batches).await.unwrap();
    let cut = batches[7].base_offset() + 1;
    partition.delete_before(cut).await.unwrap();
    assert_eq!(partition.log_start_offset(), cut);
    assert!(partition.read(cut - 1, 100).await.is_err());
    assert_same(&read_all(partition.as_ref()).await[..1], &batches[7..8]);
    partition.delete_before(0).await.unwrap();
    assert_eq!(
        partition.log_start_offset(),
        cut,
        "the log start never moves back"
    );
    let end = partition.log_end_offset();
    assert!(partition.delete_before(end + 1).await.is_err());
    partition.delete_before(end).await.unwrap();
    assert!(read_all(partition.as_ref()).await.is_empty());
}

/// Every retention unit from `from`, oldest first, paged as retention pages them.
async fn all_units(partition: &dyn PartitionStorage, from: i64) -> Vec<storage::SegmentSummary> {
    let mut units = Vec::new();
    let mut offset = from;
    while offset < partition.log_end_offset() {
        let page = partition.segments(offset, 3).await.unwrap();
        assert!(!page.is_empty(), "no unit holds {offset}, below the log end");
        offset = page.last().unwrap().next_offset;
        units.extend(page);
    }
    units
}

fn bytes_of(batches: &[RecordBatch]) -> u64 {
    batches.iter().map(|batch| batch.size() as u64).sum()
}

/// The retention units cover the log oldest first, each with the bytes and the largest timestamp of the batches
/// it holds, and the log's size follows appends, retention, truncation and a reopen.
pub async fn retention_units_cover_the_log_and_its_size_follows_every_change(backend: &dyn Backend) {
    let (store, mut partition) = fresh(backend).await;
    let batches = run_of_batches(0, 60);
    partition.append(&batches).await.unwrap();
    assert_eq!(partition.size_bytes().await.unwrap(), bytes_of(&batches));
    let units = all_units(partition.as_ref(), 0).await;
    let mut previous_end = 0;
    for unit in &units {
        assert_eq!(unit.base_offset, previous_end, "units are contiguous: {units:?}");
        let inside: Vec<RecordBatch> = batches
            .iter()
            .filter(|batch| (unit.base_offset..unit.next_offset).contains(&batch.base_offset()))
            .cloned()
            .collect();
        assert_eq!(unit.size_bytes, bytes_of(&inside), "{unit:?}");
        let newest = inside.iter().map(RecordBatch::max_timestamp).max().unwrap_or(-1);
        assert_eq!(unit.max_timestamp, newest, "{unit:?}");
        previous_end = unit.next_offset;
    }
    assert_eq!(previous_end, partition.log_end_offset());
    // The unit holding an offset is listed first.
    let middle = batches[30].base_offset() + 1;
    let holding = partition.segments(middle, 1).await.unwrap();
    assert!(holding[0].base_offset <= middle && middle < holding[0].next_offset);

    // Retention at a unit boundary removes exactly the units below it.
    let cut = units[units.len() / 3].next_offset;
    partition.delete_before(cut).await.unwrap();
    let kept: Vec<RecordBatch> = batches
        .iter()
        .filter(|b| b.base_offset() >= cut)
        .cloned()
        .collect();
    assert_eq!(partition.size_bytes().await.unwrap(), bytes_of(&kept));
    assert_eq!(all_units(partition.as_ref(), cut).await[0].base_offset, cut);

    let more = run_of_batches(partition.log_end_offset(), 5);
    partition.append(&more).await.unwrap();
    let end = more[2].base_offset();
    partition.truncate_to(end).await.unwrap();
    let mut expected = bytes_of(&kept) + bytes_of(&more[..2]);
    assert_eq!(partition.size_bytes().await.unwrap(), expected);

    // A roll starts a new unit at the log end; a second roll with nothing appended adds no empty one.
    let rolled_at = partition.log_end_offset();
    partition.roll_segment().await.unwrap();
    partition.roll_segment().await.unwrap();
    let one = run_of_batches(rolled_at, 1);
    partition.append(&one).await.unwrap();
    let last_units = partition.segments(rolled_at, 10).await.unwrap();
    assert_eq!(last_units.len(), 1, "{last_units:?}");
    assert_eq!(
        (last_units[0].base_offset, last_units[0].next_offset),
        (rolled_at, one[0].next_offset())
    );
    assert!(
        partition.segments(rolled_at - 1, 1).await.unwrap()[0].next_offset <= rolled_at,
        "the unit before the roll ends there"
    );
    expected += bytes_of(&one);

    partition.flush(Durability::Sync).await.unwrap();
    drop(partition);
    let mut partition = store.open(&pid()).await.unwrap();
    assert_eq!(partition.size_bytes().await.unwrap(), expected, "after a reopen");

    // Retention up to the log end leaves no bytes, and no unit, behind.
    let end = partition.log_end_offset();
    partition.delete_before(end).await.unwrap();
    expected = 0;
    assert_eq!(partition.size_bytes().await.unwrap(), expected);
    assert!(partition.segments(end, 10).await.unwrap().is_empty());
    let after = run_of_batches(end, 2);
    partition.append(&after).await.unwrap();
    assert_eq!(partition.size_bytes().await.unwrap(), bytes_of(&after));
}

/// A log cleaner's rewrite of a range of whole units: the batches kept (one of them with fewer records) are read
/// back at their own offsets, a read from a removed offset gets the next batch kept, the size follows, and all of
/// it survives a reopen; a rewrite outside the log, or with a batch outside its range, is refused.
pub async fn a_cleaners_rewrite_keeps_offsets_and_survives_a_reopen(backend: &dyn Backend) {
    let (store, mut partition) = fresh(backend).await;
    let batches = run_of_batches(0, 60);
    partition.append(&batches).await.unwrap();
    partition.roll_segment().await.unwrap();
    let tail = run_of_batches(partition.log_end_offset(), 3);
    partition.append(&tail).await.unwrap();
    let units = all_units(partition.as_ref(), 0).await;
    // From the first unit to a unit boundary below the active unit, about two thirds in.
    let to = units[units.len() * 2 / 3].base_offset;
    let (from, end) = (units[0].base_offset, partition.log_end_offset());
    let range: Vec<&RecordBatch> = batches.iter().filter(|b| b.base_offset() < to).collect();
    let mut kept: Vec<RecordBatch> = range.iter().step_by(2).map(|b| (*b).clone()).collect();
    let several = kept.iter().position(|b| b.record_count() > 1).unwrap();
    let record_format::Filtered::Rebuilt(fewer) =
        record_format::filter_batch(&kept[several], |record| record.offset_delta == 0, false, None).unwrap()
    else {
        panic!("one record kept");
    };
    kept[several] = fewer;

    let too_far = run_of_batches(to, 1);
    for (rewrite_from, rewrite_to, with) in [(from, to, &too_far), (to, from, &kept), (from, end + 1, &kept)]
    {
        assert!(
            matches!(
                partition.replace_batches(rewrite_from, rewrite_to, with).await,
                Err(StorageError::InvalidRewrite { .. })
            ),
            "[{rewrite_from}, {rewrite_to})"
        );
    }
    partition.replace_batches(from, to, &kept).await.unwrap();
    let rest: Vec<RecordBatch> = batches
        .iter()
        .filter(|b| b.base_offset() >= to)
        .chain(&tail)
        .cloned()
        .collect();
    let expected: Vec<RecordBatch> = kept.iter().chain(&rest).cloned().collect();
    assert_same(&read_all(partition.as_ref()).await, &expected);
    assert_eq!(
        (partition.log_start_offset(), partition.log_end_offset()),
        (0, end)
    );
    let removed = range[1].base_offset();
    let read = partition.read(removed, 1).await.unwrap();
    assert_eq!(
        read[0].base_offset(),
        range[2].base_offset(),
        "a removed offset reads the next batch kept"
    );
    assert_eq!(partition.size_bytes().await.unwrap(), bytes_of(&expected));

    partition.flush(Durability::Sync).await.unwrap();
    drop(partition);
    let partition = store.open(&pid()).await.unwrap();
    assert_same(&read_all(partition.as_ref()).await, &expected);
    assert_eq!(
        partition.size_bytes().await.unwrap(),
        bytes_of(&expected),
        "after a reopen"
    );
}

/// Snapshots are stored by offset and found at or below an offset.
pub async fn snapshots_round_trip(backend: &dyn Backend) {
    let (_store, mut partition) = fresh(backend).await;
    assert_eq!(partition.snapshot_at_or_below(i64::MAX).await.unwrap(), None);
    for offset in [5, 10, 42] {
        partition
            .put_snapshot(offset, Bytes::from(format!("snapshot-{offset}")))
            .await
            .unwrap();
    }
    assert_eq!(partition.snapshot_offsets().await.unwrap(), vec![5, 10, 42]);
    let (offset, bytes) = partition.snapshot_at_or_below(41).await.unwrap().unwrap();
    assert_eq!((offset, &bytes[..]), (10, &b"snapshot-10"[..]));
    assert_eq!(partition.snapshot_at_or_below(4).await.unwrap(), None);
    partition
        .put_snapshot(10, Bytes::from_static(b"replaced"))
        .await
        .unwrap();
    assert_eq!(
        partition.snapshot_at_or_below(10).await.unwrap().unwrap().1,
        Bytes::from_static(b"replaced")
    );
    partition.delete_snapshot(10).await.unwrap();
    partition.delete_snapshot(11).await.unwrap();
    assert_eq!(partition.snapshot_offsets().await.unwrap(), vec![5, 42]);
}

/// Aborted transactions must grow by (last offset, first offset) and are selected for a fetch range.
pub async fn aborted_txn_index_collects_and_orders(backend: &dyn Backend) {
    let (_store, mut partition) = fresh(backend).await;
    partition.append(&run_of_batches(0, 30)).await.unwrap();
    for (producer, first, last) in [(0, 0, 10), (1, 5, 15), (2, 18, 35), (3, 32, 50)] {
        partition
            .append_aborted_txn(aborted(producer, first, last))
            .await
            .unwrap();
    }
    assert!(matches!(
        partition.append_aborted_txn(aborted(9, 40, 49)).await,
        Err(StorageError::AbortedTxnOutOfOrder { .. })
    ));
    assert!(matches!(
        partition.append_aborted_txn(aborted(9, 32, 50)).await,
        Err(StorageError::AbortedTxnOutOfOrder { .. })
    ));
    // A barrier aborts several transactions at its offset: same last offset, growing first offsets.
    for (producer, first) in [(4, 40), (5, 45)] {
        partition
            .append_aborted_txn(aborted(producer, first, 52))
            .await
            .unwrap();
    }
    let ids = |entries: Vec<AbortedTxn>| entries.iter().map(|e| e.producer_id).collect::<Vec<_>>();
    assert_eq!(
        ids(partition.aborted_txns(0, 100).await.unwrap()),
        vec![0, 1, 2, 3, 4, 5]
    );
    assert_eq!(ids(partition.aborted_txns(51, 100).await.unwrap()), vec![4, 5]);
    assert_eq!(ids(partition.aborted_txns(11, 35).await.unwrap()), vec![1, 2, 3]);
    assert_eq!(ids(partition.aborted_txns(20, 32).await.unwrap()), vec![2]);
}

/// Metadata records round-trip, are replaced whole, and keys are checked.
pub async fn metadata_round_trips(backend: &dyn Backend) {
    let (_store, mut partition) = fresh(backend).await;
    assert_eq!(partition.metadata("mirror-state").await.unwrap(), None);
    partition
        .put_metadata("mirror-state", b"MIRRORING")
        .await
        .unwrap();
    partition
        .put_metadata("high-watermark", &42i64.to_be_bytes())
        .await
        .unwrap();
    partition.put_metadata("mirror-state", b"STOPPED").await.unwrap();
    assert_eq!(
        partition.metadata("mirror-state").await.unwrap().as_deref(),
        Some(&b"STOPPED"[..])
    );
    assert_eq!(
        partition.metadata("high-watermark").await.unwrap(),
        Some(42i64.to_be_bytes().to_vec())
    );
    assert!(partition.put_metadata("../escape", b"x").await.is_err());
    assert!(partition.put_metadata("", b"x").await.is_err());
}

/// Partitions are created once, opened, listed and deleted.
pub async fn partitions_are_created_listed_and_deleted(backend: &dyn Backend) {
    let store = backend.store().await;
    let a = PartitionId::new("alpha", 0).unwrap();
    let b = PartitionId::new("alpha", 1).unwrap();
    assert!(matches!(store.open(&a).await, Err(StorageError::NotFound(_))));
    drop(store.create(&a).await.unwrap());
    drop(store.create(&b).await.unwrap());
    assert!(matches!(
        store.create(&a).await,
        Err(StorageError::AlreadyExists(_))
    ));
    assert_eq!(store.list().await.unwrap(), vec![a.clone(), b.clone()]);
    store.delete(&a).await.unwrap();
    assert_eq!(store.list().await.unwrap(), vec![b]);
    assert!(matches!(store.open(&a).await, Err(StorageError::NotFound(_))));
}

/// What was made durable survives closing and reopening the store.
pub async fn reopen_after_close_keeps_durable_data(backend: &dyn Backend) {
    let batches = run_of_batches(0, 50);
    {
        let (store, mut partition) = fresh(backend).await;
        partition.append(&batches).await.unwrap();
        partition.append_aborted_txn(aborted(3, 4, 9)).await.unwrap();
        partition
            .put_snapshot(9, Bytes::from_static(b"state"))
            .await
            .unwrap();
        partition
            .put_metadata("last-mirrored-offset", b"77")
            .await
            .unwrap();
        partition.delete_before(batches[2].base_offset()).await.unwrap();
        partition.flush(Durability::Sync).await.unwrap();
        drop(partition);
        drop(store);
    }
    let store = backend.store().await;
    let partition = store.open(&pid()).await.unwrap();
    assert_eq!(partition.log_end_offset(), batches.last().unwrap().next_offset());
    assert_eq!(partition.log_start_offset(), batches[2].base_offset());
    assert_same(&read_all(partition.as_ref()).await, &batches[2..]);
    assert_eq!(
        partition.aborted_txns(0, i64::MAX).await.unwrap(),
        vec![aborted(3, 4, 9)]
    );
    assert_eq!(partition.snapshot_offsets().await.unwrap(), vec![9]);
    assert_eq!(
        partition
            .metadata("last-mirrored-offset")
            .await
            .unwrap()
            .as_deref(),
        Some(&b"77"[..])
    );
}

/// The log end read back after a reopen is the one the log had, whichever change moved it last: appends alone,
/// a truncation, a truncation followed by appends that end below the end stored before, a full restart.
pub async fn reopen_finds_the_log_end_every_change_left(backend: &dyn Backend) {
    let batches = run_of_batches(0, 10);
    let shorter = run_of_batches(batches[3].base_offset(), 2);
    assert!(shorter.last().unwrap().next_offset() < batches[6].base_offset());
    let (mut store, mut partition) = fresh(backend).await;
    for step in 0..4 {
        let (what, expected_end) = match step {
            0 => {
                partition.append(&batches).await.unwrap();
                ("appends", batches.last().unwrap().next_offset())
            }
            1 => {
                partition.truncate_to(batches[6].base_offset()).await.unwrap();
                ("a truncation", batches[6].base_offset())
            }
            2 => {
                partition.truncate_to(batches[3].base_offset()).await.unwrap();
                partition.append(&shorter).await.unwrap();
                (
                    "appends after a truncation",
                    shorter.last().unwrap().next_offset(),
                )
            }
            _ => {
                partition.truncate_fully_and_start_at(1_000).await.unwrap();
                ("a full restart", 1_000)
            }
        };
        partition.flush(Durability::Sync).await.unwrap();
        drop(partition);
        drop(store);
        store = backend.store().await;
        partition = store.open(&pid()).await.unwrap();
        assert_eq!(
            partition.log_end_offset(),
            expected_end,
            "log end after {what} and a reopen"
        );
    }
    assert_eq!(partition.log_start_offset(), 1_000);
    let more = run_of_batches(1_000, 3);
    partition.append(&more).await.unwrap();
    assert_same(&read_all(partition.as_ref()).await, &more);
}

/// A full truncation right after appends (nothing flushed or read in between) leaves none of them: neither in
/// reads nor after a reopen, and the appends that follow are the whole log.
pub async fn full_truncation_right_after_appends_leaves_none_of_them(backend: &dyn Backend) {
    let (store, mut partition) = fresh(backend).await;
    partition.append(&run_of_batches(0, 6)).await.unwrap();
    partition.truncate_fully_and_start_at(0).await.unwrap();
    let again = vec![batch(0, 2, 40)];
    partition.append(&again).await.unwrap();
    partition.flush(Durability::Sync).await.unwrap();
    assert_same(&read_all(partition.as_ref()).await, &again);
    drop(partition);
    let reopened = store.open(&pid()).await.unwrap();
    assert_eq!(reopened.log_end_offset(), 2);
    assert_same(&read_all(reopened.as_ref()).await, &again);
}

/// After a failed sync every write is refused until the partition is reopened.
pub async fn failed_sync_poisons_the_partition(backend: &dyn Backend) {
    let (store, mut partition) = fresh(backend).await;
    partition.append(&run_of_batches(0, 3)).await.unwrap();
    backend.faults().fail_next_sync(&pid());
    assert!(partition.flush(Durability::Sync).await.is_err());
    let end = partition.log_end_offset();
    let poisoned = |result: storage::Result<()>| matches!(result, Err(StorageError::Poisoned { .. }));
    assert!(poisoned(partition.append(&[batch(end, 1, 10)]).await));
    assert!(poisoned(partition.put_metadata("k", b"v").await));
    assert!(poisoned(partition.put_snapshot(1, Bytes::new()).await));
    assert!(poisoned(partition.truncate_to(0).await));
    assert!(poisoned(partition.flush(Durability::Sync).await));
    assert!(partition.read(0, 100).await.is_ok(), "reads still work");
    drop(partition);
    let mut reopened = store.open(&pid()).await.unwrap();
    reopened
        .append(&[batch(reopened.log_end_offset(), 1, 10)])
        .await
        .unwrap();
}

/// A read-only open sees what is durable, repairs nothing and refuses every write.
pub async fn read_only_open_sees_durable_data_and_refuses_writes(backend: &dyn Backend) {
    let (store, mut partition) = fresh(backend).await;
    let batches = run_of_batches(0, 5);
    partition.append(&batches).await.unwrap();
    partition.put_metadata("k", b"v").await.unwrap();
    partition
        .put_snapshot(3, Bytes::from_static(b"snap"))
        .await
        .unwrap();
    partition.flush(Durability::Sync).await.unwrap();
    drop(partition);
    drop(store);
    let store = backend.store().await;
    let mut read_only = store.open_read_only(&pid()).await.unwrap();
    assert_same(&read_all(&*read_only).await, &batches);
    assert_eq!(read_only.metadata("k").await.unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(read_only.snapshot_offsets().await.unwrap(), vec![3]);
    let end = read_only.log_end_offset();
    let refused = |result: storage::Result<()>| matches!(result, Err(StorageError::ReadOnly { .. }));
    assert!(refused(read_only.append(&[batch(end, 1, 10)]).await));
    assert!(refused(read_only.put_metadata("k", b"w").await));
    assert!(refused(read_only.put_snapshot(end, Bytes::new()).await));
    assert!(refused(read_only.delete_snapshot(3).await));
    assert!(refused(read_only.truncate_to(0).await));
    assert!(refused(read_only.delete_before(1).await));
    assert!(refused(read_only.flush(Durability::Sync).await));
    assert_eq!(read_only.log_end_offset(), end);
    drop(read_only);
    let reopened = store.open(&pid()).await.unwrap();
    assert_same(&read_all(&*reopened).await, &batches);
    assert_eq!(reopened.metadata("k").await.unwrap().as_deref(), Some(&b"v"[..]));
}

/// Syncs held on two partitions (as many as the runtime has workers) do not hold up appends to a third: storage
/// calls run off the executor's threads. Were they on them, the held syncs would take both workers and the appends
/// could only finish once the hold gave up ([`crate::faulty_store::HOLD_LIMIT`]), which the store counts.
pub async fn a_slow_sync_does_not_stall_other_partitions(backend: &dyn Backend) {
    let store = backend.store().await;
    let mut fast = store.create(&pid()).await.unwrap();
    let slow_ids = [
        PartitionId::new("slow", 0).unwrap(),
        PartitionId::new("slow", 1).unwrap(),
    ];
    let mut slow_syncs = Vec::new();
    let release = backend.faults().release_on_drop();
    for id in &slow_ids {
        let mut partition = store.create(id).await.unwrap();
        partition.append(&run_of_batches(0, 2)).await.unwrap();
        backend.faults().hold_syncs(id);
        slow_syncs.push(tokio::spawn(async move {
            partition.flush(Durability::Sync).await.unwrap();
        }));
    }
    // Both held syncs have begun (each would hold a worker thread if storage ran on it).
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        backend.faults().held_syncs_begun(2),
    )
    .await
    .expect("the two held syncs began");
    let appends = tokio::spawn(async move {
        for _ in 0..20 {
            let end = fast.log_end_offset();
            fast.append(&[batch(end, 1, 100)]).await.unwrap();
        }
        fast.log_end_offset()
    });
    let end = appends.await.unwrap();
    assert_eq!(end, 20);
    drop(release);
    for sync in slow_syncs {
        sync.await.unwrap();
    }
    assert_eq!(
        backend.faults().held_syncs_expired(),
        0,
        "the appends finished only once the held syncs gave up: a storage call held an executor thread"
    );
}

/// Expands to one `#[tokio::test]` per conformance check, for the backend `$backend` (an expression evaluated
/// afresh for each test, implementing [`Backend`]).
#[macro_export]
macro_rules! conformance_suite {
    ($backend:expr) => {
        $crate::conformance_suite!(@tests $backend;
            appends_are_read_back_in_order_and_byte_identical,
            appends_with_offsets_that_do_not_grow_are_refused_whole,
            offsets_may_skip_as_in_a_compacted_log,
            reads_return_whole_batches_within_the_budget,
            a_range_appended_with_the_buffers_it_was_read_into_is_stored_byte_for_byte,
            reads_outside_the_log_are_errors,
            truncation_at_every_batch_boundary,
            truncation_inside_a_batch_is_refused,
            truncate_fully_restarts_the_log,
            delete_before_moves_the_log_start,
            retention_units_cover_the_log_and_its_size_follows_every_change,
            a_cleaners_rewrite_keeps_offsets_and_survives_a_reopen,
            snapshots_round_trip,
            aborted_txn_index_collects_and_orders,
            metadata_round_trips,
            partitions_are_created_listed_and_deleted,
            reopen_after_close_keeps_durable_data,
            reopen_finds_the_log_end_every_change_left,
            full_truncation_right_after_appends_leaves_none_of_them,
            failed_sync_poisons_the_partition,
            read_only_open_sees_durable_data_and_refuses_writes,
            a_slow_sync_does_not_stall_other_partitions,
        );
    };
    (@tests $backend:expr; $($check:ident,)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let backend = $backend;
                $crate::conformance::$check(&backend).await;
            }
        )*
    };
}
