//! `kafka-diff`: runs the differential suite's client scenarios against one Kafka-compatible broker and prints,
//! one JSON object per line, what a client observed in each, normalised so that two brokers' outputs compare
//! with `==` (see `session`). The suite (`interop/tests/test_differential.py`) runs it against Apache Kafka and
//! against `mirrorlog serve` and compares the lines.
//!
//! ```text
//! kafka-diff --bootstrap 127.0.0.1:9092            # every scenario
//! kafka-diff --bootstrap 127.0.0.1:9092 --only produce_codecs --only fetch_every_version
//! kafka-diff --list                                # the scenarios' names and what each pins
//! kafka-diff --authorization --bootstrap 127.0.0.1:9094 --command-config app.properties
//!                                                  # the authorization set, as a principal without ACLs
//! ```
//!
//! Output lines: `{"scenario": NAME, "observations": [{"step", "seen"}…], "error": null | TEXT}` per scenario,
//! then `{"calls": [[api key, version]…]}`: every (API, version) pair the run sent.

mod error;
mod observe;
mod requests;
mod scenarios;
mod session;

use std::collections::BTreeSet;
use std::process::ExitCode;

use clap::Parser;
use serde_json::json;

/// Runs client scenarios against a Kafka-compatible broker and prints what a client observes, normalised.
#[derive(Debug, Parser)]
#[command(name = "kafka-diff")]
struct Args {
    /// The broker, `host:port`.
    #[arg(long, required_unless_present = "list")]
    bootstrap: Option<String>,
    /// Run only the scenarios named (repeatable); default: all.
    #[arg(long = "only", value_name = "SCENARIO")]
    only: Vec<String>,
    /// List the scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Run the authorization set (`scenarios::authorization`) instead of the default one: meant for a principal
    /// without ACLs on an authorizing broker.
    #[arg(long)]
    authorization: bool,
    /// A Kafka client properties file saying how to reach the broker (`security.protocol`, SASL, PEM trust);
    /// default PLAINTEXT.
    #[arg(long, value_name = "FILE")]
    command_config: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let set = if args.authorization {
        scenarios::authorization::ALL
    } else {
        scenarios::ALL
    };
    if args.list {
        for scenario in set {
            println!("{}\t{}", scenario.name, scenario.about);
        }
        return ExitCode::SUCCESS;
    }
    let unknown: Vec<&String> = args
        .only
        .iter()
        .filter(|name| !set.iter().any(|scenario| scenario.name == name.as_str()))
        .collect();
    if !unknown.is_empty() {
        eprintln!("kafka-diff: no scenario named {unknown:?} (`kafka-diff --list` names them)");
        return ExitCode::from(2);
    }
    let Some(bootstrap) = args.bootstrap else {
        eprintln!("kafka-diff: --bootstrap is required");
        return ExitCode::from(2);
    };
    let security = match &args.command_config {
        None => mirror_link::security::ClientSecurity::plaintext(),
        Some(path) => match mirror_link::security::ClientSecurity::from_file(path) {
            Ok(security) => security,
            Err(error) => {
                eprintln!("kafka-diff: {error}");
                return ExitCode::from(2);
            }
        },
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("kafka-diff: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let chosen: Vec<&scenarios::Scenario> = set
        .iter()
        .filter(|scenario| args.only.is_empty() || args.only.iter().any(|name| name == scenario.name))
        .collect();
    let mut calls = BTreeSet::new();
    runtime.block_on(async {
        for scenario in chosen {
            let mut session = session::Session::new(&bootstrap, scenario.name).secured(security.clone());
            let outcome = if args.authorization {
                scenarios::authorization::run(scenario.name, &mut session).await
            } else {
                scenarios::run(scenario.name, &mut session).await
            };
            let (observations, called) = session.into_parts();
            calls.extend(called);
            let error = outcome.err().map(|error| error.to_string());
            println!(
                "{}",
                json!({ "scenario": scenario.name, "observations": observations, "error": error })
            );
        }
    });
    println!("{}", json!({ "calls": calls }));
    ExitCode::SUCCESS
}
