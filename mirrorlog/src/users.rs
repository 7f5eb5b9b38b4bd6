//! `mirrorlog users add`: a user's SCRAM credential written into a node's store while `serve` is not running —
//! the first administrator, before any client can authenticate (Kafka's `kafka-storage format --add-scram`).
//! Later users are managed over the wire (`kafka-configs --entity-type users`, AlterUserScramCredentials).
//!
//! The password is read from standard input (its first line), never from the command line, where `ps` and shell
//! history would show it.
//!
//! `serve` must be stopped: it reads the credentials when it starts, and nothing keeps two processes off one data
//! directory yet (Kafka's log directories have a `.lock` file; storage-fs has none) — a running `serve` would not
//! see the user, and its next credential change would write over it.

use std::io::BufRead;
use std::path::PathBuf;

use kafka_auth::{ScramCredential, ScramMechanism};
use storage_config::StorageConfig;

use crate::error::CliError;

/// `mirrorlog users …`.
#[derive(Debug, clap::Args)]
pub struct UsersArgs {
    #[command(subcommand)]
    command: UsersCommand,
}

#[derive(Debug, clap::Subcommand)]
enum UsersCommand {
    /// Set a user's SCRAM credential (its password read from standard input) in a stopped node's store (`serve`
    /// must not be running on it).
    Add {
        /// Storage config (TOML); default: the fs backend under --data-dir.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Data directory of the default fs backend (ignored with --config).
        #[arg(long, default_value = "mirrorlog-data")]
        data_dir: PathBuf,
        /// The user name (its principal is User:NAME).
        #[arg(long)]
        user: String,
        /// The SCRAM mechanism (repeatable; default: both). PLAIN logins check these credentials too.
        #[arg(long = "mechanism", value_parser = parse_mechanism)]
        mechanisms: Vec<ScramMechanism>,
        /// PBKDF2 iterations (Kafka's bounds: 4096 to 16384).
        #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u32).range(4096..=16384))]
        iterations: u32,
    },
}

fn parse_mechanism(text: &str) -> Result<ScramMechanism, String> {
    ScramMechanism::from_name(text)
        .ok_or_else(|| format!("{text:?}: expected SCRAM-SHA-256 or SCRAM-SHA-512"))
}

/// Runs `mirrorlog users …`, reading the password from `input`.
pub fn users(args: UsersArgs, input: &mut dyn BufRead) -> Result<(), CliError> {
    let UsersCommand::Add {
        config,
        data_dir,
        user,
        mechanisms,
        iterations,
    } = args.command;
    if user.is_empty() {
        return Err(CliError::Usage("--user must not be empty".to_owned()));
    }
    let mut password = String::new();
    input
        .read_line(&mut password)
        .map_err(|error| CliError::Usage(format!("cannot read the password from standard input: {error}")))?;
    let password = password.trim_end_matches(['\n', '\r']);
    if password.is_empty() {
        return Err(CliError::Usage(
            "no password on standard input (its first line is the password)".to_owned(),
        ));
    }
    let mechanisms = if mechanisms.is_empty() {
        ScramMechanism::ALL.to_vec()
    } else {
        mechanisms
    };
    let storage = match &config {
        Some(path) => StorageConfig::load(path).map_err(CliError::Config)?,
        None => StorageConfig::for_backend(storage_config::Backend::Fs, &data_dir),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Usage(format!("cannot start a runtime: {e}")))?;
    runtime.block_on(async {
        let store = storage.open().map_err(CliError::Config)?;
        for mechanism in mechanisms {
            let credential = ScramCredential::generate(mechanism, password.as_bytes(), iterations)
                .map_err(|error| CliError::Usage(error.to_string()))?;
            node::users::add_offline(store.as_ref(), &user, mechanism, credential)
                .await
                .map_err(|error| CliError::Usage(error.to_string()))?;
            eprintln!(
                "mirrorlog users: {} credential of User:{user} stored",
                mechanism.name()
            );
        }
        Ok(())
    })
}
