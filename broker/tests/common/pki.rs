//! Test certificates generated at run time (rcgen), never committed: a CA, a server certificate for
//! `localhost`/127.0.0.1 and a client certificate, written as PEM files.

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A CA, a server certificate for `localhost`/127.0.0.1 signed by it, and a client certificate signed by it, all
/// written as PEM files in `dir`.
pub struct Pki {
    pub ca: CertificateDer<'static>,
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
    pub ca_file: std::path::PathBuf,
    pub client_chain: Vec<CertificateDer<'static>>,
    pub client_key: PrivateKeyDer<'static>,
}

pub fn pki(dir: &std::path::Path) -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name = DistinguishedName::new();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "mirrorlog test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let server_key = KeyPair::generate().unwrap();
    let server_params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    let server_cert = server_params.signed_by(&server_key, &issuer).unwrap();
    let client_key = KeyPair::generate().unwrap();
    let mut client_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    client_params.distinguished_name = DistinguishedName::new();
    client_params
        .distinguished_name
        .push(DnType::OrganizationName, "Acme, Inc");
    client_params
        .distinguished_name
        .push(DnType::CommonName, "client-1");
    let client_cert = client_params.signed_by(&client_key, &issuer).unwrap();
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    Pki {
        ca: ca_cert.der().clone(),
        cert: write("server.pem", server_cert.pem()),
        key: write("server.key", server_key.serialize_pem()),
        ca_file: write("ca.pem", ca_cert.pem()),
        client_chain: vec![client_cert.der().clone()],
        client_key: PrivateKeyDer::try_from(client_key.serialize_der()).unwrap(),
    }
}
