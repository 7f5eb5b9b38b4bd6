//! DeleteTopics and CreatePartitions (`crate::topic_admin` does the work), and DescribeCluster.

use kafka_protocol::messages::*;
use std::collections::{HashMap, HashSet};

use kafka_types::KafkaError;
use uuid::Uuid;

use super::configs::answer_of;
use super::str_bytes;
use crate::node::{Endpoint, Node};

/// DeleteTopics: each topic deleted with its data, or why not. Topics are named by `topic_names` (v0–v5) or by
/// `topics` (v6+), each entry a name or an id, never both, as Kafka's controller takes them: an entry with both or
/// neither, and a name or an id given twice, is answered INVALID_REQUEST (once per duplicate, and nothing of it is
/// deleted); an id no topic has, UNKNOWN_TOPIC_ID; a name whose topic's id is also given (once or more), one
/// INVALID_REQUEST under the name, and the topic kept. A topic named by id is deleted only while it still has that
/// id (one deleted and created again meanwhile is another topic: UNKNOWN_TOPIC_ID). v6 answers carry each topic's
/// id (a name's too, once resolved). The broker has refused what the caller may not delete before this runs
/// ([`crate`] knows no principals).
pub async fn delete_topics(node: &Node, request: DeleteTopicsRequest, _version: i16) -> DeleteTopicsResponse {
    let mut response = DeleteTopicsResponse::default();
    let entries = entries(&request);
    let twice = given_twice(&entries);
    // Ids given more than once: answered INVALID_REQUEST below, and still "given" for the name check after.
    let ids_given_twice: HashSet<Uuid> = entries
        .iter()
        .zip(&twice)
        .filter_map(|(entry, twice)| match entry {
            Named::Id(id) if *twice => Some(*id),
            _ => None,
        })
        .collect();
    // What is left to delete, in the request's order: (name, id, whether it was named by id).
    let mut chosen: Vec<(TopicName, Uuid, bool)> = Vec::new();
    let mut answered_duplicates: HashSet<Named> = HashSet::new();
    for (entry, twice) in entries.iter().zip(&twice) {
        if *twice {
            if answered_duplicates.insert(*entry) {
                response.responses.push(match *entry {
                    Named::Name(name) => invalid(
                        Some(name.clone()),
                        Uuid::nil(),
                        "the topic name is given more than once",
                    ),
                    Named::Id(id) => invalid(None, id, "the topic id is given more than once"),
                    Named::Both(..) | Named::Neither => {
                        invalid(None, Uuid::nil(), "the entry is given more than once")
                    }
                });
            }
            continue;
        }
        match *entry {
            Named::Neither => response.responses.push(invalid(
                None,
                Uuid::nil(),
                "neither a topic name nor a topic id is given",
            )),
            Named::Both(name, id) => response.responses.push(invalid(
                Some(name.clone()),
                id,
                "a topic is named by its name or by its id, not by both",
            )),
            Named::Id(id) => match node.topic_named_by(id.into_bytes()).await {
                Some(name) => chosen.push((TopicName(str_bytes(&name)), id, true)),
                None => response
                    .responses
                    .push(result(None, id, Err(KafkaError::UnknownTopicId.into()))),
            },
            Named::Name(name) => {
                let id = node
                    .topic_id(name.as_str())
                    .await
                    .map_or(Uuid::nil(), Uuid::from_bytes);
                chosen.push((name.clone(), id, false));
            }
        }
    }
    // A name whose topic's id is given too names one topic twice: the pair is refused, under the name.
    let given_by_id: HashSet<Uuid> = chosen
        .iter()
        .filter(|(_, _, by_id)| *by_id)
        .map(|(_, id, _)| *id)
        .chain(ids_given_twice)
        .collect();
    let named_twice: HashSet<Uuid> = chosen
        .iter()
        .filter(|(_, id, by_id)| !by_id && !id.is_nil() && given_by_id.contains(id))
        .map(|(_, id, _)| *id)
        .collect();
    for (name, id, by_id) in chosen {
        if named_twice.contains(&id) {
            if !by_id {
                response.responses.push(invalid(
                    Some(name),
                    id,
                    "the topic name is that of a topic id given too",
                ));
            }
            continue;
        }
        let outcome = if by_id {
            node.delete_topic_with_id(name.as_str(), id.into_bytes()).await
        } else {
            node.delete_topic(name.as_str()).await
        };
        response.responses.push(result(Some(name), id, outcome));
    }
    response
}

/// For each DeleteTopics entry (`topic_names`, then `topics`): whether it names by name alone, or by id alone, a
/// topic another such entry names the same way. The node answers those INVALID_REQUEST whoever asks, so the broker
/// leaves them to it unauthorized (as Kafka checks them before it authorizes): both use this one definition.
pub fn delete_topics_given_twice(request: &DeleteTopicsRequest) -> Vec<bool> {
    given_twice(&entries(request))
}

/// See [`delete_topics_given_twice`]. Counted in a map: a hostile request of a million entries costs a million
/// lookups, not a million squared.
fn given_twice(entries: &[Named]) -> Vec<bool> {
    let mut counts: HashMap<Named, usize> = HashMap::new();
    for entry in entries {
        *counts.entry(*entry).or_default() += 1;
    }
    entries
        .iter()
        .map(|entry| {
            matches!(entry, Named::Name(_) | Named::Id(_))
                && counts.get(entry).is_some_and(|count| *count > 1)
        })
        .collect()
}

/// Every entry of `request` as it names its topic, borrowed from it: `topic_names`, then `topics`.
fn entries(request: &DeleteTopicsRequest) -> Vec<Named<'_>> {
    request
        .topic_names
        .iter()
        .map(Named::Name)
        .chain(request.topics.iter().map(Named::of))
        .collect()
}

/// How a DeleteTopics entry names its topic.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Named<'a> {
    Name(&'a TopicName),
    Id(Uuid),
    /// A name and a (non-zero) id: refused.
    Both(&'a TopicName, Uuid),
    /// Neither: refused.
    Neither,
}

impl<'a> Named<'a> {
    fn of(topic: &'a delete_topics_request::DeleteTopicState) -> Named<'a> {
        match (&topic.name, topic.topic_id.is_nil()) {
            (None, true) => Named::Neither,
            (None, false) => Named::Id(topic.topic_id),
            (Some(name), true) => Named::Name(name),
            (Some(name), false) => Named::Both(name, topic.topic_id),
        }
    }
}

/// One DeleteTopics answer.
fn result(
    name: Option<TopicName>,
    id: Uuid,
    outcome: Result<(), crate::ConfigRefusal>,
) -> delete_topics_response::DeletableTopicResult {
    let mut result = delete_topics_response::DeletableTopicResult::default();
    result.name = name;
    result.topic_id = id;
    (result.error_code, result.error_message) = answer_of(outcome);
    result
}

/// An INVALID_REQUEST answer saying `what`.
fn invalid(name: Option<TopicName>, id: Uuid, what: &str) -> delete_topics_response::DeletableTopicResult {
    result(
        name,
        id,
        Err(crate::ConfigRefusal {
            error: KafkaError::InvalidRequest,
            message: Some(what.to_owned()),
        }),
    )
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
