//! The server: the accept loop, one task per connection answering its requests strictly in order (a long-poll
//! fetch holds back the requests behind it, as in Kafka, where a connection has one request in flight), the
//! housekeeping task, and graceful shutdown.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use node::Node;

use crate::api::{self, Reply};
use crate::frame::{parse_request, read_frame};
use crate::mirror::{MirrorService, MIRROR_ADMIN_API_KEY};
use crate::{BrokerConfig, BrokerError};

/// How long the accept loop waits after a failed accept (out of descriptors) before it tries again.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Linux's "too many open files" error number.
const EMFILE: i32 = 24;

/// A failed accept is logged at most once per this interval.
const ACCEPT_ERROR_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// A bound, opened broker, ready to serve.
pub struct Server {
    listener: TcpListener,
    config: Arc<BrokerConfig>,
    node: Arc<Node>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("node", &self.node).finish()
    }
}

impl Server {
    /// Binds the listen address and opens the broker's storage (recovering it).
    pub async fn bind(config: BrokerConfig) -> Result<Self, BrokerError> {
        let storage = config.node.storage.open()?;
        Self::bind_on(config, storage).await
    }

    /// Like [`Self::bind`], over a store the caller opened (see [`Node::open_on`]).
    pub async fn bind_on(
        config: BrokerConfig,
        storage: Box<dyn storage::Storage>,
    ) -> Result<Self, BrokerError> {
        let address = config.listen;
        let listener = TcpListener::bind(address)
            .await
            .map_err(|source| BrokerError::Listen { address, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| BrokerError::Listen { address, source })?;
        let advertised = config
            .advertised
            .clone()
            .unwrap_or_else(|| (local.ip().to_string(), local.port()));
        let node = Node::open_on(
            config.node.clone(),
            (advertised.0, i32::from(advertised.1)),
            storage,
            Arc::new(node::SystemClock),
        )
        .await?;
        Ok(Server {
            listener,
            config: Arc::new(config),
            node: Arc::new(node),
        })
    }

    /// The node it serves (shared with its mirror links and connections).
    pub fn node(&self) -> &Arc<Node> {
        &self.node
    }

    /// The address it listens on (the port chosen when the config said 0).
    pub fn local_addr(&self) -> Result<SocketAddr, BrokerError> {
        let address = self.config.listen;
        self.listener
            .local_addr()
            .map_err(|source| BrokerError::Listen { address, source })
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
        let drop_counter = Arc::new(AtomicU64::new(0));
        tokio::pin!(shutdown);
        let mut last_accept_error = None;
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _peer)) => {
                        let _ = stream.set_nodelay(true);
                        connections.spawn(serve_connection(
                            self.node.clone(),
                            self.config.clone(),
                            stream,
                            stopped.clone(),
                            drop_counter.clone(),
                            mirror.clone(),
                        ));
                    }
                    Err(error) => {
                        // Out of descriptors (EMFILE) or memory: say so, and wait instead of spinning on a
                        // listener that fails at once.
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
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        drop(self.listener);
        let _ = stop.send(true);
        // A connection waiting for an administration answer (a promote) must not hold the shutdown back.
        mirror.shut_down();
        // Nor a JoinGroup waiting for a rebalance.
        self.node.close_groups();
        while connections.join_next().await.is_some() {}
        let _ = housekeeping.await;
        let _ = group_timers.await;
        let _ = retention.await;
        let _ = cleaner.await;
        if let Some(mirror) = Arc::into_inner(mirror) {
            mirror.join().await;
        }
        Ok(self.node.close().await?)
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

/// Serves one connection's requests in order until it closes, a request cannot be read, or the server stops.
async fn serve_connection(
    node: Arc<Node>,
    config: Arc<BrokerConfig>,
    mut stream: TcpStream,
    mut stopped: watch::Receiver<bool>,
    drop_counter: Arc<AtomicU64>,
    mirror: Arc<MirrorService>,
) {
    let max = config.max_request_bytes;
    let peer = stream.peer_addr().ok().map(|address| address.ip());
    loop {
        let frame = tokio::select! {
            frame = read_frame(&mut stream, max) => frame,
            _ = stopped.changed() => return,
        };
        let request = match frame.and_then(|frame| frame.map(parse_request).transpose()) {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(error) => {
                eprintln!("mirrorlog serve: closing a connection: {error}");
                return;
            }
        };
        if request.api_key == MIRROR_ADMIN_API_KEY {
            match crate::mirror::answer(&mirror, &request).await {
                Ok(response) => {
                    if stream.write_all(&response).await.is_err() {
                        return;
                    }
                }
                Err(error) => {
                    eprintln!("mirrorlog serve: closing a connection: {error}");
                    return;
                }
            }
            continue;
        }
        match api::handle_from(&node, &request, peer).await {
            Ok(Reply::Frame(response)) => {
                if request.api_key == 0 && drop_this_response(&config, &drop_counter) {
                    // Test fault: the records are appended, the acknowledgement is lost.
                    eprintln!("mirrorlog serve: fault: dropped a produce response");
                    return;
                }
                if stream.write_all(&response).await.is_err() {
                    return;
                }
            }
            Ok(Reply::Nothing) => {}
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
