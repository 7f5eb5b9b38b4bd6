//! A crash test every durable backend runs: a child process appends and syncs in a loop and is killed with
//! SIGKILL at seeded random points; after every kill the store is reopened and must hold every batch that was
//! acknowledged as durable, byte for byte, with contiguous offsets, whole metadata and whole snapshots.
//!
//! The child is the backend's own test binary run again (`--exact <child test name>`) with the data directory in
//! [`CHILD_DIR_ENV`]; the backend's test file has two tests: the child, which calls [`child_writer`], and the
//! parent, which calls [`kill_and_verify`]. The parent starts each kill timer only once the child reports its
//! store open (so a slow start cannot use up the window before the first acknowledgement), and fails a round whose
//! child ended by itself (a panic) instead of by the SIGKILL. A SIGKILL loses nothing the kernel already holds, so a backend that
//! can (storage-fs) also passes a `tear` function that cuts unsynced bytes the way a power loss may.

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
/// every sixteenth also write a snapshot. Runs until killed.
pub fn child_writer(open: impl Fn(&Path) -> Box<dyn Storage>) {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
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
        loop {
            let mut offset = partition.log_end_offset();
            let run: Vec<RecordBatch> = (0..3)
                .map(|_| {
                    let next = expected_batch(offset);
                    offset = next.next_offset();
                    next
                })
                .collect();
            partition.append(&run).await.unwrap();
            round += 1;
            if round % 4 == 0 {
                partition.flush(Durability::Sync).await.unwrap();
                let acked = partition.log_end_offset();
                partition
                    .put_metadata(ACKED_KEY, &acked.to_be_bytes())
                    .await
                    .unwrap();
                if round % 16 == 0 {
                    partition
                        .put_snapshot(acked, snapshot_bytes(acked))
                        .await
                        .unwrap();
                }
                println!("acked {acked}");
            }
        }
    });
}

/// Reopens and checks; returns the log end offset.
async fn verify(store: &dyn Storage, acked: i64) -> i64 {
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
    if let Some(value) = partition.metadata(ACKED_KEY).await.unwrap() {
        let recorded = i64::from_be_bytes(value.try_into().expect("metadata is whole"));
        assert!(recorded <= end, "metadata says {recorded}, log ends at {end}");
    }
    for snapshot in partition.snapshot_offsets().await.unwrap() {
        let (at, bytes) = partition.snapshot_at_or_below(snapshot).await.unwrap().unwrap();
        assert_eq!(bytes, snapshot_bytes(at), "snapshot {at} is whole");
    }
    end
}

/// Cuts bytes the backend had not synced (given the directory, the acknowledged offset and the generator).
pub type Tear<'a> = &'a dyn Fn(&Path, i64, &mut Rng);

/// What [`kill_and_verify`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashSummary {
    /// Kills made.
    pub kills: u64,
    /// The highest offset acknowledged as durable.
    pub acked: i64,
    /// Reopens that also kept data written after the last acknowledgement.
    pub kept_unacknowledged: u64,
}

/// The parent: `kills` rounds of spawn, wait a seeded random time, SIGKILL, optionally `tear` unsynced bytes,
/// reopen and verify. `child_test` is the name of the test that calls [`child_writer`].
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
        acked: 0,
        kept_unacknowledged: 0,
    };
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
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut acked = None;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.ends_with(READY) {
                    let _ = ready_tx.send(());
                }
                if let Some(n) = line.strip_prefix("acked ").and_then(|n| n.parse::<i64>().ok()) {
                    acked = acked.max(Some(n));
                }
            }
            acked
        });
        if ready_rx.recv_timeout(START_TIMEOUT).is_err() {
            let _ = child.kill();
            panic!("round {round}: the child did not open its store within {START_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(rng.between(20, 120)));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        // The kill must be what ended it: a child that panicked (or stopped) on its own would pass unnoticed.
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "round {round}: the child ended by itself ({status}), not by the SIGKILL"
        );
        if let Some(child_acked) = reader.join().unwrap() {
            summary.acked = summary.acked.max(child_acked);
        }
        // The child records the acknowledged offset durably before printing it: the store may know more.
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
        let end = verify(store.as_ref(), summary.acked).await;
        summary.kept_unacknowledged += u64::from(end > summary.acked);
    }
    assert!(
        summary.acked > 0,
        "the children acknowledged nothing: the test exercised nothing"
    );
    summary
}
