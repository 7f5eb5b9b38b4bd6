//! The micro-benchmark headlines, read from criterion's results (`<criterion dir>/<group>/<function>[/<input>]/
//! new/estimates.json`, the median's point estimate in nanoseconds): batch validation against a raw CRC-32C,
//! record iteration and encoding against the `kafka-protocol` crate, producer-state validated appends (in millions
//! per second: one criterion iteration makes as many appends as the `Elements` throughput its `benchmark.json`
//! declares).

use std::path::Path;

use crate::report::Measurement;

/// One of the JSON files criterion writes for a benchmark (`<id…>/new/<file>`), if it is there and parses.
fn criterion_json(criterion: &Path, id: &[&str], file: &str) -> Option<serde_json::Value> {
    let mut path = criterion.to_owned();
    for part in id {
        path.push(part);
    }
    let text = std::fs::read_to_string(path.join("new").join(file)).ok()?;
    serde_json::from_str(&text).ok()
}

/// The median time in nanoseconds of one criterion benchmark, if it ran.
fn median_ns(criterion: &Path, id: &[&str]) -> Option<f64> {
    criterion_json(criterion, id, "estimates.json")?["median"]["point_estimate"].as_f64()
}

/// How many elements one iteration of a criterion benchmark processes, from the `Elements` throughput in its
/// `new/benchmark.json` (1 when it declares none).
fn elements_per_iteration(criterion: &Path, id: &[&str]) -> f64 {
    criterion_json(criterion, id, "benchmark.json")
        .and_then(|value| value["throughput"]["Elements"].as_f64())
        .unwrap_or(1.0)
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
        unit: "M appends/s".to_owned(),
        higher_is_better: true,
        baseline: None,
        target_ratio: None,
        runs: 1,
        figures: Vec::new(),
    };
    for producers in children(&criterion.join("validated_appends")) {
        let id = ["validated_appends", producers.as_str()];
        if let Some(ns) = median_ns(criterion, &id) {
            let appends_per_second = elements_per_iteration(criterion, &id) * 1e9 / ns;
            appends.add(&producers, &[appends_per_second / 1e6], None);
        }
    }
    out.push(appends);
    out.retain(|measurement| !measurement.figures.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_result(criterion: &Path, id: &[&str], median_ns: f64, elements: Option<u64>) {
        let mut dir = criterion.to_owned();
        for part in id {
            dir.push(part);
        }
        let dir = dir.join("new");
        std::fs::create_dir_all(&dir).unwrap();
        let estimates = serde_json::json!({ "median": { "point_estimate": median_ns } });
        std::fs::write(dir.join("estimates.json"), estimates.to_string()).unwrap();
        let throughput = elements.map(|n| serde_json::json!({ "Elements": n }));
        let benchmark = serde_json::json!({ "throughput": throughput });
        std::fs::write(dir.join("benchmark.json"), benchmark.to_string()).unwrap();
    }

    #[test]
    fn validated_appends_count_every_append_of_an_iteration_not_the_iteration() {
        let criterion = tempfile::tempdir().unwrap();
        // 100,000 appends in 5 ms: 20 million appends per second.
        write_result(
            criterion.path(),
            &["validated_appends", "1_producers"],
            5e6,
            Some(100_000),
        );
        let headlines = headlines(criterion.path());
        let appends = headlines
            .iter()
            .find(|measurement| measurement.id == "micro-psm-appends")
            .unwrap();
        assert_eq!(appends.unit, "M appends/s");
        assert_eq!(appends.figures.len(), 1);
        assert!(
            (appends.figures[0].median - 20.0).abs() < 1e-9,
            "{}",
            appends.figures[0].median
        );
    }

    #[test]
    fn a_benchmark_without_a_declared_throughput_counts_one_element_per_iteration() {
        let criterion = tempfile::tempdir().unwrap();
        write_result(criterion.path(), &["validated_appends", "7_producers"], 1e3, None);
        let headlines = headlines(criterion.path());
        assert!((headlines[0].figures[0].median - 1.0).abs() < 1e-9);
    }
}
