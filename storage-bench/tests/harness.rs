//! The macro benchmark's harness with tiny sizes: every measurement for every backend in a report that parses,
//! valid SVG charts, and a deliberately slowed backend showing up as slower.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::sync::Arc;
use std::time::Duration;

use storage::Storage;
use storage_bench::report::{markdown, Report};
use storage_bench::suite::{registry, run, BenchBackend, Sizes, MEASUREMENTS};
use storage_testkit::FaultyStore;

/// A report of `measurements` on a made-up machine.
fn test_report(
    measurements: Vec<storage_bench::report::Measurement>,
    skipped: Vec<storage_bench::report::Skipped>,
) -> Report {
    Report {
        finished_unix_s: 0,
        quick: true,
        machine: storage_bench::report::Machine {
            cpu: "test".into(),
            cores: 1,
            memory_mib: 1,
            file_system: "test".into(),
            os: "test".into(),
        },
        measurements,
        skipped,
        peer: Vec::new(),
    }
}

/// Runs `bench-report --tiny` with `args`, writing into `dir`, and returns the report it wrote.
fn bench_report(dir: &std::path::Path, args: &[&str]) -> Report {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_bench-report"))
        .arg("--tiny")
        .args(args)
        .arg("--out")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

#[test]
fn the_report_holds_every_measurement_for_every_backend_and_valid_charts() {
    let dir = tempfile::tempdir().unwrap();
    let report = bench_report(dir.path(), &["--backends", "fs,memory,nonsense"]);
    let ids: Vec<&str> = report.measurements.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, MEASUREMENTS.to_vec());
    for measurement in &report.measurements {
        let backends: Vec<&str> = measurement.figures.iter().map(|f| f.backend.as_str()).collect();
        // The engine floors measure the engines under sled and RocksDB; fs and memory have none.
        let expected: &[&str] = if measurement.id.ends_with("-engine-floor") {
            &[]
        } else {
            &["fs", "memory"]
        };
        assert_eq!(backends, expected, "{}", measurement.id);
        for figure in &measurement.figures {
            assert!(
                figure.median.is_finite() && figure.median > 0.0,
                "{}: {figure:?}",
                measurement.id
            );
            assert!(
                figure.baseline.is_some_and(|b| b > 0.0),
                "{}: {figure:?}",
                measurement.id
            );
        }
        let svg = std::fs::read_to_string(dir.path().join("charts").join(format!("{}.svg", measurement.id)))
            .unwrap();
        let document = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{}: {e}", measurement.id));
        assert_eq!(document.root_element().tag_name().name(), "svg");
        assert_eq!(
            document.descendants().filter(|n| n.has_tag_name("rect")).count(),
            1 + 2 * measurement.figures.len(),
            "background, and a bar and a baseline bar per backend"
        );
    }
    assert_eq!(
        report.skipped.len(),
        1,
        "an unknown backend is reported as skipped"
    );
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert_eq!(md, markdown(&report, "charts"));
    assert!(md.contains("skipped **nonsense**"));
}

#[test]
fn measurements_asked_for_in_any_order_come_once_each_in_run_order() {
    let dir = tempfile::tempdir().unwrap();
    let only = [
        "--only",
        "mirror-start",
        "--only",
        "snapshot",
        "--only",
        "mirror-copy",
    ];
    let report = bench_report(dir.path(), &[&["--backends", "memory"][..], &only].concat());
    let ids: Vec<&str> = report.measurements.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["snapshot", "mirror-copy", "mirror-start"]);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
}

#[test]
fn a_deliberately_slowed_backend_shows_up_as_slower() {
    let (mut backends, _) = registry(&["fs".to_owned()]);
    let slow = BenchBackend {
        name: "fs+1ms-per-append".to_owned(),
        persistent: true,
        open: Arc::new(|dir: &std::path::Path| {
            let store =
                FaultyStore::new(storage_fs::FsStorage::open(storage_fs::FsConfig::new(dir)).unwrap());
            store.faults().delay_appends(Duration::from_millis(1));
            Box::new(store) as Box<dyn Storage>
        }),
    };
    backends.push(slow);
    let only = ["append-1k-nosync".to_owned(), "log-appends".to_owned()];
    let measurements = run(Sizes::TINY, &backends, &only, &mut |_, _| {});
    assert_eq!(
        measurements.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
        only,
        "both measurements ran (an unknown id is skipped in silence)"
    );
    for measurement in &measurements {
        let [fast, slow] = measurement.figures.as_slice() else {
            panic!("{}: two figures", measurement.id);
        };
        assert!(
            slow.median * 2.0 < fast.median,
            "{}: slowed {} vs plain {}",
            measurement.id,
            slow.median,
            fast.median
        );
    }
}

#[test]
fn compare_flags_a_regression_beyond_the_noise_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let (backends, skipped) = registry(&["memory".to_owned()]);
    let measurements = run(Sizes::TINY, &backends, &["snapshot".to_owned()], &mut |_, _| {});
    let report = test_report(measurements, skipped);
    let (_, same) = storage_bench::report::compare(&report, &report);
    assert_eq!(same, 0);
    let mut slower = report.clone();
    for figure in &mut slower.measurements[0].figures {
        // Time measurements: a doubled median is a regression.
        figure.median *= 2.0;
        figure.min *= 2.0;
        figure.max *= 2.0;
    }
    let (table, regressions) = storage_bench::report::compare(&report, &slower);
    assert_eq!(regressions, 1, "{table}");
    let mut other_unit = slower.clone();
    other_unit.measurements[0].unit = "s".into();
    let (table, regressions) = storage_bench::report::compare(&report, &other_unit);
    assert_eq!(
        regressions, 0,
        "figures in another unit are not compared: {table}"
    );
    assert!(table.contains("unit changed"), "{table}");
    std::fs::write(
        dir.path().join("old.json"),
        serde_json::to_string(&report).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("new.json"),
        serde_json::to_string(&slower).unwrap(),
    )
    .unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_bench-report"))
        .arg("--compare")
        .arg(dir.path().join("old.json"))
        .arg(dir.path().join("new.json"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "a regression fails the comparison");
    assert!(String::from_utf8_lossy(&output.stdout).contains("**regression**"));
}

#[test]
fn a_target_is_not_judged_against_a_baseline_whose_runs_spread_more_than_twofold() {
    let mut measurement = storage_bench::report::Measurement {
        id: "mirror-copy".into(),
        title: "t".into(),
        unit: "MiB/s".into(),
        higher_is_better: true,
        baseline: Some("a raw copy".into()),
        target_ratio: Some(0.8),
        runs: 3,
        figures: Vec::new(),
    };
    // A collapsed raw copy (240 against 2,000) would make a slow mirror look four times faster than raw.
    measurement.add("fs", &[1000.0, 1100.0, 1050.0], Some(&[240.0, 2000.0, 230.0]));
    measurement.add(
        "memory",
        &[1000.0, 1100.0, 1050.0],
        Some(&[2000.0, 2100.0, 1900.0]),
    );
    let [collapsed, steady] = measurement.figures.as_slice() else {
        panic!("two figures");
    };
    assert!(collapsed.baseline_unsteady());
    assert_eq!(collapsed.met, None);
    assert!(!steady.baseline_unsteady());
    assert_eq!(steady.met, Some(false));
    let report = test_report(vec![measurement], Vec::new());
    let md = markdown(&report, "charts");
    assert!(md.contains("not judged: baseline runs 230–2000"), "{md}");
    assert!(md.contains("| **no** |"), "{md}");
}

#[test]
fn the_engine_floors_measure_sled_itself_against_a_raw_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let report = bench_report(
        dir.path(),
        &[
            "--backends",
            "fs,sled",
            "--only",
            "append-1k-engine-floor",
            "--only",
            "mirror-copy-engine-floor",
        ],
    );
    let ids: Vec<&str> = report.measurements.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["append-1k-engine-floor", "mirror-copy-engine-floor"]);
    for measurement in &report.measurements {
        let backends: Vec<&str> = measurement.figures.iter().map(|f| f.backend.as_str()).collect();
        assert_eq!(backends, ["sled"], "{}", measurement.id);
        let figure = &measurement.figures[0];
        assert!(figure.median.is_finite() && figure.median > 0.0, "{figure:?}");
        assert!(figure.baseline.is_some_and(|b| b > 0.0), "{figure:?}");
    }
}
