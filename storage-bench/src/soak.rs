//! The sled soak: 1 KiB batches through the sled backend with a sync every MiB (or another cadence, or none),
//! watched for progress — the pattern that deadlocked sled 0.34.7 with its default 512 KiB segments
//! (`storage_sled::DEFAULT_SEGMENT_SIZE` and `UNFLUSHED_SEGMENT_FRACTION` explain the cause and what avoids it).
//! The `sled-soak` binary runs 1 GiB three times. It is not a CI test: the deadlock is a timing race that release
//! builds hit after 6–253 MiB (raw sled, 512 KiB segments), while a debug build wrote 160 MiB with 512 KiB segments
//! without stalling — a debug-sized test could not fail.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use record_format::BatchBuilder;
use storage::{Durability, PartitionId, Storage, StorageError};
use storage_sled::{SledConfig, SledStorage};

/// How a soak ended.
#[derive(Debug, Clone, PartialEq)]
pub enum SoakOutcome {
    /// Every byte written and synced.
    Completed {
        /// Wall time.
        elapsed: Duration,
        /// MiB per second.
        mib_per_s: f64,
    },
    /// No batch was appended for the stall limit: the writer is stuck (the thread is left behind).
    Stalled {
        /// MiB written before it stopped.
        written_mib: u64,
    },
}

/// What a soak writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SoakPlan {
    /// MiB of ~1 KiB batches.
    pub mib: u64,
    /// A sync every this many MiB (never when 0; once at the end either way).
    pub sync_every_mib: u64,
    /// sled's segment size for the new database.
    pub segment_size: usize,
}

/// Writes `plan` into a new sled store under `dir` on its own thread; reports a stall when no batch lands for
/// `stall`, and a store that cannot be opened (a segment size sled refuses) as an error.
pub fn sled_soak(dir: &Path, plan: SoakPlan, stall: Duration) -> Result<SoakOutcome, StorageError> {
    let SoakPlan {
        mib,
        sync_every_mib,
        segment_size,
    } = plan;
    let mut config = SledConfig::new(dir);
    config.segment_size = segment_size;
    let store = SledStorage::open(config)?;
    let progress = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let (writer_progress, writer_done) = (progress.clone(), done.clone());
    let started = Instant::now();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let id = PartitionId::new("soak", 0).expect("id");
            let mut partition = store.create(&id).await.expect("create");
            let value = vec![7u8; 1000];
            let total = mib << 20;
            let (mut written, mut since_sync, mut offset) = (0u64, 0u64, 0i64);
            while written < total {
                let mut builder = BatchBuilder::new()
                    .base_offset(offset)
                    .producer(1, 0, offset as i32);
                builder.add(offset, None, Some(&value), &[]);
                let batch = builder.build().expect("batch");
                let size = batch.size() as u64;
                partition.append(&[batch]).await.expect("append");
                offset += 1;
                written += size;
                since_sync += size;
                if sync_every_mib > 0 && since_sync >= sync_every_mib << 20 {
                    partition.flush(Durability::Sync).await.expect("sync");
                    since_sync = 0;
                }
                writer_progress.store(written, Ordering::Relaxed);
            }
            partition.flush(Durability::Sync).await.expect("sync");
        });
        writer_done.store(1, Ordering::Relaxed);
    });
    let mut last = (0u64, Instant::now());
    loop {
        std::thread::sleep(Duration::from_millis(100));
        if done.load(Ordering::Relaxed) == 1 {
            let elapsed = started.elapsed();
            return Ok(SoakOutcome::Completed {
                elapsed,
                mib_per_s: mib as f64 / elapsed.as_secs_f64(),
            });
        }
        let now = progress.load(Ordering::Relaxed);
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() >= stall {
            return Ok(SoakOutcome::Stalled {
                written_mib: now >> 20,
            });
        }
    }
}
