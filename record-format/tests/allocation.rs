//! Memory behaviour on a counting global allocator (`allocation-counter`): no allocation per record when iterating an uncompressed
//! batch; decompression bombs and absurd record counts fail fast within bounded memory.
//!
//! The counters are per thread, so tests running in parallel do not disturb each other.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use bytes::Bytes;
use record_format::{BatchBuilder, Compression, DecodeError, DecodeLimits, RecordBatch};

/// Runs `work` and returns its result with the number of allocations and the peak of live bytes meanwhile
/// (counted on this thread only).
fn measure<T>(work: impl FnOnce() -> T) -> (T, allocation_counter::AllocationInfo) {
    let mut result = None;
    let info = allocation_counter::measure(|| result = Some(work()));
    (result.unwrap(), info)
}

fn batch_with_records(count: u32) -> RecordBatch {
    let mut builder = BatchBuilder::new().producer(1, 0, 0);
    for i in 0..count {
        builder.add(
            i64::from(i),
            Some(b"key"),
            Some(b"value"),
            &[("h", Some(b"v")), ("h", None)],
        );
    }
    builder.build().unwrap()
}

fn allocations_while_iterating(batch: &RecordBatch) -> u64 {
    let records = batch.records().unwrap();
    let (seen, info) = measure(|| {
        let mut seen = 0;
        for record in records.iter() {
            let record = record.unwrap();
            seen += record.headers.iter().count();
            std::hint::black_box(record.key);
        }
        seen
    });
    assert_eq!(seen as i32, 2 * batch.record_count());
    info.count_total
}

#[test]
fn iterating_an_uncompressed_batch_allocates_nothing_per_record() {
    let small = batch_with_records(10);
    let large = batch_with_records(10_000);
    assert_eq!(allocations_while_iterating(&small), 0);
    assert_eq!(allocations_while_iterating(&large), 0);
}

#[test]
fn records_view_of_an_uncompressed_batch_does_not_copy_the_section() {
    let batch = batch_with_records(10_000);
    let (records, info) = measure(|| batch.records().unwrap());
    assert_eq!(info.count_total, 0);
    assert_eq!(records.section().as_ptr(), batch.records_section().as_ptr());
}

/// A valid batch whose zstd records section inflates to `inflated` bytes of zeros.
fn zstd_bomb(inflated: usize) -> Bytes {
    let zeros = vec![0u8; inflated];
    let packed = record_format::compression::compress(Compression::Zstd, &zeros).unwrap();
    let mut header = BatchBuilder::new()
        .compression(Compression::Zstd)
        .build()
        .unwrap()
        .into_bytes()
        .to_vec();
    header.truncate(61);
    header[57..61].copy_from_slice(&1i32.to_be_bytes());
    header.extend_from_slice(&packed);
    let length = (header.len() - 12) as i32;
    header[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&header[21..]);
    header[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(header)
}

#[test]
fn decompression_bomb_is_rejected_within_the_limit() {
    let bomb = zstd_bomb(512 * 1024 * 1024);
    assert!(bomb.len() < 64 * 1024, "the bomb is tiny: {} bytes", bomb.len());
    let batch = RecordBatch::decode(bomb).unwrap();
    let limits = DecodeLimits {
        max_uncompressed_records_bytes: 4 * 1024 * 1024,
    };
    let started = std::time::Instant::now();
    let (result, info) = measure(|| batch.records_with_limits(&limits).map(|r| r.section().len()));
    let peak = info.bytes_max;
    assert!(
        matches!(result, Err(DecodeError::DecompressedTooLarge { .. })),
        "{result:?}"
    );
    assert!(
        peak < 16 * 1024 * 1024,
        "peak allocation {peak} bytes for a 4 MiB limit"
    );
    // Generous bound (debug build, loaded machine): inflating 512 MiB would take far longer.
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn default_limit_stops_a_bomb_before_it_inflates() {
    let batch = RecordBatch::decode(zstd_bomb(256 * 1024 * 1024)).unwrap();
    let (result, info) = measure(|| batch.records().map(|r| r.section().len()));
    let peak = info.bytes_max;
    assert!(
        matches!(result, Err(DecodeError::DecompressedTooLarge { .. })),
        "{result:?}"
    );
    let limit = DecodeLimits::default().max_uncompressed_records_bytes as u64;
    assert!(
        peak <= 2 * limit + 1024 * 1024,
        "peak {peak} for a limit of {limit}"
    );
}

#[test]
fn batch_claiming_i32_max_records_is_rejected_without_allocating_for_them() {
    let mut bytes = batch_with_records(3).into_bytes().to_vec();
    bytes[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    let crc = crc32c::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    let batch = RecordBatch::decode(Bytes::from(bytes)).unwrap();
    let (result, info) = measure(|| batch.records().and_then(|records| records.validate()));
    let peak = info.bytes_max;
    assert!(
        matches!(
            result,
            Err(DecodeError::RecordCountMismatch {
                declared: i32::MAX,
                ..
            })
        ),
        "{result:?}"
    );
    assert!(peak < 4096, "peak allocation {peak} bytes");
}

#[test]
fn compressed_batch_claiming_i32_max_records_is_rejected_within_its_section() {
    let mut builder = BatchBuilder::new().compression(Compression::Lz4);
    builder.add(0, None, Some(b"v"), &[]);
    let mut bytes = builder.build().unwrap().into_bytes().to_vec();
    bytes[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    let crc = crc32c::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    let batch = RecordBatch::decode(Bytes::from(bytes)).unwrap();
    let (result, info) = measure(|| batch.records().and_then(|records| records.validate()));
    let peak = info.bytes_max;
    assert!(
        matches!(result, Err(DecodeError::RecordCountMismatch { .. })),
        "{result:?}"
    );
    assert!(peak < 1024 * 1024, "peak allocation {peak} bytes");
}
