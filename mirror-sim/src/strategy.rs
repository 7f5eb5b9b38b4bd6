//! Producer-id strategies: what a mirror does with the producer ids of the batches it copies, and what it does
//! at failover.

use std::fmt;
use std::str::FromStr;

use producer_state::BarrierScope;
use serde::{Deserialize, Serialize};

/// A producer-id strategy of a mirror link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Strategy {
    /// Batches stored as they are; no barrier at failover (what a mirror without the KIP's PID handling does).
    None,
    /// The seed's stateless transform `-(PID+2)` on every batch with a producer id (CRC recomputed), no barrier.
    Negate,
    /// The seed's "idempotent" variant: ids already negative are left alone.
    NegateSkipNegative,
    /// Batches stored as they are; at failover the `MIRROR_PID_RESET` barrier, applied by its writer only.
    Barrier,
    /// The barrier, applied by every cluster that stores it (the KIP prototype's scope).
    BarrierEverywhere,
    /// The barrier, and at failover the destination's producer-id allocator advanced past every mirrored id.
    BarrierAdvance,
}

impl Strategy {
    /// Every strategy, in table order.
    pub const ALL: [Strategy; 6] = [
        Strategy::None,
        Strategy::Negate,
        Strategy::NegateSkipNegative,
        Strategy::Barrier,
        Strategy::BarrierEverywhere,
        Strategy::BarrierAdvance,
    ];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::None => "none",
            Strategy::Negate => "negate",
            Strategy::NegateSkipNegative => "negate-skip-negative",
            Strategy::Barrier => "barrier",
            Strategy::BarrierEverywhere => "barrier-everywhere",
            Strategy::BarrierAdvance => "barrier+advance",
        }
    }

    /// True for the strategies that write the barrier at failover.
    pub fn writes_barrier(self) -> bool {
        matches!(
            self,
            Strategy::Barrier | Strategy::BarrierEverywhere | Strategy::BarrierAdvance
        )
    }

    /// Which barriers reset producer state on the clusters of a run under this strategy.
    pub fn barrier_scope(self) -> BarrierScope {
        match self {
            Strategy::BarrierEverywhere => BarrierScope::Everywhere,
            _ => BarrierScope::Writer,
        }
    }

    /// True for the strategies that store mirrored batches under another producer id than their source's.
    pub fn transforms_producer_ids(self) -> bool {
        matches!(self, Strategy::Negate | Strategy::NegateSkipNegative)
    }

    /// The producer id a mirrored batch is stored under at the destination.
    pub fn map_producer_id(self, producer_id: i64) -> i64 {
        let negate = |id: i64| id.checked_add(2).and_then(i64::checked_neg).unwrap_or(id);
        match self {
            Strategy::Negate if producer_id != -1 => negate(producer_id),
            Strategy::NegateSkipNegative if producer_id >= 0 => negate(producer_id),
            _ => producer_id,
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Strategy {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Strategy::ALL
            .into_iter()
            .find(|strategy| strategy.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Strategy::ALL.iter().map(|s| s.name()).collect();
                format!("unknown strategy {name:?} (one of: {})", names.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negate_is_the_seeds_transform_and_is_not_idempotent() {
        assert_eq!(Strategy::Negate.map_producer_id(5), -7);
        assert_eq!(Strategy::Negate.map_producer_id(-7), 5);
        assert_eq!(Strategy::Negate.map_producer_id(-1), -1);
        assert_eq!(Strategy::Negate.map_producer_id(0), -2);
    }

    #[test]
    fn negate_skip_negative_leaves_negative_ids_alone() {
        assert_eq!(Strategy::NegateSkipNegative.map_producer_id(5), -7);
        assert_eq!(Strategy::NegateSkipNegative.map_producer_id(-7), -7);
        assert_eq!(Strategy::NegateSkipNegative.map_producer_id(-1), -1);
    }

    #[test]
    fn the_transforming_strategies_are_the_ones_that_move_a_local_producer_id() {
        for strategy in Strategy::ALL {
            assert_eq!(
                strategy.transforms_producer_ids(),
                strategy.map_producer_id(5) != 5,
                "{strategy}"
            );
        }
    }

    #[test]
    fn names_round_trip() {
        for strategy in Strategy::ALL {
            assert_eq!(strategy.name().parse::<Strategy>(), Ok(strategy));
        }
        assert!("negative".parse::<Strategy>().is_err());
    }
}
