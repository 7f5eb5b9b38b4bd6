//! `bench-report`: runs the macro benchmark and writes `report.md`, `report.json` and one SVG chart per
//! measurement (what `cargo xtask bench` runs), compares two reports (`--compare OLD.json NEW.json`), or
//! publishes a run into `docs/` (`--publish RUN DOCS`, [`storage_bench::publish`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use storage_bench::report::{compare, markdown, Machine, Report};
use storage_bench::suite::{registry, run, Sizes, MEASURED_TOGETHER, MEASUREMENTS};

/// The cross-backend macro benchmark.
#[derive(Debug, Parser)]
#[command(name = "bench-report")]
struct Args {
    /// Smaller sizes, one run (a few minutes).
    #[arg(long)]
    quick: bool,
    /// Tiny sizes (tests).
    #[arg(long, hide = true)]
    tiny: bool,
    /// Backends, comma-separated.
    #[arg(long, default_value = "fs,sled,rocks,memory", value_delimiter = ',')]
    backends: Vec<String>,
    /// Only these measurements (repeatable).
    #[arg(long)]
    only: Vec<String>,
    /// Partitions in the failover measurement (default: 1,000; `--quick` 100).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    failover_partitions: Option<u32>,
    /// Where the report goes.
    #[arg(long, default_value = "target/bench-report")]
    out: PathBuf,
    /// criterion's result directory: its micro-benchmark headlines join the report.
    #[arg(long)]
    criterion: Option<PathBuf>,
    /// Internal: measure in this process and write the measurements to this file after each one (the parent
    /// runs one child per backend so that a backend that deadlocks is stopped, not waited for).
    #[arg(long, hide = true)]
    child_results: Option<PathBuf>,
    /// Compare two reports instead of measuring: OLD.json NEW.json.
    #[arg(long, num_args = 2, value_names = ["OLD", "NEW"])]
    compare: Vec<PathBuf>,
    /// Publish a run instead of measuring: RUN (a run's `--out`, with `report.json` and the peer benchmark's
    /// `peer.json` if it ran) into DOCS (`bench-report.json`, `peer.json`, `bench-charts/`, and the generated
    /// tables of `benchmarks.md`).
    #[arg(long, num_args = 2, value_names = ["RUN", "DOCS"])]
    publish: Vec<PathBuf>,
}

fn machine(scratch: &std::path::Path) -> Machine {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|line| {
            line.strip_prefix("model name")
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let memory_mib = read("/proc/meminfo")
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024);
    // The file system of the longest mount point above the scratch directory.
    let scratch = scratch.canonicalize().unwrap_or_else(|_| scratch.to_owned());
    let file_system = read("/proc/mounts")
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            Some((fields.get(1)?.to_string(), fields.get(2)?.to_string()))
        })
        .filter(|(mount, _)| scratch.starts_with(mount))
        .max_by_key(|(mount, _)| mount.len())
        .map_or_else(|| "unknown".to_owned(), |(_, fs)| fs);
    Machine {
        cpu,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_mib,
        file_system,
        os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
    }
}

/// Replaces `path` with `contents` by writing beside it and renaming over it, so that the parent, reading while
/// the child writes, never sees half a file.
fn replace_whole(path: &std::path::Path, contents: &str) -> std::io::Result<()> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    std::fs::write(&partial, contents)?;
    std::fs::rename(&partial, path)
}

/// Where a child writes its heartbeat count (`storage_bench::heartbeats`) next to its results.
fn heartbeat_path(results: &std::path::Path) -> PathBuf {
    results.with_extension("heartbeat")
}

/// Runs the measurements `ids` of one backend in a child process, one after another; a child that makes no
/// progress — no run finished, no long preparation advanced — for `MIRRORLOG_BENCH_STALL_SECS` (default 240) is
/// killed, the measurement it was in is reported as stalled, and the rest run in a new child. Returns what was
/// measured and the stalls.
fn measure_in_child(
    args: &Args,
    backend: &str,
    ids: &[String],
    bar: &indicatif::ProgressBar,
) -> (
    Vec<storage_bench::report::Measurement>,
    Vec<storage_bench::report::Skipped>,
) {
    let stall = std::time::Duration::from_secs(
        std::env::var("MIRRORLOG_BENCH_STALL_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(240),
    );
    let mut measured: Vec<storage_bench::report::Measurement> = Vec::new();
    let mut stalls = Vec::new();
    let mut remaining: Vec<String> = ids.to_vec();
    while !remaining.is_empty() {
        let Ok(dir) = tempfile::tempdir() else {
            break;
        };
        let results = dir.path().join("results.json");
        let mut command =
            std::process::Command::new(std::env::current_exe().unwrap_or_else(|_| "bench-report".into()));
        command
            .args(["--backends", backend, "--child-results"])
            .arg(&results);
        if args.quick {
            command.arg("--quick");
        }
        if args.tiny {
            command.arg("--tiny");
        }
        if let Some(n) = args.failover_partitions {
            command.args(["--failover-partitions", &n.to_string()]);
        }
        for id in &remaining {
            command.args(["--only", id]);
        }
        command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null());
        let Ok(mut child) = command.spawn() else {
            break;
        };
        let read = |path: &std::path::Path| -> Vec<storage_bench::report::Measurement> {
            std::fs::read_to_string(path)
                .ok()
                .and_then(|text| serde_json::from_str(&text).ok())
                .unwrap_or_default()
        };
        let mut seen = 0;
        let mut beats: Option<u64> = None;
        let mut last_progress = std::time::Instant::now();
        let exited = loop {
            std::thread::sleep(std::time::Duration::from_millis(200));
            // The child replaces the file whole (a rename), but a read that finds none counts as no news.
            let now_done = read(&results).len();
            if now_done > seen {
                bar.inc((now_done - seen) as u64);
                seen = now_done;
                last_progress = std::time::Instant::now();
            }
            let now_beats = std::fs::read_to_string(heartbeat_path(&results))
                .ok()
                .and_then(|text| text.parse::<u64>().ok());
            if now_beats.is_some_and(|now| Some(now) != beats) {
                beats = now_beats;
                last_progress = std::time::Instant::now();
            }
            let next = remaining.get(seen).map_or("", String::as_str);
            bar.set_message(format!("{next} on {backend}"));
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => break true,
                Ok(None) if last_progress.elapsed() > stall => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break false;
                }
                Ok(None) => {}
            }
        };
        let done = read(&results);
        let finished = done.len();
        measured.extend(done);
        if exited && finished >= remaining.len() {
            break;
        }
        // The child stalled (or died) in `remaining[finished]`: note it and go on with the rest.
        let stuck = remaining[finished.min(remaining.len() - 1)].clone();
        let reason = if exited {
            format!("{stuck}: the measurement process ended before finishing it")
        } else {
            format!(
                "{stuck}: no progress for {} s — stopped{}",
                stall.as_secs(),
                if backend == "sled" {
                    " (sled 0.34.7 can deadlock, spacejam/sled#1412)"
                } else {
                    ""
                }
            )
        };
        eprintln!("bench-report: {backend}: {reason}");
        stalls.push(storage_bench::report::Skipped {
            backend: backend.to_owned(),
            reason,
        });
        bar.inc(1);
        remaining.drain(..(finished + 1).min(remaining.len()));
    }
    (measured, stalls)
}

fn load(path: &PathBuf) -> Result<Report, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: not a report: {e}", path.display()))
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let [run_dir, docs] = args.publish.as_slice() {
        return match storage_bench::publish::publish(run_dir, docs) {
            Ok(()) => {
                eprintln!(
                    "bench-report: published {} into {}",
                    run_dir.display(),
                    docs.display()
                );
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("bench-report: {error}");
                ExitCode::FAILURE
            }
        };
    }
    if let [old, new] = args.compare.as_slice() {
        return match (load(old), load(new)) {
            (Ok(old), Ok(new)) => {
                let (table, regressions) = compare(&old, &new);
                print!("{table}");
                println!("\n{regressions} regression(s) beyond the measured noise");
                if regressions == 0 {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::FAILURE
                }
            }
            (Err(error), _) | (_, Err(error)) => {
                eprintln!("bench-report: {error}");
                ExitCode::FAILURE
            }
        };
    }
    if let Some(unknown) = args.only.iter().find(|id| !MEASUREMENTS.contains(&id.as_str())) {
        eprintln!(
            "bench-report: unknown measurement {unknown:?} (one of: {})",
            MEASUREMENTS.join(", ")
        );
        return ExitCode::FAILURE;
    }
    let mut sizes = if args.tiny {
        Sizes::TINY
    } else if args.quick {
        Sizes::QUICK
    } else {
        Sizes::FULL
    };
    if let Some(n) = args.failover_partitions {
        sizes.failover_partitions = n as usize;
    }
    let (backends, skipped) = registry(&args.backends);
    for skip in &skipped {
        eprintln!("bench-report: skipping {}: {}", skip.backend, skip.reason);
    }
    // In run order whatever the order of `--only` (measurements measured together are neighbours in it).
    let ids: Vec<String> = MEASUREMENTS
        .iter()
        .filter(|id| args.only.is_empty() || args.only.iter().any(|only| only == *id))
        .map(|id| id.to_string())
        .collect();
    if let Some(results) = &args.child_results {
        // A child: measure one measurement at a time, saving after each, and show the parent every heartbeat.
        let beats = heartbeat_path(results);
        std::thread::spawn(move || {
            let mut written = None;
            loop {
                // Only a new count is written (whole, by a rename): a stuck child leaves the file alone.
                let now = storage_bench::heartbeats();
                if written != Some(now) && replace_whole(&beats, &now.to_string()).is_ok() {
                    written = Some(now);
                }
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
        });
        let mut done: Vec<storage_bench::report::Measurement> = Vec::new();
        for id in &ids {
            if done.iter().any(|measured| &measured.id == id) {
                continue; // measured together with an earlier one
            }
            let together: Vec<String> = MEASURED_TOGETHER
                .iter()
                .find(|group| group.contains(&id.as_str()))
                .map_or_else(
                    || vec![id.clone()],
                    |group| {
                        ids.iter()
                            .filter(|other| group.contains(&other.as_str()))
                            .cloned()
                            .collect()
                    },
                );
            done.extend(run(sizes, &backends, &together, &mut |_, _| {}));
            if let Err(error) = replace_whole(results, &serde_json::to_string(&done).unwrap_or_default()) {
                eprintln!("bench-report: {}: {error}", results.display());
                return ExitCode::FAILURE;
            }
        }
        return ExitCode::SUCCESS;
    }
    let bar = indicatif::ProgressBar::new((ids.len() * backends.len()) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len}  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut skipped = skipped;
    let mut per_backend = Vec::new();
    for backend in &backends {
        let (measured, stalls) = measure_in_child(&args, &backend.name, &ids, &bar);
        skipped.extend(stalls);
        per_backend.push(measured);
    }
    bar.finish_and_clear();
    // One measurement per id, its figures in backend order.
    let mut measurements: Vec<storage_bench::report::Measurement> = Vec::new();
    for id in &ids {
        for measured in &per_backend {
            let Some(found) = measured.iter().find(|m| &m.id == id) else {
                continue;
            };
            match measurements.iter_mut().find(|m| &m.id == id) {
                Some(merged) => merged.figures.extend(found.figures.iter().cloned()),
                None => measurements.push(found.clone()),
            }
        }
    }
    if let Some(criterion) = &args.criterion {
        measurements.extend(storage_bench::micro::headlines(criterion));
    }
    let report = Report {
        finished_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        quick: args.quick || args.tiny,
        machine: machine(&std::env::temp_dir()),
        measurements,
        skipped,
        peer: Vec::new(),
    };
    let charts = args.out.join("charts");
    if let Err(error) = std::fs::create_dir_all(&charts) {
        eprintln!("bench-report: {}: {error}", charts.display());
        return ExitCode::FAILURE;
    }
    let mut written = vec![
        (args.out.join("report.md"), markdown(&report, "charts")),
        (
            args.out.join("report.json"),
            serde_json::to_string_pretty(&report).unwrap_or_default(),
        ),
    ];
    for measurement in &report.measurements {
        written.push((
            charts.join(format!("{}.svg", measurement.id)),
            storage_bench::svg::chart(measurement),
        ));
    }
    for (path, text) in written {
        if let Err(error) = std::fs::write(&path, text) {
            eprintln!("bench-report: {}: {error}", path.display());
            return ExitCode::FAILURE;
        }
    }
    println!("{}", markdown(&report, "charts"));
    eprintln!("bench-report: wrote {}", args.out.join("report.md").display());
    ExitCode::SUCCESS
}
