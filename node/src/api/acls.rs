//! CreateAcls, DescribeAcls and DeleteAcls: the ACLs as `kafka-acls.sh` manages them, durable beside the SCRAM
//! credentials (`crate::users`).
//!
//! As Kafka's controller decides: a binding that is not valid (an UNKNOWN or ANY type, an empty name, a cluster
//! not named `kafka-cluster`, a principal without its type) is refused with INVALID_REQUEST and the others of the
//! request still apply; creating a binding that exists succeeds and changes nothing; a filter with an UNKNOWN
//! field is INVALID_REQUEST; a deletion answers, per filter, the bindings it removed. One durable write holds
//! every change of a request. Whether an authorizer is on (SECURITY_DISABLED otherwise) and whether the caller
//! may manage ACLs are the broker's checks, before these run.

use std::collections::BTreeMap;

use kafka_auth::acl::{AclBinding, AclFilter, AclSet, PatternType, ResourceType};
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::*;
use kafka_types::KafkaError;

use super::str_bytes;
use crate::node::Node;

/// The message of a binding that could not be stored.
const NOT_STORED: &str = "The ACLs could not be stored.";

/// CreateAcls: each valid binding added (one durable write), each invalid one refused.
pub async fn create_acls(node: &Node, request: CreateAclsRequest, _version: i16) -> CreateAclsResponse {
    let creations: Vec<Result<AclBinding, String>> = request
        .creations
        .iter()
        .map(|creation| {
            AclBinding::from_wire(
                creation.resource_type,
                &creation.resource_name,
                creation.resource_pattern_type,
                &creation.principal,
                &creation.host,
                creation.operation,
                creation.permission_type,
            )
            .map_err(|invalid| invalid.0)
        })
        .collect();
    let mut store = node.users.write().await;
    let mut next: AclSet = (*store.acls()).clone();
    next.extend(
        creations
            .iter()
            .filter_map(|creation| creation.as_ref().ok().cloned()),
    );
    let written = store.replace_acls(next).await;
    drop(store);
    if let Err(error) = &written {
        tracing::error!(%error, "cannot store ACLs");
    }
    let mut response = CreateAclsResponse::default();
    response.results = creations
        .iter()
        .map(|creation| {
            let mut result = AclCreationResult::default();
            match (creation, &written) {
                (Err(message), _) => refuse(&mut result.error_code, &mut result.error_message, message),
                (Ok(_), Err(_)) => {
                    result.error_code = KafkaError::KafkaStorageError.code();
                    result.error_message = Some(str_bytes(NOT_STORED));
                }
                (Ok(_), Ok(())) => {}
            }
            result
        })
        .collect();
    response
}

/// DescribeAcls: the bindings that pass the filter, grouped by resource pattern.
pub async fn describe_acls(node: &Node, request: DescribeAclsRequest, _version: i16) -> DescribeAclsResponse {
    let mut response = DescribeAclsResponse::default();
    let filter = AclFilter::from_wire(
        request.resource_type_filter,
        request.resource_name_filter.as_deref(),
        request.pattern_type_filter,
        request.principal_filter.as_deref(),
        request.host_filter.as_deref(),
        request.operation,
        request.permission_type,
    );
    let filter = match filter {
        Ok(filter) => filter,
        Err(invalid) => {
            refuse(&mut response.error_code, &mut response.error_message, &invalid.0);
            return response;
        }
    };
    let acls = node.acls().await;
    let mut resources: BTreeMap<(ResourceType, &str, PatternType), Vec<AclDescription>> = BTreeMap::new();
    for binding in acls.iter().filter(|binding| filter.matches(binding)) {
        let mut description = AclDescription::default();
        description.principal = str_bytes(&binding.principal);
        description.host = str_bytes(&binding.host);
        description.operation = binding.operation.code();
        description.permission_type = binding.permission.code();
        resources
            .entry((
                binding.resource_type,
                &binding.resource_name,
                binding.pattern_type,
            ))
            .or_default()
            .push(description);
    }
    response.resources = resources
        .into_iter()
        .map(|((kind, name, pattern), acls)| {
            let mut resource = DescribeAclsResource::default();
            resource.resource_type = kind.code();
            resource.resource_name = str_bytes(name);
            resource.pattern_type = pattern.code();
            resource.acls = acls;
            resource
        })
        .collect();
    response
}

/// DeleteAcls: the bindings each filter matches removed (one durable write), and listed per filter.
pub async fn delete_acls(node: &Node, request: DeleteAclsRequest, _version: i16) -> DeleteAclsResponse {
    let filters: Vec<Result<AclFilter, String>> = request
        .filters
        .iter()
        .map(|filter| {
            AclFilter::from_wire(
                filter.resource_type_filter,
                filter.resource_name_filter.as_deref(),
                filter.pattern_type_filter,
                filter.principal_filter.as_deref(),
                filter.host_filter.as_deref(),
                filter.operation,
                filter.permission_type,
            )
            .map_err(|invalid| invalid.0)
        })
        .collect();
    let mut store = node.users.write().await;
    let current = store.acls();
    let matched: Vec<Vec<&AclBinding>> = filters
        .iter()
        .map(|filter| match filter {
            Ok(filter) => current.iter().filter(|binding| filter.matches(binding)).collect(),
            Err(_) => Vec::new(),
        })
        .collect();
    let next: AclSet = current
        .iter()
        .filter(|binding| !matched.iter().flatten().any(|removed| removed == binding))
        .cloned()
        .collect();
    let written = store.replace_acls(next).await;
    drop(store);
    if let Err(error) = &written {
        tracing::error!(%error, "cannot store ACLs");
    }
    let mut response = DeleteAclsResponse::default();
    response.filter_results = filters
        .iter()
        .zip(&matched)
        .map(|(filter, matched)| {
            let mut result = DeleteAclsFilterResult::default();
            match (filter, &written) {
                (Err(message), _) => refuse(&mut result.error_code, &mut result.error_message, message),
                (Ok(_), Err(_)) if !matched.is_empty() => {
                    result.error_code = KafkaError::KafkaStorageError.code();
                    result.error_message = Some(str_bytes(NOT_STORED));
                }
                _ => result.matching_acls = matched.iter().map(|binding| matching(binding)).collect(),
            }
            result
        })
        .collect();
    response
}

/// A removed binding as DeleteAcls lists it.
fn matching(binding: &AclBinding) -> DeleteAclsMatchingAcl {
    let mut acl = DeleteAclsMatchingAcl::default();
    acl.resource_type = binding.resource_type.code();
    acl.resource_name = str_bytes(&binding.resource_name);
    acl.pattern_type = binding.pattern_type.code();
    acl.principal = str_bytes(&binding.principal);
    acl.host = str_bytes(&binding.host);
    acl.operation = binding.operation.code();
    acl.permission_type = binding.permission.code();
    acl
}

/// Answers INVALID_REQUEST with `message`.
fn refuse(code: &mut i16, message_field: &mut Option<kafka_protocol::protocol::StrBytes>, message: &str) {
    *code = KafkaError::InvalidRequest.code();
    *message_field = Some(str_bytes(message));
}
