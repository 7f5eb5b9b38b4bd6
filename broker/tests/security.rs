//! Secured listeners against a running broker (in-process, fs backend, ephemeral loopback ports): TLS with and
//! without client certificates, SASL/SCRAM and PLAIN over SASL_SSL and SASL_PLAINTEXT with stored credentials,
//! and the ways a connection that has not authenticated is refused. Certificates are generated here (rcgen).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_auth::{PlainMessage, ScramClient, ScramCredential, ScramMechanism};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use broker::{BrokerConfig, ListenerConfig, SecurityProtocol, Server, TlsConfig};
use common::pki::{pki, Pki};
use storage_config::StorageConfig;

struct Running {
    server_addresses: Vec<(SecurityProtocol, SocketAddr)>,
    serving: common::Serving,
}

impl Running {
    /// A broker with the given listeners; `alice` holds SCRAM credentials (both mechanisms) for `secret`.
    async fn start(dir: &std::path::Path, protocols: &[SecurityProtocol], tls: Option<TlsConfig>) -> Self {
        let storage = StorageConfig::for_backend(storage_config::Backend::Fs, &dir.join("data"));
        {
            let store = storage.open().unwrap();
            for mechanism in ScramMechanism::ALL {
                let credential = ScramCredential::generate(mechanism, b"secret", 4096).unwrap();
                node::users::add_offline(store.as_ref(), "alice", mechanism, credential)
                    .await
                    .unwrap();
            }
        }
        let mut config = BrokerConfig::new("127.0.0.1:0".parse().unwrap(), storage);
        config.listeners = protocols
            .iter()
            .map(|protocol| {
                format!("{protocol}://127.0.0.1:0")
                    .parse::<ListenerConfig>()
                    .unwrap()
            })
            .collect();
        config.tls = tls;
        config.authentication_timeout = Duration::from_millis(500);
        config.node.topics = vec![("orders".to_owned(), 1)];
        let server = Server::bind(config).await.expect("bind");
        let server_addresses = protocols
            .iter()
            .map(|protocol| (*protocol, server.listener_addr(*protocol).unwrap()))
            .collect();
        Running {
            server_addresses,
            serving: common::Serving::run(server),
        }
    }

    fn address(&self, protocol: SecurityProtocol) -> SocketAddr {
        self.server_addresses
            .iter()
            .find(|(listener, _)| *listener == protocol)
            .map(|(_, address)| *address)
            .unwrap()
    }

    async fn shutdown(self) {
        self.serving.shutdown().await;
    }
}

fn tls_client(pki: &Pki, with_certificate: bool) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca.clone()).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(broker::tls::crypto_provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = if with_certificate {
        builder
            .with_client_auth_cert(pki.client_chain.clone(), pki.client_key.clone_key())
            .unwrap()
    } else {
        builder.with_no_client_auth()
    };
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// A client connection speaking Kafka's framing over any stream.
struct Wire<S> {
    stream: S,
    correlation_id: i32,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Wire<S> {
    fn new(stream: S) -> Self {
        Wire {
            stream,
            correlation_id: 0,
        }
    }

    async fn send<M: Encodable>(&mut self, key: ApiKey, version: i16, message: &M) {
        self.correlation_id += 1;
        let mut body = BytesMut::new();
        body.put_i16(key as i16);
        body.put_i16(version);
        body.put_i32(self.correlation_id);
        body.put_i16(4);
        body.put_slice(b"test");
        if key.request_header_version(version) >= 2 {
            body.put_u8(0);
        }
        message.encode(&mut body, version).unwrap();
        self.send_raw(&body).await;
    }

    async fn send_raw(&mut self, body: &[u8]) {
        let mut frame = BytesMut::new();
        frame.put_i32(body.len() as i32);
        frame.put_slice(body);
        let _ = self.stream.write_all(&frame).await;
        let _ = self.stream.flush().await;
    }

    /// The next frame's bytes; `None` when the broker closed the connection.
    async fn read_raw(&mut self) -> Option<Bytes> {
        let size = tokio::time::timeout(Duration::from_secs(10), self.stream.read_i32())
            .await
            .expect("the broker answers or closes within 10 s")
            .ok()?;
        let mut body = vec![0u8; usize::try_from(size).ok()?];
        self.stream.read_exact(&mut body).await.ok()?;
        Some(Bytes::from(body))
    }

    async fn receive<A: Decodable>(&mut self, key: ApiKey, version: i16) -> Option<A> {
        let mut body = self.read_raw().await?;
        assert_eq!(body.get_i32(), self.correlation_id);
        if key.response_header_version(version) >= 1 {
            body.advance(1);
        }
        Some(A::decode(&mut body, version).unwrap())
    }

    async fn call<Q: Encodable, A: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        message: &Q,
    ) -> Option<A> {
        self.send(key, version, message).await;
        self.receive(key, version).await
    }

    async fn handshake(&mut self, version: i16, mechanism: &str) -> SaslHandshakeResponse {
        let mut request = SaslHandshakeRequest::default();
        request.mechanism = StrBytes::from_string(mechanism.to_owned());
        self.call(ApiKey::SaslHandshake, version, &request)
            .await
            .expect("a handshake answer")
    }

    async fn authenticate(&mut self, token: Vec<u8>) -> Option<SaslAuthenticateResponse> {
        let mut request = SaslAuthenticateRequest::default();
        request.auth_bytes = Bytes::from(token);
        self.call(ApiKey::SaslAuthenticate, 2, &request).await
    }

    /// A SCRAM exchange: the failed answer, or `None` when it succeeded and the server proved itself.
    async fn scram(
        &mut self,
        mechanism: ScramMechanism,
        user: &str,
        password: &[u8],
    ) -> Option<SaslAuthenticateResponse> {
        let handshake = self.handshake(1, mechanism.name()).await;
        assert_eq!(handshake.error_code, 0);
        let mut client = ScramClient::new(mechanism, user, password).unwrap();
        let first = self
            .authenticate(client.client_first())
            .await
            .expect("server-first");
        if first.error_code != 0 {
            return Some(first);
        }
        let last = self
            .authenticate(client.client_final(&first.auth_bytes).unwrap())
            .await
            .expect("server-final");
        if last.error_code != 0 {
            return Some(last);
        }
        client
            .verify_server_final(&last.auth_bytes)
            .expect("the server proves the credential");
        None
    }

    /// Metadata v8: the broker's advertised host and port.
    async fn advertised_port(&mut self) -> Option<i32> {
        let response: MetadataResponse = self
            .call(ApiKey::Metadata, 8, &MetadataRequest::default())
            .await?;
        Some(response.brokers[0].port)
    }

    /// True when the broker closed the connection (without answering anything more).
    async fn closed(&mut self) -> bool {
        self.read_raw().await.is_none()
    }
}

async fn sasl_ssl(running: &Running, pki: &Pki) -> Wire<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(running.address(SecurityProtocol::SaslSsl))
        .await
        .unwrap();
    let tls = tls_client(pki, false)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .expect("TLS handshake");
    Wire::new(tls)
}

async fn sasl_plaintext(running: &Running) -> Wire<TcpStream> {
    Wire::new(
        TcpStream::connect(running.address(SecurityProtocol::SaslPlaintext))
            .await
            .unwrap(),
    )
}

const SASL_LISTENERS: [SecurityProtocol; 3] = [
    SecurityProtocol::Plaintext,
    SecurityProtocol::SaslPlaintext,
    SecurityProtocol::SaslSsl,
];

fn server_tls(pki: &Pki, client_ca: bool) -> TlsConfig {
    TlsConfig {
        cert: pki.cert.clone(),
        key: pki.key.clone(),
        client_ca: client_ca.then(|| pki.ca_file.clone()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_over_sasl_ssl_authenticates_proves_the_server_and_then_serves_with_the_listeners_address() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let running = Running::start(dir.path(), &SASL_LISTENERS, Some(server_tls(&pki, false))).await;
    for mechanism in ScramMechanism::ALL {
        let mut wire = sasl_ssl(&running, &pki).await;
        // ApiVersions may come first, as every client sends it.
        let versions: ApiVersionsResponse = wire
            .call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
            .await
            .unwrap();
        assert_eq!(versions.error_code, 0);
        assert_eq!(
            wire.scram(mechanism, "alice", b"secret").await,
            None,
            "{mechanism:?}"
        );
        let port = i32::from(running.address(SecurityProtocol::SaslSsl).port());
        assert_eq!(
            wire.advertised_port().await,
            Some(port),
            "Metadata answers the SASL_SSL listener"
        );
        // After authentication, SASL requests are out of place (as Kafka answers them).
        assert_eq!(
            wire.handshake(1, "PLAIN").await.error_code,
            34,
            "ILLEGAL_SASL_STATE"
        );
    }
    // Each listener answers its own address.
    let mut plaintext = Wire::new(
        TcpStream::connect(running.address(SecurityProtocol::Plaintext))
            .await
            .unwrap(),
    );
    let port = i32::from(running.address(SecurityProtocol::Plaintext).port());
    assert_eq!(plaintext.advertised_port().await, Some(port));
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_and_an_unknown_user_are_refused_alike_and_the_connection_closes() {
    let dir = tempfile::tempdir().unwrap();
    let running = Running::start(dir.path(), &SASL_LISTENERS[..2], None).await;
    let mut messages = Vec::new();
    for (user, password) in [("alice", &b"guess"[..]), ("mallory", b"secret")] {
        let mut wire = sasl_plaintext(&running).await;
        let refused = wire
            .scram(ScramMechanism::Sha256, user, password)
            .await
            .expect("refused");
        assert_eq!(refused.error_code, 58, "SASL_AUTHENTICATION_FAILED");
        assert!(
            wire.closed().await,
            "a failed authentication closes the connection"
        );
        messages.push(refused.error_message.unwrap().to_string());
    }
    assert_eq!(
        messages[0], messages[1],
        "the message does not tell a wrong password from an unknown user"
    );
    assert!(
        !messages[0].contains("alice") && !messages[0].contains("mallory"),
        "{}",
        messages[0]
    );
    // PLAIN checks the same stored credentials.
    for (password, accepted) in [(&b"secret"[..], true), (b"guess", false)] {
        let mut wire = sasl_plaintext(&running).await;
        assert_eq!(wire.handshake(1, "PLAIN").await.error_code, 0);
        let answer = wire
            .authenticate(PlainMessage::encode("alice", password))
            .await
            .unwrap();
        assert_eq!(answer.error_code == 0, accepted);
        if accepted {
            assert!(wire.advertised_port().await.is_some());
        } else {
            assert_eq!(answer.error_code, 58);
            assert!(wire.closed().await);
        }
    }
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_v0_carries_raw_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let running = Running::start(dir.path(), &SASL_LISTENERS[..2], None).await;
    let mut wire = sasl_plaintext(&running).await;
    assert_eq!(wire.handshake(0, "SCRAM-SHA-512").await.error_code, 0);
    let mut client = ScramClient::new(ScramMechanism::Sha512, "alice", b"secret").unwrap();
    wire.send_raw(&client.client_first()).await;
    let first = wire.read_raw().await.expect("server-first, raw");
    wire.send_raw(&client.client_final(&first).unwrap()).await;
    let last = wire.read_raw().await.expect("server-final, raw");
    client.verify_server_final(&last).unwrap();
    assert!(
        wire.advertised_port().await.is_some(),
        "authenticated, then served"
    );
    // A wrong PLAIN password in v0 closes the connection without an answer (v0 cannot carry one).
    let mut wire = sasl_plaintext(&running).await;
    assert_eq!(wire.handshake(0, "PLAIN").await.error_code, 0);
    wire.send_raw(&PlainMessage::encode("alice", b"guess")).await;
    assert!(wire.closed().await);
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_served_before_authentication_and_bad_exchanges_close_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let running = Running::start(dir.path(), &SASL_LISTENERS[..2], None).await;
    // A request other than ApiVersions or SASL: closed, unanswered.
    let mut wire = sasl_plaintext(&running).await;
    wire.send(ApiKey::Metadata, 8, &MetadataRequest::default()).await;
    assert!(wire.closed().await);
    // Mirror administration (the private key) is no exception.
    let mut wire = sasl_plaintext(&running).await;
    wire.send_raw(&[0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff]).await;
    assert!(wire.closed().await);
    // SaslAuthenticate before the handshake.
    let mut wire = sasl_plaintext(&running).await;
    wire.send(ApiKey::SaslAuthenticate, 2, &SaslAuthenticateRequest::default())
        .await;
    assert!(wire.closed().await);
    // A mechanism that is not enabled: the enabled list, then closed.
    let mut wire = sasl_plaintext(&running).await;
    let refused = wire.handshake(1, "GSSAPI").await;
    assert_eq!(refused.error_code, 33, "UNSUPPORTED_SASL_MECHANISM");
    let offered: Vec<String> = refused.mechanisms.iter().map(|name| name.to_string()).collect();
    assert_eq!(offered, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
    assert!(wire.closed().await);
    // A second handshake in the middle of an exchange.
    let mut wire = sasl_plaintext(&running).await;
    assert_eq!(wire.handshake(1, "SCRAM-SHA-256").await.error_code, 0);
    wire.send(ApiKey::SaslHandshake, 1, &SaslHandshakeRequest::default())
        .await;
    assert!(wire.closed().await);
    // SCRAM messages out of order: a client-final first.
    let mut wire = sasl_plaintext(&running).await;
    assert_eq!(wire.handshake(1, "SCRAM-SHA-256").await.error_code, 0);
    let refused = wire.authenticate(b"c=biws,r=abc,p=AAAA".to_vec()).await.unwrap();
    assert_eq!(refused.error_code, 58);
    assert!(wire.closed().await);
    // A frame claiming 2 GiB before authentication: closed before anything is read or allocated.
    let mut wire = sasl_plaintext(&running).await;
    let _ = wire.stream.write_all(&0x7fff_ffffi32.to_be_bytes()).await;
    assert!(wire.closed().await);
    // A connection that never authenticates is closed after the authentication timeout (500 ms here).
    let mut wire = sasl_plaintext(&running).await;
    assert!(wire.closed().await);
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_requires_a_client_certificate_and_plaintext_on_a_tls_port_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let running = Running::start(dir.path(), &[SecurityProtocol::Ssl], Some(server_tls(&pki, true))).await;
    let address = running.address(SecurityProtocol::Ssl);
    let name = || ServerName::try_from("localhost").unwrap();
    let tls = tls_client(&pki, true)
        .connect(name(), TcpStream::connect(address).await.unwrap())
        .await
        .expect("a client with a certificate");
    let mut wire = Wire::new(tls);
    assert_eq!(wire.advertised_port().await, Some(i32::from(address.port())));
    // Without a certificate: the server refuses the handshake (TLS 1.3 reports it at the first read).
    let refused = match tls_client(&pki, false)
        .connect(name(), TcpStream::connect(address).await.unwrap())
        .await
    {
        Err(_) => true,
        Ok(tls) => Wire::new(tls).advertised_port().await.is_none(),
    };
    assert!(refused, "a client without a certificate is refused");
    // A Kafka request in plaintext on the TLS port: closed, unanswered.
    let mut plain = Wire::new(TcpStream::connect(address).await.unwrap());
    plain
        .send(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
        .await;
    assert!(plain.closed().await);
    // A client that opens TCP and never starts TLS is closed after the timeout.
    let mut silent = Wire::new(TcpStream::connect(address).await.unwrap());
    assert!(silent.closed().await);
    running.shutdown().await;
}

#[test]
fn a_client_certificate_names_its_principal_as_kafkas_default_builder_does() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let principal = broker::tls::principal_of(Some(&pki.client_chain));
    assert_eq!(principal.to_string(), r"User:CN=client-1,O=Acme\, Inc");
    assert_eq!(broker::tls::principal_of(None).to_string(), "User:ANONYMOUS");
}

#[tokio::test]
async fn listener_settings_that_cannot_be_honoured_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let storage = StorageConfig::for_backend(storage_config::Backend::Memory, std::path::Path::new(""));
    let listener = |text: &str| text.parse::<ListenerConfig>().unwrap();
    let cases: [(Vec<ListenerConfig>, Option<TlsConfig>, &str); 4] = [
        (
            vec![listener("SSL://127.0.0.1:0")],
            None,
            "needs a TLS certificate",
        ),
        (
            vec![listener("127.0.0.1:0")],
            Some(server_tls(&pki, false)),
            "no listener is SSL",
        ),
        (
            vec![listener("127.0.0.1:0"), listener("PLAINTEXT://127.0.0.1:0")],
            None,
            "two PLAINTEXT listeners",
        ),
        (
            vec![listener("SSL://127.0.0.1:0")],
            Some(TlsConfig {
                cert: dir.path().join("missing.pem"),
                key: pki.key.clone(),
                client_ca: None,
            }),
            "missing.pem",
        ),
    ];
    for (listeners, tls, expected) in cases {
        let mut config = BrokerConfig::new("127.0.0.1:0".parse().unwrap(), storage.clone());
        config.listeners = listeners;
        config.tls = tls;
        let error = Server::bind(config).await.expect_err("refused").to_string();
        assert!(error.contains(expected), "{error}");
    }
}

/// One step of a client that has not authenticated.
#[derive(Debug, Clone)]
enum Step {
    ApiVersions,
    Handshake {
        version: i16,
        mechanism: &'static str,
    },
    Authenticate(Vec<u8>),
    /// Any other request the broker serves, with an empty body.
    Other(ApiKey),
    /// Mirror administration on its private key.
    MirrorAdmin,
    /// A frame that is no request at all (an unknown API key, then random bytes).
    Garbage(Vec<u8>),
}

fn steps() -> impl proptest::strategy::Strategy<Value = Vec<Step>> {
    use proptest::prelude::*;
    let mechanism = prop_oneof![
        Just("PLAIN"),
        Just("SCRAM-SHA-256"),
        Just("SCRAM-SHA-512"),
        Just("GSSAPI")
    ];
    let other = proptest::sample::select(
        broker::versions::ADVERTISED
            .iter()
            .map(|(key, _, _)| *key)
            .filter(|key| {
                !matches!(
                    key,
                    ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
                )
            })
            .collect::<Vec<_>>(),
    );
    let step = prop_oneof![
        Just(Step::ApiVersions),
        (0i16..=1, mechanism).prop_map(|(version, mechanism)| Step::Handshake { version, mechanism }),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Step::Authenticate),
        prop_oneof![
            Just(b"n,,n=alice,r=abcdef".to_vec()),
            Just(PlainMessage::encode("alice", b"wrong")),
        ]
        .prop_map(Step::Authenticate),
        other.prop_map(Step::Other),
        Just(Step::MirrorAdmin),
        proptest::collection::vec(any::<u8>(), 0..32).prop_map(Step::Garbage),
    ];
    proptest::collection::vec(step, 1..8)
}

/// Plays `steps` on a fresh connection; every answer must be to ApiVersions or a SASL request (never to anything
/// else), and the connection must have closed by the time a request other than those was sent.
async fn play(address: SocketAddr, steps: &[Step]) -> Result<(), String> {
    let mut wire = Wire::new(TcpStream::connect(address).await.map_err(|e| e.to_string())?);
    let mut raw_tokens = false;
    for step in steps {
        let before = wire.correlation_id;
        match step {
            Step::ApiVersions => {
                wire.send(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
                    .await
            }
            Step::Handshake { version, mechanism } => {
                let mut request = SaslHandshakeRequest::default();
                request.mechanism = StrBytes::from_static_str(mechanism);
                wire.send(ApiKey::SaslHandshake, *version, &request).await;
            }
            Step::Authenticate(token) if raw_tokens => wire.send_raw(token).await,
            Step::Authenticate(token) => {
                let mut request = SaslAuthenticateRequest::default();
                request.auth_bytes = Bytes::from(token.clone());
                wire.send(ApiKey::SaslAuthenticate, 2, &request).await;
            }
            Step::Other(key) => wire.send_raw(&header(*key as i16, 0, 99)).await,
            Step::MirrorAdmin => wire.send_raw(&header(0x7f00, 0, 99)).await,
            // An API key no API has, so that random bytes never form a request that may be answered.
            Step::Garbage(bytes) => wire.send_raw(&[&[0x7f, 0x7e][..], bytes].concat()).await,
        }
        let Some(mut answer) = wire.read_raw().await else {
            return Ok(()); // closed: nothing more can be served
        };
        match step {
            Step::Other(_) | Step::MirrorAdmin | Step::Garbage(_) => {
                return Err(format!("{step:?} was answered before authentication"));
            }
            Step::Authenticate(_) if raw_tokens => {}
            _ => {
                let correlation_id = answer.get_i32();
                if correlation_id != wire.correlation_id || correlation_id == before {
                    return Err(format!(
                        "an answer with correlation id {correlation_id} to {step:?}"
                    ));
                }
            }
        }
        if let Step::Handshake {
            version: 0,
            mechanism,
        } = step
        {
            raw_tokens = *mechanism != "GSSAPI";
        }
    }
    Ok(())
}

/// A request header with no body: API key, version, correlation id, null client id.
fn header(api_key: i16, version: i16, correlation_id: i32) -> Vec<u8> {
    let mut header = Vec::with_capacity(10);
    header.extend_from_slice(&api_key.to_be_bytes());
    header.extend_from_slice(&version.to_be_bytes());
    header.extend_from_slice(&correlation_id.to_be_bytes());
    header.extend_from_slice(&(-1i16).to_be_bytes());
    header
}

#[test]
fn no_request_is_served_to_a_connection_that_did_not_authenticate() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let running = runtime.block_on(Running::start(dir.path(), &SASL_LISTENERS[..2], None));
    let address = running.address(SecurityProtocol::SaslPlaintext);
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases: 48,
        ..proptest::test_runner::Config::default()
    });
    runner
        .run(&steps(), |steps| {
            runtime
                .block_on(play(address, &steps))
                .map_err(proptest::test_runner::TestCaseError::fail)
        })
        .unwrap();
    runtime.block_on(running.shutdown());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_administration_reaches_a_secured_serve_with_a_kafka_client_properties_file() {
    use node::mirror::AdminRequest;
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let running = Running::start(dir.path(), &SASL_LISTENERS, Some(server_tls(&pki, false))).await;
    let properties = |mechanism: &str, module: &str, password: &str, truststore: &std::path::Path| {
        format!(
            "security.protocol=SASL_SSL\nsasl.mechanism={mechanism}\n\
             sasl.jaas.config=org.apache.kafka.common.security.{module} required username=\"alice\" password=\"{password}\";\n\
             ssl.truststore.type=PEM\nssl.truststore.location={}\n",
            truststore.display()
        )
    };
    let security = |text: String| mirror_link::ClientSecurity::from_properties(&text, dir.path()).unwrap();
    let address = running.address(SecurityProtocol::SaslSsl).to_string();
    let call = |security: mirror_link::ClientSecurity| {
        let address = address.clone();
        async move {
            mirror_link::admin::call(&address, &AdminRequest::List, Duration::from_secs(10), &security).await
        }
    };
    for (mechanism, module) in [
        ("SCRAM-SHA-512", "scram.ScramLoginModule"),
        ("SCRAM-SHA-256", "scram.ScramLoginModule"),
        ("PLAIN", "plain.PlainLoginModule"),
    ] {
        let answer = call(security(properties(mechanism, module, "secret", &pki.ca_file)))
            .await
            .unwrap_or_else(|error| panic!("{mechanism}: {error}"));
        assert!(answer.ok, "{mechanism}: {answer:?}");
    }
    let refused = call(security(properties(
        "SCRAM-SHA-512",
        "scram.ScramLoginModule",
        "guess",
        &pki.ca_file,
    )))
    .await
    .expect_err("a wrong password")
    .to_string();
    assert!(refused.contains("SASL_AUTHENTICATION_FAILED"), "{refused}");
    assert!(!refused.contains("guess"), "{refused}");
    // A truststore that does not hold the server's CA: the TLS handshake is refused, and says so.
    let other = pki_in(&dir.path().join("other"));
    let untrusted = call(security(properties(
        "SCRAM-SHA-512",
        "scram.ScramLoginModule",
        "secret",
        &other,
    )))
    .await
    .expect_err("an untrusted certificate")
    .to_string();
    assert!(untrusted.contains("TLS to"), "{untrusted}");
    running.shutdown().await;
}

/// Another CA's certificate, as a PEM file in `dir`.
fn pki_in(dir: &std::path::Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    pki(dir).ca_file
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_authenticate_hold_back_no_one_and_are_closed_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let running = Running::start(dir.path(), &SASL_LISTENERS, Some(server_tls(&pki, false))).await;
    // 200 connections that never start TLS, 200 that never send a SASL frame (400 descriptors here, 400 in the
    // broker: within a default limit of 1,024).
    let mut idle = Vec::new();
    for protocol in [SecurityProtocol::SaslSsl, SecurityProtocol::SaslPlaintext] {
        for _ in 0..200 {
            idle.push(TcpStream::connect(running.address(protocol)).await.unwrap());
        }
    }
    // Meanwhile a client authenticates and is served at once.
    let started = std::time::Instant::now();
    let mut wire = sasl_ssl(&running, &pki).await;
    assert_eq!(wire.scram(ScramMechanism::Sha512, "alice", b"secret").await, None);
    assert!(wire.advertised_port().await.is_some());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Every idle connection is closed by the broker once the authentication timeout (500 ms) passes.
    for mut stream in idle {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut byte))
            .await
            .expect("closed within 10 s");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }
    running.shutdown().await;
}
