//! The client side of Kafka's security protocols, for connections to secured brokers (a mirror link's source,
//! `mirrorlog mirror` reaching a secured `serve`): TLS (rustls over `ring`) and SASL PLAIN or SCRAM, configured
//! from a Kafka client properties file as Kafka's clients read one.
//!
//! Keys honoured: `security.protocol`; `sasl.mechanism` and `sasl.jaas.config` (`PlainLoginModule` or
//! `ScramLoginModule` with `username` and `password`); `ssl.truststore.type=PEM` with `ssl.truststore.location` or
//! `ssl.truststore.certificates` (none: the system's CA certificates, as the JVM uses its own); for mutual TLS
//! `ssl.keystore.type=PEM` with `ssl.keystore.location` (key and chain in one file) or
//! `ssl.keystore.certificate.chain` and `ssl.keystore.key`; `ssl.endpoint.identification.algorithm=https` (the
//! default). Anything else — another key, a JKS store, an encrypted key, hostname verification turned off, GSSAPI
//! — is refused with a message naming it, never ignored.
//!
//! The password is a secret: [`ClientSecurity`]'s `Debug` and every error leave it out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kafka_auth::{SaslMechanism, SecurityProtocol};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Why a client security configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SecurityConfigError(pub String);

fn refuse<T>(message: impl Into<String>) -> Result<T, SecurityConfigError> {
    Err(SecurityConfigError(message.into()))
}

/// A SASL login: the mechanism, the user and the password.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslLogin {
    /// The mechanism.
    pub mechanism: SaslMechanism,
    /// The user name.
    pub user: String,
    /// The password (a secret: never shown).
    pub password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("mechanism", &self.mechanism)
            .field("user", &self.user)
            .field("password", &"[redacted]")
            .finish()
    }
}

/// How a client reaches a secured broker.
#[derive(Clone, Debug)]
pub struct ClientSecurity {
    /// The protocol of the broker's listener.
    pub protocol: SecurityProtocol,
    /// The SASL login (SASL_PLAINTEXT, SASL_SSL).
    pub sasl: Option<SaslLogin>,
    /// The TLS settings (SSL, SASL_SSL).
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl ClientSecurity {
    /// PLAINTEXT: no TLS, no SASL.
    pub fn plaintext() -> Self {
        ClientSecurity {
            protocol: SecurityProtocol::Plaintext,
            sasl: None,
            tls: None,
        }
    }

    /// Reads a Kafka client properties file; relative paths in it are relative to the file's directory.
    pub fn from_file(path: &Path) -> Result<Self, SecurityConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| SecurityConfigError(format!("{}: {error}", path.display())))?;
        Self::from_properties(&text, path.parent().unwrap_or(Path::new(".")))
            .map_err(|error| SecurityConfigError(format!("{}: {error}", path.display())))
    }

    /// Reads the text of a Kafka client properties file (see the module docs).
    pub fn from_properties(text: &str, base: &Path) -> Result<Self, SecurityConfigError> {
        Self::from_settings(read_properties(text)?, base)
    }

    /// Reads settings already split into keys and values (see the module docs); relative paths are relative to
    /// `base`.
    pub fn from_settings(
        mut properties: BTreeMap<String, String>,
        base: &Path,
    ) -> Result<Self, SecurityConfigError> {
        let mut take = |key: &str| properties.remove(key);
        let protocol: SecurityProtocol = match take("security.protocol") {
            Some(value) => value.parse().map_err(SecurityConfigError)?,
            None => SecurityProtocol::Plaintext,
        };
        let mechanism = take("sasl.mechanism");
        let jaas = take("sasl.jaas.config");
        let sasl = if protocol.sasl() {
            // Kafka's default mechanism is GSSAPI, which is not served here.
            let mechanism = mechanism.unwrap_or_else(|| "GSSAPI".to_owned());
            let mechanism: SaslMechanism = mechanism.parse().map_err(SecurityConfigError)?;
            let jaas = jaas.ok_or_else(|| {
                SecurityConfigError("sasl.jaas.config is required with a SASL security.protocol".to_owned())
            })?;
            Some(login(mechanism, &jaas)?)
        } else if mechanism.is_some() || jaas.is_some() {
            return refuse(format!(
                "sasl.* settings with security.protocol={protocol} (no SASL)"
            ));
        } else {
            None
        };
        let tls_keys: BTreeMap<String, String> = [
            "ssl.truststore.type",
            "ssl.truststore.location",
            "ssl.truststore.certificates",
            "ssl.keystore.type",
            "ssl.keystore.location",
            "ssl.keystore.certificate.chain",
            "ssl.keystore.key",
            "ssl.key.password",
            "ssl.keystore.password",
            "ssl.truststore.password",
            "ssl.endpoint.identification.algorithm",
        ]
        .into_iter()
        .filter_map(|key| take(key).map(|value| (key.to_owned(), value)))
        .collect();
        if let Some(key) = properties.keys().next() {
            return refuse(format!(
                "{key} is not a setting this client honours (security.protocol, sasl.mechanism, sasl.jaas.config and \
                 the PEM forms of ssl.truststore.* and ssl.keystore.*)"
            ));
        }
        let tls = if protocol.tls() {
            Some(tls_config(&tls_keys, base)?)
        } else if let Some(key) = tls_keys.keys().next() {
            return refuse(format!("{key} with security.protocol={protocol} (no TLS)"));
        } else {
            None
        };
        Ok(ClientSecurity { protocol, sasl, tls })
    }
}

/// A client properties file's settings made self-contained: the PEM files it names (`ssl.truststore.location`,
/// `ssl.keystore.location`) read into the inline forms Kafka also takes (`ssl.truststore.certificates`,
/// `ssl.keystore.certificate.chain` and `ssl.keystore.key`), so that they can be stored with a mirror link and
/// read by a process that does not see the files. Checked as [`ClientSecurity::from_settings`] checks them.
pub fn self_contained(path: &Path) -> Result<BTreeMap<String, String>, SecurityConfigError> {
    let error = |reason: String| SecurityConfigError(format!("{}: {reason}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut settings = read_properties(&text).map_err(|e| error(e.0))?;
    ClientSecurity::from_settings(settings.clone(), base).map_err(|e| error(e.0))?;
    let read = |value: &str| {
        let file = if Path::new(value).is_absolute() {
            PathBuf::from(value)
        } else {
            base.join(value)
        };
        std::fs::read_to_string(&file).map_err(|e| error(format!("{}: {e}", file.display())))
    };
    if let Some(location) = settings.remove("ssl.truststore.location") {
        settings.insert("ssl.truststore.certificates".to_owned(), read(&location)?);
    }
    if let Some(location) = settings.remove("ssl.keystore.location") {
        let pem = read(&location)?;
        settings.insert("ssl.keystore.certificate.chain".to_owned(), pem.clone());
        settings.insert("ssl.keystore.key".to_owned(), pem);
    }
    Ok(settings)
}

/// Java properties, as Kafka's clients read them: `key=value` or `key: value`, `#` and `!` comments, a trailing
/// `\` continuing a line. A key given twice is refused.
pub fn read_properties(text: &str) -> Result<BTreeMap<String, String>, SecurityConfigError> {
    let mut properties = BTreeMap::new();
    let mut logical = String::new();
    for line in text.lines() {
        let line = if logical.is_empty() {
            line.trim_start()
        } else {
            line.trim()
        };
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!')) {
            continue;
        }
        if let Some(continued) = line.strip_suffix('\\') {
            logical.push_str(continued);
            continue;
        }
        logical.push_str(line);
        let entry = std::mem::take(&mut logical);
        let split = entry.find(['=', ':']).ok_or_else(|| {
            SecurityConfigError(format!(
                "a line that is not key=value: {:?}",
                entry.chars().take(40).collect::<String>()
            ))
        })?;
        let key = entry[..split].trim().to_owned();
        let value = entry[split + 1..].trim().to_owned();
        if properties.insert(key.clone(), value).is_some() {
            return refuse(format!("{key} is given twice"));
        }
    }
    Ok(properties)
}

/// The login of a `sasl.jaas.config`: `LoginModuleClass required username="…" password="…";`.
fn login(mechanism: SaslMechanism, jaas: &str) -> Result<SaslLogin, SecurityConfigError> {
    let expected = match mechanism {
        SaslMechanism::Plain => "org.apache.kafka.common.security.plain.PlainLoginModule",
        SaslMechanism::Scram(_) => "org.apache.kafka.common.security.scram.ScramLoginModule",
    };
    let text = jaas.trim().strip_suffix(';').unwrap_or(jaas.trim());
    let mut words = text.splitn(3, char::is_whitespace);
    let module = words.next().unwrap_or("");
    if module != expected {
        return refuse(format!(
            "sasl.jaas.config: {mechanism} needs {expected}, not {module:?}"
        ));
    }
    if words.next() != Some("required") {
        return refuse("sasl.jaas.config: the login module's flag must be `required`");
    }
    let mut options = BTreeMap::new();
    let mut rest = words.next().unwrap_or("").trim();
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once('=')
            .ok_or_else(|| SecurityConfigError("sasl.jaas.config: an option without a value".to_owned()))?;
        let after = after.trim_start();
        let (value, remaining) = match after.strip_prefix('"') {
            Some(quoted) => {
                let end = quoted.find('"').ok_or_else(|| {
                    SecurityConfigError("sasl.jaas.config: an unterminated quote".to_owned())
                })?;
                (&quoted[..end], &quoted[end + 1..])
            }
            None => after.split_once(char::is_whitespace).unwrap_or((after, "")),
        };
        options.insert(key.trim().to_owned(), value.to_owned());
        rest = remaining.trim();
    }
    let user = options.remove("username");
    let password = options.remove("password");
    if let Some(other) = options.keys().next() {
        return refuse(format!(
            "sasl.jaas.config: the option {other:?} is not honoured (username and password are)"
        ));
    }
    match (user, password) {
        (Some(user), Some(password)) if !user.is_empty() && !password.is_empty() => Ok(SaslLogin {
            mechanism,
            user,
            password,
        }),
        _ => refuse("sasl.jaas.config: username and password are required"),
    }
}

fn tls_config(
    keys: &BTreeMap<String, String>,
    base: &Path,
) -> Result<Arc<rustls::ClientConfig>, SecurityConfigError> {
    for (key, value) in keys {
        let pem_only = key.ends_with(".type") && !value.eq_ignore_ascii_case("PEM");
        if pem_only {
            return refuse(format!(
                "{key}={value}: only PEM stores are read (convert with keytool or openssl)"
            ));
        }
        if key.ends_with("password") {
            return refuse(format!(
                "{key}: encrypted keys and stores are not read; use an unencrypted PEM key"
            ));
        }
    }
    if let Some(value) = keys.get("ssl.endpoint.identification.algorithm") {
        if !value.eq_ignore_ascii_case("https") {
            return refuse(format!(
                "ssl.endpoint.identification.algorithm={value:?}: hostname verification cannot be turned off"
            ));
        }
    }
    let path = |value: &str| -> PathBuf {
        let path = Path::new(value);
        if path.is_absolute() {
            path.to_owned()
        } else {
            base.join(path)
        }
    };
    let file_error = |file: &Path, error: &dyn std::fmt::Display| {
        SecurityConfigError(format!("{}: {error}", file.display()))
    };
    let mut roots = rustls::RootCertStore::empty();
    let trusted: Vec<CertificateDer<'static>> = match (
        keys.get("ssl.truststore.location"),
        keys.get("ssl.truststore.certificates"),
    ) {
        (Some(_), Some(_)) => {
            return refuse("ssl.truststore.location and ssl.truststore.certificates are exclusive")
        }
        (Some(location), None) => {
            let file = path(location);
            read_certificates(&file).map_err(|error| file_error(&file, &error))?
        }
        (None, Some(inline)) => certificates_from_pem(inline.as_bytes())
            .map_err(|error| SecurityConfigError(format!("ssl.truststore.certificates: {error}")))?,
        (None, None) => {
            let native = rustls_native_certs::load_native_certs();
            if native.certs.is_empty() {
                return refuse("no ssl.truststore given and the system has no CA certificates");
            }
            native.certs
        }
    };
    for certificate in trusted {
        roots
            .add(certificate)
            .map_err(|error| SecurityConfigError(format!("a trusted certificate rustls refuses: {error}")))?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(crypto_provider())
        .with_safe_default_protocol_versions()
        .map_err(|error| SecurityConfigError(error.to_string()))?
        .with_root_certificates(roots);
    let identity = match (
        keys.get("ssl.keystore.location"),
        keys.get("ssl.keystore.certificate.chain"),
        keys.get("ssl.keystore.key"),
    ) {
        (None, None, None) => None,
        (Some(location), None, None) => {
            let file = path(location);
            let chain = read_certificates(&file).map_err(|error| file_error(&file, &error))?;
            let key = PrivateKeyDer::from_pem_file(&file).map_err(|error| file_error(&file, &error))?;
            Some((chain, key))
        }
        (None, Some(chain), Some(key)) => Some((
            certificates_from_pem(chain.as_bytes())
                .map_err(|error| SecurityConfigError(format!("ssl.keystore.certificate.chain: {error}")))?,
            PrivateKeyDer::from_pem_slice(key.as_bytes())
                .map_err(|error| SecurityConfigError(format!("ssl.keystore.key: {error}")))?,
        )),
        _ => return refuse("ssl.keystore.location, or ssl.keystore.certificate.chain with ssl.keystore.key"),
    };
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|error| SecurityConfigError(format!("the client certificate and key: {error}")))?,
    };
    Ok(Arc::new(config))
}

/// The crypto provider every TLS configuration of this project uses (explicit, so that no process-wide default
/// is needed): `ring`, which builds with the C compiler alone. rustls 0.23.48 deprecates it for lacking
/// post-quantum key exchange; the JVM's TLS, which Kafka and its clients use, offers none either (ADR 0056).
#[allow(deprecated)]
pub fn crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate of a PEM file (none is an error).
pub fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = std::fs::read(path).map_err(|error| error.to_string())?;
    certificates_from_pem(&bytes)
}

/// Every certificate of PEM text (none is an error).
pub fn certificates_from_pem(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| error.to_string())?;
    if certificates.is_empty() {
        return Err("no CERTIFICATE block".to_owned());
    }
    Ok(certificates)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use kafka_auth::ScramMechanism;

    fn parse(text: &str) -> Result<ClientSecurity, SecurityConfigError> {
        ClientSecurity::from_properties(text, Path::new("/nonexistent"))
    }

    #[test]
    fn a_sasl_plaintext_scram_login_reads_kafkas_jaas_line() {
        let security = parse(
            "# a comment\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n  \
             username=\"app\" password=\"s3cr=t\";\n",
        )
        .unwrap();
        let login = security.sasl.unwrap();
        assert_eq!(login.mechanism, SaslMechanism::Scram(ScramMechanism::Sha512));
        assert_eq!((login.user.as_str(), login.password.as_str()), ("app", "s3cr=t"));
        assert!(!format!("{login:?}").contains("s3cr=t"));
        assert!(security.tls.is_none());
    }

    #[test]
    fn settings_that_cannot_be_honoured_are_refused_by_name() {
        let jaas = "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a\" password=\"b\";";
        for (text, expected) in [
            ("security.protocol=SASL_PLAINTEXT\n".to_owned() + jaas, "GSSAPI"),
            (
                "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n".to_owned(),
                "sasl.jaas.config is required",
            ),
            (
                "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n".to_owned() + jaas,
                "ScramLoginModule",
            ),
            (
                "security.protocol=SSL\nssl.truststore.type=JKS\n".to_owned(),
                "only PEM",
            ),
            (
                "security.protocol=SSL\nssl.key.password=x\n".to_owned(),
                "encrypted",
            ),
            (
                "security.protocol=SSL\nssl.endpoint.identification.algorithm=\n".to_owned(),
                "cannot be turned off",
            ),
            (
                "security.protocol=PLAINTEXT\nssl.truststore.location=ca.pem\n".to_owned(),
                "no TLS",
            ),
            (
                "security.protocol=PLAINTEXT\nrequest.timeout.ms=1\n".to_owned(),
                "request.timeout.ms",
            ),
            ("security.protocol=KERBEROS\n".to_owned(), "must be one of"),
            (
                "security.protocol=SSL\nsecurity.protocol=SSL\n".to_owned(),
                "twice",
            ),
            (
                "security.protocol=SSL\nssl.truststore.location=missing.pem\n".to_owned(),
                "missing.pem",
            ),
        ] {
            let error = parse(&text).expect_err(&text).to_string();
            assert!(error.contains(expected), "{text:?}: {error}");
            assert!(!error.contains("password=\"b\""), "{error}");
        }
    }
}
