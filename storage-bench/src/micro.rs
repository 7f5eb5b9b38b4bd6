//! The micro-benchmark headlines, read from criterion's results (`<criterion dir>/<group>/<function>[/<input>]/
//! new/estimates.json`, the median's point estimate in nanoseconds): batch validation against a raw CRC-32C,
//! record iteration and encoding against the `kafka-protocol` crate, producer-state validated appends.

use std::path::Path;

use crate::report::Measurement;

/// The median time in nanoseconds of one criterion benchmark, if it ran.
fn median_ns(criterion: &Path, id: &[&str]) -> Option<f64> {
    let mut path = criterion.to_owned();
    for part in id {
        path.push(part);
    }
    let text = std::fs::read_to_string(path.join("new/estimates.json")).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value["median"]["point_estimate"].as_f64()
}

/// The sub-directories of a directory, sorted.
fn children(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|entry| entry.path().is_dir())
                .filter_map(|entry| entry.file_name().into_string().ok())
                .filter(|name| name != "report")
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn versus(id: &str, title: &str, baseline: &str, target: Option<f64>) -> Measurement {
    Measurement {
        id: id.to_owned(),
        title: title.to_owned(),
        unit: "µs".to_owned(),
        higher_is_better: false,
        baseline: Some(baseline.to_owned()),
        target_ratio: target,
        runs: 1,
        figures: Vec::new(),
    }
}

/// The headline measurements found under `criterion` (none when the benchmarks did not run).
pub fn headlines(criterion: &Path) -> Vec<Measurement> {
    let mut out = Vec::new();
    let mut validate = versus(
        "micro-validate",
        "Batch validation (record-format) per batch size",
        "a raw CRC-32C over the same bytes",
        None,
    );
    for label in children(&criterion.join("validate/record_format")) {
        let ours = median_ns(criterion, &["validate", "record_format", &label]);
        let raw = median_ns(criterion, &["validate", "raw_crc32c", &label]);
        if let (Some(ours), Some(raw)) = (ours, raw) {
            validate.add(&label, &[ours / 1e3], Some(&[raw / 1e3]));
        }
    }
    for (group, id, title, target) in [
        (
            "iterate_1000",
            "micro-iterate",
            "Iterating 1,000 records of a batch",
            None,
        ),
        (
            "encode_1000",
            "micro-encode",
            "Encoding a batch of 1,000 records",
            Some(1.1),
        ),
    ] {
        let mut measurement = versus(id, title, "the kafka-protocol crate doing the same", target);
        let ours = median_ns(criterion, &[group, "record_format"]);
        let theirs = median_ns(criterion, &[group, "kafka_protocol"]);
        if let (Some(ours), Some(theirs)) = (ours, theirs) {
            measurement.add("record-format", &[ours / 1e3], Some(&[theirs / 1e3]));
        }
        out.push(measurement);
    }
    out.insert(0, validate);
    let mut appends = Measurement {
        id: "micro-psm-appends".to_owned(),
        title: "Producer-state validated appends (one batch each)".to_owned(),
        unit: "appends/s".to_owned(),
        higher_is_better: true,
        baseline: None,
        target_ratio: None,
        runs: 1,
        figures: Vec::new(),
    };
    for producers in children(&criterion.join("validated_appends")) {
        if let Some(ns) = median_ns(criterion, &["validated_appends", &producers]) {
            appends.add(&producers, &[1e9 / ns], None);
        }
    }
    out.push(appends);
    out.retain(|measurement| !measurement.figures.is_empty());
    out
}
