//! CreateTopics, DeleteTopics and CreatePartitions (`crate::topic_admin` does the work), and DescribeCluster.

use kafka_protocol::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use kafka_protocol::messages::*;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use kafka_types::KafkaError;
use topic_config::{Described, Overrides};
use uuid::Uuid;

use super::configs::answer_of;
use super::str_bytes;
use crate::node::{Endpoint, Node};
use crate::ConfigRefusal;

/// The most partitions one CreateTopics may ask for in Kafka (its controller's `MAX_PARTITIONS_PER_BATCH`), counted
/// before any topic is checked over every topic the node is given but a name given twice and the metadata log (as
/// Kafka counts those its controller is passed): a request over it creates nothing, even validated only.
const MAX_PARTITIONS_PER_REQUEST: u64 = 10_000;

/// The most metadata records one CreateTopics may make in Kafka (its controller's bound on one user operation): a
/// topic, each config given and each partition one record, counted over the topics that pass their checks. A
/// request over it creates nothing, even validated only.
const MAX_RECORDS_PER_REQUEST: usize = 10_000;

/// CreateTopics: one replica (this node); replica assignments are refused; configs are checked (crate
/// `topic-config`) and recorded with the topic. As Kafka's controller answers it:
/// - a name given twice is created never and answered INVALID_REQUEST once, after the others;
/// - a request asking for more than [`MAX_PARTITIONS_PER_REQUEST`] partitions in all, or whose topics that pass
///   their checks would make more than [`MAX_RECORDS_PER_REQUEST`] records, creates nothing and answers every
///   entry POLICY_VIOLATION (which also bounds what one request can make the node create and answer);
/// - from v5 a topic created (or validated only) is answered with its partition count, its replication factor and
///   every config it has, in name order, as DescribeConfigs describes them; from v7
///   with its id (for one validated only, a fresh id, which no topic holds, as Kafka draws one).
///
/// Every topic is checked before any is created. The broker has refused what the caller may not create, and
/// withdraws the configs from a caller who may not describe them, before and after this runs ([`crate`] knows no
/// principals).
pub async fn create_topics(node: &Node, request: CreateTopicsRequest, version: i16) -> CreateTopicsResponse {
    let twice: Vec<String> = create_topics_given_twice(&request)
        .into_iter()
        .map(str::to_owned)
        .collect();
    let given_twice = |name: &TopicName| {
        twice
            .binary_search_by(|other| other.as_str().cmp(name.as_str()))
            .is_ok()
    };
    let counted = request.topics.iter().filter(|topic| {
        !given_twice(&topic.name) && topic.name.as_str() != crate::node::CLUSTER_METADATA_TOPIC
    });
    if partitions_asked(counted, node.config.default_partitions) > MAX_PARTITIONS_PER_REQUEST {
        return refused_whole(&request, "Excessively large number of partitions per request.");
    }
    // Read once for the whole request, and only when a name can collide: a check per entry would scan every
    // topic per entry.
    let collision_names = if request.topics.iter().any(|topic| topic.name.contains(['.', '_'])) {
        node.topics_by_collision_name().await
    } else {
        BTreeMap::new()
    };
    let mut plans = Vec::with_capacity(request.topics.len());
    for topic in request.topics.iter().filter(|topic| !given_twice(&topic.name)) {
        plans.push((
            topic.name.clone(),
            plan_topic(node, topic, &collision_names).await,
        ));
    }
    let records: usize = plans
        .iter()
        .filter_map(|(_, plan)| plan.as_ref().ok())
        .map(Plan::records)
        .fold(0, usize::saturating_add);
    if records > MAX_RECORDS_PER_REQUEST {
        return refused_whole(&request, "Unable to perform excessively large batch operation.");
    }
    let mut response = CreateTopicsResponse::default();
    for (name, plan) in plans {
        let mut result = CreatableTopicResult::default();
        result.name = name.clone();
        let created = match plan {
            Ok(plan) => create_planned(node, &name, plan, request.validate_only, version).await,
            Err(refusal) => Err(refusal),
        };
        match created {
            Ok(created) => {
                result.error_message = None;
                result.topic_id = Uuid::from_bytes(created.id);
                result.num_partitions = i32::try_from(created.partitions).unwrap_or(i32::MAX);
                result.replication_factor = 1;
                result.configs = Some(created.configs);
            }
            Err(refusal) => (result.error_code, result.error_message) = answer_of(Err(refusal)),
        }
        response.topics.push(result);
    }
    for name in twice {
        let mut result = CreatableTopicResult::default();
        result.name = TopicName(str_bytes(&name));
        result.error_code = KafkaError::InvalidRequest.code();
        result.error_message = Some(str_bytes("Duplicate topic name."));
        response.topics.push(result);
    }
    response
}

/// The partitions `topics` ask for in all, as Kafka counts them: the broker's default for `-1`, a positive count
/// as given, nothing for another, a manual assignment by its length. Saturating: a hostile sum does not wrap.
fn partitions_asked<'a>(
    topics: impl Iterator<Item = &'a create_topics_request::CreatableTopic>,
    default_partitions: u32,
) -> u64 {
    topics
        .map(|topic| {
            if !topic.assignments.is_empty() {
                u64::try_from(topic.assignments.len()).unwrap_or(u64::MAX)
            } else if topic.num_partitions == -1 {
                u64::from(default_partitions)
            } else {
                u64::try_from(topic.num_partitions).unwrap_or(0)
            }
        })
        .fold(0, u64::saturating_add)
}

/// Every entry of `request` answered POLICY_VIOLATION with `message`, nothing created: Kafka's answer to a request
/// over one of its bounds.
fn refused_whole(request: &CreateTopicsRequest, message: &str) -> CreateTopicsResponse {
    let mut response = CreateTopicsResponse::default();
    response.topics = request
        .topics
        .iter()
        .map(|topic| {
            let mut result = CreatableTopicResult::default();
            result.name = topic.name.clone();
            result.error_code = KafkaError::PolicyViolation.code();
            result.error_message = Some(str_bytes(message));
            result
        })
        .collect();
    response
}

/// The names CreateTopics `request` gives more than once, in name order. The node answers those INVALID_REQUEST
/// whoever asks, so the broker leaves them to it unauthorized (as Kafka checks them before it authorizes): both use
/// this one definition.
pub fn create_topics_given_twice(request: &CreateTopicsRequest) -> BTreeSet<&str> {
    let mut seen = HashSet::new();
    request
        .topics
        .iter()
        .map(|topic| topic.name.as_str())
        .filter(|name| !seen.insert(*name))
        .collect()
}

/// A topic CreateTopics found it could create: its partition count and config overrides.
struct Plan {
    partitions: u32,
    overrides: Overrides,
}

impl Plan {
    /// The metadata records Kafka's controller would write for it: the topic, each config, each partition.
    fn records(&self) -> usize {
        let partitions = usize::try_from(self.partitions).unwrap_or(usize::MAX);
        partitions
            .saturating_add(self.overrides.as_map().len())
            .saturating_add(1)
    }
}

/// A topic CreateTopics created (or found it could create), as its answer shows it.
struct Created {
    id: [u8; 16],
    partitions: u32,
    configs: Vec<CreatableTopicConfigs>,
}

/// A refusal with Kafka's message.
fn refusal(error: KafkaError, message: String) -> ConfigRefusal {
    ConfigRefusal {
        error,
        message: Some(message),
    }
}

/// Whether `topic` could be created now, by every check its creation makes, in the order Kafka's controller makes
/// them (the name: taken, or invalid, or colliding with an existing topic's but for `.` against `_`, as
/// `collision_names` holds them; the configs; the replication factor and partition count as given, then as this
/// one node can place them); what it would be if so. As in Kafka, only topics that existed before the request
/// collide: two new names alike in one request are both created.
async fn plan_topic(
    node: &Node,
    topic: &create_topics_request::CreatableTopic,
    collision_names: &BTreeMap<String, String>,
) -> Result<Plan, ConfigRefusal> {
    let name = topic.name.as_str();
    if let Some(message) = crate::node::reserved_topic_name(name) {
        return Err(refusal(KafkaError::InvalidRequest, message));
    }
    if node.topic_id(name).await.is_some() {
        return Err(refusal(
            KafkaError::TopicAlreadyExists,
            format!("Topic '{name}' already exists."),
        ));
    }
    crate::topic_configs::check_topic_name(name)?;
    storage::PartitionId::new(name, 0).map_err(|_| KafkaError::InvalidTopic)?;
    if name.contains(['.', '_']) {
        if let Some(other) = collision_names.get(&name.replace('.', "_")) {
            return Err(refusal(
                KafkaError::InvalidTopic,
                format!("Topic '{name}' collides with existing topic: {other}"),
            ));
        }
    }
    let overrides = Overrides::from_pairs(
        topic
            .configs
            .iter()
            .map(|config| (config.name.as_str(), config.value.as_deref())),
    )?;
    if !topic.assignments.is_empty() {
        return Err(KafkaError::InvalidRequest.into());
    }
    if topic.replication_factor == 0 || topic.replication_factor < -1 {
        return Err(refusal(
            KafkaError::InvalidReplicationFactor,
            "Replication factor must be larger than 0, or -1 to use the default value.".to_owned(),
        ));
    }
    let partitions = match topic.num_partitions {
        -1 => node.config.default_partitions,
        n => u32::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| {
            refusal(
                KafkaError::InvalidPartitions,
                "Number of partitions was set to an invalid non-positive value.".to_owned(),
            )
        })?,
    };
    if topic.replication_factor > 1 {
        return Err(refusal(
            KafkaError::InvalidReplicationFactor,
            format!(
                "Unable to replicate the partition {} time(s): this node is the only broker.",
                topic.replication_factor
            ),
        ));
    }
    // The node's own checks, which its creation makes again.
    node.check_new_topic(name, partitions).await?;
    Ok(Plan {
        partitions,
        overrides,
    })
}

/// Creates the topic `name` as `plan` says (checks nothing more, `validate_only`), or says why not; with what a
/// `version` answer carries of it (configs from v5, the id from v7).
async fn create_planned(
    node: &Node,
    name: &TopicName,
    plan: Plan,
    validate_only: bool,
    version: i16,
) -> Result<Created, ConfigRefusal> {
    let configs = if version >= 5 {
        configs_answer(node.configs_of_new_topic(&plan.overrides).await)
    } else {
        Vec::new()
    };
    let id = if !validate_only {
        node.create_topic_with_configs(name.as_str(), plan.partitions, plan.overrides)
            .await?
    } else if version >= 7 {
        node.unused_topic_id().await?
    } else {
        [0; 16]
    };
    Ok(Created {
        id,
        partitions: plan.partitions,
        configs,
    })
}

/// A new topic's configs as CreateTopics answers them: each described one, in name order (Kafka 4.1's controller
/// lists the same ones DescribeConfigs does; the differential suite compares them).
fn configs_answer(described: Vec<Described>) -> Vec<CreatableTopicConfigs> {
    let mut configs: Vec<CreatableTopicConfigs> = described.into_iter().map(config_answer).collect();
    configs.sort_by(|a, b| a.name.cmp(&b.name));
    configs
}

/// One config of a new topic as CreateTopics answers it: never read-only, never sensitive (no topic config is).
fn config_answer(described: Described) -> CreatableTopicConfigs {
    let mut config = CreatableTopicConfigs::default();
    config.name = str_bytes(&described.value.name);
    config.value = Some(str_bytes(&described.value.value));
    config.read_only = false;
    config.config_source = described.value.source.code();
    config.is_sensitive = false;
    config
}

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
