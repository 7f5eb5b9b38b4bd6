//! Compaction (`cleanup.policy=compact`): Kafka's log cleaner rules for one partition (ADR 0055).
//!
//! A pass cleans the log from its start up to the **first uncleanable offset**: the high watermark, the first
//! unstable offset (an open transaction's records are not decided yet), the active unit (the last segment, or the
//! last batch where units are batches) and the first unit holding a record younger than `min.compaction.lag.ms`.
//! It runs only when the **dirty** part — written since the last pass, whose end is the checkpoint
//! `log.cleaner-offset` — is more than `min.cleanable.dirty.ratio` of the cleanable bytes, or its oldest unit passed
//! `max.compaction.lag.ms`. A log nobody writes to is not cleaned again, even once a tombstone's delete horizon
//! has passed: Kafka's cleaner chooses its logs by the same two tests.
//!
//! 1. **Offset map**: each key's latest offset in the dirty part (records of aborted transactions and control
//!    batches left out), bounded by `offset_map_bytes`: when the keys do not fit, the pass stops at the unit
//!    where they overflowed, as Kafka's cleaner does with its dedupe buffer.
//! 2. **Rewrite** of every unit from the log start to there ([`record_format::filter_batch`]): a record stays when
//!    no later record has its key; a tombstone (null value) also goes once the delete horizon of its batch has
//!    passed — the horizon the first pass that kept the tombstone wrote into the batch, that pass's time plus
//!    `delete.retention.ms` (KIP-534, as Kafka's cleaner: attribute bit 6, the base timestamp holding it); a record without a key goes (Kafka refuses them on compacted topics); the records of
//!    aborted transactions go. Control batches — commit and abort markers, and `MIRROR_PID_RESET` barriers — all
//!    stay (ADR 0055: Kafka removes a marker once its transaction's records are gone; keeping it costs a few bytes
//!    and keeps every rule that reads markers exact). The last batch of each producer the producer state knows
//!    stays, empty if none of its records does, so idempotence survives. Offsets never change.
//! 3. The checkpoint moves to the end of the pass.
//!
//! Producer state, snapshots and the aborted-transaction index are not touched: every producer's last batch is
//! still there, and a snapshot stands for offsets that did not move.
//!
//! **A pass in three steps**, so that the partition is not held while it reads: [`crate::PartitionLog::plan_clean`]
//! notes where the log stands (quick, with the log), [`CleanPlan::prepare`] reads through a
//! [`storage::PartitionReader`] and rewrites in memory — the heavy part, without the log: produce and fetch go on
//! — and [`crate::PartitionLog::apply_clean`] writes the rewrite, with the log again, unless the log was cut back
//! or its start moved meanwhile. A pass rewrites at most [`PASS_REWRITE_BYTES`] of kept batches; the next pass
//! goes on from its end.

use std::collections::{BTreeSet, HashMap};

use record_format::{filter_batch, AbortedTxn, Filtered, RecordBatch};
use storage::PartitionReader;

use crate::error::LogError;
use crate::Result;

/// The most bytes of kept batches one pass holds before it writes them (its memory bound besides the map).
pub const PASS_REWRITE_BYTES: usize = 64 << 20;
/// Rewritten bytes gathered into one storage rewrite, one step of writing a pass (a unit always whole).
const GROUP_BYTES: usize = 1 << 20;
/// The bytes of units before cleaning after which a group closes: installing a group costs per unit it replaces
/// (storage-fs renames each segment's files and syncs the directory), so a group of units that kept little is
/// bounded too — eight 1 MiB segments; a unit larger than this (one of Kafka's default 1 GiB segments) is a group
/// of its own.
const GROUP_READ_BYTES: u64 = 8 << 20;
/// Units asked from storage per page.
const UNITS_PER_PAGE: usize = 256;
/// Bytes read per call.
const READ_BYTES: usize = 4 << 20;

/// What the topic's configs ask of compaction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionPolicy {
    /// `min.cleanable.dirty.ratio`: the dirty share of the cleanable bytes a pass waits for.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: how long a record stays uncompacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: once the oldest dirty unit's newest record is older than this, a pass runs
    /// whatever the dirty ratio (Kafka measures from the unit's first record; the newest is what a unit
    /// summary carries, so the deadline here can come later, by at most the unit's time span).
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long a tombstone stays once written.
    pub delete_retention_ms: i64,
    /// The most bytes the offset map may hold (keys and their offsets; Kafka's `log.cleaner.dedupe.buffer.size`).
    pub offset_map_bytes: usize,
}

impl Default for CompactionPolicy {
    /// Kafka's defaults (the dedupe buffer: 128 MiB shared by its cleaner threads; here 64 MiB per pass).
    fn default() -> Self {
        CompactionPolicy {
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 86_400_000,
            offset_map_bytes: 64 << 20,
        }
    }
}

/// What a pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cleaned {
    /// The offsets rewritten: `[from, to)`.
    pub from: i64,
    /// The end of the pass (the new checkpoint).
    pub to: i64,
    /// Bytes of the range before the pass.
    pub bytes_before: u64,
    /// Bytes of the range after it.
    pub bytes_after: u64,
    /// Records removed.
    pub records_removed: u64,
    /// Batches removed whole.
    pub batches_removed: u64,
    /// Distinct keys of the dirty part (the offset map's entries).
    pub keys: u64,
}

/// Bytes one key costs the offset map besides its own (its offset, the map's entry and allocation).
pub(crate) const MAP_ENTRY_OVERHEAD: usize = 48;

/// The offset map: each key's latest offset in the dirty part.
#[derive(Debug, Default)]
pub(crate) struct OffsetMap {
    latest: HashMap<Vec<u8>, i64>,
    bytes: usize,
}

impl OffsetMap {
    /// Records `batch`'s keys; false (nothing recorded from it) when they would pass `limit` bytes.
    pub(crate) fn add(
        &mut self,
        batch: &RecordBatch,
        limit: usize,
    ) -> Result<bool, record_format::DecodeError> {
        let records = batch.records()?;
        let mut fresh = 0usize;
        let mut keys = Vec::new();
        for record in records.iter() {
            let record = record?;
            if let Some(key) = record.key {
                if !self.latest.contains_key(key) {
                    fresh = fresh.saturating_add(key.len() + MAP_ENTRY_OVERHEAD);
                }
                keys.push((key.to_vec(), record.offset));
            }
        }
        if self.bytes.saturating_add(fresh) > limit {
            return Ok(false);
        }
        self.bytes = self.bytes.saturating_add(fresh);
        for (key, offset) in keys {
            self.latest.insert(key, offset);
        }
        Ok(true)
    }

    /// True when a later record has `key`.
    pub(crate) fn superseded(&self, key: &[u8], offset: i64) -> bool {
        self.latest.get(key).is_some_and(|&latest| latest > offset)
    }

    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.latest.len()
    }
}

/// Whether `batch` holds records of an aborted transaction, by the aborted-transaction index.
pub(crate) fn aborted_txn(batch: &RecordBatch, aborted: &[AbortedTxn]) -> bool {
    batch.is_transactional()
        && !batch.is_control()
        && aborted.iter().any(|entry| {
            entry.producer_id == batch.producer_id()
                && entry.first_offset <= batch.base_offset()
                && batch.last_offset() < entry.last_offset
        })
}

/// The cleaner's rules for one batch (module docs): what becomes of it.
pub(crate) fn clean_batch(
    batch: &RecordBatch,
    map: &OffsetMap,
    aborted_txns: &[AbortedTxn],
    last_batches: &BTreeSet<(i64, i64)>,
    now_ms: i64,
    delete_retention_ms: i64,
) -> Result<(Filtered, u64), record_format::FilterError> {
    if batch.is_control() {
        return Ok((Filtered::Unchanged, 0));
    }
    let retain_empty =
        batch.producer_id() >= 0 && last_batches.contains(&(batch.producer_id(), batch.last_offset()));
    let drop_all = aborted_txn(batch, aborted_txns);
    // Kafka keeps a tombstone while its batch has no horizon yet, or the horizon is still ahead.
    let tombstones_expired = batch.delete_horizon_ms().is_some_and(|horizon| now_ms >= horizon);
    let mut removed = 0u64;
    let filtered = filter_batch(
        batch,
        |record| {
            let keep = !drop_all
                && record.key.is_some_and(|key| !map.superseded(key, record.offset))
                && !(record.value.is_none() && tombstones_expired);
            if !keep {
                removed += 1;
            }
            keep
        },
        retain_empty,
        Some(now_ms.saturating_add(delete_retention_ms)),
    )?;
    Ok((filtered, removed))
}

/// Where the log stood when a pass began ([`crate::PartitionLog::plan_clean`]).
#[derive(Debug, Clone)]
pub struct CleanPlan {
    pub(crate) policy: CompactionPolicy,
    pub(crate) now_ms: i64,
    pub(crate) log_start: i64,
    pub(crate) log_end: i64,
    /// Where the last pass ended.
    pub(crate) checkpoint: i64,
    /// The stable bound: the high watermark, or the first unstable offset below it.
    pub(crate) upper: i64,
    /// The base of the active unit.
    pub(crate) active_base: i64,
    /// (producer id, last offset) of each producer's last batch.
    pub(crate) last_batches: BTreeSet<(i64, i64)>,
    /// The log's truncation count then: if it moved, the pass is dropped.
    pub(crate) truncations: u64,
}

/// A pass's rewrite, ready to be written ([`crate::PartitionLog::apply_clean`]).
#[derive(Debug)]
pub struct CleanWork {
    pub(crate) plan: CleanPlan,
    /// Each a range of whole units and its kept batches, in offset order; written one per step.
    pub(crate) rewrites: std::collections::VecDeque<(i64, i64, Vec<RecordBatch>)>,
    /// The next group, already written beside the log by [`Self::stage_next`]: the next step installs it.
    pub(crate) staged: Option<storage::StagedRewrite>,
    pub(crate) cleaned: Cleaned,
}

impl CleanWork {
    /// Writes the next group's rewrite beside the log through `reader` ([`storage::PartitionReader::
    /// stage_rewrite`]), without the log: the slow part of a step (storage-fs writes and syncs the new segment
    /// files here), so that the next [`crate::PartitionLog::apply_clean_step`], with the log, only installs it.
    /// Nothing to do when a group is staged already or none is left. A step whose log moved meanwhile drops the
    /// staged group (storage-fs's files go at its next open).
    pub async fn stage_next(&mut self, reader: &dyn PartitionReader) -> Result<()> {
        if self.staged.is_some() {
            return Ok(());
        }
        if let Some((from, to, batches)) = self.rewrites.pop_front() {
            self.staged = Some(reader.stage_rewrite(from, to, batches).await?);
        }
        Ok(())
    }
}

/// What one step of writing a pass did ([`crate::PartitionLog::apply_clean_step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanStep {
    /// A group of units was rewritten; more remain.
    More,
    /// Every group was written and the checkpoint moved: the pass is done.
    Done(Cleaned),
    /// The log was cut back, or its start moved, since the plan: the rest of the pass is dropped.
    Dropped,
}

fn failed(what: &str, offset: i64, error: impl std::fmt::Display) -> LogError {
    LogError::Compaction {
        reason: format!("{what} at offset {offset}: {error}"),
    }
}

impl CleanPlan {
    /// The heavy step of a pass, through `reader` (the log need not be held): which units are cleanable and
    /// whether enough of them is dirty; the offset map; every unit from the log start rewritten, up to
    /// [`PASS_REWRITE_BYTES`] kept. `None` when no pass is due.
    pub async fn prepare(self, reader: &dyn PartitionReader) -> Result<Option<CleanWork>> {
        let policy = self.policy;
        let young_after = self.now_ms.saturating_sub(policy.min_compaction_lag_ms);
        // The cleanable units: from the log start's to the first that is active, above the stable offsets or young.
        let (mut from, mut to, mut total, mut dirty) = (None, self.log_start, 0u64, 0u64);
        let mut oldest_dirty: Option<i64> = None;
        let mut at = self.log_start;
        // A page starts with the unit holding `at`: the last one of the page before when its tail was compacted
        // away (its next offset below the next unit's base). It is not counted twice.
        let mut seen = i64::MIN;
        'walk: while at < self.log_end {
            let page = reader.segments(at, UNITS_PER_PAGE).await?;
            let Some(last) = page.last().map(|unit| unit.next_offset) else {
                break;
            };
            for unit in &page {
                if unit.base_offset <= seen {
                    continue;
                }
                seen = unit.base_offset;
                if unit.base_offset >= self.active_base
                    || unit.next_offset > self.upper
                    || unit.max_timestamp > young_after
                {
                    to = unit.base_offset;
                    break 'walk;
                }
                from.get_or_insert(unit.base_offset);
                total = total.saturating_add(unit.size_bytes);
                if unit.next_offset > self.checkpoint {
                    dirty = dirty.saturating_add(unit.size_bytes);
                    oldest_dirty.get_or_insert(unit.max_timestamp);
                }
                to = unit.next_offset;
            }
            if last <= at {
                break;
            }
            at = last;
        }
        let Some(from) = from else { return Ok(None) };
        let overdue = oldest_dirty.is_some_and(|newest| {
            i128::from(self.now_ms) - i128::from(newest) > i128::from(policy.max_compaction_lag_ms)
        });
        // Strictly more than the ratio, as Kafka's LogCleanerManager: a log exactly half dirty waits at 0.5.
        let dirty_enough = (dirty as f64) > policy.min_cleanable_dirty_ratio * total as f64;
        if to <= self.checkpoint || total == 0 || !(dirty_enough || overdue) {
            return Ok(None);
        }
        let aborted = reader.aborted_txns(from, to).await?;
        // The offset map over the dirty part; where the keys overflow it, the pass ends at that unit.
        let mut map = OffsetMap::default();
        let mut offset = self.checkpoint.max(from);
        'map: while offset < to {
            let batches = reader.read(offset, READ_BYTES).await?;
            let Some(next) = batches.last().map(RecordBatch::next_offset) else {
                break;
            };
            for batch in batches.iter().filter(|batch| batch.base_offset() < to) {
                if batch.is_control() || aborted_txn(batch, &aborted) {
                    continue;
                }
                let fits = map
                    .add(batch, policy.offset_map_bytes)
                    .map_err(|error| failed("batch", batch.base_offset(), error))?;
                if !fits {
                    let holder = reader.segments(batch.base_offset(), 1).await?;
                    to = holder
                        .first()
                        .map_or(batch.base_offset(), |unit| unit.base_offset);
                    if to <= self.checkpoint {
                        return Err(LogError::Compaction {
                            reason: format!(
                                "the offset map ({} bytes) cannot hold the keys of the unit at offset {to}",
                                policy.offset_map_bytes
                            ),
                        });
                    }
                    break 'map;
                }
            }
            offset = next;
        }
        let mut cleaned = Cleaned {
            from,
            to,
            keys: map.len() as u64,
            ..Cleaned::default()
        };
        // The rewrite, unit by unit, gathered in groups of whole units; a pass stops at a unit boundary once it
        // holds PASS_REWRITE_BYTES (the checkpoint then says where the next one goes on).
        let mut rewrites = std::collections::VecDeque::new();
        let (mut group, mut group_from, mut group_bytes, mut group_changed) =
            (Vec::new(), from, 0usize, false);
        let mut group_read = 0u64;
        let mut held = 0usize;
        let mut at = from;
        // As in the walk above: a unit a page repeats is not rewritten twice.
        let mut seen = i64::MIN;
        'rewrite: while at < to {
            let units = reader.segments(at, UNITS_PER_PAGE).await?;
            let Some(last) = units.last().map(|unit| unit.next_offset) else {
                break;
            };
            for unit in units.iter().filter(|unit| unit.base_offset < to) {
                if unit.base_offset <= seen {
                    continue;
                }
                seen = unit.base_offset;
                if group_bytes >= GROUP_BYTES || group_read >= GROUP_READ_BYTES || held >= PASS_REWRITE_BYTES
                {
                    if group_changed {
                        rewrites.push_back((group_from, unit.base_offset, std::mem::take(&mut group)));
                    }
                    (group, group_from, group_bytes, group_changed) =
                        (Vec::new(), unit.base_offset, 0, false);
                    group_read = 0;
                    if held >= PASS_REWRITE_BYTES {
                        cleaned.to = unit.base_offset;
                        break 'rewrite;
                    }
                }
                let mut offset = unit.base_offset.max(self.log_start);
                // Reads stop at the unit's end: a read asks no more than the bytes left of the unit (at least one
                // batch comes back whatever the bound), so a log of small units is read once, not a READ_BYTES
                // window per unit.
                let mut unit_left = unit.size_bytes;
                while offset < unit.next_offset {
                    let want = usize::try_from(unit_left)
                        .unwrap_or(usize::MAX)
                        .clamp(1, READ_BYTES);
                    let batches = reader.read(offset, want).await?;
                    let Some(next) = batches.last().map(RecordBatch::next_offset) else {
                        break;
                    };
                    for batch in batches
                        .iter()
                        .filter(|batch| batch.base_offset() < unit.next_offset)
                    {
                        cleaned.bytes_before += batch.size() as u64;
                        group_read += batch.size() as u64;
                        unit_left = unit_left.saturating_sub(batch.size() as u64);
                        let (filtered, removed) = clean_batch(
                            batch,
                            &map,
                            &aborted,
                            &self.last_batches,
                            self.now_ms,
                            policy.delete_retention_ms,
                        )
                        .map_err(|error| failed("batch", batch.base_offset(), error))?;
                        cleaned.records_removed += removed;
                        let kept = match filtered {
                            Filtered::Unchanged => Some(batch.clone()),
                            Filtered::Rebuilt(rebuilt) => {
                                group_changed = true;
                                Some(rebuilt)
                            }
                            Filtered::Removed => {
                                group_changed = true;
                                cleaned.batches_removed += 1;
                                None
                            }
                        };
                        if let Some(kept) = kept {
                            cleaned.bytes_after += kept.size() as u64;
                            group_bytes += kept.size();
                            held += kept.size();
                            group.push(kept);
                        }
                    }
                    offset = next;
                }
            }
            if last <= at {
                break;
            }
            at = last;
        }
        if group_changed && group_from < cleaned.to {
            rewrites.push_back((group_from, cleaned.to, group));
        }
        Ok(Some(CleanWork {
            plan: self,
            rewrites,
            staged: None,
            cleaned,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use record_format::BatchBuilder;

    fn batch(base: i64, pid: i64, records: &[(Option<&str>, Option<&str>)]) -> RecordBatch {
        let mut builder = BatchBuilder::new().base_offset(base);
        if pid >= 0 {
            builder = builder.producer(pid, 0, base as i32);
        }
        for (key, value) in records {
            builder.add(1_000, key.map(str::as_bytes), value.map(str::as_bytes), &[]);
        }
        builder.build().unwrap()
    }

    fn keys(filtered: &Filtered, original: &RecordBatch) -> Vec<i64> {
        let batch = match filtered {
            Filtered::Unchanged => original,
            Filtered::Rebuilt(batch) => batch,
            Filtered::Removed => return Vec::new(),
        };
        batch
            .records()
            .unwrap()
            .iter()
            .map(|r| r.unwrap().offset)
            .collect()
    }

    #[test]
    fn the_latest_record_of_each_key_stays_keyless_records_go_and_a_tombstone_goes_at_its_delete_horizon() {
        let first = batch(
            0,
            -1,
            &[(Some("a"), Some("1")), (Some("b"), Some("1")), (None, Some("x"))],
        );
        let second = batch(3, -1, &[(Some("a"), Some("2")), (Some("c"), None)]);
        let mut map = OffsetMap::default();
        assert!(map.add(&first, usize::MAX).unwrap());
        assert!(map.add(&second, usize::MAX).unwrap());
        assert_eq!(map.len(), 3);
        let none = BTreeSet::new();
        let (cleaned, removed) = clean_batch(&first, &map, &[], &none, 0, 1_000).unwrap();
        assert_eq!(
            (keys(&cleaned, &first), removed),
            (vec![1], 2),
            "a superseded, the keyless record gone"
        );
        // Whatever its records' time, a tombstone stays at the first pass that sees it, which writes the horizon.
        let (marked, _) = clean_batch(&second, &map, &[], &none, 5_000, 1_000).unwrap();
        assert_eq!(
            keys(&marked, &second),
            [3, 4],
            "a tombstone without a horizon stays"
        );
        let Filtered::Rebuilt(marked) = marked else {
            panic!("rewritten with its horizon")
        };
        assert_eq!(marked.delete_horizon_ms(), Some(6_000));
        let (kept, _) = clean_batch(&marked, &map, &[], &none, 5_999, 1_000).unwrap();
        assert_eq!(kept, Filtered::Unchanged, "before the horizon it stays");
        let (expired, _) = clean_batch(&marked, &map, &[], &none, 6_000, 1_000).unwrap();
        assert_eq!(keys(&expired, &marked), [3], "at the horizon it goes");
    }

    #[test]
    fn aborted_records_go_but_a_producers_last_batch_stays_empty() {
        let mut data = BatchBuilder::new()
            .base_offset(10)
            .producer(7, 0, 0)
            .transactional(true);
        data.add(1_000, Some(b"k"), Some(b"v"), &[]);
        let data = data.build().unwrap();
        let entry = AbortedTxn {
            producer_id: 7,
            first_offset: 10,
            last_offset: 11,
            last_stable_offset: 10,
        };
        let map = OffsetMap::default();
        let (gone, removed) = clean_batch(&data, &map, &[entry], &BTreeSet::new(), 0, 0).unwrap();
        assert_eq!((gone, removed), (Filtered::Removed, 1));
        let last = BTreeSet::from([(7, 10)]);
        let (empty, _) = clean_batch(&data, &map, &[entry], &last, 0, 0).unwrap();
        let Filtered::Rebuilt(empty) = empty else {
            panic!("kept")
        };
        assert_eq!(
            (empty.record_count(), empty.producer_id(), empty.last_offset()),
            (0, 7, 10)
        );
    }

    #[test]
    fn the_offset_map_refuses_a_batch_whose_keys_pass_its_bound() {
        let mut map = OffsetMap::default();
        let one = batch(0, -1, &[(Some("key-one"), Some("v"))]);
        assert!(map.add(&one, 100).unwrap());
        let two = batch(1, -1, &[(Some("key-two"), Some("v"))]);
        assert!(!map.add(&two, 100).unwrap(), "2 × (7 + 48) bytes do not fit 100");
        assert_eq!(map.len(), 1);
        assert!(
            map.add(&batch(2, -1, &[(Some("key-one"), Some("w"))]), 100)
                .unwrap(),
            "a known key costs nothing"
        );
    }
}
