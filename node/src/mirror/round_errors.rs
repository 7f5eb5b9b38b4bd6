//! Why a mirrored partition's round failed, as `describe --json` and the metrics count it
//! (`mirrorlog_mirror_partition_failed_rounds_total{error=…}`): a bounded set of names an operator can alert on,
//! the reason in words staying in the partition's `error`.
//!
//! A round failed when it left the partition FAILED with a failure it did not have before (a retry that fails
//! again is a new failure), or when the local log refused the write. A partition's start, a resume, a failover's
//! STOPPING and a source topic found replaced are counted the same way. The name is Kafka's name of the error the
//! source answered where it answered one — the codes of Kafka's table this project knows, any other as
//! [`OTHER_KAFKA_ERROR`], so a source sending arbitrary codes cannot grow the label set — else what happened.

use mirror_fsm::{DriverError, FetchError, MirrorDriver};

/// Kafka's TOPIC_AUTHORIZATION_FAILED: the link's principal may not do that to the topic at the source.
pub const TOPIC_AUTHORIZATION_FAILED: i16 = kafka_types::KafkaError::TopicAuthorizationFailed.code();

/// A Kafka error code the source answered that this project's table does not name.
pub const OTHER_KAFKA_ERROR: &str = "OTHER_KAFKA_ERROR";
/// No Kafka error: the connection failed or closed, the source did not answer in time, or its answer could not be
/// read (retried).
pub const CONNECTION: &str = "CONNECTION";
/// No Kafka error, and nothing a retry can help: an answer the link cannot use (a protocol version the source
/// does not serve, another cluster's id, a failed authentication), or a source topic deleted and created again.
pub const SOURCE_REFUSED: &str = "SOURCE_REFUSED";
/// The source answered and its answer was refused here (a CRC that does not match, a batch that does not follow
/// the log, another cluster's answer).
pub const BATCH_REFUSED: &str = "BATCH_REFUSED";
/// A FAILED partition's retry failed again before it fetched (its alignment with the source, or a STOPPING
/// step it resumes).
pub const RETRY: &str = "RETRY";
/// A step of the machine other than a fetch failed (aligning with the source in PREPARING or LOG_TRUNCATION, a
/// STOPPING step).
pub const STEP: &str = "STEP";
/// The local log failed (storage), or the partition's mirror record does not decode.
pub const STORAGE: &str = "STORAGE";
/// The machine refused its own event (a bug).
pub const INTERNAL: &str = "INTERNAL";

/// The name of a fetch that failed with `error`.
pub fn fetch_error_name(error: &FetchError) -> &'static str {
    match error.code {
        Some(code) => kafka_error_name(code),
        None if error.retryable => CONNECTION,
        None => SOURCE_REFUSED,
    }
}

/// Kafka's name of an error `code` a source answered, or [`OTHER_KAFKA_ERROR`].
pub fn kafka_error_name(code: i16) -> &'static str {
    kafka_types::KafkaError::from_code(code).map_or(OTHER_KAFKA_ERROR, |known| known.name())
}

/// The name of the failure a round left the driver with: Kafka's name of the source's error when the failure
/// records one (a retry's alignment refused by the source), else `otherwise` (what the round knows of itself).
pub fn failure_name(driver: &MirrorDriver, otherwise: &'static str) -> &'static str {
    driver
        .state()
        .failure()
        .and_then(|failure| failure.code)
        .map_or(otherwise, kafka_error_name)
}

/// The name of a step the driver could not take.
pub fn driver_error_name(error: &DriverError) -> &'static str {
    match error {
        DriverError::Log(_) | DriverError::CorruptRecord { .. } => STORAGE,
        _ => INTERNAL,
    }
}

/// The partition's failure as it stands (`None`: not FAILED), to tell after a round whether the round failed it.
pub fn failure_now(driver: &MirrorDriver) -> Option<mirror_fsm::Failure> {
    driver.state().failure().cloned()
}

/// Whether a round that began with `before` left the driver with a new failure.
pub fn failed_again(before: Option<&mirror_fsm::Failure>, driver: &MirrorDriver) -> bool {
    driver
        .state()
        .failure()
        .is_some_and(|after| before != Some(after))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kafka_code_is_named_as_kafka_names_it_and_an_unknown_one_is_bounded() {
        let not_leader = FetchError::new("x", true).with_code(6);
        assert_eq!(fetch_error_name(&not_leader), "NOT_LEADER_OR_FOLLOWER");
        let unknown = FetchError::new("x", false).with_code(12_345);
        assert_eq!(fetch_error_name(&unknown), OTHER_KAFKA_ERROR);
    }

    #[test]
    fn an_error_without_a_code_is_a_connection_when_retried_and_refused_otherwise() {
        assert_eq!(fetch_error_name(&FetchError::new("closed", true)), CONNECTION);
        assert_eq!(
            fetch_error_name(&FetchError::new("other cluster", false)),
            SOURCE_REFUSED
        );
    }
}
