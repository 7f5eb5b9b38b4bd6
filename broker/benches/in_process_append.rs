//! The in-process baseline for `broker/bench/serve_bench.py`: the same batches librdkafka sends (one idempotent
//! producer, `BATCH_RECORDS` records of `VALUE_BYTES` each) appended straight to an fs `PartitionLog` with
//! `append_as_leader` and `flush_acknowledged` per batch — what the broker does per produce request, without the
//! network, the protocol and the client. Prints MiB/s per run and the median of `RUNS`.
//!
//! `BATCH_RECORDS=80 DURABILITY=sync cargo bench -p broker --bench in_process_append`
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::time::Instant;

use partition_log::{LogConfig, PartitionLog};
use producer_state::{AppendOrigin, TransactionVersion};
use record_format::BatchBuilder;
use storage::{Durability, PartitionId};
use storage_config::StorageConfig;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let batch_records = env_usize("BATCH_RECORDS", 80);
    let value_bytes = env_usize("VALUE_BYTES", 1024);
    let total_records = env_usize("RECORDS", 100_000);
    let runs = env_usize("RUNS", 3);
    let durability = match std::env::var("DURABILITY").as_deref() {
        Ok("buffered") => Durability::Buffered,
        _ => Durability::Sync,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let value = vec![b'x'; value_bytes];
    let batches = total_records / batch_records;
    let mut rates = Vec::new();
    for run in 0..runs {
        let dir = tempfile::tempdir().expect("temp dir");
        let rate = runtime.block_on(async {
            let store = StorageConfig::for_backend(storage_config::Backend::Fs, dir.path())
                .open()
                .expect("open");
            let id = PartitionId::new("bench", 0).expect("id");
            let config = LogConfig {
                durability,
                ..LogConfig::default()
            };
            let (mut log, _) = PartitionLog::open(store.create(&id).await.expect("create"), config, 0)
                .await
                .expect("log");
            let mut bytes = 0usize;
            let started = Instant::now();
            for batch in 0..batches {
                let mut builder = BatchBuilder::new().producer(1000, 0, (batch * batch_records) as i32);
                for record in 0..batch_records {
                    builder.add(record as i64, None, Some(&value), &[]);
                }
                let built = builder.build().expect("batch");
                bytes += built.size();
                log.append_as_leader(vec![built], AppendOrigin::Client, TransactionVersion::V0)
                    .await
                    .expect("append");
                log.flush_acknowledged().await.expect("flush");
                let end = log.log_end_offset();
                log.advance_high_watermark(end);
            }
            bytes as f64 / (1 << 20) as f64 / started.elapsed().as_secs_f64()
        });
        println!("run {run}: {rate:.1} MiB/s ({batches} batches of {batch_records} x {value_bytes} B, {durability:?})");
        rates.push(rate);
    }
    rates.sort_by(f64::total_cmp);
    println!("median: {:.1} MiB/s", rates[rates.len() / 2]);
}
