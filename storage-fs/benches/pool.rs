//! What the descriptor pool costs a file operation (ADR 0031): 1 KiB appends and 1 KiB positional reads through
//! `RealFs` (a plain descriptor) and through `PooledFs` (its descriptor in the pool), timed in alternating rounds
//! of the same run (ADR 0024: the machine's drift hits both alike), each round's file cut back to empty so the
//! page cache does not grow; and reads of files whose descriptors were closed to make room (a reopen each time).
//! Prints the median time per operation of each and the pooled/real ratio.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark fails by panicking

use std::path::Path;
use std::time::{Duration, Instant};

use storage_fs::pool::MIN_BUDGET;
use storage_fs::vfs::{OpenFor, Vfs, VfsFile};
use storage_fs::{PooledFs, RealFs};

const RECORD: [u8; 1024] = [7; 1024];
const OPERATIONS_PER_ROUND: u32 = 2_000;
const ROUNDS: usize = 31;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn per_operation(elapsed: Duration) -> Duration {
    elapsed / OPERATIONS_PER_ROUND
}

fn append_round(file: &mut Box<dyn VfsFile>) -> Duration {
    file.set_len(0).unwrap();
    let started = Instant::now();
    for _ in 0..OPERATIONS_PER_ROUND {
        file.append(&RECORD).unwrap();
    }
    per_operation(started.elapsed())
}

fn read_round(file: &dyn VfsFile) -> Duration {
    let mut buffer = [0u8; 1024];
    let started = Instant::now();
    for index in 0..OPERATIONS_PER_ROUND {
        file.read_exact_at(&mut buffer, u64::from(index % 1024) * 1024)
            .unwrap();
    }
    per_operation(started.elapsed())
}

fn filled(vfs: &dyn Vfs, path: &Path) -> Box<dyn VfsFile> {
    let mut file = vfs.open(path, OpenFor::CreateEmpty).unwrap();
    for _ in 0..1024 {
        file.append(&RECORD).unwrap();
    }
    file
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let pooled = PooledFs::new(MIN_BUDGET);
    let mut real_appends = RealFs
        .open(&dir.path().join("real.log"), OpenFor::CreateEmpty)
        .unwrap();
    let mut pooled_appends = pooled
        .open(&dir.path().join("pooled.log"), OpenFor::CreateEmpty)
        .unwrap();
    let real_reads = filled(&RealFs, &dir.path().join("real.read"));
    let pooled_reads = filled(&pooled, &dir.path().join("pooled.read"));
    let (mut appends, mut reads) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    for round in 0..ROUNDS {
        // Which goes first alternates too.
        if round % 2 == 0 {
            appends.0.push(append_round(&mut real_appends));
            appends.1.push(append_round(&mut pooled_appends));
            reads.0.push(read_round(&*real_reads));
            reads.1.push(read_round(&*pooled_reads));
        } else {
            appends.1.push(append_round(&mut pooled_appends));
            appends.0.push(append_round(&mut real_appends));
            reads.1.push(read_round(&*pooled_reads));
            reads.0.push(read_round(&*real_reads));
        }
    }

    // One more file than the pool holds, read in turn: each read reopens its file.
    let crowded = PooledFs::new(MIN_BUDGET);
    let files: Vec<Box<dyn VfsFile>> = (0..=MIN_BUDGET)
        .map(|index| filled(&crowded, &dir.path().join(format!("crowded-{index}"))))
        .collect();
    let mut buffer = [0u8; 1024];
    let mut reopened = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for index in 0..OPERATIONS_PER_ROUND as usize {
            files[index % files.len()].read_exact_at(&mut buffer, 0).unwrap();
        }
        reopened.push(per_operation(started.elapsed()));
    }

    let ratio = |pooled: Duration, real: Duration| pooled.as_secs_f64() / real.as_secs_f64();
    let (real_append, pooled_append) = (median(appends.0), median(appends.1));
    let (real_read, pooled_read) = (median(reads.0), median(reads.1));
    println!("| operation (1 KiB) | real descriptor | pooled | pooled / real |");
    println!("|---|---|---|---|");
    println!(
        "| append | {real_append:.2?} | {pooled_append:.2?} | {:.3} |",
        ratio(pooled_append, real_append)
    );
    println!(
        "| positional read | {real_read:.2?} | {pooled_read:.2?} | {:.3} |",
        ratio(pooled_read, real_read)
    );
    println!(
        "| read that reopens its file | {real_read:.2?} | {:.2?} | {:.3} |",
        median(reopened.clone()),
        ratio(median(reopened), real_read)
    );
}
