//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka's `ScramSaslServer` and `ScramSaslClient` run
//! them: no channel binding (`n,,`), user names escaped as `saslname` (`=2C`, `=3D`), extensions after the nonce
//! (only `tokenauth`, Kafka's delegation tokens, means anything; it is refused here).
//!
//! A stored credential ([`ScramCredential`]) holds the salt, the iteration count, `StoredKey = H(ClientKey)` and
//! `ServerKey`: enough to check a proof and to prove the server, never enough to log in (the client key is not
//! stored) and never the password.
//!
//! Unknown users: the server answers a server-first message for them as for anyone (a salt derived from the user
//! name and a secret of the process, the default iteration count) and refuses at the proof, so that neither the
//! answer nor its step tells a prober which users exist. Kafka refuses an unknown user at the first message.

use std::sync::OnceLock;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

use crate::{random_bytes, AuthError};

/// The two SCRAM mechanisms Kafka offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ScramMechanism {
    /// `SCRAM-SHA-256` (RFC 7677).
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    /// `SCRAM-SHA-512`.
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
}

impl ScramMechanism {
    /// Both, in Kafka's order.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The fewest iterations Kafka accepts for a credential (`ScramMechanism.minIterations`).
    pub const MIN_ITERATIONS: u32 = 4096;

    /// The most iterations AlterUserScramCredentials accepts (Kafka's bound).
    pub const MAX_ITERATIONS: u32 = 16384;

    /// The mechanism's SASL name.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism a SASL name names.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mechanism| mechanism.name() == name)
    }

    /// Its number in Describe/AlterUserScramCredentials (`ScramMechanism.type()`: 1 and 2).
    pub fn wire_type(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The mechanism a wire type names (0, Kafka's UNKNOWN, names none).
    pub fn from_wire_type(value: i8) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|mechanism| mechanism.wire_type() == value)
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
        match self {
            ScramMechanism::Sha256 => match Hmac::<Sha256>::new_from_slice(key) {
                Ok(mut mac) => {
                    mac.update(data);
                    mac.finalize().into_bytes().to_vec()
                }
                Err(_) => Vec::new(),
            },
            ScramMechanism::Sha512 => match Hmac::<Sha512>::new_from_slice(key) {
                Ok(mut mac) => {
                    mac.update(data);
                    mac.finalize().into_bytes().to_vec()
                }
                Err(_) => Vec::new(),
            },
        }
    }

    /// RFC 5802's `Hi(password, salt, i)`: PBKDF2 with HMAC over the mechanism's hash.
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut out = vec![0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out
            }
            ScramMechanism::Sha512 => {
                let mut out = vec![0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out
            }
        }
    }
}

/// A user's stored SCRAM credential for one mechanism (what Kafka keeps in its metadata log).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    /// The salt.
    #[serde(with = "base64_bytes")]
    pub salt: Vec<u8>,
    /// `H(HMAC(SaltedPassword, "Client Key"))`.
    #[serde(with = "base64_bytes")]
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    #[serde(with = "base64_bytes")]
    pub server_key: Vec<u8>,
    /// The PBKDF2 iteration count.
    pub iterations: u32,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys are secrets a log must never show.
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// The credential of `password` with a fresh random salt.
    pub fn generate(mechanism: ScramMechanism, password: &[u8], iterations: u32) -> Result<Self, AuthError> {
        let salt = random_bytes(32)?;
        Self::from_password(mechanism, password, salt, iterations)
    }

    /// The credential of `password` with `salt`.
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &[u8],
        salt: Vec<u8>,
        iterations: u32,
    ) -> Result<Self, AuthError> {
        check_iterations(iterations)?;
        let salted = mechanism.salted_password(password, &salt, iterations);
        Self::from_salted_password(mechanism, &salted, salt, iterations)
    }

    /// The credential of an already salted password (AlterUserScramCredentials carries `SaltedPassword`, the
    /// client having run PBKDF2).
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salted_password: &[u8],
        salt: Vec<u8>,
        iterations: u32,
    ) -> Result<Self, AuthError> {
        check_iterations(iterations)?;
        if salt.is_empty() {
            return Err(AuthError::UnacceptableCredential("the salt is empty".to_owned()));
        }
        if salted_password.is_empty() {
            return Err(AuthError::UnacceptableCredential(
                "the salted password is empty".to_owned(),
            ));
        }
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        Ok(ScramCredential {
            salt,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        })
    }

    /// True when `password` is this credential's (SASL/PLAIN checks a password so), in constant time over the
    /// derived keys.
    pub fn matches_password(&self, mechanism: ScramMechanism, password: &[u8]) -> bool {
        let salted = mechanism.salted_password(password, &self.salt, self.iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        bool::from(mechanism.hash(&client_key).ct_eq(&self.stored_key))
    }
}

fn check_iterations(iterations: u32) -> Result<(), AuthError> {
    if !(ScramMechanism::MIN_ITERATIONS..=ScramMechanism::MAX_ITERATIONS).contains(&iterations) {
        return Err(AuthError::UnacceptableCredential(format!(
            "{iterations} iterations (accepted: {}..={})",
            ScramMechanism::MIN_ITERATIONS,
            ScramMechanism::MAX_ITERATIONS
        )));
    }
    Ok(())
}

mod base64_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&super::BASE64.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        super::BASE64.decode(text).map_err(serde::de::Error::custom)
    }
}

/// The longest SCRAM message accepted (Kafka bounds the whole receive before authentication; a SCRAM message is a
/// few hundred bytes).
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// The server's side of one exchange.
#[derive(Debug)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: ServerState,
}

#[derive(Debug)]
enum ServerState {
    AwaitingClientFirst,
    AwaitingClientFinal {
        user: String,
        /// `None`: the user is unknown; the proof is refused whatever it is.
        credential: Option<ScramCredential>,
        channel_binding: String,
        nonce: String,
        client_first_bare: String,
        server_first: String,
    },
    Ended,
}

/// What the server sends after a client message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerStep {
    /// The server-first message; the exchange goes on.
    Challenge(Vec<u8>),
    /// The client proved the password: the server-final message and the authenticated user.
    Authenticated {
        /// The server-final message (`v=ServerSignature`).
        server_final: Vec<u8>,
        /// The user name.
        user: String,
    },
}

impl ScramServer {
    /// A new exchange for `mechanism`.
    pub fn new(mechanism: ScramMechanism) -> Self {
        ScramServer {
            mechanism,
            state: ServerState::AwaitingClientFirst,
        }
    }

    /// Takes the client's next message. `credential_of` is asked once, for the user the client-first message
    /// names. Any error ends the exchange.
    pub fn step(
        &mut self,
        message: &[u8],
        credential_of: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<ServerStep, AuthError> {
        let name = self.mechanism.name();
        if message.len() > MAX_MESSAGE_BYTES {
            self.state = ServerState::Ended;
            return Err(malformed(name, format!("{} bytes", message.len())));
        }
        let text = std::str::from_utf8(message).map_err(|_| malformed(name, "not UTF-8".to_owned()));
        match std::mem::replace(&mut self.state, ServerState::Ended) {
            ServerState::AwaitingClientFirst => {
                let first = ClientFirst::parse(name, text?)?;
                let credential = credential_of(&first.user);
                let (salt, iterations) = match &credential {
                    Some(credential) => (credential.salt.clone(), credential.iterations),
                    None => (
                        self.mechanism.hmac(unknown_user_secret()?, first.user.as_bytes()),
                        ScramMechanism::MIN_ITERATIONS,
                    ),
                };
                let nonce = format!("{}{}", first.nonce, BASE64.encode(random_bytes(24)?));
                let server_first = format!("r={nonce},s={},i={iterations}", BASE64.encode(&salt));
                let challenge = server_first.clone().into_bytes();
                self.state = ServerState::AwaitingClientFinal {
                    user: first.user,
                    credential,
                    channel_binding: BASE64.encode(first.gs2_header.as_bytes()),
                    nonce,
                    client_first_bare: first.bare,
                    server_first,
                };
                Ok(ServerStep::Challenge(challenge))
            }
            ServerState::AwaitingClientFinal {
                user,
                credential,
                channel_binding,
                nonce,
                client_first_bare,
                server_first,
            } => {
                let last = ClientFinal::parse(name, text?)?;
                if last.channel_binding != channel_binding {
                    return Err(malformed(
                        name,
                        "the channel binding differs from the GS2 header".to_owned(),
                    ));
                }
                if last.nonce != nonce {
                    return Err(malformed(name, "the nonce is not the server's".to_owned()));
                }
                let auth_message = format!("{client_first_bare},{server_first},{}", last.without_proof);
                let credential = credential.ok_or(AuthError::InvalidCredentials)?;
                let signature = self
                    .mechanism
                    .hmac(&credential.stored_key, auth_message.as_bytes());
                if last.proof.len() != signature.len() {
                    return Err(AuthError::InvalidCredentials);
                }
                let client_key: Vec<u8> = last.proof.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
                if !bool::from(self.mechanism.hash(&client_key).ct_eq(&credential.stored_key)) {
                    return Err(AuthError::InvalidCredentials);
                }
                let server_signature = self
                    .mechanism
                    .hmac(&credential.server_key, auth_message.as_bytes());
                Ok(ServerStep::Authenticated {
                    server_final: format!("v={}", BASE64.encode(server_signature)).into_bytes(),
                    user,
                })
            }
            ServerState::Ended => Err(AuthError::OutOfOrder {
                mechanism: name,
                reason: "the exchange has ended",
            }),
        }
    }
}

/// The secret unknown users' salts are derived from: one per process, so that a user's salt is the same on every
/// attempt (a salt that changed would tell the user does not exist).
fn unknown_user_secret() -> Result<&'static [u8], AuthError> {
    static SECRET: OnceLock<Vec<u8>> = OnceLock::new();
    if let Some(secret) = SECRET.get() {
        return Ok(secret);
    }
    let fresh = random_bytes(32)?;
    Ok(SECRET.get_or_init(|| fresh))
}

fn malformed(mechanism: &'static str, reason: String) -> AuthError {
    AuthError::Malformed { mechanism, reason }
}

/// A parsed client-first message.
struct ClientFirst {
    gs2_header: String,
    bare: String,
    user: String,
    nonce: String,
}

impl ClientFirst {
    fn parse(mechanism: &'static str, text: &str) -> Result<Self, AuthError> {
        let bad = |reason: &str| malformed(mechanism, format!("client-first message: {reason}"));
        let rest = match text.strip_prefix("n,") {
            Some(rest) => rest,
            None if text.starts_with("p=") || text.starts_with("y,") => {
                return Err(AuthError::Unsupported(
                    "channel binding is not supported".to_owned(),
                ))
            }
            None => return Err(bad("it must start with the GS2 flag n")),
        };
        let (authzid, bare) = rest.split_once(',').ok_or_else(|| bad("no GS2 header end"))?;
        let mut parts = bare.split(',');
        let user = match parts.next().and_then(|part| part.strip_prefix("n=")) {
            Some(name) => decode_saslname(name).ok_or_else(|| bad("the user name is badly escaped"))?,
            None => return Err(bad("no user name")),
        };
        if user.is_empty() {
            return Err(bad("an empty user name"));
        }
        if let Some(authzid) = authzid.strip_prefix("a=") {
            // Kafka: an authorization id must name the authenticated user.
            if decode_saslname(authzid).as_deref() != Some(user.as_str()) {
                return Err(AuthError::Unsupported(
                    "an authorization id other than the user name is not supported".to_owned(),
                ));
            }
        } else if !authzid.is_empty() {
            return Err(bad("a GS2 header field other than a="));
        }
        let nonce = match parts.next().and_then(|part| part.strip_prefix("r=")) {
            Some(nonce) if is_printable_nonce(nonce) => nonce.to_owned(),
            _ => return Err(bad("no printable nonce")),
        };
        for extension in parts {
            let (key, value) = extension
                .split_once('=')
                .ok_or_else(|| bad("an extension without a value"))?;
            if key == "tokenauth" && value.eq_ignore_ascii_case("true") {
                return Err(AuthError::Unsupported(
                    "delegation tokens (tokenauth) are not supported".to_owned(),
                ));
            }
        }
        Ok(ClientFirst {
            gs2_header: format!("n,{authzid},"),
            bare: bare.to_owned(),
            user,
            nonce,
        })
    }
}

/// A parsed client-final message.
struct ClientFinal {
    channel_binding: String,
    nonce: String,
    proof: Vec<u8>,
    /// The message without `,p=…` (part of the AuthMessage).
    without_proof: String,
}

impl ClientFinal {
    fn parse(mechanism: &'static str, text: &str) -> Result<Self, AuthError> {
        let bad = |reason: &str| malformed(mechanism, format!("client-final message: {reason}"));
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(|| bad("no proof"))?;
        let mut parts = without_proof.split(',');
        let channel_binding = parts
            .next()
            .and_then(|part| part.strip_prefix("c="))
            .ok_or_else(|| bad("no channel binding"))?;
        let nonce = parts
            .next()
            .and_then(|part| part.strip_prefix("r="))
            .ok_or_else(|| bad("no nonce"))?;
        let proof = BASE64.decode(proof).map_err(|_| bad("the proof is not base64"))?;
        Ok(ClientFinal {
            channel_binding: channel_binding.to_owned(),
            nonce: nonce.to_owned(),
            proof,
            without_proof: without_proof.to_owned(),
        })
    }
}

/// RFC 5802's `printable`: ASCII 0x21–0x7E but `,`.
fn is_printable_nonce(nonce: &str) -> bool {
    !nonce.is_empty() && nonce.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

/// RFC 5802 `saslname`: `=2C` is `,`, `=3D` is `=`; any other `=` is an error.
fn decode_saslname(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

fn encode_saslname(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// The client's side of one exchange (the mirror link authenticating to a secured source; the tests).
#[derive(Debug)]
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: Vec<u8>,
    client_nonce: String,
    client_first_bare: String,
    /// The server signature the server-final message must carry, once the client-final message is sent.
    expected_server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    /// A new exchange for `user` with `password`.
    pub fn new(mechanism: ScramMechanism, user: &str, password: &[u8]) -> Result<Self, AuthError> {
        let client_nonce = BASE64.encode(random_bytes(24)?);
        Ok(ScramClient {
            mechanism,
            password: password.to_vec(),
            client_first_bare: format!("n={},r={client_nonce}", encode_saslname(user)),
            client_nonce,
            expected_server_signature: None,
        })
    }

    /// The client-first message.
    pub fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// The client-final message answering `server_first`; checks the server kept the client's nonce and asks
    /// for at least Kafka's minimum iterations.
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, AuthError> {
        let name = self.mechanism.name();
        let bad = |reason: &str| malformed(name, format!("server-first message: {reason}"));
        let text = std::str::from_utf8(server_first).map_err(|_| bad("not UTF-8"))?;
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for part in text.split(',') {
            match part.split_at_checked(2) {
                Some(("r=", value)) => nonce = Some(value),
                Some(("s=", value)) => salt = Some(BASE64.decode(value).map_err(|_| bad("salt not base64"))?),
                Some(("i=", value)) => iterations = value.parse::<u32>().ok(),
                _ => {}
            }
        }
        let nonce = nonce.ok_or_else(|| bad("no nonce"))?;
        let salt = salt.ok_or_else(|| bad("no salt"))?;
        let iterations = iterations.ok_or_else(|| bad("no iteration count"))?;
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err(AuthError::ServerNotVerified {
                mechanism: name,
                reason: "the server's nonce does not extend the client's",
            });
        }
        if !(ScramMechanism::MIN_ITERATIONS..=1_000_000).contains(&iterations) {
            return Err(bad("an iteration count outside 4096..=1000000"));
        }
        let salted = self.mechanism.salted_password(&self.password, &salt, iterations);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let client_key = self.mechanism.hmac(&salted, b"Client Key");
        let stored_key = self.mechanism.hash(&client_key);
        let signature = self.mechanism.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        let server_key = self.mechanism.hmac(&salted, b"Server Key");
        self.expected_server_signature = Some(self.mechanism.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message proves the server knows the credential.
    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<(), AuthError> {
        let name = self.mechanism.name();
        let expected = self
            .expected_server_signature
            .as_ref()
            .ok_or(AuthError::OutOfOrder {
                mechanism: name,
                reason: "the client-final message was not sent",
            })?;
        let text = std::str::from_utf8(server_final).unwrap_or("");
        if let Some(error) = text.strip_prefix("e=") {
            return Err(AuthError::Unsupported(format!("the server refused: {error}")));
        }
        let signature = text
            .strip_prefix("v=")
            .and_then(|value| BASE64.decode(value).ok())
            .ok_or(AuthError::ServerNotVerified {
                mechanism: name,
                reason: "no server signature",
            })?;
        if !bool::from(signature.ct_eq(expected)) {
            return Err(AuthError::ServerNotVerified {
                mechanism: name,
                reason: "a wrong server signature",
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn exchange(
        mechanism: ScramMechanism,
        stored: Option<ScramCredential>,
        password: &[u8],
    ) -> Result<String, AuthError> {
        let mut client = ScramClient::new(mechanism, "alice", password).unwrap();
        let mut server = ScramServer::new(mechanism);
        let ServerStep::Challenge(first) = server.step(&client.client_first(), |_| stored)? else {
            panic!("a challenge first");
        };
        let last = client.client_final(&first)?;
        match server.step(&last, |_| None)? {
            ServerStep::Authenticated { server_final, user } => {
                client.verify_server_final(&server_final)?;
                Ok(user)
            }
            ServerStep::Challenge(_) => panic!("authenticated second"),
        }
    }

    #[test]
    fn a_client_with_the_password_authenticates_and_verifies_the_server() {
        for mechanism in ScramMechanism::ALL {
            let stored = ScramCredential::generate(mechanism, b"secret", 4096).unwrap();
            assert_eq!(exchange(mechanism, Some(stored), b"secret").unwrap(), "alice");
        }
    }

    #[test]
    fn a_wrong_password_and_an_unknown_user_fail_alike_at_the_proof() {
        let stored = ScramCredential::generate(ScramMechanism::Sha512, b"secret", 4096).unwrap();
        assert_eq!(
            exchange(ScramMechanism::Sha512, Some(stored), b"guess"),
            Err(AuthError::InvalidCredentials)
        );
        assert_eq!(
            exchange(ScramMechanism::Sha512, None, b"guess"),
            Err(AuthError::InvalidCredentials)
        );
    }

    #[test]
    fn an_unknown_user_sees_the_same_salt_on_every_attempt() {
        let first = |user: &str| {
            let mut server = ScramServer::new(ScramMechanism::Sha256);
            let ServerStep::Challenge(first) = server
                .step(format!("n,,n={user},r=abc").as_bytes(), |_| None)
                .unwrap()
            else {
                panic!()
            };
            let text = String::from_utf8(first).unwrap();
            text.split(',').nth(1).unwrap().to_owned()
        };
        assert_eq!(first("mallory"), first("mallory"));
        assert_ne!(first("mallory"), first("trudy"));
    }

    /// RFC 7677 §3's test vector: user "user", password "pencil", the nonces and salt given there.
    #[test]
    fn the_rfc_7677_vector_verifies() {
        let mechanism = ScramMechanism::Sha256;
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let stored = ScramCredential::from_password(mechanism, b"pencil", salt, 4096).unwrap();
        let bare = "n=user,r=rOprNGfwEbeRWgbNEkqO";
        let server_first =
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let final_without_proof = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let auth_message = format!("{bare},{server_first},{final_without_proof}");
        let signature = mechanism.hmac(&stored.stored_key, auth_message.as_bytes());
        let proof = BASE64
            .decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .unwrap();
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        assert_eq!(mechanism.hash(&client_key), stored.stored_key);
        let server_signature = mechanism.hmac(&stored.server_key, auth_message.as_bytes());
        assert_eq!(
            BASE64.encode(server_signature),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    #[test]
    fn a_replayed_final_message_is_refused_by_a_new_exchange() {
        let mechanism = ScramMechanism::Sha256;
        let stored = ScramCredential::generate(mechanism, b"secret", 4096).unwrap();
        let mut client = ScramClient::new(mechanism, "alice", b"secret").unwrap();
        let mut server = ScramServer::new(mechanism);
        let ServerStep::Challenge(first) = server
            .step(&client.client_first(), |_| Some(stored.clone()))
            .unwrap()
        else {
            panic!()
        };
        let last = client.client_final(&first).unwrap();
        server.step(&last, |_| None).unwrap();
        // The same client nonce again: the server adds a fresh nonce of its own, so the old proof is stale.
        let mut again = ScramServer::new(mechanism);
        again.step(&client.client_first(), |_| Some(stored)).unwrap();
        assert!(matches!(
            again.step(&last, |_| None),
            Err(AuthError::Malformed { .. })
        ));
        assert!(matches!(
            again.step(&last, |_| None),
            Err(AuthError::OutOfOrder { .. })
        ));
    }

    #[test]
    fn out_of_order_and_malformed_messages_end_the_exchange() {
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        assert!(server.step(b"c=biws,r=x,p=AAAA", |_| None).is_err());
        assert!(matches!(
            server.step(b"n,,n=a,r=b", |_| None),
            Err(AuthError::OutOfOrder { .. })
        ));
        for message in [
            &b""[..],
            b"n,,",
            b"n,,n=,r=abc",
            b"n,,n=a=2X,r=abc",
            b"n,,n=a,r=a,b",
            b"y,,n=a,r=abc",
            b"n,,n=a,r=abc,tokenauth=true",
            b"n,a=bob,n=alice,r=abc",
            &[0xff, 0xfe][..],
        ] {
            assert!(ScramServer::new(ScramMechanism::Sha256)
                .step(message, |_| None)
                .is_err());
        }
        let long = vec![b'a'; MAX_MESSAGE_BYTES + 1];
        assert!(ScramServer::new(ScramMechanism::Sha256)
            .step(&long, |_| None)
            .is_err());
    }

    #[test]
    fn escaped_user_names_round_trip() {
        assert_eq!(decode_saslname(&encode_saslname("a,b=c")).unwrap(), "a,b=c");
    }

    #[test]
    fn iterations_outside_kafkas_bounds_are_unacceptable() {
        for iterations in [0, 4095, 16385] {
            assert!(matches!(
                ScramCredential::from_password(ScramMechanism::Sha256, b"p", vec![1], iterations),
                Err(AuthError::UnacceptableCredential(_))
            ));
        }
    }

    #[test]
    fn a_credential_never_shows_its_keys() {
        let stored = ScramCredential::generate(ScramMechanism::Sha256, b"secret", 4096).unwrap();
        let shown = format!("{stored:?}");
        assert!(!shown.contains(&format!("{:?}", stored.stored_key)), "{shown}");
        let json = serde_json::to_string(&stored).unwrap();
        assert_eq!(serde_json::from_str::<ScramCredential>(&json).unwrap(), stored);
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_client_messages_never_panic(first in proptest::collection::vec(0u8.., 0..200),
                                                  last in proptest::collection::vec(0u8.., 0..200)) {
            let stored = ScramCredential::from_password(ScramMechanism::Sha256, b"p", vec![1, 2], 4096).unwrap();
            let mut server = ScramServer::new(ScramMechanism::Sha256);
            let _ = server.step(&first, |_| Some(stored));
            let _ = server.step(&last, |_| None);
        }
    }
}
