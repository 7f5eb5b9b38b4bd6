//! Group commit for a store's flushes: one `Db::flush` at a time, and each caller waits for the first flush that
//! *started* after it asked — so callers that arrive while a flush runs share the next one instead of queueing
//! one flush each.
//!
//! A key-value database's sync is database-wide (sled writes out its log up to the last reserved position;
//! RocksDB syncs its write-ahead log), so one sync covers every partition's writes applied before it began.
//! Concurrent producers on different partitions of one store therefore share a sync instead of queueing one
//! each, and so do the many partitions a failover stops at once, each syncing its metadata several times
//! (docs/benchmarks.md, thirteenth session: on sled, 4,000 flushes for 500 partitions became a few hundred).
//!
//! A failed flush is returned to every caller it was to cover and to every later caller of this store: after a
//! failed flush the store cannot say what is durable (the partition layer poisons the store on the first such
//! error, and sled keeps a write-out error as its database's global error). Opening the directory again, as a
//! new store, starts afresh.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// The flushes of one store; see the module docs.
#[derive(Debug, Default)]
pub struct FlushGroup {
    state: Mutex<FlushState>,
    finished: Condvar,
}

#[derive(Debug, Default)]
struct FlushState {
    /// Flushes started so far; the one running, if any, is number `started`.
    started: u64,
    /// The number of the last flush that finished (flushes finish in the order they start: one runs at a time).
    finished: u64,
    /// A flush (number `started`) is running.
    running: bool,
    /// Callers waiting for a flush to finish.
    waiting: usize,
    /// Why a flush failed, once one has.
    failure: Option<String>,
}

impl FlushGroup {
    fn lock(&self) -> MutexGuard<'_, FlushState> {
        // The state stays consistent across a panic in `flush` (`RunningFlush` ends it as a failure).
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Returns once a flush that started after this call has finished: by running `flush` itself when none is
    /// running, or by waiting for the one that is and then for the next. Every write the caller applied before
    /// calling is covered.
    pub fn sync<E>(&self, flush: impl FnOnce() -> Result<(), E>) -> Result<(), String>
    where
        E: std::fmt::Display,
    {
        let mut state = self.lock();
        // A flush running now may have started before the caller's writes; the next one to start cannot have.
        let covering = state.started + 1;
        loop {
            if let Some(failure) = &state.failure {
                return Err(failure.clone());
            }
            if state.finished >= covering {
                return Ok(());
            }
            if !state.running {
                state.running = true;
                state.started += 1;
                drop(state);
                let running = RunningFlush { group: self };
                let result = flush().map_err(|error| error.to_string());
                running.finish(result.as_ref().err().cloned());
                return result;
            }
            state.waiting += 1;
            state = self.finished.wait(state).unwrap_or_else(PoisonError::into_inner);
            state.waiting -= 1;
        }
    }
}

/// The flush this caller runs; finishing it (or unwinding past it) wakes the waiters.
struct RunningFlush<'a> {
    group: &'a FlushGroup,
}

impl RunningFlush<'_> {
    fn finish(self, failure: Option<String>) {
        self.end(failure);
        std::mem::forget(self);
    }

    fn end(&self, failure: Option<String>) {
        let mut state = self.group.lock();
        state.running = false;
        state.finished = state.started;
        if failure.is_some() && state.failure.is_none() {
            state.failure = failure;
        }
        self.group.finished.notify_all();
    }
}

impl Drop for RunningFlush<'_> {
    /// Only reached when the flush panicked: its waiters must not wait forever, nor take it for a success.
    fn drop(&mut self) {
        self.end(Some("the store's flush panicked".to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};
    use std::thread;
    use std::time::Duration;

    /// Starts a caller whose flush runs until the returned sender releases it; returns once that flush runs.
    fn caller_in_a_held_flush(
        group: &Arc<FlushGroup>,
    ) -> (thread::JoinHandle<Result<(), String>>, mpsc::Sender<()>) {
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let group = group.clone();
        let caller = thread::spawn(move || {
            group.sync(|| {
                started_tx.send(()).unwrap();
                release_rx.recv().map_err(|error| error.to_string())
            })
        });
        started_rx.recv().unwrap();
        (caller, release_tx)
    }

    fn wait_until_waiting(group: &FlushGroup, callers: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while group.lock().waiting < callers {
            assert!(std::time::Instant::now() < deadline, "callers never waited");
            thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_caller_alone_flushes_once_and_returns_its_result() {
        let group = FlushGroup::default();
        let flushes = AtomicUsize::new(0);
        let count = || {
            flushes.fetch_add(1, Ordering::SeqCst);
            Ok::<(), String>(())
        };
        group.sync(count).unwrap();
        group.sync(count).unwrap();
        assert_eq!(
            flushes.load(Ordering::SeqCst),
            2,
            "each sync with none running flushes"
        );
    }

    #[test]
    fn callers_arriving_during_a_flush_wait_for_the_next_one_and_share_it() {
        let group = Arc::new(FlushGroup::default());
        let (first, release_first) = caller_in_a_held_flush(&group);
        let later_flushes = Arc::new(AtomicUsize::new(0));
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let (group, later_flushes) = (group.clone(), later_flushes.clone());
                thread::spawn(move || {
                    group.sync(|| {
                        later_flushes.fetch_add(1, Ordering::SeqCst);
                        Ok::<(), String>(())
                    })
                })
            })
            .collect();
        wait_until_waiting(&group, 4);
        // The running flush may have started before their writes: none of them may return on it.
        assert!(waiters.iter().all(|waiter| !waiter.is_finished()));
        release_first.send(()).unwrap();
        first.join().unwrap().unwrap();
        for waiter in waiters {
            waiter.join().unwrap().unwrap();
        }
        assert_eq!(
            later_flushes.load(Ordering::SeqCst),
            1,
            "the four callers that arrived during one flush shared the next"
        );
    }

    #[test]
    fn a_failed_flush_fails_the_callers_it_covered_and_every_later_one() {
        let group = Arc::new(FlushGroup::default());
        let (first, release_first) = caller_in_a_held_flush(&group);
        let waiter = {
            let group = group.clone();
            thread::spawn(move || group.sync(|| Err::<(), _>("disk gone")))
        };
        wait_until_waiting(&group, 1);
        release_first.send(()).unwrap();
        first.join().unwrap().unwrap();
        assert_eq!(waiter.join().unwrap(), Err("disk gone".to_string()));
        let after = group.sync(|| Ok::<(), String>(()));
        assert_eq!(
            after,
            Err("disk gone".to_string()),
            "nothing is durable after a failed flush"
        );
    }

    #[test]
    fn a_panicking_flush_fails_its_waiters_instead_of_leaving_them_waiting() {
        let group = Arc::new(FlushGroup::default());
        let panicking = {
            let group = group.clone();
            thread::spawn(move || group.sync(|| -> Result<(), String> { panic!("flush panicked") }))
        };
        assert!(panicking.join().is_err());
        assert_eq!(
            group.sync(|| Ok::<(), String>(())),
            Err("the store's flush panicked".to_string())
        );
    }
}
