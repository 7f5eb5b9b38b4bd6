//! The CLI's error enum: what can stop a command before it has an answer to print.

use std::path::PathBuf;

/// A command failed (corrupt input is not a failure: it is an answer, printed with exit status 2).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// The input cannot be used as given.
    #[error("{0}")]
    Usage(String),
    /// The input file could not be opened.
    #[error("cannot open {path}: {source}")]
    Open {
        /// The path given.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Reading the input failed part way.
    #[error("cannot read {path} at offset {file_offset}: {source}")]
    Read {
        /// The path given.
        path: PathBuf,
        /// Where the read failed.
        file_offset: u64,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Producer state refused a batch while replaying.
    #[error("replay stopped: {0}")]
    Replay(String),
    /// The storage configuration could not be read or opened.
    #[error("{0}")]
    Config(storage_config::ConfigError),
    /// Writing the output failed.
    #[error("cannot write output: {0}")]
    Output(std::io::Error),
}

/// Refuses anything but a regular file before it is opened: opening a FIFO with no writer blocks forever, and a
/// device (`/dev/zero`) never ends. `max_bytes` bounds files that are read whole.
pub fn require_regular_file(path: &std::path::Path, max_bytes: Option<u64>) -> Result<(), CliError> {
    let metadata = std::fs::metadata(path).map_err(|source| CliError::Open {
        path: path.to_owned(),
        source,
    })?;
    if !metadata.is_file() {
        return Err(CliError::Usage(format!(
            "{} is not a regular file (a FIFO, device or socket is refused: it may never end)",
            path.display()
        )));
    }
    if let Some(max) = max_bytes.filter(|&max| metadata.len() > max) {
        return Err(CliError::Usage(format!(
            "{} holds {} bytes; at most {max} are read whole",
            path.display(),
            metadata.len()
        )));
    }
    Ok(())
}
