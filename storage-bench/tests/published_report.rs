//! The figures a program reads and the figures a person reads are one run's: the tables between the markers of
//! `docs/benchmarks.md` are what `docs/bench-report.json` renders to, and `docs/bench-charts/` holds that JSON's
//! charts and no others (`cargo xtask bench --publish` writes all three from one run).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use std::path::PathBuf;

use storage_bench::publish::{generated_region, published_section, CHART_DIR};
use storage_bench::report::Report;

fn docs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs")
}

fn published() -> Report {
    let text = std::fs::read_to_string(docs().join("bench-report.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn the_tables_of_docs_benchmarks_md_are_those_of_docs_bench_report_json() {
    let document = std::fs::read_to_string(docs().join("benchmarks.md")).unwrap();
    let region = generated_region(&document).expect("docs/benchmarks.md has the generated section's markers");
    let expected = published_section(&published());
    assert!(
        region == expected.trim_matches('\n'),
        "docs/benchmarks.md's generated tables differ from docs/bench-report.json: publish a run with `cargo xtask \
         bench --publish` instead of editing either by hand"
    );
}

#[test]
fn the_published_charts_are_the_json_s_charts_and_no_others() {
    let report = published();
    let charts = docs().join(CHART_DIR);
    for measurement in &report.measurements {
        let path = charts.join(format!("{}.svg", measurement.id));
        let chart = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            chart == storage_bench::svg::chart(measurement),
            "{} is not the chart of docs/bench-report.json",
            path.display()
        );
    }
    for entry in std::fs::read_dir(&charts).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(
            report
                .measurements
                .iter()
                .any(|m| format!("{}.svg", m.id) == name),
            "{name} in docs/{CHART_DIR} charts no measurement of docs/bench-report.json"
        );
    }
}

#[test]
fn the_published_report_holds_engine_floors_and_peer_figures() {
    let report = published();
    assert_eq!(
        storage_bench::publish::partial(&report),
        None,
        "docs/bench-report.json is not a full run"
    );
    for id in [
        "log-appends-floor",
        "mirror-copy-floor",
        "append-1k-engine-floor",
        "mirror-copy-engine-floor",
    ] {
        assert!(
            report.measurements.iter().any(|m| m.id == id),
            "docs/bench-report.json has no {id} measurement"
        );
    }
    assert!(
        !report.peer.is_empty(),
        "docs/bench-report.json has no figures against Apache Kafka: publish a run that included the peer benchmark"
    );
}
