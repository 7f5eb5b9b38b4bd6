//! `mirror-admin`: the mirror administration contract in one place (ADR 0040, ADR 0061). A destination's mirror
//! links are administered over its Kafka port on a private API key: a request header v1 on
//! [`MIRROR_ADMIN_API_KEY`] version [`MIRROR_ADMIN_VERSION`] whose body is one JSON [`AdminRequest`], answered
//! by the correlation id and one JSON [`AdminResponse`]. The key is not advertised in ApiVersions: a Kafka broker
//! that does not know it closes the connection.
//!
//! Three parties speak it, all through this crate: `mirrorlog mirror` (its client call, over a
//! `mirror-link` connection), a mirror link asking a mirrorlog source where a failover cut a partition it once
//! mirrored from us (`AdminRequest::LastMirrored`, `mirror-link`'s `peer`), and `serve`, which answers (`broker`,
//! `node::mirror`).
//!
//! - [`messages`] — the requests, the answers and what they carry.
//! - [`encode_request`], [`decode_request`], [`encode_answer`], [`decode_answer`] — their bodies.

pub mod messages;

pub use messages::{
    shown_settings, AdminFailure, AdminRequest, AdminResponse, ConfigEntry, LinkActivity, LinkStatus,
    PartitionStatus,
};

/// The private API key of the administration requests (not advertised in ApiVersions).
pub const MIRROR_ADMIN_API_KEY: i16 = 10_000;

/// The only version of the administration requests.
pub const MIRROR_ADMIN_VERSION: i16 = 0;

/// Why a body is not an administration request or answer (or, never in practice, why one did not encode: the
/// messages hold strings, numbers and string-keyed maps only).
pub type CodecError = serde_json::Error;

/// A request's body.
pub fn encode_request(request: &AdminRequest) -> Result<Vec<u8>, CodecError> {
    serde_json::to_vec(request)
}

/// A request from its body.
pub fn decode_request(body: &[u8]) -> Result<AdminRequest, CodecError> {
    serde_json::from_slice(body)
}

/// An answer's body.
pub fn encode_answer(answer: &AdminResponse) -> Result<Vec<u8>, CodecError> {
    serde_json::to_vec(answer)
}

/// An answer from its body.
pub fn decode_answer(body: &[u8]) -> Result<AdminResponse, CodecError> {
    serde_json::from_slice(body)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test fails by panicking
mod tests {
    use super::*;

    #[test]
    fn a_request_and_an_answer_read_back_as_they_were_written() {
        let request = AdminRequest::LastMirrored {
            source_cluster_id: "cluster-a".to_owned(),
            topic: "orders".to_owned(),
            partition: 2,
        };
        let body = encode_request(&request).unwrap();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&body).ok(),
            Some(serde_json::json!({
                "action": "last_mirrored",
                "source_cluster_id": "cluster-a",
                "topic": "orders",
                "partition": 2,
            })),
            "the wire form ADR 0040 fixes"
        );
        assert_eq!(decode_request(&body).ok(), Some(request));
        let answer = AdminResponse::failed("unknown_link", "no link named x", Vec::new());
        assert_eq!(decode_answer(&encode_answer(&answer).unwrap()).ok(), Some(answer));
        assert!(decode_request(b"{\"action\": \"explode\"}").is_err());
    }
}
