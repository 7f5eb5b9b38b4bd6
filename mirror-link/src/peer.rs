//! What a link asks a source that is itself a mirrorlog node, beyond the Kafka protocol: the source's last
//! mirrored offset of a partition it once mirrored from us. In a failback the former source (us) mirrors from its
//! former destination; that peer recorded where its failover cut our partition, and the state machine aligns our
//! log there instead of copying the peer's whole log again.
//!
//! The question travels on the private administration key of ADR 0040 ([`MIRROR_ADMIN_API_KEY`]) as
//! `mirror_admin::AdminRequest::LastMirrored`, the contract `mirror-admin` holds (ADR 0061). A source
//! that is not a mirrorlog node (Apache Kafka) closes the connection on the unknown key: that is the answer "never
//! mirrored from you", and the machine copies from the peer's log start, as with any new source. Because that
//! answer empties the partition, a closing counts only when it is the broker's answer and not a fault: the
//! question is asked on a fresh connection whose ApiVersions the broker answered, and asked again on another
//! when the first closes; only two such closings in a row mean "not a mirrorlog node".

use mirror_admin::{AdminRequest, MIRROR_ADMIN_API_KEY, MIRROR_ADMIN_VERSION};

use crate::connection::KafkaConnection;
use crate::error::LinkError;

/// The largest answer to the question (a small JSON object).
const MAX_ANSWER_BYTES: usize = 64 << 10;

/// The last mirrored offset of `topic`/`partition` that the node at `address` recorded for the cluster
/// `mirrored_from`; `None` when it never mirrored the partition from there or is not a mirrorlog node. A fresh
/// connection of its own: a broker that closes it on the unknown key takes no shared connection down.
pub async fn last_mirrored_offset(
    address: &str,
    client_id: &str,
    timeout: std::time::Duration,
    security: &crate::ClientSecurity,
    mirrored_from: &str,
    topic: &str,
    partition: i32,
) -> Result<Option<i64>, LinkError> {
    let malformed = |reason: String| LinkError::Malformed {
        address: address.to_owned(),
        what: "the last mirrored offset".to_owned(),
        reason,
    };
    let body = mirror_admin::encode_request(&AdminRequest::LastMirrored {
        source_cluster_id: mirrored_from.to_owned(),
        topic: topic.to_owned(),
        partition,
    })
    .map_err(|error| malformed(format!("the question does not encode: {error}")))?;
    let mut closings = 0;
    let answer = loop {
        // `connect` has the broker answer ApiVersions: it is up and speaking Kafka when the question is asked.
        let mut connection =
            KafkaConnection::connect_secured(address, client_id, timeout, MAX_ANSWER_BYTES, security).await?;
        match connection
            .call_raw(MIRROR_ADMIN_API_KEY, MIRROR_ADMIN_VERSION, &body)
            .await
        {
            Ok(answer) => break answer,
            Err(LinkError::Io { source, .. }) if closed_on_the_request(&source) => {
                closings += 1;
                if closings == 2 {
                    // The broker's answer, twice: not a mirrorlog node.
                    return Ok(None);
                }
            }
            Err(error) => return Err(error),
        }
    };
    let answer = mirror_admin::decode_answer(&answer).map_err(|error| malformed(error.to_string()))?;
    match (answer.ok, answer.error) {
        (true, _) => Ok(answer.last_mirrored_offset),
        (false, Some(failure)) => Err(LinkError::Refused(format!(
            "{address} cannot tell its last mirrored offset of {topic}-{partition}: {} ({})",
            failure.message, failure.category
        ))),
        (false, None) => Err(LinkError::Refused(format!(
            "{address} cannot tell its last mirrored offset of {topic}-{partition}"
        ))),
    }
}

/// Whether a call failed because the broker closed the connection on it.
fn closed_on_the_request(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::BrokenPipe
    )
}
