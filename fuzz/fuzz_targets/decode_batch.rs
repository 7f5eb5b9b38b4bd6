//! Fuzzes the batch decoder: structure, CRC, records (every codec, with a small decompression limit), headers
//! and control records. Input is one batch; the CRC gate is skipped so mutations reach the record decoder.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use record_format::{BatchBuilder, ControlRecord, DecodeLimits, RecordBatch};

fuzz_target!(|data: &[u8]| {
    let Ok(batch) = RecordBatch::parse(Bytes::copy_from_slice(data)) else {
        return;
    };
    let _ = batch.verify_crc();
    let _ = (batch.last_sequence(), batch.last_offset(), batch.attributes().timestamp_type());
    let limits = DecodeLimits {
        max_uncompressed_records_bytes: 1 << 20,
    };
    let Ok(records) = batch.records_with_limits(&limits) else {
        return;
    };
    let mut all_good = true;
    for record in records.iter() {
        match record {
            Ok(record) => {
                for header in record.headers {
                    let _ = header.key_str();
                }
                if batch.is_control() {
                    if let Ok(control) = ControlRecord::decode(record.key, record.value) {
                        let _ = (control.encode_key(), control.encode_value());
                    }
                }
            }
            Err(_) => all_good = false,
        }
    }
    // A batch that decodes cleanly re-encodes to the same header and records. Bytes may differ only where the
    // input used non-canonical (over-long) varints, which Kafka's reader accepts and no writer produces.
    if all_good {
        if let Ok(builder) = BatchBuilder::from_batch(&batch) {
            let rebuilt = builder.build().expect("a decoded batch re-encodes");
            // Length and CRC (bytes 8..12 and 17..21) follow the records; everything else must be identical.
            assert_eq!(rebuilt.as_bytes()[..8], batch.as_bytes()[..8], "base offset");
            assert_eq!(rebuilt.as_bytes()[12..17], batch.as_bytes()[12..17], "leader epoch and magic");
            assert_eq!(rebuilt.as_bytes()[21..61], batch.as_bytes()[21..61], "header after the CRC");
            let original = batch.records_with_limits(&limits).expect("decoded once");
            let again = rebuilt.records_with_limits(&limits).expect("rebuilt batch decodes");
            for (a, b) in original.iter().zip(again.iter()) {
                let (a, b) = (a.expect("decoded once"), b.expect("rebuilt record decodes"));
                assert_eq!(
                    (a.offset_delta, a.timestamp_delta, a.key, a.value, a.attributes),
                    (b.offset_delta, b.timestamp_delta, b.key, b.value, b.attributes)
                );
                assert!(a.headers.iter().eq(b.headers.iter()));
            }
        }
    }
});
