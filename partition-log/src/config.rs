//! What a partition log is configured with.

use producer_state::PsmConfig;
use storage::Durability;

/// Configuration of one [`crate::PartitionLog`]; defaults are Kafka's where Kafka has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: a (logical) segment rolls, taking a producer snapshot, once this many bytes were appended
    /// to it (default 1 GiB).
    pub segment_bytes: u64,
    /// The producer-state manager's configuration (expiration, cluster id, barrier scope).
    pub producer_state: PsmConfig,
    /// Partition leader epoch stamped on batches appended as leader.
    pub leader_epoch: i32,
    /// What [`crate::PartitionLog::flush_acknowledged`] makes appended records (the storage config's
    /// `durability`; default: synced to disk).
    pub durability: Durability,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            producer_state: PsmConfig::default(),
            leader_epoch: 0,
            durability: Durability::Sync,
        }
    }
}
