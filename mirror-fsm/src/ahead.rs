//! Fetching ahead while catching up: the next range is fetched and CRC-checked on another thread while the
//! current one is written (ADR 0020).
//!
//! A destination far behind its source spends its time in three steps per fetched megabyte: reading it, checking
//! every batch's CRC-32C (Kafka checks each batch a follower appends), and writing it. One after another on one
//! thread, reading and checking alone keep a copy far below 0.8× of a plain file copy. With a backlog (the last
//! fetch came back at least [`FETCH_AHEAD_BYTES`] long) the driver starts fetching range *n+1* as soon as it
//! knows where *n* ends, on a thread that then checks its CRCs, and writes *n* meanwhile. The check is the same;
//! only where it runs changes. A fetcher that cannot fetch off its thread ([`Fetcher::detached_fetch`] is
//! `None`: the simulator's) is fetched on the caller's thread and only the check moves. Nothing is fetched ahead
//! for a partition that is caught up, so a small fetch runs exactly as before: fetch, check, append, on the
//! caller's thread.
//!
//! The check of a range fetched ahead is shared ([`SharedCrcCheck`], ADR 0021): the fetching thread hands the
//! range over as soon as it has read it and starts checking; when the caller comes for the range (done writing the
//! one before), it checks whatever is left instead of waiting. Whichever thread is slower that moment gets help:
//! a two-thread copy that splits the check this way makes about 0.9–1.0× a one-thread raw copy on this machine,
//! one that checks on the reading thread only about 0.75× (`mirror-copy-floor` in `cargo xtask bench`).
//!
//! A range fetched ahead is used only if the log ends where it starts when its turn comes; otherwise (the append
//! before it failed, or the machine left MIRRORING) it is dropped. A fetch ahead that fails is dropped too: the
//! next round fetches the same range on the caller's thread and reports what happens then.

use std::sync::Arc;

use record_format::{BatchBuffers, CrcCheckedBatches, SharedCrcCheck};
use tokio::sync::oneshot;

use crate::driver::FETCH_BYTES;
use crate::fetcher::{FetchResponse, Fetcher};
use crate::machine::Event;

/// A fetch at least this long means a backlog: the next range is fetched ahead.
pub const FETCH_AHEAD_BYTES: usize = FETCH_BYTES / 2;

type Job = Box<dyn FnOnce() + Send>;

/// The thread that fetches ahead for one catch-up: started by its first fetch ahead, it ends when the catch-up
/// drops this handle (its queue of jobs closes) and the job it runs, if any, is done. One thread for a whole
/// catch-up, not one per range: its allocations (the fetched megabytes) reuse the same memory.
#[derive(Debug, Default)]
pub(crate) struct AheadThread {
    jobs: Option<std::sync::mpsc::Sender<Job>>,
}

impl AheadThread {
    /// Queues `job`, starting the thread first if needed; false if no thread runs it.
    fn run(&mut self, job: Job) -> bool {
        if self.jobs.is_none() {
            let (jobs, queue) = std::sync::mpsc::channel::<Job>();
            let started = std::thread::Builder::new()
                .name("mirror-fetch-ahead".to_owned())
                .spawn(move || queue.into_iter().for_each(|job| job()));
            if started.is_err() {
                return false;
            }
            self.jobs = Some(jobs);
        }
        let sent = self.jobs.as_ref().is_some_and(|jobs| jobs.send(job).is_ok());
        if !sent {
            self.jobs = None;
        }
        sent
    }
}

/// A range being fetched (or already fetched) and CRC-checked on the [`AheadThread`].
#[derive(Debug)]
pub(crate) struct Ahead {
    from_offset: i64,
    /// The fetched range, its check under way; `None` when the fetch failed (fetched again on the caller's
    /// thread).
    answer: oneshot::Receiver<Option<Fetched>>,
}

/// A range fetched ahead, handed over while its CRCs are being checked.
#[derive(Debug)]
struct Fetched {
    source_cluster_id: String,
    check: Arc<SharedCrcCheck>,
    buffers: BatchBuffers,
}

impl Fetched {
    /// The fetched range with a check nobody has started.
    fn of(response: FetchResponse) -> Fetched {
        Fetched {
            source_cluster_id: response.source_cluster_id,
            check: SharedCrcCheck::new(response.batches),
            buffers: response.buffers,
        }
    }

    /// Hands the range over through `reply`, then checks until the caller has taken the rest of the check (or
    /// none is left).
    fn hand_over_and_check(self, reply: oneshot::Sender<Option<Fetched>>) {
        let check = Arc::clone(&self.check);
        // The receiver may be gone (the catch-up ended); the check is then not needed.
        if reply.send(Some(self)).is_ok() {
            check.help();
        }
    }
}

impl Ahead {
    /// Starts fetching from `from_offset` on `thread`, which then checks the CRCs of what came — or, for a fetcher
    /// that cannot fetch off its thread ([`Fetcher::detached_fetch`]) or outside a tokio runtime, fetches here and
    /// checks there. `None` when nothing is under way (the fetch here failed or brought nothing, or the thread
    /// could not be started): the next round fetches on the caller's thread.
    pub(crate) async fn start(
        fetcher: &mut dyn Fetcher,
        from_offset: i64,
        thread: &mut AheadThread,
    ) -> Option<Ahead> {
        let (reply, answer) = oneshot::channel();
        let detached = fetcher.detached_fetch(from_offset, FETCH_BYTES);
        let job: Job = match (detached, tokio::runtime::Handle::try_current()) {
            (Some(fetch), Ok(runtime)) => Box::new(move || match runtime.block_on(fetch) {
                Ok(response) => Fetched::of(response).hand_over_and_check(reply),
                Err(_) => {
                    let _ = reply.send(None);
                }
            }),
            _ => {
                let response = fetcher.fetch(from_offset, FETCH_BYTES).await.ok()?;
                if response.batches.is_empty() {
                    return None;
                }
                let fetched = Fetched::of(response);
                Box::new(move || fetched.hand_over_and_check(reply))
            }
        };
        thread.run(job).then_some(Ahead { from_offset, answer })
    }

    /// Where the range starts.
    pub(crate) fn starts_at(&self) -> i64 {
        self.from_offset
    }

    /// The fetch as the machine's event, once fetched and checked — the caller checking what the fetching
    /// thread has not yet (a wait of a chunk at most for the one that thread is checking); `None` if the fetch
    /// failed (or its thread ended without an answer): the caller fetches the range again itself and reports
    /// what happens then.
    pub(crate) async fn into_event(self) -> Option<Event> {
        let fetched = self.answer.await.ok().flatten()?;
        Some(Event::Fetched {
            source_cluster_id: fetched.source_cluster_id,
            batches: fetched
                .check
                .finish()
                .map(|checked| checked.with_buffers(fetched.buffers)),
        })
    }
}

/// A fetch's response with its CRCs checked, as the machine's event.
pub(crate) fn checked(response: FetchResponse) -> Event {
    Event::Fetched {
        source_cluster_id: response.source_cluster_id,
        batches: CrcCheckedBatches::check(response.batches)
            .map(|checked| checked.with_buffers(response.buffers)),
    }
}
