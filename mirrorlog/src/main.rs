//! `mirrorlog`: command-line tools over Kafka partition logs.
//!
//! `mirrorlog dump <segment> [--json]` prints every batch of a `.log` segment, decoding control records —
//! including the `MIRROR_PID_RESET` barrier. Exit status: 0 when the input is clean, 2 when it is corrupt (the
//! valid batches are printed first, then the error), 1 when the command could not run (missing file, bad
//! arguments, output closed).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod dump;
mod error;

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
