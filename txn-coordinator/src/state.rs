//! The states of a transactional id in the coordinator, and which transitions Kafka allows between them
//! (Kafka's `TransactionState`: the same eight states, ids and allowed predecessors, written anew).

use crate::error::CoordinatorError;

/// A transactional id's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnState {
    /// No transaction open (a new id, or after one completed).
    Empty,
    /// A transaction is open: partitions are being added and written.
    Ongoing,
    /// EndTxn(commit) accepted: COMMIT markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a fence: ABORT markers are being written.
    PrepareAbort,
    /// Every COMMIT marker acknowledged.
    CompleteCommit,
    /// Every ABORT marker acknowledged.
    CompleteAbort,
    /// Expired: about to be removed.
    Dead,
    /// Bumping the epoch to fence an older producer instance (then PrepareAbort).
    PrepareEpochFence,
}

impl TxnState {
    /// Every state, in id order.
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// The id written in the transaction-state log (Kafka's ids).
    pub fn id(self) -> u8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    /// The state with `id` (a record from the log: an unknown id is corrupt data, not a panic).
    pub fn from_id(id: u8) -> Result<Self, CoordinatorError> {
        TxnState::ALL
            .into_iter()
            .find(|state| state.id() == id)
            .ok_or_else(|| CoordinatorError::CorruptTxnLog(format!("unknown transaction state id {id}")))
    }

    /// Whether a transactional id may move from `previous` to `self`.
    ///
    /// PrepareAbort may follow Empty and the Complete states too: with transaction version 2 a client that does
    /// not know the server's state sends EndTxn(abort) to be safe.
    pub fn may_follow(self, previous: TxnState) -> bool {
        use TxnState::*;
        match self {
            Empty => matches!(previous, Empty | CompleteCommit | CompleteAbort),
            Ongoing => matches!(previous, Ongoing | Empty | CompleteCommit | CompleteAbort),
            PrepareCommit => previous == Ongoing,
            PrepareAbort => matches!(
                previous,
                Ongoing | PrepareEpochFence | Empty | CompleteCommit | CompleteAbort
            ),
            CompleteCommit => previous == PrepareCommit,
            CompleteAbort => previous == PrepareAbort,
            Dead => matches!(previous, Empty | CompleteCommit | CompleteAbort),
            PrepareEpochFence => previous == Ongoing,
        }
    }

    /// Whether an idle id in this state may expire (`transactional.id.expiration.ms`): only with no transaction
    /// open or being decided.
    pub fn expiration_allowed(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows: the new state; columns: the previous one, in id order (E O PC PA CC CA D PEF). 'x' = allowed.
    const TABLE: [(TxnState, &str); 8] = [
        (TxnState::Empty, "x . . . x x . ."),
        (TxnState::Ongoing, "x x . . x x . ."),
        (TxnState::PrepareCommit, ". x . . . . . ."),
        (TxnState::PrepareAbort, "x x . . x x . x"),
        (TxnState::CompleteCommit, ". . x . . . . ."),
        (TxnState::CompleteAbort, ". . . x . . . ."),
        (TxnState::Dead, "x . . . x x . ."),
        (TxnState::PrepareEpochFence, ". x . . . . . ."),
    ];

    #[test]
    fn transitions_follow_kafkas_table() {
        for (next, row) in TABLE {
            for (previous, cell) in TxnState::ALL.into_iter().zip(row.split(' ')) {
                assert_eq!(next.may_follow(previous), cell == "x", "{previous:?} -> {next:?}");
            }
        }
    }

    #[test]
    fn ids_round_trip_and_unknown_ids_are_corrupt_data() {
        for state in TxnState::ALL {
            assert_eq!(TxnState::from_id(state.id()).unwrap(), state);
        }
        assert!(matches!(
            TxnState::from_id(8),
            Err(CoordinatorError::CorruptTxnLog(_))
        ));
    }

    #[test]
    fn only_idle_states_expire() {
        let expiring: Vec<TxnState> = TxnState::ALL
            .into_iter()
            .filter(|state| state.expiration_allowed())
            .collect();
        assert_eq!(
            expiring,
            vec![TxnState::Empty, TxnState::CompleteCommit, TxnState::CompleteAbort]
        );
    }
}
