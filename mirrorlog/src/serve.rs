//! `mirrorlog serve`: runs the Kafka wire-protocol broker (crate `broker`) until SIGTERM or Ctrl-C.

use std::path::PathBuf;
use std::time::Duration;

use broker::{BrokerConfig, Faults, ListenerConfig, SaslMechanism, SecurityProtocol, Server, TlsConfig};
use storage_config::StorageConfig;

use crate::error::CliError;
use crate::server_properties::ServerProperties;

/// Arguments of `mirrorlog serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Storage config (TOML); default: the fs backend under --data-dir.
    #[arg(long)]
    config: Option<PathBuf>,
    /// A listener, as Kafka's `listeners` names it: PLAINTEXT://HOST:PORT, SSL://…, SASL_PLAINTEXT://… or
    /// SASL_SSL://… (repeatable, one per protocol; a bare HOST:PORT is PLAINTEXT; default 127.0.0.1:9092). A
    /// PLAINTEXT listener has no authentication: keep it on loopback.
    #[arg(long = "listen")]
    listeners: Vec<ListenerConfig>,
    /// Security settings under Kafka's `server.properties` key names (listeners, advertised.listeners, PEM
    /// ssl.keystore/truststore, ssl.client.auth, sasl.enabled.mechanisms, authorizer.class.name, super.users,
    /// allow.everyone.if.no.acl.found); a setting given here and as a flag is refused.
    #[arg(long, value_name = "FILE")]
    server_properties: Option<PathBuf>,
    /// The address clients are told to connect to on a listener (Metadata, FindCoordinator), when it is not the
    /// listen address — a proxy or a NAT in front of the broker (Kafka's `advertised.listeners`):
    /// PROTOCOL://HOST:PORT (repeatable), or HOST:PORT for the first listener.
    #[arg(long = "advertised-listener", value_parser = parse_advertised)]
    advertised_listeners: Vec<(Option<SecurityProtocol>, String, u16)>,
    /// The server certificate chain of SSL and SASL_SSL listeners (PEM, leaf first).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The server's private key (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// CA certificates (PEM) client certificates must chain to: every TLS client must present one, and on an SSL
    /// listener its subject is its principal (`User:CN=…`; Kafka's `ssl.client.auth=required`).
    #[arg(long, requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// The SASL mechanisms SASL listeners offer, comma-separated (Kafka's `sasl.enabled.mechanisms`; default:
    /// PLAIN,SCRAM-SHA-256,SCRAM-SHA-512).
    #[arg(long, value_delimiter = ',')]
    sasl_mechanisms: Option<Vec<SaslMechanism>>,
    /// How long a connection may take to finish its TLS handshake and SASL authentication, in milliseconds.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    authentication_timeout_ms: u64,
    /// The authorizer: `acl` checks every request against the ACLs (`kafka-acls.sh` manages them; Kafka's
    /// StandardAuthorizer), `none` allows every request (Kafka without `authorizer.class.name`).
    #[arg(long, value_enum)]
    authorizer: Option<Authorizer>,
    /// A principal allowed everything whatever the ACLs say: User:NAME (repeatable; Kafka's `super.users`).
    #[arg(long = "super-user", value_parser = parse_super_user)]
    super_users: Vec<String>,
    /// Open a resource that has no ACL at all to everyone (Kafka's `allow.everyone.if.no.acl.found`; off by
    /// default, so that an authorizer denies what no ACL allows).
    #[arg(long)]
    allow_everyone_if_no_acl_found: bool,
    /// The cluster id Metadata answers.
    #[arg(long, default_value = "mirrorlog")]
    cluster_id: String,
    /// Data directory of the default fs backend (ignored with --config).
    #[arg(long, default_value = "mirrorlog-data")]
    data_dir: PathBuf,
    /// Create a topic at start-up when missing: NAME:PARTITIONS (repeatable).
    #[arg(long = "topic", value_parser = parse_topic)]
    topics: Vec<(String, u32)>,
    /// Do not create topics that Metadata requests name (`auto.create.topics.enable=false`).
    #[arg(long)]
    no_auto_create_topics: bool,
    /// Partitions of an auto-created topic.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    default_partitions: u32,
    /// The largest request accepted, in bytes (`socket.request.max.bytes`).
    #[arg(long, default_value_t = 100 << 20, value_parser = clap::value_parser!(u64).range(1024..=(1 << 30)))]
    max_request_bytes: u64,
    /// The largest record batch a produce may carry, in bytes, log overhead included (`message.max.bytes`); a
    /// larger one is refused MESSAGE_TOO_LARGE.
    #[arg(long, default_value_t = 1_048_588, value_parser = clap::value_parser!(u64).range(64..=(1 << 30)))]
    max_message_bytes: u64,
    /// How far ahead of the broker's clock a record's timestamp may be, in milliseconds
    /// (`message.timestamp.after.max.ms`); a record further ahead is refused INVALID_TIMESTAMP.
    #[arg(long, default_value_t = 3_600_000, value_parser = clap::value_parser!(i64).range(0..))]
    message_timestamp_after_max_ms: i64,
    /// How far behind it, in milliseconds (`message.timestamp.before.max.ms`); default: no limit.
    #[arg(long, default_value_t = i64::MAX, value_parser = clap::value_parser!(i64).range(0..))]
    message_timestamp_before_max_ms: i64,
    /// `transactional.id.expiration.ms`.
    #[arg(long, default_value_t = 604_800_000, value_parser = clap::value_parser!(i64).range(1..))]
    transactional_id_expiration_ms: i64,
    /// `transaction.max.timeout.ms`.
    #[arg(long, default_value_t = 900_000, value_parser = clap::value_parser!(i64).range(1..))]
    max_transaction_timeout_ms: i64,
    /// `producer.id.expiration.ms`.
    #[arg(long, default_value_t = 86_400_000, value_parser = clap::value_parser!(i64).range(1..))]
    producer_id_expiration_ms: i64,
    /// How often timed-out transactions are aborted and idle ids expired, in milliseconds.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    housekeeping_interval_ms: u64,
    /// How long a topic without its own `retention.ms` keeps data, in milliseconds (`log.retention.ms`; −1:
    /// forever). Default: Kafka's 7 days.
    #[arg(long, default_value_t = 604_800_000, value_parser = clap::value_parser!(i64).range(-1..), allow_negative_numbers = true)]
    log_retention_ms: i64,
    /// The bytes a partition of a topic without its own `retention.bytes` may hold before its oldest segments
    /// are deleted (`log.retention.bytes`; −1: no bound, Kafka's default).
    #[arg(long, default_value_t = -1, value_parser = clap::value_parser!(i64).range(-1..), allow_negative_numbers = true)]
    log_retention_bytes: i64,
    /// How long an Empty consumer group's committed offsets are kept, counted from when it emptied (a
    /// standalone consumer's: from their commit), in minutes (`offsets.retention.minutes`; Kafka's 7 days).
    #[arg(long, default_value_t = 10_080, value_parser = clap::value_parser!(i64).range(1..=1_000_000_000))]
    offsets_retention_minutes: i64,
    /// How long a consumer group's first rebalance from Empty waits for more members before it completes, in
    /// milliseconds (`group.initial.rebalance.delay.ms`; Kafka's 3 s; 0: at once).
    #[arg(long, default_value_t = 3_000, value_parser = clap::value_parser!(i64).range(0..=i64::from(i32::MAX)))]
    group_initial_rebalance_delay_ms: i64,
    /// How often expired committed offsets are looked for, in milliseconds
    /// (`offsets.retention.check.interval.ms`).
    #[arg(long, default_value_t = 600_000, value_parser = clap::value_parser!(i64).range(100..=86_400_000))]
    offsets_retention_check_interval_ms: i64,
    /// How long the log cleaner waits between rounds of compaction, in milliseconds (`log.cleaner.backoff.ms`).
    #[arg(long, default_value_t = 15_000, value_parser = clap::value_parser!(u64).range(100..=86_400_000))]
    log_cleaner_backoff_ms: u64,
    /// The most bytes per second the log cleaner reads and writes, all its passes together
    /// (`log.cleaner.io.max.bytes.per.second`; default: Kafka's, no limit).
    #[arg(long, value_parser = parse_bytes_per_second)]
    log_cleaner_io_max_bytes_per_second: Option<f64>,
    /// How often retention runs, in milliseconds (`log.retention.check.interval.ms`).
    #[arg(long, default_value_t = 300_000, value_parser = clap::value_parser!(u64).range(100..=86_400_000))]
    log_retention_check_interval_ms: u64,
    /// How often mirror links compare their topics' partition counts with the source's and add the partitions the
    /// source gained, and ask each source's Metadata again for its brokers and leaders, in milliseconds (KIP-1279's
    /// `mirror.metadata.refresh.interval.ms`).
    #[arg(long, default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(100..=86_400_000))]
    mirror_metadata_refresh_ms: u64,
    /// Serve Prometheus metrics over HTTP at `HOST:PORT`/metrics (requests, latency, bytes, connections, and
    /// every mirrored partition's state and lag; docs/metrics.md). No TLS and no authentication: bind it to
    /// loopback or a management network. Off by default.
    #[arg(long, value_name = "HOST:PORT")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Test fault: the fraction (0–1) of produce responses lost after the records are appended (the connection
    /// closes instead of answering).
    #[arg(long, default_value_t = 0.0, value_parser = parse_fraction, hide = true)]
    fault_drop_produce_responses: f64,
    /// Test fault: a pause after each step of a mirror failover's STOPPING, in milliseconds (a test kills the
    /// process in the middle of one).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=60_000), hide = true)]
    fault_stopping_step_pause_ms: Option<u64>,
}

fn parse_topic(text: &str) -> Result<(String, u32), String> {
    let (name, partitions) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("{text:?}: expected NAME:PARTITIONS"))?;
    let partitions: u32 = partitions
        .parse()
        .map_err(|_| format!("{text:?}: the partition count must be a number"))?;
    if !(1..=10_000).contains(&partitions) {
        return Err(format!("{text:?}: 1 to 10,000 partitions"));
    }
    storage::PartitionId::new(name, 0).map_err(|error| format!("{text:?}: {error}"))?;
    Ok((name.to_owned(), partitions))
}

fn parse_fraction(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if (0.0..=1.0).contains(&value) => Ok(value),
        _ => Err(format!("{text:?}: expected a fraction between 0 and 1")),
    }
}

/// Moves the settings of a `--server-properties` file into `args`, refusing one given both ways.
fn merge_server_properties(args: &mut ServeArgs, file: ServerProperties) -> Result<(), CliError> {
    fn once<T>(flag: &mut T, given: bool, from_file: Option<T>, name: &str) -> Result<(), CliError> {
        match from_file {
            Some(_) if given => Err(CliError::Usage(format!(
                "{name} is set both in --server-properties and by its flag"
            ))),
            Some(value) => {
                *flag = value;
                Ok(())
            }
            None => Ok(()),
        }
    }
    let given = !args.listeners.is_empty();
    once(&mut args.listeners, given, file.listeners, "listeners")?;
    let given = !args.advertised_listeners.is_empty();
    let advertised = file.advertised.map(|all| {
        all.into_iter()
            .map(|(protocol, host, port)| (Some(protocol), host, port))
            .collect()
    });
    once(
        &mut args.advertised_listeners,
        given,
        advertised,
        "advertised.listeners",
    )?;
    if let Some(keystore) = file.keystore {
        if args.tls_cert.is_some() {
            return Err(CliError::Usage(
                "ssl.keystore.location is set both in --server-properties and by --tls-cert/--tls-key"
                    .to_owned(),
            ));
        }
        // Kafka's PEM keystore: the chain and the key in one file.
        args.tls_cert = Some(keystore.clone());
        args.tls_key = Some(keystore);
    }
    let given = args.tls_client_ca.is_some();
    once(
        &mut args.tls_client_ca,
        given,
        file.client_ca.map(Some),
        "ssl.truststore.location",
    )?;
    let given = args.sasl_mechanisms.is_some();
    once(
        &mut args.sasl_mechanisms,
        given,
        file.sasl_mechanisms.map(Some),
        "sasl.enabled.mechanisms",
    )?;
    let given = args.authorizer.is_some();
    let authorizer = file
        .authorizer
        .map(|on| Some(if on { Authorizer::Acl } else { Authorizer::None }));
    once(&mut args.authorizer, given, authorizer, "authorizer.class.name")?;
    let given = !args.super_users.is_empty();
    once(&mut args.super_users, given, file.super_users, "super.users")?;
    let given = args.allow_everyone_if_no_acl_found;
    once(
        &mut args.allow_everyone_if_no_acl_found,
        given,
        file.allow_everyone_if_no_acl_found,
        "allow.everyone.if.no.acl.found",
    )?;
    Ok(())
}

/// The authorizers `--authorizer` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Authorizer {
    /// Every request is allowed.
    None,
    /// Kafka's ACL model.
    Acl,
}

/// A rate in bytes per second: a positive finite number, as Java reads a double (`1048576`, `1.5E7`).
fn parse_bytes_per_second(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(rate),
        _ => Err(format!(
            "{text:?} is not a rate in bytes per second (a positive number)"
        )),
    }
}

fn parse_super_user(text: &str) -> Result<String, String> {
    kafka_auth::Principal::parse(text).map(|principal| principal.to_string())
}

/// Runs the broker until SIGTERM or Ctrl-C, then shuts it down cleanly.
pub fn serve(args: ServeArgs) -> Result<(), CliError> {
    let storage = match &args.config {
        Some(path) => StorageConfig::load(path).map_err(CliError::Config)?,
        None => StorageConfig::for_backend(storage_config::Backend::Fs, &args.data_dir),
    };
    let mut config = BrokerConfig::new(std::net::SocketAddr::from(([127, 0, 0, 1], 9092)), storage);
    let mut args = args;
    if let Some(path) = args.server_properties.clone() {
        let file = crate::server_properties::load(&path).map_err(CliError::Usage)?;
        merge_server_properties(&mut args, file)?;
    }
    if args.listeners.is_empty() {
        args.listeners = vec![ListenerConfig::plaintext(std::net::SocketAddr::from((
            [127, 0, 0, 1],
            9092,
        )))];
    }
    config.listeners = listeners(&args)?;
    config.tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(TlsConfig {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: args.tls_client_ca.clone(),
        }),
        _ if args.tls_client_ca.is_some() => {
            return Err(CliError::Usage(
                "a client CA needs the server's certificate and key".to_owned(),
            ));
        }
        _ => None,
    };
    if let Some(mechanisms) = &args.sasl_mechanisms {
        if !config.listeners.iter().any(|listener| listener.protocol.sasl()) {
            return Err(CliError::Usage(
                "--sasl-mechanisms needs a SASL_PLAINTEXT or SASL_SSL listener".to_owned(),
            ));
        }
        config.sasl_mechanisms = mechanisms.clone();
    }
    config.authentication_timeout = Duration::from_millis(args.authentication_timeout_ms);
    config.authorizer = match args.authorizer.unwrap_or(Authorizer::None) {
        Authorizer::None if !args.super_users.is_empty() || args.allow_everyone_if_no_acl_found => {
            return Err(CliError::Usage(
                "--super-user and --allow-everyone-if-no-acl-found need --authorizer acl".to_owned(),
            ));
        }
        Authorizer::None => None,
        Authorizer::Acl => Some(std::sync::Arc::new(kafka_auth::acl::AuthorizerConfig {
            super_users: args.super_users.iter().cloned().collect(),
            allow_everyone_if_no_acl_found: args.allow_everyone_if_no_acl_found,
        })),
    };
    config.node.cluster_id = args.cluster_id;
    config.node.topics = args.topics;
    config.node.auto_create_topics = !args.no_auto_create_topics;
    config.node.default_partitions = args.default_partitions;
    config.max_request_bytes = usize::try_from(args.max_request_bytes).unwrap_or(usize::MAX);
    config.node.max_message_bytes = usize::try_from(args.max_message_bytes).unwrap_or(usize::MAX);
    config.node.max_timestamp_ahead_ms = args.message_timestamp_after_max_ms;
    config.node.max_timestamp_behind_ms = args.message_timestamp_before_max_ms;
    config.node.transactional_id_expiration_ms = args.transactional_id_expiration_ms;
    config.node.offsets_retention_ms = args.offsets_retention_minutes.saturating_mul(60_000);
    config.node.offsets_retention_check_interval_ms = args.offsets_retention_check_interval_ms;
    config.node.group_initial_rebalance_delay_ms = args.group_initial_rebalance_delay_ms;
    config.node.max_transaction_timeout_ms = args.max_transaction_timeout_ms;
    config.node.producer_id_expiration_ms = args.producer_id_expiration_ms;
    config.housekeeping_interval = Duration::from_millis(args.housekeeping_interval_ms);
    config.node.log_retention_ms = args.log_retention_ms;
    config.node.log_retention_bytes = args.log_retention_bytes;
    config.retention_check_interval = Duration::from_millis(args.log_retention_check_interval_ms);
    config.cleaner_backoff = Duration::from_millis(args.log_cleaner_backoff_ms);
    if let Some(rate) = args.log_cleaner_io_max_bytes_per_second {
        config.node.cleaner_io_max_bytes_per_second = rate;
    }
    config.mirror_metadata_refresh = Duration::from_millis(args.mirror_metadata_refresh_ms);
    config.metrics_listen = args.metrics_listen;
    config.faults = Faults {
        drop_produce_responses: args.fault_drop_produce_responses,
        stopping_step_pause: args
            .fault_stopping_step_pause_ms
            .map(std::time::Duration::from_millis),
    };
    install_log()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Usage(format!("cannot start a runtime: {e}")))?;
    runtime.block_on(async {
        let server = Server::bind(config)
            .await
            .map_err(|e| CliError::Usage(e.to_string()))?;
        let address = server.local_addr().map_err(|e| CliError::Usage(e.to_string()))?;
        // The first line says where to connect (tests read the port from it when they ask for port 0); then one
        // line per listener.
        println!("mirrorlog serve: listening on {address}");
        for protocol in SecurityProtocol::ALL {
            if let Some(address) = server.listener_addr(protocol) {
                println!("mirrorlog serve: listener {protocol}://{address}");
            }
        }
        if let Some(address) = server.metrics_addr() {
            println!("mirrorlog serve: metrics on http://{address}/metrics");
        }
        for (partition, report) in server.node().repairs() {
            eprintln!("mirrorlog serve: {partition}: repaired on open: {report}");
        }
        server
            .run(shutdown_signal())
            .await
            .map_err(|e| CliError::Usage(e.to_string()))?;
        eprintln!("mirrorlog serve: stopped cleanly");
        Ok(())
    })
}

/// The log on stderr: what `serve`'s mirror links do, one line per state change or error, at `info` unless
/// `MIRRORLOG_LOG` says otherwise (`tracing`'s filter syntax, e.g. `warn` or `node=debug`); a filter that does not
/// parse is refused, not ignored.
fn install_log() -> Result<(), CliError> {
    let filter = match std::env::var("MIRRORLOG_LOG") {
        Ok(spec) => tracing_subscriber::EnvFilter::try_new(&spec)
            .map_err(|e| CliError::Usage(format!("MIRRORLOG_LOG={spec:?} is not a log filter: {e}")))?,
        Err(std::env::VarError::NotPresent) => tracing_subscriber::EnvFilter::new("info"),
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(CliError::Usage("MIRRORLOG_LOG is not valid UTF-8".to_owned()))
        }
    };
    // A subscriber already installed (a second `serve` in one process, as tests may run) keeps its own.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .try_init();
    Ok(())
}

async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

/// The listeners with their advertised addresses: `--advertised-listener PROTOCOL://HOST:PORT` names its
/// listener; a bare HOST:PORT is the first listener's.
fn listeners(args: &ServeArgs) -> Result<Vec<ListenerConfig>, CliError> {
    let mut listeners = args.listeners.clone();
    for (protocol, host, port) in &args.advertised_listeners {
        let listener = match protocol {
            None => listeners.first_mut(),
            Some(protocol) => listeners
                .iter_mut()
                .find(|listener| listener.protocol == *protocol),
        };
        let listener = listener.ok_or_else(|| {
            CliError::Usage(format!(
                "--advertised-listener {}://{host}:{port} names no --listen of that protocol",
                protocol.map_or("PLAINTEXT", SecurityProtocol::name)
            ))
        })?;
        if listener.advertised.is_some() {
            return Err(CliError::Usage(format!(
                "two --advertised-listener for the {} listener",
                listener.protocol
            )));
        }
        listener.advertised = Some((host.clone(), *port));
    }
    Ok(listeners)
}

/// `--advertised-listener [PROTOCOL://]HOST:PORT`: a host name (no colon) and a port.
fn parse_advertised(text: &str) -> Result<(Option<SecurityProtocol>, String, u16), String> {
    let protocol = text.contains("://").then_some(());
    let (parsed, host, port) = broker::listener::split_listener_url(text)?;
    if host.is_empty() || host.contains(':') {
        return Err(format!(
            "{text:?}: expected HOST:PORT with a host name or IPv4 address"
        ));
    }
    if port == 0 {
        return Err(format!("{text:?}: the port must be 1..=65535"));
    }
    Ok((protocol.map(|()| parsed), host, port))
}
