//! `bench-report`: runs the macro benchmark and writes `report.md`, `report.json` and one SVG chart per
//! measurement (what `cargo xtask bench` runs), or compares two reports (`--compare OLD.json NEW.json`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use storage_bench::report::{compare, markdown, Machine, Report};
use storage_bench::suite::{registry, run, Sizes, MEASUREMENTS};

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
    /// Where the report goes.
    #[arg(long, default_value = "target/bench-report")]
    out: PathBuf,
    /// criterion's result directory: its micro-benchmark headlines join the report.
    #[arg(long)]
    criterion: Option<PathBuf>,
    /// Compare two reports instead of measuring: OLD.json NEW.json.
    #[arg(long, num_args = 2, value_names = ["OLD", "NEW"])]
    compare: Vec<PathBuf>,
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

fn load(path: &PathBuf) -> Result<Report, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: not a report: {e}", path.display()))
}

fn main() -> ExitCode {
    let args = Args::parse();
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
    let sizes = if args.tiny {
        Sizes::TINY
    } else if args.quick {
        Sizes::QUICK
    } else {
        Sizes::FULL
    };
    let (backends, skipped) = registry(&args.backends);
    for skip in &skipped {
        eprintln!("bench-report: skipping {}: {}", skip.backend, skip.reason);
    }
    let count = if args.only.is_empty() {
        MEASUREMENTS.len()
    } else {
        args.only.len()
    };
    let bar = indicatif::ProgressBar::new((count * backends.len()) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len}  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut measurements = run(sizes, &backends, &args.only, &mut |id, backend| {
        bar.inc(1);
        bar.set_message(format!("{id} on {backend}"));
    });
    if let Some(criterion) = &args.criterion {
        measurements.extend(storage_bench::micro::headlines(criterion));
    }
    bar.finish_and_clear();
    let report = Report {
        finished_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        quick: args.quick || args.tiny,
        machine: machine(&std::env::temp_dir()),
        measurements,
        skipped,
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
