//! Kafka's error codes: [`KafkaError`] (name and wire code) and [`ClientErrorClass`], what a client does with
//! each (kafka-semantics §9), including the *fenced* class where `INVALID_PRODUCER_ID_MAPPING` belongs for
//! applications (KAFKA-16699). "No error" (code 0) is not a `KafkaError`: an answer without one carries
//! [`NO_ERROR`].

use std::fmt;

/// The wire code of an answer without an error.
pub const NO_ERROR: i16 = 0;

/// The Kafka error codes mirrorlog answers or acts on (Kafka's `Errors` enum, by name and wire code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KafkaError {
    /// -1: a broker-side programming error (Kafka's `IllegalArgumentException` path).
    UnknownServerError,
    /// 1: the requested offset is outside the log.
    OffsetOutOfRange,
    /// 2: a batch failed its CRC check.
    CorruptMessage,
    /// 3: the topic or partition does not exist here.
    UnknownTopicOrPartition,
    /// 5: a partition has no leader (an election is under way).
    LeaderNotAvailable,
    /// 6: this broker does not lead the partition (its leadership moved).
    NotLeaderOrFollower,
    /// 7: the broker did not complete the request in time.
    RequestTimedOut,
    /// 8: the broker is not available (shutting down, or not yet up).
    BrokerNotAvailable,
    /// 13: the broker lost its connection to another while answering.
    NetworkException,
    /// 15: the coordinator is not available (loading, or moving).
    CoordinatorNotAvailable,
    /// 74: the request named a leader epoch older than the broker's.
    FencedLeaderEpoch,
    /// 75: the request named a leader epoch newer than the broker knows.
    UnknownLeaderEpoch,
    /// 78: the leader's high watermark is not caught up yet (after an election).
    OffsetNotAvailable,
    /// 100: no topic has this id here (deleted, or created again).
    UnknownTopicId,
    /// 103: the topic id a request named is not the id of the partition's log here (the topic was created again).
    InconsistentTopicId,
    /// 10: a batch is larger than `message.max.bytes` allows.
    MessageTooLarge,
    /// 21: a produce's `acks` is not −1, 0 or 1.
    InvalidRequiredAcks,
    /// 40: a config name or value is not acceptable (CreateTopics, AlterConfigs, IncrementalAlterConfigs).
    InvalidConfig,
    /// 32: a record's timestamp is further from the broker's clock than the topic allows.
    InvalidTimestamp,
    /// 17: the topic name is not acceptable (e.g. an internal name).
    InvalidTopic,
    /// 35: the request version is not served.
    UnsupportedVersion,
    /// 36: CreateTopics of a topic that exists.
    TopicAlreadyExists,
    /// 37: the partition count is not acceptable.
    InvalidPartitions,
    /// 38: the replication factor is not acceptable.
    InvalidReplicationFactor,
    /// 22: the group member's generation is not the group's.
    IllegalGeneration,
    /// 23: the member's protocol type or protocols do not match the group's.
    InconsistentGroupProtocol,
    /// 24: the group id is empty.
    InvalidGroupId,
    /// 25: the group does not know the member id.
    UnknownMemberId,
    /// 26: the session timeout is outside the broker's bounds.
    InvalidSessionTimeout,
    /// 27: the group is rebalancing: rejoin.
    RebalanceInProgress,
    /// 68: DeleteGroups of a group that still has members.
    NonEmptyGroup,
    /// 69: the group does not exist.
    GroupIdNotFound,
    /// 79: a new member must join again with the member id the answer carries (KIP-394).
    MemberIdRequired,
    /// 81: the group holds as many members as the broker allows.
    GroupMaxSizeReached,
    /// 82: another member took over the static member's `group.instance.id`.
    FencedInstanceId,
    /// 86: OffsetDelete of a partition of a topic the group's members subscribe to.
    GroupSubscribedToTopic,
    /// 88: a transaction's offsets for the partition are pending (OffsetFetch with `require_stable`): retry.
    UnstableOffsetCommit,
    /// 55: the request was not attempted because another part of it failed.
    OperationNotAttempted,
    /// 56: the partition's storage failed (or the partition is closed).
    KafkaStorageError,
    /// 45: the sequence number does not follow the producer's last one.
    OutOfOrderSequenceNumber,
    /// 46: a duplicate (no longer sent by brokers; clients treat it as success).
    DuplicateSequenceNumber,
    /// 47: the producer's epoch is older than the stored one.
    InvalidProducerEpoch,
    /// 44: the broker's policy refuses the request (e.g. deleting a topic a mirror link holds).
    PolicyViolation,
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
    /// 105: the coordinator holds no such transactional id (DescribeTransactions).
    TransactionalIdNotFound,
    /// 114: DescribeCluster asked a broker for the controllers' endpoints.
    MismatchedEndpointType,
    /// 120: the transaction must be aborted.
    TransactionAbortable,
    /// 33: the SASL mechanism the client asked for is not enabled on the listener.
    UnsupportedSaslMechanism,
    /// 34: a SASL request out of its place in the exchange (or on a listener without SASL).
    IllegalSaslState,
    /// 58: the credentials were refused (the message never says whether the user or the password was wrong).
    SaslAuthenticationFailed,
    /// 29: the principal may not do this to the topic (an ACL denies it, or none allows it).
    TopicAuthorizationFailed,
    /// 30: the principal may not do this to the consumer group.
    GroupAuthorizationFailed,
    /// 31: the principal may not do this to the cluster.
    ClusterAuthorizationFailed,
    /// 53: the principal may not use the transactional id.
    TransactionalIdAuthorizationFailed,
    /// 54: the ACL APIs on a broker without an authorizer.
    SecurityDisabled,
    /// 91: the named resource (a user's credential) does not exist.
    ResourceNotFound,
    /// 92: one request names the same resource twice.
    DuplicateResource,
    /// 93: a credential below the accepted bounds (an empty user, too few or too many iterations).
    UnacceptableCredential,
    /// 128: a regular expression that does not compile (ListTransactions v2's transactional id pattern).
    InvalidRegularExpression,
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
    pub const ALL: [KafkaError; 68] = [
        KafkaError::UnknownServerError,
        KafkaError::OffsetOutOfRange,
        KafkaError::CorruptMessage,
        KafkaError::UnknownTopicOrPartition,
        KafkaError::LeaderNotAvailable,
        KafkaError::NotLeaderOrFollower,
        KafkaError::RequestTimedOut,
        KafkaError::BrokerNotAvailable,
        KafkaError::MessageTooLarge,
        KafkaError::NetworkException,
        KafkaError::CoordinatorNotAvailable,
        KafkaError::InvalidTopic,
        KafkaError::InvalidRequiredAcks,
        KafkaError::IllegalGeneration,
        KafkaError::InconsistentGroupProtocol,
        KafkaError::InvalidGroupId,
        KafkaError::UnknownMemberId,
        KafkaError::InvalidSessionTimeout,
        KafkaError::RebalanceInProgress,
        KafkaError::InvalidTimestamp,
        KafkaError::UnsupportedVersion,
        KafkaError::TopicAlreadyExists,
        KafkaError::InvalidPartitions,
        KafkaError::InvalidReplicationFactor,
        KafkaError::InvalidConfig,
        KafkaError::InvalidRequest,
        KafkaError::PolicyViolation,
        KafkaError::OutOfOrderSequenceNumber,
        KafkaError::DuplicateSequenceNumber,
        KafkaError::InvalidProducerEpoch,
        KafkaError::InvalidTxnState,
        KafkaError::InvalidProducerIdMapping,
        KafkaError::InvalidTransactionTimeout,
        KafkaError::ConcurrentTransactions,
        KafkaError::TransactionCoordinatorFenced,
        KafkaError::OperationNotAttempted,
        KafkaError::KafkaStorageError,
        KafkaError::UnknownProducerId,
        KafkaError::NonEmptyGroup,
        KafkaError::GroupIdNotFound,
        KafkaError::FencedLeaderEpoch,
        KafkaError::UnknownLeaderEpoch,
        KafkaError::OffsetNotAvailable,
        KafkaError::MemberIdRequired,
        KafkaError::GroupMaxSizeReached,
        KafkaError::FencedInstanceId,
        KafkaError::GroupSubscribedToTopic,
        KafkaError::InvalidRecord,
        KafkaError::UnstableOffsetCommit,
        KafkaError::ProducerFenced,
        KafkaError::UnknownTopicId,
        KafkaError::InconsistentTopicId,
        KafkaError::TransactionalIdNotFound,
        KafkaError::MismatchedEndpointType,
        KafkaError::TransactionAbortable,
        KafkaError::ReadOnlyTopic,
        KafkaError::UnsupportedSaslMechanism,
        KafkaError::IllegalSaslState,
        KafkaError::SaslAuthenticationFailed,
        KafkaError::ResourceNotFound,
        KafkaError::DuplicateResource,
        KafkaError::UnacceptableCredential,
        KafkaError::InvalidRegularExpression,
        KafkaError::TopicAuthorizationFailed,
        KafkaError::GroupAuthorizationFailed,
        KafkaError::ClusterAuthorizationFailed,
        KafkaError::TransactionalIdAuthorizationFailed,
        KafkaError::SecurityDisabled,
    ];

    /// The wire code.
    #[inline]
    pub const fn code(self) -> i16 {
        match self {
            KafkaError::UnknownServerError => -1,
            KafkaError::OffsetOutOfRange => 1,
            KafkaError::CorruptMessage => 2,
            KafkaError::MessageTooLarge => 10,
            KafkaError::InvalidRequiredAcks => 21,
            KafkaError::InvalidConfig => 40,
            KafkaError::PolicyViolation => 44,
            KafkaError::InvalidTimestamp => 32,
            KafkaError::UnknownTopicOrPartition => 3,
            KafkaError::LeaderNotAvailable => 5,
            KafkaError::NotLeaderOrFollower => 6,
            KafkaError::RequestTimedOut => 7,
            KafkaError::BrokerNotAvailable => 8,
            KafkaError::NetworkException => 13,
            KafkaError::CoordinatorNotAvailable => 15,
            KafkaError::FencedLeaderEpoch => 74,
            KafkaError::UnknownLeaderEpoch => 75,
            KafkaError::OffsetNotAvailable => 78,
            KafkaError::UnknownTopicId => 100,
            KafkaError::InconsistentTopicId => 103,
            KafkaError::InvalidTopic => 17,
            KafkaError::UnsupportedVersion => 35,
            KafkaError::TopicAlreadyExists => 36,
            KafkaError::InvalidPartitions => 37,
            KafkaError::InvalidReplicationFactor => 38,
            KafkaError::IllegalGeneration => 22,
            KafkaError::InconsistentGroupProtocol => 23,
            KafkaError::InvalidGroupId => 24,
            KafkaError::UnknownMemberId => 25,
            KafkaError::InvalidSessionTimeout => 26,
            KafkaError::RebalanceInProgress => 27,
            KafkaError::NonEmptyGroup => 68,
            KafkaError::GroupIdNotFound => 69,
            KafkaError::MemberIdRequired => 79,
            KafkaError::GroupMaxSizeReached => 81,
            KafkaError::UnstableOffsetCommit => 88,
            KafkaError::GroupSubscribedToTopic => 86,
            KafkaError::FencedInstanceId => 82,
            KafkaError::OperationNotAttempted => 55,
            KafkaError::KafkaStorageError => 56,
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
            KafkaError::TransactionalIdNotFound => 105,
            KafkaError::MismatchedEndpointType => 114,
            KafkaError::TransactionAbortable => 120,
            KafkaError::ReadOnlyTopic => 134,
            KafkaError::UnsupportedSaslMechanism => 33,
            KafkaError::IllegalSaslState => 34,
            KafkaError::SaslAuthenticationFailed => 58,
            KafkaError::TopicAuthorizationFailed => 29,
            KafkaError::GroupAuthorizationFailed => 30,
            KafkaError::ClusterAuthorizationFailed => 31,
            KafkaError::TransactionalIdAuthorizationFailed => 53,
            KafkaError::SecurityDisabled => 54,
            KafkaError::ResourceNotFound => 91,
            KafkaError::DuplicateResource => 92,
            KafkaError::UnacceptableCredential => 93,
            KafkaError::InvalidRegularExpression => 128,
        }
    }

    /// Kafka's name (`Errors` enum constant).
    pub fn name(self) -> &'static str {
        match self {
            KafkaError::UnknownServerError => "UNKNOWN_SERVER_ERROR",
            KafkaError::OffsetOutOfRange => "OFFSET_OUT_OF_RANGE",
            KafkaError::CorruptMessage => "CORRUPT_MESSAGE",
            KafkaError::MessageTooLarge => "MESSAGE_TOO_LARGE",
            KafkaError::InvalidRequiredAcks => "INVALID_REQUIRED_ACKS",
            KafkaError::InvalidConfig => "INVALID_CONFIG",
            KafkaError::PolicyViolation => "POLICY_VIOLATION",
            KafkaError::InvalidTimestamp => "INVALID_TIMESTAMP",
            KafkaError::UnknownTopicOrPartition => "UNKNOWN_TOPIC_OR_PARTITION",
            KafkaError::LeaderNotAvailable => "LEADER_NOT_AVAILABLE",
            KafkaError::NotLeaderOrFollower => "NOT_LEADER_OR_FOLLOWER",
            KafkaError::RequestTimedOut => "REQUEST_TIMED_OUT",
            KafkaError::BrokerNotAvailable => "BROKER_NOT_AVAILABLE",
            KafkaError::NetworkException => "NETWORK_EXCEPTION",
            KafkaError::CoordinatorNotAvailable => "COORDINATOR_NOT_AVAILABLE",
            KafkaError::FencedLeaderEpoch => "FENCED_LEADER_EPOCH",
            KafkaError::UnknownLeaderEpoch => "UNKNOWN_LEADER_EPOCH",
            KafkaError::OffsetNotAvailable => "OFFSET_NOT_AVAILABLE",
            KafkaError::UnknownTopicId => "UNKNOWN_TOPIC_ID",
            KafkaError::InconsistentTopicId => "INCONSISTENT_TOPIC_ID",
            KafkaError::InvalidTopic => "INVALID_TOPIC_EXCEPTION",
            KafkaError::UnsupportedVersion => "UNSUPPORTED_VERSION",
            KafkaError::TopicAlreadyExists => "TOPIC_ALREADY_EXISTS",
            KafkaError::InvalidPartitions => "INVALID_PARTITIONS",
            KafkaError::InvalidReplicationFactor => "INVALID_REPLICATION_FACTOR",
            KafkaError::IllegalGeneration => "ILLEGAL_GENERATION",
            KafkaError::InconsistentGroupProtocol => "INCONSISTENT_GROUP_PROTOCOL",
            KafkaError::InvalidGroupId => "INVALID_GROUP_ID",
            KafkaError::UnknownMemberId => "UNKNOWN_MEMBER_ID",
            KafkaError::InvalidSessionTimeout => "INVALID_SESSION_TIMEOUT",
            KafkaError::RebalanceInProgress => "REBALANCE_IN_PROGRESS",
            KafkaError::NonEmptyGroup => "NON_EMPTY_GROUP",
            KafkaError::GroupIdNotFound => "GROUP_ID_NOT_FOUND",
            KafkaError::MemberIdRequired => "MEMBER_ID_REQUIRED",
            KafkaError::GroupMaxSizeReached => "GROUP_MAX_SIZE_REACHED",
            KafkaError::UnstableOffsetCommit => "UNSTABLE_OFFSET_COMMIT",
            KafkaError::GroupSubscribedToTopic => "GROUP_SUBSCRIBED_TO_TOPIC",
            KafkaError::FencedInstanceId => "FENCED_INSTANCE_ID",
            KafkaError::OperationNotAttempted => "OPERATION_NOT_ATTEMPTED",
            KafkaError::KafkaStorageError => "KAFKA_STORAGE_ERROR",
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
            KafkaError::TransactionalIdNotFound => "TRANSACTIONAL_ID_NOT_FOUND",
            KafkaError::MismatchedEndpointType => "MISMATCHED_ENDPOINT_TYPE",
            KafkaError::TransactionAbortable => "TRANSACTION_ABORTABLE",
            KafkaError::ReadOnlyTopic => "READ_ONLY_TOPIC",
            KafkaError::UnsupportedSaslMechanism => "UNSUPPORTED_SASL_MECHANISM",
            KafkaError::IllegalSaslState => "ILLEGAL_SASL_STATE",
            KafkaError::SaslAuthenticationFailed => "SASL_AUTHENTICATION_FAILED",
            KafkaError::TopicAuthorizationFailed => "TOPIC_AUTHORIZATION_FAILED",
            KafkaError::GroupAuthorizationFailed => "GROUP_AUTHORIZATION_FAILED",
            KafkaError::ClusterAuthorizationFailed => "CLUSTER_AUTHORIZATION_FAILED",
            KafkaError::TransactionalIdAuthorizationFailed => "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
            KafkaError::SecurityDisabled => "SECURITY_DISABLED",
            KafkaError::ResourceNotFound => "RESOURCE_NOT_FOUND",
            KafkaError::DuplicateResource => "DUPLICATE_RESOURCE",
            KafkaError::UnacceptableCredential => "UNACCEPTABLE_CREDENTIAL",
            KafkaError::InvalidRegularExpression => "INVALID_REGULAR_EXPRESSION",
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
            // The batch is too large to ever be accepted: the client fails the records (or splits the batch).
            KafkaError::MessageTooLarge | KafkaError::InvalidRequiredAcks => ClientErrorClass::Fatal,
            // The records are refused as they are; the transaction (if any) must abort.
            KafkaError::InvalidTimestamp => ClientErrorClass::Abortable,
            // Brokers no longer send it; clients treat it as success without offsets.
            KafkaError::DuplicateSequenceNumber | KafkaError::UnknownProducerId => {
                ClientErrorClass::Retriable
            }
            // The coordinator is busy completing or fencing: back off and retry. Kafka's clients retry a storage
            // error, an unknown partition (metadata may lag) and a corrupt batch (re-sent from the buffer).
            KafkaError::ConcurrentTransactions
            | KafkaError::UnstableOffsetCommit
            | KafkaError::KafkaStorageError
            | KafkaError::UnknownTopicOrPartition
            | KafkaError::CorruptMessage => ClientErrorClass::Retriable,
            // Leadership, availability and metadata that lag (Kafka's retriable and invalid-metadata
            // exceptions): refresh metadata, back off and send again.
            KafkaError::LeaderNotAvailable
            | KafkaError::NotLeaderOrFollower
            | KafkaError::RequestTimedOut
            | KafkaError::BrokerNotAvailable
            | KafkaError::NetworkException
            | KafkaError::CoordinatorNotAvailable
            | KafkaError::FencedLeaderEpoch
            | KafkaError::UnknownLeaderEpoch
            | KafkaError::OffsetNotAvailable
            | KafkaError::UnknownTopicId
            | KafkaError::InconsistentTopicId => ClientErrorClass::Retriable,
            // A produce that was not attempted because another part of the request failed.
            KafkaError::OperationNotAttempted => ClientErrorClass::Abortable,
            // Answers of requests the produce path never sends; a client reports them to its caller.
            KafkaError::OffsetOutOfRange
            | KafkaError::InvalidTopic
            | KafkaError::UnsupportedVersion
            | KafkaError::TopicAlreadyExists
            | KafkaError::InvalidPartitions
            | KafkaError::InvalidReplicationFactor
            | KafkaError::InvalidConfig
            | KafkaError::PolicyViolation
            | KafkaError::TransactionalIdNotFound
            | KafkaError::MismatchedEndpointType => ClientErrorClass::Fatal,
            // Authentication and credential administration: the client's configuration must change.
            KafkaError::UnsupportedSaslMechanism
            | KafkaError::IllegalSaslState
            | KafkaError::SaslAuthenticationFailed
            | KafkaError::ResourceNotFound
            | KafkaError::DuplicateResource
            | KafkaError::UnacceptableCredential
            | KafkaError::InvalidRegularExpression => ClientErrorClass::Fatal,
            // Authorization: an ACL must change before the request can succeed (Kafka's clients raise these).
            KafkaError::TopicAuthorizationFailed
            | KafkaError::GroupAuthorizationFailed
            | KafkaError::ClusterAuthorizationFailed
            | KafkaError::TransactionalIdAuthorizationFailed
            | KafkaError::SecurityDisabled => ClientErrorClass::Fatal,
            // A transactional offset commit whose group moved on (KIP-447): the transaction must abort.
            KafkaError::IllegalGeneration | KafkaError::UnknownMemberId | KafkaError::RebalanceInProgress => {
                ClientErrorClass::Abortable
            }
            // Group membership answers the produce path never sees; a static member replaced cannot continue.
            KafkaError::InconsistentGroupProtocol
            | KafkaError::InvalidGroupId
            | KafkaError::InvalidSessionTimeout
            | KafkaError::MemberIdRequired
            | KafkaError::NonEmptyGroup
            | KafkaError::GroupIdNotFound
            | KafkaError::GroupMaxSizeReached
            | KafkaError::FencedInstanceId
            | KafkaError::GroupSubscribedToTopic => ClientErrorClass::Fatal,
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

    /// The error with this wire code, if it is one of [`Self::ALL`].
    pub fn from_code(code: i16) -> Option<Self> {
        Self::ALL.into_iter().find(|error| error.code() == code)
    }
}

impl fmt::Display for KafkaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_match_kafka() {
        let expected = [
            ("OFFSET_OUT_OF_RANGE", 1),
            ("CORRUPT_MESSAGE", 2),
            ("UNKNOWN_TOPIC_OR_PARTITION", 3),
            ("LEADER_NOT_AVAILABLE", 5),
            ("NOT_LEADER_OR_FOLLOWER", 6),
            ("REQUEST_TIMED_OUT", 7),
            ("BROKER_NOT_AVAILABLE", 8),
            ("NETWORK_EXCEPTION", 13),
            ("COORDINATOR_NOT_AVAILABLE", 15),
            ("FENCED_LEADER_EPOCH", 74),
            ("UNKNOWN_LEADER_EPOCH", 75),
            ("OFFSET_NOT_AVAILABLE", 78),
            ("UNKNOWN_TOPIC_ID", 100),
            ("INVALID_TOPIC_EXCEPTION", 17),
            ("UNSUPPORTED_VERSION", 35),
            ("TOPIC_ALREADY_EXISTS", 36),
            ("INVALID_PARTITIONS", 37),
            ("INVALID_REPLICATION_FACTOR", 38),
            ("INVALID_CONFIG", 40),
            ("POLICY_VIOLATION", 44),
            ("ILLEGAL_GENERATION", 22),
            ("INCONSISTENT_GROUP_PROTOCOL", 23),
            ("INVALID_GROUP_ID", 24),
            ("UNKNOWN_MEMBER_ID", 25),
            ("INVALID_SESSION_TIMEOUT", 26),
            ("REBALANCE_IN_PROGRESS", 27),
            ("NON_EMPTY_GROUP", 68),
            ("GROUP_ID_NOT_FOUND", 69),
            ("MEMBER_ID_REQUIRED", 79),
            ("GROUP_MAX_SIZE_REACHED", 81),
            ("UNSTABLE_OFFSET_COMMIT", 88),
            ("GROUP_SUBSCRIBED_TO_TOPIC", 86),
            ("FENCED_INSTANCE_ID", 82),
            ("OUT_OF_ORDER_SEQUENCE_NUMBER", 45),
            ("INVALID_PRODUCER_EPOCH", 47),
            ("INVALID_TXN_STATE", 48),
            ("INVALID_PRODUCER_ID_MAPPING", 49),
            ("TRANSACTION_COORDINATOR_FENCED", 52),
            ("OPERATION_NOT_ATTEMPTED", 55),
            ("KAFKA_STORAGE_ERROR", 56),
            ("INVALID_RECORD", 87),
            ("PRODUCER_FENCED", 90),
            ("READ_ONLY_TOPIC", 134),
            ("TRANSACTIONAL_ID_NOT_FOUND", 105),
        ];
        for (name, code) in expected {
            let error = KafkaError::from_name(name).unwrap();
            assert_eq!(error.code(), code, "{name}");
            assert_eq!(KafkaError::from_code(code), Some(error), "{name}");
        }
    }

    #[test]
    fn every_error_has_one_code_and_one_name() {
        let mut codes: Vec<i16> = KafkaError::ALL.iter().map(|e| e.code()).collect();
        let mut names: Vec<&str> = KafkaError::ALL.iter().map(|e| e.name()).collect();
        codes.sort_unstable();
        names.sort_unstable();
        codes.dedup();
        names.dedup();
        assert_eq!(codes.len(), KafkaError::ALL.len());
        assert_eq!(names.len(), KafkaError::ALL.len());
        assert!(!codes.contains(&NO_ERROR));
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
