//! Building hand-written scripts for the simulator's tests.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use mirror_sim::{AppPolicy, ClientKind, Findings, Finished, Script, SimStorage, Step, Strategy};

pub fn start(source: &str, dest: &str, topic: &str) -> Step {
    Step::Start {
        source: source.into(),
        dest: dest.into(),
        topic: topic.into(),
    }
}

pub fn stop(dest: &str, topic: &str) -> Step {
    Step::Stop {
        dest: dest.into(),
        topic: topic.into(),
    }
}

pub fn connect(client: &str, cluster: &str, topic: &str, kind: ClientKind) -> Step {
    Step::Connect {
        client: client.into(),
        cluster: cluster.into(),
        topic: topic.into(),
        kind,
    }
}

pub fn idempotent(client: &str, cluster: &str, topic: &str) -> Step {
    connect(client, cluster, topic, ClientKind::Idempotent)
}

pub fn transactional(client: &str, cluster: &str, topic: &str, id: &str) -> Step {
    connect(
        client,
        cluster,
        topic,
        ClientKind::Transactional {
            transactional_id: id.into(),
        },
    )
}

pub fn app(client: &str, cluster: &str, output: &str, input: &str, policy: AppPolicy) -> Step {
    connect(
        client,
        cluster,
        output,
        ClientKind::App {
            transactional_id: format!("{client}-id"),
            input: input.into(),
            policy,
        },
    )
}

pub fn produce(client: &str, records: u8) -> Step {
    Step::Produce {
        client: client.into(),
        records,
        lose_ack: false,
    }
}

pub fn produce_losing_ack(client: &str, records: u8) -> Step {
    Step::Produce {
        client: client.into(),
        records,
        lose_ack: true,
    }
}

pub fn end(client: &str, commit: bool) -> Step {
    Step::EndTxn {
        client: client.into(),
        commit,
    }
}

pub fn move_to(client: &str, cluster: &str, keep_ids: bool) -> Step {
    Step::Move {
        client: client.into(),
        cluster: cluster.into(),
        keep_ids,
    }
}

pub fn advance(cluster: &str, past: i64) -> Step {
    Step::AdvanceIds {
        cluster: cluster.into(),
        past,
    }
}

pub fn script(clusters: &[&str], steps: Vec<Step>) -> Script {
    Script::new(clusters.iter().map(|name| name.to_string()).collect(), steps)
}

pub fn run(script: &Script, strategy: Strategy) -> (Findings, Finished) {
    mirror_sim::run_script(script, strategy, &SimStorage::memory()).unwrap()
}

/// The producer ids of the data batches in `cluster`'s log of `topic`, in order, deduplicated.
pub fn stored_ids(finished: &Finished, cluster: &str, topic: &str) -> Vec<i64> {
    let mut ids: Vec<i64> = Vec::new();
    for batch in &finished.logs[&(cluster.to_owned(), topic.to_owned())] {
        if !batch.is_control() && !ids.contains(&batch.producer_id()) {
            ids.push(batch.producer_id());
        }
    }
    ids
}

/// The offsets of the `MIRROR_PID_RESET` barriers in one log.
pub fn barriers(finished: &Finished, cluster: &str, partition: &str) -> Vec<i64> {
    finished.logs[&(cluster.to_owned(), partition.to_owned())]
        .iter()
        .filter(|batch| batch.is_control())
        .filter(|batch| {
            record_format::control::decode_control_records(batch).is_ok_and(|records| {
                records
                    .iter()
                    .any(|record| matches!(record, record_format::ControlRecord::MirrorPidReset(_)))
            })
        })
        .map(|batch| batch.base_offset())
        .collect()
}
