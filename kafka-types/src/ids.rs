//! Newtypes for Kafka's identities (ADR 0011): where a request carries a producer id, its epoch and a
//! coordinator epoch side by side, the types keep them apart. Offsets and sequences stay Kafka's primitives.

use std::fmt;

/// A producer id (Kafka's `producerId`, `i64`; −1 is "none" on the wire, never a `ProducerId`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProducerId(pub i64);

/// A producer epoch (Kafka's `producerEpoch`, `i16`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProducerEpoch(pub i16);

/// A transaction coordinator's epoch (Kafka's `coordinatorEpoch`, `i32`), written into markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CoordinatorEpoch(pub i32);

/// A transactional id (Kafka's `transactional.id`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TransactionalId(pub String);

/// A cluster's id (Kafka's `cluster.id`, answered in Metadata): what a mirror verifies of its source and what a
/// `MIRROR_PID_RESET` barrier names as its source and writer.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterId(pub String);

impl ClusterId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl ProducerId {
    /// The raw value.
    #[inline]
    pub fn get(self) -> i64 {
        self.0
    }
}

impl ProducerEpoch {
    /// The raw value.
    #[inline]
    pub fn get(self) -> i16 {
        self.0
    }
}

impl CoordinatorEpoch {
    /// The raw value.
    pub fn get(self) -> i32 {
        self.0
    }
}

impl TransactionalId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProducerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for ProducerEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for CoordinatorEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for TransactionalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
