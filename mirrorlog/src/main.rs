//! `mirrorlog`: command-line tools over Kafka partition logs.
//!
//! - `mirrorlog dump <segment> [--json]` prints every batch of a `.log` segment, decoding control records —
//!   including the `MIRROR_PID_RESET` barrier.
//! - `mirrorlog replay <segment-or-dir>` rebuilds producer state as log recovery does and prints it.
//! - `mirrorlog psm-script [--rewrite] <file>...` runs producer-state scenario files.
//!
//! Exit status: 0 when the input is clean (or every script matches), 2 when the input is corrupt (what was valid
//! is printed first, then the error), 1 when a script mismatches or the command could not run (missing file, bad
//! arguments).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod dump;
mod error;
mod psm_script;
mod replay;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::dump::{dump_segment, DumpOutcome, Format};
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
    /// Print the batches of a segment file, like kafka-dump-log.sh --print-data-log.
    Dump {
        /// A `.log` segment file (batches back to back).
        path: PathBuf,
        /// One JSON object per batch (field names of the shared test-vector manifest).
        #[arg(long)]
        json: bool,
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

fn run(cli: Cli) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Dump { path, json } => {
            let format = if json { Format::Json } else { Format::Text };
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
            let outcome = dump_segment(&path, format, &mut out, &mut std::io::stderr())?;
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
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(CliError::Output(error)) if error.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "mirrorlog: {error}");
            ExitCode::FAILURE
        }
    }
}
