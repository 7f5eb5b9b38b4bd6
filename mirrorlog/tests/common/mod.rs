//! Helpers shared by the CLI tests: running the binary, reading the shared vectors' manifest, and comparing the
//! dump's JSON with it.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The shared test vectors (copied into record-format).
pub fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../record-format/tests/data/kafka-batches")
}

/// Every case of the manifest.
pub fn manifest_cases() -> Vec<Value> {
    let text = std::fs::read_to_string(vectors_dir().join("manifest.json")).unwrap();
    let manifest: Value = serde_json::from_str(&text).unwrap();
    manifest["cases"].as_array().unwrap().clone()
}

/// Runs the binary.
pub fn mirrorlog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mirrorlog"))
        .args(args)
        .output()
        .unwrap()
}

/// Standard output as JSON lines.
pub fn json_lines(output: &Output) -> Vec<Value> {
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect()
}

/// Fields the manifest derives with tools the dump does not use (digests) or only describes (layouts).
const NOT_IN_DUMP: [&str; 6] = [
    "key_sha256",
    "value_sha256",
    "value_elided",
    "uncompressed_sha256",
    "compressed_prefix_hex",
    "value_layout",
];

/// Every manifest field (but the derived ones) is in the dump with the same value.
pub fn assert_covers(expected: &Value, actual: &Value, path: &str) {
    match (expected, actual) {
        (Value::Object(expected), Value::Object(actual)) => {
            for (key, expected_value) in expected {
                if NOT_IN_DUMP.contains(&key.as_str()) {
                    continue;
                }
                let here = format!("{path}.{key}");
                let actual_value = actual
                    .get(key)
                    .unwrap_or_else(|| panic!("{here}: missing from dump"));
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
