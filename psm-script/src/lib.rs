//! Data-driven producer-state scenarios (the etcd/raft-rs "datadriven" format): the runner behind
//! `mirrorlog psm-script` and producer-state's scenario checklist. A tool and test harness, kept out of the
//! domain crate (it parses strings and answers in strings).
//!
//! A script is a sequence of blocks — a command line, a line `----`, the expected output, a blank line — with
//! `#` comment lines between them. [`run_script`] executes the commands in order on one manager (through the same
//! log-level path a partition log uses: real batches, [`ProducerStateManager::plan_append`] and
//! [`ProducerStateManager::commit`]) and pairs each block's expected output with the actual one;
//! [`ScriptRun::rewritten`] gives the file back with the actual outputs. Commands:
//!
//! ```text
//! config cluster_id=A barrier_scope=writer|everywhere expiration_ms=N max_txn_timeout_ms=N  -> ok
//! append origin=client|coordinator|replication pid=1 epoch=0 seq=0 offset=10 [count=1] [txn] [ts=1000]
//!     -> ok | duplicate first_offset=F last_offset=L | error NAME
//! marker origin=coordinator|replication pid=1 epoch=0 type=commit|abort coordinator_epoch=0 offset=12 [ts=T] [tv=0|1|2]
//!     -> completed first_offset=F last_offset=L aborted=true|false | ok | error NAME
//! barrier origin=coordinator|replication|client offset=13 source=B [writer=A]  -> reset | kept | error NAME
//! hw 14                                 -> ok
//! expire now=T                          -> ok removed=N
//! snapshot                              -> ok offset=O | ok skipped
//! reload log_start=0 log_end=12 now=T   -> ok
//! producer pid=1  -> epoch=E last_seq=S last_offset=O coordinator_epoch=C txn_first_offset=F|none | absent
//! unstable                              -> first_unstable=F|none lso=L
//! state                                 -> the state as one line of JSON
//! snapshots                             -> offsets=O1,O2,… | none   (the snapshots stored so far)
//! restart                               -> ok   (a new manager with the same config and snapshots, as after a
//!                                                crash; follow it with `reload`)
//! ```

use std::collections::BTreeMap;

use record_format::{
    end_txn_marker_batch, mirror_pid_reset_batch, BatchBuilder, ControlBatchPlacement, MirrorPidResetRecord,
    RecordBatch,
};

use producer_state::txn_index::AbortedTxn;
use producer_state::{
    AppendDecision, AppendEffects, AppendOrigin, BarrierScope, MemorySnapshotStore, ProducerStateManager,
    PsmConfig, SnapshotStore, StateSummary, TransactionVersion,
};

/// One line of a script file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    /// A comment or blank line kept verbatim.
    Verbatim(String),
    /// A command with its expected output.
    Block {
        line_number: usize,
        command: String,
        expected: Vec<String>,
    },
}

/// A script could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ScriptParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

fn parse_items(text: &str) -> Result<Vec<Item>, ScriptParseError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut items = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            items.push(Item::Verbatim(line.to_owned()));
            index += 1;
            continue;
        }
        if lines.get(index + 1).map(|l| l.trim()) != Some("----") {
            return Err(ScriptParseError {
                line: index + 1,
                message: format!("command `{trimmed}` is not followed by a `----` line"),
            });
        }
        let mut expected = Vec::new();
        let mut next = index + 2;
        while let Some(output) = lines.get(next) {
            if output.trim().is_empty() {
                break;
            }
            expected.push((*output).to_owned());
            next += 1;
        }
        items.push(Item::Block {
            line_number: index + 1,
            command: trimmed.to_owned(),
            expected,
        });
        // The blank line that ends the block belongs to it.
        index = next + 1;
    }
    Ok(items)
}

/// The result of one block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockResult {
    /// 1-based line of the command.
    pub line_number: usize,
    /// The command.
    pub command: String,
    /// What the file expects.
    pub expected: Vec<String>,
    /// What the command printed.
    pub actual: Vec<String>,
}

impl BlockResult {
    /// True when actual equals expected.
    pub fn matches(&self) -> bool {
        self.expected == self.actual
    }
}

/// The result of running a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptRun {
    items: Vec<Item>,
    /// Every block in order.
    pub blocks: Vec<BlockResult>,
}

impl ScriptRun {
    /// The blocks whose output differs.
    pub fn mismatches(&self) -> impl Iterator<Item = &BlockResult> {
        self.blocks.iter().filter(|block| !block.matches())
    }

    /// A readable diff of every mismatch (empty when all match).
    pub fn diff(&self, file_name: &str) -> String {
        let mut out = String::new();
        for block in self.mismatches() {
            out.push_str(&format!("{file_name}:{}: {}\n", block.line_number, block.command));
            for line in &block.expected {
                out.push_str(&format!("- {line}\n"));
            }
            for line in &block.actual {
                out.push_str(&format!("+ {line}\n"));
            }
        }
        out
    }

    /// The script with every expected block replaced by the actual output.
    pub fn rewritten(&self) -> String {
        let mut out = String::new();
        let mut blocks = self.blocks.iter();
        for item in &self.items {
            match item {
                Item::Verbatim(line) => {
                    out.push_str(line);
                    out.push('\n');
                }
                Item::Block { command, .. } => {
                    let actual = blocks.next().map(|b| b.actual.clone()).unwrap_or_default();
                    out.push_str(command);
                    out.push_str("\n----\n");
                    for line in actual {
                        out.push_str(&line);
                        out.push('\n');
                    }
                    out.push('\n');
                }
            }
        }
        out
    }
}

/// Parses and runs a script.
pub fn run_script(text: &str) -> Result<ScriptRun, ScriptParseError> {
    let items = parse_items(text)?;
    let mut runner = ScriptRunner::new();
    let mut blocks = Vec::new();
    for item in &items {
        if let Item::Block {
            line_number,
            command,
            expected,
        } = item
        {
            let actual = match runner.execute(command) {
                Ok(output) => vec![output],
                Err(message) => vec![format!("script error: {message}")],
            };
            blocks.push(BlockResult {
                line_number: *line_number,
                command: command.clone(),
                expected: expected.clone(),
                actual,
            });
        }
    }
    Ok(ScriptRun { items, blocks })
}

/// A parsed command line: name, `key=value` arguments, bare words.
struct Command<'a> {
    name: &'a str,
    keys: BTreeMap<&'a str, &'a str>,
    words: Vec<&'a str>,
}

impl<'a> Command<'a> {
    fn parse(line: &'a str) -> Result<Self, String> {
        let mut tokens = line.split_whitespace();
        let name = tokens.next().ok_or("empty command")?;
        let mut keys = BTreeMap::new();
        let mut words = Vec::new();
        for token in tokens {
            match token.split_once('=') {
                Some((key, value)) => {
                    if keys.insert(key, value).is_some() {
                        return Err(format!("argument `{key}` given twice"));
                    }
                }
                None => words.push(token),
            }
        }
        Ok(Command { name, keys, words })
    }

    fn text(&self, key: &str) -> Result<&'a str, String> {
        self.keys
            .get(key)
            .copied()
            .ok_or_else(|| format!("`{}` needs `{key}=`", self.name))
    }

    fn number(&self, key: &str) -> Result<i64, String> {
        let text = self.text(key)?;
        text.parse()
            .map_err(|_| format!("`{key}={text}` is not a whole number"))
    }

    fn number_or(&self, key: &str, default: i64) -> Result<i64, String> {
        if self.keys.contains_key(key) {
            self.number(key)
        } else {
            Ok(default)
        }
    }

    fn narrow<T: TryFrom<i64>>(&self, key: &str, value: i64) -> Result<T, String> {
        T::try_from(value).map_err(|_| format!("`{key}={value}` is out of range"))
    }

    fn origin(&self) -> Result<AppendOrigin, String> {
        match self.text("origin")? {
            "client" => Ok(AppendOrigin::Client),
            "coordinator" => Ok(AppendOrigin::Coordinator),
            "replication" => Ok(AppendOrigin::Replication),
            other => Err(format!("unknown origin `{other}`")),
        }
    }

    fn flag(&self, word: &str) -> bool {
        self.words.contains(&word)
    }

    /// Refuses arguments the command does not take, so a typo is an error instead of a silent default.
    fn check_arguments(&self) -> Result<(), String> {
        let (keys, words): (&[&str], &[&str]) = match self.name {
            "config" => (
                &[
                    "cluster_id",
                    "barrier_scope",
                    "expiration_ms",
                    "max_txn_timeout_ms",
                ],
                &[],
            ),
            "append" => (
                &["origin", "pid", "epoch", "seq", "offset", "count", "ts"],
                &["txn"],
            ),
            "marker" => (
                &[
                    "origin",
                    "pid",
                    "epoch",
                    "type",
                    "coordinator_epoch",
                    "offset",
                    "ts",
                    "tv",
                ],
                &[],
            ),
            "barrier" => (&["origin", "offset", "source", "writer", "ts"], &[]),
            "expire" => (&["now"], &[]),
            "reload" => (&["log_start", "log_end", "now"], &[]),
            "producer" => (&["pid"], &[]),
            // `hw` takes one bare offset, checked when it is parsed.
            "hw" => return Ok(()),
            _ => (&[], &[]),
        };
        if let Some(key) = self.keys.keys().find(|key| !keys.contains(key)) {
            return Err(format!("`{}` does not take `{key}=`", self.name));
        }
        if let Some(word) = self.words.iter().find(|word| !words.contains(word)) {
            return Err(format!("`{}` does not take `{word}`", self.name));
        }
        Ok(())
    }
}

/// The state a script runs against.
struct ScriptRunner {
    manager: ProducerStateManager,
    snapshots: MemorySnapshotStore,
    high_watermark: i64,
    aborted: Vec<AbortedTxn>,
}

impl ScriptRunner {
    fn new() -> Self {
        ScriptRunner {
            manager: ProducerStateManager::new(PsmConfig::default()),
            snapshots: MemorySnapshotStore::new(),
            high_watermark: 0,
            aborted: Vec::new(),
        }
    }

    fn execute(&mut self, line: &str) -> Result<String, String> {
        let command = Command::parse(line)?;
        command.check_arguments()?;
        match command.name {
            "config" => self.config(&command),
            "append" => self.append(&command),
            "marker" => self.marker(&command),
            "barrier" => self.barrier(&command),
            "hw" => {
                let word = command.words.first().ok_or("`hw` needs an offset")?;
                let hw: i64 = word.parse().map_err(|_| format!("`{word}` is not an offset"))?;
                self.high_watermark = hw;
                self.manager.on_high_watermark_updated(hw);
                Ok("ok".into())
            }
            "expire" => {
                let removed = self.manager.remove_expired_producers(command.number("now")?);
                Ok(format!("ok removed={removed}"))
            }
            "snapshot" => Ok(match self.manager.take_snapshot(&mut self.snapshots) {
                Some(offset) => format!("ok offset={offset}"),
                None => "ok skipped".into(),
            }),
            "reload" => {
                let log_end = command.number("log_end")?;
                self.manager.truncate_and_reload(
                    &mut self.snapshots,
                    command.number("log_start")?,
                    log_end,
                    command.number("now")?,
                );
                // Truncation cuts the aborted-transaction index with the log.
                self.aborted
                    .retain(|aborted| aborted.survives_truncation_to(log_end));
                Ok("ok".into())
            }
            "producer" => Ok(self.producer(command.number("pid")?)),
            "unstable" => {
                let first = self
                    .manager
                    .first_unstable_offset()
                    .map_or_else(|| "none".to_owned(), |first| first.message_offset.to_string());
                let lso = self.manager.log_last_stable_offset(self.high_watermark, 0);
                Ok(format!("first_unstable={first} lso={lso}"))
            }
            "state" => Ok(StateSummary::of(&self.manager, &self.aborted, self.high_watermark).to_json()),
            "snapshots" => {
                let offsets: Vec<String> = self.snapshots.offsets().iter().map(i64::to_string).collect();
                Ok(if offsets.is_empty() {
                    "none".into()
                } else {
                    format!("offsets={}", offsets.join(","))
                })
            }
            "restart" => {
                self.manager = ProducerStateManager::new(self.manager.config().clone());
                self.high_watermark = 0;
                Ok("ok".into())
            }
            other => Err(format!("unknown command `{other}`")),
        }
    }

    fn config(&mut self, command: &Command<'_>) -> Result<String, String> {
        let mut config = self.manager.config().clone();
        if let Ok(cluster_id) = command.text("cluster_id") {
            config.cluster_id = Some(cluster_id.to_owned());
        }
        if let Ok(scope) = command.text("barrier_scope") {
            config.barrier_scope =
                BarrierScope::parse(scope).ok_or_else(|| format!("unknown barrier scope `{scope}`"))?;
        }
        config.producer_id_expiration_ms =
            command.number_or("expiration_ms", config.producer_id_expiration_ms)?;
        config.max_transaction_timeout_ms =
            command.number_or("max_txn_timeout_ms", config.max_transaction_timeout_ms)?;
        self.manager.set_config(config);
        Ok("ok".into())
    }

    /// Runs one batch through the log-level path and renders the outcome.
    fn apply(
        &mut self,
        batch: &RecordBatch,
        origin: AppendOrigin,
        transaction_version: TransactionVersion,
    ) -> Result<AppendEffects, String> {
        match self.manager.plan_append([batch], origin, transaction_version) {
            Err(error) => Err(format!("error {}", error.kafka_error().name())),
            Ok(AppendDecision::Duplicate(duplicate)) => Err(format!(
                "duplicate first_offset={} last_offset={}",
                duplicate.first_offset(),
                duplicate.last_offset
            )),
            Ok(AppendDecision::Append(plan)) => {
                let effects = self.manager.commit(plan);
                self.aborted.extend(effects.aborted_index.iter().copied());
                Ok(effects)
            }
        }
    }

    fn append(&mut self, command: &Command<'_>) -> Result<String, String> {
        let origin = command.origin()?;
        let producer_id = command.number("pid")?;
        let epoch: i16 = command.narrow("epoch", command.number("epoch")?)?;
        let sequence: i32 = command.narrow("seq", command.number("seq")?)?;
        let offset = command.number("offset")?;
        let count = command.number_or("count", 1)?;
        if !(1..=10_000).contains(&count) {
            return Err(format!("`count={count}` must be between 1 and 10000"));
        }
        let timestamp = command.number_or("ts", 0)?;
        let mut builder = BatchBuilder::new()
            .base_offset(offset)
            .producer(producer_id, epoch, sequence)
            .transactional(command.flag("txn"));
        for _ in 0..count {
            builder.add(timestamp, None, Some(b"v"), &[]);
        }
        let batch = builder.build().map_err(|error| error.to_string())?;
        Ok(match self.apply(&batch, origin, TransactionVersion::Unknown) {
            Ok(_) => "ok".into(),
            Err(answer) => answer,
        })
    }

    fn marker(&mut self, command: &Command<'_>) -> Result<String, String> {
        let origin = command.origin()?;
        let commit = match command.text("type")? {
            "commit" => true,
            "abort" => false,
            other => return Err(format!("unknown marker type `{other}`")),
        };
        let tv_level = command.number_or("tv", 0)?;
        let transaction_version =
            TransactionVersion::from_level(tv_level).ok_or_else(|| format!("unknown `tv={tv_level}`"))?;
        let batch = end_txn_marker_batch(
            commit,
            command.number("pid")?,
            command.narrow("epoch", command.number("epoch")?)?,
            command.narrow("coordinator_epoch", command.number("coordinator_epoch")?)?,
            ControlBatchPlacement {
                base_offset: command.number("offset")?,
                partition_leader_epoch: 0,
                timestamp: command.number_or("ts", 0)?,
            },
        )
        .map_err(|error| error.to_string())?;
        Ok(match self.apply(&batch, origin, transaction_version) {
            Ok(effects) => match effects.completed.first() {
                Some(completed) => format!(
                    "completed first_offset={} last_offset={} aborted={}",
                    completed.first_offset, completed.last_offset, completed.is_aborted
                ),
                None => "ok".into(),
            },
            Err(answer) => answer,
        })
    }

    fn barrier(&mut self, command: &Command<'_>) -> Result<String, String> {
        let origin = command.origin()?;
        let record = MirrorPidResetRecord::new(
            command.text("source")?,
            command.text("writer").ok().map(str::to_owned),
        );
        let batch = mirror_pid_reset_batch(
            &record,
            ControlBatchPlacement {
                base_offset: command.number("offset")?,
                partition_leader_epoch: 0,
                timestamp: command.number_or("ts", 0)?,
            },
        )
        .map_err(|error| error.to_string())?;
        Ok(match self.apply(&batch, origin, TransactionVersion::Unknown) {
            Ok(effects) if effects.barriers_applied.is_empty() => "kept".into(),
            Ok(_) => "reset".into(),
            Err(answer) => answer,
        })
    }

    fn producer(&self, producer_id: i64) -> String {
        match self.manager.producer(producer_id) {
            None => "absent".into(),
            Some(entry) => format!(
                "epoch={} last_seq={} last_offset={} coordinator_epoch={} txn_first_offset={}",
                entry.producer_epoch,
                entry.last_seq(),
                entry.last_data_offset(),
                entry.coordinator_epoch,
                entry
                    .current_txn_first_offset
                    .map_or_else(|| "none".to_owned(), |offset| offset.to_string())
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_script_has_no_mismatches_and_rewrites_to_itself() {
        let text = "# a comment\nappend origin=client pid=1 epoch=0 seq=0 offset=0\n----\nok\n\nproducer pid=1\n----\nepoch=0 last_seq=0 last_offset=0 coordinator_epoch=-1 txn_first_offset=none\n\n";
        let run = run_script(text).unwrap();
        assert_eq!(run.mismatches().count(), 0, "{}", run.diff("t"));
        assert_eq!(run.rewritten(), text);
    }

    #[test]
    fn mismatch_is_reported_and_rewritten() {
        let text = "append origin=client pid=1 epoch=0 seq=5 offset=0\n----\nok\n\nappend origin=client pid=1 epoch=0 seq=7 offset=1\n----\nok\n";
        let run = run_script(text).unwrap();
        let mismatches: Vec<_> = run.mismatches().collect();
        assert_eq!(mismatches.len(), 1);
        assert_eq!(mismatches[0].actual, vec!["error OUT_OF_ORDER_SEQUENCE_NUMBER"]);
        assert!(run
            .rewritten()
            .contains("----\nerror OUT_OF_ORDER_SEQUENCE_NUMBER\n"));
        assert!(run.diff("f").contains("f:5:"));
    }

    #[test]
    fn command_without_separator_is_a_parse_error() {
        assert_eq!(run_script("hw 3\nok\n").unwrap_err().line, 1);
    }

    #[test]
    fn bad_arguments_are_reported_in_the_output() {
        let run = run_script("append origin=client pid=x epoch=0 seq=0 offset=0\n----\nok\n").unwrap();
        assert!(run.blocks[0].actual[0].starts_with("script error:"));
    }

    #[test]
    fn unknown_arguments_are_errors_not_silent_defaults() {
        for line in [
            "append origin=client pid=1 epoch=0 seq=0 offset=0 cnt=2",
            "append origin=client pid=1 epoch=0 seq=0 offset=0 transactional",
            "config cluster=A",
            "snapshot now=3",
        ] {
            let run = run_script(&format!("{line}\n----\nok\n")).unwrap();
            assert!(
                run.blocks[0].actual[0].contains("does not take"),
                "{line}: {:?}",
                run.blocks[0].actual
            );
        }
    }
}
