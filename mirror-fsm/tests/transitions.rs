//! The full transition table: every state × every event, with invalid transitions rejected and changing nothing.

use mirror_fsm::{Action, Event, Failure, MirrorPartition, MirrorState, StateKind, StopStep};

fn state(kind: StateKind) -> MirrorState {
    MirrorState {
        kind,
        source_cluster_id: Some("A".to_owned()),
        stop_step: (kind == StateKind::Stopping).then_some(StopStep::RemoveFetcher),
        failure: (kind == StateKind::Failed).then(|| Failure {
            message: "fetch failed".to_owned(),
            retryable: true,
            attempts: 0,
            previous: StateKind::Mirroring,
            retry_at_ms: 1_000,
        }),
        last_mirrored_offset: None,
    }
}

/// One event of each kind, in the table's column order.
fn events() -> Vec<Event> {
    vec![
        Event::Start {
            source_cluster_id: "A".to_owned(),
        },
        Event::Aligned { from_offset: 0 },
        Event::Fetched {
            source_cluster_id: "A".to_owned(),
            batches: Vec::new(),
        },
        Event::Error {
            message: "boom".to_owned(),
            retryable: true,
        },
        Event::Pause,
        Event::Resume,
        Event::Stop,
        Event::Tick { now_ms: 10 },
        Event::Truncated { offset: 5 },
        Event::LastMirroredPersisted,
        Event::BarrierWritten,
        Event::ReadOnlyCleared,
        Event::Recovered { state: None },
    ]
}

/// The expected state after each event ('.' = refused). Columns: Start Aligned Fetched Error Pause Resume Stop
/// Tick Truncated LastMirroredPersisted BarrierWritten ReadOnlyCleared Recovered. Letters: P PREPARING,
/// M MIRRORING, U PAUSED, S STOPPING, D STOPPED, F FAILED. `Recovered` restores the state it is given (here the
/// row's own).
const TABLE: [(StateKind, &str); 6] = [
    (StateKind::Preparing, ". M . F . . S P . . . . P"),
    (StateKind::Mirroring, ". . M F U . S M . . . . M"),
    (StateKind::Paused, ". . . . . M S U . . . . U"),
    (StateKind::Stopping, ". . . F . . . S S . . . S"),
    (StateKind::Stopped, "P . . . . . . D . . . . D"),
    (StateKind::Failed, "P . . F . . S F . . . . F"),
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
            let name = event.name();
            let before = machine.clone();
            match machine.handle(event) {
                Ok(actions) => {
                    assert_ne!(expected, '.', "{kind:?} accepted {name}");
                    assert_eq!(letter(machine.state().kind), expected, "{kind:?} + {name}");
                    if machine.state().kind != kind {
                        assert!(
                            matches!(actions.first(), Some(Action::Persist(persisted)) if persisted == machine.state()),
                            "{kind:?} + {name}: a state change is persisted first: {actions:?}"
                        );
                    }
                }
                Err(error) => {
                    assert_eq!(expected, '.', "{kind:?} refused {name}: {error}");
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
                Event::LastMirroredPersisted | Event::BarrierWritten | Event::ReadOnlyCleared
            );
            if !(kind == StateKind::Stopping && step_event) {
                assert_eq!(
                    mirror_fsm::transition_allowed(kind, event.name()),
                    cell != ".",
                    "{kind:?} × {}",
                    event.name()
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
        [Action::Persist(_), Action::StopFetcher, Action::TruncateToLso]
    ));
    assert!(
        machine.handle(Event::BarrierWritten).is_err(),
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
        [Action::Persist(_), Action::WriteBarrier { offset: 7, .. }]
    ));
    assert!(machine.read_only());
    let actions = machine.handle(Event::BarrierWritten).unwrap();
    assert!(matches!(
        actions.as_slice(),
        [Action::Persist(_), Action::SetReadOnly(false)]
    ));
    assert!(machine.read_only(), "still read-only until the flag is cleared");
    machine.handle(Event::ReadOnlyCleared).unwrap();
    assert_eq!(machine.state().kind, StateKind::Stopped);
    assert_eq!(machine.state().last_mirrored_offset, Some(7));
    assert!(!machine.read_only());
}

#[test]
fn failures_back_off_and_retry_from_alignment_unless_not_retryable() {
    let mut machine = MirrorPartition::new(state(StateKind::Mirroring));
    machine
        .handle(Event::Error {
            message: "timeout".to_owned(),
            retryable: true,
        })
        .unwrap();
    let first = machine.state().failure.clone().unwrap();
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
    assert_eq!(machine.state().kind, StateKind::Preparing);
    assert!(actions
        .iter()
        .any(|action| matches!(action, Action::Align { .. })));
    // Failing again (in alignment): the wait doubles.
    machine
        .handle(Event::Error {
            message: "timeout".to_owned(),
            retryable: true,
        })
        .unwrap();
    machine
        .handle(Event::Error {
            message: "timeout again".to_owned(),
            retryable: true,
        })
        .unwrap();
    let again = machine.state().failure.clone().unwrap();
    assert_eq!(again.attempts, 1);
    assert!(again.retry_at_ms - first.retry_at_ms >= 2 * mirror_fsm::machine::INITIAL_BACKOFF_MS - 1);
    // A non-retryable failure stays.
    let mut machine = MirrorPartition::new(state(StateKind::Mirroring));
    machine
        .handle(Event::Error {
            message: "unknown partition".to_owned(),
            retryable: false,
        })
        .unwrap();
    machine.handle(Event::Tick { now_ms: i64::MAX / 2 }).unwrap();
    assert_eq!(machine.state().kind, StateKind::Failed);
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
        })
        .unwrap();
    assert_eq!(machine.state().kind, StateKind::Failed);
    assert!(machine.read_only());
    let actions = machine.handle(Event::Stop).unwrap();
    assert!(
        matches!(
            actions.as_slice(),
            [Action::Persist(_), Action::WriteBarrier { offset: 9, .. }]
        ),
        "resumes at the barrier, not at the cut: {actions:?}"
    );
}
