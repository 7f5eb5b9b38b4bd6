//! Power loss, simulated: the file-system backend runs a seeded workload on the power-loss simulator
//! (`storage_fs::sim`), the power fails at a chosen write, and the file system a reboot would find (synced data,
//! plus a random, possibly torn part of what was not synced) is opened again and checked:
//!
//! - everything acknowledged as durable is there byte for byte (batches after a sync, metadata, snapshots, the
//!   aborted-transaction index after a sync, the log start offset);
//! - nothing that survives without an acknowledgement is corrupt: every batch read back is one the workload wrote
//!   at that offset (and not one an acknowledged truncation removed), snapshots and metadata are whole or absent;
//! - the repair that opening makes is itself crash-safe: in a quarter of the crash points the power fails again
//!   during that first open, and the result is checked the same way.
//!
//! `a_removed_fsync_is_caught` shows the sweep can fail: with the log's, a temporary file's, the `.txnindex`'s, the
//! metadata journal's or the directories' syncs made to do nothing, it finds lost acknowledged data. A longer sweep: `cargo xtask crash --minutes N`
//! (sets `MIRRORLOG_POWER_LOSS_SECONDS`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use record_format::{AbortedTxn, RecordBatch};
use storage::{BlockingStore, Durability, OpenMode, PartitionId, StorageError};
use storage_fs::sim::{BrokenSync, SimFs, SimRng};
use storage_fs::{FsConfig, FsStorage};
use storage_testkit::conformance::batch;

const DATA_DIR: &str = "/data";
const METADATA_KEY: &str = "k";
/// Workload steps per seed.
const STEPS: usize = 120;

fn partition_id() -> PartitionId {
    PartitionId::new("power", 0).unwrap()
}

fn open_store(fs: &SimFs) -> Result<FsStorage, StorageError> {
    let config = FsConfig {
        segment_bytes: 2048,
        index_interval_bytes: 256,
        ..FsConfig::new(DATA_DIR)
    };
    FsStorage::open_on(config, Arc::new(fs.clone()))
}

fn snapshot_bytes(offset: i64, step: usize) -> Bytes {
    let mut bytes = format!("snapshot {offset} written at step {step};").into_bytes();
    bytes.resize(64 + step % 50, b'.');
    Bytes::from(bytes)
}

/// What the workload was told, split into what must be found after a crash and what may be.
#[derive(Debug, Default, Clone)]
struct Model {
    created: bool,
    /// The log as a clean reopen would show it: batch bytes by base offset.
    latest: BTreeMap<i64, Bytes>,
    /// Must be there: batches acknowledged by a sync and not since removed (or being removed).
    durable: BTreeMap<i64, Bytes>,
    /// May be there: every batch written at each offset that no acknowledged truncation removed.
    allowed: BTreeMap<i64, BTreeSet<Bytes>>,
    log_start: i64,
    /// Log start offsets a crash may leave (the acknowledged one and any being set).
    allowed_log_starts: BTreeSet<i64>,
    /// Must be there (the last acknowledged value), and the values that may be.
    metadata: Option<Bytes>,
    allowed_metadata: BTreeSet<Bytes>,
    /// Snapshots that must be there, and every snapshot written (offset → allowed bytes).
    snapshots: BTreeMap<i64, Bytes>,
    allowed_snapshots: BTreeMap<i64, BTreeSet<Bytes>>,
    /// Aborted-transaction entries: all appended (and not removed), and those a sync acknowledged.
    aborted: Vec<AbortedTxn>,
    durable_aborted: Vec<AbortedTxn>,
}

impl Model {
    fn log_end(&self) -> i64 {
        self.latest
            .iter()
            .next_back()
            .map_or(self.log_start, |(_, bytes)| next_offset(bytes))
            .max(self.log_start)
    }

    /// Drops what must be found at or above `offset` (a truncation is under way; it may or may not happen).
    fn may_lose_from(&mut self, offset: i64) {
        self.durable.split_off(&offset);
        self.durable_aborted
            .retain(|entry| entry.survives_truncation_to(offset));
    }

    /// An acknowledged truncation at `offset`: nothing at or above it may come back.
    fn truncated_to(&mut self, offset: i64) {
        self.may_lose_from(offset);
        self.latest.split_off(&offset);
        self.allowed.split_off(&offset);
        self.aborted.retain(|entry| entry.survives_truncation_to(offset));
    }
}

fn next_offset(bytes: &Bytes) -> i64 {
    RecordBatch::parse(bytes.clone()).unwrap().next_offset()
}

/// Runs the seeded workload until it ends or the first error (the power failing); returns what it was told.
fn run_workload(fs: &SimFs, seed: u64) -> Model {
    let mut model = Model::default();
    model.allowed_log_starts.insert(0);
    let _ = workload(fs, seed, &mut model);
    model
}

fn workload(fs: &SimFs, seed: u64, model: &mut Model) -> Result<(), StorageError> {
    let mut rng = SimRng::new(seed);
    let store = open_store(fs)?;
    let mut partition = store.create(&partition_id())?;
    model.created = true;
    let trace = std::env::var_os("MIRRORLOG_POWER_LOSS_TRACE").is_some();
    for step in 0..STEPS {
        let end = model.log_end();
        let choice = rng.below(100);
        if trace {
            eprintln!(
                "step {step}: op {choice}, log end {end}, writes so far {}",
                fs.stats().mutations
            );
        }
        match choice {
            0..=44 => {
                let mut offset = end;
                let run: Vec<RecordBatch> = (0..1 + rng.below(3))
                    .map(|_| {
                        let next = batch(
                            offset,
                            1 + rng.below(3) as u32,
                            20 + (step * 7 + seed as usize) % 90,
                        );
                        offset = next.next_offset();
                        next
                    })
                    .collect();
                for written in &run {
                    let bytes = written.as_bytes().clone();
                    model.latest.insert(written.base_offset(), bytes.clone());
                    model
                        .allowed
                        .entry(written.base_offset())
                        .or_default()
                        .insert(bytes);
                }
                partition.append(&run)?;
            }
            45..=59 => {
                partition.flush(Durability::Sync)?;
                model.durable = model.latest.clone();
                model.durable_aborted = model.aborted.clone();
            }
            60..=61 => partition.flush(Durability::Buffered)?,
            62..=63 => {
                // A restart without a crash: what the old process wrote and did not sync is still unsynced.
                drop(partition);
                partition = open_store(fs)?.open(&partition_id(), OpenMode::ReadWrite)?;
            }
            64..=71 => {
                let value = Bytes::from(format!("value of step {step}").repeat(1 + step % 4));
                model.allowed_metadata.insert(value.clone());
                partition.put_metadata(METADATA_KEY, &value)?;
                model.allowed_metadata = BTreeSet::from([value.clone()]);
                model.metadata = Some(value);
            }
            72..=77 => {
                let bytes = snapshot_bytes(end, step);
                model
                    .allowed_snapshots
                    .entry(end)
                    .or_default()
                    .insert(bytes.clone());
                model.snapshots.remove(&end);
                partition.put_snapshot(end, bytes.clone())?;
                model.snapshots.insert(end, bytes);
            }
            78..=80 => {
                if let Some(&offset) = model.snapshots.keys().next() {
                    model.snapshots.remove(&offset);
                    partition.delete_snapshot(offset)?;
                }
            }
            81..=87 => {
                if let Some((&marker, _)) = model.latest.range(model.log_start + 1..).next_back() {
                    let entry = AbortedTxn {
                        producer_id: step as i64,
                        first_offset: (marker - 1 - rng.below(5) as i64).max(model.log_start),
                        last_offset: marker,
                        last_stable_offset: marker - 1,
                    };
                    model.aborted.push(entry);
                    partition.append_aborted_txn(entry)?;
                }
            }
            88..=93 => {
                if let Some(offset) = model.pick_boundary(&mut rng) {
                    model.may_lose_from(offset);
                    partition.truncate_to(offset)?;
                    model.truncated_to(offset);
                }
            }
            94..=97 => {
                if let Some(offset) = model.pick_boundary(&mut rng) {
                    model.allowed_log_starts.insert(offset);
                    model.may_lose_below(offset);
                    partition.delete_before(offset)?;
                    model.log_start = offset;
                    model.allowed_log_starts = BTreeSet::from([offset]);
                }
            }
            _ => {
                let offset = end + 1 + rng.below(10) as i64;
                model.allowed_log_starts.insert(offset);
                // Interrupted, it may have removed only some of the old segments: the log is then a suffix of the
                // old one, starting at a segment boundary (any batch's base offset, as far as the model knows,
                // (or the log end: the last segment may be empty).
                model.allowed_log_starts.extend(model.latest.keys().copied());
                model.allowed_log_starts.insert(end);
                model.may_lose_from(i64::MIN);
                partition.truncate_fully_and_start_at(offset)?;
                model.truncated_to(i64::MIN);
                model.log_start = offset;
                model.allowed_log_starts = BTreeSet::from([offset]);
            }
        }
    }
    Ok(())
}

impl Model {
    /// A batch boundary strictly inside the log (above its start), if there is one.
    fn pick_boundary(&self, rng: &mut SimRng) -> Option<i64> {
        let bases: Vec<i64> = self
            .latest
            .range(self.log_start + 1..)
            .map(|(base, _)| *base)
            .collect();
        (!bases.is_empty()).then(|| bases[rng.below(bases.len() as u64) as usize])
    }

    /// A log start offset is moving to `offset`: batches below it may go.
    fn may_lose_below(&mut self, offset: i64) {
        self.durable = self.durable.split_off(&offset);
    }
}

/// Opens the crashed file system and checks it against the model.
fn verify(fs: &SimFs, model: &Model) -> Result<(), String> {
    let store = open_store(fs).map_err(|e| format!("opening the store: {e}"))?;
    let partition = match store.open(&partition_id(), OpenMode::ReadWrite) {
        Ok(partition) => partition,
        Err(StorageError::NotFound(_)) if !model.created => return Ok(()),
        Err(e) => return Err(format!("reopening the partition: {e}")),
    };
    let log_start = partition.log_start_offset();
    let log_end = partition.log_end_offset();
    if !model.allowed_log_starts.contains(&log_start) {
        return Err(format!(
            "log start {log_start}, expected one of {:?}",
            model.allowed_log_starts
        ));
    }
    // Every batch read back is one the workload wrote there; offsets contiguous.
    let mut found = BTreeMap::new();
    let mut offset = log_start;
    while offset < log_end {
        let batches = partition
            .read(offset, 1 << 20)
            .map_err(|e| format!("reading at {offset}: {e}"))?;
        if batches.is_empty() {
            return Err(format!(
                "nothing readable at {offset} below the log end {log_end}"
            ));
        }
        for read in batches {
            let base = read.base_offset();
            if !model
                .allowed
                .get(&base)
                .is_some_and(|set| set.contains(read.as_bytes()))
            {
                return Err(format!("the batch at {base} is not one the workload wrote there"));
            }
            offset = read.next_offset();
            found.insert(base, read.as_bytes().clone());
        }
    }
    for (base, bytes) in model.durable.range(log_start..) {
        if found.get(base) != Some(bytes) {
            return Err(format!(
                "acknowledged batch at {base} lost (log {log_start}..{log_end}, found {})",
                found.contains_key(base)
            ));
        }
    }
    let metadata = partition
        .metadata(METADATA_KEY)
        .map_err(|e| format!("reading metadata: {e}"))?
        .map(Bytes::from);
    match (&metadata, &model.metadata) {
        (None, Some(_)) => return Err("acknowledged metadata lost".into()),
        (Some(value), _) if !model.allowed_metadata.contains(value) => {
            return Err(format!(
                "metadata holds {value:?}, never acknowledged nor being written"
            ))
        }
        _ => {}
    }
    let snapshots = partition.snapshot_offsets().map_err(|e| e.to_string())?;
    for &at in &snapshots {
        let (found_at, bytes) = partition
            .snapshot_at_or_below(at)
            .map_err(|e| format!("reading snapshot {at}: {e}"))?
            .ok_or_else(|| format!("snapshot {at} listed but missing"))?;
        if found_at != at
            || !model
                .allowed_snapshots
                .get(&at)
                .is_some_and(|set| set.contains(&bytes))
        {
            return Err(format!("snapshot {at} is not whole ({} bytes)", bytes.len()));
        }
    }
    for at in model.snapshots.keys() {
        if !snapshots.contains(at) {
            return Err(format!("acknowledged snapshot {at} lost"));
        }
    }
    let aborted = partition
        .aborted_txns(i64::MIN, i64::MAX)
        .map_err(|e| format!("reading the aborted index: {e}"))?;
    for entry in &aborted {
        if !model.aborted.contains(entry) {
            return Err(format!("aborted index holds {entry:?}, never appended"));
        }
        if !entry.survives_truncation_to(log_end) {
            return Err(format!(
                "aborted index holds {entry:?} past the log end {log_end}"
            ));
        }
    }
    for entry in &model.durable_aborted {
        if entry.last_offset >= log_start && !aborted.contains(entry) {
            return Err(format!("acknowledged aborted-index entry {entry:?} lost"));
        }
    }
    Ok(())
}

/// The generator of one crash point's outcome (so a failing point can be replayed alone).
fn crash_rng(seed: u64, at: u64) -> SimRng {
    SimRng::new(seed.wrapping_mul(0x1_0000_0001) ^ at)
}

/// What a sweep did.
#[derive(Debug, Default)]
struct Sweep {
    crash_points: u64,
    double_crashes: u64,
    failures: Vec<String>,
}

/// Crashes one seed's workload at `points` write operations (all of them when it has fewer), checking each.
fn sweep_seed(seed: u64, points: u64, broken: Option<&BrokenSync>, sweep: &mut Sweep) {
    let fs = SimFs::new();
    if let Some(broken) = broken {
        fs.break_sync(broken.clone());
    }
    run_workload(&fs, seed);
    let mutations = fs.stats().mutations;
    let mut points_rng = SimRng::new(seed ^ 0x5eed);
    for i in 0..points.min(mutations) {
        let at = if points >= mutations {
            i + 1
        } else {
            1 + points_rng.below(mutations)
        };
        let fs = SimFs::new();
        if let Some(broken) = broken {
            fs.break_sync(broken.clone());
        }
        fs.power_fails_at(at);
        let model = run_workload(&fs, seed);
        let mut rng = crash_rng(seed, at);
        let mut crashed = fs.crash(&mut rng);
        sweep.crash_points += 1;
        if rng.below(4) == 0 {
            // The power fails again while the first open repairs what the first loss left.
            let probe = crashed.crash(&mut rng);
            let _ = verify(&probe, &model);
            let repairs = probe.stats().mutations;
            if repairs > 0 {
                let again = crashed.crash(&mut rng);
                again.power_fails_at(1 + rng.below(repairs));
                let _ = verify(&again, &model);
                crashed = again.crash(&mut rng);
                sweep.double_crashes += 1;
            }
        }
        if let Err(problem) = verify(&crashed, &model) {
            sweep
                .failures
                .push(format!("seed {seed}, power failed at write {at}: {problem}"));
        }
        // Opening again after the repair finds the same (the repair is idempotent).
        if let Err(problem) = verify(&crashed, &model) {
            sweep
                .failures
                .push(format!("seed {seed}, write {at}, second open: {problem}"));
        }
    }
}

/// Replays one crash point and prints what the reboot found: a debugging aid, not a test
/// (`MIRRORLOG_POWER_LOSS_CASE=seed:write cargo test -p storage-fs --test power_loss -- --ignored
/// replay_one_crash_point --nocapture`); without the case it fails rather than pass having checked nothing.
#[test]
#[ignore = "a debugging aid: set MIRRORLOG_POWER_LOSS_CASE=seed:write"]
fn replay_one_crash_point() {
    let Some((seed, at)) = std::env::var("MIRRORLOG_POWER_LOSS_CASE").ok().and_then(|case| {
        case.split_once(':')
            .map(|(a, b)| (a.parse().unwrap(), b.parse().unwrap()))
    }) else {
        panic!("set MIRRORLOG_POWER_LOSS_CASE=seed:write (a failure of the power-loss sweep names one)");
    };
    let fs = SimFs::new();
    fs.power_fails_at(at);
    let model = run_workload(&fs, seed);
    let crashed = fs.crash(&mut crash_rng(seed, at));
    eprintln!(
        "before:\n{}\nafter the crash:\n{}",
        fs.listing(),
        crashed.listing()
    );
    eprintln!(
        "model: log start {} durable {:?}",
        model.log_start,
        model.durable.keys().collect::<Vec<_>>()
    );
    if let Err(problem) = verify(&crashed, &model) {
        panic!("seed {seed}, power failed at write {at}: {problem}");
    }
}

#[test]
fn every_acknowledged_write_survives_power_loss_at_every_sampled_write() {
    let budget = std::env::var("MIRRORLOG_POWER_LOSS_SECONDS")
        .ok()
        .and_then(|text| text.parse::<u64>().ok());
    let started = Instant::now();
    let mut sweep = Sweep::default();
    let mut seed = 0;
    loop {
        sweep_seed(seed, 60, None, &mut sweep);
        seed += 1;
        let done = match budget {
            Some(seconds) => started.elapsed() >= Duration::from_secs(seconds),
            None => seed >= 40,
        };
        if done || !sweep.failures.is_empty() {
            break;
        }
    }
    eprintln!(
        "power-loss sweep: {} seeds, {} crash points ({} with a second loss during recovery) in {:.1?}",
        seed,
        sweep.crash_points,
        sweep.double_crashes,
        started.elapsed()
    );
    assert!(
        sweep.failures.is_empty(),
        "{:#?}",
        &sweep.failures[..sweep.failures.len().min(5)]
    );
    assert!(sweep.crash_points > 1000, "the sweep exercised too little");
}

/// The test-only switch: each kind of sync made to do nothing must make the sweep fail.
#[test]
fn a_removed_fsync_is_caught() {
    for broken in [
        BrokenSync::FilesEndingWith(".log".into()),
        BrokenSync::FilesEndingWith(".tmp".into()),
        BrokenSync::FilesEndingWith(".txnindex".into()),
        // The metadata journal's appended frames (ADR 0019).
        BrokenSync::FilesEndingWith("mirrorlog.metadata".into()),
        BrokenSync::Directories,
    ] {
        let mut sweep = Sweep::default();
        for seed in 0..20 {
            sweep_seed(seed, 40, Some(&broken), &mut sweep);
            if !sweep.failures.is_empty() {
                break;
            }
        }
        assert!(
            !sweep.failures.is_empty(),
            "with {broken:?} the sweep found nothing in {} crash points",
            sweep.crash_points
        );
        eprintln!(
            "{broken:?}: caught after {} crash points: {}",
            sweep.crash_points, sweep.failures[0]
        );
    }
}

/// Opening a partition whose middle segment is torn drops every later segment and cuts the tail: the power failing
/// at any write of that repair (and a crash of what it had not synced) must leave a log that is a prefix of the
/// original, without a hole, and the next open must finish the repair.
#[test]
fn repairing_a_torn_middle_segment_survives_power_loss_at_every_write() {
    use storage_fs::vfs::{OpenFor, Vfs};
    let build = || {
        let fs = SimFs::new();
        let store = open_store(&fs).unwrap();
        let mut partition = store.create(&partition_id()).unwrap();
        let mut offset = 0;
        for _ in 0..30 {
            let next = batch(offset, 2, 60);
            offset = next.next_offset();
            partition.append(&[next]).unwrap();
        }
        partition.flush(Durability::Sync).unwrap();
        drop(partition);
        let dir = std::path::Path::new(DATA_DIR).join(partition_id().dir_name());
        let mut logs: Vec<String> = fs
            .read_dir(&dir)
            .unwrap()
            .into_iter()
            .map(|entry| entry.name)
            .filter(|name| name.ends_with(".log"))
            .collect();
        logs.sort();
        assert!(logs.len() >= 3, "the test needs a middle segment");
        let middle = dir.join(&logs[1]);
        let mut file = fs.open(&middle, OpenFor::Append).unwrap();
        let length = file.size().unwrap();
        file.set_len(length - 3).unwrap();
        file.sync().unwrap();
        fs
    };
    let expected: Vec<RecordBatch> = {
        let fs = build().crash(&mut SimRng::new(1));
        let partition = open_store(&fs)
            .unwrap()
            .open(&partition_id(), OpenMode::ReadWrite)
            .unwrap();
        assert!(!partition.open_report().dropped_segments.is_empty());
        partition.read(0, usize::MAX).unwrap()
    };
    let repair_writes = {
        let fs = build();
        let before = fs.stats().mutations;
        open_store(&fs)
            .unwrap()
            .open(&partition_id(), OpenMode::ReadWrite)
            .unwrap();
        fs.stats().mutations - before
    };
    assert!(repair_writes > 3, "the repair made {repair_writes} writes");
    for at in 1..=repair_writes {
        for variant in 0..4 {
            let fs = build();
            fs.power_fails_at(fs.stats().mutations + at);
            assert!(open_store(&fs)
                .and_then(|s| s.open(&partition_id(), OpenMode::ReadWrite))
                .is_err());
            let rebooted = fs.crash(&mut SimRng::new(at * 7 + variant));
            let partition = open_store(&rebooted)
                .unwrap()
                .open(&partition_id(), OpenMode::ReadWrite)
                .unwrap();
            let found = partition.read(0, usize::MAX).unwrap();
            assert_eq!(
                partition.log_end_offset(),
                found.last().map_or(0, RecordBatch::next_offset)
            );
            assert_eq!(
                found.len(),
                expected.len(),
                "power lost at repair write {at}: a different log"
            );
            for (a, b) in found.iter().zip(&expected) {
                assert_eq!(a.as_bytes(), b.as_bytes(), "power lost at repair write {at}");
            }
        }
    }
}
