//! Kafka's ACL model, without I/O: bindings of a resource pattern to an access-control entry, the filters that
//! DescribeAcls and DeleteAcls match them with, and the decision Kafka's `StandardAuthorizer` takes.
//!
//! The decision for a principal, a client host, an operation and a resource:
//! 1. a super user is allowed everything;
//! 2. the bindings whose pattern covers the resource (LITERAL with its name, LITERAL `*`, PREFIXED with a prefix
//!    of its name) are considered; an entry applies when its principal is the caller's or `User:*` and its host
//!    is the caller's address or `*`;
//! 3. a DENY that applies with the operation (or ALL) denies — DENY wins;
//! 4. an ALLOW that applies with the operation, ALL, or an operation that implies it allows: READ, WRITE,
//!    DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS (implication holds for ALLOW only);
//! 5. with no binding on the resource at all (whatever its principal), `allow.everyone.if.no.acl.found`
//!    decides; otherwise the caller is denied.
//!
//! Codes are Kafka's wire codes (`ResourceType`, `PatternType`, `AclOperation`, `AclPermissionType`).

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The name of the one CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// The resource name (LITERAL) and the principal and host that match any.
pub const WILDCARD: &str = "*";

/// The principal every `User` principal matches.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $code:literal, $text:literal;)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)*
        }

        impl $name {
            /// Every value.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// Kafka's wire code.
            pub const fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code,)*
                }
            }

            /// The value of a wire code, if it is one.
            pub fn from_code(code: i8) -> Option<Self> {
                match code {
                    $($code => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// Kafka's name for it (as `kafka-acls.sh` prints it).
            pub const fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

wire_enum!(
    /// What a binding protects.
    ResourceType {
        /// A topic.
        Topic = 2, "TOPIC";
        /// A consumer group.
        Group = 3, "GROUP";
        /// The cluster (its one name is [`CLUSTER_NAME`]).
        Cluster = 4, "CLUSTER";
        /// A producer's transactional id.
        TransactionalId = 5, "TRANSACTIONAL_ID";
        /// A delegation token (stored for `kafka-acls.sh`; `serve` issues none).
        DelegationToken = 6, "DELEGATION_TOKEN";
        /// A user (stored for `kafka-acls.sh`; guards delegation tokens, which `serve` does not issue).
        User = 7, "USER";
    }
);

wire_enum!(
    /// How a binding's name covers resources.
    PatternType {
        /// The name itself (or every name, for `*`).
        Literal = 3, "LITERAL";
        /// Every name that starts with it.
        Prefixed = 4, "PREFIXED";
    }
);

wire_enum!(
    /// What a principal does to a resource.
    Operation {
        /// Every operation.
        All = 2, "ALL";
        /// Consume, commit offsets, join a group.
        Read = 3, "READ";
        /// Produce, use a transactional id.
        Write = 4, "WRITE";
        /// Create topics.
        Create = 5, "CREATE";
        /// Delete topics, records or groups.
        Delete = 6, "DELETE";
        /// Add partitions; administer the cluster.
        Alter = 7, "ALTER";
        /// See that it exists.
        Describe = 8, "DESCRIBE";
        /// Inter-broker actions.
        ClusterAction = 9, "CLUSTER_ACTION";
        /// Read configs.
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        /// Change configs.
        AlterConfigs = 11, "ALTER_CONFIGS";
        /// Produce idempotently.
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        /// Create delegation tokens.
        CreateTokens = 13, "CREATE_TOKENS";
        /// Describe delegation tokens.
        DescribeTokens = 14, "DESCRIBE_TOKENS";
    }
);

wire_enum!(
    /// Whether a binding allows or denies.
    Permission {
        /// Denies (and wins over any ALLOW).
        Deny = 2, "DENY";
        /// Allows.
        Allow = 3, "ALLOW";
    }
);

/// The wire code of ANY in every filter field.
pub const ANY_CODE: i8 = 1;

/// The wire code of MATCH in a pattern-type filter.
pub const MATCH_CODE: i8 = 2;

/// One ACL: a resource pattern bound to an access-control entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    /// The resource type.
    pub resource_type: ResourceType,
    /// The resource name (or prefix, or `*`).
    pub resource_name: String,
    /// How the name covers resources.
    pub pattern_type: PatternType,
    /// `User:NAME` or `User:*`.
    pub principal: String,
    /// A client address or `*`.
    pub host: String,
    /// The operation.
    pub operation: Operation,
    /// ALLOW or DENY.
    pub permission: Permission,
}

/// Why a binding or a filter is refused (Kafka answers INVALID_REQUEST with this message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidAcl(pub String);

impl AclBinding {
    /// A binding from its wire fields, checked as Kafka checks a new ACL: concrete types, a non-empty resource
    /// name (`kafka-cluster` for the cluster), a `TYPE:NAME` principal, a non-empty host.
    #[allow(clippy::too_many_arguments)]
    pub fn from_wire(
        resource_type: i8,
        resource_name: &str,
        pattern_type: i8,
        principal: &str,
        host: &str,
        operation: i8,
        permission: i8,
    ) -> Result<Self, InvalidAcl> {
        let resource_type = ResourceType::from_code(resource_type)
            .ok_or_else(|| InvalidAcl(format!("Invalid resourceType {resource_type}")))?;
        let pattern_type = PatternType::from_code(pattern_type)
            .ok_or_else(|| InvalidAcl(format!("Invalid patternType {pattern_type}")))?;
        let operation = Operation::from_code(operation)
            .ok_or_else(|| InvalidAcl(format!("Invalid operation {operation}")))?;
        let permission = Permission::from_code(permission)
            .ok_or_else(|| InvalidAcl(format!("Invalid permissionType {permission}")))?;
        if resource_name.is_empty() {
            return Err(InvalidAcl("Resource name should not be empty".to_owned()));
        }
        if resource_type == ResourceType::Cluster && resource_name != CLUSTER_NAME {
            return Err(InvalidAcl(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            )));
        }
        match principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
            _ => {
                return Err(InvalidAcl(format!(
                    "Could not parse principal from `{principal}`"
                )))
            }
        }
        if host.is_empty() {
            return Err(InvalidAcl("Invalid host: the host is empty".to_owned()));
        }
        Ok(AclBinding {
            resource_type,
            resource_name: resource_name.to_owned(),
            pattern_type,
            principal: principal.to_owned(),
            host: host.to_owned(),
            operation,
            permission,
        })
    }

    /// Whether the binding's pattern covers the resource `name` of `resource_type`.
    fn covers(&self, resource_type: ResourceType, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern_type {
                PatternType::Literal => self.resource_name == name || self.resource_name == WILDCARD,
                PatternType::Prefixed => name.starts_with(&self.resource_name),
            }
    }

    /// What the binding says about `operation` by `principal` from `host`, when its pattern covers the
    /// resource: `None` when its entry does not apply.
    fn verdict(&self, principal: &str, host: &str, operation: Operation) -> Option<Permission> {
        if self.principal != principal && self.principal != WILDCARD_PRINCIPAL {
            return None;
        }
        if self.host != WILDCARD && self.host != host {
            return None;
        }
        let applies = self.operation == Operation::All
            || self.operation == operation
            || (self.permission == Permission::Allow && implies(self.operation, operation));
        applies.then_some(self.permission)
    }
}

/// Whether an ALLOW on `granted` also allows `asked` (besides ALL and equality).
fn implies(granted: Operation, asked: Operation) -> bool {
    match asked {
        Operation::Describe => matches!(
            granted,
            Operation::Read | Operation::Write | Operation::Delete | Operation::Alter
        ),
        Operation::DescribeConfigs => granted == Operation::AlterConfigs,
        _ => false,
    }
}

/// A pattern-type filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternFilter {
    /// Any pattern type, the name matched exactly.
    Any,
    /// Every binding that covers the name (LITERAL equal or `*`, PREFIXED a prefix of it).
    Match,
    /// This pattern type, the name matched exactly.
    Exactly(PatternType),
}

/// A filter over bindings (DescribeAcls, DeleteAcls); `None` is ANY (or null, for the strings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    /// The resource type.
    pub resource_type: Option<ResourceType>,
    /// The resource name.
    pub resource_name: Option<String>,
    /// The pattern type.
    pub pattern: PatternFilter,
    /// The principal.
    pub principal: Option<String>,
    /// The host.
    pub host: Option<String>,
    /// The operation.
    pub operation: Option<Operation>,
    /// The permission.
    pub permission: Option<Permission>,
}

impl AclFilter {
    /// A filter from its wire fields; UNKNOWN (or any code Kafka does not define) in a field is refused.
    #[allow(clippy::too_many_arguments)]
    pub fn from_wire(
        resource_type: i8,
        resource_name: Option<&str>,
        pattern_type: i8,
        principal: Option<&str>,
        host: Option<&str>,
        operation: i8,
        permission: i8,
    ) -> Result<Self, InvalidAcl> {
        fn any_or<T>(code: i8, parse: fn(i8) -> Option<T>, what: &str) -> Result<Option<T>, InvalidAcl> {
            if code == ANY_CODE {
                return Ok(None);
            }
            parse(code)
                .map(Some)
                .ok_or_else(|| InvalidAcl(format!("The filter's {what} {code} is unknown or invalid")))
        }
        let pattern = match pattern_type {
            ANY_CODE => PatternFilter::Any,
            MATCH_CODE => PatternFilter::Match,
            code => PatternFilter::Exactly(PatternType::from_code(code).ok_or_else(|| {
                InvalidAcl(format!("The filter's pattern type {code} is unknown or invalid"))
            })?),
        };
        Ok(AclFilter {
            resource_type: any_or(resource_type, ResourceType::from_code, "resource type")?,
            resource_name: resource_name.map(str::to_owned),
            pattern,
            principal: principal.map(str::to_owned),
            host: host.map(str::to_owned),
            operation: any_or(operation, Operation::from_code, "operation")?,
            permission: any_or(permission, Permission::from_code, "permission type")?,
        })
    }

    /// A filter that matches every binding.
    pub fn any() -> Self {
        AclFilter {
            resource_type: None,
            resource_name: None,
            pattern: PatternFilter::Any,
            principal: None,
            host: None,
            operation: None,
            permission: None,
        }
    }

    /// Whether `binding` passes the filter (Kafka's `AclBindingFilter.matches`).
    pub fn matches(&self, binding: &AclBinding) -> bool {
        let resource = self
            .resource_type
            .is_none_or(|kind| kind == binding.resource_type)
            && match (&self.pattern, &self.resource_name) {
                (PatternFilter::Exactly(kind), _) if *kind != binding.pattern_type => false,
                (_, None) => true,
                (PatternFilter::Any | PatternFilter::Exactly(_), Some(name)) => {
                    *name == binding.resource_name
                }
                (PatternFilter::Match, Some(name)) => match binding.pattern_type {
                    PatternType::Literal => {
                        *name == binding.resource_name || binding.resource_name == WILDCARD
                    }
                    PatternType::Prefixed => name.starts_with(&binding.resource_name),
                },
            };
        resource
            && self.principal.as_ref().is_none_or(|p| *p == binding.principal)
            && self.host.as_ref().is_none_or(|h| *h == binding.host)
            && self.operation.is_none_or(|op| op == binding.operation)
            && self.permission.is_none_or(|p| p == binding.permission)
    }
}

/// Every ACL, ordered.
pub type AclSet = BTreeSet<AclBinding>;

/// The authorizer's settings (Kafka's `super.users` and `allow.everyone.if.no.acl.found`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// Principals (`User:NAME`) allowed everything.
    pub super_users: BTreeSet<String>,
    /// Whether a resource without any binding is open to everyone.
    pub allow_everyone_if_no_acl_found: bool,
}

/// Whether `principal` (`User:NAME`) from `host` may do `operation` to the resource `name` of `resource_type`,
/// given `acls`; see the module docs.
pub fn authorize(
    acls: &AclSet,
    config: &AuthorizerConfig,
    principal: &str,
    host: &str,
    operation: Operation,
    resource_type: ResourceType,
    name: &str,
) -> bool {
    if config.super_users.contains(principal) {
        return true;
    }
    let mut covered = false;
    let mut allowed = false;
    for binding in acls.iter().filter(|binding| binding.covers(resource_type, name)) {
        covered = true;
        match binding.verdict(principal, host, operation) {
            Some(Permission::Deny) => return false,
            Some(Permission::Allow) => allowed = true,
            None => {}
        }
    }
    allowed || (!covered && config.allow_everyone_if_no_acl_found)
}

/// Whether `principal` from `host` may do `operation` to at least one resource of `resource_type` (Kafka's
/// `authorizeByResourceType`: an idempotent producer without IDEMPOTENT_WRITE on the cluster needs WRITE on some
/// topic). An ALLOW counts unless a DENY covers every name it covers (a LITERAL `*` DENY, a DENY on the same
/// literal name, or a PREFIXED DENY on a prefix of its name); with no binding of the type at all,
/// `allow.everyone.if.no.acl.found` decides.
pub fn authorize_some(
    acls: &AclSet,
    config: &AuthorizerConfig,
    principal: &str,
    host: &str,
    operation: Operation,
    resource_type: ResourceType,
) -> bool {
    if config.super_users.contains(principal) {
        return true;
    }
    let applies = |binding: &&AclBinding| {
        binding.resource_type == resource_type
            && (binding.principal == principal || binding.principal == WILDCARD_PRINCIPAL)
            && (binding.host == WILDCARD || binding.host == host)
            && (binding.operation == operation || binding.operation == Operation::All)
    };
    let denies: Vec<&AclBinding> = acls
        .iter()
        .filter(applies)
        .filter(|binding| binding.permission == Permission::Deny)
        .collect();
    let hidden = |allow: &AclBinding| {
        denies.iter().any(|deny| match deny.pattern_type {
            PatternType::Literal => {
                deny.resource_name == WILDCARD
                    || (allow.pattern_type == PatternType::Literal
                        && deny.resource_name == allow.resource_name)
            }
            PatternType::Prefixed => {
                allow.resource_name != WILDCARD && allow.resource_name.starts_with(&deny.resource_name)
            }
        })
    };
    let allowed = acls
        .iter()
        .filter(applies)
        .any(|binding| binding.permission == Permission::Allow && !hidden(binding));
    allowed
        || (config.allow_everyone_if_no_acl_found
            && !acls.iter().any(|binding| binding.resource_type == resource_type))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn binding(
        kind: ResourceType,
        name: &str,
        pattern: PatternType,
        principal: &str,
        operation: Operation,
        permission: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type: kind,
            resource_name: name.to_owned(),
            pattern_type: pattern,
            principal: principal.to_owned(),
            host: WILDCARD.to_owned(),
            operation,
            permission,
        }
    }

    fn topic_allow(name: &str, pattern: PatternType, principal: &str, operation: Operation) -> AclBinding {
        binding(
            ResourceType::Topic,
            name,
            pattern,
            principal,
            operation,
            Permission::Allow,
        )
    }

    fn may(acls: &AclSet, principal: &str, operation: Operation, topic: &str) -> bool {
        authorize(
            acls,
            &AuthorizerConfig::default(),
            principal,
            "127.0.0.1",
            operation,
            ResourceType::Topic,
            topic,
        )
    }

    #[test]
    fn nothing_is_allowed_without_a_binding_unless_everyone_is_allowed_then() {
        let acls = AclSet::new();
        assert!(!may(&acls, "User:alice", Operation::Read, "orders"));
        let open = AuthorizerConfig {
            allow_everyone_if_no_acl_found: true,
            ..AuthorizerConfig::default()
        };
        let host = "127.0.0.1";
        assert!(authorize(
            &acls,
            &open,
            "User:alice",
            host,
            Operation::Read,
            ResourceType::Topic,
            "orders"
        ));
    }

    #[test]
    fn a_binding_for_someone_else_closes_the_resource_even_when_everyone_is_allowed_without_acls() {
        let acls = AclSet::from([topic_allow(
            "orders",
            PatternType::Literal,
            "User:bob",
            Operation::Read,
        )]);
        let open = AuthorizerConfig {
            allow_everyone_if_no_acl_found: true,
            ..AuthorizerConfig::default()
        };
        let host = "127.0.0.1";
        assert!(!authorize(
            &acls,
            &open,
            "User:alice",
            host,
            Operation::Read,
            ResourceType::Topic,
            "orders"
        ));
        assert!(authorize(
            &acls,
            &open,
            "User:alice",
            host,
            Operation::Read,
            ResourceType::Topic,
            "other"
        ));
    }

    #[test]
    fn literal_prefixed_and_wildcard_patterns_cover_what_kafka_covers() {
        let acls = AclSet::from([
            topic_allow("orders", PatternType::Literal, "User:a", Operation::Read),
            topic_allow("pay", PatternType::Prefixed, "User:b", Operation::Read),
            topic_allow("*", PatternType::Literal, "User:c", Operation::Read),
        ]);
        assert!(may(&acls, "User:a", Operation::Read, "orders"));
        assert!(!may(&acls, "User:a", Operation::Read, "orders2"));
        assert!(may(&acls, "User:b", Operation::Read, "payments"));
        assert!(may(&acls, "User:b", Operation::Read, "pay"));
        assert!(!may(&acls, "User:b", Operation::Read, "apay"));
        assert!(may(&acls, "User:c", Operation::Read, "anything"));
        // A PREFIXED `*` is a prefix like any other, not a wildcard.
        let star_prefix = AclSet::from([topic_allow("*", PatternType::Prefixed, "User:d", Operation::Read)]);
        assert!(!may(&star_prefix, "User:d", Operation::Read, "orders"));
    }

    #[test]
    fn deny_wins_over_allow_and_all() {
        let acls = AclSet::from([
            topic_allow("*", PatternType::Literal, "User:a", Operation::All),
            binding(
                ResourceType::Topic,
                "secret",
                PatternType::Prefixed,
                "User:a",
                Operation::Read,
                Permission::Deny,
            ),
        ]);
        assert!(may(&acls, "User:a", Operation::Read, "orders"));
        assert!(!may(&acls, "User:a", Operation::Read, "secrets"));
        assert!(may(&acls, "User:a", Operation::Write, "secrets"));
    }

    #[test]
    fn allowing_read_write_delete_or_alter_allows_describe_but_denying_them_does_not_deny_it() {
        for granted in [
            Operation::Read,
            Operation::Write,
            Operation::Delete,
            Operation::Alter,
        ] {
            let acls = AclSet::from([topic_allow("t", PatternType::Literal, "User:a", granted)]);
            assert!(may(&acls, "User:a", Operation::Describe, "t"), "{granted}");
            assert!(
                !may(&acls, "User:a", Operation::DescribeConfigs, "t"),
                "{granted}"
            );
        }
        let configs = AclSet::from([topic_allow(
            "t",
            PatternType::Literal,
            "User:a",
            Operation::AlterConfigs,
        )]);
        assert!(may(&configs, "User:a", Operation::DescribeConfigs, "t"));
        let denied = AclSet::from([
            topic_allow("t", PatternType::Literal, "User:a", Operation::Describe),
            binding(
                ResourceType::Topic,
                "t",
                PatternType::Literal,
                "User:a",
                Operation::Read,
                Permission::Deny,
            ),
        ]);
        assert!(may(&denied, "User:a", Operation::Describe, "t"));
        assert!(!may(&denied, "User:a", Operation::Read, "t"));
    }

    #[test]
    fn the_wildcard_principal_and_host_match_everyone_a_named_host_only_itself() {
        let mut from_elsewhere = topic_allow("t", PatternType::Literal, "User:*", Operation::Read);
        assert!(may(
            &AclSet::from([from_elsewhere.clone()]),
            "User:anyone",
            Operation::Read,
            "t"
        ));
        from_elsewhere.host = "10.0.0.9".to_owned();
        assert!(!may(
            &AclSet::from([from_elsewhere]),
            "User:anyone",
            Operation::Read,
            "t"
        ));
    }

    #[test]
    fn super_users_are_allowed_everything_even_against_a_deny() {
        let acls = AclSet::from([binding(
            ResourceType::Cluster,
            CLUSTER_NAME,
            PatternType::Literal,
            "User:*",
            Operation::All,
            Permission::Deny,
        )]);
        let config = AuthorizerConfig {
            super_users: BTreeSet::from(["User:admin".to_owned()]),
            allow_everyone_if_no_acl_found: false,
        };
        let host = "127.0.0.1";
        let cluster = ResourceType::Cluster;
        assert!(authorize(
            &acls,
            &config,
            "User:admin",
            host,
            Operation::Alter,
            cluster,
            CLUSTER_NAME
        ));
        assert!(!authorize(
            &acls,
            &config,
            "User:bob",
            host,
            Operation::Alter,
            cluster,
            CLUSTER_NAME
        ));
    }

    #[test]
    fn some_topic_is_writable_unless_every_allowed_name_is_denied() {
        let config = AuthorizerConfig::default();
        let some = |acls: &AclSet| {
            authorize_some(
                acls,
                &config,
                "User:a",
                "h",
                Operation::Write,
                ResourceType::Topic,
            )
        };
        let allow = topic_allow("orders", PatternType::Literal, "User:a", Operation::Write);
        assert!(!some(&AclSet::new()));
        assert!(some(&AclSet::from([allow.clone()])));
        let deny = |name: &str, pattern| {
            binding(
                ResourceType::Topic,
                name,
                pattern,
                "User:a",
                Operation::Write,
                Permission::Deny,
            )
        };
        assert!(!some(&AclSet::from([
            allow.clone(),
            deny("*", PatternType::Literal)
        ])));
        assert!(!some(&AclSet::from([
            allow.clone(),
            deny("ord", PatternType::Prefixed)
        ])));
        assert!(some(&AclSet::from([
            allow.clone(),
            deny("pay", PatternType::Prefixed)
        ])));
        let reader = topic_allow("orders", PatternType::Literal, "User:a", Operation::Read);
        assert!(!some(&AclSet::from([reader])));
    }

    #[test]
    fn new_bindings_are_checked_as_kafka_checks_them() {
        let ok = AclBinding::from_wire(2, "t", 3, "User:a", "*", 3, 3);
        assert!(ok.is_ok());
        for (kind, name, pattern, principal, host, op, perm) in [
            (1, "t", 3, "User:a", "*", 3, 3),     // ANY resource type
            (0, "t", 3, "User:a", "*", 3, 3),     // UNKNOWN
            (2, "t", 2, "User:a", "*", 3, 3),     // MATCH pattern
            (2, "", 3, "User:a", "*", 3, 3),      // empty name
            (4, "other", 3, "User:a", "*", 3, 3), // cluster not named kafka-cluster
            (2, "t", 3, "alice", "*", 3, 3),      // principal without a type
            (2, "t", 3, "User:a", "", 3, 3),      // empty host
            (2, "t", 3, "User:a", "*", 1, 3),     // ANY operation
            (2, "t", 3, "User:a", "*", 3, 1),     // ANY permission
        ] {
            assert!(
                AclBinding::from_wire(kind, name, pattern, principal, host, op, perm).is_err(),
                "{name} {kind}"
            );
        }
    }

    #[test]
    fn filters_match_as_kafka_matches_them() {
        let literal = topic_allow("orders", PatternType::Literal, "User:a", Operation::Read);
        let prefixed = topic_allow("ord", PatternType::Prefixed, "User:a", Operation::Read);
        let wildcard = topic_allow("*", PatternType::Literal, "User:a", Operation::Read);
        let exact = |pattern: i8| AclFilter::from_wire(2, Some("orders"), pattern, None, None, 1, 1).unwrap();
        assert!(exact(ANY_CODE).matches(&literal));
        assert!(!exact(ANY_CODE).matches(&prefixed));
        assert!(!exact(ANY_CODE).matches(&wildcard));
        assert!(exact(MATCH_CODE).matches(&literal));
        assert!(exact(MATCH_CODE).matches(&prefixed));
        assert!(exact(MATCH_CODE).matches(&wildcard));
        assert!(!exact(4).matches(&literal));
        assert!(AclFilter::any().matches(&prefixed));
        let by_principal = AclFilter::from_wire(1, None, 1, Some("User:b"), None, 1, 1).unwrap();
        assert!(!by_principal.matches(&literal));
        assert!(AclFilter::from_wire(0, None, 1, None, None, 1, 1).is_err());
        assert!(AclFilter::from_wire(1, None, 0, None, None, 1, 1).is_err());
        assert!(AclFilter::from_wire(1, None, 1, None, None, 0, 1).is_err());
    }

    fn any_binding() -> impl Strategy<Value = AclBinding> {
        (
            prop::sample::select(vec![ResourceType::Topic, ResourceType::Group]),
            prop::sample::select(vec!["a", "ab", "abc", "b", "*"]),
            prop::sample::select(PatternType::ALL.to_vec()),
            prop::sample::select(vec!["User:x", "User:y", "User:*"]),
            prop::sample::select(Operation::ALL.to_vec()),
            prop::sample::select(Permission::ALL.to_vec()),
        )
            .prop_map(|(kind, name, pattern, principal, operation, permission)| {
                binding(kind, name, pattern, principal, operation, permission)
            })
    }

    proptest! {
        /// Adding a DENY that applies never turns a denial into an allowance, and always denies.
        #[test]
        fn an_applicable_deny_always_denies(
            acls in prop::collection::btree_set(any_binding(), 0..12),
            operation in prop::sample::select(Operation::ALL.to_vec()),
            name in prop::sample::select(vec!["a", "ab", "abc", "b", "c"]),
        ) {
            let mut with_deny = acls.clone();
            with_deny.insert(binding(ResourceType::Topic, name, PatternType::Literal, "User:x", operation,
                Permission::Deny));
            prop_assert!(!may(&with_deny, "User:x", operation, name));
        }

        /// Removing a binding never allows what was denied by a DENY, and adding an ALLOW never denies what was
        /// allowed.
        #[test]
        fn allows_only_add_access(
            acls in prop::collection::btree_set(any_binding(), 0..12),
            extra in any_binding(),
            operation in prop::sample::select(Operation::ALL.to_vec()),
            name in prop::sample::select(vec!["a", "ab", "abc", "b", "c"]),
        ) {
            let before = may(&acls, "User:x", operation, name);
            let mut after = acls.clone();
            let allow = AclBinding { permission: Permission::Allow, ..extra };
            after.insert(allow);
            if before {
                prop_assert!(may(&after, "User:x", operation, name));
            }
        }
    }
}
