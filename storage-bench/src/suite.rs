//! The macro benchmark behind `cargo xtask bench`: fixed work per measurement, the same on every backend, each
//! figure next to a baseline measured in the same run (redb's `redb-bench` pattern).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mirror_fsm::{Event, LocalFetcher, MirrorDriver};
use partition_log::{LogConfig, PartitionLog};
use producer_state::{AppendOrigin, ProducerStateManager, PsmConfig, TransactionVersion};
use record_format::{BatchBuilder, RecordBatch};
use storage::{Durability, PartitionId, PartitionStorage, Storage};

use crate::report::{Measurement, Skipped};
use crate::{append_raw, batches, read_raw};

/// How much work each measurement does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// MiB appended per append run (and read back).
    pub append_mib: usize,
    /// Producers in the snapshot measurement.
    pub snapshot_producers: i64,
    /// Batches in the recovered partition.
    pub recovery_batches: usize,
    /// Batches appended through the partition log.
    pub log_batches: usize,
    /// MiB mirrored.
    pub mirror_mib: usize,
    /// Partitions failed over.
    pub failover_partitions: usize,
    /// Runs per figure.
    pub runs: usize,
    /// Runs per mirroring figure (`mirror-copy`, `mirror-start`, `mirror-copy-floor`): a catch-up and its raw copy
    /// each take tens of milliseconds on fs, and single runs spread from 0.4 to 1.1 on this machine's virtual
    /// disk (docs/benchmarks.md, eleventh session), so three runs' median did not say which side of 0.8 a build is.
    pub mirror_runs: usize,
}

impl Sizes {
    /// The full run.
    pub const FULL: Sizes = Sizes {
        append_mib: 64,
        snapshot_producers: 100_000,
        recovery_batches: 1_000_000,
        log_batches: 100_000,
        mirror_mib: 64,
        failover_partitions: 1_000,
        runs: 3,
        mirror_runs: 9,
    };
    /// `--quick`: a fraction of the work, one run.
    pub const QUICK: Sizes = Sizes {
        append_mib: 8,
        snapshot_producers: 20_000,
        recovery_batches: 50_000,
        log_batches: 10_000,
        mirror_mib: 8,
        failover_partitions: 100,
        runs: 1,
        mirror_runs: 1,
    };
    /// Tests: tiny sizes.
    pub const TINY: Sizes = Sizes {
        append_mib: 1,
        snapshot_producers: 500,
        recovery_batches: 500,
        log_batches: 200,
        mirror_mib: 1,
        failover_partitions: 4,
        runs: 1,
        mirror_runs: 1,
    };
}

/// Opens a store of a backend in a directory.
pub type Opener = Arc<dyn Fn(&Path) -> Box<dyn Storage> + Send + Sync>;

/// A backend under test.
#[derive(Clone)]
pub struct BenchBackend {
    /// Its name in the report.
    pub name: String,
    /// True when a store reopened from its directory finds what was written (false: memory).
    pub persistent: bool,
    /// Opens a store.
    pub open: Opener,
}

impl std::fmt::Debug for BenchBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BenchBackend")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The backends named in `names` that this build holds (through the `storage-config` registry), and the others
/// with the reason they are skipped.
pub fn registry(names: &[String]) -> (Vec<BenchBackend>, Vec<Skipped>) {
    let mut backends = Vec::new();
    let mut skipped = Vec::new();
    for name in names {
        match name.parse::<storage_config::Backend>() {
            Err(error) => skipped.push(Skipped {
                backend: name.clone(),
                reason: error.to_string(),
            }),
            Ok(backend) if !backend.is_compiled() => skipped.push(Skipped {
                backend: name.clone(),
                reason: format!("not in this build (cargo feature `{name}`)"),
            }),
            Ok(backend) => {
                let persistent = backend != storage_config::Backend::Memory;
                let open: Opener = Arc::new(move |dir: &Path| {
                    storage_config::StorageConfig::for_backend(backend, dir)
                        .open()
                        .unwrap_or_else(|error| panic!("opening {backend} in {}: {error}", dir.display()))
                });
                backends.push(BenchBackend {
                    name: name.clone(),
                    persistent,
                    open,
                });
            }
        }
    }
    (backends, skipped)
}

fn partition(name: &str) -> PartitionId {
    PartitionId::new(name, 0).unwrap()
}

fn mib_per_s(bytes: usize, elapsed: Duration) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / elapsed.as_secs_f64()
}

/// `count` things done in each of two times, as rates.
fn per_second(count: usize, (ours, baseline): (Duration, Duration)) -> (f64, f64) {
    (
        count as f64 / ours.as_secs_f64(),
        count as f64 / baseline.as_secs_f64(),
    )
}

fn ms(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1e3
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Every measurement's id, in run order (the ids `--only` takes).
pub const MEASUREMENTS: [&str; 16] = [
    "append-1k-nosync",
    "append-1k-engine-floor",
    "append-1k-sync",
    "append-64k-nosync",
    "append-64k-sync",
    "read-sequential",
    "snapshot",
    "recovery-from-snapshot",
    "recovery-replay",
    "log-appends",
    "log-appends-floor",
    "mirror-copy",
    "mirror-start",
    "mirror-copy-floor",
    "mirror-copy-engine-floor",
    "failover",
];

/// Measurements one run yields together (a mirror's start and its catch-up): asking for one of a group and
/// then another would repeat the work.
pub const MEASURED_TOGETHER: [&[&str]; 1] = [&["mirror-copy", "mirror-start"]];

/// Runs the selected measurements (`only` empty: all) on every backend; `progress` hears each (id, backend)
/// before it starts.
pub fn run(
    sizes: Sizes,
    backends: &[BenchBackend],
    only: &[String],
    progress: &mut dyn FnMut(&str, &str),
) -> Vec<Measurement> {
    let selected = |id: &str| only.is_empty() || only.iter().any(|o| o == id);
    let mut out = Vec::new();
    for (kib, sync) in [(1, false), (1, true), (64, false), (64, true)] {
        if (kib, sync) == (1, true) && selected("append-1k-engine-floor") {
            out.push(engine_floor(sizes, backends, progress, false));
        }
        let id = format!("append-{kib}k-{}", if sync { "sync" } else { "nosync" });
        if !selected(&id) {
            continue;
        }
        let mut m = measurement(
            &id,
            &format!(
                "Appends, {kib} KiB batches, {}",
                if sync { "synced every 1 MiB" } else { "no sync" }
            ),
            "MiB/s",
            true,
            Some("a raw sequential file write of the same bytes, same sync pattern"),
            None,
            sizes.runs,
        );
        let work = batches(kib * 1024, sizes.append_mib << 20);
        let bytes: usize = work.iter().map(RecordBatch::size).sum();
        let sync_every = sync.then_some(1 << 20);
        per_run(&mut m, backends, progress, |backend| {
            let dir = tempfile::tempdir().unwrap();
            let store = (backend.open)(dir.path());
            let ours = mib_per_s(bytes, runtime().block_on(append(&*store, &work, sync_every)));
            let raw_dir = tempfile::tempdir().unwrap();
            (
                ours,
                mib_per_s(bytes, append_raw(raw_dir.path(), &work, sync_every)),
            )
        });
        out.push(m);
    }
    if selected("read-sequential") {
        let mut m = measurement(
            "read-sequential",
            "Sequential read of the whole log",
            "MiB/s",
            true,
            Some("a raw sequential read of the backend's files (memory: of a file of the same bytes)"),
            None,
            sizes.runs,
        );
        let work = batches(16 * 1024, sizes.append_mib << 20);
        for backend in backends {
            progress("read-sequential", &backend.name);
            let dir = tempfile::tempdir().unwrap();
            let rt = runtime();
            let mut kept = Some((backend.open)(dir.path()));
            if let Some(store) = &kept {
                rt.block_on(append(&**store, &work, Some(16 << 20)));
            }
            if backend.persistent {
                // Closed before each reopen (sled and RocksDB lock their directory).
                kept = None;
            }
            let raw_dir = raw_copy_dir(backend, dir.path(), &work);
            let (mut ours, mut raw) = (Vec::new(), Vec::new());
            for _ in 0..sizes.runs {
                let reopened = kept.is_none().then(|| (backend.open)(dir.path()));
                let Some(store) = reopened.as_ref().or(kept.as_ref()) else {
                    continue;
                };
                let (elapsed, bytes) = rt.block_on(read_all(&**store));
                ours.push(mib_per_s(bytes, elapsed));
                let (raw_elapsed, raw_bytes) = read_raw(raw_dir.as_deref().unwrap_or(dir.path()));
                raw.push(mib_per_s(raw_bytes, raw_elapsed));
                crate::heartbeat();
            }
            m.add(&backend.name, &ours, Some(&raw));
        }
        out.push(m);
    }
    if selected("snapshot") {
        let mut m = measurement(
            "snapshot",
            &format!(
                "Producer-state snapshot of {} producers: write (synced) + read",
                sizes.snapshot_producers
            ),
            "ms",
            false,
            Some("a raw file write + fsync + read of the same bytes"),
            None,
            sizes.runs,
        );
        let snapshot = snapshot_bytes(sizes.snapshot_producers);
        per_run(&mut m, backends, progress, |backend| {
            let dir = tempfile::tempdir().unwrap();
            let store = (backend.open)(dir.path());
            let ours = ms(runtime().block_on(snapshot_round_trip(&*store, &snapshot)));
            let raw_dir = tempfile::tempdir().unwrap();
            (ours, ms(raw_round_trip(raw_dir.path(), &snapshot)))
        });
        out.push(m);
    }
    for (id, from_snapshot) in [("recovery-from-snapshot", true), ("recovery-replay", false)] {
        if !selected(id) {
            continue;
        }
        let mut m = measurement(
            id,
            &format!(
                "Opening a partition of {} batches {}",
                sizes.recovery_batches,
                if from_snapshot {
                    "from its snapshot (clean shutdown)"
                } else {
                    "without a snapshot (full replay)"
                }
            ),
            "ms",
            false,
            Some("a raw read of the partition's files (memory: of a file of the same bytes)"),
            None,
            sizes.runs,
        );
        for backend in backends {
            progress(id, &backend.name);
            let dir = tempfile::tempdir().unwrap();
            let rt = runtime();
            let store = (backend.open)(dir.path());
            let work = rt.block_on(fill_log(&*store, sizes.recovery_batches));
            // Persistent stores are opened again from their directory, as after a restart.
            let kept = (!backend.persistent).then_some(store);
            let raw_dir = raw_copy_dir(backend, dir.path(), &work);
            let (mut ours, mut raw) = (Vec::new(), Vec::new());
            for _ in 0..sizes.runs {
                if !from_snapshot {
                    // Every run replays: the previous open left a snapshot at the log end behind.
                    rt.block_on(drop_snapshots(backend, dir.path(), kept.as_deref()));
                }
                ours.push(ms(rt.block_on(open_log(backend, dir.path(), kept.as_deref()))));
                raw.push(ms(read_raw(raw_dir.as_deref().unwrap_or(dir.path())).0));
                crate::heartbeat();
            }
            m.add(&backend.name, &ours, Some(&raw));
        }
        out.push(m);
    }
    if selected("log-appends") {
        let mut m = measurement(
            "log-appends",
            "Client appends through the partition log (1 KiB batches, 1,000 idempotent producers)",
            "batches/s",
            true,
            Some("the same batches appended straight to the backend's partition"),
            Some(0.87),
            sizes.runs,
        );
        per_run(&mut m, backends, progress, |backend| {
            per_second(
                sizes.log_batches,
                runtime().block_on(log_appends(backend, sizes.log_batches)),
            )
        });
        out.push(m);
    }
    if selected("log-appends-floor") {
        let mut m = measurement(
            "log-appends-floor",
            "The floor under client appends: the checks Kafka makes on every client batch (CRC, record walk), then the raw append",
            "batches/s",
            true,
            Some("the same batches appended straight to the backend's partition"),
            None,
            sizes.runs,
        );
        per_run(&mut m, backends, progress, |backend| {
            per_second(
                sizes.log_batches,
                runtime().block_on(checked_appends(backend, sizes.log_batches)),
            )
        });
        out.push(m);
    }
    if selected("mirror-copy") || selected("mirror-start") {
        // One run measures both: a mirror started, then caught up.
        let mut copy = measurement(
            "mirror-copy",
            "Mirroring: a started mirror catching up from a source partition (1 KiB batches)",
            "MiB/s",
            true,
            Some("a raw copy of the same bytes from one file to another"),
            Some(0.8),
            sizes.mirror_runs,
        );
        let mut start = measurement(
            "mirror-start",
            "Starting a mirror: a new destination partition brought to MIRRORING (created, state persisted, aligned)",
            "ms",
            false,
            Some("one durable write: a new file of one 1 KiB batch, synced with its directory"),
            None,
            sizes.mirror_runs,
        );
        for backend in backends {
            progress("mirror-copy", &backend.name);
            let (mut copied, mut raw_copied, mut started, mut durable) = (vec![], vec![], vec![], vec![]);
            for _ in 0..sizes.mirror_runs {
                let run = runtime().block_on(mirror_copy(backend, sizes.mirror_mib));
                copied.push(mib_per_s(run.bytes, run.catch_up));
                raw_copied.push(mib_per_s(run.bytes, run.raw_copy));
                started.push(ms(run.start));
                let dir = tempfile::tempdir().unwrap();
                durable.push(ms(durable_write(dir.path(), &client_batch(0, 0, 1024 - 90))));
                crate::heartbeat();
            }
            copy.add(&backend.name, &copied, Some(&raw_copied));
            start.add(&backend.name, &started, Some(&durable));
        }
        if selected("mirror-copy") {
            out.push(copy);
        }
        if selected("mirror-start") {
            out.push(start);
        }
    }
    if selected("mirror-copy-floor") {
        let mut m = measurement(
            "mirror-copy-floor",
            "The floor under mirroring: a file copy by a reading and a writing thread that check every batch's CRC between them",
            "MiB/s",
            true,
            Some("a raw copy of the same bytes from one file to another"),
            None,
            sizes.mirror_runs,
        );
        per_run(&mut m, backends, progress, |_backend| {
            let (elapsed, bytes, raw_elapsed) = checked_copy(sizes.mirror_mib);
            (mib_per_s(bytes, elapsed), mib_per_s(bytes, raw_elapsed))
        });
        out.push(m);
    }
    if selected("mirror-copy-engine-floor") {
        out.push(engine_floor(sizes, backends, progress, true));
    }
    if selected("failover") {
        let n = sizes.failover_partitions;
        let mut m = measurement(
            "failover",
            &format!(
                "Failover (STOPPING with the barrier) of {n} mirrored partitions, {FAILOVER_PARALLELISM} at a time"
            ),
            "ms",
            false,
            Some("the budget: 1 ms per partition (10,000 partitions in 10 s)"),
            Some(1.0),
            sizes.runs,
        );
        for backend in backends {
            progress("failover", &backend.name);
            let mut ours = Vec::new();
            for _ in 0..sizes.runs {
                ours.push(ms(runtime().block_on(failover(backend, n))));
                crate::heartbeat();
            }
            let budget = vec![n as f64; ours.len()];
            m.add(&backend.name, &ours, Some(&budget));
        }
        out.push(m);
    }
    out
}

/// An engine's raw writes of `batches`, a write per so many bytes (see [`crate::engine_floor`]).
type EngineWrites = fn(&Path, &[RecordBatch], usize) -> Option<Duration>;

/// The engine under a backend that has one of its own (sled, RocksDB), if this build holds it.
fn engine_of(backend: &BenchBackend) -> Option<EngineWrites> {
    let engine: EngineWrites = match backend.name.as_str() {
        "sled" => crate::engine_floor::sled,
        "rocks" => crate::engine_floor::rocks,
        _ => return None,
    };
    let probe = tempfile::tempdir().unwrap();
    let one = batches(1024, 1024);
    engine(probe.path(), &one, 1024).map(|_| engine)
}

/// `append-1k-engine-floor` (writes of 64 KiB, against a raw file write) or `mirror-copy-engine-floor` (writes of
/// 1 MiB, against a raw file copy) on the backends with an engine of their own; see [`crate::engine_floor`].
fn engine_floor(
    sizes: Sizes,
    backends: &[BenchBackend],
    progress: &mut dyn FnMut(&str, &str),
    mirroring: bool,
) -> Measurement {
    let mut m = if mirroring {
        measurement(
            "mirror-copy-engine-floor",
            "The engines' floor under mirroring: the same 1 KiB batches put straight into sled (flushed every MiB) \
             or RocksDB (a write per MiB), no source read, no sync",
            "MiB/s",
            true,
            Some("a raw copy of the same bytes from one file to another"),
            None,
            sizes.mirror_runs,
        )
    } else {
        measurement(
            "append-1k-engine-floor",
            "The engines' floor under 1 KiB appends: the same batches put straight into sled (flushed every MiB) \
             or RocksDB (a write per 64 KiB), no sync",
            "MiB/s",
            true,
            Some("a raw sequential file write of the same bytes, no sync"),
            None,
            sizes.runs,
        )
    };
    let mib = if mirroring {
        sizes.mirror_mib
    } else {
        sizes.append_mib
    };
    let write_bytes = if mirroring { 1 << 20 } else { 64 << 10 };
    let work = batches(1024, mib << 20);
    let bytes: usize = work.iter().map(RecordBatch::size).sum();
    for backend in backends {
        let Some(engine) = engine_of(backend) else {
            continue;
        };
        progress(&m.id.clone(), &backend.name);
        let (ours, raw): (Vec<f64>, Vec<f64>) = (0..m.runs)
            .map(|_| {
                let dir = tempfile::tempdir().unwrap();
                let elapsed = engine(dir.path(), &work, write_bytes).unwrap_or_else(|| {
                    panic!("{}'s engine opened for the probe, not for the run", backend.name)
                });
                let raw_dir = tempfile::tempdir().unwrap();
                let raw = if mirroring {
                    append_raw(raw_dir.path(), &work, None);
                    sync_file(&raw_dir.path().join("raw.log"));
                    raw_copy_baseline(&raw_dir.path().join("raw.log"), raw_dir.path())
                } else {
                    append_raw(raw_dir.path(), &work, None)
                };
                crate::heartbeat();
                (mib_per_s(bytes, elapsed), mib_per_s(bytes, raw))
            })
            .unzip();
        m.add(&backend.name, &ours, Some(&raw));
    }
    m
}

/// For every backend, `runs` runs of `one` (each returning the backend's figure and its baseline's, measured
/// together), added to `m`.
fn per_run(
    m: &mut Measurement,
    backends: &[BenchBackend],
    progress: &mut dyn FnMut(&str, &str),
    mut one: impl FnMut(&BenchBackend) -> (f64, f64),
) {
    for backend in backends {
        progress(&m.id.clone(), &backend.name);
        let (ours, raw): (Vec<f64>, Vec<f64>) = (0..m.runs)
            .map(|_| {
                let figures = one(backend);
                crate::heartbeat();
                figures
            })
            .unzip();
        m.add(&backend.name, &ours, Some(&raw));
    }
}

fn measurement(
    id: &str,
    title: &str,
    unit: &str,
    higher_is_better: bool,
    baseline: Option<&str>,
    target_ratio: Option<f64>,
    runs: usize,
) -> Measurement {
    Measurement {
        id: id.to_owned(),
        title: title.to_owned(),
        unit: unit.to_owned(),
        higher_is_better,
        baseline: baseline.map(str::to_owned),
        target_ratio,
        runs,
        figures: Vec::new(),
    }
}

/// For a backend without files (memory), a directory holding the same bytes in one file, so the raw baseline
/// reads what the backend holds.
fn raw_copy_dir(backend: &BenchBackend, _dir: &Path, work: &[RecordBatch]) -> Option<std::path::PathBuf> {
    if backend.persistent {
        return None;
    }
    let dir = tempfile::tempdir().unwrap().keep();
    append_raw(&dir, work, None);
    Some(dir)
}

async fn append(store: &dyn Storage, work: &[RecordBatch], sync_every: Option<usize>) -> Duration {
    let mut partition = store.create(&partition("bench")).await.unwrap();
    let started = Instant::now();
    let mut since = 0;
    for batch in work {
        partition.append(std::slice::from_ref(batch)).await.unwrap();
        since += batch.size();
        if sync_every.is_some_and(|every| since >= every) {
            partition.flush(Durability::Sync).await.unwrap();
            since = 0;
        }
    }
    let last = if sync_every.is_some() {
        Durability::Sync
    } else {
        Durability::Buffered
    };
    partition.flush(last).await.unwrap();
    started.elapsed()
}

async fn read_all(store: &dyn Storage) -> (Duration, usize) {
    let partition = store.open(&partition("bench")).await.unwrap();
    let started = Instant::now();
    let (mut offset, mut bytes) = (partition.log_start_offset(), 0);
    while offset < partition.log_end_offset() {
        let batches = partition.read(offset, 1 << 20).await.unwrap();
        let Some(last) = batches.last() else {
            break;
        };
        offset = last.next_offset();
        bytes += batches.iter().map(RecordBatch::size).sum::<usize>();
    }
    (started.elapsed(), bytes)
}

/// A producer-state snapshot of `producers` producers (each with one batch).
fn snapshot_bytes(producers: i64) -> Vec<u8> {
    let mut psm = ProducerStateManager::new(PsmConfig::default());
    let work: Vec<RecordBatch> = (0..producers)
        .map(|producer| {
            let mut builder = BatchBuilder::new().base_offset(producer).producer(producer, 0, 0);
            builder.add(1_000, None, Some(b"v"), &[]);
            builder.build().unwrap()
        })
        .collect();
    let mut aborted = Vec::new();
    psm.replay_batches(&work, &mut aborted).unwrap();
    psm.take_snapshot_bytes().unwrap().1
}

async fn snapshot_round_trip(store: &dyn Storage, snapshot: &[u8]) -> Duration {
    let mut partition = store.create(&partition("snap")).await.unwrap();
    let bytes = Bytes::copy_from_slice(snapshot);
    let started = Instant::now();
    partition.put_snapshot(100, bytes).await.unwrap();
    partition.flush(Durability::Sync).await.unwrap();
    let (_, read) = partition.snapshot_at_or_below(100).await.unwrap().unwrap();
    assert_eq!(read.len(), snapshot.len());
    started.elapsed()
}

fn raw_round_trip(dir: &Path, snapshot: &[u8]) -> Duration {
    use std::io::{Read, Write};
    let path = dir.join("raw.snapshot");
    let started = Instant::now();
    let mut file = std::fs::File::create(&path).unwrap();
    file.write_all(snapshot).unwrap();
    file.sync_all().unwrap();
    let mut read = Vec::with_capacity(snapshot.len());
    std::fs::File::open(&path)
        .unwrap()
        .read_to_end(&mut read)
        .unwrap();
    assert_eq!(read.len(), snapshot.len());
    started.elapsed()
}

fn log_config() -> LogConfig {
    LogConfig {
        producer_state: PsmConfig {
            cluster_id: Some("bench".to_owned()),
            ..PsmConfig::default()
        },
        ..LogConfig::default()
    }
}

fn client_batch(producer: i64, sequence: i32, value_len: usize) -> RecordBatch {
    let value = vec![b'b'; value_len];
    let mut builder = BatchBuilder::new().producer(producer, 0, sequence);
    builder.add(1_000, Some(b"key"), Some(&value), &[]);
    builder.build().unwrap()
}

/// How many idempotent producers write the client batches: issue 16 sets its client-append target at 1,000.
const PRODUCERS: usize = 1_000;

/// `count` client batches of [`PRODUCERS`] idempotent producers in turn, with their sequences.
fn client_batches(count: usize, value_len: usize) -> Vec<RecordBatch> {
    (0..count)
        .map(|i| client_batch((i % PRODUCERS) as i64, (i / PRODUCERS) as i32, value_len))
        .collect()
}

/// Fills a partition log with `count` client batches and closes it cleanly (a snapshot at its end); returns the
/// batches as stored.
async fn fill_log(store: &dyn Storage, count: usize) -> Vec<RecordBatch> {
    let storage = store.create(&partition("recover")).await.unwrap();
    let (mut log, _) = PartitionLog::open(storage, log_config(), 0).await.unwrap();
    for (index, batch) in client_batches(count, 10).into_iter().enumerate() {
        log.append_as_leader(vec![batch], AppendOrigin::Client, TransactionVersion::V0)
            .await
            .unwrap();
        if index % 10_000 == 0 {
            crate::heartbeat();
        }
    }
    log.close().await.unwrap();
    let storage = store.open(&partition("recover")).await.unwrap();
    let mut stored = Vec::new();
    let mut offset = 0;
    while offset < storage.log_end_offset() {
        let batches = storage.read(offset, 1 << 20).await.unwrap();
        offset = batches.last().unwrap().next_offset();
        stored.extend(batches);
    }
    stored
}

/// The store a measurement uses: the one kept alive (memory, whose data lives in the store object) or the
/// backend's store opened again from its directory (as after a restart).
enum StoreRef<'a> {
    Kept(&'a dyn Storage),
    Reopened(Box<dyn Storage>),
}

impl<'a> StoreRef<'a> {
    fn of(backend: &BenchBackend, dir: &Path, kept: Option<&'a dyn Storage>) -> Self {
        match kept {
            Some(store) => StoreRef::Kept(store),
            None => StoreRef::Reopened((backend.open)(dir)),
        }
    }

    fn get(&self) -> &dyn Storage {
        match self {
            StoreRef::Kept(store) => *store,
            StoreRef::Reopened(store) => &**store,
        }
    }
}

/// Deletes the recovered partition's snapshots and marks its shutdown unclean, so that the next open replays
/// the whole log.
async fn drop_snapshots(backend: &BenchBackend, dir: &Path, kept: Option<&dyn Storage>) {
    let store = StoreRef::of(backend, dir, kept);
    let store = store.get();
    let mut storage = store.open(&partition("recover")).await.unwrap();
    for offset in storage.snapshot_offsets().await.unwrap() {
        storage.delete_snapshot(offset).await.unwrap();
    }
    storage.put_metadata("log.clean-shutdown", b"0").await.unwrap();
    storage.flush(Durability::Sync).await.unwrap();
}

async fn open_log(backend: &BenchBackend, dir: &Path, kept: Option<&dyn Storage>) -> Duration {
    let started = Instant::now();
    let store = StoreRef::of(backend, dir, kept);
    let store = store.get();
    let storage = store.open(&partition("recover")).await.unwrap();
    let (log, _) = PartitionLog::open(storage, log_config(), 0).await.unwrap();
    let elapsed = started.elapsed();
    assert!(log.log_end_offset() > 0);
    // Leave it as found for the next run (no close: closing would write a snapshot).
    drop(log);
    elapsed
}

/// Copies of `work` that own their bytes, at the offsets a log would give them (0, 1, …).
fn placed_copies(work: &[RecordBatch]) -> Vec<RecordBatch> {
    work.iter()
        .enumerate()
        .map(|(offset, batch)| {
            let mut batch = RecordBatch::parse(Bytes::copy_from_slice(batch.as_bytes())).unwrap();
            batch.set_base_offset(offset as i64);
            batch
        })
        .collect()
}

/// Which of two timed append paths a chunk of [`interleaved_chunks`] goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timed {
    /// The path measured (the log, or the floor's checked appends).
    Ours,
    /// Its baseline (plain appends of the same batches to the same backend).
    Baseline,
}

/// Batches per chunk of an interleaved measurement: about 1 MiB of 1 KiB batches, a few milliseconds.
const INTERLEAVE_CHUNK: usize = 1_000;

/// The chunks in which two paths append `count` batches each, interleaved: A B, B A, A B, … — each pair of chunks
/// puts the other path first. Timed one after the other, each path over the whole count, the path that ran
/// second was up to 1.5× faster on fs whichever it was (the same build measured 0.60–0.70 with the log first and
/// 0.97–1.15 with the raw appends first): the comparison measured the order, not the log. Interleaved, both paths
/// meet the same page cache, write-back and allocator state, within milliseconds of each other.
fn interleaved_chunks(count: usize) -> impl Iterator<Item = (Timed, usize)> {
    let pairs = count.div_ceil(INTERLEAVE_CHUNK);
    (0..pairs).flat_map(move |pair| {
        let len = INTERLEAVE_CHUNK.min(count - pair * INTERLEAVE_CHUNK);
        let order = if pair % 2 == 0 {
            [Timed::Ours, Timed::Baseline]
        } else {
            [Timed::Baseline, Timed::Ours]
        };
        order.map(|path| (path, len))
    })
}

/// Times `ours` and `baseline` — each appends the next `len` batches of its own when called — over `count` batches
/// each, in [`interleaved_chunks`]; returns their times.
async fn interleaved(
    count: usize,
    mut ours: impl AsyncFnMut(usize),
    mut baseline: impl AsyncFnMut(usize),
) -> (Duration, Duration) {
    let (mut ours_elapsed, mut baseline_elapsed) = (Duration::ZERO, Duration::ZERO);
    for (timed, len) in interleaved_chunks(count) {
        let started = Instant::now();
        match timed {
            Timed::Ours => {
                ours(len).await;
                ours_elapsed += started.elapsed();
            }
            Timed::Baseline => {
                baseline(len).await;
                baseline_elapsed += started.elapsed();
            }
        }
    }
    (ours_elapsed, baseline_elapsed)
}

async fn log_appends(backend: &BenchBackend, count: usize) -> (Duration, Duration) {
    let work = client_batches(count, 1024 - 90);
    // Both paths get batches they own, placed or not, prepared before the clock starts: a shared batch would be
    // copied by the log's offset assignment, a cost of how this benchmark holds its input, not of the log.
    let mut placed = placed_copies(&work).into_iter();
    let mut work = work.into_iter();
    let dir = tempfile::tempdir().unwrap();
    let store = (backend.open)(dir.path());
    let storage = store.create(&partition("log")).await.unwrap();
    let (mut log, _) = PartitionLog::open(storage, log_config(), 0).await.unwrap();
    let mut raw = store.create(&partition("raw")).await.unwrap();
    let times = interleaved(
        count,
        async |len| {
            for batch in work.by_ref().take(len) {
                log.append_client_batch(batch, TransactionVersion::V0)
                    .await
                    .unwrap();
            }
        },
        // Each batch is dropped after its append here too: the log frees what it consumed.
        async |len| append_each(&mut *raw, placed.by_ref().take(len)).await,
    )
    .await;
    assert_eq!(log.log_end_offset(), count as i64);
    assert_eq!(raw.log_end_offset(), count as i64);
    times
}

/// The floor of `log_appends`: each batch checked as the log checks a client batch before anything else (CRC,
/// then every record decoded and its offset delta checked), then appended straight to the backend; returns the
/// checked appends' time and the plain appends' time, interleaved as in `log_appends`.
async fn checked_appends(backend: &BenchBackend, count: usize) -> (Duration, Duration) {
    let work = client_batches(count, 1024 - 90);
    let (mut checked_work, mut plain_work) =
        (placed_copies(&work).into_iter(), placed_copies(&work).into_iter());
    drop(work);
    let dir = tempfile::tempdir().unwrap();
    let store = (backend.open)(dir.path());
    let mut checked = store.create(&partition("checked")).await.unwrap();
    let mut plain = store.create(&partition("plain")).await.unwrap();
    let times = interleaved(
        count,
        async |len| {
            for batch in checked_work.by_ref().take(len) {
                check_as_client_batch(&batch);
                checked.append(std::slice::from_ref(&batch)).await.unwrap();
            }
        },
        async |len| append_each(&mut *plain, plain_work.by_ref().take(len)).await,
    )
    .await;
    assert_eq!(checked.log_end_offset(), count as i64);
    assert_eq!(plain.log_end_offset(), count as i64);
    times
}

/// Appends `batches` to `partition` one per call, as a client's produce requests arrive; each is dropped after
/// its append.
async fn append_each(partition: &mut dyn PartitionStorage, batches: impl Iterator<Item = RecordBatch>) {
    for batch in batches {
        partition.append(std::slice::from_ref(&batch)).await.unwrap();
    }
}

/// What the log checks of a client batch before anything else: its CRC, then every record decoded and its offset
/// delta checked.
fn check_as_client_batch(batch: &RecordBatch) {
    batch.verify_crc().unwrap();
    let mut expected_delta = 0;
    for record in batch.records().unwrap().iter() {
        assert_eq!(record.unwrap().offset_delta, expected_delta);
        expected_delta += 1;
    }
    assert_eq!(expected_delta, batch.last_offset_delta() + 1);
}

/// The floor of `mirror_copy` on this machine, whatever the backend: `mib` MiB of 1 KiB batches copied from one
/// file to another by two threads, one reading ranges of whole batches (up to 1 MiB, as a catch-up fetches), the
/// other writing each range with one write, every batch's CRC checked, half of each range by either thread (the
/// check is the larger share of the work, so balancing it is what lets two threads beat one); returns its time,
/// the bytes, and the time of the single-threaded raw copy of the same bytes measured right after.
fn checked_copy(mib: usize) -> (Duration, usize, Duration) {
    use std::io::{Read, Write};
    let work = client_batches((mib << 20) / 1024, 1024 - 90);
    let dir = tempfile::tempdir().unwrap();
    append_raw(dir.path(), &work, None);
    let mut ranges: Vec<Vec<usize>> = vec![Vec::new()];
    let mut range_bytes = 0;
    for size in work.iter().map(RecordBatch::size) {
        if range_bytes + size > 1 << 20 {
            ranges.push(Vec::new());
            range_bytes = 0;
        }
        range_bytes += size;
        ranges.last_mut().unwrap().push(size);
    }
    drop(work);
    // Both timed copies start with the earlier writes on disk, so neither pays for another's write-back.
    sync_file(&dir.path().join("raw.log"));
    // Checks the CRCs of the batches of `sizes`, laid out back to back in `range` from `at` on.
    let check = |range: &Bytes, mut at: usize, sizes: &[usize]| {
        for size in sizes {
            let batch = RecordBatch::parse(range.slice(at..at + size)).unwrap();
            batch.verify_crc().unwrap();
            at += size;
        }
    };
    let source = dir.path().join("raw.log");
    let copy = dir.path().join("checked.log");
    let started = Instant::now();
    let mut input = std::fs::File::open(&source).unwrap();
    let mut output = std::fs::File::create(&copy).unwrap();
    let (send, receive) = std::sync::mpsc::sync_channel::<(Bytes, &[usize])>(1);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for sizes in &ranges {
                let len: usize = sizes.iter().sum();
                let mut buffer = Vec::with_capacity(len);
                (&mut input).take(len as u64).read_to_end(&mut buffer).unwrap();
                let range = Bytes::from(buffer);
                check(&range, 0, &sizes[..sizes.len() / 2]);
                send.send((range, sizes)).unwrap();
            }
            drop(send);
        });
        for (range, sizes) in receive {
            let (first_half, second_half) = sizes.split_at(sizes.len() / 2);
            check(&range, first_half.iter().sum(), second_half);
            output.write_all(&range).unwrap();
        }
    });
    output.flush().unwrap();
    let elapsed = started.elapsed();
    output.sync_all().unwrap();
    let bytes = std::fs::metadata(&copy).unwrap().len() as usize;
    let raw_elapsed = raw_copy_baseline(&source, dir.path());
    (elapsed, bytes, raw_elapsed)
}

/// What one `mirror_copy` run measured.
struct MirrorCopy {
    /// The mirror's start: its partition created and brought to MIRRORING (before any fetch).
    start: Duration,
    /// The catch-up from MIRRORING to the source's log end, written to the page cache.
    catch_up: Duration,
    /// Bytes copied.
    bytes: usize,
    /// The raw copy of the same bytes, measured right after ([`raw_copy_baseline`]).
    raw_copy: Duration,
}

async fn mirror_copy(backend: &BenchBackend, mib: usize) -> MirrorCopy {
    let dir = tempfile::tempdir().unwrap();
    let store = (backend.open)(dir.path());
    let work = client_batches((mib << 20) / 1024, 1024 - 90);
    let storage = store.create(&partition("source")).await.unwrap();
    let (mut source, _) = PartitionLog::open(storage, log_config(), 0).await.unwrap();
    for batch in work {
        source
            .append_as_leader(vec![batch], AppendOrigin::Client, TransactionVersion::V0)
            .await
            .unwrap();
    }
    let end = source.log_end_offset();
    source.advance_high_watermark(end);
    let mut stored = Vec::new();
    while stored.last().map_or(0, RecordBatch::next_offset) < end {
        let from = stored.last().map_or(0, RecordBatch::next_offset);
        stored.extend(source.read_for_replica(from, 1 << 20).await.unwrap());
    }
    let bytes: usize = stored.iter().map(RecordBatch::size).sum();
    // Every timed phase starts with the earlier phases' writes on disk, so none pays for another's write-back.
    source.flush(Durability::Sync).await.unwrap();
    let source = mirror_fsm::shared(source);
    let mut fetcher = LocalFetcher::new(&source, "source");
    let started = Instant::now();
    let (mut dest, mut driver) = started_mirror(store.as_ref(), "dest", &mut fetcher).await;
    let start = started.elapsed();
    let started = Instant::now();
    driver.catch_up(&mut dest, &mut fetcher).await.unwrap();
    dest.flush(Durability::Buffered).await.unwrap();
    let catch_up = started.elapsed();
    assert_eq!(dest.log_end_offset(), end);
    dest.flush(Durability::Sync).await.unwrap();
    // The baseline: the same bytes copied from one file to another through a 1 MiB buffer.
    let raw_dir = tempfile::tempdir().unwrap();
    append_raw(raw_dir.path(), &stored, None);
    sync_file(&raw_dir.path().join("raw.log"));
    let raw_copy = raw_copy_baseline(&raw_dir.path().join("raw.log"), raw_dir.path());
    MirrorCopy {
        start,
        catch_up,
        bytes,
        raw_copy,
    }
}

/// A new partition `name` mirroring `fetcher`'s source, in MIRRORING with nothing fetched yet: the partition
/// created, its mirror state persisted, its log aligned with the source (each durably).
async fn started_mirror(
    store: &dyn Storage,
    name: &str,
    fetcher: &mut LocalFetcher,
) -> (PartitionLog, MirrorDriver) {
    let storage = store.create(&partition(name)).await.unwrap();
    let (mut log, _) = PartitionLog::open(storage, log_config(), 0).await.unwrap();
    let mut driver = MirrorDriver::recover(&mut log, fetcher, "dest").await.unwrap();
    let start = Event::Start {
        source_cluster_id: "source".to_owned(),
    };
    driver.handle(&mut log, fetcher, start).await.unwrap();
    (log, driver)
}

/// A new partition `name` mirroring `fetcher`'s source, caught up.
async fn mirror_of(
    store: &dyn Storage,
    name: &str,
    fetcher: &mut LocalFetcher,
) -> (PartitionLog, MirrorDriver) {
    let (mut log, mut driver) = started_mirror(store, name, fetcher).await;
    driver.catch_up(&mut log, fetcher).await.unwrap();
    (log, driver)
}

/// A new file of one 1 KiB batch, synced, and its directory synced: one durable write on this disk.
fn durable_write(dir: &Path, batch: &RecordBatch) -> Duration {
    use std::io::Write;
    let started = Instant::now();
    let mut file = std::fs::File::create(dir.join("durable.log")).unwrap();
    file.write_all(batch.as_bytes()).unwrap();
    file.sync_all().unwrap();
    std::fs::File::open(dir).unwrap().sync_all().unwrap();
    started.elapsed()
}

/// Puts a file's written bytes on disk (outside any timed phase).
fn sync_file(path: &Path) {
    std::fs::File::open(path).unwrap().sync_all().unwrap();
}

/// Raw copies made for one baseline figure of the copy measurements; the fastest counts.
const RAW_COPIES: usize = 3;

/// The raw-copy baseline of `mirror-copy` and its floor: the fastest of [`RAW_COPIES`] copies of `from` into new
/// files in `dir`, each started with the one before synced. A single copy now and then ran at a quarter of its
/// usual speed (cause unknown: a sync of the whole machine before each copy did not prevent it), which flattered
/// the mirror in that run and left the figure unjudged (baseline runs spread over 2×); the fastest of three is
/// what the machine can do, so it makes the target harder to meet, never easier.
fn raw_copy_baseline(from: &Path, dir: &Path) -> Duration {
    (0..RAW_COPIES)
        .map(|copy| {
            let to = dir.join(format!("copy-{copy}.log"));
            let elapsed = copy_file(from, &to);
            sync_file(&to);
            elapsed
        })
        .min()
        .unwrap_or_default()
}

fn copy_file(from: &Path, to: &Path) -> Duration {
    use std::io::{Read, Write};
    let started = Instant::now();
    let mut input = std::fs::File::open(from).unwrap();
    let mut output = std::fs::File::create(to).unwrap();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = input.read(&mut buffer).unwrap();
        if n == 0 {
            break;
        }
        output.write_all(&buffer[..n]).unwrap();
    }
    output.flush().unwrap();
    started.elapsed()
}

/// How many partitions' STOPPING sequences run at once in the failover measurement.
pub const FAILOVER_PARALLELISM: usize = 64;

/// `n` destination partitions mirroring one source of 100 batches (one per producer), caught up, then stopped
/// [`FAILOVER_PARALLELISM`] at a time (`mirror_fsm::stop_all`); returns the time of the stops.
async fn failover(backend: &BenchBackend, n: usize) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let store = (backend.open)(dir.path());
    let storage = store.create(&partition("source")).await.unwrap();
    let (mut source, _) = PartitionLog::open(storage, log_config(), 0).await.unwrap();
    for batch in client_batches(100, 100) {
        source
            .append_as_leader(vec![batch], AppendOrigin::Client, TransactionVersion::V0)
            .await
            .unwrap();
    }
    let end = source.log_end_offset();
    source.advance_high_watermark(end);
    let source = mirror_fsm::shared(source);
    let mut fetcher = LocalFetcher::new(&source, "source");
    let mut total = Duration::ZERO;
    // Groups bound the open files (an fs partition holds three).
    for group in (0..n).collect::<Vec<_>>().chunks(500) {
        let mut mirrors = Vec::new();
        for i in group {
            mirrors.push(mirror_of(store.as_ref(), &format!("d{i}"), &mut fetcher).await);
        }
        let mut fetchers: Vec<LocalFetcher> = mirrors.iter().map(|_| fetcher.clone()).collect();
        let started = Instant::now();
        let jobs = mirrors
            .iter_mut()
            .zip(fetchers.iter_mut())
            .map(|((log, driver), fetcher)| mirror_fsm::StopJob { log, driver, fetcher })
            .collect();
        for result in mirror_fsm::stop_all(jobs, FAILOVER_PARALLELISM).await {
            result.unwrap();
        }
        total += started.elapsed();
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_chunks_give_each_path_every_batch_and_swap_which_goes_first() {
        let chunks: Vec<(Timed, usize)> = interleaved_chunks(2_500).collect();
        assert_eq!(
            chunks,
            [
                (Timed::Ours, 1_000),
                (Timed::Baseline, 1_000),
                (Timed::Baseline, 1_000),
                (Timed::Ours, 1_000),
                (Timed::Ours, 500),
                (Timed::Baseline, 500),
            ]
        );
        for timed in [Timed::Ours, Timed::Baseline] {
            let total: usize = interleaved_chunks(12_345)
                .filter(|(t, _)| *t == timed)
                .map(|(_, len)| len)
                .sum();
            assert_eq!(total, 12_345);
        }
        assert_eq!(interleaved_chunks(0).count(), 0);
    }
}
