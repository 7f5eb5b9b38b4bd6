//! Authorization with Kafka's ACL model: each request's resources checked as Kafka's request handlers check them,
//! before the node serves it.
//!
//! With an authorizer on (`--authorizer acl`), every request a connection sends after authentication passes its
//! API's check here: the elements the caller may not touch are taken out of the request and answered with
//! Kafka's error (TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
//! CLUSTER_AUTHORIZATION_FAILED) in the place Kafka answers it; the node serves the rest, and the listing APIs'
//! answers are filtered afterwards (Metadata, ListGroups, OffsetFetch, ListTransactions list only what the caller
//! may describe). The node never sees a denied element, so no handler can forget a check. Without an authorizer
//! every [`Access`] allows everything, as Kafka without `authorizer.class.name`.
//!
//! The decision itself is `kafka_auth::acl::authorize` (Kafka's `StandardAuthorizer`); the bindings are the node's
//! durable ACLs, read once per request. Which operation each API needs is in [`data`] (produce, fetch, offsets,
//! metadata), [`groups`] (consumer groups and their offsets), [`txn`] (transactions and producers) and [`admin`]
//! (topics, configs, the cluster, credentials, ACLs, mirror administration).

pub mod admin;
pub mod data;
pub mod groups;
pub mod txn;

use std::sync::Arc;

use kafka_auth::acl::{self, AclSet, AuthorizerConfig, Operation, ResourceType, CLUSTER_NAME};
use kafka_protocol::protocol::StrBytes;
use node::Node;

use crate::api::Caller;

/// What one request's caller may do: its principal and address, and the ACLs as of the request.
#[derive(Debug, Clone)]
pub struct Access {
    /// `None`: no authorizer, everything is allowed.
    authorizer: Option<Authorizing>,
}

/// The caller and the ACLs, when an authorizer decides.
#[derive(Debug, Clone)]
struct Authorizing {
    principal: String,
    host: String,
    acls: Arc<AclSet>,
    config: Arc<AuthorizerConfig>,
}

impl Access {
    /// The access of `caller` on `node`, with the node's ACLs as of now.
    pub async fn of(node: &Node, caller: &Caller) -> Self {
        let authorizer = match &caller.authorizer {
            Some(config) => Some(Authorizing {
                principal: caller.principal.to_string(),
                // Kafka matches ACL hosts against the client's address as Java's `getHostAddress()` writes it.
                host: caller.peer.map(java_host_address).unwrap_or_default(),
                acls: node.acls().await,
                config: config.clone(),
            }),
            None => None,
        };
        Access { authorizer }
    }

    /// Whether an authorizer decides (otherwise everything is allowed).
    pub fn authorizer_on(&self) -> bool {
        self.authorizer.is_some()
    }

    /// Whether the caller may do `operation` to the resource `name` of `resource_type`.
    pub fn allows(&self, operation: Operation, resource_type: ResourceType, name: &str) -> bool {
        self.authorizer.as_ref().is_none_or(|on| {
            acl::authorize(
                &on.acls,
                &on.config,
                &on.principal,
                &on.host,
                operation,
                resource_type,
                name,
            )
        })
    }

    /// Whether the caller may do `operation` to some resource of `resource_type` (an idempotent producer's
    /// WRITE on any topic).
    pub fn allows_some(&self, operation: Operation, resource_type: ResourceType) -> bool {
        self.authorizer.as_ref().is_none_or(|on| {
            acl::authorize_some(
                &on.acls,
                &on.config,
                &on.principal,
                &on.host,
                operation,
                resource_type,
            )
        })
    }

    /// `operation` on the topic `name`.
    pub fn topic(&self, operation: Operation, name: &str) -> bool {
        self.allows(operation, ResourceType::Topic, name)
    }

    /// `operation` on the group `name`.
    pub fn group(&self, operation: Operation, name: &str) -> bool {
        self.allows(operation, ResourceType::Group, name)
    }

    /// `operation` on the transactional id `id`.
    pub fn transactional_id(&self, operation: Operation, id: &str) -> bool {
        self.allows(operation, ResourceType::TransactionalId, id)
    }

    /// `operation` on the cluster.
    pub fn cluster(&self, operation: Operation) -> bool {
        self.allows(operation, ResourceType::Cluster, CLUSTER_NAME)
    }
}

/// An address as Java's `InetAddress.getHostAddress()` writes it (IPv6 uncompressed: `0:0:0:0:0:0:0:1`), which
/// is what a Kafka ACL's host is compared with.
fn java_host_address(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6
                .segments()
                .iter()
                .map(|segment| format!("{segment:x}"))
                .collect::<Vec<_>>()
                .join(":"),
        },
    }
}

/// Splits `items`: those `allowed` stay, the others are returned (in their order).
pub(crate) fn take_denied<T>(items: &mut Vec<T>, mut allowed: impl FnMut(&T) -> bool) -> Vec<T> {
    let (kept, denied): (Vec<T>, Vec<T>) = std::mem::take(items).into_iter().partition(|item| allowed(item));
    *items = kept;
    denied
}

/// A `kafka-protocol` string.
pub(crate) fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}
