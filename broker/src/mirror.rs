//! The node's mirror links at work in `serve`, and their administration on the Kafka port.
//!
//! [`MirrorService`] runs `node::mirror::MirrorLinks` on a thread of its own (a mirror `Fetcher` need not be
//! `Send`): it steps the links — one fetch round per mirrored partition, sources reached over the Kafka protocol
//! with `mirror-link`, one Fetch per source broker for all its partitions — and answers administration requests
//! between steps, so an action never races a fetch. Rounds stay in flight (ADR 0049): each source's round is a
//! task on the runtime's worker thread beside the links' thread, and a step applies only the rounds that have
//! landed, so a slow or dead source delays neither another link nor an administration request. The service steps
//! when a round lands, at once after a step that wrote, and at least every [`MAX_IDLE`] (FAILED partitions'
//! retries fall due). A round waits at the source up to [`MAX_IDLE`] for data (a long poll, holding no partition);
//! a failing source's partitions back off in their machines.
//!
//! **Wire form** (ADR 0040, the contract in `mirror-admin`, ADR 0061): a request on the private API key
//! [`MIRROR_ADMIN_API_KEY`], version 0, request header v1 (key, version, correlation id, client id), whose body is
//! one JSON `AdminRequest`; the answer is the correlation id followed by one JSON `AdminResponse`. The key is not
//! advertised in ApiVersions; a Kafka broker that does not know it closes the connection, which `mirrorlog
//! mirror` (`mirror_link::admin::call`) reports as "not a mirrorlog broker".

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use mirror_fsm::Sources;
use node::mirror::{AdminRequest, AdminResponse, MirrorLinks, SourceAnswer};
use node::Node;
use tokio::sync::{mpsc, oneshot, watch};

use crate::authorize::Access;
use crate::frame::Request;

/// The private API key of mirror administration and its only version (defined where links ask peers too).
pub use mirror_admin::{MIRROR_ADMIN_API_KEY, MIRROR_ADMIN_VERSION};

/// How long a round waits at the source for data, and the longest pause between two steps.
pub const MAX_IDLE: Duration = Duration::from_millis(50);

/// The pause when no partition is fetching at all.
const NOTHING_TO_FETCH: Duration = Duration::from_millis(200);

/// Administration requests waiting for the service.
const COMMAND_QUEUE: usize = 64;

/// An administration request and where its answer goes.
struct Command {
    request: AdminRequest,
    reply: oneshot::Sender<AdminResponse>,
}

/// The mirror links' thread; see the module docs.
#[derive(Debug)]
pub struct MirrorService {
    commands: mpsc::Sender<Command>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Set at shutdown: a `promote` waiting for the lag gives up (`MirrorLinks::watch_shutdown`).
    shutting_down: Arc<AtomicBool>,
}

impl MirrorService {
    /// Starts the thread: it opens the links recorded on `node` (resuming them) and serves until `stopped`. The
    /// links compare their topics with the source's every `metadata_refresh`; `stopping_pause` is a test fault
    /// (`Faults::stopping_step_pause`).
    pub fn start(
        node: Arc<Node>,
        sources: Arc<dyn Sources>,
        metadata_refresh: Duration,
        stopping_pause: Option<Duration>,
        stopped: watch::Receiver<bool>,
    ) -> std::io::Result<Self> {
        let (commands, receiver) = mpsc::channel(COMMAND_QUEUE);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("mirror-fetch")
            .enable_all()
            .build()?;
        let shutting_down = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&shutting_down);
        let thread = std::thread::Builder::new()
            .name("mirror-links".to_owned())
            .spawn(move || {
                runtime.block_on(serve(
                    node,
                    sources,
                    metadata_refresh,
                    stopping_pause,
                    flag,
                    receiver,
                    stopped,
                ))
            })?;
        Ok(MirrorService {
            commands,
            thread: Some(thread),
            shutting_down,
        })
    }

    /// Answers an administration request (an error answer when the service has stopped).
    pub async fn handle(&self, request: AdminRequest) -> AdminResponse {
        let (reply, answer) = oneshot::channel();
        if self.commands.send(Command { request, reply }).await.is_err() {
            return AdminResponse::failed("storage", "the mirror service has stopped", Vec::new());
        }
        answer.await.unwrap_or_else(|_| {
            AdminResponse::failed("storage", "the mirror service has stopped", Vec::new())
        })
    }

    /// Tells an action that waits (a `promote`) to give up: the broker is stopping.
    pub fn shut_down(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
    }

    /// Waits for the thread to end (after the stop signal its caller sent); a `promote` still waiting gives up.
    pub async fn join(mut self) {
        self.shut_down();
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

async fn serve(
    node: Arc<Node>,
    sources: Arc<dyn Sources>,
    metadata_refresh: Duration,
    stopping_pause: Option<Duration>,
    shutting_down: Arc<AtomicBool>,
    mut commands: mpsc::Receiver<Command>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut links = match MirrorLinks::open(&node, sources).await {
        Ok(mut links) => {
            links.set_rounds_in_flight(true);
            links.set_source_topic_check_interval_ms(Some(
                i64::try_from(metadata_refresh.as_millis()).unwrap_or(i64::MAX),
            ));
            links.pause_between_stopping_steps(stopping_pause);
            links.watch_shutdown(shutting_down);
            Ok(links)
        }
        Err(error) => {
            eprintln!("mirrorlog serve: cannot open the mirror links: {error}");
            Err(error.to_string())
        }
    };
    let landed = links.as_ref().ok().map(MirrorLinks::landed);
    // A `create` or `reverse` asks its source in a task of its own and comes back here with the answer: a slow or
    // silent source holds up no other link meanwhile.
    let (described, mut answered) = mpsc::unbounded_channel::<(Command, SourceAnswer)>();
    // When the next step is due: set after each step, so administration requests answered meanwhile never
    // push it back.
    let mut next_step = tokio::time::Instant::now();
    loop {
        tokio::select! {
            biased;
            _ = stopped.changed() => return,
            command = commands.recv() => {
                let Some(command) = command else { return };
                let answer = match &mut links {
                    Ok(links) => match links.source_question(&command.request) {
                        Some(question) => {
                            let described = described.clone();
                            tokio::spawn(async move {
                                let answer = question.ask().await;
                                let _ = described.send((command, SourceAnswer::Given(answer)));
                            });
                            continue;
                        }
                        None => links.handle(&node, command.request).await,
                    },
                    Err(error) => not_opened(error),
                };
                let _ = command.reply.send(answer);
            }
            Some((command, answer)) = answered.recv() => {
                let answer = match &mut links {
                    Ok(links) => links.handle_answered(&node, command.request, answer).await,
                    Err(error) => not_opened(error),
                };
                let _ = command.reply.send(answer);
            }
            // A round or probe landed: step now.
            () = async {
                match &landed {
                    Some(landed) => landed.notified().await,
                    None => std::future::pending().await,
                }
            } => next_step = step(&node, &mut links).await,
            // A step due now does not go through the timer (its 1 ms granularity would cost every round a tick).
            () = async {
                if next_step > tokio::time::Instant::now() {
                    tokio::time::sleep_until(next_step).await;
                }
            } => next_step = step(&node, &mut links).await,
        }
    }
}

/// The answer to every request while the links could not be opened.
fn not_opened(error: &str) -> AdminResponse {
    AdminResponse::failed(
        "storage",
        format!("the mirror links could not be opened: {error}"),
        Vec::new(),
    )
}

/// One step of the links (rounds in flight: it applies what landed and never waits for a source); when the
/// next is due: at once after a step that wrote (more may be waiting), after [`MAX_IDLE`] otherwise (FAILED
/// partitions' retries fall due meanwhile; a landing steps sooner), after [`NOTHING_TO_FETCH`] when nothing
/// fetches or retries.
async fn step(node: &Node, links: &mut Result<MirrorLinks, String>) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    let Ok(links) = links else {
        return now + Duration::from_secs(3600);
    };
    if links.step(node).await > 0 {
        now
    } else if links.is_idle() {
        now + NOTHING_TO_FETCH
    } else {
        now + MAX_IDLE
    }
}

/// Why an administration request closes its connection.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// A version other than 0.
    #[error("mirror administration version {0} is not supported (0 is)")]
    UnsupportedVersion(i16),
    /// The body is not an administration request.
    #[error("malformed mirror administration request: {0}")]
    Malformed(String),
    /// The answer does not fit in a frame.
    #[error("the mirror administration answer of {0} bytes does not fit in a frame")]
    AnswerTooLarge(usize),
}

/// Answers one administration request frame: the response frame (size, correlation id, JSON).
pub async fn answer(
    service: &MirrorService,
    request: &Request,
    access: &Access,
) -> Result<Bytes, AdminError> {
    if request.version != MIRROR_ADMIN_VERSION {
        return Err(AdminError::UnsupportedVersion(request.version));
    }
    let admin = mirror_admin::decode_request(&request.body)
        .map_err(|error| AdminError::Malformed(error.to_string()))?;
    let response = match crate::authorize::admin::mirror(access, &admin) {
        Some(refused) => refused,
        None => service.handle(admin).await,
    };
    let json =
        mirror_admin::encode_answer(&response).map_err(|error| AdminError::Malformed(error.to_string()))?;
    let size = i32::try_from(4 + json.len()).map_err(|_| AdminError::AnswerTooLarge(json.len()))?;
    let mut frame = BytesMut::with_capacity(8 + json.len());
    frame.put_i32(size);
    frame.put_i32(request.correlation_id);
    frame.put_slice(&json);
    Ok(frame.freeze())
}
