//! The server: one accept task per listener, one task per connection (a TLS handshake and a SASL exchange first,
//! where the listener asks for them) answering its requests strictly in order (a long-poll
//! fetch holds back the requests behind it, as in Kafka, where a connection has one request in flight), the
//! housekeeping task, and graceful shutdown.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use std::time::Duration;

use kafka_auth::Principal;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use node::{Endpoint, Node};

use crate::api::{self, Caller, Reply};
use crate::frame::{parse_request, read_frame, read_sasl_token};
use crate::listener::SecurityProtocol;
use crate::metrics::errors::ErrorCounts;
use crate::metrics::BrokerMetrics;
use crate::mirror::{MirrorService, MIRROR_ADMIN_API_KEY};
use crate::sasl::{self, SaslExchange, MAX_RECEIVE_BEFORE_AUTHENTICATION};
use crate::{BrokerConfig, BrokerError};

/// How long the accept loop waits after a failed accept (out of descriptors) before it tries again.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Linux's "too many open files" error number.
const EMFILE: i32 = 24;

/// A failed accept is logged at most once per this interval.
const ACCEPT_ERROR_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// One bound listener.
struct BoundListener {
    socket: TcpListener,
    /// The address bound (the port chosen when the config said 0).
    local: SocketAddr,
    context: Arc<ListenerContext>,
}

/// What a connection needs to know about the listener it came in on.
struct ListenerContext {
    protocol: SecurityProtocol,
    /// What Metadata, DescribeCluster and FindCoordinator answer on this listener.
    endpoint: Endpoint,
    /// The TLS acceptor of SSL and SASL_SSL listeners.
    tls: Option<TlsAcceptor>,
}

/// A bound, opened broker, ready to serve.
pub struct Server {
    listeners: Vec<BoundListener>,
    config: Arc<BrokerConfig>,
    node: Arc<Node>,
    /// What the request path counts (served when `metrics_listener` is bound).
    metrics: Arc<BrokerMetrics>,
    /// The Prometheus endpoint's socket, and the address it bound.
    metrics_listener: Option<(TcpListener, SocketAddr)>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("node", &self.node).finish()
    }
}

impl Server {
    /// Binds the listeners and opens the broker's storage (recovering it).
    pub async fn bind(config: BrokerConfig) -> Result<Self, BrokerError> {
        let storage = config.node.storage.open()?;
        Self::bind_on(config, storage).await
    }

    /// Like [`Self::bind`], over a store the caller opened (see [`Node::open_on`]).
    pub async fn bind_on(
        config: BrokerConfig,
        storage: Box<dyn storage::Storage>,
    ) -> Result<Self, BrokerError> {
        let tls = check_listeners(&config)?;
        let mut listeners = Vec::with_capacity(config.listeners.len());
        for listener in &config.listeners {
            let (socket, local) = bind_socket(listener.bind).await?;
            let (host, port) = listener
                .advertised
                .clone()
                .unwrap_or_else(|| (local.ip().to_string(), local.port()));
            listeners.push(BoundListener {
                socket,
                local,
                context: Arc::new(ListenerContext {
                    protocol: listener.protocol,
                    endpoint: Endpoint {
                        host,
                        port: i32::from(port),
                    },
                    tls: listener
                        .protocol
                        .tls()
                        .then(|| tls.clone().map(TlsAcceptor::from))
                        .flatten(),
                }),
            });
        }
        let first = listeners
            .first()
            .map(|listener| listener.context.endpoint.clone())
            .ok_or_else(|| BrokerError::Listeners("no listener".to_owned()))?;
        let metrics_listener = match config.metrics_listen {
            Some(address) => Some(bind_socket(address).await?),
            None => None,
        };
        let node = Node::open_on(
            config.node.clone(),
            (first.host, first.port),
            storage,
            Arc::new(node::SystemClock),
        )
        .await?;
        Ok(Server {
            listeners,
            config: Arc::new(config),
            node: Arc::new(node),
            metrics: Arc::new(BrokerMetrics::default()),
            metrics_listener,
        })
    }

    /// The address the metrics endpoint bound (`None`: no `metrics_listen`).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener.as_ref().map(|(_, local)| *local)
    }

    /// The node it serves (shared with its mirror links and connections).
    pub fn node(&self) -> &Arc<Node> {
        &self.node
    }

    /// The address of the first listener (the port chosen when the config said 0).
    pub fn local_addr(&self) -> Result<SocketAddr, BrokerError> {
        self.listeners
            .first()
            .map(|listener| listener.local)
            .ok_or_else(|| BrokerError::Listeners("no listener".to_owned()))
    }

    /// The address of the listener of `protocol`, if there is one.
    pub fn listener_addr(&self, protocol: SecurityProtocol) -> Option<SocketAddr> {
        self.listeners
            .iter()
            .find(|listener| listener.context.protocol == protocol)
            .map(|listener| listener.local)
    }

    /// Serves until `shutdown` resolves, then stops accepting, lets each connection finish the request it is
    /// serving, and closes every log cleanly.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) -> Result<(), BrokerError> {
        let (stop, stopped) = watch::channel(false);
        let mut connections = JoinSet::new();
        // Timed-out transactions, idle ids and producers, the offset log's rewrite.
        let housekeeping = tokio::spawn(periodic(
            self.node.clone(),
            self.config.housekeeping_interval,
            FirstRun::AtStart,
            "housekeeping",
            stopped.clone(),
            |node| async move { node.housekeeping().await },
        ));
        let group_timers = tokio::spawn(group_timers(self.node.clone(), stopped.clone()));
        // Retention (`log.retention.check.interval.ms`) and the log cleaner (`log.cleaner.backoff.ms`); what they
        // delete and what fails are logged by the node.
        let retention = tokio::spawn(periodic(
            self.node.clone(),
            self.config.retention_check_interval,
            FirstRun::AfterOneInterval,
            "retention",
            stopped.clone(),
            |node| async move { node.apply_retention().await.map(drop) },
        ));
        let cleaner = tokio::spawn(periodic(
            self.node.clone(),
            self.config.cleaner_backoff,
            FirstRun::AfterOneInterval,
            "compaction",
            stopped.clone(),
            |node| async move { node.compact_topics().await.map(drop) },
        ));
        let mirror = Arc::new(
            MirrorService::start(
                self.node.clone(),
                self.mirror_sources(),
                self.config.mirror_metadata_refresh,
                self.config.faults.stopping_step_pause,
                stopped.clone(),
            )
            .map_err(BrokerError::MirrorThread)?,
        );
        let scrapes = self.metrics_listener.map(|(socket, _)| {
            let scraped = crate::metrics::http::Scraped {
                metrics: self.metrics.clone(),
                node: self.node.clone(),
                mirror: mirror.clone(),
            };
            tokio::spawn(crate::metrics::http::serve(socket, scraped, stopped.clone()))
        });
        let drop_counter = Arc::new(AtomicU64::new(0));
        // One accept task per listener; the connections they accept are served here, so that shutdown waits for
        // every one.
        let (accepted_tx, mut accepted) = mpsc::channel(ACCEPT_QUEUE);
        let mut acceptors = JoinSet::new();
        for listener in self.listeners {
            acceptors.spawn(accept_loop(listener, accepted_tx.clone(), stopped.clone()));
        }
        drop(accepted_tx);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                Some((stream, listener)) = accepted.recv() => {
                    connections.spawn(open_connection(
                        Connection {
                            node: self.node.clone(),
                            config: self.config.clone(),
                            listener,
                            stopped: stopped.clone(),
                            drop_counter: drop_counter.clone(),
                            mirror: mirror.clone(),
                            metrics: self.metrics.clone(),
                        },
                        stream,
                    ));
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        let _ = stop.send(true);
        // Closed first, so that an accept task waiting for room in it stops too.
        drop(accepted);
        while acceptors.join_next().await.is_some() {}
        // A connection waiting for an administration answer (a promote) must not hold the shutdown back.
        mirror.shut_down();
        // Nor a JoinGroup waiting for a rebalance, nor a compaction pass paused by its I/O limit.
        self.node.close_groups();
        self.node.stop_compaction();
        while connections.join_next().await.is_some() {}
        let _ = housekeeping.await;
        let _ = group_timers.await;
        let _ = retention.await;
        let _ = cleaner.await;
        if let Some(scrapes) = scrapes {
            let _ = scrapes.await;
        }
        if let Some(mirror) = Arc::into_inner(mirror) {
            mirror.join().await;
        }
        Ok(self.node.close().await?)
    }
}

/// A socket bound to `address`, and the address it bound (the port chosen when `address` said 0).
async fn bind_socket(address: SocketAddr) -> Result<(TcpListener, SocketAddr), BrokerError> {
    let socket = TcpListener::bind(address)
        .await
        .map_err(|source| BrokerError::Listen { address, source })?;
    let local = socket
        .local_addr()
        .map_err(|source| BrokerError::Listen { address, source })?;
    Ok((socket, local))
}

/// Refuses listener settings that cannot be honoured, and loads TLS when a listener needs it.
fn check_listeners(config: &BrokerConfig) -> Result<Option<Arc<rustls::ServerConfig>>, BrokerError> {
    let refuse = |reason: String| Err(BrokerError::Listeners(reason));
    if config.listeners.is_empty() {
        return refuse("no listener".to_owned());
    }
    for (index, listener) in config.listeners.iter().enumerate() {
        if config.listeners[..index]
            .iter()
            .any(|other| other.protocol == listener.protocol)
        {
            return refuse(format!(
                "two {} listeners (one listener per security protocol)",
                listener.protocol
            ));
        }
    }
    let wants_tls = config.listeners.iter().any(|listener| listener.protocol.tls());
    let wants_sasl = config.listeners.iter().any(|listener| listener.protocol.sasl());
    if wants_sasl && config.sasl_mechanisms.is_empty() {
        return refuse("a SASL listener with no SASL mechanism enabled".to_owned());
    }
    match (&config.tls, wants_tls) {
        (Some(tls), true) => Ok(Some(tls.server_config()?)),
        (None, false) => Ok(None),
        (None, true) => refuse("an SSL or SASL_SSL listener needs a TLS certificate and key".to_owned()),
        (Some(_), false) => refuse("a TLS certificate is set but no listener is SSL or SASL_SSL".to_owned()),
    }
}

/// How many accepted connections may wait to be started (the accept tasks wait when it is full).
const ACCEPT_QUEUE: usize = 128;

/// Accepts connections on one listener until the server stops.
async fn accept_loop(
    listener: BoundListener,
    accepted: mpsc::Sender<(TcpStream, Arc<ListenerContext>)>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut last_accept_error = None;
    loop {
        tokio::select! {
            _ = stopped.changed() => return,
            result = listener.socket.accept() => match result {
                Ok((stream, _peer)) => {
                    let _ = stream.set_nodelay(true);
                    if accepted.send((stream, listener.context.clone())).await.is_err() {
                        return;
                    }
                }
                Err(error) => {
                    // Out of descriptors (EMFILE) or memory: say so, and wait instead of spinning on a listener
                    // that fails at once.
                    let now = std::time::Instant::now();
                    if last_accept_error.is_none_or(|at: std::time::Instant| now - at >= ACCEPT_ERROR_LOG_INTERVAL) {
                        let hint = if error.raw_os_error() == Some(EMFILE) {
                            " (the process's open-file limit: raise `ulimit -n`)"
                        } else {
                            ""
                        };
                        eprintln!("mirrorlog serve: cannot accept a connection: {error}{hint}");
                        last_accept_error = Some(now);
                    }
                    tokio::time::sleep(ACCEPT_RETRY).await;
                }
            },
        }
    }
}

impl Server {
    /// The sources mirror links fetch from: any Kafka-compatible cluster, over the protocol, all the partitions
    /// of a source in one Fetch per source broker, waiting at the source up to [`crate::mirror::MAX_IDLE`] for
    /// data (no partition is locked while a round waits).
    fn mirror_sources(&self) -> Arc<dyn mirror_fsm::Sources> {
        let mut fetcher = mirror_link::FetcherConfig::new("");
        fetcher.client_id = format!("mirrorlog-mirror-{}", self.node.config().cluster_id);
        fetcher.max_wait = crate::mirror::MAX_IDLE;
        // KIP-1279's one refresh interval: partitions added at the source, and the brokers and leaders it names.
        fetcher.metadata_max_age = self.config.mirror_metadata_refresh;
        Arc::new(mirror_link::KafkaSources::new(fetcher))
    }
}

/// When a periodic task first runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FirstRun {
    /// At start-up.
    AtStart,
    /// One interval after start-up (Kafka's log manager starts retention and the cleaner so).
    AfterOneInterval,
}

/// Runs `job` on `node` every `every` until the server stops (a run that overruns delays the next, none is
/// skipped in a burst); a failure is written to stderr as `what failed: …` and the task goes on.
async fn periodic<F>(
    node: Arc<Node>,
    every: Duration,
    first: FirstRun,
    what: &'static str,
    mut stopped: watch::Receiver<bool>,
    mut job: impl FnMut(Arc<Node>) -> F,
) where
    F: std::future::Future<Output = Result<(), node::NodeError>>,
{
    let start = match first {
        FirstRun::AtStart => tokio::time::Instant::now(),
        FirstRun::AfterOneInterval => tokio::time::Instant::now() + every,
    };
    let mut interval = tokio::time::interval_at(start, every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {
                if let Err(error) = job(node.clone()).await {
                    eprintln!("mirrorlog serve: {what} failed: {error}");
                }
            }
            _ = stopped.changed() => return,
        }
    }
}

/// How often consumer groups' timers are checked (sessions are 6 s at the least).
const GROUP_TIMER_INTERVAL: Duration = Duration::from_millis(100);

/// Consumer groups' timers: expired sessions end, overdue rebalances complete.
async fn group_timers(node: Arc<Node>, mut stopped: watch::Receiver<bool>) {
    let mut interval = tokio::time::interval(GROUP_TIMER_INTERVAL);
    loop {
        tokio::select! {
            _ = interval.tick() => node.tick_groups().await,
            _ = stopped.changed() => return,
        }
    }
}

/// What every connection shares with the server.
struct Connection {
    node: Arc<Node>,
    config: Arc<BrokerConfig>,
    listener: Arc<ListenerContext>,
    stopped: watch::Receiver<bool>,
    drop_counter: Arc<AtomicU64>,
    metrics: Arc<BrokerMetrics>,
    mirror: Arc<MirrorService>,
}

/// How long a connection whose authentication failed waits before it is closed (Kafka's
/// `connection.failed.authentication.delay.ms`: a client retrying at once is slowed down).
const FAILED_AUTHENTICATION_DELAY: Duration = Duration::from_millis(100);

/// Runs the TLS handshake (on SSL and SASL_SSL listeners), then serves the connection.
async fn open_connection(connection: Connection, stream: TcpStream) {
    let _open = connection.metrics.connection_opened();
    let peer = stream.peer_addr().ok().map(|address| address.ip());
    let caller = Caller {
        peer,
        endpoint: connection.listener.endpoint.clone(),
        principal: Principal::anonymous(),
        authorizer: connection.config.authorizer.clone(),
    };
    let Some(acceptor) = connection.listener.tls.clone() else {
        return serve_connection(connection, stream, caller).await;
    };
    let deadline = connection.config.authentication_timeout;
    match tokio::time::timeout(deadline, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => {
            let principal = crate::tls::principal_of(stream.get_ref().1.peer_certificates());
            serve_connection(connection, stream, Caller { principal, ..caller }).await;
        }
        Ok(Err(error)) => log_closed(peer, &format!("TLS handshake failed: {error}")),
        Err(_) => log_closed(peer, &format!("no TLS handshake within {deadline:?}")),
    }
}

fn log_closed(peer: Option<std::net::IpAddr>, reason: &str) {
    match peer {
        Some(peer) => eprintln!("mirrorlog serve: closing a connection from {peer}: {reason}"),
        None => eprintln!("mirrorlog serve: closing a connection: {reason}"),
    }
}

/// Authenticates the connection on a SASL listener (nothing else is served before), then serves its requests in
/// order until it closes, a request cannot be read, or the server stops.
async fn serve_connection<S>(connection: Connection, mut stream: S, mut caller: Caller)
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    if connection.listener.protocol.sasl() {
        let deadline = connection.config.authentication_timeout;
        let mut stopped = connection.stopped.clone();
        let authenticated = tokio::select! {
            result = tokio::time::timeout(deadline, authenticate(&connection, &mut stream, &caller)) => match result {
                Ok(Ok(principal)) => principal,
                Ok(Err(reason)) => return log_closed(caller.peer, &reason),
                Err(_) => return log_closed(caller.peer, &format!("no SASL authentication within {deadline:?}")),
            },
            _ = stopped.changed() => return,
        };
        caller.principal = authenticated;
    }
    serve_requests(connection, stream, caller).await
}

/// Runs the SASL exchange; the principal it authenticated, or why the connection closes.
async fn authenticate<S>(
    connection: &Connection,
    stream: &mut S,
    caller: &Caller,
) -> Result<Principal, String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let node = &connection.node;
    let mut exchange = SaslExchange::new(connection.config.sasl_mechanisms.clone());
    loop {
        let raw = exchange.expects_raw_token();
        let frame = if raw {
            read_sasl_token(stream, MAX_RECEIVE_BEFORE_AUTHENTICATION).await
        } else {
            read_frame(stream, MAX_RECEIVE_BEFORE_AUTHENTICATION).await
        };
        let frame = match frame {
            Ok(Some(frame)) => frame,
            Ok(None) => return Err("the client closed the connection before authenticating".to_owned()),
            Err(error) => return Err(format!("before authentication: {error}")),
        };
        let outcome = if raw {
            exchange.raw_token(node, &frame).await
        } else {
            let request = parse_request(frame).map_err(|error| format!("before authentication: {error}"))?;
            exchange.request(node, &request, caller).await
        };
        match outcome {
            sasl::Outcome::Reply(answer) => send(stream, &answer).await?,
            sasl::Outcome::Authenticated(answer, principal) => {
                if let Some(answer) = answer {
                    send(stream, &answer).await?;
                }
                return Ok(principal);
            }
            sasl::Outcome::Close(answer, reason) => {
                if let Some(answer) = answer {
                    send(stream, &answer).await?;
                    tokio::time::sleep(FAILED_AUTHENTICATION_DELAY).await;
                }
                return Err(reason);
            }
        }
    }
}

/// Writes a frame and flushes it (a TLS stream holds written bytes until flushed).
async fn send<S: AsyncWrite + Unpin>(stream: &mut S, frame: &[u8]) -> Result<(), String> {
    stream.write_all(frame).await.map_err(|error| error.to_string())?;
    stream.flush().await.map_err(|error| error.to_string())
}

/// Serves an open (authenticated, where the listener authenticates) connection's requests in order.
async fn serve_requests<S>(connection: Connection, mut stream: S, caller: Caller)
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let Connection {
        node,
        config,
        mut stopped,
        drop_counter,
        mirror,
        metrics,
        ..
    } = connection;
    let max = config.max_request_bytes;
    loop {
        let frame = tokio::select! {
            frame = read_frame(&mut stream, max) => frame,
            _ = stopped.changed() => return,
        };
        if let Ok(Some(frame)) = &frame {
            metrics.received(frame.len() + 4);
        }
        let started = std::time::Instant::now();
        let request = match frame.and_then(|frame| frame.map(parse_request).transpose()) {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(error) => {
                eprintln!("mirrorlog serve: closing a connection: {error}");
                return;
            }
        };
        if request.api_key == MIRROR_ADMIN_API_KEY {
            let access = crate::authorize::Access::of(&node, &caller).await;
            match crate::mirror::answer(&mirror, &request, &access).await {
                Ok(response) => {
                    if send(&mut stream, &response).await.is_err() {
                        return;
                    }
                    metrics.sent(response.len());
                    metrics.request(
                        request.api_key,
                        request.version,
                        started.elapsed(),
                        &ErrorCounts::default(),
                    );
                }
                Err(error) => {
                    eprintln!("mirrorlog serve: closing a connection: {error}");
                    return;
                }
            }
            continue;
        }
        match api::handle_from(&node, &request, &caller).await {
            Ok(Reply::Frame(response, errors)) => {
                if request.api_key == 0 && drop_this_response(&config, &drop_counter) {
                    // Test fault: the records are appended, the acknowledgement is lost.
                    eprintln!("mirrorlog serve: fault: dropped a produce response");
                    return;
                }
                if send(&mut stream, &response).await.is_err() {
                    return;
                }
                metrics.sent(response.len());
                metrics.request(request.api_key, request.version, started.elapsed(), &errors);
            }
            Ok(Reply::Nothing) => metrics.request(
                request.api_key,
                request.version,
                started.elapsed(),
                &ErrorCounts::default(),
            ),
            Err(error) => {
                eprintln!("mirrorlog serve: closing a connection: {error}");
                return;
            }
        }
    }
}

/// Decides deterministically (a counter through a mixing function) whether this produce response is dropped.
fn drop_this_response(config: &BrokerConfig, counter: &AtomicU64) -> bool {
    let rate = config.faults.drop_produce_responses;
    if rate <= 0.0 {
        return false;
    }
    let n = counter.fetch_add(1, Ordering::Relaxed);
    let mut x = n.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x as f64 / u64::MAX as f64) < rate
}
