//! DeleteTopics and CreatePartitions (`crate::topic_admin` does the work), and DescribeCluster.

use kafka_protocol::messages::*;
use kafka_types::KafkaError;

use super::configs::answer_of;
use super::str_bytes;
use crate::node::{Endpoint, Node};

/// DeleteTopics (by name): each topic deleted with its data, or why not.
pub async fn delete_topics(node: &Node, request: DeleteTopicsRequest, _version: i16) -> DeleteTopicsResponse {
    let mut response = DeleteTopicsResponse::default();
    for name in request.topic_names {
        let outcome = node.delete_topic(name.as_str()).await;
        let mut result = delete_topics_response::DeletableTopicResult::default();
        result.name = Some(name);
        (result.error_code, result.error_message) = answer_of(outcome);
        response.responses.push(result);
    }
    response
}

/// CreatePartitions: each topic grown to its new count (manual assignments refused: one broker places them).
pub async fn create_partitions(
    node: &Node,
    request: CreatePartitionsRequest,
    _version: i16,
) -> CreatePartitionsResponse {
    let mut response = CreatePartitionsResponse::default();
    for topic in request.topics {
        let outcome = if topic.assignments.is_some() {
            Err(KafkaError::InvalidRequest.into())
        } else {
            node.grow_topic(topic.name.as_str(), topic.count, request.validate_only)
                .await
        };
        let mut result = create_partitions_response::CreatePartitionsTopicResult::default();
        result.name = topic.name;
        (result.error_code, result.error_message) = answer_of(outcome);
        response.results.push(result);
    }
    response
}

/// DescribeCluster: this one broker, which is also the controller; no authorized operations (none asked or
/// known).
pub fn describe_cluster(
    node: &Node,
    request: DescribeClusterRequest,
    _version: i16,
    endpoint: &Endpoint,
) -> DescribeClusterResponse {
    let mut response = DescribeClusterResponse::default();
    response.error_message = None;
    if request.endpoint_type > 1 {
        // Controller endpoints (type 2) are not served: the broker is its own controller.
        response.error_code = KafkaError::MismatchedEndpointType.code();
        response.error_message = Some(str_bytes(
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
        ));
        return response;
    }
    response.endpoint_type = request.endpoint_type;
    response.cluster_id = str_bytes(&node.config().cluster_id);
    response.controller_id = BrokerId(0);
    let mut broker = describe_cluster_response::DescribeClusterBroker::default();
    broker.broker_id = BrokerId(0);
    broker.host = str_bytes(&endpoint.host);
    broker.port = endpoint.port;
    broker.rack = None;
    response.brokers = vec![broker];
    response.cluster_authorized_operations = i32::MIN;
    response
}
