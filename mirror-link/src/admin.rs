//! The client side of the mirror administration (ADR 0040, ADR 0061): one `mirror_admin::AdminRequest` sent to a
//! broker over a Kafka connection (TLS and SASL when the settings say so) and its answer read — what `mirrorlog
//! mirror` runs. The contract (key, version, messages, their bodies) is `mirror-admin`'s; this is the transport and
//! what its failures mean.

use std::time::Duration;

use mirror_admin::{AdminRequest, AdminResponse, MIRROR_ADMIN_API_KEY, MIRROR_ADMIN_VERSION};

use crate::{ClientSecurity, KafkaConnection, LinkError};

/// The largest administration answer a client accepts (a describe of every partition of a large link).
pub const MAX_ANSWER_BYTES: usize = 256 << 20;

/// Why an administration call failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminCallError {
    /// The broker cannot be reached.
    #[error("cannot reach {address}: {source}")]
    Unreachable {
        /// The broker's address.
        address: String,
        /// Why.
        source: LinkError,
    },
    /// The broker closed the connection on the request: it does not know the administration key.
    #[error(
        "{address} closed the connection on the mirror administration request: not a mirrorlog broker, or one \
         too old to mirror ({source})"
    )]
    NotMirrorlog {
        /// The broker's address.
        address: String,
        /// What the connection said.
        source: LinkError,
    },
    /// The call failed otherwise (a timeout, an answer too large).
    #[error("{address}: {source}")]
    Call {
        /// The broker's address.
        address: String,
        /// Why.
        source: LinkError,
    },
    /// The answer is not an administration answer.
    #[error("{address} answered something that is not a mirror answer: {reason}")]
    Answer {
        /// The broker's address.
        address: String,
        /// What is wrong.
        reason: String,
    },
}

/// Sends one administration request to the broker at `address` (over TLS and SASL when `security` says so) and
/// reads its answer, within `timeout` and at most [`MAX_ANSWER_BYTES`].
pub async fn call(
    address: &str,
    request: &AdminRequest,
    timeout: Duration,
    security: &ClientSecurity,
) -> Result<AdminResponse, AdminCallError> {
    let mut connection = KafkaConnection::connect_secured(
        address,
        "mirrorlog-mirror-admin",
        timeout,
        MAX_ANSWER_BYTES,
        security,
    )
    .await
    .map_err(|source| AdminCallError::Unreachable {
        address: address.to_owned(),
        source,
    })?;
    let body = mirror_admin::encode_request(request).map_err(|error| AdminCallError::Answer {
        address: address.to_owned(),
        reason: format!("the request does not encode: {error}"),
    })?;
    let answer = connection
        .call_raw(MIRROR_ADMIN_API_KEY, MIRROR_ADMIN_VERSION, &body)
        .await
        .map_err(|source| match source {
            LinkError::Io { .. } => AdminCallError::NotMirrorlog {
                address: address.to_owned(),
                source,
            },
            source => AdminCallError::Call {
                address: address.to_owned(),
                source,
            },
        })?;
    mirror_admin::decode_answer(&answer).map_err(|error| AdminCallError::Answer {
        address: address.to_owned(),
        reason: error.to_string(),
    })
}
