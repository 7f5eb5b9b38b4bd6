//! Criterion benchmarks of the codec, each next to its baseline measured in the same run:
//!
//! - `validate/{100B,16KiB,1MiB}`: header parse + CRC-32C check of one batch, next to `crc32c/…`, the raw
//!   `crc32c` crate over the same bytes the CRC covers.
//! - `iterate_1000/…`: CRC check + decoding every record of a 1,000-record uncompressed batch (touching key,
//!   value and headers), next to `kafka-protocol` 0.18 decoding the same bytes (which also checks the CRC).
//! - `encode_1000/…`: building that batch from its records (views of one decoded buffer), next to
//!   `kafka-protocol` encoding the same records decoded by itself (also views of one buffer).
//!
//! Run: `cargo bench -p record-format --bench codec` (figures in `docs/benchmarks.md`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use record_format::{BatchBuilder, RecordBatch};

/// A batch of one record whose value makes the batch `size` bytes long (approximately).
fn batch_of_size(size: usize) -> Bytes {
    let mut builder = BatchBuilder::new().producer(1, 0, 0);
    let value = vec![b'v'; size.saturating_sub(61 + 20)];
    builder.add(1_700_000_000_000, Some(b"key"), Some(&value), &[]);
    builder.build().unwrap().into_bytes()
}

/// The iteration benchmark's batch: 1,000 records, 16-byte keys, 100-byte values, one header each.
fn thousand_record_builder() -> BatchBuilder {
    let mut builder = BatchBuilder::new().producer(4242, 1, 0);
    for i in 0..1000u32 {
        let key = format!("key-{i:012}");
        let value = vec![b'a' + (i % 26) as u8; 100];
        builder.add(
            1_700_000_000_000 + i64::from(i),
            Some(key.as_bytes()),
            Some(&value),
            &[("trace", Some(b"0123456789"))],
        );
    }
    builder
}

fn validate(c: &mut Criterion) {
    let mut group = c.benchmark_group("validate");
    for (label, size) in [("100B", 100), ("16KiB", 16 * 1024), ("1MiB", 1024 * 1024)] {
        let bytes = batch_of_size(size);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(BenchmarkId::new("record_format", label), &bytes, |b, bytes| {
            b.iter(|| RecordBatch::decode(black_box(bytes.clone())).unwrap())
        });
        group.bench_with_input(BenchmarkId::new("raw_crc32c", label), &bytes, |b, bytes| {
            b.iter(|| crc32c::crc32c(black_box(&bytes[21..])))
        });
    }
    group.finish();
}

fn iterate(c: &mut Criterion) {
    let bytes = thousand_record_builder().build().unwrap().into_bytes();
    let mut group = c.benchmark_group("iterate_1000");
    group.throughput(Throughput::Elements(1000));
    group.bench_function("record_format", |b| {
        b.iter(|| {
            let batch = RecordBatch::decode(black_box(bytes.clone())).unwrap();
            let records = batch.records().unwrap();
            let mut total = 0usize;
            for record in records.iter() {
                let record = record.unwrap();
                total += record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len);
                for header in record.headers {
                    total += header.key.len() + header.value.map_or(0, <[u8]>::len);
                }
            }
            total
        })
    });
    group.bench_function("kafka_protocol", |b| {
        b.iter(|| {
            let mut buf = black_box(bytes.clone());
            let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut buf).unwrap();
            let mut total = 0usize;
            for record in &set.records {
                total +=
                    record.key.as_ref().map_or(0, |k| k.len()) + record.value.as_ref().map_or(0, |v| v.len());
                for (key, value) in &record.headers {
                    total += key.len() + value.as_ref().map_or(0, |v| v.len());
                }
            }
            total
        })
    });
    group.finish();
}

fn encode(c: &mut Criterion) {
    let bytes = thousand_record_builder().build().unwrap().into_bytes();
    // Both encoders read their records from the same decoded buffer (keys/values/headers are views of it).
    let builder = BatchBuilder::from_batch(&RecordBatch::decode(bytes.clone()).unwrap()).unwrap();
    let peer_records = kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes.clone())
        .unwrap()
        .records;
    let options = kafka_protocol::records::RecordEncodeOptions {
        version: 2,
        compression: kafka_protocol::records::Compression::None,
    };
    let mut group = c.benchmark_group("encode_1000");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("record_format", |b| {
        b.iter(|| black_box(&builder).build().unwrap())
    });
    group.bench_function("kafka_protocol", |b| {
        b.iter(|| {
            let mut out = BytesMut::with_capacity(bytes.len());
            kafka_protocol::records::RecordBatchEncoder::encode(&mut out, black_box(&peer_records), &options)
                .unwrap();
            out
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = validate, iterate, encode
}
criterion_main!(benches);
