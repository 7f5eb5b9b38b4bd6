//! `mirrorlog serve --server-properties FILE`: the security settings of a Kafka broker's `server.properties`,
//! under Kafka's key names, for an operator who keeps them in a file rather than on the command line.
//!
//! Read (Java properties syntax): `listeners`, `advertised.listeners`, `ssl.keystore.type` (PEM only),
//! `ssl.keystore.location` (one PEM file holding the certificate chain and the private key, as Kafka's PEM
//! keystore), `ssl.truststore.type` (PEM only), `ssl.truststore.location`, `ssl.client.auth` (`required` or
//! `none`), `sasl.enabled.mechanisms`, `authorizer.class.name` (Kafka's StandardAuthorizer or empty),
//! `super.users` (`;`-separated) and `allow.everyone.if.no.acl.found`. Any other key is refused by name — a
//! setting this broker cannot honour is never silently ignored — and so is a setting given both here and as a
//! flag.

use std::path::{Path, PathBuf};

use broker::{ListenerConfig, SaslMechanism, SecurityProtocol};

/// Kafka's name for the authorizer `serve --authorizer acl` runs.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// The settings a file gave (`None`: not in the file).
#[derive(Debug, Default)]
pub struct ServerProperties {
    /// `listeners`.
    pub listeners: Option<Vec<ListenerConfig>>,
    /// `advertised.listeners`.
    pub advertised: Option<Vec<(SecurityProtocol, String, u16)>>,
    /// `ssl.keystore.location`: the PEM file of the chain and the key.
    pub keystore: Option<PathBuf>,
    /// `ssl.truststore.location` with `ssl.client.auth=required`: the CA of client certificates.
    pub client_ca: Option<PathBuf>,
    /// `sasl.enabled.mechanisms`.
    pub sasl_mechanisms: Option<Vec<SaslMechanism>>,
    /// `authorizer.class.name`: whether the ACL authorizer runs.
    pub authorizer: Option<bool>,
    /// `super.users`.
    pub super_users: Option<Vec<String>>,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_everyone_if_no_acl_found: Option<bool>,
}

/// Reads `path`; relative file names in it are relative to its directory.
pub fn load(path: &Path) -> Result<ServerProperties, String> {
    let text = std::fs::read_to_string(path).map_err(|error| format!("{}: {error}", path.display()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse(&text, base).map_err(|error| format!("{}: {error}", path.display()))
}

/// Parses the text of a properties file; see the module docs.
pub fn parse(text: &str, base: &Path) -> Result<ServerProperties, String> {
    let properties = mirror_link::security::read_properties(text).map_err(|error| error.to_string())?;
    let mut read = ServerProperties::default();
    let mut client_auth_required = false;
    let mut truststore = None;
    for (key, value) in properties {
        let value = value.trim().to_owned();
        let list = || value.split(',').map(str::trim).filter(|item| !item.is_empty());
        match key.as_str() {
            "listeners" => {
                let listeners = list()
                    .map(|url| url.parse::<ListenerConfig>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|error| format!("listeners: {error}"))?;
                read.listeners = Some(listeners);
            }
            "advertised.listeners" => {
                let advertised = list()
                    .map(|url| {
                        broker::listener::split_listener_url(url)
                            .map_err(|error| format!("advertised.listeners: {error}"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                read.advertised = Some(advertised);
            }
            "ssl.keystore.type" | "ssl.truststore.type" if value.eq_ignore_ascii_case("PEM") => {}
            "ssl.keystore.type" | "ssl.truststore.type" => {
                return Err(format!("{key}={value}: only PEM stores are read (convert JKS or PKCS12 to PEM)"));
            }
            "ssl.keystore.location" => read.keystore = Some(base.join(&value)),
            "ssl.truststore.location" => truststore = Some(base.join(&value)),
            "ssl.client.auth" => match value.as_str() {
                "required" => client_auth_required = true,
                "none" => client_auth_required = false,
                other => {
                    return Err(format!(
                        "ssl.client.auth={other}: only required or none (a certificate that is only requested \
                         is not supported)"
                    ))
                }
            },
            "sasl.enabled.mechanisms" => {
                let mechanisms = list()
                    .map(|name| name.parse::<SaslMechanism>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|error| format!("sasl.enabled.mechanisms: {error}"))?;
                read.sasl_mechanisms = Some(mechanisms);
            }
            "authorizer.class.name" => match value.as_str() {
                "" => read.authorizer = Some(false),
                STANDARD_AUTHORIZER | "kafka.security.authorizer.AclAuthorizer" => read.authorizer = Some(true),
                other => return Err(format!("authorizer.class.name={other}: only {STANDARD_AUTHORIZER}")),
            },
            "super.users" => {
                let users = value
                    .split(';')
                    .map(str::trim)
                    .filter(|user| !user.is_empty())
                    .map(|user| kafka_auth::Principal::parse(user).map(|principal| principal.to_string()))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|error| format!("super.users: {error}"))?;
                read.super_users = Some(users);
            }
            "allow.everyone.if.no.acl.found" => {
                read.allow_everyone_if_no_acl_found = Some(match value.as_str() {
                    "true" => true,
                    "false" => false,
                    other => return Err(format!("allow.everyone.if.no.acl.found={other}: true or false")),
                });
            }
            other => {
                return Err(format!(
                    "{other}: not a setting serve reads from a properties file (listeners, advertised.listeners, \
                     ssl.keystore.*, ssl.truststore.*, ssl.client.auth, sasl.enabled.mechanisms, \
                     authorizer.class.name, super.users, allow.everyone.if.no.acl.found)"
                ))
            }
        }
    }
    match (client_auth_required, truststore) {
        (true, Some(ca)) => read.client_ca = Some(ca),
        (true, None) => return Err("ssl.client.auth=required needs ssl.truststore.location".to_owned()),
        (false, Some(_)) => {
            return Err("ssl.truststore.location is read only with ssl.client.auth=required".to_owned())
        }
        (false, None) => {}
    }
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_security_keys_are_read() {
        let text = "listeners=SASL_SSL://127.0.0.1:9094,PLAINTEXT://127.0.0.1:9092\n\
                    advertised.listeners=SASL_SSL://broker-1:9094\n\
                    ssl.keystore.type=PEM\nssl.keystore.location=server.pem\n\
                    ssl.truststore.location=/etc/ca.pem\nssl.client.auth=required\n\
                    sasl.enabled.mechanisms=SCRAM-SHA-512\n\
                    authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
                    super.users=User:admin;User:ops\nallow.everyone.if.no.acl.found=false\n";
        let read = parse(text, Path::new("/srv")).unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(read.listeners.map(|listeners| listeners.len()), Some(2));
        assert_eq!(read.keystore, Some(PathBuf::from("/srv/server.pem")));
        assert_eq!(read.client_ca, Some(PathBuf::from("/etc/ca.pem")));
        assert_eq!(
            read.sasl_mechanisms,
            Some(vec![SaslMechanism::Scram(kafka_auth::ScramMechanism::Sha512)])
        );
        assert_eq!(read.authorizer, Some(true));
        assert_eq!(
            read.super_users,
            Some(vec!["User:admin".to_owned(), "User:ops".to_owned()])
        );
        assert_eq!(read.allow_everyone_if_no_acl_found, Some(false));
    }

    #[test]
    fn settings_serve_cannot_honour_are_refused_by_name() {
        for (text, named) in [
            ("log.dirs=/tmp\n", "log.dirs"),
            ("ssl.keystore.type=JKS\n", "JKS"),
            ("ssl.client.auth=requested\n", "requested"),
            ("ssl.client.auth=required\n", "ssl.truststore.location"),
            ("authorizer.class.name=com.example.Custom\n", "com.example.Custom"),
            ("super.users=admin\n", "super.users"),
            ("sasl.enabled.mechanisms=GSSAPI\n", "GSSAPI"),
            ("listeners=BOGUS://1.2.3.4:1\n", "listeners"),
            ("allow.everyone.if.no.acl.found=yes\n", "yes"),
        ] {
            let error = parse(text, Path::new("."))
                .err()
                .unwrap_or_else(|| panic!("{text} accepted"));
            assert!(error.contains(named), "{text}: {error}");
        }
    }
}
