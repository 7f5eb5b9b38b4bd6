//! Criterion benchmarks of the producer-state manager:
//!
//! - `validated_appends/{1,1000,100000}_producers`: CLIENT-origin, in-sequence appends through
//!   `prepare_update` → `append_data_batch` → `update` (header fields only, no record bytes), round-robin over the
//!   producers; throughput in appends.
//! - `planned_appends/1000_producers`: what a partition log runs for a client produce, `plan_append` over one real
//!   one-record batch and `commit`, 100 rounds over 1,000 producers from an empty manager; throughput in appends.
//! - `planned_appends/1000_producers_steady`: the same for producers already known, the batches few enough
//!   (9,000, about 0.7 MB) to stay in the CPU caches as a client's batch does once its CRC is checked: the
//!   steady state's compute alone; throughput in appends.
//! - `planned_appends/replication_1024_batch_ranges`: what a mirror's catch-up runs per fetched megabyte,
//!   `plan_append` over 1,024 REPLICATION batches of 1 KiB (100 producers in turn) and `commit`, 64 ranges;
//!   throughput in batches.
//! - `replay/small_batches`: REPLICATION replay (the log-recovery path, `producer_state::replay` over real batch
//!   headers) of 100,000 one-record idempotent batches of 1,000 producers; throughput in batches.
//! - `snapshot_100k/{encode,decode,load}`: `take_snapshot` of 100,000 producers (sorted by id), decoding the
//!   file, and decoding plus loading it into a fresh manager (recovery's `truncate_and_reload`).
//!
//! Run: `cargo bench -p producer-state --bench psm` (figures in `docs/benchmarks.md`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::hint::black_box;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use producer_state::snapshot::decode_snapshot;
use producer_state::{
    AppendDecision, AppendOrigin, DataBatch, LogOffsetMetadata, MemorySnapshotStore, ProducerStateManager,
    PsmConfig, SnapshotStore, TransactionVersion,
};
use record_format::{BatchBuilder, BatchIter, RecordBatch};

const APPENDS_PER_ITERATION: u64 = 100_000;

/// A manager that has seen one batch from each of `producers` producers, and their next sequences.
fn warmed(producers: i64) -> (ProducerStateManager, Vec<i32>, i64) {
    let mut psm = ProducerStateManager::new(PsmConfig::default());
    for pid in 0..producers {
        let mut info = psm.prepare_update(pid, AppendOrigin::Client);
        info.append_data_batch(batch(0, pid)).unwrap();
        psm.update(info);
    }
    (psm, vec![1; producers as usize], producers)
}

fn batch(seq: i32, offset: i64) -> DataBatch {
    DataBatch {
        epoch: 0,
        first_seq: seq,
        last_seq: seq,
        max_timestamp: 0,
        first_offset: LogOffsetMetadata::message_only(offset),
        last_offset: offset,
        is_transactional: false,
    }
}

fn validated_appends(c: &mut Criterion) {
    let mut group = c.benchmark_group("validated_appends");
    group.throughput(Throughput::Elements(APPENDS_PER_ITERATION));
    for producers in [1i64, 1_000, 100_000] {
        let (mut psm, mut next_seq, mut offset) = warmed(producers);
        group.bench_function(
            BenchmarkId::from_parameter(format!("{producers}_producers")),
            |b| {
                b.iter(|| {
                    for i in 0..APPENDS_PER_ITERATION as i64 {
                        let pid = i % producers;
                        let seq = &mut next_seq[pid as usize];
                        let mut info = psm.prepare_update(pid, AppendOrigin::Client);
                        info.append_data_batch(batch(*seq, offset)).unwrap();
                        psm.update(info);
                        *seq += 1;
                        offset += 1;
                    }
                })
            },
        );
        black_box(&psm);
    }
    group.finish();
}

/// The path a partition log takes for a client produce: `plan_append` over one real batch, then `commit`.
/// A one-record idempotent batch of `producer` at `sequence`, placed at `offset`.
fn client_batch(producer: i64, sequence: i32, offset: i64) -> RecordBatch {
    let mut builder = BatchBuilder::new()
        .base_offset(offset)
        .producer(producer, 0, sequence);
    builder.add(offset, Some(b"k"), Some(b"value"), &[]);
    builder.build().unwrap()
}

fn planned_appends(c: &mut Criterion) {
    const PRODUCERS: i64 = 1_000;
    const ROUNDS: i64 = 100;
    let batches: Vec<RecordBatch> = (0..PRODUCERS * ROUNDS)
        .map(|offset| client_batch(offset % PRODUCERS, (offset / PRODUCERS) as i32, offset))
        .collect();
    let mut group = c.benchmark_group("planned_appends");
    group.throughput(Throughput::Elements(batches.len() as u64));
    group.bench_function("1000_producers", |b| {
        b.iter(|| {
            let mut psm = ProducerStateManager::new(PsmConfig::default());
            plan_and_commit_each(&mut psm, &batches);
            psm
        })
    });
    group.finish();
}

/// What a partition log runs for each client batch: `plan_append` over the one batch, then `commit`.
fn plan_and_commit_each(psm: &mut ProducerStateManager, batches: &[RecordBatch]) {
    for batch in batches {
        match psm
            .plan_append(
                std::slice::from_ref(batch),
                AppendOrigin::Client,
                TransactionVersion::V0,
            )
            .unwrap()
        {
            AppendDecision::Append(plan) => {
                black_box(psm.commit(plan));
            }
            AppendDecision::Duplicate(_) => unreachable!("every batch is new"),
        }
    }
}

/// `planned_appends` in the steady state: every producer known (one batch each, before timing) and the batches
/// small in number, so that neither a new producer's entry nor a cache miss on a batch is measured.
fn planned_steady_appends(c: &mut Criterion) {
    const PRODUCERS: i64 = 1_000;
    const ROUNDS: i64 = 10;
    let batches: Vec<RecordBatch> = (0..PRODUCERS * ROUNDS)
        .map(|offset| client_batch(offset % PRODUCERS, (offset / PRODUCERS) as i32, offset))
        .collect();
    let (first_round, steady) = batches.split_at(PRODUCERS as usize);
    let mut known = ProducerStateManager::new(PsmConfig::default());
    for batch in first_round {
        known
            .append_batches(
                std::slice::from_ref(batch),
                AppendOrigin::Client,
                TransactionVersion::V0,
            )
            .unwrap();
    }
    let mut group = c.benchmark_group("planned_appends");
    group.throughput(Throughput::Elements(steady.len() as u64));
    group.bench_function("1000_producers_steady", |b| {
        b.iter_batched_ref(
            || known.clone(),
            |psm| plan_and_commit_each(psm, steady),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

/// What a mirror's catch-up runs per fetched range: `plan_append` over 1,024 REPLICATION batches of 1 KiB (100 or
/// 1,000 producers in turn; the macro benchmark's mirroring copies batches of 1,000), then `commit`, 64 ranges from
/// an empty manager.
fn planned_replication(c: &mut Criterion) {
    const RANGE: usize = 1_024;
    const RANGES: usize = 64;
    let value = vec![b'b'; 1024 - 90];
    let mut group = c.benchmark_group("planned_appends");
    group.throughput(Throughput::Elements((RANGE * RANGES) as u64));
    for (name, producers) in [
        ("replication_1024_batch_ranges", 100i64),
        ("replication_1024_batch_ranges_1000_producers", 1_000),
    ] {
        let batches: Vec<RecordBatch> = (0..(RANGE * RANGES) as i64)
            .map(|offset| {
                let mut builder = BatchBuilder::new().base_offset(offset).producer(
                    offset % producers,
                    0,
                    (offset / producers) as i32,
                );
                builder.add(offset, Some(b"key"), Some(&value), &[]);
                builder.build().unwrap()
            })
            .collect();
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut psm = ProducerStateManager::new(PsmConfig::default());
                for range in batches.chunks(RANGE) {
                    match psm
                        .plan_append(range, AppendOrigin::Replication, TransactionVersion::Unknown)
                        .unwrap()
                    {
                        AppendDecision::Append(plan) => {
                            black_box(psm.commit(plan));
                        }
                        AppendDecision::Duplicate(_) => unreachable!("replication has no duplicates"),
                    }
                }
                psm
            })
        });
    }
    group.finish();
}

fn replay(c: &mut Criterion) {
    const BATCHES: i64 = 100_000;
    let mut segment = Vec::new();
    for offset in 0..BATCHES {
        let pid = offset % 1_000;
        let mut builder = BatchBuilder::new()
            .base_offset(offset)
            .producer(pid, 0, (offset / 1_000) as i32);
        builder.add(offset, Some(b"k"), Some(b"value"), &[]);
        segment.extend_from_slice(builder.build().unwrap().as_bytes());
    }
    let batches: Vec<RecordBatch> = BatchIter::new(Bytes::from(segment))
        .map(|found| found.unwrap().batch)
        .collect();
    let mut group = c.benchmark_group("replay");
    group.throughput(Throughput::Elements(BATCHES as u64));
    group.bench_function("small_batches", |b| {
        b.iter(|| {
            producer_state::replay(ProducerStateManager::new(PsmConfig::default()), &batches)
                .unwrap()
                .manager
                .map_end_offset()
        })
    });
    group.finish();
}

fn snapshots(c: &mut Criterion) {
    let (psm, _, _) = warmed(100_000);
    let mut store = MemorySnapshotStore::new();
    let mut group = c.benchmark_group("snapshot_100k");
    group.sample_size(20);
    // The manager is cloned in the (unmeasured) setup, so the figure is take_snapshot alone: sort + encode.
    group.bench_function("encode", |b| {
        b.iter_batched(
            || {
                let mut fresh = psm.clone();
                fresh.update_map_end_offset(1_000_000);
                fresh
            },
            |mut fresh| fresh.take_snapshot(&mut store),
            BatchSize::LargeInput,
        )
    });
    let bytes = {
        let mut fresh = psm.clone();
        fresh.update_map_end_offset(1_000_000);
        fresh.take_snapshot(&mut store);
        store.read(1_000_000).unwrap()
    };
    group.bench_function("decode", |b| {
        b.iter(|| decode_snapshot(black_box(&bytes)).unwrap().len())
    });
    // Decoding plus loading into a fresh manager, as recovery does.
    group.bench_function("load", |b| {
        b.iter(|| {
            let mut store = store.clone();
            let mut loaded = ProducerStateManager::new(PsmConfig::default());
            loaded.truncate_and_reload(&mut store, 0, 1_000_000, 0);
            loaded.producer_count()
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = validated_appends, planned_appends, planned_steady_appends, planned_replication, replay, snapshots
}
criterion_main!(benches);
