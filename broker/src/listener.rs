//! Listeners as Kafka names them (`listeners`, `advertised.listeners`): `PROTOCOL://host:port`, where the
//! protocol is one of Kafka's security protocols and names the listener (there is no
//! `listener.security.protocol.map`: one listener per protocol at most). A bare `host:port` is PLAINTEXT.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::str::FromStr;

pub use kafka_auth::SecurityProtocol;

/// Splits `PROTOCOL://host:port` (or a bare `host:port`, PLAINTEXT) into its protocol, host and port. An empty host
/// (`PLAINTEXT://:9092`) means every interface, as in Kafka.
pub fn split_listener_url(text: &str) -> Result<(SecurityProtocol, String, u16), String> {
    let (protocol, address) = match text.split_once("://") {
        Some((protocol, address)) => (protocol.parse()?, address),
        None => (SecurityProtocol::Plaintext, text),
    };
    let (host, port) = address
        .rsplit_once(':')
        .ok_or_else(|| format!("{text:?}: expected PROTOCOL://HOST:PORT"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("{text:?}: the port must be a number from 0 to 65535"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok((protocol, host.to_owned(), port))
}

/// One listener: what it speaks, where it binds, and the address clients are told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerConfig {
    /// Its security protocol (also its name).
    pub protocol: SecurityProtocol,
    /// The address bound.
    pub bind: SocketAddr,
    /// The host and port Metadata, DescribeCluster and FindCoordinator answer on this listener; `None`: the
    /// address bound.
    pub advertised: Option<(String, u16)>,
}

impl ListenerConfig {
    /// A PLAINTEXT listener on `bind`.
    pub fn plaintext(bind: SocketAddr) -> Self {
        ListenerConfig {
            protocol: SecurityProtocol::Plaintext,
            bind,
            advertised: None,
        }
    }
}

impl FromStr for ListenerConfig {
    type Err = String;

    /// `PROTOCOL://host:port` or `host:port`; a host name is resolved now (its first address).
    fn from_str(text: &str) -> Result<Self, String> {
        let (protocol, host, port) = split_listener_url(text)?;
        let host = if host.is_empty() { "0.0.0.0" } else { host.as_str() };
        let bind = (host, port)
            .to_socket_addrs()
            .map_err(|error| format!("{text:?}: {error}"))?
            .next()
            .ok_or_else(|| format!("{text:?}: the host resolves to no address"))?;
        Ok(ListenerConfig {
            protocol,
            bind,
            advertised: None,
        })
    }
}

impl fmt::Display for ListenerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.protocol, self.bind)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn listener_urls_name_their_protocol_and_a_bare_address_is_plaintext() {
        let listener: ListenerConfig = "SASL_SSL://127.0.0.1:9094".parse().unwrap();
        assert_eq!(listener.protocol, SecurityProtocol::SaslSsl);
        assert_eq!(listener.bind, "127.0.0.1:9094".parse().unwrap());
        let bare: ListenerConfig = "127.0.0.1:9092".parse().unwrap();
        assert_eq!(bare.protocol, SecurityProtocol::Plaintext);
        assert_eq!(bare.to_string(), "PLAINTEXT://127.0.0.1:9092");
        let any: ListenerConfig = "SSL://:9093".parse().unwrap();
        assert_eq!(any.bind, "0.0.0.0:9093".parse().unwrap());
        let v6: ListenerConfig = "PLAINTEXT://[::1]:9092".parse().unwrap();
        assert_eq!(v6.bind, "[::1]:9092".parse().unwrap());
    }

    #[test]
    fn unknown_protocols_and_bad_ports_are_refused() {
        for text in [
            "SASL://127.0.0.1:1",
            "SSL://127.0.0.1",
            "SSL://127.0.0.1:99999",
            "SSL://127.0.0.1:x",
        ] {
            assert!(text.parse::<ListenerConfig>().is_err(), "{text}");
        }
    }
}
