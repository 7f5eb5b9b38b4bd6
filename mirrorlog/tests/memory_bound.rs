//! Issue 13, item 3: no input makes `dump` use memory out of proportion to the batch it must hold. A 100 KB gzip
//! batch of a million tiny records used to cost gigabytes (per-record structures built before printing); now
//! records are checked, then streamed; a barrier value of millions of tagged fields is kept as its own bytes.
//! The binary runs under an address-space limit of 256 MiB beyond the inflated batch.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::process::Command;

use bytes::Bytes;
use record_format::{BatchBuilder, Compression, NewRecord, RecordBatch};

/// A gzip batch of `count` identical records (offset delta 0, null key, empty value: 7 bytes each inflated),
/// which gzip shrinks to almost nothing — the hostile shape of the issue.
fn tiny_records_batch(count: i32) -> RecordBatch {
    let mut one = Vec::new();
    NewRecord {
        value: Some(Bytes::new()),
        ..NewRecord::default()
    }
    .encode_into(&mut one)
    .unwrap();
    let plain = one.repeat(count as usize);
    let section = record_format::compression::compress(Compression::Gzip, &plain).unwrap();
    let mut builder = BatchBuilder::new().compression(Compression::Gzip);
    builder.add(0, None, Some(b""), &[]);
    let template = builder.build().unwrap();
    let mut bytes = template.as_bytes()[..61].to_vec();
    let length = (61 - 12 + section.len()) as i32;
    bytes[8..12].copy_from_slice(&length.to_be_bytes());
    bytes[23..27].copy_from_slice(&(count - 1).to_be_bytes());
    bytes[57..61].copy_from_slice(&count.to_be_bytes());
    bytes.extend_from_slice(&section);
    let mut batch = RecordBatch::parse(Bytes::from(bytes)).unwrap();
    // Rewriting the producer fields recomputes the CRC.
    batch.set_producer(-1, -1, -1);
    batch
}

fn dump_limited(args: &[&str], limit_mib: u64) -> std::process::Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {} && exec \"$0\" \"$@\" > /dev/null",
            limit_mib * 1024
        ))
        .arg(env!("CARGO_BIN_EXE_mirrorlog"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs each command under the limit; every one must succeed.
fn all_succeed_within(commands: &[Vec<&str>], limit_mib: u64) {
    for args in commands {
        let output = dump_limited(args, limit_mib);
        assert!(
            output.status.success(),
            "{args:?}: {:?} {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn a_million_tiny_records_dump_within_256_mib_beyond_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let batch = tiny_records_batch(1_000_000);
    assert!(batch.size() < 200_000, "stored: {} bytes", batch.size());
    let inflated_mib = 8;
    let segment = dir.path().join("00000000000000000000.log");
    std::fs::write(&segment, batch.as_bytes()).unwrap();
    let path = segment.to_str().unwrap();
    all_succeed_within(
        &[vec!["dump", path], vec!["dump", "--json", path]],
        256 + inflated_mib,
    );
}

/// A gzip `MIRROR_PID_RESET` barrier whose value declares `fields` two-byte tagged fields.
fn barrier_with_tagged_fields(fields: u32) -> RecordBatch {
    let mut value = vec![0u8, 0, 2, b'A'];
    let mut count = fields;
    // The unsigned varint of the field count.
    while count >= 0x80 {
        value.push((count as u8) | 0x80);
        count >>= 7;
    }
    value.push(count as u8);
    for _ in 0..fields {
        value.extend_from_slice(&[1, 0]);
    }
    let mut builder = BatchBuilder::new().compression(Compression::Gzip).control(true);
    builder.add(0, Some(&[0, 0, 0, 7]), Some(&value), &[]);
    builder.build().unwrap()
}

#[test]
fn a_barrier_of_two_million_tagged_fields_dumps_and_replays_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let batch = barrier_with_tagged_fields(2_000_000);
    assert!(batch.size() < 100_000, "stored: {} bytes", batch.size());
    let inflated_mib = 4;
    let segment = dir.path().join("00000000000000000000.log");
    std::fs::write(&segment, batch.as_bytes()).unwrap();
    let path = segment.to_str().unwrap();
    all_succeed_within(
        &[
            vec!["dump", path],
            vec!["dump", "--json", path],
            vec!["replay", path],
        ],
        256 + inflated_mib,
    );
}
