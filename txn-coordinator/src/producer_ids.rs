//! The producer-id manager: blocks of ids, each reserved durably before it is used.
//!
//! Kafka's controller hands producer ids out in blocks of 1,000 and persists how far it has allocated, so no id
//! is ever issued twice, even across restarts. Here one cluster has one id space: the manager issues ids from its
//! current block and, when the block is used up, answers [`Issue::Reserve`] instead of an id — the caller makes
//! the new upper bound durable, calls [`ProducerIdManager::reserved`], and asks again. After a restart,
//! [`ProducerIdManager::recover`] starts above the durable bound: ids of a block that was reserved but not fully
//! used are skipped, never reissued.
//!
//! [`ProducerIdManager::advance_past`] moves the allocator so that every later id is above a given one (a
//! destination cluster after failover, past every producer id it mirrored); the move counts only once reserved.

use kafka_types::ProducerId;

use crate::error::CoordinatorError;

/// Ids per block (Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`).
pub const BLOCK_SIZE: i64 = 1000;

/// What [`ProducerIdManager::next_id`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Issue {
    /// The next producer id.
    Id(ProducerId),
    /// No id is free below the durable bound: persist this reservation, call
    /// [`ProducerIdManager::reserved`], then ask again.
    Reserve(Reservation),
}

/// A new durable upper bound for issued ids: every id issued from now on is below `up_to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// The exclusive upper bound to persist.
    pub up_to: i64,
}

/// The allocator of one cluster's producer ids; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerIdManager {
    /// The next id to issue.
    next: i64,
    /// The durable bound: ids below it may be issued.
    reserved_up_to: i64,
}

impl ProducerIdManager {
    /// The manager after a (re)start, from the durable bound (`None`: nothing was ever reserved). Issuing starts
    /// at that bound: ids below it may have been issued before the restart.
    pub fn recover(reserved_up_to: Option<i64>) -> Self {
        let bound = reserved_up_to.unwrap_or(0).max(0);
        ProducerIdManager {
            next: bound,
            reserved_up_to: bound,
        }
    }

    /// The next id, or the reservation to persist first.
    pub fn next_id(&mut self) -> Result<Issue, CoordinatorError> {
        if self.next < self.reserved_up_to {
            let id = ProducerId(self.next);
            self.next += 1;
            return Ok(Issue::Id(id));
        }
        Ok(Issue::Reserve(self.reservation()?))
    }

    /// Records that `reservation` is durable: ids below its bound may now be issued.
    pub fn reserved(&mut self, reservation: Reservation) {
        self.reserved_up_to = self.reserved_up_to.max(reservation.up_to);
    }

    /// Makes every later id greater than `id`. Returns the reservation to persist when the move goes past the
    /// durable bound (ids are issued only after it is persisted, so a crash in between cannot lose the move).
    pub fn advance_past(&mut self, id: i64) -> Result<Option<Reservation>, CoordinatorError> {
        if id < 0 || id == i64::MAX {
            return Err(CoordinatorError::NotAProducerId(id));
        }
        if id < self.next {
            return Ok(None);
        }
        self.next = id + 1;
        if self.next < self.reserved_up_to {
            return Ok(None);
        }
        self.reservation().map(Some)
    }

    /// The id that would be issued next (once reserved).
    pub fn peek_next(&self) -> i64 {
        self.next
    }

    /// The durable bound as this manager knows it.
    pub fn reserved_up_to(&self) -> i64 {
        self.reserved_up_to
    }

    fn reservation(&self) -> Result<Reservation, CoordinatorError> {
        let up_to = self
            .next
            .checked_add(BLOCK_SIZE)
            .ok_or(CoordinatorError::ProducerIdsExhausted { next: self.next })?;
        Ok(Reservation { up_to })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issues one id, reserving (without persisting anything) when asked.
    fn issue(manager: &mut ProducerIdManager) -> i64 {
        loop {
            match manager.next_id().unwrap() {
                Issue::Id(id) => return id.get(),
                Issue::Reserve(reservation) => manager.reserved(reservation),
            }
        }
    }

    #[test]
    fn ids_come_from_blocks_reserved_before_use() {
        let mut manager = ProducerIdManager::recover(None);
        assert_eq!(
            manager.next_id().unwrap(),
            Issue::Reserve(Reservation { up_to: BLOCK_SIZE }),
            "nothing is issued before a block is reserved"
        );
        let ids: Vec<i64> = (0..2_500).map(|_| issue(&mut manager)).collect();
        assert_eq!(ids, (0..2_500).collect::<Vec<_>>());
        assert_eq!(manager.reserved_up_to(), 3 * BLOCK_SIZE);
    }

    #[test]
    fn a_restart_skips_the_rest_of_the_reserved_block() {
        let mut manager = ProducerIdManager::recover(None);
        let before: Vec<i64> = (0..10).map(|_| issue(&mut manager)).collect();
        let mut restarted = ProducerIdManager::recover(Some(manager.reserved_up_to()));
        let after = issue(&mut restarted);
        assert_eq!(after, BLOCK_SIZE);
        assert!(before.iter().all(|&id| id < after));
    }

    #[test]
    fn advancing_past_an_id_moves_every_later_id_above_it() {
        let mut manager = ProducerIdManager::recover(None);
        issue(&mut manager);
        let reservation = manager.advance_past(5_000).unwrap().unwrap();
        assert_eq!(
            manager.next_id().unwrap(),
            Issue::Reserve(reservation),
            "not before the move is durable"
        );
        manager.reserved(reservation);
        assert_eq!(issue(&mut manager), 5_001);
        assert_eq!(
            manager.advance_past(10).unwrap(),
            None,
            "advancing backwards changes nothing"
        );
        assert_eq!(issue(&mut manager), 5_002);
    }

    #[test]
    fn the_end_of_the_id_space_is_an_error_not_an_overflow() {
        let mut manager = ProducerIdManager::recover(Some(i64::MAX - 10));
        assert!(matches!(
            manager.next_id(),
            Err(CoordinatorError::ProducerIdsExhausted { .. })
        ));
        assert!(matches!(
            ProducerIdManager::recover(None).advance_past(i64::MAX),
            Err(CoordinatorError::NotAProducerId(_))
        ));
        assert!(matches!(
            ProducerIdManager::recover(None).advance_past(-1),
            Err(CoordinatorError::NotAProducerId(-1))
        ));
    }
}
