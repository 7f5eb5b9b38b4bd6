//! Publishing a benchmark run into the repository's documents: `docs/bench-report.json` (the run, with the peer
//! benchmark's figures against Apache Kafka merged in), its charts in `docs/bench-charts/`, `docs/peer.json`, and
//! the tables of `docs/benchmarks.md` between two markers — all rendered from the same JSON by
//! [`published_section`], so that the figures a program reads and the ones a person reads are one run's.
//! `tests/published_report.rs` renders the section again from the committed JSON and fails when the Markdown
//! differs (a hand edit, or a JSON replaced without the tables).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::report::{measurement_tables, Report};

/// The line before the generated tables in `docs/benchmarks.md`.
pub const BEGIN_MARKER: &str =
    "<!-- generated from bench-report.json by `cargo xtask bench --publish`: begin -->";
/// The line after them.
pub const END_MARKER: &str = "<!-- generated from bench-report.json: end -->";
/// The charts' directory, relative to `docs/`.
pub const CHART_DIR: &str = "bench-charts";

/// One figure of the peer benchmark (`interop/bench/peer_bench.py`): a load, measured by one load generator
/// against Apache Kafka and against `serve` at one durability, in the same run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerEntry {
    /// The load (`idempotent 1p`, `consume 12p`, …).
    pub load: String,
    /// The load generator (`librdkafka`, `java`).
    pub generator: String,
    /// What is measured (`throughput`, `latency p99`, `broker CPU`).
    pub metric: String,
    /// Its unit.
    pub unit: String,
    /// Whether a higher figure is better.
    pub higher_is_better: bool,
    /// `serve`'s durability (`buffered`, `sync`).
    pub serve_durability: String,
    /// Apache Kafka's median.
    pub kafka: f64,
    /// `serve`'s median.
    pub serve: f64,
    /// The median over the runs of serve ÷ Kafka in the same run (absent when Kafka's figure was 0).
    pub ratio: Option<f64>,
}

/// The peer benchmark's JSON (`peer.json`): its entries; the raw runs beside them are not read here.
#[derive(Debug, Deserialize)]
struct PeerFile {
    entries: Vec<PeerEntry>,
}

/// Why a run could not be published.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// A JSON file does not hold what it should.
    #[error("{path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: serde_json::Error,
    },
    /// `docs/benchmarks.md` does not hold exactly one begin marker followed by exactly one end marker.
    #[error("{0}: not exactly one `{BEGIN_MARKER}` line followed by one `{END_MARKER}` line")]
    NoMarkers(PathBuf),
    /// The run has no `peer.json`: the peer benchmark did not run (it needs Java and Maven), and a report
    /// without it would stand for the whole benchmark with less.
    #[error("{0}: missing; publish a run whose peer section ran")]
    NoPeerFigures(PathBuf),
    /// The run is not the whole benchmark (quick sizes, a backend skipped or left out, a measurement missing).
    #[error("{path}: not a full run ({why}); publish the run of a plain `cargo xtask bench --publish`")]
    Partial {
        /// The report.
        path: PathBuf,
        /// What it lacks.
        why: String,
    },
}

/// The backends a published report measures.
pub const PUBLISHED_BACKENDS: [&str; 4] = ["fs", "sled", "rocks", "memory"];
/// The criterion headlines a published report holds beside [`crate::suite::MEASUREMENTS`].
pub const PUBLISHED_MICRO: [&str; 4] = [
    "micro-validate",
    "micro-iterate",
    "micro-encode",
    "micro-psm-appends",
];

/// Why `report` is not the whole benchmark, if it is not: quick sizes, a skipped backend, a measurement missing,
/// or a backend missing from the first one (`append-1k-nosync`, which every backend runs).
pub fn partial(report: &Report) -> Option<String> {
    if report.quick {
        return Some("quick sizes".to_owned());
    }
    if let Some(skipped) = report.skipped.first() {
        return Some(format!("{} skipped: {}", skipped.backend, skipped.reason));
    }
    let ids: Vec<&str> = report.measurements.iter().map(|m| m.id.as_str()).collect();
    if let Some(missing) = crate::suite::MEASUREMENTS
        .iter()
        .chain(PUBLISHED_MICRO.iter())
        .find(|id| !ids.contains(id))
    {
        return Some(format!("no {missing} measurement"));
    }
    // Whole unless a backend is missing (`None` from either `?`: nothing lacks).
    let first = report.measurements.iter().find(|m| m.id == "append-1k-nosync")?;
    let missing_backend = PUBLISHED_BACKENDS
        .iter()
        .find(|backend| !first.figures.iter().any(|figure| figure.backend == **backend))?;
    Some(format!("no {missing_backend} figures"))
}

/// `YYYY-MM-DD` (UTC) of a Unix time (days-from-civil inverted, proleptic Gregorian).
pub fn utc_date(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The Markdown `docs/benchmarks.md` shows of a published report: when and where it ran, every measurement's
/// table and chart, and the peer figures.
pub fn published_section(report: &Report) -> String {
    let mut out = String::new();
    let m = &report.machine;
    let _ = writeln!(
        out,
        "Run finished {} (UTC){}; machine: {} ({} cores), {} MiB memory, scratch file system {}, {}.",
        utc_date(report.finished_unix_s),
        if report.quick { ", quick sizes" } else { "" },
        m.cpu,
        m.cores,
        m.memory_mib,
        m.file_system,
        m.os
    );
    out.push_str(&measurement_tables(report, CHART_DIR, "###"));
    if !report.peer.is_empty() {
        out.push_str(&peer_table(&report.peer));
    }
    out
}

/// The peer figures: one row per load, generator and metric, Kafka's median beside serve's at each durability
/// with the ratio.
fn peer_table(entries: &[PeerEntry]) -> String {
    let mut durabilities: Vec<&str> = Vec::new();
    for entry in entries {
        if !durabilities.contains(&entry.serve_durability.as_str()) {
            durabilities.push(&entry.serve_durability);
        }
    }
    let mut out = String::from(
        "\n### Against Apache Kafka (`interop/bench/peer_bench.py`)\n\nMedians of the runs; a ratio is the median over \
         the runs of serve ÷ Kafka in the same run (serve ahead above 1 for throughput, below 1 for latency and \
         CPU).\n\n| load | generator | metric | Kafka |",
    );
    for durability in &durabilities {
        let _ = write!(out, " serve {durability} | ratio |");
    }
    out.push_str("\n|---|---|---|---:|");
    for _ in &durabilities {
        out.push_str("---:|---:|");
    }
    out.push('\n');
    let mut rows: Vec<(&str, &str, &str, &str)> = Vec::new();
    for entry in entries {
        let row = (
            entry.load.as_str(),
            entry.generator.as_str(),
            entry.metric.as_str(),
            entry.unit.as_str(),
        );
        if !rows.contains(&row) {
            rows.push(row);
        }
    }
    for (load, generator, metric, unit) in rows {
        let of = |durability: &str| {
            entries.iter().find(|entry| {
                entry.load == load
                    && entry.generator == generator
                    && entry.metric == metric
                    && entry.serve_durability == durability
            })
        };
        let Some(kafka) = durabilities
            .iter()
            .find_map(|durability| of(durability))
            .map(|entry| entry.kafka)
        else {
            continue;
        };
        let _ = write!(out, "| {load} | {generator} | {metric} | {kafka:.2} {unit} |");
        for durability in &durabilities {
            match of(durability) {
                Some(entry) => {
                    let ratio = entry.ratio.map_or("—".to_owned(), |ratio| format!("{ratio:.2}×"));
                    let _ = write!(out, " {:.2} {unit} | {ratio} |", entry.serve);
                }
                None => out.push_str(" — | — |"),
            }
        }
        out.push('\n');
    }
    out
}

/// Where the generated section of `document` lies: after its one begin marker, up to its one end marker.
fn region_bounds(document: &str) -> Option<(usize, usize)> {
    if document.matches(BEGIN_MARKER).count() != 1 || document.matches(END_MARKER).count() != 1 {
        return None;
    }
    let begin = document.find(BEGIN_MARKER)? + BEGIN_MARKER.len();
    let end = begin + document[begin..].find(END_MARKER)?;
    Some((begin, end))
}

/// The text between the markers of `document` (the generated section), if it holds exactly one of each in order.
pub fn generated_region(document: &str) -> Option<&str> {
    let (begin, end) = region_bounds(document)?;
    Some(document[begin..end].trim_matches('\n'))
}

/// `document` with the text between its markers replaced by `section`.
fn splice(document: &str, section: &str) -> Option<String> {
    let (begin, end) = region_bounds(document)?;
    Some(format!(
        "{}\n\n{}\n\n{}",
        &document[..begin],
        section.trim_matches('\n'),
        &document[end..]
    ))
}

fn read(path: &Path) -> Result<String, PublishError> {
    std::fs::read_to_string(path).map_err(|source| PublishError::Io {
        path: path.to_owned(),
        source,
    })
}

/// Files written beside their destinations (`NAME.partial`) and renamed over them at the end, so that a failure
/// while writing leaves the published documents as they were (the partial files removed); a rename failing part
/// way through the renames can still leave some documents new and others old.
#[derive(Default)]
struct Staged {
    files: Vec<(PathBuf, PathBuf)>,
}

impl Drop for Staged {
    fn drop(&mut self) {
        // Whatever was staged and not renamed (a later write failed): nothing half-published stays behind.
        for (partial, _) in &self.files {
            let _ = std::fs::remove_file(partial);
        }
    }
}

impl Staged {
    fn write(&mut self, path: &Path, text: &str) -> Result<(), PublishError> {
        let mut partial = path.as_os_str().to_owned();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        std::fs::write(&partial, text).map_err(|source| PublishError::Io {
            path: partial.clone(),
            source,
        })?;
        self.files.push((partial, path.to_owned()));
        Ok(())
    }

    fn commit(mut self) -> Result<(), PublishError> {
        while !self.files.is_empty() {
            let (partial, path) = self.files.remove(0);
            std::fs::rename(&partial, &path).map_err(|source| PublishError::Io { path, source })?;
        }
        Ok(())
    }
}

fn parse<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T, PublishError> {
    serde_json::from_str(text).map_err(|source| PublishError::Json {
        path: path.to_owned(),
        source,
    })
}

/// Publishes the run in `run_dir` (`report.json` and the peer benchmark's `peer.json`) into `docs`:
/// `bench-report.json` with the peer entries merged in, `peer.json`, the charts (a chart of no published
/// measurement removed), and the tables of `benchmarks.md`. Everything is read and checked (the Markdown's
/// markers included, and that the run is whole) before anything is written, and the new files replace the old
/// ones at the end.
pub fn publish(run_dir: &Path, docs: &Path) -> Result<(), PublishError> {
    let report_path = run_dir.join("report.json");
    let mut report: Report = parse(&report_path, &read(&report_path)?)?;
    if let Some(why) = partial(&report) {
        return Err(PublishError::Partial {
            path: report_path,
            why,
        });
    }
    let peer_path = run_dir.join("peer.json");
    let peer_text = match std::fs::read_to_string(&peer_path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(PublishError::NoPeerFigures(peer_path));
        }
        Err(source) => {
            return Err(PublishError::Io {
                path: peer_path,
                source,
            })
        }
    };
    report.peer = parse::<PeerFile>(&peer_path, &peer_text)?.entries;
    let markdown_path = docs.join("benchmarks.md");
    let document = read(&markdown_path)?;
    let spliced = splice(&document, &published_section(&report))
        .ok_or_else(|| PublishError::NoMarkers(markdown_path.clone()))?;
    let json = serde_json::to_string_pretty(&report).map_err(|source| PublishError::Json {
        path: docs.join("bench-report.json"),
        source,
    })?;
    let charts = docs.join(CHART_DIR);
    std::fs::create_dir_all(&charts).map_err(|source| PublishError::Io {
        path: charts.clone(),
        source,
    })?;
    let mut staged = Staged::default();
    staged.write(&docs.join("bench-report.json"), &format!("{json}\n"))?;
    staged.write(&docs.join("peer.json"), &peer_text)?;
    staged.write(&markdown_path, &spliced)?;
    for measurement in &report.measurements {
        staged.write(
            &charts.join(format!("{}.svg", measurement.id)),
            &crate::svg::chart(measurement),
        )?;
    }
    staged.commit()?;
    // Last, the charts of measurements the report no longer has.
    let wanted: Vec<String> = report
        .measurements
        .iter()
        .map(|m| format!("{}.svg", m.id))
        .collect();
    let existing = std::fs::read_dir(&charts).map_err(|source| PublishError::Io {
        path: charts.clone(),
        source,
    })?;
    for entry in existing.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".svg") && !wanted.contains(&name) {
            std::fs::remove_file(entry.path()).map_err(|source| PublishError::Io {
                path: entry.path(),
                source,
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_the_utc_calendar_days_of_unix_times() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_796_204_359), "2026-12-02");
        assert_eq!(utc_date(4_107_542_399), "2100-02-28");
    }

    #[test]
    fn a_quick_or_reduced_run_is_not_published() {
        let report = |quick: bool, ids: &[&str]| Report {
            finished_unix_s: 0,
            quick,
            machine: crate::report::Machine {
                cpu: "test".into(),
                cores: 1,
                memory_mib: 1,
                file_system: "test".into(),
                os: "test".into(),
            },
            measurements: ids
                .iter()
                .map(|id| crate::report::Measurement {
                    id: (*id).to_owned(),
                    title: String::new(),
                    unit: String::new(),
                    higher_is_better: true,
                    baseline: None,
                    target_ratio: None,
                    runs: 1,
                    figures: Vec::new(),
                })
                .collect(),
            skipped: Vec::new(),
            peer: Vec::new(),
        };
        let every: Vec<&str> = crate::suite::MEASUREMENTS
            .iter()
            .chain(PUBLISHED_MICRO.iter())
            .copied()
            .collect();
        assert_eq!(partial(&report(true, &every)).as_deref(), Some("quick sizes"));
        assert_eq!(
            partial(&report(false, &every[1..])).as_deref(),
            Some("no append-1k-nosync measurement")
        );
        assert_eq!(partial(&report(false, &every)).as_deref(), Some("no fs figures"));
    }

    #[test]
    fn a_splice_replaces_only_the_text_between_the_markers() {
        let document = format!("intro\n{BEGIN_MARKER}\nold\n{END_MARKER}\nafter\n");
        let spliced = splice(&document, "new table\n").unwrap();
        assert_eq!(
            spliced,
            format!("intro\n{BEGIN_MARKER}\n\nnew table\n\n{END_MARKER}\nafter\n")
        );
        assert_eq!(generated_region(&spliced), Some("new table"));
        assert_eq!(splice("no markers", "x"), None);
        assert_eq!(generated_region(&format!("{END_MARKER}\n{BEGIN_MARKER}")), None);
        let doubled = format!("{BEGIN_MARKER}\na\n{END_MARKER}\n{BEGIN_MARKER}\nb\n{END_MARKER}\n");
        assert_eq!(
            generated_region(&doubled),
            None,
            "a second pair would be neither updated nor checked"
        );
    }
}
