//! The producer-state error taxonomy: Kafka's error names and codes, and how clients classify them.
//!
//! [`ProducerStateError`] is what validation returns; each variant carries the values that made it fail and maps
//! to a [`KafkaError`] (name + wire code) through [`ProducerStateError::kafka_error`]. [`ClientErrorClass`] says
//! what a client does with a Kafka error (kafka-semantics §9), including the *fenced* class where
//! `INVALID_PRODUCER_ID_MAPPING` belongs for applications (KAFKA-16699).

use std::fmt;

/// Kafka error codes the partition-level producer-state machinery and its clients deal with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KafkaError {
    /// -1: a broker-side programming error (Kafka's `IllegalArgumentException` path).
    UnknownServerError,
    /// 45: the sequence number does not follow the producer's last one.
    OutOfOrderSequenceNumber,
    /// 46: a duplicate (no longer sent by brokers; clients treat it as success).
    DuplicateSequenceNumber,
    /// 47: the producer's epoch is older than the stored one.
    InvalidProducerEpoch,
    /// 42: the request is malformed (e.g. an empty transactional id).
    InvalidRequest,
    /// 48: the append is inconsistent with the producer's transaction state.
    InvalidTxnState,
    /// 49: the producer id is not (or no longer) mapped to its transactional id.
    InvalidProducerIdMapping,
    /// 50: the transaction timeout exceeds the coordinator's maximum.
    InvalidTransactionTimeout,
    /// 51: another transition of the transactional id is in progress; retry.
    ConcurrentTransactions,
    /// 52: a marker from an older transaction coordinator.
    TransactionCoordinatorFenced,
    /// 59: the broker has no state for the producer.
    UnknownProducerId,
    /// 87: the batch is not acceptable (e.g. a control batch from a client).
    InvalidRecord,
    /// 90: another producer with the same transactional id took over.
    ProducerFenced,
    /// 120: the transaction must be aborted.
    TransactionAbortable,
    /// 134 (KIP-1279 prototype, provisional): the topic is a mirror and refuses client writes.
    ReadOnlyTopic,
}

/// What a client does when it receives an error (kafka-semantics §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientErrorClass {
    /// Retry the request as is.
    Retriable,
    /// Abort the current transaction (or fail the batch), then continue.
    Abortable,
    /// The producer was replaced: close dirty, re-initialise the producer, continue from committed state.
    Fenced,
    /// The producer cannot continue.
    Fatal,
}

impl KafkaError {
    /// Every error, in code order.
    pub const ALL: [KafkaError; 15] = [
        KafkaError::UnknownServerError,
        KafkaError::InvalidRequest,
        KafkaError::OutOfOrderSequenceNumber,
        KafkaError::DuplicateSequenceNumber,
        KafkaError::InvalidProducerEpoch,
        KafkaError::InvalidTxnState,
        KafkaError::InvalidProducerIdMapping,
        KafkaError::InvalidTransactionTimeout,
        KafkaError::ConcurrentTransactions,
        KafkaError::TransactionCoordinatorFenced,
        KafkaError::UnknownProducerId,
        KafkaError::InvalidRecord,
        KafkaError::ProducerFenced,
        KafkaError::TransactionAbortable,
        KafkaError::ReadOnlyTopic,
    ];

    /// The wire code.
    pub fn code(self) -> i16 {
        match self {
            KafkaError::UnknownServerError => -1,
            KafkaError::InvalidRequest => 42,
            KafkaError::OutOfOrderSequenceNumber => 45,
            KafkaError::DuplicateSequenceNumber => 46,
            KafkaError::InvalidProducerEpoch => 47,
            KafkaError::InvalidTxnState => 48,
            KafkaError::InvalidProducerIdMapping => 49,
            KafkaError::InvalidTransactionTimeout => 50,
            KafkaError::ConcurrentTransactions => 51,
            KafkaError::TransactionCoordinatorFenced => 52,
            KafkaError::UnknownProducerId => 59,
            KafkaError::InvalidRecord => 87,
            KafkaError::ProducerFenced => 90,
            KafkaError::TransactionAbortable => 120,
            KafkaError::ReadOnlyTopic => 134,
        }
    }

    /// Kafka's name (`Errors` enum constant).
    pub fn name(self) -> &'static str {
        match self {
            KafkaError::UnknownServerError => "UNKNOWN_SERVER_ERROR",
            KafkaError::InvalidRequest => "INVALID_REQUEST",
            KafkaError::OutOfOrderSequenceNumber => "OUT_OF_ORDER_SEQUENCE_NUMBER",
            KafkaError::DuplicateSequenceNumber => "DUPLICATE_SEQUENCE_NUMBER",
            KafkaError::InvalidProducerEpoch => "INVALID_PRODUCER_EPOCH",
            KafkaError::InvalidTxnState => "INVALID_TXN_STATE",
            KafkaError::InvalidProducerIdMapping => "INVALID_PRODUCER_ID_MAPPING",
            KafkaError::InvalidTransactionTimeout => "INVALID_TRANSACTION_TIMEOUT",
            KafkaError::ConcurrentTransactions => "CONCURRENT_TRANSACTIONS",
            KafkaError::TransactionCoordinatorFenced => "TRANSACTION_COORDINATOR_FENCED",
            KafkaError::UnknownProducerId => "UNKNOWN_PRODUCER_ID",
            KafkaError::InvalidRecord => "INVALID_RECORD",
            KafkaError::ProducerFenced => "PRODUCER_FENCED",
            KafkaError::TransactionAbortable => "TRANSACTION_ABORTABLE",
            KafkaError::ReadOnlyTopic => "READ_ONLY_TOPIC",
        }
    }

    /// How an application-level client (a transactional producer as Kafka Streams drives it) handles the error
    /// when it arrives on the produce path.
    pub fn client_class(self) -> ClientErrorClass {
        match self {
            // KAFKA-16699: an expired or re-mapped transactional id means the producer was replaced.
            KafkaError::ProducerFenced | KafkaError::InvalidProducerIdMapping => ClientErrorClass::Fenced,
            KafkaError::InvalidProducerEpoch
            | KafkaError::OutOfOrderSequenceNumber
            | KafkaError::InvalidTxnState
            | KafkaError::TransactionAbortable
            | KafkaError::InvalidRecord => ClientErrorClass::Abortable,
            // Brokers no longer send it; clients treat it as success without offsets.
            KafkaError::DuplicateSequenceNumber | KafkaError::UnknownProducerId => {
                ClientErrorClass::Retriable
            }
            // The coordinator is busy completing or fencing: back off and retry.
            KafkaError::ConcurrentTransactions => ClientErrorClass::Retriable,
            // A client bug (a timeout above the maximum, an empty transactional id): retrying cannot help.
            KafkaError::InvalidRequest | KafkaError::InvalidTransactionTimeout => ClientErrorClass::Fatal,
            // A mirror partition stays read-only until failover; retrying against it cannot succeed.
            KafkaError::ReadOnlyTopic
            | KafkaError::TransactionCoordinatorFenced
            | KafkaError::UnknownServerError => ClientErrorClass::Fatal,
        }
    }

    /// The error with this name, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|error| error.name() == name)
    }
}

impl fmt::Display for KafkaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

/// Why an append (or a snapshot) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerStateError {
    /// The first sequence of a batch does not follow the producer's state.
    #[error("out of order sequence for producer {producer_id} epoch {epoch}: first sequence {first_sequence}, {reason}")]
    OutOfOrderSequence {
        /// Producer id.
        producer_id: i64,
        /// The batch's epoch.
        epoch: i16,
        /// The batch's first sequence.
        first_sequence: i32,
        /// What was expected.
        reason: String,
    },
    /// The batch (or marker) epoch is older than the stored one.
    #[error("invalid producer epoch for producer {producer_id}: {got} against current {current} at offset {offset}")]
    InvalidProducerEpoch {
        /// Producer id.
        producer_id: i64,
        /// The stored epoch.
        current: i16,
        /// The batch's epoch.
        got: i16,
        /// Offset of the batch or marker.
        offset: i64,
    },
    /// Transaction state does not allow this append.
    #[error("invalid transaction state for producer {producer_id}: {reason}")]
    InvalidTxnState {
        /// Producer id.
        producer_id: i64,
        /// What is inconsistent.
        reason: String,
    },
    /// A marker from an older transaction coordinator.
    #[error(
        "transaction coordinator fenced for producer {producer_id}: coordinator epoch {got} below {current}"
    )]
    TransactionCoordinatorFenced {
        /// Producer id.
        producer_id: i64,
        /// The stored coordinator epoch.
        current: i32,
        /// The marker's coordinator epoch.
        got: i32,
    },
    /// The batch is not acceptable for this origin.
    #[error("invalid record: {reason}")]
    InvalidRecord {
        /// What is wrong.
        reason: String,
    },
    /// A leader-side append of a marker without a known transaction version (Kafka: IllegalArgumentException).
    #[error(
        "transaction marker for producer {producer_id} appended by the leader without a transaction version"
    )]
    UnknownTransactionVersion {
        /// Producer id.
        producer_id: i64,
    },
    /// The batch could not be decoded.
    #[error("undecodable batch: {0}")]
    Decode(#[from] record_format::DecodeError),
    /// A producer snapshot file is corrupt.
    #[error("corrupt producer snapshot: {reason}")]
    CorruptSnapshot {
        /// What is wrong.
        reason: String,
    },
}

impl ProducerStateError {
    /// The Kafka error a broker would answer with.
    pub fn kafka_error(&self) -> KafkaError {
        match self {
            ProducerStateError::OutOfOrderSequence { .. } => KafkaError::OutOfOrderSequenceNumber,
            ProducerStateError::InvalidProducerEpoch { .. } => KafkaError::InvalidProducerEpoch,
            ProducerStateError::InvalidTxnState { .. } => KafkaError::InvalidTxnState,
            ProducerStateError::TransactionCoordinatorFenced { .. } => {
                KafkaError::TransactionCoordinatorFenced
            }
            ProducerStateError::InvalidRecord { .. } | ProducerStateError::Decode(_) => {
                KafkaError::InvalidRecord
            }
            ProducerStateError::UnknownTransactionVersion { .. }
            | ProducerStateError::CorruptSnapshot { .. } => KafkaError::UnknownServerError,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_match_kafka() {
        let expected = [
            ("OUT_OF_ORDER_SEQUENCE_NUMBER", 45),
            ("INVALID_PRODUCER_EPOCH", 47),
            ("INVALID_TXN_STATE", 48),
            ("INVALID_PRODUCER_ID_MAPPING", 49),
            ("TRANSACTION_COORDINATOR_FENCED", 52),
            ("INVALID_RECORD", 87),
            ("PRODUCER_FENCED", 90),
            ("READ_ONLY_TOPIC", 134),
        ];
        for (name, code) in expected {
            let error = KafkaError::from_name(name).unwrap();
            assert_eq!(error.code(), code, "{name}");
        }
    }

    #[test]
    fn invalid_producer_id_mapping_is_handled_like_producer_fenced() {
        assert_eq!(
            KafkaError::InvalidProducerIdMapping.client_class(),
            KafkaError::ProducerFenced.client_class()
        );
        assert_eq!(
            KafkaError::ProducerFenced.client_class(),
            ClientErrorClass::Fenced
        );
    }
}
