//! `mirrorlog psm-script`: run data-driven producer-state scenario files, print diffs, or rewrite them.

use std::io::Write;
use std::path::PathBuf;

use psm_script::run_script;

use crate::error::CliError;

/// Scenario scripts are read whole; the largest real one is a few KiB.
const MAX_SCRIPT_BYTES: u64 = 16 << 20;

/// Runs every file; returns the number of mismatching blocks (after a rewrite: 0).
pub fn run_files(files: &[PathBuf], rewrite: bool, out: &mut impl Write) -> Result<usize, CliError> {
    let mut mismatches = 0;
    for file in files {
        crate::error::require_regular_file(file, Some(MAX_SCRIPT_BYTES))?;
        let text = std::fs::read_to_string(file).map_err(|source| CliError::Open {
            path: file.clone(),
            source,
        })?;
        let run =
            run_script(&text).map_err(|error| CliError::Usage(format!("{}: {error}", file.display())))?;
        let name = file.display().to_string();
        let differing = run.mismatches().count();
        if rewrite {
            if differing > 0 {
                std::fs::write(file, run.rewritten()).map_err(|source| CliError::Open {
                    path: file.clone(),
                    source,
                })?;
            }
            writeln!(out, "{name}: {} blocks, {differing} rewritten", run.blocks.len())
                .map_err(CliError::Output)?;
            continue;
        }
        mismatches += differing;
        write!(out, "{}", run.diff(&name)).map_err(CliError::Output)?;
        writeln!(out, "{name}: {} blocks, {differing} mismatches", run.blocks.len())
            .map_err(CliError::Output)?;
    }
    Ok(mismatches)
}
