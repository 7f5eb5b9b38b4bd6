//! `mirrorlog mirror …`: administration of a destination's mirror links, over the destination's Kafka port
//! (the private API key of ADR 0040). Every subcommand takes `--bootstrap DEST --link NAME` and acts on all the
//! link's topics unless `--topic` names some; `--json` prints the answer as one JSON document. The exit status
//! is 0 only when the action completed.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use mirror_admin::{AdminRequest, LinkStatus};

use crate::error::CliError;

/// How long an action may take beyond a promote's own wait.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// `mirrorlog mirror` arguments.
#[derive(Debug, Args)]
pub struct MirrorArgs {
    #[command(subcommand)]
    action: Action,
    /// A Kafka client properties file for reaching a secured destination (`security.protocol`, `sasl.mechanism`,
    /// `sasl.jaas.config`, PEM `ssl.truststore.*` / `ssl.keystore.*`), as Kafka's tools take `--command-config`.
    #[arg(long, global = true)]
    command_config: Option<std::path::PathBuf>,
}

/// The destination and the link an action is about.
#[derive(Debug, Args)]
struct Target {
    /// The destination broker (`host:port`): the cluster that mirrors.
    #[arg(long)]
    bootstrap: String,
    /// The link's name.
    #[arg(long)]
    link: String,
    /// The topics to act on (repeat the flag); all the link's topics when absent.
    #[arg(long = "topic")]
    topics: Vec<String>,
    /// Print the answer as one JSON document.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Mirror topics of a source cluster into new read-only topics here (the source's partition counts).
    Create {
        #[command(flatten)]
        target: Target,
        /// The source cluster's bootstrap addresses (`host:port[,host:port…]`, as Kafka's `bootstrap.servers`):
        /// any Kafka-compatible brokers; a session asks the next one when one does not answer.
        #[arg(long)]
        source: String,
        /// A Kafka client properties file for reaching a secured source (`security.protocol`, `sasl.mechanism`,
        /// `sasl.jaas.config`, PEM `ssl.truststore.*` / `ssl.keystore.*`); stored with the link, the PEM files it
        /// names read in, secrets never shown.
        #[arg(long)]
        source_config: Option<std::path::PathBuf>,
        /// Mirror every source topic whose whole name matches this regex, now and as the source creates them
        /// (repeat the flag; KIP-1279's `mirror.topics.include`). With `--include`, `--topic` may be left out.
        #[arg(long = "include", value_name = "REGEX")]
        include: Vec<String>,
        /// Keep topics whose whole name matches this regex out, even when included (repeat the flag; default
        /// with `--include`: `__.*`).
        #[arg(long = "exclude", value_name = "REGEX")]
        exclude: Vec<String>,
    },
    /// Failback: mirror topics this cluster already holds from the cluster that took them over (the mirror
    /// state machine aligns the logs first).
    Reverse {
        #[command(flatten)]
        target: Target,
        /// The source cluster's bootstrap addresses (`host:port[,host:port…]`).
        #[arg(long)]
        source: String,
        /// A Kafka client properties file for reaching a secured source (as for `create`).
        #[arg(long)]
        source_config: Option<std::path::PathBuf>,
    },
    /// Every link with its partitions.
    List {
        /// The destination broker.
        #[arg(long)]
        bootstrap: String,
        /// Print the answer as one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Per partition: state, last mirrored offset, lag in offsets and milliseconds, barrier offset once stopped;
    /// with `--config`, the link's configuration instead (every key, its value, whether it is the default).
    Describe {
        #[command(flatten)]
        target: Target,
        /// Show the link's configuration instead of its partitions.
        #[arg(long, conflicts_with = "topics")]
        config: bool,
    },
    /// Change a link's configuration while it runs (docs/mirroring.md lists the keys): durable, in effect at
    /// once; an invalid value is refused with its key named and nothing changes. A mirrored topic that new
    /// `mirror.topics.exclude` patterns match is stopped (failed over), as KIP-1279 does.
    Alter {
        /// The destination broker (`host:port`).
        #[arg(long)]
        bootstrap: String,
        /// The link's name.
        #[arg(long)]
        link: String,
        /// A key and its new value (repeat the flag); lists are comma-separated.
        #[arg(long = "config", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// A key back to its default (repeat the flag).
        #[arg(long = "delete-config", value_name = "KEY")]
        delete: Vec<String>,
        /// New Kafka client properties for reaching the source (as `create --source-config`: rotated
        /// credentials, a new trust store); checked before anything changes, then the link reconnects with them.
        #[arg(long)]
        source_config: Option<std::path::PathBuf>,
        /// Print the answer as one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Stop fetching; the topics stay read-only.
    Pause {
        #[command(flatten)]
        target: Target,
    },
    /// Fetch again after a pause.
    Resume {
        #[command(flatten)]
        target: Target,
    },
    /// Fail over now, whatever the lag: cut to the last stable offset, persist the last mirrored offset, write
    /// the MIRROR_PID_RESET barrier, make the topics writable.
    Failover {
        #[command(flatten)]
        target: Target,
    },
    /// Forget the link: fetching stops and its topics stay as they are (writable once failed over, read-only
    /// otherwise; `reverse` from the cluster it mirrored adopts such a topic again). Refused while a failover is
    /// under way.
    Delete {
        /// The destination broker (`host:port`).
        #[arg(long)]
        bootstrap: String,
        /// The link's name.
        #[arg(long)]
        link: String,
        /// Print the answer as one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Wait until the mirror has caught up with the (reachable) source, then fail over.
    Promote {
        #[command(flatten)]
        target: Target,
        /// How long to wait for the lag to reach zero before giving up (nothing is failed over then).
        #[arg(long, default_value_t = 60_000)]
        timeout_ms: u64,
    },
}

/// Runs one `mirror` subcommand.
pub fn mirror(args: MirrorArgs, out: &mut impl Write) -> Result<ExitCode, CliError> {
    let command_config = args.command_config;
    let (bootstrap, json, request, wait) = match args.action {
        Action::Create {
            target,
            source,
            source_config,
            include,
            exclude,
        } => {
            let request = AdminRequest::Create {
                link: target.link,
                source,
                topics: target.topics,
                source_config: source_settings(source_config.as_deref())?,
                include,
                exclude,
            };
            (target.bootstrap, target.json, request, Duration::ZERO)
        }
        Action::Reverse {
            target,
            source,
            source_config,
        } => {
            let request = AdminRequest::Reverse {
                link: target.link,
                source,
                topics: target.topics,
                source_config: source_settings(source_config.as_deref())?,
            };
            (target.bootstrap, target.json, request, Duration::ZERO)
        }
        Action::List { bootstrap, json } => (bootstrap, json, AdminRequest::List, Duration::ZERO),
        Action::Describe { target, config: true } => (
            target.bootstrap,
            target.json,
            AdminRequest::DescribeConfig { link: target.link },
            Duration::ZERO,
        ),
        Action::Describe {
            target,
            config: false,
        } => simple(target, |link, topics| AdminRequest::Describe { link, topics }),
        Action::Alter {
            bootstrap,
            link,
            set,
            delete,
            source_config,
            json,
        } => {
            let source_config = match source_config {
                Some(path) => Some(source_settings(Some(&path))?),
                None => None,
            };
            let request = AdminRequest::Alter {
                link,
                set: key_values(&set)?,
                delete,
                source_config,
            };
            (bootstrap, json, request, Duration::ZERO)
        }
        Action::Pause { target } => simple(target, |link, topics| AdminRequest::Pause { link, topics }),
        Action::Resume { target } => simple(target, |link, topics| AdminRequest::Resume { link, topics }),
        Action::Failover { target } => simple(target, |link, topics| AdminRequest::Failover { link, topics }),
        Action::Delete {
            bootstrap,
            link,
            json,
        } => (bootstrap, json, AdminRequest::Delete { link }, Duration::ZERO),
        Action::Promote { target, timeout_ms } => {
            let request = AdminRequest::Promote {
                link: target.link,
                topics: target.topics,
                timeout_ms,
            };
            (
                target.bootstrap,
                target.json,
                request,
                Duration::from_millis(timeout_ms),
            )
        }
    };
    let security = match &command_config {
        Some(path) => mirror_link::ClientSecurity::from_file(path)
            .map_err(|error| CliError::Usage(format!("--command-config {error}")))?,
        None => mirror_link::ClientSecurity::plaintext(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| CliError::Usage(format!("cannot start a runtime: {error}")))?;
    let response = runtime
        .block_on(mirror_link::admin::call(
            &bootstrap,
            &request,
            CALL_TIMEOUT.saturating_add(wait),
            &security,
        ))
        .map_err(|error| CliError::Usage(error.to_string()))?;
    if json {
        let text = serde_json::to_string_pretty(&response)
            .map_err(|error| CliError::Usage(format!("cannot encode the answer: {error}")))?;
        writeln!(out, "{text}").map_err(CliError::Output)?;
    } else {
        for link in &response.links {
            print_link(link, out).map_err(CliError::Output)?;
        }
    }
    match &response.error {
        None if response.ok => Ok(ExitCode::SUCCESS),
        error => {
            let (category, message) = error
                .as_ref()
                .map_or(("failed", "the action did not complete"), |error| {
                    (error.category.as_str(), error.message.as_str())
                });
            let _ = writeln!(std::io::stderr(), "mirrorlog mirror: {category}: {message}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The settings of `--source-config`, self-contained (the PEM files it names read in), checked here first.
fn source_settings(
    path: Option<&std::path::Path>,
) -> Result<std::collections::BTreeMap<String, String>, CliError> {
    match path {
        None => Ok(Default::default()),
        Some(path) => mirror_link::security::self_contained(path)
            .map_err(|error| CliError::Usage(format!("--source-config {error}"))),
    }
}

/// `--config KEY=VALUE` flags as a map; a flag without `=`, an empty key or a key given twice is a usage error.
fn key_values(pairs: &[String]) -> Result<std::collections::BTreeMap<String, String>, CliError> {
    let mut map = std::collections::BTreeMap::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(CliError::Usage(format!("--config {pair:?}: expected KEY=VALUE")));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(CliError::Usage(format!("--config {pair:?}: the key is empty")));
        }
        if map.insert(key.to_owned(), value.to_owned()).is_some() {
            return Err(CliError::Usage(format!("--config {key} is given twice")));
        }
    }
    Ok(map)
}

/// An action on a link's topics.
fn simple(
    target: Target,
    request: impl FnOnce(String, Vec<String>) -> AdminRequest,
) -> (String, bool, AdminRequest, Duration) {
    (
        target.bootstrap,
        target.json,
        request(target.link, target.topics),
        Duration::ZERO,
    )
}

/// A link as a table: one line per partition.
fn print_link(link: &LinkStatus, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "link {}: source {} (cluster {})",
        link.name, link.source, link.source_cluster_id
    )?;
    if !link.source_config.is_empty() {
        writeln!(out, "  source settings: {}", link.source_config.join(", "))?;
    }
    if !link.include.is_empty() {
        writeln!(out, "  include: {}", link.include.join(" "))?;
    }
    if !link.exclude.is_empty() {
        writeln!(out, "  exclude: {}", link.exclude.join(" "))?;
    }
    for warning in &link.warnings {
        writeln!(out, "  WARNING: {warning}")?;
    }
    if !link.config.is_empty() {
        writeln!(out, "  {:<40} {:<10} VALUE", "CONFIG", "SOURCE")?;
        for entry in &link.config {
            let source = if entry.default { "default" } else { "link" };
            writeln!(out, "  {:<40} {:<10} {}", entry.name, source, entry.value)?;
        }
        return Ok(());
    }
    writeln!(
        out,
        "  {:<24} {:>9}  {:<14} {:>10} {:>13} {:>10} {:>8} {:>8} {:>8}  ERROR",
        "TOPIC", "PARTITION", "STATE", "LOG_END", "LAST_MIRRORED", "SOURCE_LSO", "LAG", "LAG_MS", "BARRIER"
    )?;
    let shown = |value: Option<i64>| value.map_or_else(|| "-".to_owned(), |value| value.to_string());
    for partition in &link.partitions {
        writeln!(
            out,
            "  {:<24} {:>9}  {:<14} {:>10} {:>13} {:>10} {:>8} {:>8} {:>8}  {}",
            partition.topic,
            partition.partition,
            partition.state,
            partition.log_end_offset,
            shown(partition.last_mirrored_offset),
            shown(partition.source_last_stable_offset),
            shown(partition.lag_offsets),
            shown(partition.lag_ms),
            shown(partition.barrier_offset),
            partition.error.as_deref().unwrap_or("-"),
        )?;
    }
    Ok(())
}
