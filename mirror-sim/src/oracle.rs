//! The oracle: counts anomalies from the ground truth and the bytes of every cluster's logs. It reads batches,
//! headers and markers itself and never asks producer state what happened (the one exception is (e), whose
//! subject *is* producer state: leader, follower and recovery must agree).
//!
//! | class | what is counted |
//! |---|---|
//! | (a) silent loss | records their cluster acknowledged that its log does not hold (a failover's loss window — acknowledged by the lost source, never received by the destination — is counted apart) |
//! | (b) duplicates | extra copies of a record id in one log |
//! | (c) read_committed | records a read_committed consumer sees though their transaction never committed, and committed records it does not see (a failover's loss window is counted apart here too: a destination's STOPPING aborts what it holds of a transaction whose marker it never received, and a failback aligns the old source with that, ADR 0045) |
//! | (d) collisions | two real clients under one producer id in one log: (d1) same epoch with sequences out of order, (d2) a lower epoch after a higher one, (d3) a marker of one client ending a transaction holding another's records |
//! | (e) divergence | leader, follower and recovered producer state differ, or a mirror holds bytes its source does not (invariant 5) |
//! | (f) applications | applications dead, recovered; input records processed twice or skipped |

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::logview::header;
use crate::truth::{Status, CLIENT_HEADER, RECORD_HEADER, SOURCE_HEADER};
use crate::world::Finished;
use record_format::RecordBatch;

/// Anomaly counts of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anomalies {
    /// (a) Acknowledged records missing from the log that acknowledged them.
    pub silent_loss: u64,
    /// (b) Extra copies of a record id in one log.
    pub duplicates: u64,
    /// (c) Records visible to read_committed whose transaction never committed.
    pub exposed: u64,
    /// (c) Committed records read_committed does not show.
    pub hidden_committed: u64,
    /// (d1) Another client's batch under the same producer id and epoch, sequence out of order.
    pub collision_same_epoch: u64,
    /// (d2) Another client's batch under the same producer id with a lower epoch.
    pub collision_lower_epoch: u64,
    /// (d3) A marker of one client ending a transaction holding another client's records.
    pub collision_marker: u64,
    /// (e) Partitions whose leader, follower or recovered producer state differed.
    pub divergence: u64,
    /// (f) Applications that died.
    pub apps_dead: u64,
    /// (f) Times applications closed dirty and resumed.
    pub apps_recovered: u64,
    /// (f) Input records an application's committed output holds twice.
    pub app_duplicates: u64,
    /// (f) Input records before an application's committed position missing from its committed output.
    pub app_losses: u64,
    /// Producer ids two real clients sent under, to one partition (visible or not in the log).
    pub shared_ids: u64,
}

impl Anomalies {
    /// The counts of classes (a)–(e): corruption. (f) is reported separately.
    pub fn corruption(&self) -> u64 {
        self.silent_loss
            + self.duplicates
            + self.exposed
            + self.hidden_committed
            + self.collisions()
            + self.divergence
    }

    /// (d): all three collision classes.
    pub fn collisions(&self) -> u64 {
        self.collision_same_epoch + self.collision_lower_epoch + self.collision_marker
    }

    /// (f) damage: applications' duplicates and losses.
    pub fn app_damage(&self) -> u64 {
        self.app_duplicates + self.app_losses
    }

    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Anomalies) {
        self.silent_loss += other.silent_loss;
        self.duplicates += other.duplicates;
        self.exposed += other.exposed;
        self.hidden_committed += other.hidden_committed;
        self.collision_same_epoch += other.collision_same_epoch;
        self.collision_lower_epoch += other.collision_lower_epoch;
        self.collision_marker += other.collision_marker;
        self.divergence += other.divergence;
        self.apps_dead += other.apps_dead;
        self.apps_recovered += other.apps_recovered;
        self.app_duplicates += other.app_duplicates;
        self.app_losses += other.app_losses;
        self.shared_ids += other.shared_ids;
    }
}

/// What the oracle found: the counts and a description of each finding (in the order found).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Findings {
    /// The counts.
    pub anomalies: Anomalies,
    /// One line per finding.
    pub notes: Vec<String>,
}

/// One data record as the oracle reads it from a log.
struct Seen {
    client: String,
    id: u64,
}

/// Judges a finished run.
pub fn judge(run: &Finished) -> Findings {
    let mut findings = Findings::default();
    let mut held: BTreeMap<(String, String), BTreeSet<u64>> = BTreeMap::new();

    for ((cluster, topic), batches) in &run.logs {
        let key = (cluster.clone(), topic.clone());
        let log = JudgedLog {
            cluster,
            topic,
            batches,
            committed_view: run.committed_views.get(&key).map_or(&[], Vec::as_slice),
            last_stable_offset: run.last_stable_offsets.get(&key).copied().unwrap_or(0),
            judge_hidden: true,
        };
        let copies = judge_log(run, &log, &mut findings);
        held.insert(key, copies);
    }
    // The logs of topics deleted during the run, as they were before: (b)-(d) as above; their records are gone,
    // so neither missing (a) nor hidden is judged.
    for deleted in &run.deleted_logs {
        let log = JudgedLog {
            cluster: &deleted.cluster,
            topic: &deleted.log,
            batches: &deleted.batches,
            committed_view: &deleted.committed_view,
            last_stable_offset: deleted.last_stable_offset,
            judge_hidden: false,
        };
        judge_log(run, &log, &mut findings);
    }
    let a = &mut findings.anomalies;
    let notes = &mut findings.notes;

    // (a): every acknowledged record in the log of the cluster that acknowledged it — except what an unplanned
    // failover lost in its window (acknowledged by the lost source, never received by the destination; a failback
    // then cuts it from the old source too): that loss is the failover's, counted apart.
    for (id, record) in &run.truth.records {
        let Some(cluster) = &record.acked_on else {
            continue;
        };
        // A record whose topic an operator deleted went with it.
        if run.failover_window.contains(id) || run.deleted_records.contains(id) {
            continue;
        }
        let key = (cluster.clone(), record.topic.clone());
        if !held.get(&key).is_some_and(|ids| ids.contains(id)) {
            a.silent_loss += 1;
            notes.push(format!(
                "(a) {cluster}/{}: record {id} of {} was acknowledged but is not in the log",
                record.topic, record.client
            ));
        }
    }

    a.shared_ids = run.shared_ids.len() as u64;
    for shared in &run.shared_ids {
        notes.push(format!("(shared id) {shared}"));
    }

    // (e)
    a.divergence = run.divergences.len() as u64;
    for divergence in &run.divergences {
        notes.push(format!("(e) {divergence}"));
    }

    // (f)
    for app in &run.apps {
        if let Some(reason) = &app.dead {
            a.apps_dead += 1;
            notes.push(format!(
                "(f) {} ({}) died: {reason}",
                app.client,
                app.policy.name()
            ));
        }
        a.apps_recovered += app.recoveries;
        let output_key = (app.cluster.clone(), app.output.clone());
        let input_key = (app.cluster.clone(), app.input.clone());
        let mut produced: BTreeMap<u64, u64> = BTreeMap::new();
        if let Some(batches) = run.logs.get(&output_key) {
            let visible: BTreeSet<u64> = run
                .committed_views
                .get(&output_key)
                .into_iter()
                .flatten()
                .copied()
                .collect();
            for batch in batches.iter().filter(|batch| !batch.is_control()) {
                let Ok(records) = batch.records() else {
                    continue;
                };
                for record in records.iter().flatten() {
                    let id = header(&record, RECORD_HEADER).and_then(|value| value.parse::<u64>().ok());
                    let source = header(&record, SOURCE_HEADER).and_then(|value| value.parse::<u64>().ok());
                    if let (Some(id), Some(source)) = (id, source) {
                        if visible.contains(&id) {
                            *produced.entry(source).or_default() += 1;
                        }
                    }
                }
            }
        }
        for (source, count) in &produced {
            if *count > 1 {
                a.app_duplicates += count - 1;
                notes.push(format!(
                    "(f) {}: input record {source} appears {count} times in its committed output",
                    app.client
                ));
            }
        }
        // Inputs before the committed position must each have an output.
        if let Some(batches) = run.logs.get(&input_key) {
            let visible: BTreeSet<u64> = run
                .committed_views
                .get(&input_key)
                .into_iter()
                .flatten()
                .copied()
                .collect();
            for batch in batches
                .iter()
                .filter(|batch| !batch.is_control() && batch.base_offset() < app.position)
            {
                let Ok(records) = batch.records() else {
                    continue;
                };
                for record in records.iter().flatten() {
                    if record.offset >= app.position {
                        continue;
                    }
                    let Some(id) = header(&record, RECORD_HEADER).and_then(|value| value.parse::<u64>().ok())
                    else {
                        continue;
                    };
                    if visible.contains(&id) && !produced.contains_key(&id) {
                        a.app_losses += 1;
                        notes.push(format!(
                            "(f) {}: input record {id} before its committed position {} has no committed output",
                            app.client, app.position
                        ));
                    }
                }
            }
        }
    }
    findings
}

/// One partition's leader log, as the oracle judges it.
struct JudgedLog<'a> {
    cluster: &'a str,
    topic: &'a str,
    batches: &'a [RecordBatch],
    committed_view: &'a [u64],
    last_stable_offset: i64,
    /// Whether committed records the read_committed view lacks are judged hidden (not in a deleted log: what it
    /// held went with it).
    judge_hidden: bool,
}

/// Judges one log for (b) duplicates, (c) records read_committed exposes or hides and (d) collisions, into
/// `findings`: the record ids it holds.
fn judge_log(run: &Finished, log: &JudgedLog<'_>, findings: &mut Findings) -> BTreeSet<u64> {
    let a = &mut findings.anomalies;
    let notes = &mut findings.notes;
    let (cluster, topic, batches) = (log.cluster, log.topic, log.batches);
    let mut copies: BTreeMap<u64, u64> = BTreeMap::new();
    // (d): per stored producer id, the last batch's client, epoch and sequence, the highest epoch, and the
    // clients with records in the open transaction.
    let mut last: BTreeMap<i64, (String, i16, i32)> = BTreeMap::new();
    let mut highest_epoch: BTreeMap<i64, (i16, String)> = BTreeMap::new();
    let mut open: BTreeMap<i64, BTreeSet<String>> = BTreeMap::new();
    for batch in batches {
        let producer_id = batch.producer_id();
        if batch.is_control() {
            let barrier = record_format::control::decode_control_records(batch).is_ok_and(|records| {
                records
                    .iter()
                    .any(|record| matches!(record, record_format::ControlRecord::MirrorPidReset(_)))
            });
            if barrier {
                // The documented boundary between producer-id generations: what follows is judged afresh.
                last.clear();
                highest_epoch.clear();
                open.clear();
                continue;
            }
            let closes = open.remove(&producer_id).unwrap_or_default();
            let Some(owner) = run.truth.markers.get(&batch.max_timestamp()) else {
                continue;
            };
            let others: Vec<&String> = closes.iter().filter(|client| *client != owner).collect();
            if !others.is_empty() {
                a.collision_marker += 1;
                notes.push(format!(
                    "(d3) {cluster}/{topic} offset {}: a marker of {owner} under producer id {producer_id} ended a transaction holding records of {}",
                    batch.base_offset(),
                    others.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                ));
            }
            continue;
        }
        let Ok(records) = batch.records() else {
            continue;
        };
        let seen: Vec<Seen> = records
            .iter()
            .flatten()
            .filter_map(|record| {
                Some(Seen {
                    client: header(&record, CLIENT_HEADER)?.to_owned(),
                    id: header(&record, RECORD_HEADER)?.parse().ok()?,
                })
            })
            .collect();
        let Some(client) = seen.first().map(|seen| seen.client.clone()) else {
            continue;
        };
        for record in &seen {
            *copies.entry(record.id).or_default() += 1;
        }
        if producer_id == -1 {
            continue;
        }
        let epoch = batch.producer_epoch();
        if let Some((previous, previous_epoch, previous_sequence)) = last.get(&producer_id) {
            if *previous != client && *previous_epoch == epoch {
                let expected = record_format::batch::increment_sequence(*previous_sequence, 1);
                if batch.base_sequence() != expected {
                    a.collision_same_epoch += 1;
                    notes.push(format!(
                        "(d1) {cluster}/{topic} offset {}: {client} and {previous} share producer id {producer_id} epoch {epoch}; sequence {} follows {previous_sequence} and nothing was refused",
                        batch.base_offset(),
                        batch.base_sequence()
                    ));
                }
            }
        }
        if let Some((highest, holder)) = highest_epoch.get(&producer_id) {
            if *holder != client && epoch < *highest {
                a.collision_lower_epoch += 1;
                notes.push(format!(
                    "(d2) {cluster}/{topic} offset {}: {client}'s epoch {epoch} under producer id {producer_id} accepted after {holder}'s epoch {highest}",
                    batch.base_offset()
                ));
            }
        }
        if highest_epoch
            .get(&producer_id)
            .is_none_or(|(highest, _)| epoch > *highest)
        {
            highest_epoch.insert(producer_id, (epoch, client.clone()));
        }
        last.insert(producer_id, (client.clone(), epoch, batch.last_sequence()));
        if batch.is_transactional() {
            open.entry(producer_id).or_default().insert(client);
        }
    }
    for (id, count) in &copies {
        if *count > 1 {
            a.duplicates += count - 1;
            notes.push(format!(
                "(b) {cluster}/{topic}: record {id} is stored {count} times"
            ));
        }
    }
    // (c): the read_committed view against what the clients were told.
    let view: BTreeSet<u64> = log.committed_view.iter().copied().collect();
    for id in &view {
        if let Some(record) = run.truth.records.get(id) {
            if matches!(record.status, Status::Aborted | Status::Open) {
                a.exposed += 1;
                notes.push(format!(
                    "(c) {cluster}/{topic}: read_committed shows record {id} of {} whose transaction never committed",
                    record.client
                ));
            }
        }
    }
    if !log.judge_hidden {
        return copies.into_keys().collect();
    }
    let stable = log.last_stable_offset;
    let stuck = batches.last().is_some_and(|batch| batch.next_offset() > stable);
    for batch in batches {
        // After the drain every transaction the clients know of has ended: a committed record read_committed
        // does not show is hidden, whether by an abort marker or behind a last stable offset that no longer
        // moves (a transaction left open by a failover).
        if batch.is_control() || !batch.is_transactional() {
            continue;
        }
        let Ok(records) = batch.records() else {
            continue;
        };
        for record in records.iter().flatten() {
            let Some(id) = header(&record, RECORD_HEADER).and_then(|value| value.parse::<u64>().ok()) else {
                continue;
            };
            let committed = run
                .truth
                .records
                .get(&id)
                .is_some_and(|record| record.status == Status::Committed);
            // A failover's loss window, as in (a): the destination held the transaction open at its cut and
            // aborted it before its barrier (ADR 0045), and a failback that aligns the old source with that cut
            // takes the abort there too. That loss is the window's, counted apart.
            let lost_in_window = run.failover_window.contains(&id);
            if committed && !view.contains(&id) && !lost_in_window {
                a.hidden_committed += 1;
                let why = if record.offset >= stable && stuck {
                    format!(" (behind a last stable offset stuck at {stable})")
                } else {
                    String::new()
                };
                notes.push(format!(
                    "(c) {cluster}/{topic}: committed record {id} is hidden from read_committed{why}"
                ));
            }
        }
    }
    copies.into_keys().collect()
}
