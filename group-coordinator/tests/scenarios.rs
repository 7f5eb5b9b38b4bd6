//! The group protocol as scenario files (`tests/scenarios/*.txt`, the datadriven format psm-script uses for
//! producer state): each block is one command, `----`, and what it answered. Members are named by aliases
//! (`as=a` on their first join); an answer that waits for the rebalance is printed by a later `answers`.
//! `MIRRORLOG_REWRITE=1 cargo test -p group-coordinator --test scenarios` rewrites the files with what the code
//! answers now (review the diff before committing it).
//!
//! Commands (times in milliseconds, `now=` on every command that takes one):
//! - `new delay=MS` — a coordinator with `group.initial.rebalance.delay.ms` MS (first line of a file; default 0)
//! - `join group=G as=A|member=A client=C [instance=I] [session=MS] [rebalance=MS] [protocols=P:M,…]
//!   [required=true] now=T` — JoinGroup; `as=` for a new member (empty member id), `member=` for a known one
//! - `sync group=G member=A generation=N [assign=A:X,…] now=T` — SyncGroup (the leader assigns)
//! - `heartbeat group=G member=A generation=N now=T`, `leave group=G member=A now=T`
//! - `tick now=T` — the coordinator's timers (sessions, rebalance deadlines)
//! - `answers` — the waiting joins and syncs that were answered since
//! - `describe group=G` — state, protocol, members and their assignments
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use group_coordinator::membership::{JoinAnswer, JoinRequest, Membership, Pending, SyncAnswer};
use kafka_types::KafkaError;
use tokio::sync::oneshot;

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios")
}

/// One scenario's state: the coordinator, aliases both ways, and the answers still awaited.
struct Run {
    groups: Membership,
    alias_of: BTreeMap<String, String>,
    id_of: BTreeMap<String, String>,
    joins: Vec<(String, oneshot::Receiver<JoinAnswer>)>,
    syncs: Vec<(String, oneshot::Receiver<SyncAnswer>)>,
}

fn args(line: &str) -> (String, BTreeMap<String, String>) {
    let mut words = line.split_whitespace();
    let command = words.next().unwrap_or_default().to_owned();
    let args = words
        .map(|word| {
            let (key, value) = word
                .split_once('=')
                .unwrap_or_else(|| panic!("`{word}`: arguments are key=value"));
            (key.to_owned(), value.to_owned())
        })
        .collect();
    (command, args)
}

fn error(error: Option<KafkaError>) -> String {
    error.map_or("ok".to_owned(), |error| format!("error={}", error.name()))
}

impl Run {
    fn new(delay: i64) -> Self {
        Run {
            groups: Membership::new(delay),
            alias_of: BTreeMap::new(),
            id_of: BTreeMap::new(),
            joins: Vec::new(),
            syncs: Vec::new(),
        }
    }

    fn alias(&mut self, id: &str, wanted: Option<&str>) -> String {
        if id.is_empty() {
            return "-".to_owned();
        }
        if let Some(alias) = self.alias_of.get(id) {
            return alias.clone();
        }
        if let Some(taken) = wanted.and_then(|wanted| self.id_of.get(wanted)) {
            panic!("{} is already the alias of {taken}", wanted.unwrap_or_default());
        }
        let alias = wanted.map_or_else(|| format!("m{}", self.alias_of.len()), str::to_owned);
        self.alias_of.insert(id.to_owned(), alias.clone());
        self.id_of.insert(alias.clone(), id.to_owned());
        alias
    }

    fn id(&self, alias: &str) -> String {
        self.id_of
            .get(alias)
            .cloned()
            .unwrap_or_else(|| panic!("no member is called {alias}"))
    }

    fn join_answer(&mut self, answer: &JoinAnswer, wanted: Option<&str>) -> String {
        let member = self.alias(&answer.member_id, wanted);
        if let Some(error) = answer.error {
            return format!("{} member={member}", self::error(Some(error)));
        }
        let leader = self.alias(&answer.leader, None);
        let mut members: Vec<String> = answer
            .members
            .iter()
            .map(|(id, _, _)| id.clone())
            .collect::<Vec<_>>()
            .into_iter()
            .map(|id| self.alias(&id, None))
            .collect();
        members.sort();
        let members = if members.is_empty() {
            String::new()
        } else {
            format!(" members={}", members.join(","))
        };
        format!(
            "generation={} protocol={} leader={leader} member={member}{members}",
            answer.generation,
            answer.protocol.as_deref().unwrap_or("-")
        )
    }

    fn sync_answer(answer: &SyncAnswer) -> String {
        match answer.error {
            Some(_) => error(answer.error),
            None => format!("assignment={}", String::from_utf8_lossy(&answer.assignment)),
        }
    }

    fn run(&mut self, line: &str) -> String {
        let (command, args) = args(line);
        let known: &[&str] = match command.as_str() {
            "new" => &["delay"],
            "join" => &[
                "group",
                "as",
                "member",
                "client",
                "instance",
                "session",
                "rebalance",
                "protocols",
                "required",
                "now",
            ],
            "sync" => &["group", "member", "generation", "assign", "now"],
            "heartbeat" => &["group", "member", "generation", "now"],
            "leave" => &["group", "member", "now"],
            "tick" => &["now"],
            _ => &["group"],
        };
        if let Some(unknown) = args.keys().find(|key| !known.contains(&key.as_str())) {
            panic!("`{line}`: `{command}` takes no `{unknown}`");
        }
        let arg = |key: &str| args.get(key).cloned();
        let now = || arg("now").map_or(0, |t| t.parse::<i64>().unwrap());
        let group = || arg("group").unwrap_or_else(|| "g".to_owned());
        match command.as_str() {
            "new" => {
                *self = Run::new(arg("delay").map_or(0, |d| d.parse().unwrap()));
                "ok".to_owned()
            }
            "join" => {
                let wanted = arg("as");
                let member_id = arg("member").map(|alias| self.id(&alias)).unwrap_or_default();
                let protocols = arg("protocols")
                    .unwrap_or_else(|| "range:m".to_owned())
                    .split(',')
                    .map(|pair| {
                        let (name, metadata) = pair.split_once(':').unwrap_or((pair, ""));
                        (name.to_owned(), Bytes::from(metadata.as_bytes().to_vec()))
                    })
                    .collect();
                let request = JoinRequest {
                    group: group(),
                    member_id,
                    instance_id: arg("instance"),
                    client_id: arg("client").unwrap_or_else(|| "client".to_owned()),
                    client_host: "/127.0.0.1".to_owned(),
                    session_timeout_ms: arg("session").map_or(10_000, |t| t.parse().unwrap()),
                    rebalance_timeout_ms: arg("rebalance").map_or(30_000, |t| t.parse().unwrap()),
                    protocol_type: "consumer".to_owned(),
                    protocols,
                    require_known_member_id: arg("required").is_some_and(|r| r == "true"),
                };
                let known = arg("member");
                match self.groups.join(request, now()) {
                    Pending::Now(answer) => {
                        let wanted = wanted.or(known);
                        self.join_answer(&answer, wanted.as_deref())
                    }
                    Pending::Wait(mut receiver) => {
                        let who = known.or(wanted).unwrap_or_else(|| "?".to_owned());
                        // Answered within the join itself (a rebalance this join completed): printed at once.
                        match receiver.try_recv() {
                            Ok(answer) => self.join_answer(&answer, Some(&who)),
                            Err(_) => {
                                self.joins.push((who, receiver));
                                "waiting".to_owned()
                            }
                        }
                    }
                }
            }
            "sync" => {
                let member = arg("member").unwrap();
                let assignments = arg("assign")
                    .map(|list| {
                        list.split(',')
                            .map(|pair| {
                                let (alias, assignment) = pair.split_once(':').unwrap();
                                (self.id(alias), Bytes::from(assignment.as_bytes().to_vec()))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let generation = arg("generation").unwrap().parse().unwrap();
                match self
                    .groups
                    .sync(&group(), generation, &self.id(&member), assignments, now())
                {
                    Pending::Now(answer) => Self::sync_answer(&answer),
                    Pending::Wait(mut receiver) => match receiver.try_recv() {
                        Ok(answer) => Self::sync_answer(&answer),
                        Err(_) => {
                            self.syncs.push((member, receiver));
                            "waiting".to_owned()
                        }
                    },
                }
            }
            "heartbeat" => {
                let generation = arg("generation").unwrap().parse().unwrap();
                let member = self.id(&arg("member").unwrap());
                error(self.groups.heartbeat(&group(), generation, &member, now()))
            }
            "leave" => {
                let member = self.id(&arg("member").unwrap());
                error(self.groups.leave(&group(), &member, None, now()))
            }
            "tick" => {
                self.groups.tick(now());
                "ok".to_owned()
            }
            "answers" => {
                let mut lines = Vec::new();
                for (who, mut receiver) in std::mem::take(&mut self.joins) {
                    match receiver.try_recv() {
                        Ok(answer) => {
                            let answer = self.join_answer(&answer, Some(&who));
                            lines.push(format!("join {who}: {answer}"));
                        }
                        Err(oneshot::error::TryRecvError::Empty) => self.joins.push((who, receiver)),
                        Err(oneshot::error::TryRecvError::Closed) => {
                            lines.push(format!("join {who}: dropped"))
                        }
                    }
                }
                for (who, mut receiver) in std::mem::take(&mut self.syncs) {
                    match receiver.try_recv() {
                        Ok(answer) => lines.push(format!("sync {who}: {}", Self::sync_answer(&answer))),
                        Err(oneshot::error::TryRecvError::Empty) => self.syncs.push((who, receiver)),
                        Err(oneshot::error::TryRecvError::Closed) => {
                            lines.push(format!("sync {who}: dropped"))
                        }
                    }
                }
                let waiting: Vec<String> = self
                    .joins
                    .iter()
                    .map(|(who, _)| format!("join {who}"))
                    .chain(self.syncs.iter().map(|(who, _)| format!("sync {who}")))
                    .collect();
                if !waiting.is_empty() {
                    lines.push(format!("still waiting: {}", waiting.join(", ")));
                }
                if lines.is_empty() {
                    "none".to_owned()
                } else {
                    lines.join("\n")
                }
            }
            "describe" => match self.groups.describe_group(&group()) {
                None => "no such group".to_owned(),
                Some(description) => {
                    let mut members: Vec<String> = description
                        .members
                        .iter()
                        .map(|member| member.member_id.clone())
                        .collect::<Vec<_>>()
                        .into_iter()
                        .zip(description.members.iter().map(|m| m.assignment.clone()))
                        .map(|(id, assignment)| {
                            format!(
                                "{}({})",
                                self.alias(&id, None),
                                String::from_utf8_lossy(&assignment)
                            )
                        })
                        .collect();
                    members.sort();
                    format!(
                        "state={} protocol={} members={}",
                        description.state.name(),
                        if description.protocol.is_empty() {
                            "-"
                        } else {
                            &description.protocol
                        },
                        members.join(",")
                    )
                }
            },
            other => panic!("unknown command `{other}`"),
        }
    }
}

/// Runs a file's blocks; returns the file as it would read with the answers the code gives now.
fn replay(text: &str) -> String {
    let mut run = Run::new(0);
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim().is_empty() || line.starts_with('#') {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let answer = run.run(line);
        // The recorded answer: up to the blank line after `----`.
        assert_eq!(lines.next(), Some("----"), "`{line}` must be followed by ----");
        while lines.peek().is_some_and(|next| !next.trim().is_empty()) {
            lines.next();
        }
        out.push_str(&format!("{line}\n----\n{answer}\n"));
    }
    out
}

fn check(file: &str) {
    let path = scenarios_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let answered = replay(&text);
    assert!(
        answered.lines().any(|line| line == "----"),
        "{file} has no command"
    );
    if std::env::var("MIRRORLOG_REWRITE").is_ok_and(|value| value == "1") {
        std::fs::write(&path, &answered).unwrap();
        return;
    }
    assert!(
        answered == text,
        "{file} answers differently now:\n--- recorded\n{text}\n--- answered\n{answered}"
    );
}

macro_rules! scenarios {
    ($($name:ident => $file:literal,)*) => {
        $(#[test] fn $name() { check($file); })*

        #[test]
        fn every_scenario_file_has_a_test() {
            let mut listed = vec![$($file),*];
            listed.sort_unstable();
            let mut present: Vec<String> = std::fs::read_dir(scenarios_dir())
                .unwrap()
                .map(|entry| entry.unwrap().file_name().into_string().unwrap())
                .collect();
            present.sort_unstable();
            assert_eq!(present, listed);
        }
    };
}

scenarios! {
    a_first_rebalance_assigns_every_member_through_the_leaders_sync => "01_first_rebalance.txt",
    a_new_member_rebalances_a_stable_group => "02_new_member_rebalances.txt",
    a_member_whose_session_expires_is_removed_and_the_group_rebalances => "03_session_expiry.txt",
    the_initial_delay_holds_a_first_rebalance_open_for_late_members => "04_initial_delay.txt",
    a_static_member_back_under_a_new_id_fences_the_old_one => "05_static_members.txt",
}
