//! A link's ACL rules (issue 53, item 3; ADR 0059): KIP-1279's `mirror.acl.include` — rules of the shape
//! `resourceType;resourceName;operation;permissionType;principal`, each field `*` for any, the resource name a
//! regex matching the whole name — select which of the source's ACLs are created here. A synced ACL is deleted here
//! once the source no longer has it (a DescribeAcls that answered without it; never on a missing answer), and only
//! an ACL the link itself created: one an operator created here is never touched.

use std::collections::BTreeSet;

use kafka_auth::acl::{AclBinding, Operation, Permission, ResourceType};
use mirror_fsm::SourceAcl;
use regex::Regex;

use super::error::MirrorError;

/// The most rules on one link.
const MAX_RULES: usize = 100;

/// The longest rule accepted.
const MAX_RULE_CHARS: usize = 1_000;

/// One rule: each field `None` matches any value.
#[derive(Debug, Clone)]
pub struct AclRule {
    resource_type: Option<ResourceType>,
    resource_name: Option<Regex>,
    operation: Option<Operation>,
    permission: Option<Permission>,
    principal: Option<String>,
}

impl AclRule {
    /// A rule from its text; refused with the rule and the field named.
    pub fn parse(text: &str) -> Result<Self, MirrorError> {
        let refused =
            |why: String| MirrorError::InvalidRequest(format!("ACL rule {text:?} is refused: {why}"));
        if text.chars().count() > MAX_RULE_CHARS {
            return Err(refused(format!("it is longer than {MAX_RULE_CHARS} characters")));
        }
        let fields: Vec<&str> = text.split(';').map(str::trim).collect();
        let [resource_type, resource_name, operation, permission, principal] = fields[..] else {
            return Err(refused(
                "a rule is resourceType;resourceName;operation;permissionType;principal".to_owned(),
            ));
        };
        let any = |field: &str| field == "*";
        let named = |field: &str, what: &str, names: &[&str]| {
            refused(format!("{what} {field:?} is not one of {}", names.join(", ")))
        };
        Ok(AclRule {
            resource_type: if any(resource_type) {
                None
            } else {
                Some(
                    ResourceType::ALL
                        .iter()
                        .copied()
                        .find(|kind| kind.name().eq_ignore_ascii_case(resource_type))
                        .ok_or_else(|| {
                            let names: Vec<&str> = ResourceType::ALL.iter().map(|kind| kind.name()).collect();
                            named(resource_type, "resource type", &names)
                        })?,
                )
            },
            resource_name: if any(resource_name) {
                None
            } else {
                Some(
                    super::filters::whole_name(resource_name)
                        .map_err(|why| refused(format!("resource name pattern: {why}")))?,
                )
            },
            operation: if any(operation) {
                None
            } else {
                Some(
                    Operation::ALL
                        .iter()
                        .copied()
                        .find(|kind| kind.name().eq_ignore_ascii_case(operation))
                        .ok_or_else(|| {
                            let names: Vec<&str> = Operation::ALL.iter().map(|kind| kind.name()).collect();
                            named(operation, "operation", &names)
                        })?,
                )
            },
            permission: if any(permission) {
                None
            } else {
                Some(
                    Permission::ALL
                        .iter()
                        .copied()
                        .find(|kind| kind.name().eq_ignore_ascii_case(permission))
                        .ok_or_else(|| named(permission, "permission type", &["ALLOW", "DENY"]))?,
                )
            },
            principal: if any(principal) {
                None
            } else if principal.contains(':') {
                Some(principal.to_owned())
            } else {
                return Err(refused(format!("principal {principal:?} is not TYPE:NAME")));
            },
        })
    }

    /// Whether the rule selects `binding`.
    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.resource_type
            .is_none_or(|kind| kind == binding.resource_type)
            && self
                .resource_name
                .as_ref()
                .is_none_or(|pattern| pattern.is_match(&binding.resource_name))
            && self
                .operation
                .is_none_or(|operation| operation == binding.operation)
            && self
                .permission
                .is_none_or(|permission| permission == binding.permission)
            && self
                .principal
                .as_ref()
                .is_none_or(|principal| *principal == binding.principal)
    }
}

/// The rules of a link (each parsed; at most [`MAX_RULES`]).
pub fn parse_rules(texts: &[String]) -> Result<Vec<AclRule>, MirrorError> {
    if texts.len() > MAX_RULES {
        return Err(MirrorError::InvalidRequest(format!(
            "{} ACL rules: a link takes at most {MAX_RULES}",
            texts.len()
        )));
    }
    texts.iter().map(|text| AclRule::parse(text)).collect()
}

/// The source's bindings the rules select, and a note for each the source holds that is not a valid binding here.
pub fn selected(rules: &[AclRule], source: &[SourceAcl]) -> (BTreeSet<AclBinding>, Vec<String>) {
    let mut bindings = BTreeSet::new();
    let mut invalid = Vec::new();
    for acl in source {
        match AclBinding::from_wire(
            acl.resource_type,
            &acl.resource_name,
            acl.pattern_type,
            &acl.principal,
            &acl.host,
            acl.operation,
            acl.permission,
        ) {
            Ok(binding) => {
                if rules.iter().any(|rule| rule.matches(&binding)) {
                    bindings.insert(binding);
                }
            }
            Err(why) => invalid.push(format!("{} {}: {why}", acl.principal, acl.resource_name)),
        }
    }
    (bindings, invalid)
}

/// What one sync changes: the bindings to create here, those to delete, and the link's synced set after it.
#[derive(Debug, PartialEq, Eq)]
pub struct AclChanges {
    /// Selected at the source and absent here.
    pub add: Vec<AclBinding>,
    /// Created here by the link and no longer selected at the source.
    pub remove: Vec<AclBinding>,
    /// The bindings the link created here and still holds, after the change.
    pub synced: Vec<AclBinding>,
}

/// The changes that make this cluster hold `wanted` (the source's selected bindings), given what it holds (`local`)
/// and what the link created before (`synced`). A binding held here that the link did not create is never removed
/// and never counted as the link's.
pub fn changes(
    wanted: &BTreeSet<AclBinding>,
    local: &BTreeSet<AclBinding>,
    synced: &[AclBinding],
) -> AclChanges {
    let add: Vec<AclBinding> = wanted.difference(local).cloned().collect();
    let remove: Vec<AclBinding> = synced
        .iter()
        .filter(|binding| !wanted.contains(*binding) && local.contains(*binding))
        .cloned()
        .collect();
    let kept = synced
        .iter()
        .filter(|binding| wanted.contains(*binding) && local.contains(*binding));
    let synced: BTreeSet<AclBinding> = kept.cloned().chain(add.iter().cloned()).collect();
    AclChanges {
        add,
        remove,
        synced: synced.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test fails by panicking

    use kafka_auth::acl::PatternType;

    use super::*;

    fn source(resource_type: ResourceType, name: &str, principal: &str, operation: Operation) -> SourceAcl {
        SourceAcl {
            resource_type: resource_type.code(),
            resource_name: name.to_owned(),
            pattern_type: PatternType::Literal.code(),
            principal: principal.to_owned(),
            host: "*".to_owned(),
            operation: operation.code(),
            permission: Permission::Allow.code(),
        }
    }

    fn binding(acl: &SourceAcl) -> AclBinding {
        selected(&[AclRule::parse("*;*;*;*;*").unwrap()], std::slice::from_ref(acl))
            .0
            .into_iter()
            .next()
            .unwrap()
    }

    #[test]
    fn a_rule_selects_by_each_field_and_a_star_matches_anything() {
        let acls = [
            source(ResourceType::Topic, "orders.eu", "User:alice", Operation::Read),
            source(ResourceType::Topic, "payments", "User:alice", Operation::Read),
            source(ResourceType::Group, "orders-app", "User:alice", Operation::Read),
            source(ResourceType::Topic, "orders.us", "User:bob", Operation::Write),
        ];
        let rules = parse_rules(&[r"topic;orders\..*;READ;allow;User:alice".to_owned()]).unwrap();
        let (picked, invalid) = selected(&rules, &acls);
        assert!(invalid.is_empty());
        assert_eq!(picked.into_iter().collect::<Vec<_>>(), vec![binding(&acls[0])]);
        let every = parse_rules(&["*;*;*;*;*".to_owned()]).unwrap();
        assert_eq!(selected(&every, &acls).0.len(), 4);
        let bob = parse_rules(&["*;*;*;*;User:bob".to_owned()]).unwrap();
        assert_eq!(
            selected(&bob, &acls).0.into_iter().collect::<Vec<_>>(),
            vec![binding(&acls[3])]
        );
    }

    #[test]
    fn a_bad_rule_is_refused_naming_what_is_wrong() {
        for (rule, named) in [
            ("topic;orders", "a rule is resourceType"),
            ("queue;*;*;*;*", "resource type \"queue\""),
            ("topic;orders(;*;*;*", "resource name pattern"),
            ("topic;*;LISTEN;*;*", "operation \"LISTEN\""),
            ("topic;*;*;MAYBE;*", "permission type \"MAYBE\""),
            ("topic;*;*;*;alice", "principal \"alice\""),
        ] {
            let error = AclRule::parse(rule).unwrap_err().to_string();
            assert!(error.contains(named), "{rule}: {error}");
        }
        let many: Vec<String> = (0..=MAX_RULES).map(|_| "*;*;*;*;*".to_owned()).collect();
        assert!(parse_rules(&many).is_err());
    }

    #[test]
    fn only_what_the_link_created_is_removed_and_a_local_binding_is_never_counted_as_the_links() {
        let a = binding(&source(ResourceType::Topic, "a", "User:x", Operation::Read));
        let b = binding(&source(ResourceType::Topic, "b", "User:x", Operation::Read));
        let own = binding(&source(ResourceType::Topic, "own", "User:x", Operation::Read));
        // The source has a and own; here: own was created by an operator.
        let wanted: BTreeSet<AclBinding> = [a.clone(), own.clone()].into();
        let local: BTreeSet<AclBinding> = [own.clone()].into();
        let first = changes(&wanted, &local, &[]);
        assert_eq!(first.add, vec![a.clone()]);
        assert!(first.remove.is_empty());
        assert_eq!(first.synced, vec![a.clone()], "own is the operator's");
        // The source drops a and own, adds b.
        let wanted: BTreeSet<AclBinding> = [b.clone()].into();
        let local: BTreeSet<AclBinding> = [a.clone(), own.clone()].into();
        let second = changes(&wanted, &local, &first.synced);
        assert_eq!(second.add, vec![b.clone()]);
        assert_eq!(
            second.remove,
            vec![a],
            "the link's own binding goes; the operator's stays"
        );
        assert_eq!(second.synced, vec![b]);
    }
}
