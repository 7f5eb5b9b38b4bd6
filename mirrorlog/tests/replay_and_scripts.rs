//! `mirrorlog replay` and `mirrorlog psm-script` as a user runs them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn mirrorlog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mirrorlog"))
        .args(args)
        .output()
        .unwrap()
}

fn segment_expectation() -> Value {
    let text =
        std::fs::read_to_string(root().join("record-format/tests/data/kafka-batches/manifest.json")).unwrap();
    let manifest: Value = serde_json::from_str(&text).unwrap();
    manifest["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|case| case["category"] == "segment")
        .unwrap()["producer_state_after_replay"]
        .clone()
}

#[test]
fn replay_json_of_the_sample_segment_matches_the_manifest() {
    let expected = segment_expectation();
    for path in ["samples/00000000000000000000.log", "samples"] {
        let output = mirrorlog(&["replay", root().join(path).to_str().unwrap(), "--json"]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let actual: Value = serde_json::from_slice(&output.stdout).unwrap();
        for key in [
            "producers",
            "ongoing_transactions",
            "aborted_transactions",
            "log_end_offset",
            "last_stable_offset",
        ] {
            assert_eq!(actual[key], expected[key], "{path}: {key}");
        }
    }
}

#[test]
fn replay_keeps_a_barrier_written_by_another_cluster_when_the_scope_is_writer() {
    // The sample's barrier has no writer tag, so it resets under both scopes; a tagged one would not.
    let output = mirrorlog(&[
        "replay",
        root().join("samples").to_str().unwrap(),
        "--cluster-id",
        "C",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("barriers applied 1, barriers kept 0"), "{text}");
    assert!(!text.contains("producer 5001"), "{text}");
}

#[test]
fn replay_of_a_torn_segment_prints_the_valid_prefix_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(root().join("samples/00000000000000000000.log")).unwrap();
    bytes.truncate(bytes.len() - 10);
    let torn = dir.path().join("00000000000000000000.log");
    std::fs::write(&torn, bytes).unwrap();
    let output = mirrorlog(&["replay", torn.to_str().unwrap(), "--json"]);
    assert_eq!(output.status.code(), Some(2));
    let state: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        state["log_end_offset"], 46,
        "the last batch (46..=47) was torn off"
    );
    assert!(String::from_utf8(output.stderr).unwrap().contains("truncated"));
}

#[test]
fn psm_script_passes_matching_files_and_fails_with_a_diff_otherwise() {
    let good = root().join("producer-state/tests/scenarios/barrier_writer_scope.txt");
    let output = mirrorlog(&["psm-script", good.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wrong.txt");
    std::fs::write(&file, "append origin=client pid=1 epoch=0 seq=3 offset=0\n----\nok\n\nappend origin=client pid=1 epoch=0 seq=9 offset=1\n----\nok\n").unwrap();
    let output = mirrorlog(&["psm-script", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.contains("- ok\n+ error OUT_OF_ORDER_SEQUENCE_NUMBER"),
        "{text}"
    );

    let output = mirrorlog(&["psm-script", "--rewrite", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0));
    let rewritten = std::fs::read_to_string(&file).unwrap();
    assert!(
        rewritten.contains("----\nerror OUT_OF_ORDER_SEQUENCE_NUMBER\n"),
        "{rewritten}"
    );
    assert_eq!(
        mirrorlog(&["psm-script", file.to_str().unwrap()]).status.code(),
        Some(0)
    );
}

#[test]
fn psm_script_without_a_separator_line_is_a_usage_failure() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broken.txt");
    std::fs::write(&file, "hw 3\nok\n").unwrap();
    let output = mirrorlog(&["psm-script", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8(output.stderr).unwrap().contains("line 1"));
}

#[test]
fn bad_arguments_exit_1_never_the_corrupt_input_code() {
    for args in [
        &["replay"][..],
        &["no-such-subcommand"][..],
        &["replay", "x.log", "--barrier-scope", "nowhere"][..],
        &["dump"][..],
    ] {
        let output = mirrorlog(args);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        assert!(!output.stderr.is_empty(), "{args:?}: the error is printed");
    }
    assert_eq!(mirrorlog(&["--help"]).status.code(), Some(0));
    assert_eq!(mirrorlog(&["--version"]).status.code(), Some(0));
}

#[test]
fn fifos_and_devices_are_refused_before_they_are_opened() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("00000000000000000000.log");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|status| status.success()) {
        eprintln!("skipped: mkfifo is not available");
        return;
    }
    let fifo = fifo.to_str().unwrap();
    // Each of these would block forever opening a FIFO with no writer, or read /dev/zero until memory runs out.
    for args in [
        &["dump", fifo][..],
        &["replay", fifo][..],
        &["psm-script", fifo][..],
        &["psm-script", "/dev/zero"][..],
        &["dump", "/dev/zero"][..],
    ] {
        let output = mirrorlog(args);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("not a regular file"),
            "{args:?}: {output:?}"
        );
    }
    let config = dir.path().join("zero.toml");
    std::os::unix::fs::symlink("/dev/zero", &config).unwrap();
    let output = mirrorlog(&["partitions", "--config", config.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
}
