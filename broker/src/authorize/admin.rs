//! Administration's checks: CreateTopics (CREATE on the cluster or the topic), DeleteTopics (DELETE),
//! CreatePartitions (ALTER), the config APIs (DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, the group, or the
//! cluster for a broker's configs), DescribeLogDirs (DESCRIBE on the cluster; DescribeCluster, like Metadata,
//! needs nothing, as in Kafka), the SCRAM
//! credential and ACL APIs (DESCRIBE / ALTER on the cluster), and mirror administration (ADR 0057: ALTER on the
//! cluster to change a link, DESCRIBE to look at one or answer a peer's `last_mirrored` question).

use kafka_auth::acl::Operation;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::DescribeUserScramCredentialsResult;
use kafka_protocol::messages::*;
use kafka_types::KafkaError;
use node::mirror::{AdminRequest, AdminResponse};

use super::{take_denied, text, Access};
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

const TOPIC_DENIED: i16 = KafkaError::TopicAuthorizationFailed.code();
const CLUSTER_DENIED: i16 = KafkaError::ClusterAuthorizationFailed.code();

/// CreateTopics: each topic the caller may not CREATE (on the cluster, or on the topic) is refused. A name given
/// twice and the cluster metadata topic are left to the node, which refuses them whoever asks (Kafka's controller
/// refuses them before it authorizes).
pub fn create_topics(access: &Access, request: &mut CreateTopicsRequest) -> Vec<CreatableTopicResult> {
    let cluster = access.cluster(Operation::Create);
    let twice: BTreeSet<String> = node::create_topics_given_twice(request)
        .into_iter()
        .map(str::to_owned)
        .collect();
    take_denied(&mut request.topics, |topic| {
        let name = topic.name.as_str();
        cluster
            || twice.contains(name)
            || name == node::CLUSTER_METADATA_TOPIC
            || access.topic(Operation::Create, name)
    })
    .into_iter()
    .map(|topic| {
        let mut refused = CreatableTopicResult::default();
        refused.name = topic.name;
        refused.error_code = TOPIC_DENIED;
        refused.error_message = Some(text("Authorization failed."));
        refused
    })
    .collect()
}

/// CreateTopics' answer (v5+): a topic created for a caller who may not DESCRIBE_CONFIGS on it is answered
/// without its configs, partition count and replication factor, and with TOPIC_AUTHORIZATION_FAILED as its config
/// error, as Kafka's controller answers it (only the topic's own ACLs count, not the cluster's).
pub fn create_topics_answered(access: &Access, response: &mut CreateTopicsResponse) {
    for topic in &mut response.topics {
        if topic.error_code == 0 && !access.topic(Operation::DescribeConfigs, &topic.name) {
            topic.configs = Some(Vec::new());
            topic.num_partitions = -1;
            topic.replication_factor = -1;
            topic.topic_config_error_code = TOPIC_DENIED;
        }
    }
}

/// DeleteTopics: each topic the caller may not DELETE (on the topic, or on the cluster) is refused, as Kafka's
/// controller refuses it: with TOPIC_AUTHORIZATION_FAILED, or UNKNOWN_TOPIC_OR_PARTITION for a name the caller may
/// describe that no topic has (`held` names the topics there are). A topic named by id (v6) is checked under the
/// name `names_by_id` resolves it to, and a refusal names it only to a caller who may DESCRIBE it; an id that
/// resolves to nothing is answered UNKNOWN_TOPIC_ID here, so the node deletes nothing the broker did not check.
/// Entries the node answers INVALID_REQUEST whoever asks (a name or an id given twice, both or neither) are left
/// to it, as Kafka checks them before it authorizes.
pub fn delete_topics(
    access: &Access,
    request: &mut DeleteTopicsRequest,
    names_by_id: &BTreeMap<Uuid, String>,
    held: &BTreeSet<String>,
) -> Vec<DeletableTopicResult> {
    let cluster = access.cluster(Operation::Delete);
    let deletable = |name: &str| cluster || access.topic(Operation::Delete, name);
    let describable = |name: &str| cluster || access.topic(Operation::Describe, name);
    let answer = |name: Option<TopicName>, id: Uuid, error_code: i16| {
        let mut result = DeletableTopicResult::default();
        result.name = name;
        result.topic_id = id;
        result.error_code = error_code;
        result
    };
    let refused_by_name = |name: TopicName| {
        let code = if describable(&name) && !held.contains(name.as_str()) {
            KafkaError::UnknownTopicOrPartition.code()
        } else {
            TOPIC_DENIED
        };
        answer(Some(name), Uuid::nil(), code)
    };
    let twice = node::delete_topics_given_twice(request);
    let (names_twice, states_twice) = twice.split_at(request.topic_names.len().min(twice.len()));
    let mut refused = Vec::new();
    // Each entry beside its own flag (an entry without one, which cannot be, is checked).
    for (name, twice) in std::mem::take(&mut request.topic_names)
        .into_iter()
        .zip(names_twice.iter().copied().chain(std::iter::repeat(false)))
    {
        if twice || deletable(&name) {
            request.topic_names.push(name);
        } else {
            refused.push(refused_by_name(name));
        }
    }
    for (topic, twice) in std::mem::take(&mut request.topics)
        .into_iter()
        .zip(states_twice.iter().copied().chain(std::iter::repeat(false)))
    {
        match (&topic.name, topic.topic_id.is_nil()) {
            _ if twice => request.topics.push(topic),
            (Some(name), true) => {
                if deletable(name) {
                    request.topics.push(topic);
                } else {
                    refused.push(refused_by_name(name.clone()));
                }
            }
            (None, false) => match names_by_id.get(&topic.topic_id) {
                Some(name) if deletable(name) => request.topics.push(topic),
                Some(name) => {
                    let shown = describable(name).then(|| TopicName(text(name)));
                    refused.push(answer(shown, topic.topic_id, TOPIC_DENIED));
                }
                None => refused.push(answer(None, topic.topic_id, KafkaError::UnknownTopicId.code())),
            },
            // Both a name and an id, or neither: INVALID_REQUEST from the node.
            _ => request.topics.push(topic),
        }
    }
    refused
}

/// CreatePartitions: each topic the caller may not ALTER is refused.
pub fn create_partitions(
    access: &Access,
    request: &mut CreatePartitionsRequest,
) -> Vec<CreatePartitionsTopicResult> {
    take_denied(&mut request.topics, |topic| {
        access.topic(Operation::Alter, &topic.name)
    })
    .into_iter()
    .map(|topic| {
        let mut refused = CreatePartitionsTopicResult::default();
        refused.name = topic.name;
        refused.error_code = TOPIC_DENIED;
        refused
    })
    .collect()
}

/// The error for a config resource the caller may not `operation` (ConfigResource types: TOPIC 2, BROKER 4,
/// BROKER_LOGGER 8, CLIENT_METRICS 16, GROUP 32), if denied. Unknown types are the node's to refuse.
fn config_denied(access: &Access, operation: Operation, resource_type: i8, name: &str) -> Option<i16> {
    match resource_type {
        2 => (!access.topic(operation, name)).then_some(TOPIC_DENIED),
        4 | 8 | 16 => (!access.cluster(operation)).then_some(CLUSTER_DENIED),
        32 => (!access.group(operation, name)).then_some(KafkaError::GroupAuthorizationFailed.code()),
        _ => None,
    }
}

/// The config APIs' check, one function per API: each resource of the request the caller may not `$operation`
/// is taken out and answered with its authorization error in the API's result type.
macro_rules! config_check {
    ($(#[$doc:meta])* $name:ident, $request:ty, $result:ty, $operation:expr) => {
        $(#[$doc])*
        pub fn $name(access: &Access, request: &mut $request) -> Vec<$result> {
            let denied = |kind: i8, name: &str| config_denied(access, $operation, kind, name);
            take_denied(&mut request.resources, |resource| {
                denied(resource.resource_type, &resource.resource_name).is_none()
            })
            .into_iter()
            .map(|resource| {
                let mut refused = <$result>::default();
                refused.error_code =
                    denied(resource.resource_type, &resource.resource_name).unwrap_or(CLUSTER_DENIED);
                refused.resource_type = resource.resource_type;
                refused.resource_name = resource.resource_name;
                refused
            })
            .collect()
        }
    };
}

config_check!(
    /// DescribeConfigs: each resource the caller may not DESCRIBE_CONFIGS is refused.
    describe_configs,
    DescribeConfigsRequest,
    DescribeConfigsResult,
    Operation::DescribeConfigs
);

config_check!(
    /// AlterConfigs: each resource the caller may not ALTER_CONFIGS is refused.
    alter_configs,
    AlterConfigsRequest,
    alter_configs_response::AlterConfigsResourceResponse,
    Operation::AlterConfigs
);

config_check!(
    /// IncrementalAlterConfigs: each resource the caller may not ALTER_CONFIGS is refused.
    incremental_alter_configs,
    IncrementalAlterConfigsRequest,
    incremental_alter_configs_response::AlterConfigsResourceResponse,
    Operation::AlterConfigs
);

/// DescribeLogDirs refused without DESCRIBE on the cluster: no directories, and (v3+) the error.
pub fn describe_log_dirs(access: &Access, version: i16) -> Option<DescribeLogDirsResponse> {
    (!access.cluster(Operation::Describe)).then(|| {
        let mut response = DescribeLogDirsResponse::default();
        if version >= 3 {
            response.error_code = CLUSTER_DENIED;
        }
        response
    })
}

/// DescribeUserScramCredentials refused without DESCRIBE on the cluster.
pub fn describe_user_scram_credentials(
    access: &Access,
    request: &DescribeUserScramCredentialsRequest,
) -> Option<DescribeUserScramCredentialsResponse> {
    (!access.cluster(Operation::Describe)).then(|| {
        let mut response = DescribeUserScramCredentialsResponse::default();
        response.error_code = CLUSTER_DENIED;
        response.results = request
            .users
            .iter()
            .flatten()
            .map(|user| {
                let mut result = DescribeUserScramCredentialsResult::default();
                result.user = user.name.clone();
                result.error_code = CLUSTER_DENIED;
                result
            })
            .collect();
        response
    })
}

/// AlterUserScramCredentials refused without ALTER on the cluster: every user it names.
pub fn alter_user_scram_credentials(
    access: &Access,
    request: &AlterUserScramCredentialsRequest,
) -> Option<AlterUserScramCredentialsResponse> {
    if access.cluster(Operation::Alter) {
        return None;
    }
    let mut users: Vec<&str> = request
        .deletions
        .iter()
        .map(|deletion| deletion.name.as_str())
        .collect();
    users.extend(request.upsertions.iter().map(|upsertion| upsertion.name.as_str()));
    let mut seen = std::collections::BTreeSet::new();
    users.retain(|user| seen.insert(*user));
    let mut response = AlterUserScramCredentialsResponse::default();
    response.results = users
        .into_iter()
        .map(|user| {
            let mut result = AlterUserScramCredentialsResult::default();
            result.user = text(user);
            result.error_code = CLUSTER_DENIED;
            result
        })
        .collect();
    Some(response)
}

/// The ACL APIs without an authorizer: SECURITY_DISABLED, as Kafka answers them.
const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";

/// DescribeAcls refused: no authorizer, or no DESCRIBE on the cluster.
pub fn describe_acls(access: &Access) -> Option<DescribeAclsResponse> {
    let (error, message) = acl_api_refusal(access, Operation::Describe)?;
    let mut response = DescribeAclsResponse::default();
    response.error_code = error;
    response.error_message = message.map(text);
    Some(response)
}

/// CreateAcls refused: no authorizer, or no ALTER on the cluster (every creation).
pub fn create_acls(access: &Access, request: &CreateAclsRequest) -> Option<CreateAclsResponse> {
    let (error, message) = acl_api_refusal(access, Operation::Alter)?;
    let mut response = CreateAclsResponse::default();
    response.results = request
        .creations
        .iter()
        .map(|_| {
            let mut result = AclCreationResult::default();
            result.error_code = error;
            result.error_message = message.map(text);
            result
        })
        .collect();
    Some(response)
}

/// DeleteAcls refused: no authorizer, or no ALTER on the cluster (every filter).
pub fn delete_acls(access: &Access, request: &DeleteAclsRequest) -> Option<DeleteAclsResponse> {
    let (error, message) = acl_api_refusal(access, Operation::Alter)?;
    let mut response = DeleteAclsResponse::default();
    response.filter_results = request
        .filters
        .iter()
        .map(|_| {
            let mut result = DeleteAclsFilterResult::default();
            result.error_code = error;
            result.error_message = message.map(text);
            result
        })
        .collect();
    Some(response)
}

fn acl_api_refusal(access: &Access, operation: Operation) -> Option<(i16, Option<&'static str>)> {
    if !access.authorizer_on() {
        Some((KafkaError::SecurityDisabled.code(), Some(NO_AUTHORIZER)))
    } else if !access.cluster(operation) {
        Some((CLUSTER_DENIED, None))
    } else {
        None
    }
}

/// Mirror administration refused: changing a link (its configuration included) needs ALTER on the cluster;
/// listing and describing links (their configuration included), and a peer's `last_mirrored` question, DESCRIBE
/// (ADR 0057).
pub fn mirror(access: &Access, request: &AdminRequest) -> Option<AdminResponse> {
    let operation = match request {
        AdminRequest::List
        | AdminRequest::Describe { .. }
        | AdminRequest::DescribeConfig { .. }
        | AdminRequest::LastMirrored { .. } => Operation::Describe,
        AdminRequest::Create { .. }
        | AdminRequest::Alter { .. }
        | AdminRequest::Reverse { .. }
        | AdminRequest::Pause { .. }
        | AdminRequest::Resume { .. }
        | AdminRequest::Failover { .. }
        | AdminRequest::Delete { .. }
        | AdminRequest::Promote { .. } => Operation::Alter,
    };
    (!access.cluster(operation)).then(|| {
        AdminResponse::failed(
            "authorization",
            format!("not authorized: mirror administration needs {operation} on the cluster"),
            Vec::new(),
        )
    })
}
