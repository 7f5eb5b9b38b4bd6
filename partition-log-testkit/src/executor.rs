//! A workload of every durable partition-log operation, for the proof that none of them syncs or writes a
//! database on an executor thread (`storage_testkit::executor_guard`): client appends that fill several
//! segments, acknowledged (synced) appends, a transaction's markers, producer snapshots at rolls and at close,
//! retention, truncation, a reopen, and close.

use partition_log::{LogConfig, PartitionLog};
use producer_state::{AppendOrigin, PsmConfig, TransactionVersion};
use record_format::BatchBuilder;
use storage::{Durability, PartitionId, Storage};

/// Runs the workload on a fresh partition of `store` (call it from a task of the guarded runtime).
pub async fn durable_operations(store: &dyn Storage) {
    let config = LogConfig {
        segment_bytes: 4096,
        durability: Durability::Sync,
        producer_state: PsmConfig {
            cluster_id: Some("guarded".to_owned()),
            ..PsmConfig::default()
        },
        ..LogConfig::default()
    };
    let id = PartitionId::new("guarded", 0).unwrap();
    let (mut log, _) = PartitionLog::open(store.create(&id).await.unwrap(), config.clone(), 0)
        .await
        .unwrap();
    let value = [7u8; 512];
    for sequence in 0..64 {
        let mut builder = BatchBuilder::new().producer(1, 0, sequence);
        builder.add(1_000 + i64::from(sequence), None, Some(&value), &[]);
        log.append_client_batch(builder.build().unwrap(), TransactionVersion::V0)
            .await
            .unwrap();
        log.flush_acknowledged().await.unwrap();
        let end = log.log_end_offset();
        log.advance_high_watermark(end);
    }
    let mut builder = BatchBuilder::new().producer(2, 0, 0).transactional(true);
    builder.add(5_000, None, Some(b"in a transaction"), &[]);
    log.append_as_leader(
        vec![builder.build().unwrap()],
        AppendOrigin::Client,
        TransactionVersion::V0,
    )
    .await
    .unwrap();
    log.write_marker(false, 2, 0, 0, 5_001).await.unwrap();
    log.flush_acknowledged().await.unwrap();
    let end = log.log_end_offset();
    log.advance_high_watermark(end);
    log.delete_records_before(8).await.unwrap();
    log.truncate_to(end - 4, 6_000).await.unwrap();
    log.put_metadata("guarded.key", b"value").await.unwrap();
    log.close().await.unwrap();

    let (log, _) = PartitionLog::open(store.open(&id).await.unwrap(), config, 7_000)
        .await
        .unwrap();
    log.close().await.unwrap();
}
