//! Partition identity: a Kafka topic name and a partition number.

use std::fmt;

use crate::error::StorageError;

/// Longest topic name Kafka accepts.
pub const MAX_TOPIC_LEN: usize = 249;

/// A topic partition, validated as Kafka validates topic names (1–249 characters of `[A-Za-z0-9._-]`, not `.` or
/// `..`), so it is safe as a directory name (`{topic}-{partition}`, Kafka's layout) and as a key prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionId {
    topic: String,
    partition: u32,
}

impl PartitionId {
    /// A checked partition id.
    pub fn new(topic: impl Into<String>, partition: u32) -> Result<Self, StorageError> {
        let topic = topic.into();
        let invalid = |reason| StorageError::InvalidPartitionId {
            id: format!("{topic}-{partition}"),
            reason,
        };
        if topic.is_empty() || topic.len() > MAX_TOPIC_LEN {
            return Err(invalid("topic names have 1 to 249 characters"));
        }
        if topic == "." || topic == ".." {
            return Err(invalid("`.` and `..` are not topic names"));
        }
        if !topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
        {
            return Err(invalid(
                "topic names use only ASCII letters, digits, `.`, `_` and `-`",
            ));
        }
        Ok(PartitionId { topic, partition })
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The partition number.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// Kafka's directory name: `{topic}-{partition}`.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }

    /// Parses a directory name (the partition is after the last `-`).
    pub fn from_dir_name(name: &str) -> Result<Self, StorageError> {
        let invalid = || StorageError::InvalidPartitionId {
            id: name.to_owned(),
            reason: "expected `{topic}-{partition}`",
        };
        let (topic, partition) = name.rsplit_once('-').ok_or_else(invalid)?;
        let partition = partition.parse().map_err(|_| invalid())?;
        Self::new(topic, partition)
    }
}

impl fmt::Display for PartitionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_topic_rules_are_enforced() {
        assert!(PartitionId::new("orders.v1_eu-west", 3).is_ok());
        for bad in ["", ".", "..", "a/b", "a b", "ü", &"x".repeat(250)] {
            assert!(PartitionId::new(bad, 0).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn dir_names_round_trip_even_with_dashes_in_the_topic() {
        let id = PartitionId::new("my-topic", 12).unwrap();
        assert_eq!(id.dir_name(), "my-topic-12");
        assert_eq!(PartitionId::from_dir_name("my-topic-12").unwrap(), id);
        assert!(PartitionId::from_dir_name("nodash").is_err());
        assert!(PartitionId::from_dir_name("t-x").is_err());
    }
}
