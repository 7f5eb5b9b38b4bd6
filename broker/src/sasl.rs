//! SASL authentication of one connection on a SASL_PLAINTEXT or SASL_SSL listener, as Kafka's
//! `SaslServerAuthenticator` runs it: ApiVersions may come first; SaslHandshake picks a mechanism (v1: the tokens
//! follow in SaslAuthenticate requests; v0: as raw size-prefixed frames); the exchange ends authenticated or
//! refused. Any other request before authentication, a SaslAuthenticate before the handshake, or a second
//! handshake closes the connection (ILLEGAL_SASL_STATE, as Kafka closes it); a mechanism not enabled is answered
//! UNSUPPORTED_SASL_MECHANISM with the enabled list, then closed; refused credentials are answered
//! SASL_AUTHENTICATION_FAILED with a message that does not say whether the user or the password was wrong, then
//! closed.
//!
//! Mechanisms: PLAIN and SCRAM-SHA-256/512 (crate `kafka-auth`), checked against the node's stored SCRAM
//! credentials.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_auth::plain::PlainMessage;
use kafka_auth::scram::ServerStep;
pub use kafka_auth::SaslMechanism;
use kafka_auth::{AuthError, Principal, ScramServer};
use kafka_protocol::messages::{ApiKey, SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_types::KafkaError;
use node::Node;

use crate::api::{self, Caller, Decoded, Reply};
use crate::frame::{encode_response, Request};

/// The largest frame a connection may send before it has authenticated (Kafka's `sasl.server.max.receive.size`).
pub const MAX_RECEIVE_BEFORE_AUTHENTICATION: usize = 524_288;

/// What the connection does after a frame.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Send the frame; the exchange goes on.
    Reply(Bytes),
    /// Send the frame (if any); the connection is now `principal`'s.
    Authenticated(Option<Bytes>, Principal),
    /// Send the frame (if any), then close the connection, for the reason given.
    Close(Option<Bytes>, String),
}

#[derive(Debug)]
enum State {
    /// Before SaslHandshake.
    AwaitingHandshake,
    /// After it: the mechanism's tokens, in SaslAuthenticate requests (v1) or raw frames (v0).
    Exchanging {
        mechanism: SaslMechanism,
        raw_tokens: bool,
        /// SCRAM's exchange, from its first message.
        scram: Option<Box<ScramServer>>,
    },
}

/// The authentication of one connection.
#[derive(Debug)]
pub(crate) struct SaslExchange {
    enabled: Vec<SaslMechanism>,
    state: State,
}

impl SaslExchange {
    /// A connection's exchange, offering `enabled`.
    pub(crate) fn new(enabled: Vec<SaslMechanism>) -> Self {
        SaslExchange {
            enabled,
            state: State::AwaitingHandshake,
        }
    }

    /// True when the next frame is a raw token (after a SaslHandshake v0), not a request.
    pub(crate) fn expects_raw_token(&self) -> bool {
        matches!(self.state, State::Exchanging { raw_tokens: true, .. })
    }

    /// Answers a request sent before authentication.
    pub(crate) async fn request(&mut self, node: &Node, request: &Request, caller: &Caller) -> Outcome {
        let decoded = match api::decode(request) {
            Ok(decoded) => decoded,
            Err(error) => return Outcome::Close(None, error.to_string()),
        };
        match (decoded, &self.state) {
            (Decoded::ApiVersions | Decoded::UnsupportedApiVersions, _) => {
                match api::handle_from(node, request, caller).await {
                    Ok(Reply::Frame(frame, _)) => Outcome::Reply(frame),
                    Ok(Reply::Nothing) => Outcome::Close(None, "ApiVersions answered nothing".to_owned()),
                    Err(error) => Outcome::Close(None, error.to_string()),
                }
            }
            (Decoded::SaslHandshake(handshake), State::AwaitingHandshake) => {
                let asked = handshake.mechanism.as_str();
                let mut response = SaslHandshakeResponse::default();
                response.mechanisms = self
                    .enabled
                    .iter()
                    .map(|mechanism| StrBytes::from_static_str(mechanism.name()))
                    .collect();
                let chosen = self
                    .enabled
                    .iter()
                    .copied()
                    .find(|mechanism| mechanism.name() == asked);
                if chosen.is_none() {
                    response.error_code = KafkaError::UnsupportedSaslMechanism.code();
                }
                let frame = match answer(ApiKey::SaslHandshake, request, &response) {
                    Ok(frame) => frame,
                    Err(reason) => return Outcome::Close(None, reason),
                };
                match chosen {
                    Some(mechanism) => {
                        self.state = State::Exchanging {
                            mechanism,
                            raw_tokens: request.version == 0,
                            scram: None,
                        };
                        Outcome::Reply(frame)
                    }
                    None => Outcome::Close(
                        Some(frame),
                        format!("the client asked for SASL mechanism {asked:?}, which is not enabled"),
                    ),
                }
            }
            (
                Decoded::SaslAuthenticate(authenticate),
                State::Exchanging {
                    raw_tokens: false, ..
                },
            ) => {
                let mechanism = self.mechanism_name();
                let step = self.step(node, &authenticate.auth_bytes).await;
                let mut response = SaslAuthenticateResponse::default();
                match step {
                    Ok(Step::Continue(token)) => {
                        response.auth_bytes = Bytes::from(token);
                        match answer(ApiKey::SaslAuthenticate, request, &response) {
                            Ok(frame) => Outcome::Reply(frame),
                            Err(reason) => Outcome::Close(None, reason),
                        }
                    }
                    Ok(Step::Done(token, principal)) => {
                        response.auth_bytes = Bytes::from(token);
                        match answer(ApiKey::SaslAuthenticate, request, &response) {
                            Ok(frame) => Outcome::Authenticated(Some(frame), principal),
                            Err(reason) => Outcome::Close(None, reason),
                        }
                    }
                    Err(error) => {
                        response.error_code = KafkaError::SaslAuthenticationFailed.code();
                        response.error_message =
                            Some(StrBytes::from_string(failure_message(mechanism, &error)));
                        let frame = answer(ApiKey::SaslAuthenticate, request, &response).ok();
                        Outcome::Close(frame, format!("{mechanism} authentication failed: {error}"))
                    }
                }
            }
            (Decoded::SaslAuthenticate(_), _) => Outcome::Close(
                None,
                "ILLEGAL_SASL_STATE: SaslAuthenticate before a SaslHandshake v1".to_owned(),
            ),
            (Decoded::SaslHandshake(_), _) => {
                Outcome::Close(None, "ILLEGAL_SASL_STATE: a second SaslHandshake".to_owned())
            }
            (_, _) => Outcome::Close(
                None,
                format!(
                    "ILLEGAL_SASL_STATE: a {:?} request before authentication",
                    request
                        .key()
                        .map_or_else(|| request.api_key.to_string(), |key| format!("{key:?}"))
                ),
            ),
        }
    }

    /// Answers a raw token (after a SaslHandshake v0): the mechanism's answer as a raw frame; a refusal closes
    /// the connection without an answer (v0 has no way to carry one).
    pub(crate) async fn raw_token(&mut self, node: &Node, token: &[u8]) -> Outcome {
        let mechanism = self.mechanism_name();
        match self.step(node, token).await {
            Ok(Step::Continue(token)) => Outcome::Reply(raw_frame(&token)),
            Ok(Step::Done(token, principal)) => {
                let frame = (!token.is_empty()).then(|| raw_frame(&token));
                Outcome::Authenticated(frame, principal)
            }
            Err(error) => Outcome::Close(None, format!("{mechanism} authentication failed: {error}")),
        }
    }

    fn mechanism_name(&self) -> &'static str {
        match &self.state {
            State::Exchanging { mechanism, .. } => mechanism.name(),
            State::AwaitingHandshake => "none",
        }
    }

    /// One client token through the chosen mechanism.
    async fn step(&mut self, node: &Node, token: &[u8]) -> Result<Step, AuthError> {
        let State::Exchanging { mechanism, scram, .. } = &mut self.state else {
            return Err(AuthError::OutOfOrder {
                mechanism: "SASL",
                reason: "no mechanism was chosen",
            });
        };
        let credentials = node.scram_credentials().await;
        match *mechanism {
            SaslMechanism::Plain => {
                let message = PlainMessage::parse(token)?;
                let user = credentials.get(&message.user);
                message.verify(|scram| user.and_then(|held| held.get(&scram)).cloned())?;
                Ok(Step::Done(Vec::new(), Principal::user(message.user)))
            }
            SaslMechanism::Scram(kind) => {
                let server = scram.get_or_insert_with(|| Box::new(ScramServer::new(kind)));
                let step = server.step(token, |user| {
                    credentials.get(user).and_then(|held| held.get(&kind)).cloned()
                })?;
                Ok(match step {
                    ServerStep::Challenge(challenge) => Step::Continue(challenge),
                    ServerStep::Authenticated { server_final, user } => {
                        Step::Done(server_final, Principal::user(user))
                    }
                })
            }
        }
    }
}

enum Step {
    Continue(Vec<u8>),
    Done(Vec<u8>, Principal),
}

/// What a refused client reads: Kafka's sentence for wrong credentials (never which of user or password), the
/// reason for a malformed or unsupported exchange.
fn failure_message(mechanism: &str, error: &AuthError) -> String {
    match error {
        AuthError::InvalidCredentials => format!(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
        ),
        other => format!("Authentication failed during authentication: {other}"),
    }
}

fn answer<M: kafka_protocol::protocol::Encodable>(
    key: ApiKey,
    request: &Request,
    message: &M,
) -> Result<Bytes, String> {
    encode_response(key, request.version, request.correlation_id, message)
}

/// A raw SASL token frame (SaslHandshake v0): its size, then the token.
fn raw_frame(token: &[u8]) -> Bytes {
    let mut frame = BytesMut::with_capacity(4 + token.len());
    frame.put_i32(i32::try_from(token.len()).unwrap_or(i32::MAX));
    frame.put_slice(token);
    frame.freeze()
}
