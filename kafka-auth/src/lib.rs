//! Kafka's SASL mechanisms and principals, without I/O.
//!
//! - [`scram`]: SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka runs them: the stored credential
//!   ([`ScramCredential`]: salt, iterations, `StoredKey`, `ServerKey`, never a password), the server's side of the
//!   exchange ([`ScramServer`]) and the client's ([`ScramClient`]).
//! - [`plain`]: SASL/PLAIN (RFC 4616) messages, checked against the same stored SCRAM credentials.
//! - [`principal`]: [`Principal`], Kafka's `User:NAME`, and the one a TLS client certificate names.
//! - [`acl`]: Kafka's ACL model ([`acl::AclBinding`], [`acl::AclFilter`]) and `StandardAuthorizer`'s decision
//!   ([`acl::authorize`]).
//! - [`protocol`]: [`SecurityProtocol`] (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) and [`SaslMechanism`].
//!
//! The broker (crate `broker`) drives these over SaslHandshake / SaslAuthenticate; the node (crate `node`) stores
//! the credentials; the mirror link authenticates to a secured source with the client side.

pub mod acl;
pub mod plain;
pub mod principal;
pub mod protocol;
pub mod scram;

pub use plain::PlainMessage;
pub use principal::Principal;
pub use protocol::{SaslMechanism, SecurityProtocol};
pub use scram::{ScramClient, ScramCredential, ScramMechanism, ScramServer};

/// Why an exchange failed. [`AuthError::InvalidCredentials`] is the only answer to a wrong user or password, and
/// it does not say which of the two was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The message does not have the mechanism's syntax.
    #[error("malformed {mechanism} message: {reason}")]
    Malformed {
        /// The mechanism's name.
        mechanism: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A message arrived when the exchange expected another (or after it ended).
    #[error("{mechanism} message out of order: {reason}")]
    OutOfOrder {
        /// The mechanism's name.
        mechanism: &'static str,
        /// What was expected.
        reason: &'static str,
    },
    /// The user is unknown or the password or proof is wrong.
    #[error("invalid credentials")]
    InvalidCredentials,
    /// The client asked for something this implementation does not offer (delegation tokens, channel binding).
    #[error("{0}")]
    Unsupported(String),
    /// A credential outside the accepted bounds.
    #[error("unacceptable credential: {0}")]
    UnacceptableCredential(String),
    /// The server's answer failed the client's checks (a wrong nonce, a wrong server signature).
    #[error("the server failed {mechanism} verification: {reason}")]
    ServerNotVerified {
        /// The mechanism's name.
        mechanism: &'static str,
        /// What failed.
        reason: &'static str,
    },
    /// The operating system's random generator failed.
    #[error("no random bytes from the operating system: {0}")]
    Random(String),
}

/// `len` random bytes from the operating system.
pub(crate) fn random_bytes(len: usize) -> Result<Vec<u8>, AuthError> {
    let mut bytes = vec![0u8; len];
    getrandom::fill(&mut bytes).map_err(|error| AuthError::Random(error.to_string()))?;
    Ok(bytes)
}
