//! [`TransactionVersion`]: Kafka's transaction protocol versions (the `transaction.version` feature, KIP-890),
//! one type for the coordinator (what EndTxn does with the epoch) and producer state (what a marker must carry).

/// Kafka's transaction protocol version (the `transaction.version` feature, KIP-890): what a coordinator's
/// EndTxn does with the producer's epoch, and what a partition leader checks of a marker. It is not stored in the
/// log: followers and recovery append markers with [`TransactionVersion::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransactionVersion {
    /// Not known (followers and recovery); validated as TV 0.
    Unknown,
    /// The original protocol.
    V0,
    /// Flexible transaction-log records.
    V1,
    /// KIP-890 part 2: the coordinator bumps the epoch for every transaction's markers.
    V2,
}

impl TransactionVersion {
    /// The numeric level (−1 for unknown).
    #[inline]
    pub fn level(self) -> i8 {
        match self {
            TransactionVersion::Unknown => -1,
            TransactionVersion::V0 => 0,
            TransactionVersion::V1 => 1,
            TransactionVersion::V2 => 2,
        }
    }

    /// The version for a numeric level, `None` for levels Kafka does not define.
    pub fn from_level(level: i64) -> Option<Self> {
        Some(match level {
            -1 => TransactionVersion::Unknown,
            0 => TransactionVersion::V0,
            1 => TransactionVersion::V1,
            2 => TransactionVersion::V2,
            _ => return None,
        })
    }

    /// Version 2 (KIP-890 part 2): EndTxn bumps the producer's epoch for every transaction, the markers carry the
    /// bumped epoch. Versions 0 and 1 keep the epoch across transactions (only InitProducerId and fencing bump it).
    #[inline]
    pub fn bumps_epoch_per_transaction(self) -> bool {
        self >= TransactionVersion::V2
    }
}
