//! A crash test every durable backend runs: a child process appends (now and then cutting its last run off and
//! appending it again) and syncs in a loop, and is killed with
//! SIGKILL at seeded random points; after every kill the store is reopened and must hold every batch that was
//! acknowledged as durable, byte for byte, with contiguous offsets, whole metadata and whole snapshots.
//!
//! The child is the backend's own test binary run again (`--exact <child test name>`) with the data directory in
//! [`CHILD_DIR_ENV`]; the backend's test file has two tests: the child, which calls [`child_writer`], and the
//! parent, which calls [`kill_and_verify`]. The parent starts each kill timer only once the child reports its
//! first append (so a slow start cannot use up the window), fails a round whose child ended by itself (a panic,
//! shown with its stderr) or before its first append, counts the kills that landed inside a write call (the child
//! brackets each call with lines; a run with none fails), and checks every snapshot and metadata record the
//! child acknowledged. A SIGKILL loses nothing the kernel already holds: storage-fs also passes a `tear` function
//! that cuts unsynced bytes, and runs the power-loss simulator (`storage_fs::sim`), which really drops them.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use record_format::RecordBatch;

use storage::{Durability, PartitionId, PartitionStorage, Storage, StorageError};

use crate::conformance::batch;

/// The environment variable that turns the child test on and names its directory.
pub const CHILD_DIR_ENV: &str = "MIRRORLOG_CRASH_DIR";
/// The line the child prints once its store is open.
const READY: &str = "ready";
/// The line the child prints before each storage write call; `DONE` follows when the call returned.
const WRITING: &str = "writing";
/// See [`WRITING`].
const DONE: &str = "done";
/// The line the child prints once its first append returned.
const APPENDED: &str = "appended";
/// How long the parent waits for the child to open its store.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The metadata key the child records its acknowledged offset under (after each sync, before printing it).
pub const ACKED_KEY: &str = "acked";

/// The partition the crash test writes.
pub fn partition_id() -> PartitionId {
    PartitionId::new("crash", 0).unwrap()
}

/// The batch the child writes at `offset`: its content is a function of the offset alone.
pub fn expected_batch(offset: i64) -> RecordBatch {
    batch(offset, 1 + (offset % 3) as u32, 50 + (offset % 200) as usize)
}

fn snapshot_bytes(offset: i64) -> Bytes {
    Bytes::from(offset.to_be_bytes().repeat(64))
}

/// A tiny deterministic generator (xorshift64*), so the kill points are seeded without a dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a non-zero seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }

    /// A number in `[low, high)`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        low + self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % (high - low).max(1)
    }
}

async fn open_or_create(store: &dyn Storage) -> Box<dyn PartitionStorage> {
    match store.open(&partition_id()).await {
        Ok(partition) => partition,
        Err(StorageError::NotFound(_)) => store.create(&partition_id()).await.unwrap(),
        Err(other) => panic!("{other}"),
    }
}

/// The child's loop: append three batches, every fourth round sync, record and print the acknowledged offset,
/// every sixteenth also write a snapshot. Runs until killed. Run without [`CHILD_DIR_ENV`] (`cargo test --
/// --ignored`), it is not a test and says so by failing: nothing passes that checked nothing.
pub fn child_writer(open: impl Fn(&Path) -> Box<dyn Storage>) {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        panic!(
            "crash_child_writer is the child process of the kill test beside it (which sets {CHILD_DIR_ENV}), not a \
             test: run that one"
        );
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = open(Path::new(&dir));
        let mut partition = open_or_create(store.as_ref()).await;
        // The parent starts its kill timer only now, so a slow start (a loaded machine, a database that waits
        // for its lock) cannot use up the time before the first acknowledgement.
        println!("{READY}");
        let mut round = 0u64;
        // Each write call is bracketed by lines, so the parent can tell a kill that landed inside one.
        let writing = || println!("{WRITING}");
        let done = || println!("{DONE}");
        loop {
            let start = partition.log_end_offset();
            let mut offset = start;
            // Runs of one batch and of three alternate: a key-value store writes the first as one key.
            let run: Vec<RecordBatch> = (0..1 + 2 * (round % 2))
                .map(|_| {
                    let next = expected_batch(offset);
                    offset = next.next_offset();
                    next
                })
                .collect();
            writing();
            partition.append(&run).await.unwrap();
            done();
            if round % 8 == 3 {
                // Cut the run off again and append it once more: the log end moves down, then up past where it
                // was, with nothing synced in between.
                writing();
                partition.truncate_to(start).await.unwrap();
                done();
                writing();
                partition.append(&run).await.unwrap();
                done();
            }
            if round == 0 {
                println!("{APPENDED}");
            }
            round += 1;
            if round % 4 == 0 {
                writing();
                partition.flush(Durability::Sync).await.unwrap();
                done();
                let acked = partition.log_end_offset();
                writing();
                partition
                    .put_metadata(ACKED_KEY, &acked.to_be_bytes())
                    .await
                    .unwrap();
                done();
                println!("acked {acked}");
                if round % 16 == 0 {
                    writing();
                    partition
                        .put_snapshot(acked, snapshot_bytes(acked))
                        .await
                        .unwrap();
                    done();
                    println!("snapshot {acked}");
                }
            }
        }
    });
}

/// Reopens and checks against what the children acknowledged: the offset `acked` (data, and the metadata record
/// written after it) and the snapshots in `snapshots`. Returns the log end offset.
async fn verify(store: &dyn Storage, acked: i64, snapshots: &BTreeSet<i64>) -> i64 {
    let partition = match store.open(&partition_id()).await {
        Ok(partition) => partition,
        Err(StorageError::NotFound(_)) => {
            assert_eq!(acked, 0, "acknowledged data but no partition");
            return 0;
        }
        Err(other) => panic!("reopen failed: {other}"),
    };
    let end = partition.log_end_offset();
    assert!(end >= acked, "log end {end} below the acknowledged {acked}");
    let mut offset = 0;
    while offset < end {
        let batches = partition.read(offset, 1 << 20).await.unwrap();
        assert!(
            !batches.is_empty(),
            "nothing readable at {offset} below the log end {end}"
        );
        for found in batches {
            assert_eq!(found.base_offset(), offset, "offsets stay contiguous");
            assert_eq!(
                found.as_bytes(),
                expected_batch(offset).as_bytes(),
                "batch at {offset} changed"
            );
            offset = found.next_offset();
        }
    }
    assert_eq!(offset, end);
    match partition.metadata(ACKED_KEY).await.unwrap() {
        Some(value) => {
            let recorded = i64::from_be_bytes(value.try_into().expect("metadata is whole"));
            assert!(recorded <= end, "metadata says {recorded}, log ends at {end}");
            assert!(
                recorded >= acked,
                "metadata says {recorded}, but the child acknowledged writing {acked}"
            );
        }
        None => assert_eq!(acked, 0, "the acknowledged metadata record is missing"),
    }
    let present = partition.snapshot_offsets().await.unwrap();
    for &snapshot in &present {
        let (at, bytes) = partition.snapshot_at_or_below(snapshot).await.unwrap().unwrap();
        assert_eq!(bytes, snapshot_bytes(at), "snapshot {at} is whole");
    }
    for at in snapshots {
        assert!(present.contains(at), "acknowledged snapshot {at} is missing");
    }
    end
}

/// What the child's output said, read as it comes.
#[derive(Debug, Default)]
struct ChildReport {
    /// The highest acknowledged offset it printed.
    acked: Option<i64>,
    /// Snapshots it acknowledged.
    snapshots: BTreeSet<i64>,
    /// True when its last line says a write call was under way.
    inside_a_write: bool,
}

/// Cuts bytes the backend had not synced (given the directory, the acknowledged offset and the generator).
pub type Tear<'a> = &'a dyn Fn(&Path, i64, &mut Rng);

/// What [`kill_and_verify`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashSummary {
    /// Kills made.
    pub kills: u64,
    /// Kills that landed while the child was inside a storage write call (append, sync, metadata, snapshot).
    pub interrupted_writes: u64,
    /// The highest offset acknowledged as durable.
    pub acked: i64,
    /// Snapshots acknowledged.
    pub snapshots_acked: usize,
    /// Reopens that also kept data written after the last acknowledgement.
    pub kept_unacknowledged: u64,
}

/// How long the parent waits for the child's first append once its store is open.
const FIRST_APPEND_TIMEOUT: Duration = Duration::from_secs(30);

/// The parent: `kills` rounds of spawn, wait for the child's first append, wait a seeded random time, SIGKILL,
/// optionally `tear` unsynced bytes, reopen and verify. A child that ends by itself (a panic: its stderr is shown)
/// or before its first append fails the test, and so does a run in which no kill landed inside a write call.
/// `child_test` is the name of the test that calls [`child_writer`].
pub async fn kill_and_verify(
    dir: &Path,
    child_test: &str,
    kills: u64,
    seed: u64,
    open: impl Fn(&Path) -> Box<dyn Storage>,
    tear: Option<Tear<'_>>,
) -> CrashSummary {
    let mut rng = Rng::new(seed);
    let mut summary = CrashSummary {
        kills,
        interrupted_writes: 0,
        acked: 0,
        snapshots_acked: 0,
        kept_unacknowledged: 0,
    };
    let mut snapshots = BTreeSet::new();
    for round in 0..kills {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                child_test,
                "--include-ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR_ENV, dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let stderr_reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        let (progress_tx, progress_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut report = ChildReport::default();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.ends_with(READY) || line.ends_with(APPENDED) {
                    let _ = progress_tx.send(());
                }
                if line.ends_with(WRITING) {
                    report.inside_a_write = true;
                } else if line.ends_with(DONE) {
                    report.inside_a_write = false;
                }
                if let Some(n) = line.strip_prefix("acked ").and_then(|n| n.parse::<i64>().ok()) {
                    report.acked = report.acked.max(Some(n));
                }
                if let Some(n) = line.strip_prefix("snapshot ").and_then(|n| n.parse::<i64>().ok()) {
                    report.snapshots.insert(n);
                }
            }
            report
        });
        for (what, timeout) in [
            ("open its store", START_TIMEOUT),
            ("make its first append", FIRST_APPEND_TIMEOUT),
        ] {
            if progress_rx.recv_timeout(timeout).is_err() {
                let _ = child.kill();
                let status = child.wait().unwrap();
                let stderr = stderr_reader.join().unwrap_or_default();
                panic!("round {round}: the child did not {what} within {timeout:?} ({status}); its stderr:\n{stderr}");
            }
        }
        std::thread::sleep(Duration::from_millis(rng.between(20, 120)));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        let stderr = stderr_reader.join().unwrap_or_default();
        // The kill must be what ended it: a child that panicked (or stopped) on its own would pass unnoticed.
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "round {round}: the child ended by itself ({status}), not by the SIGKILL; its stderr:\n{stderr}"
        );
        let report = reader.join().unwrap();
        summary.interrupted_writes += u64::from(report.inside_a_write);
        if let Some(child_acked) = report.acked {
            summary.acked = summary.acked.max(child_acked);
        }
        snapshots.extend(report.snapshots);
        // The child records the acknowledged offset durably before printing it: the store may know more (and a
        // tear must not cut what it records).
        {
            let store = open(dir);
            if let Ok(partition) = store.open(&partition_id()).await {
                if let Some(value) = partition.metadata(ACKED_KEY).await.unwrap() {
                    summary.acked = summary.acked.max(i64::from_be_bytes(value.try_into().unwrap()));
                }
            }
        }
        if let Some(tear) = tear {
            if rng.between(0, 2) == 0 {
                tear(dir, summary.acked, &mut rng);
            }
        }
        let store = open(dir);
        let end = verify(store.as_ref(), summary.acked, &snapshots).await;
        summary.kept_unacknowledged += u64::from(end > summary.acked);
    }
    summary.snapshots_acked = snapshots.len();
    assert!(
        summary.acked > 0,
        "the children acknowledged nothing: the test exercised nothing"
    );
    assert!(
        summary.interrupted_writes > 0,
        "no kill landed inside a write call: the test exercised no interrupted write"
    );
    summary
}
