//! TLS for SSL and SASL_SSL listeners (rustls over `ring`): the server certificate chain and key from PEM files,
//! TLS 1.2 and 1.3, and optional client authentication against a CA bundle (Kafka's `ssl.client.auth=required`),
//! in which case the principal is `User:` + the client certificate's subject in RFC 2253 form, as Kafka's default
//! principal builder names it.
//!
//! The files are read once, at start-up: a certificate is replaced by restarting `serve`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kafka_auth::principal::{rfc2253, rfc2253_short_name, DnValue};
use kafka_auth::Principal;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use x509_parser::der_parser::asn1_rs::ToDer;

/// Where a TLS listener's certificate and key are, and whom it accepts as clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// The server's certificate chain (PEM), leaf first.
    pub cert: PathBuf,
    /// The server's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates (PEM) client certificates must chain to; `Some`: every client must present one (mTLS).
    pub client_ca: Option<PathBuf>,
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// rustls refused the certificate, key or CA bundle.
    #[error("TLS: {0}")]
    Rustls(String),
}

fn file_error(path: &Path, reason: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

/// Reads every certificate of a PEM file (none is an error).
pub fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    mirror_link::security::read_certificates(path).map_err(|error| file_error(path, error))
}

/// Reads the first private key of a PEM file.
pub fn read_private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|error| file_error(path, format!("no usable private key ({error})")))
}

/// The crypto provider of every TLS configuration (`ring`; ADR 0056).
pub use mirror_link::security::crypto_provider;

impl TlsConfig {
    /// Loads the files into a server configuration.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let chain = read_certificates(&self.cert)?;
        let key = read_private_key(&self.key)?;
        let provider = crypto_provider();
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|error| TlsError::Rustls(error.to_string()))?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let mut roots = RootCertStore::empty();
                for certificate in read_certificates(path)? {
                    roots.add(certificate).map_err(|error| {
                        file_error(path, format!("not a CA certificate rustls accepts: {error}"))
                    })?;
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|error| TlsError::Rustls(error.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|error| TlsError::Rustls(format!("the certificate and key: {error}")))?;
        Ok(Arc::new(config))
    }
}

/// The principal of a TLS client: `User:` + its certificate's subject (RFC 2253), or `User:ANONYMOUS` without a
/// certificate (or with one whose subject cannot be read, which the verifier would not have accepted).
pub fn principal_of(certificates: Option<&[CertificateDer<'_>]>) -> Principal {
    let Some(leaf) = certificates.and_then(|chain| chain.first()) else {
        return Principal::anonymous();
    };
    let Ok((_, certificate)) = x509_parser::parse_x509_certificate(leaf.as_ref()) else {
        return Principal::anonymous();
    };
    let mut rdns = Vec::new();
    for rdn in certificate.subject().iter() {
        let mut values = Vec::new();
        for attribute in rdn.iter() {
            let oid = attribute.attr_type().to_id_string();
            let value = match (rfc2253_short_name(&oid), attribute.as_str()) {
                (Some(name), Ok(text)) => DnValue::Named(name, text),
                _ => DnValue::Other(oid, attribute.attr_value().to_der_vec().unwrap_or_default()),
            };
            values.push(value);
        }
        rdns.push(values);
    }
    Principal::user(rfc2253(&rdns))
}
