//! The one snapshot reload protocol (kafka-semantics §4.9: `truncateAndReload`, `loadFromSnapshot`), sans-IO.
//!
//! A [`Reload`] decides every step — which stored snapshots to delete (outside `(log start, log end]`), which to
//! read (newest first), what a snapshot that does not decode means (deleted, reported, the next one tried), what
//! the state is when none loads (empty at the log start), and what happens when the state already ends at the
//! log end (no reload: only decided transactions below the new start are forgotten). The caller carries out the
//! steps against wherever snapshots live and hands back what it read:
//!
//! ```text
//! let mut reload = Reload::truncate_and_reload(&mut psm, &stored_offsets, log_start, log_end, now_ms);
//! loop {
//!     match reload.next_step() {
//!         ReloadStep::Delete(offset) => delete the snapshot at `offset`,
//!         ReloadStep::Read(offset) => reload.offer(&mut psm, offset, the bytes, or None if it is gone),
//!         ReloadStep::Done => break,
//!     }
//! }
//! let report = reload.finish(&mut psm);
//! ```
//!
//! The partition log drives it over its storage (asynchronously, one snapshot in memory at a time); the
//! [`SnapshotStore`](crate::SnapshotStore) forms of [`ProducerStateManager`] (scripts, tests) drive it over a store.
//! Both run these same decisions.

use crate::manager::{CorruptSnapshot, ProducerStateManager, ReloadReport};

/// What the caller does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadStep {
    /// Delete the snapshot at this offset.
    Delete(i64),
    /// Read the snapshot at this offset and [`Reload::offer`] its bytes.
    Read(i64),
    /// Nothing more: call [`Reload::finish`].
    Done,
}

/// One reload in progress; see the module docs.
#[derive(Debug, Clone)]
pub struct Reload {
    /// Snapshots to delete before anything is read (out of range), in order.
    deletes: Vec<i64>,
    /// Snapshots to try, newest first; `next` is the next one to read.
    candidates: Vec<i64>,
    next: usize,
    /// A candidate asked for and not yet offered.
    awaiting: Option<i64>,
    /// A corrupt candidate to delete before the next read.
    corrupt_to_delete: Option<i64>,
    /// Whether producer state is rebuilt from a snapshot (else only the log start moved).
    reload: bool,
    loaded: Option<i64>,
    log_start_offset: i64,
    now_ms: i64,
    report: ReloadReport,
}

impl Reload {
    /// `truncateAndReload` for the log bounds `(log_start_offset, log_end_offset]` with the snapshots `stored`:
    /// those outside the bounds are deleted; unless the state already ends at the log end it is cleared and
    /// reloaded from the newest readable one (expired producers skipped at `now_ms`).
    pub fn truncate_and_reload(
        psm: &mut ProducerStateManager,
        stored: &[i64],
        log_start_offset: i64,
        log_end_offset: i64,
        now_ms: i64,
    ) -> Self {
        let plan = psm.plan_reload(stored, log_start_offset, log_end_offset);
        if plan.reload {
            psm.begin_reload();
        }
        Reload {
            deletes: plan.out_of_range.clone(),
            candidates: if plan.reload {
                plan.candidates.clone()
            } else {
                Vec::new()
            },
            next: 0,
            awaiting: None,
            corrupt_to_delete: None,
            reload: plan.reload,
            loaded: None,
            log_start_offset,
            now_ms,
            report: ReloadReport {
                out_of_range: plan.out_of_range,
                corrupt: Vec::new(),
            },
        }
        .remembering_latest(plan.candidates.first().copied())
    }

    /// `loadFromSnapshot`: clears the state and loads the newest readable snapshot among `candidates` (newest
    /// first), deleting unreadable ones; with none, the state starts empty at `log_start_offset`. Nothing is
    /// deleted for being out of range.
    pub fn load_newest(
        psm: &mut ProducerStateManager,
        candidates: &[i64],
        log_start_offset: i64,
        now_ms: i64,
    ) -> Self {
        psm.begin_reload();
        Reload {
            deletes: Vec::new(),
            candidates: candidates.to_vec(),
            next: 0,
            awaiting: None,
            corrupt_to_delete: None,
            reload: true,
            loaded: None,
            log_start_offset,
            now_ms,
            report: ReloadReport::default(),
        }
    }

    /// Without a reload, the newest snapshot kept is what the state's last snapshot offset becomes.
    fn remembering_latest(mut self, latest: Option<i64>) -> Self {
        if !self.reload {
            self.loaded = latest;
        }
        self
    }

    /// The next step. After [`ReloadStep::Read`], the snapshot must be [`offer`](Self::offer)ed before the
    /// next call (until then the same read is asked for again).
    pub fn next_step(&mut self) -> ReloadStep {
        if let Some(offset) = self.deletes.first().copied() {
            self.deletes.remove(0);
            return ReloadStep::Delete(offset);
        }
        if let Some(offset) = self.corrupt_to_delete.take() {
            return ReloadStep::Delete(offset);
        }
        if let Some(offset) = self.awaiting {
            return ReloadStep::Read(offset);
        }
        if !self.reload || self.loaded.is_some() {
            return ReloadStep::Done;
        }
        match self.candidates.get(self.next).copied() {
            Some(offset) => {
                self.next += 1;
                self.awaiting = Some(offset);
                ReloadStep::Read(offset)
            }
            None => ReloadStep::Done,
        }
    }

    /// The bytes of the snapshot at `offset` that [`ReloadStep::Read`] asked for (`None`: it is not there any
    /// more, and the next one is tried). A snapshot that does not decode is reported and deleted, and the next
    /// one is tried (Kafka's fallback).
    pub fn offer(&mut self, psm: &mut ProducerStateManager, offset: i64, bytes: Option<&[u8]>) {
        if self.awaiting != Some(offset) {
            return;
        }
        self.awaiting = None;
        let Some(bytes) = bytes else {
            return;
        };
        match psm.load_snapshot_bytes(offset, bytes, self.now_ms) {
            Ok(()) => self.loaded = Some(offset),
            Err(corrupt) => {
                self.corrupt_to_delete = Some(offset);
                self.report.corrupt.push(corrupt);
            }
        }
    }

    /// Ends the reload: with no snapshot loaded the state starts empty at the log start; without a reload the
    /// state only forgets decided transactions below the log start. Returns what was deleted and why.
    pub fn finish(self, psm: &mut ProducerStateManager) -> ReloadReport {
        if !self.reload {
            psm.log_start_moved(self.log_start_offset, self.loaded);
        } else if self.loaded.is_none() {
            psm.reload_from_nothing(self.log_start_offset);
        }
        self.report
    }

    /// Whether producer state is rebuilt from a snapshot (else only the log start moved).
    pub fn reloads(&self) -> bool {
        self.reload
    }

    /// The snapshot the state was loaded from (or, without a reload, the newest one kept).
    pub fn loaded(&self) -> Option<i64> {
        self.loaded
    }

    /// The snapshots found corrupt so far.
    pub fn corrupt(&self) -> &[CorruptSnapshot] {
        &self.report.corrupt
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PsmConfig;

    /// Runs a reload over `stored` (offset → bytes, `None`: listed but gone), returning the steps taken.
    fn run(
        psm: &mut ProducerStateManager,
        mut reload: Reload,
        stored: &[(i64, Option<Vec<u8>>)],
    ) -> (Vec<ReloadStep>, ReloadReport) {
        let mut steps = Vec::new();
        loop {
            let step = reload.next_step();
            steps.push(step);
            match step {
                ReloadStep::Delete(_) => {}
                ReloadStep::Read(offset) => {
                    let bytes = stored
                        .iter()
                        .find(|(at, _)| *at == offset)
                        .and_then(|(_, bytes)| bytes.clone());
                    reload.offer(psm, offset, bytes.as_deref());
                }
                ReloadStep::Done => return (steps, reload.finish(psm)),
            }
        }
    }

    fn empty_snapshot(psm: &mut ProducerStateManager, at: i64) -> Vec<u8> {
        psm.take_snapshot_bytes_at(at).unwrap().1
    }

    #[test]
    fn out_of_range_snapshots_go_first_then_the_newest_readable_one_loads_after_a_corrupt_one_is_deleted() {
        let mut source = ProducerStateManager::new(PsmConfig::default());
        let good = empty_snapshot(&mut source, 10);
        let stored = vec![
            (0, Some(good.clone())),
            (10, Some(good)),
            (20, Some(b"not a snapshot".to_vec())),
            (90, None),
        ];
        let offsets: Vec<i64> = stored.iter().map(|(at, _)| *at).collect();
        let mut psm = ProducerStateManager::new(PsmConfig::default());
        let reload = Reload::truncate_and_reload(&mut psm, &offsets, 0, 50, 0);
        let (steps, report) = run(&mut psm, reload, &stored);
        assert_eq!(
            steps,
            vec![
                ReloadStep::Delete(0),
                ReloadStep::Delete(90),
                ReloadStep::Read(20),
                ReloadStep::Delete(20),
                ReloadStep::Read(10),
                ReloadStep::Done,
            ]
        );
        assert_eq!(report.out_of_range, vec![0, 90]);
        assert_eq!(
            report.corrupt.iter().map(|c| c.offset).collect::<Vec<_>>(),
            vec![20]
        );
        assert_eq!(psm.map_end_offset(), 10);
    }

    #[test]
    fn a_listed_snapshot_that_is_gone_is_skipped_without_a_delete_and_with_none_the_state_starts_at_the_log_start(
    ) {
        let stored = vec![(30, None)];
        let mut psm = ProducerStateManager::new(PsmConfig::default());
        let reload = Reload::truncate_and_reload(&mut psm, &[30], 5, 50, 0);
        let (steps, report) = run(&mut psm, reload, &stored);
        assert_eq!(steps, vec![ReloadStep::Read(30), ReloadStep::Done]);
        assert!(report.corrupt.is_empty());
        assert_eq!(psm.map_end_offset(), 5);
    }

    #[test]
    fn a_state_already_at_the_log_end_is_not_reloaded() {
        let mut psm = ProducerStateManager::new(PsmConfig::default());
        psm.update_map_end_offset(50);
        let reload = Reload::truncate_and_reload(&mut psm, &[0, 40], 10, 50, 0);
        assert!(!reload.reloads());
        let (steps, _) = run(&mut psm, reload, &[]);
        assert_eq!(steps, vec![ReloadStep::Delete(0), ReloadStep::Done]);
        assert_eq!(psm.map_end_offset(), 50);
        assert_eq!(psm.last_snapshot_offset(), 40);
    }
}
