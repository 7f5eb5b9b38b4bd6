//! The macro benchmark's report: measurements with their baselines, as JSON (stable field names), Markdown and
//! SVG charts, and the comparison of two reports.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// One backend's figure in a measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// The backend (or `-` for a measurement without backends).
    pub backend: String,
    /// Median over the runs, in the measurement's unit.
    pub median: f64,
    /// Smallest run.
    pub min: f64,
    /// Largest run.
    pub max: f64,
    /// The baseline's median measured in the same run (same unit), if the measurement has one.
    pub baseline: Option<f64>,
    /// `median / baseline` when higher is better, `baseline / median` when lower is better: above 1 beats the
    /// baseline.
    pub ratio: Option<f64>,
    /// Whether the target (if any) is met; not judged (`None`) when the baseline was unsteady.
    pub met: Option<bool>,
    /// The baseline's smallest and largest run (absent in reports from before they were kept).
    #[serde(default)]
    pub baseline_min: Option<f64>,
    /// See `baseline_min`.
    #[serde(default)]
    pub baseline_max: Option<f64>,
}

/// A baseline whose runs differ by more than this factor (largest / smallest) measured the machine's disturbances
/// rather than the work (a raw copy racing the disk's write-back), so no target is judged against it.
pub const UNSTEADY_BASELINE_SPREAD: f64 = 2.0;

impl Figure {
    /// Whether the baseline's runs spread by more than [`UNSTEADY_BASELINE_SPREAD`].
    pub fn baseline_unsteady(&self) -> bool {
        match (self.baseline_min, self.baseline_max) {
            (Some(min), Some(max)) => min <= 0.0 || max / min > UNSTEADY_BASELINE_SPREAD,
            _ => false,
        }
    }
}

/// One measurement across backends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Stable identifier (`append-1k-nosync`, …).
    pub id: String,
    /// What is measured, for people.
    pub title: String,
    /// The unit of `median`, `min`, `max`, `baseline`.
    pub unit: String,
    /// Whether a higher figure is better (throughput) or a lower one (time).
    pub higher_is_better: bool,
    /// What the baseline is.
    pub baseline: Option<String>,
    /// The target on `ratio`, if the project set one (e.g. 0.8: at least 80 % of the baseline).
    pub target_ratio: Option<f64>,
    /// Runs per figure.
    pub runs: usize,
    /// The figures, one per backend.
    pub figures: Vec<Figure>,
}

/// The machine a report was measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model (`/proc/cpuinfo`).
    pub cpu: String,
    /// Logical cores.
    pub cores: usize,
    /// Memory in MiB (`/proc/meminfo`).
    pub memory_mib: u64,
    /// File system type of the scratch directory.
    pub file_system: String,
    /// Operating system.
    pub os: String,
}

/// A backend that was not measured, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// The backend.
    pub backend: String,
    /// Why.
    pub reason: String,
}

/// A whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Seconds since the Unix epoch when the run ended.
    pub finished_unix_s: u64,
    /// `--quick` (smaller sizes, one run).
    pub quick: bool,
    /// The machine.
    pub machine: Machine,
    /// The measurements, in run order.
    pub measurements: Vec<Measurement>,
    /// Backends asked for but not measured.
    pub skipped: Vec<Skipped>,
    /// The peer benchmark's figures against Apache Kafka, merged in when the run is published
    /// ([`crate::publish`]); empty in a run's own `report.json`.
    #[serde(default)]
    pub peer: Vec<crate::publish::PeerEntry>,
}

/// Median, min and max of some samples.
pub fn summarise(samples: &[f64]) -> (f64, f64, f64) {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN);
    let min = sorted.first().copied().unwrap_or(f64::NAN);
    let max = sorted.last().copied().unwrap_or(f64::NAN);
    (median, min, max)
}

impl Measurement {
    /// Adds a backend's figure from its samples and the baseline's samples of the same run.
    pub fn add(&mut self, backend: &str, samples: &[f64], baseline: Option<&[f64]>) {
        let (median, min, max) = summarise(samples);
        let baseline_summary = baseline.map(summarise);
        let baseline = baseline_summary.map(|(median, _, _)| median);
        let ratio = baseline.map(|base| {
            if self.higher_is_better {
                median / base
            } else {
                base / median
            }
        });
        let mut figure = Figure {
            backend: backend.to_owned(),
            median,
            min,
            max,
            baseline,
            ratio,
            met: None,
            baseline_min: baseline_summary.map(|(_, min, _)| min),
            baseline_max: baseline_summary.map(|(_, _, max)| max),
        };
        if !figure.baseline_unsteady() {
            figure.met = self
                .target_ratio
                .zip(ratio)
                .map(|(target, ratio)| ratio >= target);
        }
        self.figures.push(figure);
    }
}

fn number(value: f64) -> String {
    if !value.is_finite() {
        "—".to_owned()
    } else if value.abs() >= 100.0 {
        format!("{value:.0}")
    } else if value.abs() >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// The "target met" cell: yes, **no**, — (no target), or why the target was not judged.
fn target_cell(measurement: &Measurement, figure: &Figure) -> String {
    match (figure.met, figure.baseline_min, figure.baseline_max) {
        (Some(true), _, _) => "yes".to_owned(),
        (Some(false), _, _) => "**no**".to_owned(),
        (None, Some(min), Some(max)) if measurement.target_ratio.is_some() && figure.baseline_unsteady() => {
            format!("not judged: baseline runs {}–{}", number(min), number(max))
        }
        (None, _, _) => "—".to_owned(),
    }
}

/// The Markdown report; `chart_dir` is the relative directory of the SVG charts.
pub fn markdown(report: &Report, chart_dir: &str) -> String {
    let mut out = String::new();
    let m = &report.machine;
    let _ = writeln!(
        out,
        "# mirrorlog benchmark report{}\n\nMachine: {} ({} cores), {} MiB memory, scratch file system {}, {}.\n",
        if report.quick { " (quick)" } else { "" },
        m.cpu,
        m.cores,
        m.memory_mib,
        m.file_system,
        m.os
    );
    let _ = writeln!(
        out,
        "Each figure is the median of the runs (min–max beside it); the baseline is measured in the same run; the \
         ratio is above 1 when the backend beats the baseline.\n"
    );
    out.push_str(&measurement_tables(report, chart_dir, "##"));
    out
}

/// The skipped backends, then each measurement under a `heading` (`##`, `###`) with its table and its chart from
/// `chart_dir`.
pub fn measurement_tables(report: &Report, chart_dir: &str, heading: &str) -> String {
    let mut out = String::new();
    for skipped in &report.skipped {
        let _ = writeln!(out, "- skipped **{}**: {}", skipped.backend, skipped.reason);
    }
    for measurement in &report.measurements {
        let _ = writeln!(out, "\n{heading} {}\n", measurement.title);
        if let Some(baseline) = &measurement.baseline {
            let _ = writeln!(out, "Baseline: {baseline}.");
        }
        if let Some(target) = measurement.target_ratio {
            let _ = writeln!(out, "Target: ratio ≥ {target}.");
        }
        let _ = writeln!(
            out,
            "\n| backend | median {unit} | min–max | baseline {unit} | ratio | target met |\n|---|---:|---:|---:|---:|---|",
            unit = measurement.unit
        );
        for figure in &measurement.figures {
            let _ = writeln!(
                out,
                "| {} | {} | {}–{} | {} | {} | {} |",
                figure.backend,
                number(figure.median),
                number(figure.min),
                number(figure.max),
                figure.baseline.map_or("—".to_owned(), number),
                figure.ratio.map_or("—".to_owned(), |ratio| format!("{ratio:.2}")),
                target_cell(measurement, figure),
            );
        }
        let _ = writeln!(
            out,
            "\n![{}]({chart_dir}/{}.svg)",
            measurement.title, measurement.id
        );
    }
    out
}

/// One line per measurement and backend of `new` against `old`: the ratio of medians (oriented so that above 1
/// is better) and a flag when it is worse than the noise allows — the spread of both runs (max/min) or 10 %,
/// whichever is larger. A measurement whose unit changed between the two is listed, not compared.
pub fn compare(old: &Report, new: &Report) -> (String, usize) {
    let mut out = String::new();
    let mut regressions = 0;
    let _ = writeln!(
        out,
        "| measurement | backend | old | new | new vs old | |\n|---|---|---:|---:|---:|---|"
    );
    for measurement in &new.measurements {
        let Some(before) = old.measurements.iter().find(|m| m.id == measurement.id) else {
            continue;
        };
        if before.unit != measurement.unit {
            let _ = writeln!(
                out,
                "| {} | all | {} | {} | not compared | unit changed |",
                measurement.id, before.unit, measurement.unit
            );
            continue;
        }
        for figure in &measurement.figures {
            let Some(previous) = before.figures.iter().find(|f| f.backend == figure.backend) else {
                continue;
            };
            let change = if measurement.higher_is_better {
                figure.median / previous.median
            } else {
                previous.median / figure.median
            };
            let spread = |f: &Figure| if f.min > 0.0 { f.max / f.min } else { 1.0 };
            let noise = spread(figure).max(spread(previous)).max(1.10);
            let regressed = change < 1.0 / noise;
            regressions += usize::from(regressed);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {change:.2}× | {} |",
                measurement.id,
                figure.backend,
                number(previous.median),
                number(figure.median),
                if regressed { "**regression**" } else { "" }
            );
        }
    }
    (out, regressions)
}
