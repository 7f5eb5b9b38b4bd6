//! The producer-state manager of one partition (`ProducerStateManager`, kafka-semantics §4).
//!
//! It holds the producer entries, the ongoing and the decided-but-unreplicated transactions, the verification
//! entries and the map end offset. Time is always an argument; snapshots go through a caller-supplied
//! [`SnapshotStore`]. The log-level append path (duplicates, barriers, completing transactions) is in
//! [`crate::plan`].

use std::collections::BTreeMap;

use record_format::MirrorPidResetRecord;
use rustc_hash::FxHashMap;

use crate::append::{AppendOrigin, ProducerAppendInfo};
use crate::barrier::BarrierScope;
use crate::entry::{
    BatchMetadata, CompletedTxn, LogOffsetMetadata, ProducerStateEntry, TxnMetadata, VerificationStateEntry,
};
use crate::plan::EntryExtension;
use crate::reload::{Reload, ReloadStep};
use crate::snapshot::{decode_snapshot, encode_snapshot, SnapshotStore};
use crate::table::{ProducerTable, Slot};
use crate::txn_index::AbortedTxn;

/// A producer without an open transaction, idle for the expiration time.
fn is_expired(config: &PsmConfig, now_ms: i64, entry: &ProducerStateEntry) -> bool {
    entry.current_txn_first_offset.is_none()
        && now_ms.saturating_sub(entry.last_timestamp) >= config.producer_id_expiration_ms
}

/// `addBatch` of a batch's cached metadata.
fn add_cached_batch(entry: &mut ProducerStateEntry, epoch: i16, batch: BatchMetadata) {
    entry.add_batch(
        epoch,
        batch.last_seq,
        batch.last_offset,
        batch.offset_delta,
        batch.timestamp,
    );
}

/// Kafka's `LATE_TRANSACTION_BUFFER_MS`: five minutes past the maximum transaction timeout.
pub const LATE_TRANSACTION_BUFFER_MS: i64 = 300_000;

/// Configuration of a manager; defaults are Kafka's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PsmConfig {
    /// `producer.id.expiration.ms` (default one day).
    pub producer_id_expiration_ms: i64,
    /// `transaction.max.timeout.ms` (default 15 minutes), for late-transaction detection.
    pub max_transaction_timeout_ms: i64,
    /// `transaction.partition.verification.enable` (default true).
    pub transaction_verification_enabled: bool,
    /// This cluster's id: a barrier written by this cluster resets state under [`BarrierScope::Writer`].
    pub cluster_id: Option<String>,
    /// Which barriers reset state.
    pub barrier_scope: BarrierScope,
}

impl Default for PsmConfig {
    fn default() -> Self {
        PsmConfig {
            producer_id_expiration_ms: 86_400_000,
            max_transaction_timeout_ms: 900_000,
            transaction_verification_enabled: true,
            cluster_id: None,
            barrier_scope: BarrierScope::Writer,
        }
    }
}

/// The producer state of one partition; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateManager {
    config: PsmConfig,
    producers: ProducerTable,
    verification_states: FxHashMap<i64, VerificationStateEntry>,
    ongoing_txns: BTreeMap<i64, TxnMetadata>,
    unreplicated_txns: BTreeMap<i64, TxnMetadata>,
    last_map_offset: i64,
    last_snap_offset: i64,
    oldest_txn_last_timestamp: i64,
    next_verification_guard: u64,
}

impl ProducerStateManager {
    /// An empty manager with map end offset 0.
    pub fn new(config: PsmConfig) -> Self {
        ProducerStateManager {
            config,
            producers: ProducerTable::default(),
            verification_states: FxHashMap::default(),
            ongoing_txns: BTreeMap::new(),
            unreplicated_txns: BTreeMap::new(),
            last_map_offset: 0,
            last_snap_offset: 0,
            oldest_txn_last_timestamp: -1,
            next_verification_guard: 1,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &PsmConfig {
        &self.config
    }

    /// Changes the configuration (Kafka's expiration and verification settings are dynamic).
    pub fn set_config(&mut self, config: PsmConfig) {
        self.config = config;
    }

    /// The entry of a producer.
    pub fn producer(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.get(producer_id)
    }

    /// Asks the CPU to bring a producer's entry into its caches, where [`plan_append`](Self::plan_append) will
    /// find it: a partition log calls this for a client batch before checking the batch's CRC and records, so that
    /// the entry's cache misses (with many producers it has usually been evicted since the producer's last batch)
    /// overlap the check instead of adding to it. A hint, not a read: nothing waits for it (ADR 0028). Changes
    /// nothing and decides nothing.
    pub fn prefetch_producer(&self, producer_id: i64) {
        self.producers.prefetch(producer_id);
    }

    /// Every producer entry (unordered).
    pub fn producers(&self) -> impl Iterator<Item = &ProducerStateEntry> {
        self.producers.iter()
    }

    /// Number of producers.
    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }

    /// Undecided transactions by first offset.
    pub fn ongoing_transactions(&self) -> &BTreeMap<i64, TxnMetadata> {
        &self.ongoing_txns
    }

    /// Decided transactions whose marker is not yet below the high watermark.
    pub fn unreplicated_transactions(&self) -> &BTreeMap<i64, TxnMetadata> {
        &self.unreplicated_txns
    }

    /// The map end offset (exclusive): how far the state reflects the log.
    pub fn map_end_offset(&self) -> i64 {
        self.last_map_offset
    }

    /// Offset of the last snapshot taken or loaded.
    pub fn last_snapshot_offset(&self) -> i64 {
        self.last_snap_offset
    }

    /// `updateMapEndOffset`.
    pub fn update_map_end_offset(&mut self, offset: i64) {
        self.last_map_offset = offset;
    }

    /// `prepareUpdate`: a fresh append info for `producer_id` starting from the stored state.
    pub fn prepare_update(&self, producer_id: i64, origin: AppendOrigin) -> ProducerAppendInfo {
        ProducerAppendInfo::new(
            producer_id,
            origin,
            self.producers.get(producer_id),
            self.verification_states.get(&producer_id).copied(),
        )
    }

    /// The verification state of `producer_id`, if one is pending.
    pub(crate) fn verification_state(&self, producer_id: i64) -> Option<VerificationStateEntry> {
        self.verification_states.get(&producer_id).copied()
    }

    /// The entry of a producer and the table slot it is in (for [`extend_entry`](Self::extend_entry)).
    pub(crate) fn producer_with_slot(&self, producer_id: i64) -> Option<(Slot, &ProducerStateEntry)> {
        self.producers.get_with_slot(producer_id)
    }

    /// Commits a one-batch plan that only extends an entry: `batch` cached in the stored entry of
    /// `producer_id` (whose epoch is `epoch`, found in `slot` when planned), as [`update`](Self::update) would
    /// merge an append info holding only that batch.
    pub(crate) fn extend_entry(&mut self, slot: Slot, producer_id: i64, epoch: i16, batch: BatchMetadata) {
        match self.producers.get_mut_in(slot, producer_id) {
            Some(entry) => add_cached_batch(entry, epoch, batch),
            None => self.cache_batch(producer_id, epoch, batch),
        }
        self.after_timestamps_moved();
    }

    /// Commits a plan of batches that each only extend their producer's entry, in order: what
    /// [`extend_entry`](Self::extend_entry) does for each, the earliest open transaction's timestamp looked up
    /// once at the end.
    pub(crate) fn extend_entries(&mut self, extensions: Vec<EntryExtension>) {
        for extension in extensions {
            self.cache_batch(extension.producer_id, extension.epoch, extension.batch);
        }
        self.after_timestamps_moved();
    }

    fn cache_batch(&mut self, producer_id: i64, epoch: i16, batch: BatchMetadata) {
        add_cached_batch(self.producers.get_or_insert_empty(producer_id), epoch, batch);
    }

    /// Producers' last timestamps moved: one of them may own the earliest open transaction.
    fn after_timestamps_moved(&mut self) {
        if !self.ongoing_txns.is_empty() || self.oldest_txn_last_timestamp != -1 {
            self.update_oldest_txn_timestamp();
        }
    }

    /// `update(appendInfo)`: merges the updated entry and registers the transactions it started.
    pub fn update(&mut self, info: ProducerAppendInfo) {
        let producer_id = info.producer_id();
        let (updated, started) = info.into_parts();
        match self.producers.get_mut(producer_id) {
            Some(entry) => entry.update(updated),
            None => self.producers.insert(updated),
        }
        for txn in started {
            self.ongoing_txns.insert(txn.first_offset.message_offset, txn);
        }
        // Only the owner of the earliest open transaction matters; with none open there is nothing to look up.
        if !self.ongoing_txns.is_empty() || self.oldest_txn_last_timestamp != -1 {
            self.update_oldest_txn_timestamp();
        }
    }

    fn update_oldest_txn_timestamp(&mut self) {
        self.oldest_txn_last_timestamp = self
            .ongoing_txns
            .values()
            .next()
            .and_then(|txn| self.producers.get(txn.producer_id))
            .map_or(-1, |entry| entry.last_timestamp);
    }

    /// `lastStableOffset(c)`: the first offset of the earliest ongoing transaction of *another* producer, else
    /// `c.last_offset + 1`. Computed before [`Self::complete_txn`]; written into the aborted-transaction index.
    pub fn last_stable_offset(&self, completed: &CompletedTxn) -> i64 {
        self.ongoing_txns
            .values()
            .find(|txn| txn.producer_id != completed.producer_id)
            .map_or(completed.last_offset + 1, |txn| txn.first_offset.message_offset)
    }

    /// `completeTxn`: moves the transaction from ongoing to unreplicated. Returns false (and changes nothing) when
    /// no ongoing transaction starts at `completed.first_offset` (Kafka throws there).
    pub fn complete_txn(&mut self, completed: &CompletedTxn) -> bool {
        let Some(mut txn) = self.ongoing_txns.remove(&completed.first_offset) else {
            return false;
        };
        txn.last_offset = Some(completed.last_offset);
        self.unreplicated_txns.insert(completed.first_offset, txn);
        self.update_oldest_txn_timestamp();
        true
    }

    /// Computes the index entry (for aborts) and completes the transaction, in Kafka's order.
    pub fn complete_with_index_entry(&mut self, completed: &CompletedTxn) -> Option<AbortedTxn> {
        let last_stable_offset = self.last_stable_offset(completed);
        self.complete_txn(completed);
        completed.is_aborted.then_some(AbortedTxn {
            producer_id: completed.producer_id,
            first_offset: completed.first_offset,
            last_offset: completed.last_offset,
            last_stable_offset,
        })
    }

    /// `firstUndecidedOffset`.
    pub fn first_undecided_offset(&self) -> Option<i64> {
        self.ongoing_txns.keys().next().copied()
    }

    /// `firstUnstableOffset`: the earlier of the first ongoing and the first unreplicated transaction.
    pub fn first_unstable_offset(&self) -> Option<LogOffsetMetadata> {
        let ongoing = self.ongoing_txns.values().next().map(|txn| txn.first_offset);
        let unreplicated = self.unreplicated_txns.values().next().map(|txn| txn.first_offset);
        match (ongoing, unreplicated) {
            (Some(a), Some(b)) => Some(if b.message_offset < a.message_offset { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    /// The LSO the log reports: the first unstable offset if below the high watermark, else the high watermark;
    /// never below the log start offset.
    pub fn log_last_stable_offset(&self, high_watermark: i64, log_start_offset: i64) -> i64 {
        let lso = match self.first_unstable_offset() {
            Some(first) if first.message_offset < high_watermark => first.message_offset,
            _ => high_watermark,
        };
        lso.max(log_start_offset)
    }

    /// `onHighWatermarkUpdated`: forgets decided transactions whose marker is below the high watermark.
    pub fn on_high_watermark_updated(&mut self, high_watermark: i64) {
        self.unreplicated_txns
            .retain(|_, txn| txn.last_offset.is_none_or(|last| last >= high_watermark));
    }

    /// `isEmpty`: no producers and no unreplicated transactions.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty() && self.unreplicated_txns.is_empty()
    }

    /// `removeExpiredProducers`: producers without an open transaction idle for the expiration time, and
    /// verification entries that old. Returns how many producers were removed.
    pub fn remove_expired_producers(&mut self, now_ms: i64) -> usize {
        let expiration = self.config.producer_id_expiration_ms;
        let before = self.producers.len();
        let config = &self.config;
        self.producers.retain(|entry| !is_expired(config, now_ms, entry));
        self.verification_states
            .retain(|_, entry| now_ms.saturating_sub(entry.timestamp) < expiration);
        before - self.producers.len()
    }

    /// `hasLateTransaction`: the oldest open transaction's producer has been silent for longer than the maximum
    /// transaction timeout plus five minutes.
    pub fn has_late_transaction(&self, now_ms: i64) -> bool {
        self.oldest_txn_last_timestamp > 0
            && now_ms.saturating_sub(self.oldest_txn_last_timestamp)
                > self.config.max_transaction_timeout_ms + LATE_TRANSACTION_BUFFER_MS
    }

    /// `maybeCreateVerificationStateEntry`: the entry for a transactional produce being verified, created or
    /// updated; returns its guard.
    pub fn maybe_create_verification_state_entry(
        &mut self,
        producer_id: i64,
        sequence: i32,
        epoch: i16,
        supports_epoch_bump: bool,
        now_ms: i64,
    ) -> u64 {
        if let Some(entry) = self.verification_states.get_mut(&producer_id) {
            entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch);
            return entry.verification_guard;
        }
        let guard = self.next_verification_guard;
        self.next_verification_guard += 1;
        self.verification_states.insert(
            producer_id,
            VerificationStateEntry {
                timestamp: now_ms,
                verification_guard: guard,
                lowest_sequence: sequence,
                epoch,
                supports_epoch_bump,
            },
        );
        guard
    }

    /// The verification entry of a producer.
    pub fn verification_state_entry(&self, producer_id: i64) -> Option<&VerificationStateEntry> {
        self.verification_states.get(&producer_id)
    }

    /// Removes a producer's verification entry.
    pub fn clear_verification_state_entry(&mut self, producer_id: i64) {
        self.verification_states.remove(&producer_id);
    }

    /// Whether `barrier` resets this partition's producer state (ARCHITECTURE.md, barrier invariants; ADR 0005).
    pub fn barrier_applies(&self, barrier: &MirrorPidResetRecord) -> bool {
        self.config
            .barrier_scope
            .applies(barrier, self.config.cluster_id.as_deref())
    }

    /// The barrier's reset: every producer entry and verification entry goes. Open transactions must have been
    /// completed (aborted) by the caller first; see [`crate::plan`].
    pub(crate) fn reset_producers(&mut self) {
        debug_assert!(self.ongoing_txns.is_empty());
        self.producers.clear();
        self.verification_states.clear();
        self.update_oldest_txn_timestamp();
    }

    fn clear_state(&mut self) {
        self.producers.clear();
        self.ongoing_txns.clear();
        self.unreplicated_txns.clear();
        self.update_oldest_txn_timestamp();
    }

    /// `takeSnapshot` without a store: the snapshot of every producer for the map end offset, if it moved since
    /// the last one; the caller stores the bytes. Returns (offset, bytes).
    pub fn take_snapshot_bytes(&mut self) -> Option<(i64, Vec<u8>)> {
        if self.last_map_offset <= self.last_snap_offset {
            return None;
        }
        let mut entries: Vec<&ProducerStateEntry> = self.producers.iter().collect();
        // Kafka writes hash-map order; a stable order makes snapshots reproducible.
        entries.sort_unstable_by_key(|entry| entry.producer_id);
        let bytes = encode_snapshot(entries.into_iter());
        self.last_snap_offset = self.last_map_offset;
        Some((self.last_map_offset, bytes))
    }

    /// The snapshot a log takes at its end (roll, close, rebuild): the map end offset is moved to `log_end_offset`
    /// (batches without a producer id move it too, kafka-semantics §4.4), then [`Self::take_snapshot_bytes`].
    pub fn take_snapshot_bytes_at(&mut self, log_end_offset: i64) -> Option<(i64, Vec<u8>)> {
        self.update_map_end_offset(log_end_offset);
        self.take_snapshot_bytes()
    }

    /// `takeSnapshot`: writes every producer to the snapshot for the map end offset, if it moved since the last
    /// one. Returns the offset written.
    pub fn take_snapshot(&mut self, store: &mut dyn SnapshotStore) -> Option<i64> {
        let (offset, bytes) = self.take_snapshot_bytes()?;
        store.write(offset, bytes);
        Some(offset)
    }

    /// What `truncateAndReload` does with the stored snapshots `offsets` (kafka-semantics §4.9), decided without
    /// touching them; [`Reload`] carries the decision out step by step.
    pub fn plan_reload(&self, offsets: &[i64], log_start_offset: i64, log_end_offset: i64) -> ReloadPlan {
        let (kept, out_of_range): (Vec<i64>, Vec<i64>) = offsets
            .iter()
            .partition(|&&offset| offset > log_start_offset && offset <= log_end_offset);
        ReloadPlan {
            out_of_range,
            reload: log_end_offset != self.last_map_offset,
            candidates: kept.into_iter().rev().collect(),
        }
    }

    /// Starts a reload: every producer and transaction forgotten.
    pub fn begin_reload(&mut self) {
        self.clear_state();
    }

    /// Loads a snapshot's bytes (during a reload); expired producers are skipped. A snapshot that does not
    /// decode changes nothing and is reported, so the caller can delete it and offer an older one.
    pub fn load_snapshot_bytes(
        &mut self,
        offset: i64,
        bytes: &[u8],
        now_ms: i64,
    ) -> Result<(), CorruptSnapshot> {
        let entries = decode_snapshot(bytes).map_err(|error| CorruptSnapshot {
            offset,
            reason: error.to_string(),
        })?;
        self.producers.reserve(entries.len());
        for entry in entries {
            if is_expired(&self.config, now_ms, &entry) {
                continue;
            }
            if let Some(first) = entry.current_txn_first_offset {
                self.ongoing_txns.insert(
                    first,
                    TxnMetadata {
                        producer_id: entry.producer_id,
                        first_offset: LogOffsetMetadata::message_only(first),
                        last_offset: None,
                    },
                );
            }
            self.producers.insert(entry);
        }
        self.last_map_offset = offset;
        self.last_snap_offset = offset;
        self.update_oldest_txn_timestamp();
        Ok(())
    }

    /// Ends a reload that found no readable snapshot: the state starts empty at the log start.
    pub fn reload_from_nothing(&mut self, log_start_offset: i64) {
        self.last_map_offset = log_start_offset;
        self.last_snap_offset = log_start_offset;
    }

    /// `loadFromSnapshot` over a [`SnapshotStore`]: [`Reload::load_newest`] with every stored snapshot, newest
    /// first. Returns the snapshots that could not be read (they were deleted).
    pub fn load_from_snapshot(
        &mut self,
        store: &mut dyn SnapshotStore,
        log_start_offset: i64,
        now_ms: i64,
    ) -> Vec<CorruptSnapshot> {
        let newest_first: Vec<i64> = store.offsets().into_iter().rev().collect();
        let reload = Reload::load_newest(self, &newest_first, log_start_offset, now_ms);
        self.drive_reload(reload, store).corrupt
    }

    /// `truncateAndReload` (kafka-semantics §4.9) over a [`SnapshotStore`]: [`Reload::truncate_and_reload`], the
    /// protocol the partition log runs over its storage. Returns the snapshots it deleted and why.
    pub fn truncate_and_reload(
        &mut self,
        store: &mut dyn SnapshotStore,
        log_start_offset: i64,
        log_end_offset: i64,
        now_ms: i64,
    ) -> ReloadReport {
        let reload =
            Reload::truncate_and_reload(self, &store.offsets(), log_start_offset, log_end_offset, now_ms);
        self.drive_reload(reload, store)
    }

    /// Carries out a reload's steps against a [`SnapshotStore`].
    fn drive_reload(&mut self, mut reload: Reload, store: &mut dyn SnapshotStore) -> ReloadReport {
        loop {
            match reload.next_step() {
                ReloadStep::Delete(offset) => store.delete(offset),
                ReloadStep::Read(offset) => {
                    let bytes = store.read(offset);
                    reload.offer(self, offset, bytes.as_deref());
                }
                ReloadStep::Done => return reload.finish(self),
            }
        }
    }

    /// `truncateFullyAndStartAt` for producer state: no state, map end at `offset` (the caller deletes every
    /// snapshot).
    pub fn reset_at(&mut self, offset: i64) {
        self.clear_state();
        self.last_snap_offset = 0;
        self.last_map_offset = offset;
    }

    /// `truncateFullyAndStartAt`: no state, no snapshots, map end at `offset`.
    pub fn truncate_fully_and_start_at(&mut self, store: &mut dyn SnapshotStore, offset: i64) {
        for snapshot in store.offsets() {
            store.delete(snapshot);
        }
        self.reset_at(offset);
    }

    /// `onLogStartOffsetIncremented` with the latest snapshot still stored: forgets decided transactions below the
    /// new start; producers stay.
    pub fn log_start_moved(&mut self, log_start_offset: i64, latest_snapshot: Option<i64>) {
        self.unreplicated_txns
            .retain(|_, txn| txn.last_offset.is_none_or(|last| last >= log_start_offset));
        self.last_map_offset = self.last_map_offset.max(log_start_offset);
        self.last_snap_offset = latest_snapshot.unwrap_or(log_start_offset);
    }

    /// `onLogStartOffsetIncremented`: forgets decided transactions below the new start; producers stay.
    pub fn on_log_start_offset_incremented(&mut self, store: &dyn SnapshotStore, log_start_offset: i64) {
        self.log_start_moved(log_start_offset, store.latest());
    }

    /// `deleteSnapshotsBefore`.
    pub fn delete_snapshots_before(store: &mut dyn SnapshotStore, offset: i64) {
        for snapshot in store.offsets() {
            if snapshot < offset {
                store.delete(snapshot);
            }
        }
    }

    /// `removeStraySnapshots`: snapshots not at a segment base are strays; all go except the highest, which stays
    /// only if it is not below the highest segment base (the clean-shutdown snapshot at the log end).
    pub fn remove_stray_snapshots(store: &mut dyn SnapshotStore, segment_base_offsets: &[i64]) {
        let strays: Vec<i64> = store
            .offsets()
            .into_iter()
            .filter(|offset| !segment_base_offsets.contains(offset))
            .collect();
        let Some((&highest, rest)) = strays.split_last() else {
            return;
        };
        for &offset in rest {
            store.delete(offset);
        }
        if segment_base_offsets.iter().any(|&base| base > highest) {
            store.delete(highest);
        }
    }
}

/// A snapshot that could not be read and was deleted (Kafka falls back to the previous one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptSnapshot {
    /// Its offset.
    pub offset: i64,
    /// Why it could not be read.
    pub reason: String,
}

/// What a reload does with the stored snapshots; see [`ProducerStateManager::plan_reload`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadPlan {
    /// Snapshots outside `(log start, log end]`: delete them.
    pub out_of_range: Vec<i64>,
    /// Whether the state must be reloaded (the log end differs from the map end offset).
    pub reload: bool,
    /// The snapshots to try, newest first.
    pub candidates: Vec<i64>,
}

/// What [`ProducerStateManager::truncate_and_reload`] deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadReport {
    /// Snapshots outside `(log start, log end]`.
    pub out_of_range: Vec<i64>,
    /// Snapshots that could not be read, newest first.
    pub corrupt: Vec<CorruptSnapshot>,
}
