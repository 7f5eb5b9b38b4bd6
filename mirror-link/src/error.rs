//! The link's error enum.

/// Why a call to the source failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// The connection failed or was closed.
    #[error("connection to {address}: {source}")]
    Io {
        /// The broker.
        address: String,
        /// What failed.
        source: std::io::Error,
    },
    /// The broker did not answer in time.
    #[error("{address} did not answer {what} within {timeout_ms} ms")]
    Timeout {
        /// The broker.
        address: String,
        /// The request.
        what: String,
        /// The limit.
        timeout_ms: u64,
    },
    /// A response frame announced more bytes than the link accepts.
    #[error("{address} announced a {size}-byte response to {what}; at most {limit} are accepted")]
    ResponseTooLarge {
        /// The broker.
        address: String,
        /// The request.
        what: String,
        /// The announced size.
        size: i64,
        /// The bound.
        limit: usize,
    },
    /// The response could not be decoded or does not answer the request.
    #[error("{address}: malformed response to {what}: {reason}")]
    Malformed {
        /// The broker.
        address: String,
        /// The request.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// The broker does not serve a version of an API the link needs.
    #[error("{address} serves no usable version of {api} (it offers {offered})")]
    Unsupported {
        /// The broker.
        address: String,
        /// The API.
        api: String,
        /// What it offers.
        offered: String,
    },
    /// The broker answered with a Kafka error (named as Kafka names it, e.g. `OFFSET_OUT_OF_RANGE (1)`).
    #[error("{what}: {} ({code}){detail}", kafka_error_name(*.code))]
    Kafka {
        /// The request and partition.
        what: String,
        /// The error code.
        code: i16,
        /// More about it.
        detail: String,
    },
    /// The source's bytes cannot be mirrored (a malformed batch, offsets that go backwards).
    #[error("source data refused: {0}")]
    Refused(String),
}

/// Kafka's name of an error code (`UNKNOWN_ERROR_CODE` for one this build does not know; the code follows it).
fn kafka_error_name(code: i16) -> &'static str {
    kafka_types::KafkaError::from_code(code).map_or("UNKNOWN_ERROR_CODE", kafka_types::KafkaError::name)
}

impl LinkError {
    /// Whether retrying (after reconnecting) can help.
    pub fn retryable(&self) -> bool {
        match self {
            LinkError::Io { .. } | LinkError::Timeout { .. } | LinkError::Malformed { .. } => true,
            // NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION (metadata may lag),
            // REQUEST_TIMED_OUT, NETWORK_EXCEPTION, COORDINATOR/BROKER not available, KAFKA_STORAGE_ERROR,
            // UNKNOWN_LEADER_EPOCH, FENCED_LEADER_EPOCH, OFFSET_NOT_AVAILABLE.
            LinkError::Kafka { code, .. } => matches!(code, 3 | 5 | 6 | 7 | 13 | 15 | 56 | 74 | 76 | 78),
            LinkError::ResponseTooLarge { .. } | LinkError::Unsupported { .. } | LinkError::Refused(_) => {
                false
            }
        }
    }
}
