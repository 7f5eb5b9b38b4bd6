//! The shared Kafka batch vectors (`tests/data/kafka-batches`): every valid case decodes to exactly the
//! manifest's fields, every corrupt case fails with the manifest's category, and uncompressed batches re-encode
//! to their original bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::path::{Path, PathBuf};

use bytes::Bytes;
use record_format::{
    control::ControlKey, BatchBuilder, ControlRecord, DecodeError, RecordBatch, SegmentBatch, SegmentReader,
};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kafka-batches")
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(data_dir().join("manifest.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn cases(category: &str) -> Vec<Value> {
    let manifest = manifest();
    let cases: Vec<Value> = manifest["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|case| case["category"] == category)
        .cloned()
        .collect();
    assert!(!cases.is_empty(), "no {category} cases in the manifest");
    cases
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn hex_or_null(bytes: Option<&[u8]>) -> Value {
    bytes.map_or(Value::Null, |bytes| Value::String(hex::encode(bytes)))
}

fn len_or_minus_one(bytes: Option<&[u8]>) -> Value {
    bytes.map_or(json!(-1), |bytes| json!(bytes.len()))
}

/// Everything our decoder says about a batch, in the manifest's vocabulary.
fn describe(found: &SegmentBatch) -> Result<Value, DecodeError> {
    let batch = &found.batch;
    let attributes = batch.attributes();
    let records = batch.records()?;
    let mut described_records = Vec::new();
    let mut control = None;
    for record in records.iter() {
        let record = record?;
        let mut fields = Map::new();
        fields.insert("offset_delta".into(), json!(record.offset_delta));
        fields.insert("offset".into(), json!(record.offset));
        fields.insert("timestamp_delta".into(), json!(record.timestamp_delta));
        fields.insert("timestamp".into(), json!(record.timestamp));
        fields.insert("attributes".into(), json!(record.attributes));
        fields.insert("length".into(), json!(record.length));
        fields.insert("key_len".into(), len_or_minus_one(record.key));
        fields.insert("key".into(), hex_or_null(record.key));
        fields.insert(
            "key_sha256".into(),
            record.key.map_or(Value::Null, |k| json!(sha256_hex(k))),
        );
        fields.insert("value_len".into(), len_or_minus_one(record.value));
        fields.insert("value".into(), hex_or_null(record.value));
        fields.insert(
            "value_elided".into(),
            json!(record.value.is_some_and(|v| v.len() > 4096)),
        );
        fields.insert(
            "value_sha256".into(),
            record.value.map_or(Value::Null, |v| json!(sha256_hex(v))),
        );
        let headers: Vec<Value> = record
            .headers
            .iter()
            .map(|header| {
                json!({
                    "key": header.key_str().unwrap(),
                    "key_hex": hex::encode(header.key),
                    "value": hex_or_null(header.value),
                })
            })
            .collect();
        fields.insert("headers".into(), Value::Array(headers));
        if batch.is_control() {
            let key = ControlKey::decode(record.key)?;
            let decoded = ControlRecord::decode(record.key, record.value)?;
            let value_fields = match &decoded {
                ControlRecord::Abort(marker) | ControlRecord::Commit(marker) => json!({
                    "version": marker.version,
                    "coordinator_epoch": marker.coordinator_epoch,
                }),
                ControlRecord::MirrorPidReset(barrier) => json!({
                    "version": barrier.version,
                    "source_cluster_id": barrier.source_cluster_id,
                    "tagged_field_count": barrier.tagged_field_count(),
                }),
                other => panic!("no vector has {other:?}"),
            };
            control = Some(json!({
                "key_version": key.version,
                "type": key.control_type,
                "type_name": decoded.type_name(),
                "key_hex": hex_or_null(record.key),
                "value_hex": hex_or_null(record.value),
                "value_fields": value_fields,
                "record_hex": hex::encode(record.encoded),
            }));
        }
        described_records.push(Value::Object(fields));
    }
    let stored = batch.records_section();
    let mut described = json!({
        "file_offset": found.file_offset,
        "size": batch.size(),
        "base_offset": batch.base_offset(),
        "batch_length": batch.batch_length(),
        "partition_leader_epoch": batch.partition_leader_epoch(),
        "magic": batch.magic(),
        "crc": batch.crc(),
        "crc_hex": format!("{:08x}", batch.crc()),
        "attributes": {
            "raw": attributes.0,
            "compression": attributes.compression()?.name(),
            "compression_id": attributes.compression_id(),
            "timestamp_type": attributes.timestamp_type().name(),
            "is_transactional": attributes.is_transactional(),
            "is_control": attributes.is_control(),
        },
        "last_offset_delta": batch.last_offset_delta(),
        "last_offset": batch.last_offset(),
        "base_timestamp": batch.base_timestamp(),
        "max_timestamp": batch.max_timestamp(),
        "producer_id": batch.producer_id(),
        "producer_epoch": batch.producer_epoch(),
        "base_sequence": batch.base_sequence(),
        "last_sequence": batch.last_sequence(),
        "record_count": batch.record_count(),
        "records_section": {
            "stored_size": stored.len(),
            "uncompressed_size": records.section().len(),
            "uncompressed_sha256": sha256_hex(records.section()),
            "compressed_prefix_hex": hex::encode(&stored[..stored.len().min(16)]),
        },
        "records": described_records,
    });
    if let Some(control) = control {
        described["control"] = control;
    }
    Ok(described)
}

/// Every key the manifest gives must be present in `actual` with the same value (value layouts are checked
/// against the value bytes separately).
fn assert_covers(expected: &Value, actual: &Value, path: &str) {
    match (expected, actual) {
        (Value::Object(expected), Value::Object(actual)) => {
            for (key, expected_value) in expected {
                let here = format!("{path}.{key}");
                if key == "value_layout" {
                    continue;
                }
                let actual_value = actual
                    .get(key)
                    .unwrap_or_else(|| panic!("{here}: not produced by the decoder"));
                assert_covers(expected_value, actual_value, &here);
            }
        }
        (Value::Array(expected), Value::Array(actual)) => {
            assert_eq!(expected.len(), actual.len(), "{path}: length");
            for (index, (expected, actual)) in expected.iter().zip(actual).enumerate() {
                assert_covers(expected, actual, &format!("{path}[{index}]"));
            }
        }
        _ => assert_eq!(expected, actual, "{path}"),
    }
}

fn check_value_layout(expected_control: &Value) {
    let value = hex::decode(expected_control["value_hex"].as_str().unwrap()).unwrap();
    for part in expected_control["value_layout"].as_array().unwrap() {
        let offset = part["offset"].as_u64().unwrap() as usize;
        let size = part["size"].as_u64().unwrap() as usize;
        assert_eq!(hex::encode(&value[offset..offset + size]), part["hex"], "{part}");
    }
}

fn read_case(case: &Value) -> Vec<u8> {
    let bytes = std::fs::read(data_dir().join(case["file"].as_str().unwrap())).unwrap();
    assert_eq!(
        sha256_hex(&bytes),
        case["file_sha256"],
        "{}: file changed",
        case["name"]
    );
    bytes
}

fn check_valid_case(case: &Value) {
    let name = case["name"].as_str().unwrap();
    let bytes = read_case(case);
    let batches: Vec<SegmentBatch> = SegmentReader::new(&bytes[..], Some(bytes.len() as u64))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|error| panic!("{name}: {error}"));
    let expected = case["batches"].as_array().unwrap();
    assert_eq!(batches.len(), expected.len(), "{name}: batch count");
    for (found, expected) in batches.iter().zip(expected) {
        let actual = describe(found).unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_covers(expected, &actual, name);
        if let Some(control) = expected.get("control") {
            check_value_layout(control);
        }
    }
}

#[test]
fn every_valid_data_case_decodes_to_the_manifest_fields() {
    for case in cases("data") {
        check_valid_case(&case);
    }
}

#[test]
fn every_control_case_decodes_to_the_manifest_fields() {
    for case in cases("control") {
        check_valid_case(&case);
    }
}

#[test]
fn every_kafkajs_case_decodes_to_the_manifest_fields() {
    for case in cases("kafkajs") {
        check_valid_case(&case);
    }
}

#[test]
fn segment_case_decodes_batch_by_batch_with_file_offsets() {
    for case in cases("segment") {
        check_valid_case(&case);
    }
}

/// The first error met when decoding a file fully: the segment reader, then each batch's records and controls.
fn first_error(bytes: &[u8]) -> Option<(u64, u64, DecodeError)> {
    let mut valid_batches = 0;
    for found in SegmentReader::new(bytes, Some(bytes.len() as u64)) {
        match found {
            Ok(found) => {
                if let Err(error) = describe(&found) {
                    return Some((found.file_offset, valid_batches, error));
                }
                valid_batches += 1;
            }
            Err(record_format::SegmentError::Corrupt {
                file_offset,
                valid_batches,
                error,
                ..
            }) => return Some((file_offset, valid_batches, error)),
            Err(other) => panic!("unexpected I/O error {other}"),
        }
    }
    None
}

#[test]
fn every_corrupt_case_fails_with_the_manifest_category() {
    for case in cases("corrupt") {
        let name = case["name"].as_str().unwrap();
        let bytes = read_case(&case);
        let (file_offset, valid_batches, error) =
            first_error(&bytes).unwrap_or_else(|| panic!("{name}: decoded without error"));
        assert_eq!(
            error.category().as_str(),
            case["expected_error"]["category"],
            "{name}: {error}"
        );
        let (prefix_bytes, prefix_batches) = match case.get("valid_prefix") {
            Some(prefix) => (
                prefix["bytes"].as_u64().unwrap(),
                prefix["batches"].as_u64().unwrap(),
            ),
            None => (0, 0),
        };
        assert_eq!(file_offset, prefix_bytes, "{name}: valid prefix bytes");
        assert_eq!(valid_batches, prefix_batches, "{name}: valid prefix batches");
    }
}

#[test]
fn torn_tail_after_a_valid_batch_reports_the_valid_prefix() {
    let case = cases("data")
        .into_iter()
        .find(|c| c["name"] == "plain_single_record")
        .unwrap();
    let mut bytes = read_case(&case);
    let first = bytes.len() as u64;
    bytes.extend_from_slice(&read_case(&case)[..30]);
    let results: Vec<_> = SegmentReader::new(&bytes[..], Some(bytes.len() as u64)).collect();
    assert_eq!(results.len(), 2);
    assert!(results[0].is_ok());
    match &results[1] {
        Err(record_format::SegmentError::Corrupt {
            file_offset,
            valid_batches,
            valid_bytes,
            error,
        }) => {
            assert_eq!((*file_offset, *valid_batches, *valid_bytes), (first, 1, first));
            assert_eq!(error.category().as_str(), "truncated");
        }
        other => panic!("expected a torn tail, got {other:?}"),
    }
}

#[test]
fn uncompressed_batches_re_encode_to_the_original_bytes() {
    let mut checked = 0;
    for category in ["data", "control", "segment", "kafkajs"] {
        for case in cases(category) {
            let bytes = read_case(&case);
            for found in SegmentReader::new(&bytes[..], None) {
                let batch = found.unwrap().batch;
                let rebuilt = BatchBuilder::from_batch(&batch).unwrap().build().unwrap();
                if batch.attributes().compression_id() == 0 {
                    assert_eq!(rebuilt.as_bytes(), batch.as_bytes(), "{}", case["name"]);
                    checked += 1;
                } else {
                    let original: Vec<_> = batch
                        .records()
                        .unwrap()
                        .iter()
                        .map(|r| r.unwrap().encoded.to_vec())
                        .collect();
                    let again: Vec<_> = rebuilt
                        .records()
                        .unwrap()
                        .iter()
                        .map(|r| r.unwrap().encoded.to_vec())
                        .collect();
                    assert_eq!(original, again, "{}: records after recompression", case["name"]);
                    assert_eq!(rebuilt.crc(), rebuilt.compute_crc());
                }
            }
        }
    }
    assert!(checked >= 20, "only {checked} uncompressed batches checked");
}

#[test]
fn barrier_builder_reproduces_the_shared_barrier_vector() {
    let case = cases("control")
        .into_iter()
        .find(|c| c["name"] == "control_mirror_pid_reset")
        .unwrap();
    let bytes = read_case(&case);
    let built = record_format::mirror_pid_reset_batch(
        &record_format::MirrorPidResetRecord::new("source-cluster-A", None),
        record_format::ControlBatchPlacement {
            base_offset: 4242,
            partition_leader_epoch: 5,
            timestamp: 1_700_000_007_000,
        },
    )
    .unwrap();
    assert_eq!(built.as_bytes(), &bytes[..]);
}

#[test]
fn marker_builder_reproduces_the_shared_commit_and_abort_vectors() {
    for (name, commit, pid, epoch, coordinator_epoch, offset, ple, ts) in [
        ("control_commit", true, 2000, 1, 17, 1000, 3, 1_700_000_005_000),
        ("control_abort", false, 2001, 7, 23, 77, 0, 1_700_000_006_000),
    ] {
        let case = cases("control").into_iter().find(|c| c["name"] == name).unwrap();
        let built = record_format::end_txn_marker_batch(
            commit,
            pid,
            epoch,
            coordinator_epoch,
            record_format::ControlBatchPlacement {
                base_offset: offset,
                partition_leader_epoch: ple,
                timestamp: ts,
            },
        )
        .unwrap();
        assert_eq!(built.as_bytes(), &read_case(&case)[..], "{name}");
    }
}

#[test]
fn rewriting_offset_and_leader_epoch_keeps_the_crc_valid() {
    let case = cases("data")
        .into_iter()
        .find(|c| c["name"] == "idempotent_basic")
        .unwrap();
    let mut batch = RecordBatch::decode(Bytes::from(read_case(&case))).unwrap();
    let crc = batch.crc();
    batch.set_base_offset(123_456);
    batch.set_partition_leader_epoch(99);
    assert_eq!(
        (batch.base_offset(), batch.partition_leader_epoch(), batch.crc()),
        (123_456, 99, crc)
    );
    batch.verify_crc().unwrap();
    // `place` is the two rewrites in one edit: the same bytes.
    let mut placed = RecordBatch::decode(Bytes::from(read_case(&case))).unwrap();
    placed.place(123_456, 99);
    assert_eq!(placed.as_bytes(), batch.as_bytes());
}

#[test]
fn rewriting_producer_fields_recomputes_the_crc() {
    let case = cases("data")
        .into_iter()
        .find(|c| c["name"] == "idempotent_basic")
        .unwrap();
    let original = RecordBatch::decode(Bytes::from(read_case(&case))).unwrap();
    let mut batch = original.clone();
    batch.set_producer(42, 3, 1000);
    assert_eq!(
        (batch.producer_id(), batch.producer_epoch(), batch.base_sequence()),
        (42, 3, 1000)
    );
    assert_ne!(batch.crc(), original.crc());
    batch.verify_crc().unwrap();
    assert_eq!(
        original.producer_id(),
        case["batches"][0]["producer_id"].as_i64().unwrap(),
        "original untouched"
    );
}

/// A legacy (magic 1) message set of one small message, as an old Kafka wrote it: offset, size, CRC, magic,
/// attributes, timestamp, key (null), value.
fn legacy_message_set() -> Vec<u8> {
    let value = b"hello";
    let mut body = vec![1u8, 0]; // magic 1, attributes
    body.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    body.extend_from_slice(&(-1i32).to_be_bytes());
    body.extend_from_slice(&(value.len() as i32).to_be_bytes());
    body.extend_from_slice(value);
    let crc = crc32fast_like(&body);
    let mut message = Vec::new();
    message.extend_from_slice(&0i64.to_be_bytes());
    message.extend_from_slice(&((4 + body.len()) as i32).to_be_bytes());
    message.extend_from_slice(&crc.to_be_bytes());
    message.extend_from_slice(&body);
    message
}

/// The CRC is not checked before the magic byte is; any value serves.
fn crc32fast_like(bytes: &[u8]) -> u32 {
    bytes
        .iter()
        .fold(0u32, |crc, &byte| crc.rotate_left(5) ^ u32::from(byte))
}

#[test]
fn a_legacy_magic_1_message_is_named_unsupported_magic_not_a_bad_length() {
    let bytes = legacy_message_set();
    let in_memory = record_format::BatchIter::new(Bytes::from(bytes.clone()))
        .next()
        .unwrap()
        .unwrap_err();
    let streamed = SegmentReader::new(&bytes[..], Some(bytes.len() as u64))
        .next()
        .unwrap()
        .unwrap_err();
    for (error, reader) in [
        (in_memory.category(), "BatchIter"),
        (streamed.category(), "SegmentReader"),
    ] {
        assert_eq!(
            error,
            Some(record_format::ErrorCategory::UnsupportedMagic),
            "{reader}"
        );
    }
}
