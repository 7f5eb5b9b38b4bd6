//! [`PartitionLog`]: one partition's records, producer state and offsets, kept consistent.
//!
//! **Append** (kafka-semantics §7.1), in this order: origin checks (read-only, structure), offsets assigned (leader) or
//! checked (follower), producer state *planned* against the stored state (a client duplicate ends the append
//! here, with the original offsets), maybe roll, the records written, the plan committed, the aborted-transaction
//! index extended with Kafka's LSO, the map end offset advanced. An error before the write leaves everything
//! unchanged; an index write that fails after the records were written takes the log offline until it is
//! reopened, and reopening repairs the index (Kafka takes the log directory offline the same way).
//!
//! **Recovery and truncation** share one rebuild (kafka-semantics §7.6): snapshots outside `(log start, log end]` dropped,
//! the latest readable one loaded (corrupt ones are deleted, falling back to older ones), the rest of the log
//! replayed with REPLICATION origin (so barriers apply by the same rule as live appends), index entries the
//! replay produces beyond the stored index restored, and a snapshot taken at the log end.
//!
//! Metadata records this module owns (keys start with `log.`): `log.clean-shutdown`, `log.high-watermark`,
//! `log.read-only`.

use std::collections::BTreeSet;

use producer_state::{
    AppendDecision, AppendOrigin, ProducerStateManager, Reload, ReloadReport, ReloadStep, StateSummary,
    TransactionVersion,
};
use record_format::{AbortedTxn, BatchBuffers, CrcCheckedBatches, OffsetDeltas, RecordBatch};
use storage::{Durability, PartitionId, PartitionStorage};

use crate::cleaner::{CleanPlan, CleanStep, CleanWork, Cleaned, CompactionPolicy};
use crate::config::LogConfig;
use crate::error::LogError;
use crate::fetch::{FetchResult, Isolation};
use crate::retention::{Retained, RetentionPolicy, RetentionWalk};
use crate::Result;

const CLEAN_SHUTDOWN_KEY: &str = "log.clean-shutdown";
const HIGH_WATERMARK_KEY: &str = "log.high-watermark";
const READ_ONLY_KEY: &str = "log.read-only";
/// Where the last compaction pass ended: the log before it is clean, after it dirty.
const CLEANER_OFFSET_KEY: &str = "log.cleaner-offset";

/// How many bytes recovery reads at a time.
const REPLAY_READ_BYTES: usize = 4 << 20;
/// Retention units asked from storage per page.
const RETENTION_PAGE_UNITS: usize = 256;

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    /// First offset of the appended batches (of the original batch for a duplicate).
    pub first_offset: i64,
    /// Last offset.
    pub last_offset: i64,
    /// True when a client resent a batch already in the log: nothing was written.
    pub duplicate: bool,
    /// For a duplicate, the original batch's max timestamp (Kafka answers it as the produce's log append time).
    pub original_max_timestamp: Option<i64>,
    /// Barriers in the append that reset producer state.
    pub barriers_applied: usize,
    /// Aborted-transaction index entries written.
    pub aborted_index_entries: usize,
}

/// What opening a log found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// True when the log was closed cleanly last time.
    pub clean_shutdown: bool,
    /// Offset of the snapshot producer state was loaded from (`None`: rebuilt from the log start).
    pub snapshot_offset: Option<i64>,
    /// Batches replayed on top of it.
    pub batches_replayed: u64,
    /// Aborted-transaction index entries the replay found missing and wrote.
    pub index_entries_restored: usize,
    /// What the storage backend found and repaired when it opened the partition (torn tails cut, segments
    /// dropped, indexes rebuilt).
    pub storage: storage::OpenReport,
    /// Producer snapshots that could not be read and were deleted (producer state fell back past them).
    pub corrupt_snapshots: Vec<producer_state::CorruptSnapshot>,
}

/// What a reload's steps came to: the snapshot loaded (or kept) and what was deleted.
struct ReloadOutcome {
    loaded: Option<i64>,
    report: ReloadReport,
}

/// One partition's log; see the module docs.
pub struct PartitionLog {
    storage: Box<dyn PartitionStorage>,
    config: LogConfig,
    psm: ProducerStateManager,
    /// Offsets of the stored producer snapshots (the log is their only writer).
    snapshots: BTreeSet<i64>,
    high_watermark: i64,
    read_only: bool,
    /// Bytes appended since the last roll (the logical segment's size).
    segment_size: u64,
    /// `segment.ms`: the age at which the active segment rolls (`None`: only by size).
    segment_ms: Option<i64>,
    /// What the active segment's age is measured from: the largest timestamp of its first batch (Kafka's
    /// `rollingBasedTimestamp`); after an open, of the first batch appended since.
    segment_started_ms: Option<i64>,
    /// Set when derived state fell behind the records (see the module docs).
    offline: Option<String>,
    /// How many times this log was cut back since it was opened (replicas compare it to find divergence).
    truncations: u64,
}

impl std::fmt::Debug for PartitionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionLog")
            .field("partition", self.storage.id())
            .field("log_start_offset", &self.log_start_offset())
            .field("log_end_offset", &self.log_end_offset())
            .field("high_watermark", &self.high_watermark)
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

impl PartitionLog {
    /// Opens a partition's log, rebuilding producer state (kafka-semantics §7.7): clean or not, the state is the latest
    /// readable snapshot plus a replay of the log after it. `now_ms` drives producer expiration on load.
    pub async fn open(
        mut storage: Box<dyn PartitionStorage>,
        config: LogConfig,
        now_ms: i64,
    ) -> Result<(Self, RecoveryReport)> {
        let clean_shutdown = storage.metadata(CLEAN_SHUTDOWN_KEY).await?.as_deref() == Some(b"1");
        // From here until `close`, a crash is an unclean shutdown.
        storage.put_metadata(CLEAN_SHUTDOWN_KEY, b"0").await?;
        let read_only = match storage.metadata(READ_ONLY_KEY).await?.as_deref() {
            None | Some(b"0") => false,
            Some(b"1") => true,
            Some(other) => {
                return Err(LogError::CorruptMetadata {
                    key: READ_ONLY_KEY,
                    reason: format!("expected \"0\" or \"1\", found {} bytes", other.len()),
                })
            }
        };
        let stored_high_watermark = match storage.metadata(HIGH_WATERMARK_KEY).await? {
            None => None,
            Some(bytes) => Some(i64::from_be_bytes(bytes.as_slice().try_into().map_err(|_| {
                LogError::CorruptMetadata {
                    key: HIGH_WATERMARK_KEY,
                    reason: format!("expected 8 bytes, found {}", bytes.len()),
                }
            })?)),
        };
        let snapshots = storage.snapshot_offsets().await?.into_iter().collect();
        let mut log = PartitionLog {
            psm: ProducerStateManager::new(config.producer_state.clone()),
            config,
            snapshots,
            high_watermark: storage.log_start_offset(),
            read_only,
            segment_size: 0,
            segment_ms: None,
            segment_started_ms: None,
            offline: None,
            truncations: 0,
            storage,
        };
        let mut report = log.rebuild_producer_state(now_ms).await?;
        report.clean_shutdown = clean_shutdown;
        report.storage = log.storage.open_report().clone();
        let high_watermark = stored_high_watermark.unwrap_or(log.log_start_offset());
        log.set_high_watermark(high_watermark);
        Ok((log, report))
    }

    /// Closes cleanly: a snapshot at the log end, data synced, the high watermark and the clean-shutdown mark
    /// written.
    pub async fn close(mut self) -> Result<()> {
        self.check_online()?;
        self.snapshot_log_end().await?;
        self.storage.flush(Durability::Sync).await?;
        self.storage
            .put_metadata(HIGH_WATERMARK_KEY, &self.high_watermark.to_be_bytes())
            .await?;
        self.storage.put_metadata(CLEAN_SHUTDOWN_KEY, b"1").await?;
        Ok(())
    }

    /// Which partition.
    pub fn id(&self) -> &PartitionId {
        self.storage.id()
    }

    /// First offset still in the log.
    pub fn log_start_offset(&self) -> i64 {
        self.storage.log_start_offset()
    }

    /// Offset after the last batch (LEO).
    pub fn log_end_offset(&self) -> i64 {
        self.storage.log_end_offset()
    }

    /// The high watermark: the offset up to which every replica has the log.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// First offset of the earliest transaction not yet decided or not yet replicated, clamped to the log start.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.psm
            .first_unstable_offset()
            .map(|first| first.message_offset.max(self.log_start_offset()))
    }

    /// The last stable offset (kafka-semantics §4.3): the first unstable offset if it is below the high watermark, else the
    /// high watermark; never below the log start.
    pub fn last_stable_offset(&self) -> i64 {
        self.psm
            .log_last_stable_offset(self.high_watermark, self.log_start_offset())
    }

    /// The producer-state manager (read only).
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.psm
    }

    /// The configuration.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// True while the partition refuses client appends (it is mirrored).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Offsets of the stored producer snapshots, ascending.
    pub fn snapshot_offsets(&self) -> Vec<i64> {
        self.snapshots.iter().copied().collect()
    }

    /// Sets or clears read-only mode, durably (a crash never makes a mirrored partition writable).
    pub async fn set_read_only(&mut self, read_only: bool) -> Result<()> {
        self.check_online()?;
        self.storage
            .put_metadata(READ_ONLY_KEY, if read_only { b"1" } else { b"0" })
            .await?;
        self.read_only = read_only;
        Ok(())
    }

    /// The producer state, open transactions, index and LSO in comparable form.
    pub async fn summary(&self) -> Result<StateSummary> {
        let aborted = self.aborted_transactions().await?;
        let mut summary = StateSummary::of(&self.psm, &aborted, self.high_watermark);
        summary.last_stable_offset = self.last_stable_offset();
        Ok(summary)
    }

    /// Up to `max` of the log's retention units ([`storage::SegmentSummary`]: storage-fs's segments, else
    /// batches) from the one holding `from_offset`: what retention deletes, and what a search by timestamp skips.
    pub async fn segments(&self, from_offset: i64, max: usize) -> Result<Vec<storage::SegmentSummary>> {
        Ok(self.storage.segments(from_offset, max).await?)
    }

    /// The bytes the log holds (what `retention.bytes` bounds, what DescribeLogDirs reports).
    pub async fn size_bytes(&self) -> Result<u64> {
        Ok(self.storage.size_bytes().await?)
    }

    /// Every aborted-transaction index entry of the log.
    pub async fn aborted_transactions(&self) -> Result<Vec<AbortedTxn>> {
        Ok(self
            .storage
            .aborted_txns(self.log_start_offset(), i64::MAX)
            .await?)
    }

    /// Appends as the partition leader: CLIENT (exactly one data batch, as in a produce request; see
    /// [`append_client_batch`](Self::append_client_batch)) or COORDINATOR (control batches: transaction markers,
    /// our barrier). Offsets and the leader epoch are assigned here.
    pub async fn append_as_leader(
        &mut self,
        mut batches: Vec<RecordBatch>,
        origin: AppendOrigin,
        transaction_version: TransactionVersion,
    ) -> Result<AppendOutcome> {
        self.check_online()?;
        match origin {
            AppendOrigin::Client => {
                let count = batches.len();
                return match (batches.pop(), count) {
                    (Some(batch), 1) => self.append_client_batch(batch, transaction_version).await,
                    _ if self.read_only => Err(LogError::ReadOnlyTopic {
                        partition: self.id().clone(),
                    }),
                    _ => Err(invalid(
                        0,
                        format!("a produce request holds exactly one batch per partition, not {count}"),
                    )),
                };
            }
            AppendOrigin::Coordinator => {
                for (index, batch) in batches.iter().enumerate() {
                    batch
                        .verify_crc()
                        .map_err(|source| LogError::CorruptBatch { index, source })?;
                    if !batch.is_control() {
                        return Err(invalid(index, "a coordinator appends only control batches"));
                    }
                }
            }
            AppendOrigin::Replication => {
                return Err(invalid(
                    0,
                    "replicated batches are appended with `append_as_follower`",
                ));
            }
        }
        let mut next_offset = self.log_end_offset();
        for batch in &mut batches {
            batch.place(next_offset, self.config.leader_epoch);
            next_offset = batch.next_offset();
        }
        self.append(&batches, &BatchBuffers::default(), origin, transaction_version)
            .await
    }

    /// Appends one client batch as the partition leader (a produce request's batch for this partition): the
    /// checks Kafka makes of it (spec §7.1 step 1), its offsets and leader epoch assigned, then the shared append.
    /// The batch is taken by value and its offsets are written into its own bytes (copied only if they are
    /// shared).
    pub async fn append_client_batch(
        &mut self,
        mut batch: RecordBatch,
        transaction_version: TransactionVersion,
    ) -> Result<AppendOutcome> {
        self.check_online()?;
        if self.read_only {
            return Err(LogError::ReadOnlyTopic {
                partition: self.id().clone(),
            });
        }
        // The producer's entry is prefetched first, so that its cache misses overlap the checks below (ADR 0028).
        self.psm.prefetch_producer(batch.producer_id());
        validate_client_batch(&batch)?;
        batch.place(self.log_end_offset(), self.config.leader_epoch);
        self.append(
            std::slice::from_ref(&batch),
            &BatchBuffers::default(),
            AppendOrigin::Client,
            transaction_version,
        )
        .await
    }

    /// Writes a transaction marker (COORDINATOR origin) for `producer_id`, as Kafka's leader does: always, also
    /// when the producer has no open transaction here — a partition the transaction added but never wrote gets
    /// its marker (Kafka's log holds it, at an offset consumers see), and a marker a restarted coordinator sends
    /// again is appended again (no open transaction: it changes no producer state, LSO or aborted index).
    ///
    /// A read-only (mirror) partition refuses it with [`LogError::ReadOnlyTopic`], as it refuses a client: its
    /// transactions are its source's, decided by the source's markers or by STOPPING's. A local transaction it
    /// held before a failback made it a mirror again is decided there by the source too; a marker of this
    /// cluster's coordinator would make the log differ from its source's (ADR 0045).
    pub async fn write_marker(
        &mut self,
        commit: bool,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        timestamp: i64,
    ) -> Result<AppendOutcome> {
        if self.read_only {
            return Err(LogError::ReadOnlyTopic {
                partition: self.id().clone(),
            });
        }
        let placement = record_format::ControlBatchPlacement {
            base_offset: self.log_end_offset(),
            partition_leader_epoch: self.config.leader_epoch,
            timestamp,
        };
        let marker = record_format::end_txn_marker_batch(
            commit,
            producer_id,
            producer_epoch,
            coordinator_epoch,
            placement,
        )
        .map_err(|error| LogError::InvalidBatch {
            index: 0,
            reason: format!("cannot encode the marker: {error}"),
        })?;
        self.append_as_leader(vec![marker], AppendOrigin::Coordinator, TransactionVersion::V0)
            .await
    }

    /// Appends as a follower or mirror (REPLICATION origin): offsets and bytes are kept; the first batch must
    /// start at or after the log end.
    pub async fn append_as_follower(&mut self, batches: Vec<RecordBatch>) -> Result<AppendOutcome> {
        self.check_online()?;
        let checked = CrcCheckedBatches::check(batches).map_err(|error| LogError::CorruptBatch {
            index: error.index,
            source: error.source,
        })?;
        self.append_checked(checked).await
    }

    /// [`append_as_follower`](Self::append_as_follower) for batches whose CRCs the caller already checked (a
    /// mirror checks each fetch while the one before it is written, ADR 0020). Every other check is made here.
    pub async fn append_checked_as_follower(&mut self, checked: CrcCheckedBatches) -> Result<AppendOutcome> {
        self.check_online()?;
        self.append_checked(checked).await
    }

    /// The follower append after the online check and the CRC check.
    async fn append_checked(&mut self, checked: CrcCheckedBatches) -> Result<AppendOutcome> {
        let (batches, buffers) = checked.into_parts();
        storage::partition::check_append(self.log_end_offset(), &batches)?;
        self.append(
            &batches,
            &buffers,
            AppendOrigin::Replication,
            TransactionVersion::Unknown,
        )
        .await
    }

    /// The shared append path (module docs).
    async fn append(
        &mut self,
        batches: &[RecordBatch],
        buffers: &BatchBuffers,
        origin: AppendOrigin,
        transaction_version: TransactionVersion,
    ) -> Result<AppendOutcome> {
        let (Some(first), Some(last)) = (batches.first(), batches.last()) else {
            return Err(invalid(0, "an append needs at least one batch"));
        };
        let (first_offset, last_offset) = (first.base_offset(), last.last_offset());
        let plan = match self.psm.plan_append(batches, origin, transaction_version)? {
            AppendDecision::Duplicate(original) => {
                return Ok(AppendOutcome {
                    first_offset: original.first_offset(),
                    last_offset: original.last_offset,
                    duplicate: true,
                    original_max_timestamp: Some(original.timestamp),
                    barriers_applied: 0,
                    aborted_index_entries: 0,
                })
            }
            AppendDecision::Append(plan) => plan,
        };
        let size: u64 = batches.iter().map(|batch| batch.size() as u64).sum();
        if self.segment_size > 0
            && (self.segment_size.saturating_add(size) > self.config.segment_bytes
                || self.segment_aged_by(batches))
        {
            // Boxed: a roll is rare, and its future would otherwise make every append's future larger.
            Box::pin(self.roll()).await?;
        }
        self.storage.append_with_buffers(batches, buffers).await?;
        if self.segment_size == 0 {
            self.segment_started_ms = Some(first.max_timestamp());
        }
        self.segment_size = self.segment_size.saturating_add(size);
        let effects = self.psm.commit(plan);
        for entry in &effects.aborted_index {
            if let Err(error) = self.storage.append_aborted_txn(*entry).await {
                self.offline = Some(format!(
                    "aborted-transaction index entry for offsets {}..={} not written: {error}",
                    entry.first_offset, entry.last_offset
                ));
                return Err(error.into());
            }
        }
        Ok(AppendOutcome {
            first_offset,
            last_offset,
            duplicate: false,
            original_max_timestamp: None,
            barriers_applied: effects.barriers_applied.len(),
            aborted_index_entries: effects.aborted_index.len(),
        })
    }

    /// Rolls the segment: producer state snapshotted at the log end (kafka-semantics §7.3) and the storage's
    /// active unit ended there (a new segment for storage-fs).
    pub async fn roll(&mut self) -> Result<()> {
        self.check_online()?;
        self.snapshot_log_end().await?;
        self.storage.roll_segment().await?;
        self.segment_size = 0;
        self.segment_started_ms = None;
        Ok(())
    }

    /// Whether appending `batches` rolls the active segment by `segment.ms` (Kafka's `LogSegment.shouldRoll`):
    /// their largest timestamp is more than `segment.ms` after the segment's first batch's. Measured between
    /// record timestamps, not against the clock, as Kafka does, so a log of old timestamps does not roll on every
    /// append.
    fn segment_aged_by(&self, batches: &[RecordBatch]) -> bool {
        let (Some(segment_ms), Some(started)) = (self.segment_ms, self.segment_started_ms) else {
            return false;
        };
        let newest = batches.iter().map(RecordBatch::max_timestamp).max().unwrap_or(-1);
        started >= 0 && i128::from(newest) - i128::from(started) > i128::from(segment_ms)
    }

    /// Sets when segments roll: `segment.bytes` and `segment.ms` of the partition's topic (the storage's own
    /// segment size, for storage-fs, still bounds a segment from above).
    pub fn set_segment_policy(&mut self, segment_bytes: u64, segment_ms: Option<i64>) {
        self.config.segment_bytes = segment_bytes.max(1);
        self.segment_ms = segment_ms;
    }

    /// Makes appended records durable to the given level.
    pub async fn flush(&mut self, durability: Durability) -> Result<()> {
        self.check_online()?;
        Ok(self.storage.flush(durability).await?)
    }

    /// Makes appended records as durable as the configured [`LogConfig::durability`]: what a writer waits for
    /// before it acknowledges (a produce with `acks=all`, a mirror's fetch position).
    pub async fn flush_acknowledged(&mut self) -> Result<()> {
        let durability = self.config.durability;
        self.flush(durability).await
    }

    /// Moves the high watermark up (replica acknowledgement); clamped to the log end. Returns the new value.
    pub fn advance_high_watermark(&mut self, offset: i64) -> i64 {
        let offset = offset.min(self.log_end_offset());
        if offset > self.high_watermark {
            self.set_high_watermark(offset);
        }
        self.high_watermark
    }

    /// Sets the high watermark (clamped to the log), forgetting transactions decided below it.
    fn set_high_watermark(&mut self, offset: i64) {
        self.high_watermark = offset.clamp(self.log_start_offset(), self.log_end_offset());
        self.psm.on_high_watermark_updated(self.high_watermark);
    }

    /// Writes the high watermark to the log's metadata (Kafka's periodic checkpoint).
    pub async fn checkpoint_high_watermark(&mut self) -> Result<()> {
        self.check_online()?;
        Ok(self
            .storage
            .put_metadata(HIGH_WATERMARK_KEY, &self.high_watermark.to_be_bytes())
            .await?)
    }

    /// Fetches whole batches from `from_offset` up to `max_bytes` (at least one batch when there is one),
    /// bounded by the high watermark (read_uncommitted) or the LSO (read_committed, with the aborted
    /// transactions of the returned range).
    pub async fn read(
        &self,
        from_offset: i64,
        max_bytes: usize,
        isolation: Isolation,
    ) -> Result<FetchResult> {
        let upper = match isolation {
            Isolation::ReadUncommitted => self.high_watermark,
            Isolation::ReadCommitted => self.last_stable_offset(),
        };
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if from_offset < start || from_offset > end {
            return Err(LogError::OffsetOutOfRange {
                operation: "a fetch",
                offset: from_offset,
                lower: start,
                upper: end,
            });
        }
        let (mut batches, buffers) = if from_offset < upper {
            self.storage.read_with_buffers(from_offset, max_bytes).await?
        } else {
            (Vec::new(), BatchBuffers::default())
        };
        batches.retain(|batch| batch.base_offset() < upper);
        let aborted_transactions = match (isolation, batches.last()) {
            (Isolation::ReadCommitted, Some(last)) => {
                self.storage.aborted_txns(from_offset, last.next_offset()).await?
            }
            _ => Vec::new(),
        };
        Ok(FetchResult {
            batches,
            buffers,
            high_watermark: self.high_watermark,
            last_stable_offset: self.last_stable_offset(),
            log_start_offset: start,
            aborted_transactions,
        })
    }

    /// Reads for a follower of this leader: whole batches up to the log end, no isolation bound.
    pub async fn read_for_replica(&self, from_offset: i64, max_bytes: usize) -> Result<Vec<RecordBatch>> {
        Ok(self.storage.read(from_offset, max_bytes).await?)
    }

    /// Removes producers idle for the configured expiration time (kafka-semantics §4.5); returns how many.
    pub fn remove_expired_producers(&mut self, now_ms: i64) -> usize {
        self.psm.remove_expired_producers(now_ms)
    }

    /// Moves the log start offset up (retention or DeleteRecords, kafka-semantics §7.4); refused beyond the high watermark.
    /// Producers stay; snapshots below the new start are deleted.
    ///
    /// A rebuild (truncation, recovery) ignores snapshots at or below the log start (kafka-semantics §4.9) and replays
    /// only from it, so producers whose batches all lie below it would be lost unless a snapshot above the start
    /// holds them. Before moving the start, the log therefore makes sure a snapshot exists at the first batch
    /// boundary after it (built from the batches that are still there); a rebuild to any later offset then
    /// finds the producers the live log kept. Kafka relies on its segment-base snapshots for this, which leaves
    /// a gap when the start moves inside the last segments.
    pub async fn delete_records_before(&mut self, offset: i64) -> Result<i64> {
        self.check_online()?;
        if offset > self.high_watermark {
            return Err(LogError::OffsetOutOfRange {
                operation: "moving the log start offset",
                offset,
                lower: self.log_start_offset(),
                upper: self.high_watermark,
            });
        }
        if offset <= self.log_start_offset() {
            return Ok(self.log_start_offset());
        }
        if let Some(boundary) = self.first_batch_boundary_after(offset).await? {
            if !self.snapshots.contains(&boundary) {
                self.snapshot_at(boundary).await?;
            }
        }
        self.storage.delete_before(offset).await?;
        let start = self.log_start_offset();
        let below: Vec<i64> = self.snapshots.range(..start).copied().collect();
        for snapshot in below {
            self.delete_snapshot(snapshot).await?;
        }
        let latest = self.snapshots.last().copied();
        self.psm.log_start_moved(start, latest);
        Ok(start)
    }

    /// Applies `policy` at `now_ms` (Kafka's `deleteOldSegments` for `cleanup.policy=delete`, see
    /// [`crate::retention`]): the oldest units past `retention.ms` or beyond `retention.bytes` go and the log start
    /// moves past them. Returns what went, if anything. Reads the units page by page (memory bounded by a page).
    pub async fn apply_retention(
        &mut self,
        policy: RetentionPolicy,
        now_ms: i64,
    ) -> Result<Option<Retained>> {
        self.check_online()?;
        if policy.keeps_everything() || self.log_start_offset() >= self.high_watermark {
            return Ok(None);
        }
        let size = match policy.retention_bytes {
            Some(_) => self.storage.size_bytes().await?,
            None => 0,
        };
        let mut walk = RetentionWalk::new(policy, now_ms, self.high_watermark, self.log_end_offset(), size);
        let mut from = self.log_start_offset();
        'pages: while !walk.done() && from < self.log_end_offset() {
            let page = self.storage.segments(from, RETENTION_PAGE_UNITS).await?;
            let Some(last) = page.last() else { break };
            let next = last.next_offset;
            for unit in &page {
                if !walk.visit(unit) {
                    break 'pages;
                }
            }
            if next <= from {
                break;
            }
            from = next;
        }
        let Some(retained) = walk.finish() else {
            return Ok(None);
        };
        self.delete_records_before(retained.log_start_offset).await?;
        Ok(Some(retained))
    }

    /// Compacts the log (`cleanup.policy=compact`, [`crate::cleaner`]): one pass from the log start to the first
    /// uncleanable offset, if enough of it is dirty — [`Self::plan_clean`], then [`CleanPlan::prepare`] through
    /// the log's own reader, then [`Self::apply_clean`], all under this `&mut` borrow. A caller that must not
    /// hold the log meanwhile (the node, which locks a partition per request) runs the three steps itself and
    /// prepares with the log unlocked.
    pub async fn clean(&mut self, policy: CompactionPolicy, now_ms: i64) -> Result<Option<Cleaned>> {
        let Some(plan) = self.plan_clean(policy, now_ms).await? else {
            return Ok(None);
        };
        let reader = self.storage.reader();
        let Some(mut work) = plan.prepare(reader.as_ref()).await? else {
            return Ok(None);
        };
        // Each group staged beside the log first, as the node does without the log.
        loop {
            work.stage_next(reader.as_ref()).await?;
            match self.apply_clean_step(&mut work).await? {
                CleanStep::More => {}
                CleanStep::Done(cleaned) => return Ok(Some(cleaned)),
                CleanStep::Dropped => return Ok(None),
            }
        }
    }

    /// A read-only view of the log's storage that does not borrow the log: what [`CleanPlan::prepare`] reads
    /// through while the log goes on serving.
    pub fn reader(&self) -> Box<dyn storage::PartitionReader> {
        self.storage.reader()
    }

    /// The first step of a compaction pass, quick: where the log stands (its bounds, the cleaner's checkpoint,
    /// the stable and active bounds, each producer's last batch). `None` when nothing can be cleaned. A mirror
    /// partition (read-only) is not compacted: its source compacts its own log, and the mirror holds what it
    /// fetched.
    pub async fn plan_clean(&self, policy: CompactionPolicy, now_ms: i64) -> Result<Option<CleanPlan>> {
        self.check_online()?;
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        if self.read_only || start >= end {
            return Ok(None);
        }
        let checkpoint =
            match self.storage.metadata(CLEANER_OFFSET_KEY).await? {
                Some(bytes) => i64::from_be_bytes(bytes.as_slice().try_into().map_err(|_| {
                    LogError::CorruptMetadata {
                        key: CLEANER_OFFSET_KEY,
                        reason: format!("{} bytes, not 8", bytes.len()),
                    }
                })?),
                None => start,
            }
            .clamp(start, end);
        let upper = self
            .first_unstable_offset()
            .unwrap_or(self.high_watermark)
            .min(self.high_watermark);
        let active_base = self
            .storage
            .segments(end - 1, 1)
            .await?
            .first()
            .map_or(end, |unit| unit.base_offset);
        let last_batches = self
            .psm
            .producers()
            .filter_map(|entry| {
                entry
                    .batches
                    .iter()
                    .next_back()
                    .map(|last| (entry.producer_id, last.last_offset))
            })
            .collect();
        Ok(Some(CleanPlan {
            policy,
            now_ms,
            log_start: start,
            log_end: end,
            checkpoint,
            upper,
            active_base,
            last_batches,
            truncations: self.truncations,
        }))
    }

    /// The last step of a compaction pass: writes what [`CleanPlan::prepare`] rewrote and moves the checkpoint —
    /// unless the log moved under it meanwhile (cut back, or its start moved by retention or DeleteRecords): the
    /// pass is then dropped (`None`) and the next one starts again. Appends meanwhile do not matter: they land
    /// after the pass's range.
    pub async fn apply_clean(&mut self, mut work: CleanWork) -> Result<Option<Cleaned>> {
        loop {
            match self.apply_clean_step(&mut work).await? {
                CleanStep::More => {}
                CleanStep::Done(cleaned) => return Ok(Some(cleaned)),
                CleanStep::Dropped => return Ok(None),
            }
        }
    }

    /// One step of [`Self::apply_clean`]: the next group of rewritten units (at most a few MiB), or, once none is
    /// left, the checkpoint. A caller that holds the log per step (the node) lets produce and fetch in between.
    /// Groups written before a step that finds the log moved stay: each is a valid rewrite of its own units, and
    /// the checkpoint, not moved, makes the next pass do the rest again.
    pub async fn apply_clean_step(&mut self, work: &mut CleanWork) -> Result<CleanStep> {
        self.check_online()?;
        let plan = &work.plan;
        if self.truncations != plan.truncations || self.log_start_offset() != plan.log_start {
            return Ok(CleanStep::Dropped);
        }
        if let Some(staged) = work.staged.take() {
            self.storage.install_rewrite(staged).await?;
            return Ok(CleanStep::More);
        }
        if let Some((from, to, batches)) = work.rewrites.pop_front() {
            self.storage.replace_batches(from, to, &batches).await?;
            return Ok(CleanStep::More);
        }
        self.storage
            .put_metadata(CLEANER_OFFSET_KEY, &work.cleaned.to.to_be_bytes())
            .await?;
        Ok(CleanStep::Done(work.cleaned))
    }

    /// Removes every batch at or after `offset` (a batch boundary) and rebuilds producer state up to it (spec
    /// §7.5). At or below the log start the log is emptied and restarts at `offset`. Returns whether anything was
    /// cut.
    pub async fn truncate_to(&mut self, offset: i64, now_ms: i64) -> Result<bool> {
        self.check_online()?;
        if offset >= self.log_end_offset() {
            return Ok(false);
        }
        if offset < self.log_start_offset() {
            self.truncate_fully_and_start_at(offset).await?;
            return Ok(true);
        }
        self.storage.truncate_to(offset).await?;
        self.truncations += 1;
        self.rebuild_producer_state(now_ms).await?;
        self.segment_size = 0;
        self.segment_started_ms = None;
        let high_watermark = self.high_watermark.min(self.log_end_offset());
        self.set_high_watermark(high_watermark);
        Ok(true)
    }

    /// How many times the log was cut back (by [`Self::truncate_to`] or [`Self::truncate_fully_and_start_at`])
    /// since it was opened: a follower that caught up before the count last moved may hold batches the leader no
    /// longer has at the same offsets.
    pub fn truncations(&self) -> u64 {
        self.truncations
    }

    /// Empties the log and restarts it at `offset`: no producers, no snapshots (kafka-semantics §7.5).
    pub async fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<()> {
        self.check_online()?;
        self.storage.truncate_fully_and_start_at(offset).await?;
        self.truncations += 1;
        for snapshot in std::mem::take(&mut self.snapshots) {
            self.storage.delete_snapshot(snapshot).await?;
        }
        self.psm.reset_at(offset);
        self.segment_size = 0;
        self.segment_started_ms = None;
        self.set_high_watermark(offset);
        Ok(())
    }

    /// Writes a metadata record of a layer above (keys starting with `log.` belong to this log).
    pub async fn put_metadata(&mut self, key: &str, value: &[u8]) -> Result<()> {
        self.check_online()?;
        if key.starts_with("log.") {
            return Err(LogError::Storage(storage::StorageError::InvalidMetadataKey {
                key: key.to_owned(),
                reason: "keys starting with `log.` belong to the partition log",
            }));
        }
        Ok(self.storage.put_metadata(key, value).await?)
    }

    /// Reads a metadata record.
    pub async fn metadata(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.storage.metadata(key).await?)
    }

    /// The first offset after `offset` where a batch starts (or the log ends); `None` at the log end.
    async fn first_batch_boundary_after(&self, offset: i64) -> Result<Option<i64>> {
        let batches = self.storage.read(offset, 1).await?;
        Ok(batches.first().map(|batch| {
            if batch.base_offset() > offset {
                batch.base_offset()
            } else {
                batch.next_offset()
            }
        }))
    }

    /// Snapshots producer state at the log end (if it moved since the last snapshot) and stores it.
    async fn snapshot_log_end(&mut self) -> Result<()> {
        let end = self.log_end_offset();
        if let Some((offset, bytes)) = self.psm.take_snapshot_bytes_at(end) {
            self.store_snapshot(offset, bytes).await?;
        }
        Ok(())
    }

    /// Stores a snapshot, syncing the log first: a snapshot stands for the log below it, aborted-transaction
    /// index entries included, and recovery replays only what is above it — so what it stands for must be durable
    /// before it is (else a power loss could keep the snapshot and the ABORT marker but lose the marker's index
    /// entry, and nothing would restore it).
    async fn store_snapshot(&mut self, offset: i64, bytes: Vec<u8>) -> Result<()> {
        self.storage.flush(Durability::Sync).await?;
        self.storage.put_snapshot(offset, bytes.into()).await?;
        self.snapshots.insert(offset);
        Ok(())
    }

    async fn delete_snapshot(&mut self, offset: i64) -> Result<()> {
        self.storage.delete_snapshot(offset).await?;
        self.snapshots.remove(&offset);
        Ok(())
    }

    /// Carries out a snapshot reload's steps (producer state decides them: `producer_state::reload`) against this
    /// log's storage, reading one snapshot at a time, into `state`.
    async fn run_reload(
        &mut self,
        state: &mut ProducerStateManager,
        mut reload: Reload,
    ) -> Result<ReloadOutcome> {
        loop {
            match reload.next_step() {
                ReloadStep::Delete(offset) => self.delete_snapshot(offset).await?,
                ReloadStep::Read(offset) => {
                    let bytes = match self.storage.snapshot_at_or_below(offset).await? {
                        Some((found, bytes)) if found == offset => Some(bytes),
                        _ => None,
                    };
                    reload.offer(state, offset, bytes.as_deref());
                }
                ReloadStep::Done => {
                    let loaded = reload.loaded();
                    let report = reload.finish(state);
                    return Ok(ReloadOutcome { loaded, report });
                }
            }
        }
    }

    /// Writes a snapshot of the producer state as it was at `offset` (a batch boundary inside the log), built by a
    /// scratch manager from the latest readable snapshot at or below it and the batches in between.
    async fn snapshot_at(&mut self, offset: i64) -> Result<()> {
        let start = self.log_start_offset();
        let mut state = ProducerStateManager::new(self.config.producer_state.clone());
        let candidates: Vec<i64> = self
            .snapshots
            .range(..=offset)
            .rev()
            .copied()
            .filter(|&stored| stored > start)
            .collect();
        // No expiration here: the snapshot must hold what the live state holds.
        let reload = Reload::load_newest(&mut state, &candidates, start, i64::MIN);
        self.run_reload(&mut state, reload).await?;
        let from = state.map_end_offset().max(start);
        replay(&*self.storage, &mut state, from, offset).await?;
        if let Some((at, bytes)) = state.take_snapshot_bytes_at(offset) {
            self.store_snapshot(at, bytes).await?;
        }
        Ok(())
    }

    /// Rebuilds producer state for the current log bounds (kafka-semantics §7.6); see the module docs. Producer
    /// state decides (which snapshots are out of range, whether to reload, which to try); the log carries it out,
    /// reading one snapshot at a time.
    async fn rebuild_producer_state(&mut self, now_ms: i64) -> Result<RecoveryReport> {
        let (start, end) = (self.log_start_offset(), self.log_end_offset());
        let stored: Vec<i64> = self.snapshots.iter().copied().collect();
        let mut state = std::mem::replace(
            &mut self.psm,
            ProducerStateManager::new(self.config.producer_state.clone()),
        );
        let reload = Reload::truncate_and_reload(&mut state, &stored, start, end, now_ms);
        let reloading = reload.reloads();
        let outcome = self.run_reload(&mut state, reload).await;
        self.psm = state;
        let outcome = outcome?;
        let mut report = RecoveryReport {
            corrupt_snapshots: outcome.report.corrupt,
            ..RecoveryReport::default()
        };
        report.snapshot_offset = if reloading {
            outcome.loaded
        } else {
            outcome
                .loaded
                .filter(|&offset| offset == self.psm.map_end_offset())
        };
        let from = self.psm.map_end_offset().max(start);
        let stored_index = self.storage.aborted_txns(start, i64::MAX).await?;
        let mut index_end = stored_index
            .last()
            .map(|entry| (entry.last_offset, entry.first_offset));
        let replayed = replay(&*self.storage, &mut self.psm, from, end).await?;
        report.batches_replayed = replayed.batches;
        for entry in replayed.aborted_index {
            let key = (entry.last_offset, entry.first_offset);
            if index_end.is_none_or(|last| key > last) {
                self.storage.append_aborted_txn(entry).await?;
                index_end = Some(key);
                report.index_entries_restored += 1;
            }
        }
        self.snapshot_log_end().await?;
        self.offline = None;
        Ok(report)
    }

    fn check_online(&self) -> Result<()> {
        match &self.offline {
            Some(reason) => Err(LogError::Offline {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }
}

/// What [`replay`] went through.
struct Replayed {
    batches: u64,
    /// Index entries for the transactions the replay saw aborted (including by barriers), in log order.
    aborted_index: Vec<AbortedTxn>,
}

/// Replays the batches of `[from, to)` into `state`, streaming them from storage chunk by chunk through producer
/// state's one replay (`ProducerStateManager::replay_batches`: REPLICATION origin, as Kafka's recovery does;
/// barriers apply by the same rule as live appends).
async fn replay(
    storage: &dyn PartitionStorage,
    state: &mut ProducerStateManager,
    from: i64,
    to: i64,
) -> Result<Replayed> {
    let mut replayed = Replayed {
        batches: 0,
        aborted_index: Vec::new(),
    };
    let mut offset = from;
    while offset < to {
        let batches = storage.read(offset, REPLAY_READ_BYTES).await?;
        let Some(last) = batches.last() else {
            break;
        };
        let next = last.next_offset();
        let within = batches.partition_point(|batch| batch.base_offset() < to);
        let counts = state
            .replay_batches(&batches[..within], &mut replayed.aborted_index)
            .map_err(|failed| LogError::Recovery {
                offset: failed.offset,
                source: failed.error,
            })?;
        replayed.batches += counts.batches;
        offset = next;
    }
    Ok(replayed)
}

fn invalid(index: usize, reason: impl Into<String>) -> LogError {
    LogError::InvalidBatch {
        index,
        reason: reason.into(),
    }
}

/// Spec §7.1 step 1 for a CLIENT batch: intact, offsets as a producer writes them, records consistent with the
/// header, no control batch.
fn validate_client_batch(batch: &RecordBatch) -> Result<()> {
    batch
        .verify_crc()
        .map_err(|source| LogError::CorruptBatch { index: 0, source })?;
    if batch.is_control() {
        return Err(invalid(0, "clients may not write control batches"));
    }
    if batch.base_offset() != 0 {
        return Err(invalid(
            0,
            format!("base offset {} from a client (must be 0)", batch.base_offset()),
        ));
    }
    let records = batch
        .records()
        .and_then(|records| records.check_offset_deltas())
        .map_err(|source| LogError::CorruptBatch { index: 0, source })?;
    let count = match records {
        OffsetDeltas::InOrder { records } => records,
        OffsetDeltas::OutOfPlace {
            position,
            offset_delta,
        } => {
            return Err(invalid(
                0,
                format!("record {position} has offset delta {offset_delta}"),
            ))
        }
    };
    if i64::try_from(count).ok() != Some(i64::from(batch.last_offset_delta()) + 1) {
        return Err(invalid(
            0,
            format!(
                "{count} records but last offset delta {}",
                batch.last_offset_delta()
            ),
        ));
    }
    Ok(())
}
