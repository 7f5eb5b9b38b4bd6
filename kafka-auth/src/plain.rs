//! SASL/PLAIN (RFC 4616) as Kafka's `PlainSaslServer` reads it: `authzid NUL authcid NUL password`, the
//! authorization id empty or the user's own. The password is checked against the user's stored SCRAM credential
//! (there is no plaintext password file).

use crate::{AuthError, ScramCredential, ScramMechanism};

/// The mechanism's name.
pub const PLAIN: &str = "PLAIN";

/// The longest PLAIN message accepted.
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// A parsed PLAIN message.
#[derive(Clone, PartialEq, Eq)]
pub struct PlainMessage {
    /// The user.
    pub user: String,
    /// The password.
    pub password: Vec<u8>,
}

impl std::fmt::Debug for PlainMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainMessage")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl PlainMessage {
    /// Parses a client's message.
    pub fn parse(message: &[u8]) -> Result<Self, AuthError> {
        let bad = |reason: &str| AuthError::Malformed {
            mechanism: PLAIN,
            reason: reason.to_owned(),
        };
        if message.len() > MAX_MESSAGE_BYTES {
            return Err(bad("too long"));
        }
        let parts: Vec<&[u8]> = message.split(|&byte| byte == 0).collect();
        let [authzid, user, password] = parts[..] else {
            return Err(bad("expected authzid, user and password separated by NUL"));
        };
        let user = std::str::from_utf8(user).map_err(|_| bad("the user name is not UTF-8"))?;
        if user.is_empty() {
            return Err(bad("no user name"));
        }
        if password.is_empty() {
            return Err(bad("no password"));
        }
        if !authzid.is_empty() && authzid != user.as_bytes() {
            return Err(AuthError::Unsupported(
                "an authorization id other than the user name is not supported".to_owned(),
            ));
        }
        Ok(PlainMessage {
            user: user.to_owned(),
            password: password.to_vec(),
        })
    }

    /// The message a client sends.
    pub fn encode(user: &str, password: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(user.len() + password.len() + 2);
        out.push(0);
        out.extend_from_slice(user.as_bytes());
        out.push(0);
        out.extend_from_slice(password);
        out
    }

    /// Checks the password against the user's stored credentials (the strongest mechanism the user has); an
    /// unknown user costs the same derivation, so that timing does not tell users apart.
    pub fn verify(
        &self,
        credential_of: impl Fn(ScramMechanism) -> Option<ScramCredential>,
    ) -> Result<(), AuthError> {
        let found = [ScramMechanism::Sha512, ScramMechanism::Sha256]
            .into_iter()
            .find_map(|mechanism| credential_of(mechanism).map(|credential| (mechanism, credential)));
        match found {
            Some((mechanism, credential)) if credential.matches_password(mechanism, &self.password) => Ok(()),
            Some(_) => Err(AuthError::InvalidCredentials),
            None => {
                let decoy = ScramCredential::from_password(
                    ScramMechanism::Sha512,
                    &self.password,
                    self.user.as_bytes().to_vec(),
                    ScramMechanism::MIN_ITERATIONS,
                );
                drop(decoy);
                Err(AuthError::InvalidCredentials)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn plain_checks_the_stored_scram_credential() {
        let stored = ScramCredential::generate(ScramMechanism::Sha256, b"secret", 4096).unwrap();
        let lookup = |mechanism| (mechanism == ScramMechanism::Sha256).then(|| stored.clone());
        let good = PlainMessage::parse(&PlainMessage::encode("alice", b"secret")).unwrap();
        assert_eq!(good.user, "alice");
        assert_eq!(good.verify(lookup), Ok(()));
        let bad = PlainMessage::parse(&PlainMessage::encode("alice", b"guess")).unwrap();
        assert_eq!(bad.verify(lookup), Err(AuthError::InvalidCredentials));
        assert_eq!(bad.verify(|_| None), Err(AuthError::InvalidCredentials));
    }

    #[test]
    fn malformed_plain_messages_are_refused() {
        for message in [
            &b""[..],
            b"\0alice",
            b"\0\0secret",
            b"\0alice\0",
            b"bob\0alice\0x",
            b"a\0b\0c\0d",
        ] {
            assert!(PlainMessage::parse(message).is_err(), "{message:?}");
        }
        assert!(PlainMessage::parse(b"alice\0alice\0x").is_ok());
        let shown = format!("{:?}", PlainMessage::parse(b"\0alice\0hunter2").unwrap());
        assert!(!shown.contains("hunter2"));
    }
}
