//! Random event sequences — source traffic, fetches, pauses, resumes, fetch errors, retries, stops, restarts of
//! a session, crashes (the destination dropped and reopened) and local producers — never violate invariants 2,
//! 4, 5 and 6 of ARCHITECTURE.md. Checked after every step:
//!
//! - 4: in every state but STOPPED the destination is read-only and a client append fails with nothing written;
//! - 5: while a session mirrors, the destination's batches equal the source's, byte for byte and offset for
//!   offset; once stopped, those below the last mirrored offset do;
//! - 6: once stopped, the log holds exactly one barrier of this cluster, at the last mirrored offset, and it is
//!   writable;
//! - 2: right after the stop, no producers and no open transactions; local producers reusing mirrored ids are
//!   accepted from sequence 0.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use common::{all_batches, barriers, cluster_config, memory_log, LogFetcher};
use mirror_fsm::{last_mirrored_offset, Event, MirrorDriver, StateKind};
use partition_log::{LogError, PartitionLog};
use partition_log_testkit::{coordinate, data, marker, produce};
use producer_state::BarrierScope;
use proptest::prelude::*;
use storage::{MemoryStorage, PartitionId, Storage};

#[derive(Debug, Clone)]
enum Step {
    /// The source writes: idempotent data, transactional data, or a marker for producer 2.
    Source(u8),
    Fetch,
    Pause,
    Resume,
    Stop,
    /// Start a new session (from the same source) if the state allows it.
    Start,
    FetchError {
        retryable: bool,
    },
    Tick {
        advance_ms: i64,
    },
    /// The destination process dies and restarts.
    Crash,
    /// A local client writes to the destination.
    LocalProduce,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..4u8).prop_map(Step::Source),
        6 => Just(Step::Fetch),
        1 => Just(Step::Pause),
        1 => Just(Step::Resume),
        1 => Just(Step::Stop),
        1 => Just(Step::Start),
        1 => any::<bool>().prop_map(|retryable| Step::FetchError { retryable }),
        2 => (0..500i64).prop_map(|advance_ms| Step::Tick { advance_ms }),
        2 => Just(Step::Crash),
        2 => Just(Step::LocalProduce),
    ]
}

fn id() -> PartitionId {
    PartitionId::new("t", 0).unwrap()
}

async fn source_write(log: &mut PartitionLog, kind: u8) {
    let next = |log: &PartitionLog, producer: i64| {
        log.producer_state()
            .producer(producer)
            .map_or(0, |e| e.last_seq() + 1)
    };
    match kind {
        0 => {
            let sequence = next(log, 1);
            produce(log, data(1, 0, sequence, 2, false)).await.unwrap();
        }
        1 => {
            let sequence = next(log, 2);
            produce(log, data(2, 0, sequence, 1, true)).await.unwrap();
        }
        2 => {
            // Commit or abort whatever producer 2 has open (an empty transaction if nothing).
            coordinate(log, marker(kind % 2 == 0, 2, 0, 0)).await.unwrap();
        }
        _ => {
            produce(log, data(-1, -1, -1, 1, false)).await.unwrap();
        }
    }
    let end = log.log_end_offset();
    log.advance_high_watermark(end);
}

async fn reopen(store: &MemoryStorage) -> PartitionLog {
    let storage = store.open(&id()).await.unwrap();
    PartitionLog::open(storage, cluster_config("B", BarrierScope::Writer), 0)
        .await
        .unwrap()
        .0
}

async fn run(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let source = mirror_fsm::shared(memory_log("A", "t", BarrierScope::Writer).await);
    let store = MemoryStorage::new();
    store.create(&id()).await.unwrap();
    let mut log = reopen(&store).await;
    let mut fetcher = LogFetcher::new(&source, "A");
    let mut driver = MirrorDriver::recover(&mut log, &mut fetcher, "B").await.unwrap();
    let start = Event::Start {
        source_cluster_id: "A".to_owned(),
    };
    driver
        .handle(&mut log, &mut fetcher, start.clone())
        .await
        .unwrap();
    let mut now = 0i64;
    let mut stopped_fresh = false;

    for (index, step) in steps.iter().enumerate() {
        let was_stopped = driver.state().kind() == StateKind::Stopped;
        match step {
            Step::Source(kind) => source_write(&mut source.try_write().unwrap(), *kind).await,
            Step::Fetch => {
                driver.fetch_once(&mut log, &mut fetcher).await.unwrap();
            }
            Step::Pause | Step::Resume | Step::Stop | Step::Start | Step::FetchError { .. } => {
                let event = match step {
                    Step::Pause => Event::Pause,
                    Step::Resume => Event::Resume,
                    Step::Stop => Event::Stop,
                    Step::Start => start.clone(),
                    Step::FetchError { retryable } => Event::Error {
                        message: "injected".to_owned(),
                        retryable: *retryable,
                        code: None,
                    },
                    _ => unreachable!(),
                };
                // Refused transitions are fine (and change nothing); storage never fails here.
                let _ = driver.handle(&mut log, &mut fetcher, event).await;
            }
            Step::Tick { advance_ms } => {
                now += advance_ms;
                driver
                    .handle(&mut log, &mut fetcher, Event::Tick { now_ms: now })
                    .await
                    .unwrap();
            }
            Step::Crash => {
                drop(log);
                log = reopen(&store).await;
                driver = MirrorDriver::recover(&mut log, &mut fetcher, "B").await.unwrap();
            }
            Step::LocalProduce => {
                let end = log.log_end_offset();
                let sequence = log.producer_state().producer(1).map_or(0, |e| e.last_seq() + 1);
                let result = produce(&mut log, data(1, 0, sequence, 1, false)).await;
                if driver.state().kind() == StateKind::Stopped {
                    let outcome = result.map_err(|e| {
                        TestCaseError::fail(format!("step {index}: local produce refused: {e}"))
                    })?;
                    prop_assert!(
                        !outcome.duplicate,
                        "step {}: a local batch taken for a duplicate",
                        index
                    );
                } else {
                    prop_assert!(
                        matches!(result, Err(LogError::ReadOnlyTopic { .. })),
                        "step {}: {:?}",
                        index,
                        result
                    );
                    prop_assert_eq!(log.log_end_offset(), end);
                }
            }
        }
        let state = driver.state().clone();
        if state.kind() == StateKind::Stopped && !was_stopped {
            stopped_fresh = true;
        }
        // Invariant 4.
        prop_assert_eq!(
            log.is_read_only(),
            state.kind() != StateKind::Stopped,
            "step {}: {:?}",
            index,
            step
        );
        let ours = all_batches(&log).await;
        let theirs = all_batches(&source.try_read().unwrap()).await;
        let own_barriers: Vec<i64> = barriers(&log)
            .await
            .into_iter()
            .filter(|(_, writer)| writer.as_deref() == Some("B"))
            .map(|(offset, _)| offset)
            .collect();
        if state.kind() == StateKind::Stopped {
            // Invariants 5 and 6 after the stop.
            let lmo = last_mirrored_offset(&log, "A").await.unwrap();
            prop_assert_eq!(lmo, state.last_mirrored_offset(), "step {}", index);
            let lmo = lmo.unwrap_or_default();
            prop_assert_eq!(&own_barriers, &vec![lmo], "step {}: {:?}", index, step);
            for (a, b) in ours.iter().zip(&theirs).filter(|(a, _)| a.base_offset() < lmo) {
                prop_assert_eq!(a.as_bytes(), b.as_bytes(), "step {}", index);
            }
            // Invariant 2, right after the stop.
            if stopped_fresh && !matches!(step, Step::LocalProduce) {
                prop_assert_eq!(log.producer_state().producer_count(), 0, "step {}", index);
                prop_assert!(log.producer_state().ongoing_transactions().is_empty());
            }
            if matches!(step, Step::LocalProduce) {
                stopped_fresh = false;
            }
        } else {
            // Invariant 5 during a session: a prefix of the source, byte for byte.
            prop_assert!(
                own_barriers.is_empty(),
                "step {}: a barrier while mirrored",
                index
            );
            prop_assert!(ours.len() <= theirs.len());
            for (a, b) in ours.iter().zip(&theirs) {
                prop_assert_eq!(a.as_bytes(), b.as_bytes(), "step {}: {:?}", index, step);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_event_sequences_keep_invariants_2_4_5_6(steps in prop::collection::vec(step(), 1..80)) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(run(steps))?;
    }
}
