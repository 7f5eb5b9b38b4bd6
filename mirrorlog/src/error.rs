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
