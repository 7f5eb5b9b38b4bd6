//! `mirrorlog simulate`: runs the topology × strategy matrix of `mirror-sim` and prints the table, the minimal
//! reproductions and the verdict (or one JSON document with `--json`); `--replay` runs one reproduction again.

use std::io::Write;
use std::path::{Path, PathBuf};

use mirror_sim::report::{render_text, run_matrix, MatrixOptions, DEFAULT_SEEDS, DEFAULT_SHRINK_BUDGET};
use mirror_sim::shrink::Reproduction;
use mirror_sim::{run_script, SimStorage, Strategy, Topology, Workload};

use crate::error::CliError;

/// Run the multi-cluster simulator: every topology under every producer-id strategy, the anomalies an
/// independent oracle counts, minimal reproductions, and whether the seeds' claims hold (exit 0 iff they do).
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// A topology (active-passive, failback, fan-out, fan-in, chain-3, chain-5, random) or `all`.
    #[arg(long, default_value = "all")]
    pub topology: String,
    /// A strategy (none, negate, negate-skip-negative, barrier, barrier-everywhere, barrier+advance) or `all`.
    #[arg(long, default_value = "all")]
    pub strategy: String,
    /// The seed every choice derives from (same seed, same output).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Client operations per phase of each scenario (1 to 10,000: a script is generated whole before it runs).
    #[arg(long, default_value_t = mirror_sim::report::DEFAULT_STEPS as u64, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub steps: u64,
    /// Seeds every claim is checked over, from `--seed` on (1 to 10,000; in memory, spread over the cores): a
    /// claim one of them breaks does not hold, and the verdict names that seed.
    #[arg(long, default_value_t = DEFAULT_SEEDS, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub seeds: u64,
    /// Partitions of every topic (1 to 16): producers' batches take turns over them, so transactions span
    /// several, and each failover stops them all at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(mirror_sim::script::MAX_PARTITIONS)))]
    pub partitions: u32,
    /// Run every script over an unreliable network, the same for every strategy and drawn from each seed:
    /// sources that answer as Apache Kafka does (no private question) and requests to them refused, closed in
    /// the middle of an answer, answered NOT_LEADER_OR_FOLLOWER, cut short or late; and topics that grow where
    /// their links' sources write them.
    #[arg(long)]
    pub network_faults: bool,
    /// A storage config: its backend, durability and options are used, and each run's stores go to a fresh
    /// directory inside its `data_dir` (default: fs, under the system's temporary directory).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// One JSON document instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Write the generated scripts and the reproductions to this file (JSON).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Run one reproduction (a `reproductions` entry of a trace file, saved alone) again.
    #[arg(long)]
    pub replay: Option<PathBuf>,
}

/// Where the runs store their partitions: the whole storage config when one is given (its backend, durability and
/// segment options; run directories are made inside its `data_dir`), else fs with its defaults under the system's
/// temporary directory.
fn storage(config: Option<&Path>) -> Result<SimStorage, CliError> {
    let Some(path) = config else {
        return Ok(SimStorage::backend(storage_config::Backend::Fs));
    };
    let config = storage_config::StorageConfig::load(path).map_err(CliError::Config)?;
    if !config.is_compiled() {
        return Err(CliError::Usage(format!(
            "storage backend {:?} is not in this build",
            config.backend().name()
        )));
    }
    if let Some(dir) = config.data_dir() {
        if !dir.is_dir() {
            return Err(CliError::Usage(format!(
                "data_dir {} of {} does not exist: the simulator makes its run directories inside it",
                dir.display(),
                path.display()
            )));
        }
    }
    Ok(SimStorage::from_config(config))
}

fn parse_all<T: std::str::FromStr<Err = String> + Copy>(value: &str, all: &[T]) -> Result<Vec<T>, CliError> {
    if value == "all" {
        return Ok(all.to_vec());
    }
    value.parse::<T>().map(|one| vec![one]).map_err(CliError::Usage)
}

/// What a run concluded (the exit status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conclusion {
    /// Every claim checked holds (a replay: the reproduction still shows its anomaly).
    Hold,
    /// A claim does not hold (a replay: the anomaly is gone).
    DoNotHold,
    /// The selected topologies and strategies check no claim of the seeds.
    NothingChecked,
}

/// Runs the command; returns what it concluded (the exit status).
pub fn simulate(args: SimulateArgs, out: &mut dyn Write) -> Result<Conclusion, CliError> {
    let storage = storage(args.config.as_deref())?;
    if let Some(path) = &args.replay {
        let reproduced = replay(path, &storage, args.json, out)?;
        return Ok(if reproduced {
            Conclusion::Hold
        } else {
            Conclusion::DoNotHold
        });
    }
    let options = MatrixOptions {
        topologies: parse_all(&args.topology, &Topology::ALL)?,
        strategies: parse_all(&args.strategy, &Strategy::ALL)?,
        seed: args.seed,
        steps: usize::try_from(args.steps).unwrap_or(10_000),
        storage,
        shrink_budget: DEFAULT_SHRINK_BUDGET,
        seeds: args.seeds,
        mutation: None,
        partitions: args.partitions,
        network_faults: args.network_faults,
    };
    let total = (options.topologies.len() * Workload::ALL.len() * options.strategies.len()) as u64;
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len}  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let matrix = run_matrix(&options, &mut |done, total, label| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(label.to_owned());
    })
    .map_err(|error| CliError::Usage(format!("the simulation could not run: {error}")))?;
    bar.finish_and_clear();
    if let Some(path) = &args.trace {
        let trace = serde_json::json!({
            "seed": options.seed,
            "steps": options.steps,
            "partitions": options.partitions,
            "network_faults": options.network_faults,
            "scripts": mirror_sim::report::scripts(&options)
                .into_iter()
                .map(|(topology, workload, script)| serde_json::json!({
                    "topology": topology, "workload": workload, "script": script
                }))
                .collect::<Vec<_>>(),
            "reproductions": matrix.cells.iter().filter_map(|cell| cell.reproduction.as_ref()).collect::<Vec<_>>(),
        });
        let text = serde_json::to_string_pretty(&trace).map_err(|e| CliError::Usage(e.to_string()))?;
        std::fs::write(path, text).map_err(CliError::Output)?;
    }
    if args.json {
        let text = serde_json::to_string_pretty(&matrix).map_err(|e| CliError::Usage(e.to_string()))?;
        writeln!(out, "{text}").map_err(CliError::Output)?;
    } else {
        write!(out, "{}", render_text(&matrix)).map_err(CliError::Output)?;
    }
    Ok(if !matrix.verdict.checked {
        Conclusion::NothingChecked
    } else if matrix.verdict.seed_claims_hold {
        Conclusion::Hold
    } else {
        Conclusion::DoNotHold
    })
}

/// Runs one reproduction and prints its steps and what the oracle finds; true when it still shows its class.
fn replay(path: &Path, storage: &SimStorage, json: bool, out: &mut dyn Write) -> Result<bool, CliError> {
    crate::error::require_regular_file(path, Some(16 << 20))?;
    let text = std::fs::read_to_string(path).map_err(|source| CliError::Open {
        path: path.to_owned(),
        source,
    })?;
    let reproduction: Reproduction = serde_json::from_str(&text)
        .map_err(|error| CliError::Usage(format!("{} is not a reproduction: {error}", path.display())))?;
    let (findings, _) = run_script(&reproduction.script, reproduction.strategy, storage)
        .map_err(|error| CliError::Usage(format!("the simulation could not run: {error}")))?;
    let shows = reproduction.class.count(&findings.anomalies) > 0;
    if json {
        let value = serde_json::json!({
            "strategy": reproduction.strategy,
            "class": reproduction.class,
            "shows": shows,
            "anomalies": findings.anomalies,
            "notes": findings.notes,
        });
        writeln!(out, "{value}").map_err(CliError::Output)?;
    } else {
        writeln!(
            out,
            "replaying {} step(s) under {}",
            reproduction.script.steps.len(),
            reproduction.strategy
        )
        .map_err(CliError::Output)?;
        for (index, step) in reproduction.script.steps.iter().enumerate() {
            writeln!(out, "  {:>2}. {step}", index + 1).map_err(CliError::Output)?;
        }
        for note in &findings.notes {
            writeln!(out, "=> {note}").map_err(CliError::Output)?;
        }
        writeln!(
            out,
            "{}: {}",
            reproduction.class.label(),
            if shows { "reproduced" } else { "NOT reproduced" }
        )
        .map_err(CliError::Output)?;
    }
    Ok(shows)
}
