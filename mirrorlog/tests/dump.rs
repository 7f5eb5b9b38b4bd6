//! `mirrorlog dump` as a user runs it: the binary over every shared vector, checked against the manifest.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::process::Output;

use serde_json::Value;

mod common;

use common::{assert_covers, manifest_cases, vectors_dir};

fn dump(args: &[&str]) -> Output {
    common::mirrorlog(&[&["dump"], args].concat())
}

fn json_lines(output: &Output) -> Vec<Value> {
    common::json_lines(output)
}

#[test]
fn json_dump_of_every_valid_vector_matches_the_manifest() {
    let mut checked = 0;
    for case in manifest_cases().iter().filter(|case| case["valid"] == true) {
        let path = vectors_dir().join(case["file"].as_str().unwrap());
        let output = dump(&[path.to_str().unwrap(), "--json"]);
        assert_eq!(output.status.code(), Some(0), "{}: {:?}", case["name"], output);
        let lines = json_lines(&output);
        assert_eq!(
            lines.len(),
            case["batches"].as_array().unwrap().len(),
            "{}",
            case["name"]
        );
        for (line, expected) in lines.iter().zip(case["batches"].as_array().unwrap()) {
            assert_covers(expected, line, case["name"].as_str().unwrap());
        }
        checked += 1;
    }
    assert_eq!(checked, 27);
}

#[test]
fn json_dump_of_every_corrupt_vector_ends_with_the_manifest_error_and_status_2() {
    for case in manifest_cases().iter().filter(|case| case["valid"] == false) {
        let name = case["name"].as_str().unwrap();
        let path = vectors_dir().join(case["file"].as_str().unwrap());
        let output = dump(&[path.to_str().unwrap(), "--json"]);
        assert_eq!(output.status.code(), Some(2), "{name}");
        let lines = json_lines(&output);
        let (last, before) = lines.split_last().unwrap();
        let prefix_batches = case
            .get("valid_prefix")
            .map_or(0, |p| p["batches"].as_u64().unwrap());
        assert_eq!(
            before.len() as u64,
            prefix_batches,
            "{name}: valid batches printed first"
        );
        assert_eq!(
            last["error"]["category"], case["expected_error"]["category"],
            "{name}"
        );
        let prefix_bytes = case
            .get("valid_prefix")
            .map_or(0, |p| p["bytes"].as_u64().unwrap());
        assert_eq!(last["error"]["file_offset"], prefix_bytes, "{name}");
        assert!(
            last["error"]["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{name}"
        );
    }
}

#[test]
fn text_dump_decodes_markers_and_the_barrier() {
    let path = vectors_dir().join("segments/segment_mixed.bin");
    let output = dump(&[path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.contains("endTxnMarker: COMMIT coordinatorEpoch: 3"),
        "{text}"
    );
    assert!(text.contains("endTxnMarker: ABORT coordinatorEpoch: 3"), "{text}");
    assert!(
        text.contains("MIRROR_PID_RESET source_cluster_id=source-cluster-A writer_cluster_id=none"),
        "{text}"
    );
    assert_eq!(
        text.lines()
            .filter(|line| line.starts_with("baseOffset:"))
            .count(),
        15
    );
}

#[test]
fn text_dump_of_a_torn_tail_prints_the_error_on_stderr_with_status_2() {
    let path = vectors_dir().join("corrupt/corrupt_truncated_torn_tail.bin");
    let output = dump(&[path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("error: truncated at file offset 0"), "{stderr}");
}

#[test]
fn missing_file_is_a_usage_failure_with_status_1() {
    let output = dump(&["/nonexistent/00000000000000000000.log"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8(output.stderr).unwrap().contains("cannot open"));
}

#[test]
fn directory_without_segments_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let output = dump(&[dir.path().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8(output.stderr)
        .unwrap()
        .contains("holds no .log segment"));
}

#[test]
fn garbage_files_never_crash_the_dump() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for size in [0usize, 1, 11, 12, 61, 100, 1000, 5000] {
        let bytes: Vec<u8> = (0..size)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let path = dir.path().join(format!("garbage-{size}.log"));
        std::fs::write(&path, &bytes).unwrap();
        for json in [true, false] {
            let mut args = vec![path.to_str().unwrap()];
            if json {
                args.push("--json");
            }
            let output = dump(&args);
            let code = output.status.code();
            assert!(code == Some(0) || code == Some(2), "size {size}: {output:?}");
            assert_eq!(code == Some(0), size == 0, "only the empty file is clean");
        }
    }
}

#[test]
fn a_dump_into_a_full_disk_fails_instead_of_exiting_0() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("skipped: no /dev/full on this machine");
        return;
    };
    // One batch whose rendering is far larger than the output buffer: written past the buffer, directly.
    let dir = tempfile::tempdir().unwrap();
    let sample = dir.path().join("00000000000000000000.log");
    let mut builder = record_format::BatchBuilder::new();
    builder.add(0, None, Some(&vec![7u8; 256 * 1024]), &[]);
    std::fs::write(&sample, builder.build().unwrap().as_bytes()).unwrap();
    for format in [&["--json"][..], &[][..]] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_mirrorlog"))
            .arg("dump")
            .arg(&sample)
            .args(format)
            .stdout(full.try_clone().unwrap())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{format:?}: {output:?}");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("cannot write output"),
            "{format:?}: {output:?}"
        );
    }
}

#[test]
fn replay_and_dump_give_every_corrupt_vector_the_same_verdict() {
    let mut checked = 0;
    for case in manifest_cases().iter().filter(|case| case["valid"] == false) {
        let path = vectors_dir().join(case["file"].as_str().unwrap());
        let path = path.to_str().unwrap();
        let dumped = dump(&[path, "--json"]);
        let replayed = common::mirrorlog(&["replay", path]);
        assert_eq!(dumped.status.code(), Some(2), "{}: dump {dumped:?}", case["name"]);
        assert_eq!(
            replayed.status.code(),
            dumped.status.code(),
            "{}: replay {replayed:?}",
            case["name"]
        );
        let category = json_lines(&dumped).last().unwrap()["error"]["category"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            String::from_utf8_lossy(&replayed.stderr).contains(&category),
            "{}: replay names {category}: {replayed:?}",
            case["name"]
        );
        checked += 1;
    }
    assert!(checked >= 5);
}
