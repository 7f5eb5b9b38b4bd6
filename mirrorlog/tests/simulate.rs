//! `mirrorlog simulate` as a user runs it: the table and verdict, byte-identical for one seed, JSON, a trace
//! whose reproductions replay, and refused arguments.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::process::{Command, Output};

fn simulate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mirrorlog"))
        .arg("simulate")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn one_topology_prints_the_matrix_and_the_verdict_and_exits_0_when_the_claims_hold() {
    let args = [
        "--topology",
        "active-passive",
        "--seed",
        "3",
        "--steps",
        "15",
        "--seeds",
        "20",
    ];
    let output = simulate(&args);
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{text}");
    for strategy in [
        "none",
        "negate",
        "negate-skip-negative",
        "barrier",
        "barrier-everywhere",
        "barrier+advance",
    ] {
        assert!(
            text.contains(&format!("active-passive  {strategy}")),
            "{strategy}:\n{text}"
        );
    }
    assert!(text.contains("The seeds' claims: HOLD"), "{text}");
    assert!(text.contains("Beyond the seeds"), "{text}");
    assert!(text.contains("seeds 3–22: 0 in 60 runs"), "{text}");
    let again = simulate(&args);
    assert_eq!(
        String::from_utf8(again.stdout).unwrap(),
        text,
        "same seed, same bytes"
    );
}

#[test]
fn a_selection_that_checks_no_claim_says_so_and_exits_3() {
    // `none` in fan-in: no prediction of the seeds concerns that cell, and no barrier strategy runs.
    let output = simulate(&["--topology", "fan-in", "--strategy", "none", "--steps", "10"]);
    let text = String::from_utf8(output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(3), "{text}");
    assert!(text.contains("NONE CHECKED"), "{text}");
}

#[test]
fn json_is_one_document_with_every_cell_and_the_verdict() {
    let output = simulate(&[
        "--topology",
        "chain-3",
        "--strategy",
        "barrier",
        "--json",
        "--steps",
        "10",
    ]);
    assert!(output.status.success());
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(value["cells"].as_array().unwrap().len(), 3, "three workloads");
    assert_eq!(value["verdict"]["seed_claims_hold"], true);
    assert_eq!(value["verdict"]["checked"], true);
    for cell in value["cells"].as_array().unwrap() {
        for judged in [
            "failed_links",
            "read_only_after_failover",
            "unacknowledged",
            "state_drift",
        ] {
            assert!(cell[judged].is_array(), "{judged} missing from {cell}");
        }
    }
    // The seed workload's cell again over the default 200 seeds, in memory.
    let rates = value["seed_rates"].as_array().unwrap();
    assert_eq!(rates.len(), 1);
    assert_eq!(rates[0]["seeds"], 200);
    assert_eq!(rates[0]["classes"].as_object().unwrap().len(), 7, "(a)-(e)");
    // Every claim says the seeds it was judged over: the barrier's over the seed and unplanned workloads.
    for claim in value["verdict"]["seed_claims"].as_array().unwrap() {
        assert_eq!(
            claim["seeds"],
            serde_json::json!({"first": 1, "last": 200}),
            "{claim}"
        );
    }
    let first = &value["verdict"]["seed_claims"][0]["evidence"];
    assert!(
        first.as_str().unwrap().contains("seeds 1–200: 0 in 400 runs"),
        "{first}"
    );
}

#[test]
fn a_prediction_is_judged_over_the_seeds_asked_for() {
    let output = simulate(&[
        "--topology",
        "active-passive",
        "--strategy",
        "none",
        "--seeds",
        "3",
        "--steps",
        "15",
    ]);
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{text}");
    assert!(text.contains("in 3 of 3 seeds (1–3; holds from 50%)"), "{text}");
    assert!(text.contains("Workload `seed` over seeds 1–3"), "{text}");
}

#[test]
fn a_traced_reproduction_replays_to_its_anomaly() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    let output = simulate(&[
        "--topology",
        "active-passive",
        "--strategy",
        "none",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(output.status.success() || output.status.code() == Some(1));
    let trace: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let reproduction = &trace["reproductions"][0];
    let file = dir.path().join("repro.json");
    std::fs::write(&file, reproduction.to_string()).unwrap();
    let replayed = simulate(&["--replay", file.to_str().unwrap()]);
    let text = String::from_utf8(replayed.stdout).unwrap();
    assert!(replayed.status.success(), "{text}");
    assert!(text.contains("reproduced"), "{text}");
}

#[test]
fn unknown_names_are_usage_errors() {
    for args in [["--topology", "ring"], ["--strategy", "negative"]] {
        let output = simulate(&args);
        assert_eq!(output.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&output.stderr).contains("unknown"));
    }
    let output = simulate(&["--replay", "/nonexistent/repro.json"]);
    assert_eq!(output.status.code(), Some(1));
    // A step count that would make the generated script take gigabytes is refused before anything runs.
    for steps in ["0", "100000000", "many"] {
        let output = simulate(&["--steps", steps]);
        assert_eq!(output.status.code(), Some(1), "--steps {steps}");
    }
    for seeds in ["0", "10001", "all"] {
        let output = simulate(&["--seeds", seeds]);
        assert_eq!(output.status.code(), Some(1), "--seeds {seeds}");
    }
}
