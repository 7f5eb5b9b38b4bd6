//! Fuzzes the segment readers: the streaming reader (with and without a known length) and the in-memory
//! iterator must never panic and must agree on how many batches are valid and where the first error is.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use record_format::{BatchIter, SegmentReader};

fuzz_target!(|data: &[u8]| {
    let known: Vec<_> = SegmentReader::new(data, Some(data.len() as u64))
        .with_max_batch_size(1 << 20)
        .collect();
    let unknown: Vec<_> = SegmentReader::new(data, None).with_max_batch_size(1 << 20).collect();
    let in_memory: Vec<_> = BatchIter::new(Bytes::copy_from_slice(data)).collect();
    let good = |results: &[Result<record_format::SegmentBatch, record_format::SegmentError>]| {
        results.iter().filter(|result| result.is_ok()).count()
    };
    assert_eq!(good(&known), good(&unknown));
    let mut offset = 0u64;
    for found in known.iter().flatten() {
        assert_eq!(found.file_offset, offset);
        offset += found.batch.size() as u64;
    }
    if let Some(Err(error)) = known.last() {
        assert_eq!(error.file_offset(), offset);
    }
});
