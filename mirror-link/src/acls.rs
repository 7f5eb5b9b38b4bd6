//! A source's ACLs, as a mirror link's ACL rules sync them (ADR 0059): DescribeAcls v1 (the non-flexible version
//! `kafka-shape` walks before decoding; Kafka 4 serves v1–v3) matching every binding — which needs DESCRIBE on the
//! source's cluster. A source without an authorizer answers SECURITY_DISABLED: nothing to sync, not an error.

use kafka_protocol::messages::{ApiKey, DescribeAclsRequest, DescribeAclsResponse};
use mirror_fsm::{SourceAcl, SourceAcls};

use crate::connection::KafkaConnection;
use crate::error::LinkError;

/// The DescribeAcls versions asked.
const DESCRIBE_ACLS_VERSIONS: (i16, i16) = (1, 1);

/// ANY in every filter field.
const ANY: i8 = 1;

/// Kafka's SECURITY_DISABLED: no authorizer is configured.
const SECURITY_DISABLED: i16 = 54;

/// Every ACL of the broker on `connection` (at `address`, of the cluster `cluster_id`).
pub(crate) async fn every_acl(
    connection: &mut KafkaConnection,
    address: &str,
    cluster_id: String,
) -> Result<SourceAcls, LinkError> {
    let version = connection.version(ApiKey::DescribeAcls, DESCRIBE_ACLS_VERSIONS)?;
    let mut request = DescribeAclsRequest::default();
    request.resource_type_filter = ANY;
    request.resource_name_filter = None;
    request.pattern_type_filter = ANY;
    request.principal_filter = None;
    request.host_filter = None;
    request.operation = ANY;
    request.permission_type = ANY;
    let answer: DescribeAclsResponse = connection.call(ApiKey::DescribeAcls, version, &request).await?;
    if answer.error_code == SECURITY_DISABLED {
        return Ok(SourceAcls::NoAuthorizer);
    }
    if answer.error_code != 0 {
        return Err(LinkError::Kafka {
            what: format!("DescribeAcls at {address}"),
            code: answer.error_code,
            detail: answer
                .error_message
                .map(|message| format!(" ({})", message.as_str()))
                .unwrap_or_default(),
        });
    }
    let mut acls = Vec::new();
    for resource in answer.resources {
        for acl in resource.acls {
            acls.push(SourceAcl {
                resource_type: resource.resource_type,
                resource_name: resource.resource_name.as_str().to_owned(),
                pattern_type: resource.pattern_type,
                principal: acl.principal.as_str().to_owned(),
                host: acl.host.as_str().to_owned(),
                operation: acl.operation,
                permission: acl.permission_type,
            });
        }
    }
    Ok(SourceAcls::Read { cluster_id, acls })
}
