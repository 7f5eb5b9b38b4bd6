//! Repro of the sled 0.34.7 deadlock (spacejam/sled#1412): rounds of 1 KiB appends with a sync every MiB; prints
//! any sync slower than 2 s and the syncs per round. A round that never ends is the deadlock.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking
use storage::{Durability, PartitionId, Storage};
use storage_sled::{SledConfig, SledStorage};

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    for round in 0..4 {
        eprintln!("round {round}");
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let store = SledStorage::open(SledConfig::new(dir.path())).unwrap();
            let mut partition = store.create(&PartitionId::new("t", 0).unwrap()).await.unwrap();
            let batches = storage_bench_like(64 << 20);
            let mut since = 0;
            let mut syncs = 0;
            for batch in &batches {
                partition.append(std::slice::from_ref(batch)).await.unwrap();
                since += batch.size();
                if since >= 1 << 20 {
                    since = 0;
                    let started = std::time::Instant::now();
                    partition.flush(Durability::Sync).await.unwrap();
                    syncs += 1;
                    if started.elapsed().as_secs() > 2 {
                        eprintln!("sync {syncs}: {:?}", started.elapsed());
                    }
                }
            }
            eprintln!("syncs {syncs}");
        });
    }
}

fn storage_bench_like(total: usize) -> Vec<record_format::RecordBatch> {
    let value = vec![7u8; 1024 - 90];
    (0..(total / 1024) as i64)
        .map(|offset| {
            let mut builder = record_format::BatchBuilder::new().base_offset(offset);
            builder.add(0, None, Some(&value), &[]);
            builder.build().unwrap()
        })
        .collect()
}
