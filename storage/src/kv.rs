//! One partition layout for every ordered key-value backend (sled, RocksDB).
//!
//! A backend supplies [`OrderedKv`]: one partition's four key spaces (batches, snapshots, aborted-transaction
//! entries, metadata), atomic multi-key writes, ordered scans and a sync. [`KvPartition`] turns that into a
//! [`BlockingPartition`] with one key layout:
//!
//! ```text
//! Batches   base offset (8 bytes, order-preserving)  → the batch's bytes, as received
//! Snapshots offset                                   → a producer snapshot
//! Aborted   last offset + first offset               → an aborted-transaction entry (Kafka's 34 bytes)
//! Meta      'm' + key                                → a metadata record
//! Meta      "@start" / "@end"                        → log start and end offsets
//! ```
//!
//! Every change is one atomic write. The log end offset is the later of `@end` and the end of the last batch:
//! an append writes only its batches (a one-batch append is a one-key write), while a truncation deletes batches
//! and moves `@end` down in the same write, so both stay right across a crash. Appends are not synced;
//! `flush(Sync)`, snapshots and metadata are.
//!
//! **Appends are written behind** (ADR 0042): an append that keeps the partition's unwritten batches under
//! [`WRITE_BEHIND_BYTES`] is only held in memory — cheap enough to run on the caller's thread, where a database
//! write is not — and every other call writes them first, in the same database write where it writes anything:
//! a flush of either durability (what a writer waits for before it acknowledges), a read, a truncation, a
//! snapshot, metadata, an aborted-transaction entry, or the append that would pass the bound (a full truncation
//! drops them with the rest). So every call but
//! an append sees the database as if each append had been written at once, and a run of small appends costs one
//! database write instead of one each. A process that dies holds its unwritten batches only in memory: they are
//! lost as the unsynced tail of a file is lost to a power cut, and nothing was acknowledged on them. A handle
//! dropped with batches unwritten writes them as it goes. A failed write of held batches poisons the store. A failed sync poisons the whole store (the database's durability is
//! shared by its partitions) until the database is opened again (a new [`StorePoison`]); opening a partition does
//! not clear it.

use std::cell::{Cell, RefCell};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use record_format::txn_index::ABORTED_TXN_LEN;
use record_format::{AbortedTxn, RecordBatch};

use crate::blocking::BlockingPartition;
use crate::error::StorageError;
use crate::id::PartitionId;
use crate::partition::{select_aborted, Durability};
use crate::Result;

const LOG_START: &[u8] = b"@start";
const LOG_END: &[u8] = b"@end";
const METADATA_TAG: u8 = b'm';

/// One of a partition's key spaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Space {
    /// Batches by base offset.
    Batches,
    /// Producer snapshots by offset.
    Snapshots,
    /// Aborted-transaction entries by (last offset, first offset).
    Aborted,
    /// Metadata records and the log bounds.
    Meta,
}

/// One change of an atomic write.
#[derive(Debug, Clone)]
pub enum KvOp {
    /// Sets a key.
    Put(Space, Vec<u8>, Bytes),
    /// Removes every key of the space at or after the first key and before the second (`None`: to the end).
    DeleteRange(Space, Vec<u8>, Option<Vec<u8>>),
}

/// What a scan visitor answers.
pub type Visit<'a> = &'a mut dyn FnMut(&[u8], &[u8]) -> Result<bool>;

/// The keys a scan visits: those of `space` in `[lower, upper)` (`upper: None`: to the end of the space),
/// ascending or, with `reverse`, descending.
#[derive(Debug, Clone, Copy)]
pub struct KeyRange<'a> {
    /// The key space.
    pub space: Space,
    /// The first key (inclusive).
    pub lower: &'a [u8],
    /// The end (exclusive); `None`: the end of the space.
    pub upper: Option<&'a [u8]>,
    /// Descending order.
    pub reverse: bool,
}

impl<'a> KeyRange<'a> {
    /// Ascending from `lower` to the end of the space.
    pub fn from(space: Space, lower: &'a [u8]) -> Self {
        KeyRange {
            space,
            lower,
            upper: None,
            reverse: false,
        }
    }

    /// Descending from just below `upper` (`None`: the last key of the space).
    pub fn down_from(space: Space, upper: Option<&'a [u8]>) -> Self {
        KeyRange {
            space,
            lower: &[],
            upper,
            reverse: true,
        }
    }
}

/// The most bytes of appended batches a partition holds unwritten (see the module docs): 64 one-KiB batches, or
/// one write per 64 KiB. With many partitions each holding up to this much, memory is bounded by the partitions
/// appended to since their last flush or read: a leader's produce flushes before it is acknowledged, so what waits
/// here is a mirror's or a follower's appends between their flushes and reads.
pub const WRITE_BEHIND_BYTES: usize = 64 * 1024;

/// One partition's key spaces in an ordered key-value database.
pub trait OrderedKv: Send + 'static {
    /// The value at `key`.
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Bytes>>;
    /// Visits the keys of `range`, in its order, while `visit` answers true.
    fn scan(&self, range: KeyRange<'_>, visit: Visit<'_>) -> Result<()>;
    /// Applies `ops` atomically; durably when `sync`.
    fn write(&self, ops: Vec<KvOp>, sync: bool) -> Result<()>;
    /// Makes every earlier write durable.
    fn sync(&self) -> Result<()>;
}

/// An offset as a key that sorts like the number (sign bit flipped).
pub fn offset_key(offset: i64) -> [u8; 8] {
    ((offset as u64) ^ (1 << 63)).to_be_bytes()
}

/// The offset a key starts with.
pub fn key_offset(key: &[u8]) -> Option<i64> {
    let raw: [u8; 8] = key.get(..8)?.try_into().ok()?;
    Some((u64::from_be_bytes(raw) ^ (1 << 63)) as i64)
}

/// The smallest key after every key starting with `offset_key(offset)` (an exclusive upper bound for "at or
/// below `offset`").
fn just_after(offset: i64) -> Vec<u8> {
    let mut key = offset_key(offset).to_vec();
    key.extend_from_slice(&[0xff; 9]);
    key
}

fn aborted_key(entry: &AbortedTxn) -> Vec<u8> {
    let mut key = offset_key(entry.last_offset).to_vec();
    key.extend_from_slice(&offset_key(entry.first_offset));
    key
}

fn metadata_key(key: &str) -> Vec<u8> {
    let mut stored = vec![METADATA_TAG];
    stored.extend_from_slice(key.as_bytes());
    stored
}

fn decode_i64(value: Option<Bytes>, what: &str) -> Result<Option<i64>> {
    value
        .map(|value| {
            <[u8; 8]>::try_from(value.as_ref())
                .map(i64::from_be_bytes)
                .map_err(|_| StorageError::Corrupt {
                    what: what.to_owned(),
                    reason: format!("{} bytes, expected 8", value.len()),
                })
        })
        .transpose()
}

fn decode_aborted(value: &[u8]) -> Result<AbortedTxn> {
    let corrupt = |reason: String| StorageError::Corrupt {
        what: "aborted-transaction entry".into(),
        reason,
    };
    let bytes: &[u8; ABORTED_TXN_LEN] = value
        .try_into()
        .map_err(|_| corrupt(format!("{} bytes", value.len())))?;
    AbortedTxn::decode(bytes).map_err(|e| corrupt(e.to_string()))
}

fn decode_batch(key: &[u8], value: &[u8]) -> Result<RecordBatch> {
    RecordBatch::decode(Bytes::copy_from_slice(value)).map_err(|e| corrupt_batch(key, e))
}

fn corrupt_batch(key: &[u8], error: record_format::DecodeError) -> StorageError {
    StorageError::Corrupt {
        what: format!("batch at offset {}", key_offset(key).unwrap_or(-1)),
        reason: error.to_string(),
    }
}

/// The store-wide poison flag every partition of one database shares.
#[derive(Debug, Default)]
pub struct StorePoison(Mutex<Option<String>>);

impl StorePoison {
    fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, reason: Option<String>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = reason;
    }

    /// Poisons the store: for a backend whose own flush, outside a synced `write` or `sync`, failed.
    pub fn poison(&self, reason: String) {
        self.set(Some(reason));
    }
}

/// A partition over an [`OrderedKv`]; see the module docs.
pub struct KvPartition<K: OrderedKv> {
    id: PartitionId,
    kv: K,
    poison: Arc<StorePoison>,
    log_start: i64,
    log_end: i64,
    /// Appended batches not yet written to the database, in offset order (see the module docs). A `RefCell`
    /// because reads write them too; the partition is used by one caller at a time.
    unwritten: RefCell<Unwritten>,
    /// The bytes of the stored batches, once asked ([`BlockingPartition::size_bytes`] scans the batches the first
    /// time; appends, retention and truncations keep it after).
    size: Cell<Option<u64>>,
}

/// Appended batches held in memory, and their bytes.
#[derive(Debug, Default)]
struct Unwritten {
    puts: Vec<KvOp>,
    bytes: usize,
}

impl<K: OrderedKv> std::fmt::Debug for KvPartition<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvPartition")
            .field("id", &self.id)
            .field("log_start", &self.log_start)
            .field("log_end", &self.log_end)
            .finish_non_exhaustive()
    }
}

impl<K: OrderedKv> KvPartition<K> {
    /// True when `kv` holds a partition (its log bounds are written).
    pub fn exists(kv: &K) -> Result<bool> {
        Ok(kv.get(Space::Meta, LOG_END)?.is_some())
    }

    /// Makes an empty partition starting at offset 0 in `kv`.
    pub fn create(id: &PartitionId, kv: K, poison: Arc<StorePoison>) -> Result<Self> {
        kv.write(Self::bounds(0, 0), true)?;
        Ok(KvPartition {
            id: id.clone(),
            kv,
            poison,
            log_start: 0,
            log_end: 0,
            unwritten: RefCell::default(),
            size: Cell::new(None),
        })
    }

    /// Opens the partition in `kv`. The store's poison stays as it is: only reopening the database (a new
    /// [`StorePoison`]) clears it, since a failed sync leaves the database itself in doubt, not one partition.
    pub fn open(id: &PartitionId, kv: K, poison: Arc<StorePoison>) -> Result<Self> {
        let log_start = decode_i64(kv.get(Space::Meta, LOG_START)?, "log start offset")?.unwrap_or(0);
        let bounds_end = decode_i64(kv.get(Space::Meta, LOG_END)?, "log end offset")?.unwrap_or(0);
        let log_end = match last_batch(&kv, None)? {
            Some((_, last_offset)) => bounds_end.max(last_offset.saturating_add(1)),
            None => bounds_end,
        };
        Ok(KvPartition {
            id: id.clone(),
            kv,
            poison,
            log_start,
            log_end,
            unwritten: RefCell::default(),
            size: Cell::new(None),
        })
    }

    fn bounds(start: i64, end: i64) -> Vec<KvOp> {
        vec![
            KvOp::Put(
                Space::Meta,
                LOG_START.to_vec(),
                Bytes::copy_from_slice(&start.to_be_bytes()),
            ),
            KvOp::Put(
                Space::Meta,
                LOG_END.to_vec(),
                Bytes::copy_from_slice(&end.to_be_bytes()),
            ),
        ]
    }

    /// Refuses while the store is poisoned.
    fn check_poison(&self) -> Result<()> {
        match self.poison.get() {
            Some(reason) => Err(StorageError::Poisoned { reason }),
            None => Ok(()),
        }
    }

    /// Writes the unwritten batches, then `ops`, in one write; refusing while the store is poisoned. A failed
    /// synced write poisons the store, and so does any failed write that carried unwritten batches (they were
    /// appended as far as their caller knows).
    fn write(&self, ops: Vec<KvOp>, sync: bool) -> Result<()> {
        self.check_poison()?;
        let mut all = std::mem::take(&mut *self.unwritten.borrow_mut()).puts;
        let carried = !all.is_empty();
        all.extend(ops);
        let result = self.kv.write(all, sync);
        if let (true, Err(error)) = (sync || carried, &result) {
            self.poison.set(Some(error.to_string()));
        }
        result
    }

    /// Writes the unwritten batches, if any (before a call that must see them in the database).
    fn write_unwritten(&self) -> Result<()> {
        if self.unwritten.borrow().puts.is_empty() {
            return Ok(());
        }
        self.write(Vec::new(), false)
    }

    /// The bytes of the stored batches whose keys lie in `[lower, upper)` (`upper: None`: to the end).
    fn stored_bytes(&self, lower: &[u8], upper: Option<&[u8]>) -> Result<u64> {
        let mut total = 0u64;
        self.kv.scan(
            KeyRange {
                upper,
                ..KeyRange::from(Space::Batches, lower)
            },
            &mut |_key, value| {
                total = total.saturating_add(value.len() as u64);
                Ok(true)
            },
        )?;
        Ok(total)
    }

    /// Base and last offset of the last batch starting at or before `offset`.
    fn batch_at_or_before(&self, offset: i64) -> Result<Option<(i64, i64)>> {
        last_batch(&self.kv, Some(&just_after(offset)))
    }
}

impl<K: OrderedKv> Drop for KvPartition<K> {
    /// Writes the batches still held: dropping a handle closes it, and a closed partition holds what was
    /// appended to it (the partition log flushes before it closes, so this normally finds nothing).
    fn drop(&mut self) {
        let unwritten = std::mem::take(self.unwritten.get_mut());
        if unwritten.puts.is_empty() || self.poison.get().is_some() {
            return;
        }
        if let Err(error) = self.kv.write(unwritten.puts, false) {
            self.poison
                .poison(format!("writing appended batches at close failed: {error}"));
        }
    }
}

/// Base and last offset of the last batch below the key `upper` (`None`: of all), read from the stored header in
/// place: its structure is checked, its CRC is checked where its bytes are read (`read` decodes every batch it
/// returns, this one included).
fn last_batch(kv: &impl OrderedKv, upper: Option<&[u8]>) -> Result<Option<(i64, i64)>> {
    let mut found = None;
    kv.scan(KeyRange::down_from(Space::Batches, upper), &mut |key, value| {
        found = Some(RecordBatch::offsets_of(value).map_err(|e| corrupt_batch(key, e))?);
        Ok(false)
    })?;
    Ok(found)
}

impl<K: OrderedKv> BlockingPartition for KvPartition<K> {
    fn id(&self) -> &PartitionId {
        &self.id
    }

    fn log_start_offset(&self) -> i64 {
        self.log_start
    }

    fn log_end_offset(&self) -> i64 {
        self.log_end
    }

    fn append(&mut self, batches: &[RecordBatch]) -> Result<()> {
        let Some(last) = batches.last() else {
            return Ok(());
        };
        let next = last.next_offset();
        self.check_poison()?;
        // The batches alone: the log end they imply is read back from the last batch at open (see the module
        // docs), so that a one-batch append is a one-key write (sled writes out its buffer twice per multi-key
        // batch). Held unwritten while they fit under the bound; written with the ones held before otherwise.
        // The same rule as `append_is_cheap`, from the sum this loop makes anyway.
        let held = {
            let mut unwritten = self.unwritten.borrow_mut();
            for batch in batches {
                unwritten.bytes = unwritten.bytes.saturating_add(batch.size());
                unwritten.puts.push(KvOp::Put(
                    Space::Batches,
                    offset_key(batch.base_offset()).to_vec(),
                    batch.as_bytes().clone(),
                ));
            }
            unwritten.bytes < WRITE_BEHIND_BYTES
        };
        if let Some(size) = self.size.get() {
            let adding = batches.iter().map(|batch| batch.size() as u64).sum::<u64>();
            self.size.set(Some(size.saturating_add(adding)));
        }
        if !held {
            self.write_unwritten()?;
        }
        self.log_end = next;
        Ok(())
    }

    fn appends_are_cheap(&self) -> bool {
        true
    }

    /// True when the append is only held in memory: the held batches stay under [`WRITE_BEHIND_BYTES`].
    fn append_is_cheap(&self, batches: &[RecordBatch]) -> bool {
        let adding = batches
            .iter()
            .map(RecordBatch::size)
            .fold(0usize, usize::saturating_add);
        self.unwritten.borrow().bytes.saturating_add(adding) < WRITE_BEHIND_BYTES
    }

    fn read(&self, from_offset: i64, max_bytes: usize) -> Result<Vec<RecordBatch>> {
        self.write_unwritten()?;
        let start = match self.batch_at_or_before(from_offset)? {
            Some((base, last)) if last >= from_offset => base,
            _ => from_offset,
        };
        let mut out = Vec::new();
        let mut total = 0usize;
        self.kv.scan(
            KeyRange::from(Space::Batches, &offset_key(start)),
            &mut |key, value| {
                if !out.is_empty() && total.saturating_add(value.len()) > max_bytes {
                    return Ok(false);
                }
                total = total.saturating_add(value.len());
                out.push(decode_batch(key, value)?);
                Ok(true)
            },
        )?;
        Ok(out)
    }

    fn size_bytes(&self) -> Result<u64> {
        if let Some(size) = self.size.get() {
            return Ok(size);
        }
        self.write_unwritten()?;
        let size = self.stored_bytes(&[], None)?;
        self.size.set(Some(size));
        Ok(size)
    }

    fn truncate_to(&mut self, offset: i64) -> Result<()> {
        self.write_unwritten()?;
        // Truncations are rare: the size is counted again when next asked.
        self.size.set(None);
        if let Some((base, last)) = self.batch_at_or_before(offset - 1)? {
            if last >= offset {
                return Err(StorageError::NotABatchBoundary {
                    offset,
                    base_offset: base,
                    last_offset: last,
                });
            }
        }
        let mut ops = vec![
            KvOp::DeleteRange(Space::Batches, offset_key(offset).to_vec(), None),
            KvOp::DeleteRange(Space::Aborted, offset_key(offset).to_vec(), None),
        ];
        ops.extend(Self::bounds(self.log_start, offset));
        self.write(ops, false)?;
        self.log_end = offset;
        Ok(())
    }

    fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<()> {
        // The held batches are cut with the rest: dropped, not written and then deleted (a database that turns a
        // range deletion into removals of the keys it already holds, sled, would keep them).
        *self.unwritten.get_mut() = Unwritten::default();
        self.size.set(Some(0));
        let mut ops = vec![
            KvOp::DeleteRange(Space::Batches, Vec::new(), None),
            KvOp::DeleteRange(Space::Aborted, Vec::new(), None),
        ];
        ops.extend(Self::bounds(offset, offset));
        self.write(ops, true)?;
        self.log_start = offset;
        self.log_end = offset;
        Ok(())
    }

    fn replace_batches(&mut self, from: i64, to: i64, batches: &[RecordBatch]) -> Result<()> {
        // Held appends first (a range deletion in sled removes only the keys the database already holds), then one
        // synced write: the old batches of the range go and the new ones come together.
        self.write_unwritten()?;
        let mut ops = vec![KvOp::DeleteRange(
            Space::Batches,
            offset_key(from).to_vec(),
            Some(offset_key(to).to_vec()),
        )];
        ops.extend(batches.iter().map(|batch| {
            KvOp::Put(
                Space::Batches,
                offset_key(batch.base_offset()).to_vec(),
                batch.as_bytes().clone(),
            )
        }));
        self.write(ops, true)?;
        // Counted again when next asked.
        self.size.set(None);
        Ok(())
    }

    fn delete_before(&mut self, offset: i64) -> Result<()> {
        self.write_unwritten()?;
        // Batches wholly below the new start go; one straddling it stays readable.
        let keep_from = match self.batch_at_or_before(offset)? {
            Some((base, last)) if last >= offset => base,
            _ => offset,
        };
        let size_after = match self.size.get() {
            Some(size) => Some(size.saturating_sub(self.stored_bytes(&[], Some(&offset_key(keep_from)))?)),
            None => None,
        };
        let mut ops = vec![KvOp::DeleteRange(
            Space::Batches,
            Vec::new(),
            Some(offset_key(keep_from).to_vec()),
        )];
        ops.extend(Self::bounds(offset, self.log_end));
        self.write(ops, true)?;
        self.log_start = offset;
        self.size.set(size_after);
        Ok(())
    }

    fn flush(&mut self, durability: Durability) -> Result<()> {
        self.check_poison()?;
        self.write_unwritten()?;
        if durability == Durability::Buffered {
            return Ok(());
        }
        self.kv
            .sync()
            .inspect_err(|error| self.poison.set(Some(error.to_string())))
    }

    fn put_snapshot(&mut self, offset: i64, bytes: Bytes) -> Result<()> {
        self.write(
            vec![KvOp::Put(Space::Snapshots, offset_key(offset).to_vec(), bytes)],
            true,
        )
    }

    fn snapshot_at_or_below(&self, offset: i64) -> Result<Option<(i64, Bytes)>> {
        let mut found = None;
        self.kv.scan(
            KeyRange::down_from(Space::Snapshots, Some(&just_after(offset))),
            &mut |key, value| {
                found = key_offset(key).map(|offset| (offset, Bytes::copy_from_slice(value)));
                Ok(false)
            },
        )?;
        Ok(found)
    }

    fn snapshot_offsets(&self) -> Result<Vec<i64>> {
        let mut offsets = Vec::new();
        self.kv
            .scan(KeyRange::from(Space::Snapshots, &[]), &mut |key, _| {
                offsets.extend(key_offset(key));
                Ok(true)
            })?;
        Ok(offsets)
    }

    fn delete_snapshot(&mut self, offset: i64) -> Result<()> {
        let key = offset_key(offset).to_vec();
        let upper = just_after(offset);
        self.write(vec![KvOp::DeleteRange(Space::Snapshots, key, Some(upper))], false)
    }

    fn append_aborted_txn(&mut self, entry: AbortedTxn) -> Result<()> {
        let value = Bytes::copy_from_slice(&entry.encode());
        self.write(vec![KvOp::Put(Space::Aborted, aborted_key(&entry), value)], false)
    }

    fn last_aborted_txn(&self) -> Result<Option<AbortedTxn>> {
        self.write_unwritten()?;
        let mut found = None;
        self.kv
            .scan(KeyRange::down_from(Space::Aborted, None), &mut |_, value| {
                found = Some(decode_aborted(value)?);
                Ok(false)
            })?;
        Ok(found)
    }

    fn aborted_txns(&self, from_offset: i64, upper_bound: i64) -> Result<Vec<AbortedTxn>> {
        self.write_unwritten()?;
        let mut entries = Vec::new();
        self.kv.scan(
            KeyRange::from(Space::Aborted, &offset_key(from_offset)),
            &mut |_, value| {
                entries.push(decode_aborted(value)?);
                Ok(true)
            },
        )?;
        Ok(select_aborted(&entries, from_offset, upper_bound))
    }

    fn put_metadata(&mut self, key: &str, value: &[u8]) -> Result<()> {
        let value = Bytes::copy_from_slice(value);
        self.write(vec![KvOp::Put(Space::Meta, metadata_key(key), value)], true)
    }

    fn metadata(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self
            .kv
            .get(Space::Meta, &metadata_key(key))?
            .map(|value| value.to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;

    /// Keys by (partition and space tag, key).
    type Entries = BTreeMap<(u8, Vec<u8>), Bytes>;

    /// Every partition's keys in one map (a shared database), with syncs that fail while `failing` is set.
    #[derive(Clone, Default)]
    struct MapKv {
        entries: Arc<Mutex<Entries>>,
        failing: Arc<AtomicBool>,
        /// Every write fails while set, synced or not.
        failing_writes: Arc<AtomicBool>,
        /// Writes made.
        writes: Arc<AtomicUsize>,
        prefix: u8,
    }

    impl MapKv {
        fn partition(&self, prefix: u8) -> Self {
            MapKv {
                prefix,
                ..self.clone()
            }
        }

        fn space_key(&self, space: Space, key: &[u8]) -> (u8, Vec<u8>) {
            let space = match space {
                Space::Batches => 0,
                Space::Snapshots => 1,
                Space::Aborted => 2,
                Space::Meta => 3,
            };
            (self.prefix * 4 + space, key.to_vec())
        }

        fn fail(&self) -> Result<()> {
            if self.failing.load(Ordering::SeqCst) {
                return Err(StorageError::io(
                    "sync",
                    std::io::Error::other("injected sync failure"),
                ));
            }
            Ok(())
        }
    }

    impl OrderedKv for MapKv {
        fn get(&self, space: Space, key: &[u8]) -> Result<Option<Bytes>> {
            let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            Ok(entries.get(&self.space_key(space, key)).cloned())
        }

        fn scan(&self, range: KeyRange<'_>, visit: Visit<'_>) -> Result<()> {
            let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            let (tag, lower) = self.space_key(range.space, range.lower);
            let mut keys: Vec<(&Vec<u8>, &Bytes)> = entries
                .iter()
                .filter(|((t, key), _)| {
                    *t == tag && *key >= lower && range.upper.is_none_or(|upper| key.as_slice() < upper)
                })
                .map(|((_, key), value)| (key, value))
                .collect();
            if range.reverse {
                keys.reverse();
            }
            for (key, value) in keys {
                if !visit(key, value)? {
                    break;
                }
            }
            Ok(())
        }

        fn write(&self, ops: Vec<KvOp>, sync: bool) -> Result<()> {
            if sync {
                self.fail()?;
            }
            if self.failing_writes.load(Ordering::SeqCst) {
                return Err(StorageError::io(
                    "write",
                    std::io::Error::other("injected write failure"),
                ));
            }
            self.writes.fetch_add(1, Ordering::SeqCst);
            let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            for op in ops {
                match op {
                    KvOp::Put(space, key, value) => {
                        entries.insert(self.space_key(space, &key), value);
                    }
                    KvOp::DeleteRange(space, lower, upper) => {
                        let (tag, lower) = self.space_key(space, &lower);
                        entries.retain(|(t, key), _| {
                            !(*t == tag && *key >= lower && upper.as_ref().is_none_or(|upper| key < upper))
                        });
                    }
                }
            }
            Ok(())
        }

        fn sync(&self) -> Result<()> {
            self.fail()
        }
    }

    fn id(partition: u32) -> PartitionId {
        PartitionId::new("orders", partition).unwrap()
    }

    /// A one-record batch of about `size` bytes at `offset`.
    fn batch_at(offset: i64, size: usize) -> RecordBatch {
        let mut builder = record_format::BatchBuilder::new().base_offset(offset);
        builder.add(1_700_000_000_000, None, Some(&vec![7u8; size]), &[]);
        builder.build().unwrap()
    }

    fn kilobyte_batches(from: i64, count: i64) -> Vec<RecordBatch> {
        (from..from + count)
            .map(|offset| batch_at(offset, 1000))
            .collect()
    }

    #[test]
    fn appends_under_the_bound_are_held_in_memory_and_written_together_by_a_buffered_flush() {
        let database = MapKv::default();
        let mut partition = KvPartition::create(&id(0), database.clone(), Arc::default()).unwrap();
        let written_at_create = database.writes.load(Ordering::SeqCst);
        for batch in kilobyte_batches(0, 10) {
            assert!(partition.append_is_cheap(std::slice::from_ref(&batch)));
            partition.append(&[batch]).unwrap();
        }
        assert_eq!(partition.log_end_offset(), 10);
        assert_eq!(
            database.writes.load(Ordering::SeqCst),
            written_at_create,
            "nothing written yet"
        );
        partition.flush(Durability::Buffered).unwrap();
        assert_eq!(
            database.writes.load(Ordering::SeqCst),
            written_at_create + 1,
            "one write for ten appends"
        );
        let reopened = KvPartition::open(&id(0), database.partition(0), Arc::default()).unwrap();
        assert_eq!(reopened.log_end_offset(), 10);
    }

    #[test]
    fn the_append_that_reaches_the_bound_writes_every_held_batch() {
        let database = MapKv::default();
        let mut partition = KvPartition::create(&id(0), database.clone(), Arc::default()).unwrap();
        let written_at_create = database.writes.load(Ordering::SeqCst);
        let mut offset = 0;
        while partition.append_is_cheap(&[batch_at(offset, 1000)]) {
            partition.append(&[batch_at(offset, 1000)]).unwrap();
            offset += 1;
        }
        assert!(offset > 1 && offset <= (WRITE_BEHIND_BYTES / 1000) as i64);
        assert_eq!(database.writes.load(Ordering::SeqCst), written_at_create);
        partition.append(&[batch_at(offset, 1000)]).unwrap();
        assert_eq!(database.writes.load(Ordering::SeqCst), written_at_create + 1);
        let reopened = KvPartition::open(&id(0), database.partition(0), Arc::default()).unwrap();
        assert_eq!(reopened.log_end_offset(), offset + 1);
    }

    #[test]
    fn every_other_call_sees_held_appends_as_written() {
        let database = MapKv::default();
        let mut partition = KvPartition::create(&id(0), database.clone(), Arc::default()).unwrap();
        partition.append(&kilobyte_batches(0, 5)).unwrap();
        let read = partition.read(0, usize::MAX).unwrap();
        assert_eq!(
            read.iter().map(RecordBatch::base_offset).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 4]
        );
        partition.append(&kilobyte_batches(5, 3)).unwrap();
        // A truncation inside the held batches cuts them as it cuts written ones.
        partition.truncate_to(6).unwrap();
        assert_eq!(partition.log_end_offset(), 6);
        partition.append(&kilobyte_batches(6, 2)).unwrap();
        // Metadata written after held appends never claims offsets the database does not hold.
        partition.put_metadata("last-mirrored-offset", b"7").unwrap();
        let reopened = KvPartition::open(&id(0), database.partition(0), Arc::default()).unwrap();
        assert_eq!(reopened.log_end_offset(), 8);
    }

    #[test]
    fn a_dropped_handle_writes_its_held_appends() {
        let database = MapKv::default();
        let mut partition = KvPartition::create(&id(0), database.clone(), Arc::default()).unwrap();
        partition.append(&kilobyte_batches(0, 4)).unwrap();
        drop(partition);
        let reopened = KvPartition::open(&id(0), database.partition(0), Arc::default()).unwrap();
        assert_eq!(reopened.log_end_offset(), 4);
    }

    #[test]
    fn a_failed_write_of_held_appends_poisons_the_store() {
        let database = MapKv::default();
        let poison = Arc::new(StorePoison::default());
        let mut partition = KvPartition::create(&id(0), database.clone(), poison.clone()).unwrap();
        partition.append(&kilobyte_batches(0, 3)).unwrap();
        database.failing_writes.store(true, Ordering::SeqCst);
        assert!(partition.read(0, usize::MAX).is_err());
        database.failing_writes.store(false, Ordering::SeqCst);
        assert!(matches!(
            partition.append(&kilobyte_batches(3, 1)),
            Err(StorageError::Poisoned { .. })
        ));
        assert!(matches!(
            partition.flush(Durability::Buffered),
            Err(StorageError::Poisoned { .. })
        ));
    }

    #[test]
    fn a_failed_sync_poisons_every_partition_until_the_database_is_reopened() {
        let database = MapKv::default();
        let poison = Arc::new(StorePoison::default());
        let mut first = KvPartition::create(&id(0), database.partition(0), poison.clone()).unwrap();
        KvPartition::create(&id(1), database.partition(1), poison.clone()).unwrap();

        database.failing.store(true, Ordering::SeqCst);
        assert!(first.flush(Durability::Sync).is_err());
        database.failing.store(false, Ordering::SeqCst);

        // Opening another partition of the same database does not clear the poison: its writes are refused.
        let mut second = KvPartition::open(&id(1), database.partition(1), poison.clone()).unwrap();
        assert!(matches!(
            second.flush(Durability::Sync),
            Err(StorageError::Poisoned { .. })
        ));
        assert!(matches!(
            second.put_metadata("key", b"value"),
            Err(StorageError::Poisoned { .. })
        ));
        // Nor does opening the partition that failed.
        let mut reopened = KvPartition::open(&id(0), database.partition(0), poison).unwrap();
        assert!(matches!(
            reopened.flush(Durability::Sync),
            Err(StorageError::Poisoned { .. })
        ));

        // Reopening the database (a fresh poison flag) is what clears it.
        let fresh = Arc::new(StorePoison::default());
        let mut after_reopen = KvPartition::open(&id(1), database.partition(1), fresh).unwrap();
        after_reopen.flush(Durability::Sync).unwrap();
    }
}
