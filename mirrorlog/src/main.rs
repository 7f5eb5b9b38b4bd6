//! `mirrorlog`: command-line tools over Kafka partition logs.
//!
//! - `mirrorlog dump <segment> [--json]` prints every batch of a `.log` segment, decoding control records —
//!   including the `MIRROR_PID_RESET` barrier.
//! - `mirrorlog replay <segment-or-dir>` rebuilds producer state as log recovery does and prints it.
//! - `mirrorlog psm-script [--rewrite] <file>...` runs producer-state scenario files.
//! - `mirrorlog serve` runs a Kafka wire-protocol broker that real clients produce to and consume from.
//! - `mirrorlog mirror create | reverse | list | describe | pause | resume | failover | promote` administers a
//!   `serve` destination's mirror links.
//! - `mirrorlog users add` stores a user's SCRAM credential (password from standard input) for `serve`'s SASL
//!   listeners.
//! - `mirrorlog simulate` runs the multi-cluster simulator's topology × strategy matrix (exit 0 iff the seeds'
//!   claims hold, 1 when one does not, 3 when the selection checks none).
//!
//! Exit status: 0 when the input is clean (or every script matches), 2 when the input is corrupt (what was valid
//! is printed first, then the error), 1 when a script mismatches or the command could not run (missing file, bad
//! arguments).

/// mimalloc rather than glibc's malloc: it keeps freed pages for the next allocation, where glibc unmapped each
/// large fetch buffer and page-faulted a fresh one in for the next fetch (docs/benchmarks.md, 2026-12-07).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod dump;
mod dump_dir;
mod error;
mod mirror;
mod psm_script;
mod replay;
mod serve;
mod server_properties;
mod simulate;
mod users;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::dump::{DumpOutcome, Format};
use crate::error::CliError;

/// Kafka partition-log tools for cluster mirroring.
#[derive(Debug, Parser)]
#[command(name = "mirrorlog", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print a segment, a partition directory, a .snapshot, a .txnindex, a .index or a .timeindex, like
    /// kafka-dump-log.sh.
    Dump {
        /// A `.log` segment, a storage-fs partition directory (`{topic}-{partition}`), a `.snapshot`, a
        /// `.txnindex`, a `.index` or a `.timeindex` file. Nothing is modified.
        path: PathBuf,
        /// One JSON object per batch (field names of the shared test-vector manifest).
        #[arg(long)]
        json: bool,
        /// For a directory: also print its producer snapshots.
        #[arg(long)]
        snapshots: bool,
        /// For a directory: also print its aborted-transaction indexes.
        #[arg(long)]
        txn_index: bool,
    },
    /// List the partitions of a configured store with their offsets (read-only: nothing is created or repaired).
    Partitions {
        /// The storage config (TOML: backend = "fs" | "sled" | "rocks" | "memory", data_dir, …).
        #[arg(long)]
        config: PathBuf,
    },
    /// Rebuild producer state from a segment or partition directory (REPLICATION origin, as recovery does).
    Replay {
        /// A `.log` segment, or a directory whose `*.log` segments are replayed in offset order.
        path: PathBuf,
        /// This cluster's id: its own barriers reset producer state under the writer scope.
        #[arg(long)]
        cluster_id: Option<String>,
        /// Which MIRROR_PID_RESET barriers reset producer state.
        #[arg(long, value_enum, default_value_t = Scope::Writer)]
        barrier_scope: Scope,
        /// One JSON object (field names of the manifest's producer_state_after_replay).
        #[arg(long)]
        json: bool,
    },
    /// Run producer-state scenario scripts (datadriven format); exit 1 on any mismatch.
    PsmScript {
        /// Replace each file's expected outputs with the actual ones.
        #[arg(long)]
        rewrite: bool,
        /// Script files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Run the multi-cluster simulator: every topology under every producer-id strategy, the anomalies an
    /// independent oracle counts, minimal reproductions, and whether the seeds' claims hold (exit 0 iff they do).
    Simulate(simulate::SimulateArgs),
    /// Run a Kafka wire-protocol broker over the partition log (one node leading every partition) until SIGTERM
    /// or Ctrl-C. Listeners PLAINTEXT (loopback by default), SSL, SASL_PLAINTEXT, SASL_SSL; Kafka's ACLs with
    /// `--authorizer acl`.
    Serve(Box<serve::ServeArgs>),
    /// Administer a destination's mirror links (create, reverse, list, describe, pause, resume, failover,
    /// promote) over its Kafka port; exit 0 only when the action completed.
    Mirror(mirror::MirrorArgs),
    /// Manage SASL/SCRAM users in a stopped node's store (`users add`: the first administrator; later users over
    /// the wire with `kafka-configs --entity-type users`).
    Users(users::UsersArgs),
}

/// `--barrier-scope` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Scope {
    /// Only barriers written by this cluster (or untagged ones) reset.
    Writer,
    /// Every barrier resets.
    Everywhere,
}

/// Exit status for corrupt input.
const EXIT_CORRUPT: u8 = 2;

/// Exit status of a `simulate` run whose selection checks no claim of the seeds.
const EXIT_NOTHING_CHECKED: u8 = 3;

fn run(cli: Cli) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Dump {
            path,
            json,
            snapshots,
            txn_index,
        } => {
            let format = if json { Format::Json } else { Format::Text };
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
            let views = dump_dir::Views { snapshots, txn_index };
            let outcome = dump_dir::dump_path(&path, format, views, &mut out, &mut std::io::stderr())?;
            out.flush().map_err(CliError::Output)?;
            Ok(match outcome {
                DumpOutcome::Clean { .. } => ExitCode::SUCCESS,
                DumpOutcome::Corrupt { .. } => ExitCode::from(EXIT_CORRUPT),
            })
        }
        Command::Replay {
            path,
            cluster_id,
            barrier_scope,
            json,
        } => {
            let options = replay::ReplayOptions {
                cluster_id,
                barrier_scope: match barrier_scope {
                    Scope::Writer => producer_state::BarrierScope::Writer,
                    Scope::Everywhere => producer_state::BarrierScope::Everywhere,
                },
                json,
            };
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            match replay::replay_path(&path, options, &mut out)? {
                None => Ok(ExitCode::SUCCESS),
                Some(stopped) => {
                    let _ = writeln!(
                        std::io::stderr(),
                        "mirrorlog: {}: replay stopped at a corrupt batch (state above is of the valid prefix): {}",
                        stopped.file.display(),
                        stopped.error
                    );
                    Ok(ExitCode::from(EXIT_CORRUPT))
                }
            }
        }
        Command::Partitions { config } => {
            let config = storage_config::StorageConfig::load(&config).map_err(CliError::Config)?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .map_err(|e| CliError::Usage(format!("cannot start a runtime: {e}")))?;
            let lines = runtime.block_on(async {
                let store = config.open_read_only()?;
                let mut lines = vec![format!("backend {}", config.backend())];
                for id in store.list().await? {
                    let partition = store.open_read_only(&id).await?;
                    let report = partition.open_report();
                    if !report.is_clean() {
                        lines.push(format!(
                            "{id}: needs repair on the next read-write open: {report}"
                        ));
                    }
                    lines.push(format!(
                        "{id}: log start {} log end {} snapshots {}",
                        partition.log_start_offset(),
                        partition.log_end_offset(),
                        partition.snapshot_offsets().await?.len()
                    ));
                }
                Ok::<_, storage_config::ConfigError>(lines)
            });
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            for line in lines.map_err(CliError::Config)? {
                writeln!(out, "{line}").map_err(CliError::Output)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve(args) => {
            serve::serve(*args)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Mirror(args) => {
            let stdout = std::io::stdout();
            mirror::mirror(args, &mut stdout.lock())
        }
        Command::Users(args) => {
            let stdin = std::io::stdin();
            users::users(args, &mut stdin.lock())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Simulate(args) => {
            let stdout = std::io::stdout();
            Ok(match simulate::simulate(args, &mut stdout.lock())? {
                simulate::Conclusion::Hold => ExitCode::SUCCESS,
                simulate::Conclusion::DoNotHold => ExitCode::FAILURE,
                simulate::Conclusion::NothingChecked => ExitCode::from(EXIT_NOTHING_CHECKED),
            })
        }
        Command::PsmScript { rewrite, files } => {
            let stdout = std::io::stdout();
            let mismatches = psm_script::run_files(&files, rewrite, &mut stdout.lock())?;
            Ok(if mismatches == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            // `--help` and `--version` are answers; every other parse error is a usage failure: exit 1, as the
            // README says (clap's own exit code, 2, is reserved for corrupt input).
            let _ = error.print();
            return if error.use_stderr() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(CliError::Output(error)) if error.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "mirrorlog: {error}");
            ExitCode::FAILURE
        }
    }
}
