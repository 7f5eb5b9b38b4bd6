//! [`KafkaConnection`]: one TCP connection to a Kafka-compatible broker — plain, or TLS and SASL as a
//! [`ClientSecurity`] says — speaking the client side of the wire protocol with `kafka-protocol`'s codecs.
//!
//! A call encodes the request header (its version follows the API and version: flexible versions carry a
//! tagged-field section) and body in one frame, then reads the answer: a 4-byte size, checked against the
//! connection's bound **before** anything is allocated for it (a source announcing 2 GiB costs nothing), the
//! correlation id, checked against the request's, the response header, and the body — walked by
//! `kafka_shape::check_response` (no array count beyond the bytes left) and only then decoded at the request's
//! version. Calls are sequential (one in flight), each under the connection's timeout; a failed call leaves the
//! connection unusable and the caller reconnects.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::pin::Pin;
use std::task::{Context, Poll};

use kafka_auth::{PlainMessage, SaslMechanism, ScramClient};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use crate::error::LinkError;
use crate::security::{ClientSecurity, SaslLogin};

/// The bytes of a connection: plain TCP, or TLS over it.
#[derive(Debug)]
enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_flush(cx),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            Stream::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
        }
    }
}

/// One connection; see the module docs.
#[derive(Debug)]
pub struct KafkaConnection {
    address: String,
    stream: Option<Stream>,
    client_id: String,
    correlation_id: i32,
    timeout: Duration,
    max_response_bytes: usize,
    /// The broker's advertised versions, by API key.
    versions: BTreeMap<i16, (i16, i16)>,
}

impl KafkaConnection {
    /// Connects to `address` (`host:port`) over PLAINTEXT and asks for the broker's API versions.
    pub async fn connect(
        address: &str,
        client_id: &str,
        timeout: Duration,
        max_response_bytes: usize,
    ) -> Result<Self, LinkError> {
        Self::connect_secured(
            address,
            client_id,
            timeout,
            max_response_bytes,
            &ClientSecurity::plaintext(),
        )
        .await
    }

    /// Connects to `address` (`host:port`) as `security` says — the TLS handshake, ApiVersions, then the SASL
    /// exchange — each step under `timeout`.
    pub async fn connect_secured(
        address: &str,
        client_id: &str,
        timeout: Duration,
        max_response_bytes: usize,
        security: &ClientSecurity,
    ) -> Result<Self, LinkError> {
        let io = |source| LinkError::Io {
            address: address.to_owned(),
            source,
        };
        let timed_out = |what: &str| LinkError::Timeout {
            address: address.to_owned(),
            what: what.to_owned(),
            timeout_ms: timeout.as_millis() as u64,
        };
        let tcp = tokio::time::timeout(timeout, TcpStream::connect(address))
            .await
            .map_err(|_| timed_out("connect"))?
            .map_err(io)?;
        tcp.set_nodelay(true).map_err(io)?;
        let stream = match &security.tls {
            None => Stream::Plain(tcp),
            Some(config) => {
                let tls = |reason: String| LinkError::Tls {
                    address: address.to_owned(),
                    reason,
                };
                let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let name = rustls::pki_types::ServerName::try_from(host.to_owned())
                    .map_err(|error| tls(format!("{host:?} is not a host name: {error}")))?;
                let connector = tokio_rustls::TlsConnector::from(config.clone());
                let stream = tokio::time::timeout(timeout, connector.connect(name, tcp))
                    .await
                    .map_err(|_| timed_out("the TLS handshake"))?
                    .map_err(|error| {
                        // rustls reports what it refused as invalid data; anything else is the network.
                        if error.kind() == std::io::ErrorKind::InvalidData {
                            tls(error.to_string())
                        } else {
                            io(error)
                        }
                    })?;
                Stream::Tls(Box::new(stream))
            }
        };
        let mut connection = KafkaConnection {
            address: address.to_owned(),
            stream: Some(stream),
            client_id: client_id.to_owned(),
            correlation_id: 0,
            timeout,
            max_response_bytes,
            versions: BTreeMap::new(),
        };
        // Version 0 needs no negotiation and every broker answers it.
        let answer: ApiVersionsResponse = connection
            .call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
            .await?;
        if answer.error_code != 0 {
            return Err(LinkError::Kafka {
                what: format!("ApiVersions from {address}"),
                code: answer.error_code,
                detail: String::new(),
            });
        }
        connection.versions = answer
            .api_keys
            .iter()
            .map(|api| (api.api_key, (api.min_version, api.max_version)))
            .collect();
        if let Some(login) = &security.sasl {
            connection.authenticate(login).await?;
        }
        Ok(connection)
    }

    /// SaslHandshake v1, then the mechanism's tokens in SaslAuthenticate v1 requests; for SCRAM, the server's
    /// final message must prove it holds the credential.
    async fn authenticate(&mut self, login: &SaslLogin) -> Result<(), LinkError> {
        let address = self.address.clone();
        let failed = |reason: String| LinkError::Authentication {
            address: address.clone(),
            reason,
        };
        self.version(ApiKey::SaslHandshake, (1, 1))?;
        self.version(ApiKey::SaslAuthenticate, (1, 1))?;
        let mut handshake = SaslHandshakeRequest::default();
        handshake.mechanism = StrBytes::from_static_str(login.mechanism.name());
        let answer: SaslHandshakeResponse = self.call(ApiKey::SaslHandshake, 1, &handshake).await?;
        if answer.error_code != 0 {
            let offered: Vec<&str> = answer.mechanisms.iter().map(|name| name.as_str()).collect();
            return Err(failed(format!(
                "the broker does not offer {} (it offers {})",
                login.mechanism,
                offered.join(", ")
            )));
        }
        match login.mechanism {
            SaslMechanism::Plain => {
                let token = PlainMessage::encode(&login.user, login.password.as_bytes());
                self.sasl_token(token).await?;
            }
            SaslMechanism::Scram(kind) => {
                let mut client = ScramClient::new(kind, &login.user, login.password.as_bytes())
                    .map_err(|error| failed(error.to_string()))?;
                let first = self.sasl_token(client.client_first()).await?;
                let last = client
                    .client_final(&first)
                    .map_err(|error| failed(error.to_string()))?;
                let proof = self.sasl_token(last).await?;
                client
                    .verify_server_final(&proof)
                    .map_err(|error| failed(error.to_string()))?;
            }
        }
        Ok(())
    }

    /// One SaslAuthenticate v1 exchange: the broker's token, or its refusal.
    async fn sasl_token(&mut self, token: Vec<u8>) -> Result<Bytes, LinkError> {
        let mut request = SaslAuthenticateRequest::default();
        request.auth_bytes = Bytes::from(token);
        let answer: SaslAuthenticateResponse = self.call(ApiKey::SaslAuthenticate, 1, &request).await?;
        if answer.error_code != 0 {
            return Err(LinkError::Authentication {
                address: self.address.clone(),
                reason: format!(
                    "{} ({}): {}",
                    kafka_types::KafkaError::from_code(answer.error_code)
                        .map_or("an unknown error", kafka_types::KafkaError::name),
                    answer.error_code,
                    answer.error_message.as_deref().unwrap_or("")
                ),
            });
        }
        Ok(answer.auth_bytes)
    }

    /// The broker's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The highest version of `key` both sides serve, within `ours` (inclusive).
    pub fn version(&self, key: ApiKey, ours: (i16, i16)) -> Result<i16, LinkError> {
        let offered = self.versions.get(&(key as i16)).copied();
        match offered {
            Some((low, high)) if high >= ours.0 && low <= ours.1 => Ok(high.min(ours.1)),
            _ => Err(LinkError::Unsupported {
                address: self.address.clone(),
                api: format!("{key:?} {}–{}", ours.0, ours.1),
                offered: offered.map_or_else(|| "none".to_owned(), |(low, high)| format!("{low}–{high}")),
            }),
        }
    }

    /// Sends `request` as `key` at `version` and decodes the answer once it passed the shape check
    /// (`kafka_shape::check_response`: no count larger than the bytes left, since `kafka-protocol`'s decoder sizes
    /// vectors from the counts it reads). APIs without a response layout are refused: see
    /// [`Self::call_trusted`].
    pub async fn call<Q: Encodable, A: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Q,
    ) -> Result<A, LinkError> {
        self.call_with(key, version, request, true).await
    }

    /// [`Self::call`] without the shape check, for a broker the caller trusts (tests writing to their own
    /// broker): a hostile answer can make the decoder allocate without bound.
    pub async fn call_trusted<Q: Encodable, A: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Q,
    ) -> Result<A, LinkError> {
        self.call_with(key, version, request, false).await
    }

    async fn call_with<Q: Encodable, A: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Q,
        checked: bool,
    ) -> Result<A, LinkError> {
        let what = format!("{key:?} v{version}");
        let outcome =
            tokio::time::timeout(self.timeout, self.exchange(key, version, request, &what, checked)).await;
        self.settle(outcome, what)
    }

    /// A call's result once its timeout is applied; after any failure what is left on the wire is unknown, so
    /// the connection is not used again.
    fn settle<T>(
        &mut self,
        outcome: Result<Result<T, LinkError>, tokio::time::error::Elapsed>,
        what: String,
    ) -> Result<T, LinkError> {
        let result = outcome.unwrap_or_else(|_| {
            Err(LinkError::Timeout {
                address: self.address.clone(),
                what,
                timeout_ms: self.timeout.as_millis() as u64,
            })
        });
        if result.is_err() {
            self.stream = None;
        }
        result
    }

    /// Encodes `request` as `key` at `version` in one frame (size, header, body) under the next correlation id.
    fn frame<Q: Encodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Q,
        what: &str,
    ) -> Result<(i32, BytesMut), LinkError> {
        self.frame_with(
            key as i16,
            version,
            key.request_header_version(version),
            what,
            |frame| {
                request
                    .encode(frame, version)
                    .map_err(|error| format!("cannot encode the request: {error}"))
            },
        )
    }

    /// One request frame under the next correlation id: the size, the request header (`header_version`: 1, or
    /// 2 for a flexible version), then what `body` writes.
    fn frame_with(
        &mut self,
        api_key: i16,
        version: i16,
        header_version: i16,
        what: &str,
        body: impl FnOnce(&mut BytesMut) -> Result<(), String>,
    ) -> Result<(i32, BytesMut), LinkError> {
        let malformed = |reason: String| LinkError::Malformed {
            address: self.address.clone(),
            what: what.to_owned(),
            reason,
        };
        let correlation_id = self.correlation_id.wrapping_add(1);
        let mut header = RequestHeader::default();
        header.request_api_key = api_key;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(StrBytes::from_string(self.client_id.clone()));
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        header
            .encode(&mut frame, header_version)
            .map_err(|error| malformed(format!("cannot encode the request header: {error}")))?;
        body(&mut frame).map_err(malformed)?;
        let size = i32::try_from(frame.len() - 4).map_err(|_| malformed("request too large".to_owned()))?;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        self.correlation_id = correlation_id;
        Ok((correlation_id, frame))
    }

    /// Sends `request` without reading an answer: for the one request Kafka does not answer, a Produce with
    /// `acks = 0`. A write that fails leaves the connection unusable, as a failed call does.
    pub async fn send_only<Q: Encodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Q,
    ) -> Result<(), LinkError> {
        let what = format!("{key:?} v{version}");
        let (_, frame) = self.frame(key, version, request, &what)?;
        let sent = self.send(&frame).await;
        if sent.is_err() {
            self.stream = None;
        }
        sent
    }

    /// The open stream, or the error of a connection that failed earlier.
    fn stream(&mut self) -> Result<&mut Stream, LinkError> {
        let address = self.address.clone();
        self.stream.as_mut().ok_or_else(|| LinkError::Io {
            address,
            source: std::io::Error::new(std::io::ErrorKind::NotConnected, "the connection failed earlier"),
        })
    }

    /// Writes one whole frame.
    async fn send(&mut self, frame: &[u8]) -> Result<(), LinkError> {
        let address = self.address.clone();
        let stream = self.stream()?;
        stream.write_all(frame).await.map_err(|source| LinkError::Io {
            address: address.clone(),
            source,
        })?;
        // A TLS stream holds what was written until it is flushed.
        stream
            .flush()
            .await
            .map_err(|source| LinkError::Io { address, source })
    }

    async fn exchange<Q: Encodable, A: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Q,
        what: &str,
        checked: bool,
    ) -> Result<A, LinkError> {
        let (correlation_id, frame) = self.frame(key, version, request, what)?;
        let peer = self.address.clone();
        let malformed = |reason: String| LinkError::Malformed {
            address: peer.clone(),
            what: what.to_owned(),
            reason,
        };
        self.send(&frame).await?;
        let mut body = self.read_response(what).await?;
        let header = ResponseHeader::decode(&mut body, key.response_header_version(version))
            .map_err(|error| malformed(format!("response header: {error}")))?;
        if header.correlation_id != correlation_id {
            return Err(malformed(format!(
                "correlation id {} answers request {correlation_id}",
                header.correlation_id
            )));
        }
        if checked {
            kafka_shape::check_response(key, version, &body)
                .map_err(|error| malformed(format!("refused before decoding: {error}")))?;
        }
        let answer = A::decode(&mut body, version).map_err(|error| malformed(error.to_string()))?;
        if body.has_remaining() {
            return Err(malformed(format!(
                "{} bytes after the response",
                body.remaining()
            )));
        }
        Ok(answer)
    }

    /// Reads one response frame: the size, checked against the bound before anything is allocated, then the
    /// bytes.
    async fn read_response(&mut self, what: &str) -> Result<Bytes, LinkError> {
        let address = self.address.clone();
        let io = |source| LinkError::Io {
            address: address.clone(),
            source,
        };
        let limit = self.max_response_bytes;
        let stream = self.stream()?;
        let size = stream.read_i32().await.map_err(io)?;
        if size < 4 || size as usize > limit {
            return Err(LinkError::ResponseTooLarge {
                address: address.clone(),
                what: what.to_owned(),
                size: i64::from(size),
                limit,
            });
        }
        // Filled as the bytes arrive, not zeroed first (a fetch answer is tens of MiB).
        let size = size as usize;
        let mut body = Vec::with_capacity(size);
        let got = (&mut *stream)
            .take(size as u64)
            .read_to_end(&mut body)
            .await
            .map_err(io)?;
        if got < size {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("early eof: {got} of a {size}-byte response"),
            )));
        }
        Ok(Bytes::from(body))
    }

    /// Sends a request of an API `kafka-protocol` does not know (mirrorlog's private mirror administration key):
    /// request header v1 (key, version, correlation id, client id) and `body` in one frame; returns the answer
    /// after its correlation id (response header v0), under the connection's timeout and size bound.
    pub async fn call_raw(&mut self, api_key: i16, version: i16, body: &[u8]) -> Result<Bytes, LinkError> {
        let what = format!("API {api_key} v{version}");
        let outcome =
            tokio::time::timeout(self.timeout, self.exchange_raw(api_key, version, body, &what)).await;
        self.settle(outcome, what)
    }

    async fn exchange_raw(
        &mut self,
        api_key: i16,
        version: i16,
        body: &[u8],
        what: &str,
    ) -> Result<Bytes, LinkError> {
        let (correlation_id, frame) = self.frame_with(api_key, version, 1, what, |frame| {
            frame.put_slice(body);
            Ok(())
        })?;
        self.send(&frame).await?;
        let mut answer = self.read_response(what).await?;
        let answered = answer.get_i32();
        if answered != correlation_id {
            return Err(LinkError::Malformed {
                address: self.address.clone(),
                what: what.to_owned(),
                reason: format!("correlation id {answered} answers request {correlation_id}"),
            });
        }
        Ok(answer)
    }
}
