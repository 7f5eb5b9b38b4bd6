//! Metadata and FindCoordinator: what a client asks before it produces or fetches (ApiVersions is
//! the wire front end's: the node does not know versions).

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::*;

use kafka_types::KafkaError;
use uuid::Uuid;

use super::str_bytes;
use crate::node::{Endpoint, Node};

/// Metadata: this node (node 0) leads every partition. Named topics that do not exist are created when the
/// node auto-creates topics and the request allows it (v4+; always before v4, as Kafka did). From v10 each topic
/// carries its topic id (KIP-516); from v12 topics may be asked by id instead, as Kafka 4.1 answers them
/// ([`by_id`]).
pub async fn metadata(
    node: &Node,
    mut request: MetadataRequest,
    version: i16,
    endpoint: &Endpoint,
) -> MetadataResponse {
    let mut unknown_ids = Vec::new();
    match by_id(&request, version) {
        ById::Names => {}
        ById::Refused(response) => return response,
        ById::Ids(ids) => {
            // Kafka answers the ids alone (names beside them are not asked, an id asked twice is answered once),
            // each known one under its name.
            let ids: std::collections::BTreeSet<Uuid> = ids.into_iter().collect();
            let mut names = Vec::new();
            for id in ids {
                match node.topic_named_by(*id.as_bytes()).await {
                    Some(name) => {
                        let mut topic = metadata_request::MetadataRequestTopic::default();
                        topic.name = Some(TopicName(str_bytes(&name)));
                        names.push(topic);
                    }
                    None => {
                        let mut topic = MetadataResponseTopic::default();
                        topic.name = None;
                        topic.topic_id = id;
                        topic.error_code = KafkaError::UnknownTopicId.code();
                        unknown_ids.push(topic);
                    }
                }
            }
            request.topics = Some(names);
            request.allow_auto_topic_creation = false;
        }
    }
    let mut created_errors = std::collections::BTreeMap::new();
    if let Some(requested) = &request.topics {
        let allowed = version < 4 || request.allow_auto_topic_creation;
        let existing = node.topic_partitions().await;
        for topic in requested {
            let Some(name) = &topic.name else { continue };
            if existing.contains_key(name.as_str()) {
                continue;
            }
            let error = if node.config.auto_create_topics && allowed {
                match node
                    .create_topic(name.as_str(), node.config.default_partitions)
                    .await
                {
                    Ok(()) | Err(KafkaError::TopicAlreadyExists) => continue,
                    Err(error) => error,
                }
            } else {
                KafkaError::UnknownTopicOrPartition
            };
            created_errors.insert(name.as_str().to_owned(), error);
        }
    }
    let partitions = node.topic_partitions().await;
    let names: Vec<String> = match &request.topics {
        None => partitions.keys().cloned().collect(),
        Some(requested) => requested
            .iter()
            .filter_map(|topic| topic.name.as_ref().map(|name| name.as_str().to_owned()))
            .collect(),
    };
    let mut response = MetadataResponse::default();
    let mut this_node = MetadataResponseBroker::default();
    this_node.node_id = BrokerId(0);
    this_node.host = str_bytes(&endpoint.host);
    this_node.port = endpoint.port;
    response.brokers = vec![this_node];
    response.cluster_id = Some(str_bytes(&node.config.cluster_id));
    response.controller_id = BrokerId(0);
    response.topics = names
        .into_iter()
        .map(|name| {
            let mut topic = MetadataResponseTopic::default();
            match partitions.get(&name) {
                Some(&count) => {
                    topic.partitions = (0..count as i32)
                        .map(|index| {
                            let mut partition = MetadataResponsePartition::default();
                            partition.partition_index = index;
                            partition.leader_id = BrokerId(0);
                            partition.leader_epoch = 0;
                            partition.replica_nodes = vec![BrokerId(0)];
                            partition.isr_nodes = vec![BrokerId(0)];
                            partition
                        })
                        .collect();
                }
                None => {
                    topic.error_code = created_errors
                        .get(&name)
                        .copied()
                        .unwrap_or(KafkaError::UnknownTopicOrPartition)
                        .code();
                }
            }
            topic.name = Some(TopicName(str_bytes(&name)));
            topic
        })
        .collect();
    for topic in &mut response.topics {
        if let Some(name) = &topic.name {
            if let Some(id) = node.topic_id(name.as_str()).await {
                topic.topic_id = Uuid::from_bytes(id);
            }
        }
    }
    // Kafka lists the unknown ids first.
    unknown_ids.append(&mut response.topics);
    response.topics = unknown_ids;
    response
}

/// How a Metadata request names its topics.
enum ById {
    /// By name (or all topics).
    Names,
    /// By these ids (v12+; the nil id names nothing).
    Ids(Vec<Uuid>),
    /// Not answerable: the answer Kafka 4.1 gives instead.
    Refused(MetadataResponse),
}

/// Whether the node refuses `request` whole, before anything is authorized or created: an id, or a topic without a
/// name, before v12; a topic with neither at v12 ([`by_id`]).
pub fn metadata_refused_whole(request: &MetadataRequest, version: i16) -> bool {
    matches!(by_id(request, version), ById::Refused(_))
}

/// Whether `request` names topics by id (v12).
pub fn metadata_by_id(request: &MetadataRequest, version: i16) -> bool {
    matches!(by_id(request, version), ById::Ids(_))
}

/// Whether `request` names topics by id. Before v12 an id, or a topic without a name, is INVALID_REQUEST for every
/// topic asked (Kafka's `InvalidRequestException`: "Topic IDs are not supported in requests for version …", "Topic
/// name can not be null …"); at v12 a topic with neither is UNKNOWN_SERVER_ERROR, as Kafka 4.1 fails on it.
fn by_id(request: &MetadataRequest, version: i16) -> ById {
    let Some(topics) = &request.topics else {
        return ById::Names;
    };
    let ids: Vec<Uuid> = topics
        .iter()
        .map(|topic| topic.topic_id)
        .filter(|id| !id.is_nil())
        .collect();
    let nameless = topics.iter().any(|topic| topic.name.is_none());
    let refused = if version < 12 && (nameless || !ids.is_empty()) {
        KafkaError::InvalidRequest
    } else if !ids.is_empty() {
        return ById::Ids(ids);
    } else if nameless {
        KafkaError::UnknownServerError
    } else {
        return ById::Names;
    };
    let mut response = MetadataResponse::default();
    response.topics = topics
        .iter()
        .map(|asked| {
            let mut topic = MetadataResponseTopic::default();
            topic.name = Some(asked.name.clone().unwrap_or_else(|| TopicName(str_bytes(""))));
            topic.topic_id = asked.topic_id;
            topic.error_code = refused.code();
            topic
        })
        .collect();
    ById::Refused(response)
}

/// FindCoordinator: this node coordinates every group and transactional id.
pub async fn find_coordinator(
    _node: &Node,
    request: FindCoordinatorRequest,
    version: i16,
    endpoint: &Endpoint,
) -> FindCoordinatorResponse {
    // An unknown key type names no coordinator, beside INVALID_REQUEST, as Kafka answers it.
    let known = matches!(request.key_type, 0 | 1);
    let mut response = FindCoordinatorResponse::default();
    if version >= 4 {
        // Batched (KIP-699): one coordinator per key, every one this node.
        response.coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let mut coordinator = find_coordinator_response::Coordinator::default();
                coordinator.key = key.clone();
                if known {
                    coordinator.node_id = BrokerId(0);
                    coordinator.host = str_bytes(&endpoint.host);
                    coordinator.port = endpoint.port;
                } else {
                    coordinator.error_code = KafkaError::InvalidRequest.code();
                    coordinator.node_id = BrokerId(-1);
                    coordinator.port = -1;
                }
                coordinator
            })
            .collect();
        return response;
    }
    if !known {
        response.error_code = KafkaError::InvalidRequest.code();
        response.node_id = BrokerId(-1);
        response.port = -1;
        return response;
    }
    response.node_id = BrokerId(0);
    response.host = str_bytes(&endpoint.host);
    response.port = endpoint.port;
    response
}
