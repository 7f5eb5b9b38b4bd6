//! A source's address list, as Kafka clients take `bootstrap.servers` (`host:port[,host:port…]`), and Metadata
//! from whichever broker of it answers.
//!
//! A session asks the brokers it already has a connection to first, then the list in its order, then every
//! broker the source's last answer named: a source whose bootstrap broker is down is still reached through the
//! others, as Kafka's clients do. Each address that does not answer is named in the error with why.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::MetadataResponse;

use crate::connection::KafkaConnection;
use crate::error::LinkError;

/// The most addresses one list may hold (a list is an operator's input).
const MAX_ADDRESSES: usize = 64;

/// The addresses of `given`, in its order, duplicates dropped: each `host:port` with a port from 1 to 65535.
pub fn bootstrap_servers(given: &str) -> Result<Vec<String>, LinkError> {
    let bad = |reason: String| LinkError::BadAddress {
        given: given.to_owned(),
        reason,
    };
    let mut addresses: Vec<String> = Vec::new();
    for entry in given.split(',').map(str::trim) {
        if entry.is_empty() {
            return Err(bad("an empty entry (`host:port[,host:port…]`)".to_owned()));
        }
        let Some((host, port)) = entry.rsplit_once(':') else {
            return Err(bad(format!("{entry:?} has no port (`host:port`)")));
        };
        let port_ok = port.parse::<u16>().is_ok_and(|port| port > 0);
        if host.is_empty() || !port_ok {
            return Err(bad(format!(
                "{entry:?} is not `host:port` with a port from 1 to 65535"
            )));
        }
        if !addresses.iter().any(|known| known == entry) {
            addresses.push(entry.to_owned());
        }
        if addresses.len() > MAX_ADDRESSES {
            return Err(bad(format!("more than {MAX_ADDRESSES} addresses")));
        }
    }
    Ok(addresses)
}

/// How to reach a source's brokers.
#[derive(Debug, Clone)]
pub(crate) struct Reach<'a> {
    /// The client id the source sees.
    pub client_id: &'a str,
    /// Every call's limit.
    pub timeout: Duration,
    /// The largest answer accepted on a new connection.
    pub response_bound: usize,
    /// How connections are secured.
    pub security: &'a crate::ClientSecurity,
}

/// Metadata of `topics` from the first of `candidates` that answers, reusing an open connection in `connections`
/// (a failed one is dropped from it); the answering broker's connection is left in `connections`. Returns the
/// answer, the source's cluster id and the address that gave them.
pub(crate) async fn metadata_from_any(
    candidates: &[String],
    connections: &mut BTreeMap<String, KafkaConnection>,
    topics: Option<&[String]>,
    reach: &Reach<'_>,
) -> Result<(MetadataResponse, String, String), LinkError> {
    let mut tried: Vec<String> = Vec::new();
    // With no address to try, a later call may have some (the list is never empty; the brokers named may be).
    let mut retryable = candidates.is_empty();
    for address in candidates {
        let mut connection = match connections.remove(address) {
            Some(connection) => connection,
            None => {
                match KafkaConnection::connect_secured(
                    address,
                    reach.client_id,
                    reach.timeout,
                    reach.response_bound,
                    reach.security,
                )
                .await
                {
                    Ok(connection) => connection,
                    Err(error) => {
                        retryable |= error.retryable();
                        tried.push(error.to_string());
                        continue;
                    }
                }
            }
        };
        match crate::cluster::source_metadata(&mut connection, topics, address).await {
            Ok((metadata, cluster_id)) => {
                connections.insert(address.clone(), connection);
                return Ok((metadata, cluster_id, address.clone()));
            }
            Err(error) => {
                retryable |= error.retryable();
                tried.push(error.to_string());
            }
        }
    }
    Err(LinkError::NoBrokerAnswered {
        what: "Metadata".to_owned(),
        retryable,
        tried: if tried.is_empty() {
            "no address to try".to_owned()
        } else {
            tried.join("; ")
        },
    })
}

/// `first`, then `rest`, each address once, in that order.
pub(crate) fn in_order<'a>(
    first: impl IntoIterator<Item = &'a String>,
    rest: &[&'a [String]],
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for address in first.into_iter().chain(rest.iter().flat_map(|list| list.iter())) {
        if !out.contains(address) {
            out.push(address.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking
    use super::*;

    #[test]
    fn a_list_is_split_trimmed_and_deduplicated_in_order() {
        assert_eq!(
            bootstrap_servers("b:9093, a:9092,b:9093").unwrap(),
            vec!["b:9093".to_owned(), "a:9092".to_owned()]
        );
        assert_eq!(
            bootstrap_servers("[::1]:9092").unwrap(),
            vec!["[::1]:9092".to_owned()]
        );
    }

    #[test]
    fn an_entry_without_a_usable_port_or_an_empty_one_is_refused_with_the_entry_named() {
        for (given, named) in [
            ("a:9092,", "empty entry"),
            ("a", "\"a\" has no port"),
            ("a:0", "\"a:0\" is not"),
            ("a:70000", "\"a:70000\" is not"),
            (":9092", "\":9092\" is not"),
            ("", "empty entry"),
        ] {
            let error = bootstrap_servers(given).unwrap_err();
            assert!(matches!(error, LinkError::BadAddress { .. }), "{given}: {error}");
            assert!(!error.retryable());
            assert!(error.to_string().contains(named), "{given}: {error}");
        }
        let many: Vec<String> = (1..=65).map(|port| format!("h:{port}")).collect();
        assert!(bootstrap_servers(&many.join(",")).is_err());
    }

    #[test]
    fn candidates_come_once_each_in_the_order_given() {
        let open = ["b:1".to_owned()];
        let list = ["a:1".to_owned(), "b:1".to_owned()];
        let known = ["c:1".to_owned(), "a:1".to_owned()];
        assert_eq!(
            in_order(&open, &[&list, &known]),
            vec!["b:1".to_owned(), "a:1".to_owned(), "c:1".to_owned()]
        );
    }
}
