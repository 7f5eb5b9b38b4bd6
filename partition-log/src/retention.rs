//! Retention by time and size: which oldest units of the log ([`storage::SegmentSummary`]) go, as Kafka's
//! `UnifiedLog.deleteOldSegments` decides (ADR 0054).
//!
//! Two passes, in Kafka's order, each deleting a prefix of the log and stopping at the first unit it keeps:
//!
//! 1. **time** (`retention.ms` ≥ 0): a unit goes when `now − its largest timestamp > retention.ms`;
//! 2. **size** (`retention.bytes` ≥ 0): with `excess = log size − retention.bytes`, a unit goes while
//!    `excess − its size ≥ 0` (the log keeps at least `retention.bytes`), and `excess` shrinks by it.
//!
//! A unit is only deletable when everything in it is below the high watermark (its end at or below it), and the
//! last unit never goes while it is empty. Deleting the last, non-empty unit moves the log start to the log end
//! (storage-fs starts a new segment first, as Kafka rolls an expired active segment). The log then moves its start
//! with [`crate::PartitionLog::delete_records_before`], which keeps producer state and snapshots consistent.

use storage::SegmentSummary;

/// The retention a partition's topic asks for (`cleanup.policy` includes `delete`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// `retention.ms`: `None` keeps data forever (Kafka's −1).
    pub retention_ms: Option<i64>,
    /// `retention.bytes`: `None` sets no bound (Kafka's −1).
    pub retention_bytes: Option<u64>,
}

impl RetentionPolicy {
    /// The policy of Kafka's values (negative: unbounded).
    pub fn from_kafka(retention_ms: i64, retention_bytes: i64) -> Self {
        RetentionPolicy {
            retention_ms: (retention_ms >= 0).then_some(retention_ms),
            retention_bytes: u64::try_from(retention_bytes).ok(),
        }
    }

    /// True when the policy deletes nothing.
    pub fn keeps_everything(&self) -> bool {
        self.retention_ms.is_none() && self.retention_bytes.is_none()
    }
}

/// Why retention deleted what it deleted (the first pass that deleted anything).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetentionBreach {
    /// Units older than `retention.ms`.
    Time,
    /// Units beyond `retention.bytes`.
    Size,
}

/// What a retention pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retained {
    /// The new log start offset.
    pub log_start_offset: i64,
    /// Units deleted.
    pub units: usize,
    /// Bytes deleted.
    pub bytes: u64,
    /// The pass that deleted first.
    pub breach: RetentionBreach,
}

/// Which pass is deciding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    Time,
    Size,
    Done,
}

/// Walks the units oldest first and decides where the log start moves; fed page by page.
#[derive(Debug)]
pub(crate) struct RetentionWalk {
    policy: RetentionPolicy,
    now_ms: i64,
    high_watermark: i64,
    log_end_offset: i64,
    /// Bytes the size pass may still delete (negative: none).
    excess: i128,
    pass: Pass,
    retained: Option<Retained>,
}

impl RetentionWalk {
    /// A walk over a log of `size_bytes` bytes.
    pub(crate) fn new(
        policy: RetentionPolicy,
        now_ms: i64,
        high_watermark: i64,
        log_end_offset: i64,
        size_bytes: u64,
    ) -> Self {
        let excess = policy
            .retention_bytes
            .map_or(-1, |bound| i128::from(size_bytes) - i128::from(bound));
        let pass = if policy.retention_ms.is_some() {
            Pass::Time
        } else if excess >= 0 {
            Pass::Size
        } else {
            Pass::Done
        };
        RetentionWalk {
            policy,
            now_ms,
            high_watermark,
            log_end_offset,
            excess,
            pass,
            retained: None,
        }
    }

    /// True when no later unit can go.
    pub(crate) fn done(&self) -> bool {
        self.pass == Pass::Done
    }

    /// Decides `unit` (the next one, oldest first); false once the walk stopped.
    pub(crate) fn visit(&mut self, unit: &SegmentSummary) -> bool {
        let empty = unit.next_offset <= unit.base_offset || unit.size_bytes == 0;
        let last = unit.next_offset >= self.log_end_offset;
        if unit.next_offset > self.high_watermark || (empty && last) {
            self.pass = Pass::Done;
            return false;
        }
        loop {
            match self.pass {
                Pass::Time => {
                    let expired = self.policy.retention_ms.is_some_and(|ms| {
                        i128::from(self.now_ms) - i128::from(unit.max_timestamp) > i128::from(ms)
                    });
                    if expired {
                        self.delete(unit, RetentionBreach::Time);
                        return true;
                    }
                    self.pass = if self.excess >= 0 { Pass::Size } else { Pass::Done };
                }
                Pass::Size => {
                    if self.excess - i128::from(unit.size_bytes) >= 0 {
                        self.delete(unit, RetentionBreach::Size);
                        return true;
                    }
                    self.pass = Pass::Done;
                }
                Pass::Done => return false,
            }
        }
    }

    fn delete(&mut self, unit: &SegmentSummary, breach: RetentionBreach) {
        self.excess -= i128::from(unit.size_bytes);
        let retained = self.retained.get_or_insert(Retained {
            log_start_offset: unit.next_offset,
            units: 0,
            bytes: 0,
            breach,
        });
        retained.log_start_offset = unit.next_offset;
        retained.units += 1;
        retained.bytes = retained.bytes.saturating_add(unit.size_bytes);
    }

    /// Where the log start moves, if anywhere.
    pub(crate) fn finish(self) -> Option<Retained> {
        self.retained
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(base: i64, next: i64, size: u64, max_timestamp: i64) -> SegmentSummary {
        SegmentSummary {
            base_offset: base,
            next_offset: next,
            size_bytes: size,
            max_timestamp,
        }
    }

    /// Ten units of 100 bytes, ten offsets each, the unit at `i` newest at `1000 + 100 * i`.
    fn log() -> Vec<SegmentSummary> {
        (0..10)
            .map(|i| unit(i * 10, i * 10 + 10, 100, 1000 + 100 * i))
            .collect()
    }

    fn walk(
        policy: RetentionPolicy,
        now: i64,
        high_watermark: i64,
        units: &[SegmentSummary],
    ) -> Option<Retained> {
        let size = units.iter().map(|u| u.size_bytes).sum();
        let end = units.last().map_or(0, |u| u.next_offset);
        let mut walk = RetentionWalk::new(policy, now, high_watermark, end, size);
        for unit in units {
            if !walk.visit(unit) {
                break;
            }
        }
        walk.finish()
    }

    #[test]
    fn time_retention_deletes_the_units_whose_newest_record_is_older_than_retention_ms() {
        let policy = RetentionPolicy::from_kafka(500, -1);
        // now − 1300 = 500 is not more than 500: the unit at 30 stays.
        let retained = walk(policy, 1800, 100, &log()).unwrap();
        assert_eq!(
            (retained.log_start_offset, retained.units, retained.bytes),
            (30, 3, 300)
        );
        assert_eq!(retained.breach, RetentionBreach::Time);
        assert_eq!(walk(policy, 1500, 100, &log()), None);
    }

    #[test]
    fn time_retention_stops_at_the_first_unit_it_keeps_even_if_a_later_one_expired() {
        let mut units = log();
        units[1].max_timestamp = 9000;
        let retained = walk(RetentionPolicy::from_kafka(500, -1), 5000, 100, &units).unwrap();
        assert_eq!(retained.log_start_offset, 10);
    }

    #[test]
    fn size_retention_keeps_at_least_retention_bytes() {
        let retained = walk(RetentionPolicy::from_kafka(-1, 750), 0, 100, &log()).unwrap();
        // 1000 bytes, 250 too many: two units go, a third would leave 700 < 750.
        assert_eq!((retained.log_start_offset, retained.bytes), (20, 200));
        assert_eq!(retained.breach, RetentionBreach::Size);
        assert_eq!(walk(RetentionPolicy::from_kafka(-1, 1000), 0, 100, &log()), None);
        let exact = walk(RetentionPolicy::from_kafka(-1, 800), 0, 100, &log()).unwrap();
        assert_eq!(
            exact.log_start_offset, 20,
            "the log may shrink to exactly retention.bytes"
        );
    }

    #[test]
    fn the_size_pass_follows_the_time_pass_with_what_is_left() {
        // Time deletes 3 units (300 bytes); 700 are left against a bound of 500: two more go by size.
        let retained = walk(RetentionPolicy::from_kafka(500, 500), 1800, 100, &log()).unwrap();
        assert_eq!((retained.log_start_offset, retained.units), (50, 5));
        assert_eq!(retained.breach, RetentionBreach::Time);
    }

    #[test]
    fn nothing_at_or_above_the_high_watermark_goes() {
        let retained = walk(RetentionPolicy::from_kafka(0, -1), i64::MAX, 35, &log()).unwrap();
        assert_eq!(
            retained.log_start_offset, 30,
            "the unit ending at 40 is not all replicated"
        );
        assert_eq!(
            walk(RetentionPolicy::from_kafka(0, -1), i64::MAX, 9, &log()),
            None
        );
    }

    #[test]
    fn the_whole_log_goes_when_it_all_expired_but_an_empty_last_unit_never_does() {
        let retained = walk(RetentionPolicy::from_kafka(0, -1), i64::MAX, 100, &log()).unwrap();
        assert_eq!(retained.log_start_offset, 100);
        let mut units = log();
        units.push(unit(100, 100, 0, -1));
        assert_eq!(
            walk(RetentionPolicy::from_kafka(0, -1), i64::MAX, 100, &units)
                .unwrap()
                .units,
            10
        );
    }

    #[test]
    fn extreme_values_do_not_overflow() {
        let policy = RetentionPolicy::from_kafka(i64::MAX, i64::MAX);
        assert_eq!(walk(policy, i64::MAX, 100, &log()), None);
        let mut units = log();
        units[0].max_timestamp = i64::MIN;
        let retained = walk(RetentionPolicy::from_kafka(0, -1), i64::MAX, 100, &units[..1]).unwrap();
        assert_eq!(retained.units, 1);
        assert!(RetentionPolicy::from_kafka(-1, -1).keeps_everything());
    }
}
