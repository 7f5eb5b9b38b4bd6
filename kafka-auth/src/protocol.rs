//! Kafka's `security.protocol` values and the SASL mechanisms served: shared by the broker's listeners and the
//! clients (mirror links, `mirrorlog mirror`) that reach secured brokers.

use std::fmt;
use std::str::FromStr;

use crate::ScramMechanism;

/// Kafka's `security.protocol`: how a listener's connections are carried and authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SecurityProtocol {
    /// TCP, no authentication: every connection is `User:ANONYMOUS`.
    Plaintext,
    /// TLS; a client certificate (when the listener asks for one) names the principal.
    Ssl,
    /// SASL over TCP.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Every protocol, in Kafka's order.
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// True when connections are carried over TLS.
    pub fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// True when connections authenticate with SASL before anything else is served.
    pub fn sasl(self) -> bool {
        matches!(self, SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl)
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SecurityProtocol {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|protocol| protocol.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| {
                format!("{text:?}: the listener must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")
            })
    }
}

/// A SASL mechanism a listener offers or a client uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SaslMechanism {
    /// PLAIN (RFC 4616), checked against the stored SCRAM credentials.
    Plain,
    /// SCRAM-SHA-256 or SCRAM-SHA-512.
    Scram(ScramMechanism),
}

impl SaslMechanism {
    /// Every mechanism served, in the order a handshake lists them.
    pub const ALL: [SaslMechanism; 3] = [
        SaslMechanism::Plain,
        SaslMechanism::Scram(ScramMechanism::Sha256),
        SaslMechanism::Scram(ScramMechanism::Sha512),
    ];

    /// Its SASL name.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => crate::plain::PLAIN,
            SaslMechanism::Scram(scram) => scram.name(),
        }
    }
}

impl fmt::Display for SaslMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SaslMechanism {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|mechanism| mechanism.name() == text)
            .ok_or_else(|| {
                format!(
                    "{text:?}: the SASL mechanisms served are PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 \
                     (GSSAPI and OAUTHBEARER are not)"
                )
            })
    }
}
