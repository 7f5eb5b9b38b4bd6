//! Data-driven coordinator scenarios (the producer-state scripts' format): every file in `tests/scenarios/` is a
//! named test. A block is a command line, `----`, the expected output, and a blank line; `#` lines are comments.
//! `REWRITE=1 cargo test -p txn-coordinator --test scenarios` writes the actual outputs back (review the diff).
//!
//! ```text
//! init id=app now=T [timeout=MS] [expect=PID/EPOCH]   -> ok pid=P epoch=E | error NAME [markers=…]
//! idempotent                                          -> ok pid=P epoch=0
//! add id=app pid=P epoch=E partitions=t-0,t-1 now=T   -> ok | error NAME
//! offsets id=app pid=P epoch=E group=G now=T          -> ok | error NAME
//! end id=app pid=P epoch=E result=commit|abort now=T  -> ok [markers=…] | error NAME
//! ack now=T                                           -> ok acked=N  (every marker sent so far)
//! timeout now=T                                       -> ok [markers=…]
//! expire now=T                                        -> ok [expired=…]
//! restart                                             -> ok resent=N  (rebuilt from the persisted records)
//! state id=app                                        -> STATE pid=P epoch=E partitions=… | absent
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kafka_types::TransactionVersion;
use kafka_types::{CoordinatorEpoch, ProducerEpoch, ProducerId, TransactionalId};
use storage::PartitionId;
use txn_coordinator::{Coordinator, CoordinatorConfig, MarkerRequest, Outcome, ProducerIdManager, Write};

struct Runner {
    coordinator: Coordinator,
    log: Vec<Write>,
    outstanding: Vec<MarkerRequest>,
}

fn args(line: &str) -> BTreeMap<&str, &str> {
    line.split_whitespace()
        .skip(1)
        .filter_map(|word| word.split_once('='))
        .collect()
}

fn markers_text(markers: &[MarkerRequest]) -> String {
    if markers.is_empty() {
        return String::new();
    }
    let list: Vec<String> = markers
        .iter()
        .map(|m| {
            format!(
                "{}:{}@{}",
                m.partition,
                if m.commit { "commit" } else { "abort" },
                m.epoch
            )
        })
        .collect();
    format!(" markers={}", list.join(","))
}

impl Runner {
    fn new() -> Self {
        Runner {
            coordinator: Coordinator::new(
                CoordinatorConfig::default(),
                ProducerIdManager::recover(None),
                CoordinatorEpoch(0),
            ),
            log: Vec::new(),
            outstanding: Vec::new(),
        }
    }

    fn keep<T>(&mut self, outcome: Outcome<T>) -> (Result<T, kafka_types::KafkaError>, String) {
        self.log.extend(outcome.writes);
        let text = markers_text(&outcome.markers);
        self.outstanding.extend(outcome.markers);
        (outcome.answer, text)
    }

    fn run(&mut self, line: &str) -> String {
        let a = args(line);
        let get = |key: &str| -> i64 { a.get(key).and_then(|v| v.parse().ok()).unwrap_or(0) };
        let id = || TransactionalId(a.get("id").copied().unwrap_or_default().to_owned());
        let producer = || (ProducerId(get("pid")), ProducerEpoch(get("epoch") as i16));
        let now = get("now");
        let unit = |(answer, markers): (Result<(), kafka_types::KafkaError>, String)| match answer {
            Ok(()) => format!("ok{markers}"),
            Err(error) => format!("error {}{markers}", error.name()),
        };
        match line.split_whitespace().next().unwrap_or_default() {
            "init" => {
                let timeout = a.get("timeout").and_then(|v| v.parse().ok()).unwrap_or(60_000);
                let expected = a.get("expect").and_then(|v| {
                    let (pid, epoch) = v.split_once('/')?;
                    Some((ProducerId(pid.parse().ok()?), ProducerEpoch(epoch.parse().ok()?)))
                });
                // `times=N`: the same request N times (to walk an epoch up to exhaustion); the last answer shows.
                for _ in 1..get("times").max(1) {
                    let outcome = self
                        .coordinator
                        .init_producer_id(Some(&id()), timeout, expected, now);
                    let _ = self.keep(outcome);
                }
                let outcome = self
                    .coordinator
                    .init_producer_id(Some(&id()), timeout, expected, now);
                match self.keep(outcome) {
                    (Ok((pid, epoch)), markers) => format!("ok pid={pid} epoch={epoch}{markers}"),
                    (Err(error), markers) => format!("error {}{markers}", error.name()),
                }
            }
            "idempotent" => {
                let outcome = self.coordinator.init_producer_id(None, 0, None, now);
                match self.keep(outcome).0 {
                    Ok((pid, epoch)) => format!("ok pid={pid} epoch={epoch}"),
                    Err(error) => format!("error {}", error.name()),
                }
            }
            "add" => {
                let partitions: Vec<PartitionId> = a
                    .get("partitions")
                    .unwrap_or(&"")
                    .split(',')
                    .filter_map(|name| PartitionId::from_dir_name(name).ok())
                    .collect();
                let (pid, epoch) = producer();
                let outcome = self
                    .coordinator
                    .add_partitions(&id(), pid, epoch, &partitions, now);
                unit(self.keep(outcome))
            }
            "offsets" => {
                let (pid, epoch) = producer();
                let group = a.get("group").copied().unwrap_or_default();
                let outcome = self.coordinator.add_offsets(&id(), pid, epoch, group, now);
                unit(self.keep(outcome))
            }
            "end" => {
                let (pid, epoch) = producer();
                let commit = a.get("result") == Some(&"commit");
                // `version=2`: transaction version 2 (KIP-890), whose answer names the producer to continue with.
                let version = match a.get("version") {
                    Some(&"2") => TransactionVersion::V2,
                    _ => TransactionVersion::V1,
                };
                let outcome = self.coordinator.end_txn(&id(), pid, epoch, commit, version, now);
                match (self.keep(outcome), version) {
                    ((Ok((pid, epoch)), markers), TransactionVersion::V2) => {
                        format!("ok pid={pid} epoch={epoch}{markers}")
                    }
                    ((answer, markers), _) => unit((answer.map(|_| ()), markers)),
                }
            }
            "ack" => {
                let markers = std::mem::take(&mut self.outstanding);
                for marker in &markers {
                    let outcome =
                        self.coordinator
                            .marker_written(&marker.transactional_id, &marker.partition, now);
                    let _ = self.keep(outcome);
                }
                format!("ok acked={}", markers.len())
            }
            "timeout" => {
                let outcome = self.coordinator.abort_timed_out(now);
                unit(self.keep(outcome))
            }
            "expire" => {
                let outcome = self.coordinator.expire_transactional_ids(now);
                let expired: Vec<String> = outcome
                    .writes
                    .iter()
                    .filter_map(|write| match write {
                        Write::Tombstone(id) => Some(id.to_string()),
                        _ => None,
                    })
                    .collect();
                let _ = self.keep(outcome);
                if expired.is_empty() {
                    "ok".to_owned()
                } else {
                    format!("ok expired={}", expired.join(","))
                }
            }
            "restart" => {
                let (coordinator, resent) = Coordinator::recover(
                    CoordinatorConfig::default(),
                    ProducerIdManager::recover(None),
                    CoordinatorEpoch(1),
                    self.log.clone(),
                );
                self.coordinator = coordinator;
                let count = resent.len();
                self.outstanding = resent;
                format!("ok resent={count}")
            }
            "state" => match self.coordinator.transaction(&id()) {
                None => "absent".to_owned(),
                Some(txn) => {
                    let partitions: Vec<String> = txn.partitions.iter().map(ToString::to_string).collect();
                    format!(
                        "{:?} pid={} epoch={} partitions={}",
                        txn.state,
                        txn.producer_id,
                        txn.epoch.map_or(-1, ProducerEpoch::get),
                        if partitions.is_empty() {
                            "none".to_owned()
                        } else {
                            partitions.join(",")
                        }
                    )
                }
            },
            other => panic!("unknown command {other:?}"),
        }
    }
}

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios")
}

/// Runs a file; returns the text with the actual outputs, and whether it matched.
fn run_file(path: &Path) -> (String, bool) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut runner = Runner::new();
    let mut out = String::new();
    let mut matched = true;
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim().is_empty() || line.starts_with('#') {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        assert_eq!(
            lines.next(),
            Some("----"),
            "{}: no `----` after {line:?}",
            path.display()
        );
        let mut expected = Vec::new();
        while let Some(next) = lines.peek() {
            if next.is_empty() {
                break;
            }
            expected.push(lines.next().unwrap_or_default());
        }
        let actual = runner.run(line);
        matched &= expected.join("\n") == actual;
        out.push_str(&format!("{line}\n----\n{actual}\n"));
    }
    (out, matched)
}

#[test]
fn every_scenario_file_matches() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(scenarios_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "txt"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "the scenario files are missing");
    let rewrite = std::env::var_os("REWRITE").is_some();
    let mut failed = Vec::new();
    for file in files {
        let (actual, matched) = run_file(&file);
        if rewrite {
            std::fs::write(&file, &actual).unwrap();
        } else if !matched {
            failed.push(format!("{}:\n{actual}", file.display()));
        }
    }
    assert!(failed.is_empty(), "scenarios differ:\n{}", failed.join("\n"));
}
