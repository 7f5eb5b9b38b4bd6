//! The full transition table: every state × every event, with invalid transitions rejected and changing nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use mirror_fsm::{
    Action, Event, Failure, LogFailure, MirrorPartition, MirrorState, Session, StateKind, StopStep,
};
use record_format::CrcCheckedBatches;

fn state(kind: StateKind) -> MirrorState {
    let session = Session {
        source_cluster_id: "A".to_owned(),
        last_mirrored_offset: None,
    };
    match kind {
        StateKind::Preparing => MirrorState::Preparing { session },
        StateKind::Mirroring => MirrorState::Mirroring { session },
        StateKind::Paused => MirrorState::Paused { session },
        StateKind::Stopping => MirrorState::Stopping {
            session,
            step: StopStep::RemoveFetcher,
        },
        StateKind::Stopped => MirrorState::Stopped {
            session: Some(session),
        },
        StateKind::Failed => MirrorState::Failed {
            session,
            failure: Failure {
                message: "fetch failed".to_owned(),
                retryable: true,
                code: None,
                attempts: 0,
                previous: StateKind::Mirroring,
                retry_at_ms: 1_000,
            },
            stop_step: None,
        },
    }
}

/// One event of each kind, in the table's column order.
fn events() -> Vec<Event> {
    vec![
        Event::Start {
            source_cluster_id: "A".to_owned(),
        },
        Event::PeerPosition {
            source_cluster_id: "A".to_owned(),
            last_mirrored_offset: Some(0),
            log_start_offset: 0,
            local_log_end: 0,
        },
        Event::PositionChecked {
            source_cluster_id: "A".to_owned(),
            source_log_start: 0,
            local_log_end: 0,
            first_difference: None,
        },
        Event::Fetched {
            source_cluster_id: "A".to_owned(),
            batches: Ok(CrcCheckedBatches::default()),
        },
        Event::Error {
            message: "boom".to_owned(),
            retryable: true,
            code: None,
        },
        Event::LogFailed {
            failure: LogFailure::Storage,
            message: "disk".to_owned(),
        },
        Event::Pause,
        Event::Resume,
        Event::Stop,
        Event::Tick { now_ms: 10 },
        Event::Truncated { offset: 5 },
        Event::LastMirroredPersisted,
        Event::LogTail {
            log_end: 0,
            own_barrier_present: false,
        },
        Event::Synced,
        Event::ReadOnlyCleared,
        Event::Recovered { state: None },
    ]
}

/// The expected state after each event ('.' = refused). Columns: Start PeerPosition PositionChecked Fetched Error
/// LogFailed Pause Resume Stop Tick Truncated LastMirroredPersisted LogTail Synced ReadOnlyCleared Recovered.
/// Letters: P PREPARING, M MIRRORING, U PAUSED, S STOPPING, D STOPPED, F FAILED. `Recovered` restores the state it
/// is given (here the row's own).
const TABLE: [(StateKind, &str); 6] = [
    (StateKind::Preparing, ". M . . F F . . S P . . . . . P"),
    (StateKind::Mirroring, ". . M M F F U . S M . . . . . M"),
    (StateKind::Paused, ". . . . . . . M S U . . . . . U"),
    (StateKind::Stopping, ". . . . F F . . . S S . . . . S"),
    (StateKind::Stopped, "P . . . . . . . . D . . . . . D"),
    (StateKind::Failed, "P . . . F F . . S F . . . . . F"),
];

fn letter(kind: StateKind) -> char {
    match kind {
        StateKind::Preparing => 'P',
        StateKind::Mirroring => 'M',
        StateKind::Paused => 'U',
        StateKind::Stopping => 'S',
        StateKind::Stopped => 'D',
        StateKind::Failed => 'F',
    }
}

#[test]
fn every_state_and_event_follows_the_table() {
    for (kind, row) in TABLE {
        let expected: Vec<char> = row.split(' ').map(|cell| cell.chars().next().unwrap()).collect();
        assert_eq!(expected.len(), events().len());
        for (event, expected) in events().into_iter().zip(expected) {
            let mut machine = MirrorPartition::new(state(kind));
            let event = match event {
                Event::Recovered { .. } => Event::Recovered {
                    state: Some(state(kind)),
                },
                other => other,
            };
            let name = event.kind();
            let before = machine.clone();
            match machine.handle(event) {
                Ok(actions) => {
                    assert_ne!(expected, '.', "{kind:?} accepted {name:?}");
                    assert_eq!(letter(machine.state().kind()), expected, "{kind:?} + {name:?}");
                    if machine.state().kind() != kind {
                        // Persisted before any action of the new state (alignment's truncation belongs to
                        // PREPARING and runs before it).
                        let persisted = actions
                            .iter()
                            .position(|action| matches!(action, Action::Persist(p) if p == machine.state()));
                        let first_of_new_state = actions.iter().position(|action| {
                            !matches!(
                                action,
                                Action::TruncateTo { .. } | Action::TruncateFullyAndStartAt { .. }
                            )
                        });
                        assert!(
                            persisted.is_some() && persisted == first_of_new_state,
                            "{kind:?} + {name:?}: a state change is persisted first: {actions:?}"
                        );
                    }
                }
                Err(error) => {
                    assert_eq!(expected, '.', "{kind:?} refused {name:?}: {error}");
                    assert_eq!(error.state, kind);
                    assert_eq!(machine, before, "a refused event changes nothing");
                }
            }
        }
    }
}

#[test]
fn table_agrees_with_the_published_predicate() {
    for (kind, row) in TABLE {
        for (event, cell) in events().into_iter().zip(row.split(' ')) {
            // The predicate is per event name; step mismatches inside STOPPING are refused by `handle` only.
            let step_event = matches!(
                event,
                Event::LastMirroredPersisted | Event::LogTail { .. } | Event::Synced | Event::ReadOnlyCleared
            );
            if !(kind == StateKind::Stopping && step_event) {
                assert_eq!(
                    mirror_fsm::transition_allowed(kind, event.kind()),
                    cell != ".",
                    "{kind:?} × {:?}",
                    event.kind()
                );
            }
        }
    }
}

#[test]
fn stopping_runs_its_steps_in_the_seeds_order_and_refuses_them_out_of_order() {
    let mut machine = MirrorPartition::new(state(StateKind::Mirroring));
    let actions = machine.handle(Event::Stop).unwrap();
    assert!(matches!(
        actions.as_slice(),
        [
            Action::Persist(_),
            Action::StopFetcher,
            Action::AdvanceHighWatermark,
            Action::TruncateToStableCut
        ]
    ));
    assert!(
        machine.handle(Event::Synced).is_err(),
        "no barrier before the cut"
    );
    let actions = machine.handle(Event::Truncated { offset: 7 }).unwrap();
    assert!(matches!(
        actions.as_slice(),
        [Action::Persist(_), Action::PersistLastMirrored { offset: 7, .. }]
    ));
    assert!(
        machine.handle(Event::ReadOnlyCleared).is_err(),
        "never writable before the barrier"
    );
    let actions = machine.handle(Event::LastMirroredPersisted).unwrap();
    assert!(matches!(
        actions.as_slice(),
        [Action::Persist(_), Action::InspectLogTail { offset: 7 }]
    ));
    let actions = machine
        .handle(Event::LogTail {
            log_end: 7,
            own_barrier_present: false,
        })
        .unwrap();
    assert!(matches!(
        actions.as_slice(),
        [Action::AppendBarrier { offset: 7, .. }, Action::SyncLog]
    ));
    assert!(machine.read_only());
    let actions = machine.handle(Event::Synced).unwrap();
    assert!(matches!(
        actions.as_slice(),
        [Action::Persist(_), Action::SetReadOnly(false)]
    ));
    assert!(machine.read_only(), "still read-only until the flag is cleared");
    machine.handle(Event::ReadOnlyCleared).unwrap();
    assert_eq!(machine.state().kind(), StateKind::Stopped);
    assert_eq!(machine.state().last_mirrored_offset(), Some(7));
    assert!(!machine.read_only());
}

#[test]
fn a_mirroring_failure_retries_by_checking_the_log_never_by_aligning_it_again() {
    let mut machine = MirrorPartition::new(state(StateKind::Mirroring));
    machine
        .handle(Event::Error {
            message: "timeout".to_owned(),
            retryable: true,
            code: None,
        })
        .unwrap();
    let first = machine.state().failure().cloned().unwrap();
    assert_eq!(first.previous, StateKind::Mirroring);
    assert!(machine
        .handle(Event::Tick {
            now_ms: first.retry_at_ms - 1
        })
        .unwrap()
        .is_empty());
    let actions = machine
        .handle(Event::Tick {
            now_ms: first.retry_at_ms,
        })
        .unwrap();
    assert_eq!(machine.state().kind(), StateKind::Mirroring);
    assert!(
        matches!(actions.as_slice(), [Action::Persist(_), Action::CheckPosition]),
        "{actions:?}"
    );
    // The check fails too: the wait grows, counted across the retry.
    machine
        .handle(Event::Error {
            message: "timeout again".to_owned(),
            retryable: true,
            code: None,
        })
        .unwrap();
    let again = machine.state().failure().cloned().unwrap();
    assert_eq!(again.attempts, 1);
    assert_eq!(again.previous, StateKind::Mirroring);
    assert!(again.retry_at_ms - first.retry_at_ms >= mirror_fsm::machine::INITIAL_BACKOFF_MS);
    // A non-retryable failure stays.
    let mut machine = MirrorPartition::new(state(StateKind::Mirroring));
    machine
        .handle(Event::Error {
            message: "unknown partition".to_owned(),
            retryable: false,
            code: None,
        })
        .unwrap();
    machine.handle(Event::Tick { now_ms: i64::MAX / 2 }).unwrap();
    assert_eq!(machine.state().kind(), StateKind::Failed);
}

#[test]
fn an_alignment_failure_retries_the_alignment() {
    let mut machine = preparing();
    machine
        .handle(Event::Error {
            message: "timeout".to_owned(),
            retryable: true,
            code: None,
        })
        .unwrap();
    let due = machine.state().failure().unwrap().retry_at_ms;
    let actions = machine.handle(Event::Tick { now_ms: due }).unwrap();
    assert_eq!(machine.state().kind(), StateKind::Preparing);
    assert!(actions.contains(&Action::QueryPeer), "{actions:?}");
}

#[test]
fn a_restart_or_a_resume_checks_the_log_before_the_fetcher_starts() {
    let mut machine = MirrorPartition::new(MirrorState::never_mirrored());
    let actions = machine
        .handle(Event::Recovered {
            state: Some(state(StateKind::Mirroring)),
        })
        .unwrap();
    assert_eq!(actions, vec![Action::SetReadOnly(true), Action::CheckPosition]);
    let mut machine = MirrorPartition::new(state(StateKind::Paused));
    let actions = machine.handle(Event::Resume).unwrap();
    assert!(
        matches!(actions.as_slice(), [Action::Persist(_), Action::CheckPosition]),
        "{actions:?}"
    );
}

fn checked(source: &str, source_log_start: i64, first_difference: Option<i64>) -> Vec<Action> {
    MirrorPartition::new(state(StateKind::Mirroring))
        .handle(Event::PositionChecked {
            source_cluster_id: source.to_owned(),
            source_log_start,
            local_log_end: 20,
            first_difference,
        })
        .unwrap()
}

#[test]
fn a_checked_log_is_truncated_only_on_proof() {
    assert_eq!(checked("A", 0, None), vec![Action::StartFetcher]);
    assert_eq!(
        checked("A", 15, None),
        vec![Action::StartFetcher],
        "a start below our end"
    );
    assert_eq!(
        checked("A", 0, Some(12)),
        vec![Action::TruncateTo { offset: 12 }, Action::StartFetcher]
    );
    assert_eq!(
        checked("A", 30, None),
        vec![
            Action::TruncateFullyAndStartAt { offset: 30 },
            Action::StartFetcher
        ]
    );
    let refused = checked("Z", 30, Some(0));
    assert!(
        !refused.iter().any(|action| matches!(
            action,
            Action::TruncateTo { .. } | Action::TruncateFullyAndStartAt { .. } | Action::StartFetcher
        )),
        "{refused:?}"
    );
}

#[test]
fn alignment_with_an_unverified_peer_truncates_nothing() {
    let mut machine = preparing();
    let actions = machine
        .handle(Event::PeerPosition {
            source_cluster_id: "Z".to_owned(),
            last_mirrored_offset: None,
            log_start_offset: 0,
            local_log_end: 9,
        })
        .unwrap();
    assert!(!truncates(&actions), "{actions:?}");
    let failure = machine.state().failure().cloned().unwrap();
    assert!(
        !failure.retryable && failure.message.contains("\"Z\""),
        "{failure:?}"
    );
}

#[test]
fn backoff_has_equal_jitter_under_a_doubling_ceiling() {
    use mirror_fsm::machine::{backoff_ms, INITIAL_BACKOFF_MS, MAX_BACKOFF_MS};
    for failures in 0..40u32 {
        let ceiling = (INITIAL_BACKOFF_MS << failures.min(20)).min(MAX_BACKOFF_MS);
        let draws: std::collections::BTreeSet<i64> =
            (0..50).map(|seed| backoff_ms(failures, seed * 7_919)).collect();
        assert!(
            draws.iter().all(|wait| (ceiling / 2..=ceiling).contains(wait)),
            "{failures}: {draws:?}"
        );
        assert!(draws.len() > 10, "jittered: {failures}: {draws:?}");
    }
}

#[test]
fn a_stopping_that_failed_resumes_at_its_step() {
    let mut machine = MirrorPartition::new(state(StateKind::Mirroring));
    machine.handle(Event::Stop).unwrap();
    machine.handle(Event::Truncated { offset: 9 }).unwrap();
    machine.handle(Event::LastMirroredPersisted).unwrap();
    machine
        .handle(Event::Error {
            message: "disk full".to_owned(),
            retryable: true,
            code: None,
        })
        .unwrap();
    assert_eq!(machine.state().kind(), StateKind::Failed);
    assert!(machine.read_only());
    let actions = machine.handle(Event::Stop).unwrap();
    assert!(
        matches!(
            actions.as_slice(),
            [Action::Persist(_), Action::InspectLogTail { offset: 9 }]
        ),
        "resumes at the barrier, not at the cut: {actions:?}"
    );
}

/// Whether `actions` cut the log.
fn truncates(actions: &[Action]) -> bool {
    actions.iter().any(|action| {
        matches!(
            action,
            Action::TruncateTo { .. } | Action::TruncateFullyAndStartAt { .. }
        )
    })
}

fn preparing() -> MirrorPartition {
    MirrorPartition::new(state(StateKind::Preparing))
}

#[test]
fn alignment_is_decided_by_the_machine_from_the_peers_position() {
    // The peer mirrored from us up to 5; we hold 9: cut to 5.
    let actions = preparing()
        .handle(Event::PeerPosition {
            source_cluster_id: "A".to_owned(),
            last_mirrored_offset: Some(5),
            log_start_offset: 0,
            local_log_end: 9,
        })
        .unwrap();
    assert!(
        matches!(actions.first(), Some(Action::TruncateTo { offset: 5 })),
        "{actions:?}"
    );
    // It mirrored everything we have: keep the log.
    let actions = preparing()
        .handle(Event::PeerPosition {
            source_cluster_id: "A".to_owned(),
            last_mirrored_offset: Some(9),
            log_start_offset: 0,
            local_log_end: 9,
        })
        .unwrap();
    assert!(!truncates(&actions), "{actions:?}");
    // It never mirrored from us: our history goes; start at its log start.
    let actions = preparing()
        .handle(Event::PeerPosition {
            source_cluster_id: "A".to_owned(),
            last_mirrored_offset: None,
            log_start_offset: 42,
            local_log_end: 9,
        })
        .unwrap();
    assert!(
        matches!(
            actions.first(),
            Some(Action::TruncateFullyAndStartAt { offset: 42 })
        ),
        "{actions:?}"
    );
    assert!(matches!(actions.last(), Some(Action::StartFetcher)));
}

fn at_barrier_step(offset: i64) -> MirrorPartition {
    let mut machine = MirrorPartition::new(state(StateKind::Mirroring));
    machine.handle(Event::Stop).unwrap();
    machine.handle(Event::Truncated { offset }).unwrap();
    machine.handle(Event::LastMirroredPersisted).unwrap();
    machine
}

#[test]
fn a_barrier_already_written_is_synced_not_written_twice() {
    let actions = at_barrier_step(7)
        .handle(Event::LogTail {
            log_end: 8,
            own_barrier_present: true,
        })
        .unwrap();
    assert_eq!(actions, vec![Action::SyncLog]);
}

#[test]
fn a_log_that_moved_under_stopping_fails_without_retry() {
    let mut machine = at_barrier_step(7);
    machine
        .handle(Event::LogTail {
            log_end: 12,
            own_barrier_present: false,
        })
        .unwrap();
    assert_eq!(machine.state().kind(), StateKind::Failed);
    assert!(!machine.state().failure().unwrap().retryable);
}

#[test]
fn refused_batches_are_not_retried_but_storage_failures_are() {
    for (failure, retryable) in [(LogFailure::Refused, false), (LogFailure::Storage, true)] {
        let mut machine = MirrorPartition::new(state(StateKind::Mirroring));
        machine
            .handle(Event::LogFailed {
                failure,
                message: "x".to_owned(),
            })
            .unwrap();
        assert_eq!(
            machine.state().failure().unwrap().retryable,
            retryable,
            "{failure:?}"
        );
    }
}

#[test]
fn mirrored_batches_raise_the_high_watermark_and_an_empty_fetch_does_nothing() {
    let mut machine = MirrorPartition::new(state(StateKind::Mirroring));
    let fetched = |batches| Event::Fetched {
        source_cluster_id: "A".to_owned(),
        batches: CrcCheckedBatches::check(batches),
    };
    assert!(machine.handle(fetched(Vec::new())).unwrap().is_empty());
    let batch = {
        let mut builder = record_format::BatchBuilder::new();
        builder.add(0, None, Some(b"v"), &[]);
        builder.build().unwrap()
    };
    let actions = machine.handle(fetched(vec![batch])).unwrap();
    assert!(matches!(
        actions.as_slice(),
        [Action::AppendReplicated(_), Action::AdvanceHighWatermark]
    ));
}

#[test]
fn a_fetch_with_a_crc_mismatch_fails_the_session_without_retry_and_appends_nothing() {
    let intact = {
        let mut builder = record_format::BatchBuilder::new().base_offset(5);
        builder.add(0, None, Some(b"v"), &[]);
        builder.build().unwrap()
    };
    let mut bytes = intact.as_bytes().to_vec();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    let damaged = record_format::RecordBatch::parse(bytes.into()).unwrap();
    for (reported, expected_message) in [
        ("A", "a mirrored batch was refused: batch 0 of 1 (base offset 5)"),
        ("Z", "source verification failed"),
    ] {
        let mut machine = MirrorPartition::new(state(StateKind::Mirroring));
        let actions = machine
            .handle(Event::Fetched {
                source_cluster_id: reported.to_owned(),
                batches: CrcCheckedBatches::check(vec![damaged.clone()]),
            })
            .unwrap();
        assert!(
            !actions
                .iter()
                .any(|action| matches!(action, Action::AppendReplicated(_))),
            "{actions:?}"
        );
        let failure = machine.state().failure().unwrap();
        assert!(!failure.retryable);
        // The source is verified first: bytes from the wrong cluster are refused for that, whatever they hold.
        assert!(
            failure.message.starts_with(expected_message),
            "{}",
            failure.message
        );
    }
}

#[test]
fn every_state_round_trips_through_its_persisted_record() {
    for kind in StateKind::ALL {
        let original = state(kind);
        let json = serde_json::to_vec(&original).unwrap();
        let decoded: MirrorState = serde_json::from_slice(&json).unwrap();
        assert_eq!(decoded, original, "{}", String::from_utf8_lossy(&json));
    }
    let never = MirrorState::never_mirrored();
    let decoded: MirrorState = serde_json::from_slice(&serde_json::to_vec(&never).unwrap()).unwrap();
    assert_eq!(decoded, never);
}

/// A link's `mirror.retry.backoff.max.ms`: the waits between retries never exceed it, however many failures in a
/// row, and setting it lower brings a retry already scheduled further out within it; the source's Kafka code is
/// kept with the failure.
#[test]
fn the_longest_wait_between_retries_is_capped_where_set_and_a_lower_cap_brings_a_due_retry_closer() {
    let fail = |machine: &mut MirrorPartition| {
        machine
            .handle(Event::Error {
                message: "not the leader".to_owned(),
                retryable: true,
                code: Some(6),
            })
            .unwrap();
    };
    let mut machine = MirrorPartition::new(state(StateKind::Mirroring));
    machine.set_max_backoff_ms(1_000, 0);
    let mut now = 0;
    for _ in 0..12 {
        fail(&mut machine);
        let failure = machine.state().failure().cloned().unwrap();
        assert_eq!(failure.code, Some(6));
        assert!(failure.retry_at_ms - now <= 1_000, "{failure:?} at {now}");
        now = failure.retry_at_ms;
        machine.handle(Event::Tick { now_ms: now }).unwrap();
    }
    // Uncapped, twelve failures in a row wait far longer than a second; a cap set then pulls the retry in.
    let mut machine = MirrorPartition::new(state(StateKind::Mirroring));
    let mut now = 0;
    for _ in 0..12 {
        fail(&mut machine);
        now = machine.state().failure().unwrap().retry_at_ms;
        machine.handle(Event::Tick { now_ms: now }).unwrap();
    }
    fail(&mut machine);
    let due = machine.state().failure().unwrap().retry_at_ms;
    assert!(due - now > 10_000, "{due} at {now}");
    machine.set_max_backoff_ms(500, now);
    assert!(machine.state().failure().unwrap().retry_at_ms - now <= 500);
}

/// A final failure (a refused authentication) is retried once what made it final changed (`retry_now`, on a link's
/// new client settings), through the ordinary retry: back to the state it failed in.
#[test]
fn a_final_failure_is_retried_when_asked_to_retry_now() {
    let mut machine = MirrorPartition::new(state(StateKind::Mirroring));
    machine
        .handle(Event::Error {
            message: "SASL authentication failed".to_owned(),
            retryable: false,
            code: None,
        })
        .unwrap();
    machine.handle(Event::Tick { now_ms: i64::MAX / 4 }).unwrap();
    assert_eq!(machine.state().kind(), StateKind::Failed, "final: never retried");
    assert!(machine.retry_now(i64::MAX / 4));
    machine.handle(Event::Tick { now_ms: i64::MAX / 4 }).unwrap();
    assert_eq!(machine.state().kind(), StateKind::Mirroring);
    assert!(!machine.retry_now(0), "nothing to retry");
}
