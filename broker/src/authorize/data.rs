//! The data path's checks: Produce (WRITE on each topic, WRITE on the transactional id), Fetch (READ on each
//! topic; a follower's fetch CLUSTER_ACTION), ListOffsets (DESCRIBE), Metadata (DESCRIBE to see a topic, CREATE on
//! the cluster or the topic to auto-create it), DeleteRecords (DELETE), DescribeProducers (READ).

use bytes::Bytes;
use kafka_auth::acl::Operation;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::describe_producers_response::{PartitionResponse, TopicResponse};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::*;
use kafka_types::KafkaError;

use super::{take_denied, Access};

const TOPIC_DENIED: i16 = KafkaError::TopicAuthorizationFailed.code();

/// Produce: a transactional produce the caller may not WRITE with is refused whole; each topic it may not WRITE
/// to is refused. Returns the refused topics' answers.
pub fn produce(access: &Access, request: &mut ProduceRequest) -> Vec<TopicProduceResponse> {
    let id_denied = request
        .transactional_id
        .as_ref()
        .is_some_and(|id| !access.transactional_id(Operation::Write, id));
    let denied = take_denied(&mut request.topic_data, |topic| {
        !id_denied && access.topic(Operation::Write, &topic.name)
    });
    let error = if id_denied {
        KafkaError::TransactionalIdAuthorizationFailed.code()
    } else {
        TOPIC_DENIED
    };
    denied
        .into_iter()
        .map(|topic| {
            let mut answer = TopicProduceResponse::default();
            answer.name = topic.name;
            answer.partition_responses = topic
                .partition_data
                .iter()
                .map(|partition| {
                    let mut refused = PartitionProduceResponse::default();
                    refused.index = partition.index;
                    refused.error_code = error;
                    refused.base_offset = -1;
                    refused.log_append_time_ms = -1;
                    refused.log_start_offset = -1;
                    refused
                })
                .collect();
            answer
        })
        .collect()
}

/// Fetch: each topic the caller may not READ is refused (every topic, for a follower's fetch without
/// CLUSTER_ACTION). Returns the refused topics' answers.
pub fn fetch(access: &Access, request: &mut FetchRequest) -> Vec<FetchableTopicResponse> {
    let follower_denied = request.replica_id.0 >= 0 && !access.cluster(Operation::ClusterAction);
    let denied = take_denied(&mut request.topics, |topic| {
        !follower_denied && access.topic(Operation::Read, &topic.topic)
    });
    denied
        .into_iter()
        .map(|topic| {
            let mut answer = FetchableTopicResponse::default();
            answer.topic = topic.topic;
            answer.topic_id = topic.topic_id;
            answer.partitions = topic
                .partitions
                .iter()
                .map(|partition| {
                    let mut refused = PartitionData::default();
                    refused.partition_index = partition.partition;
                    refused.error_code = TOPIC_DENIED;
                    refused.high_watermark = -1;
                    refused.last_stable_offset = -1;
                    refused.log_start_offset = -1;
                    refused.records = Some(Bytes::new());
                    refused
                })
                .collect();
            answer
        })
        .collect()
}

/// ListOffsets: each topic the caller may not DESCRIBE is refused.
pub fn list_offsets(access: &Access, request: &mut ListOffsetsRequest) -> Vec<ListOffsetsTopicResponse> {
    take_denied(&mut request.topics, |topic| {
        access.topic(Operation::Describe, &topic.name)
    })
    .into_iter()
    .map(|topic| {
        let mut answer = ListOffsetsTopicResponse::default();
        answer.name = topic.name;
        answer.partitions = topic
            .partitions
            .iter()
            .map(|partition| {
                let mut refused = ListOffsetsPartitionResponse::default();
                refused.partition_index = partition.partition_index;
                refused.error_code = TOPIC_DENIED;
                refused.timestamp = -1;
                refused.offset = -1;
                refused.leader_epoch = -1;
                refused
            })
            .collect();
        answer
    })
    .collect()
}

/// Metadata, before the node answers: a named topic the caller may not DESCRIBE is refused, and so is a missing
/// one the request would auto-create (`auto_create`: the broker creates topics and the request lets it) when the
/// caller may not CREATE it (on the cluster or the topic), as Kafka refuses both (TOPIC_AUTHORIZATION_FAILED).
/// `existing` is the topics that exist. Returns the refused topics' answers.
pub fn metadata_request(
    access: &Access,
    request: &mut MetadataRequest,
    auto_create: bool,
    existing: &std::collections::BTreeMap<String, usize>,
) -> Vec<metadata_response::MetadataResponseTopic> {
    let Some(topics) = &mut request.topics else {
        return Vec::new();
    };
    let may_create_any = access.cluster(Operation::Create);
    take_denied(topics, |topic| {
        let Some(name) = &topic.name else {
            return true;
        };
        access.topic(Operation::Describe, name)
            && (!auto_create
                || existing.contains_key(name.as_str())
                || may_create_any
                || access.topic(Operation::Create, name))
    })
    .into_iter()
    .map(|topic| {
        let mut refused = metadata_response::MetadataResponseTopic::default();
        refused.name = topic.name;
        refused.error_code = TOPIC_DENIED;
        refused
    })
    .collect()
}

/// Metadata of every topic, after: the topics the caller may not DESCRIBE are left out.
pub fn metadata_response(access: &Access, response: &mut MetadataResponse) {
    response.topics.retain(|topic| {
        topic
            .name
            .as_ref()
            .is_none_or(|name| access.topic(Operation::Describe, name))
    });
}

/// Metadata asked by topic id (v12), after: a topic the caller may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED
/// under its id alone, without its name or partitions, as Kafka answers it (it deems ids not sensitive).
pub fn metadata_by_id_response(access: &Access, response: &mut MetadataResponse) {
    for topic in &mut response.topics {
        let denied = topic
            .name
            .as_ref()
            .is_some_and(|name| !access.topic(Operation::Describe, name));
        if denied {
            topic.name = None;
            topic.error_code = TOPIC_DENIED;
            topic.is_internal = false;
            topic.partitions = Vec::new();
            topic.topic_authorized_operations = i32::MIN;
        }
    }
}

/// DeleteRecords: each topic the caller may not DELETE from is refused.
pub fn delete_records(access: &Access, request: &mut DeleteRecordsRequest) -> Vec<DeleteRecordsTopicResult> {
    take_denied(&mut request.topics, |topic| {
        access.topic(Operation::Delete, &topic.name)
    })
    .into_iter()
    .map(|topic| {
        let mut answer = DeleteRecordsTopicResult::default();
        answer.name = topic.name;
        answer.partitions = topic
            .partitions
            .iter()
            .map(|partition| {
                let mut refused = DeleteRecordsPartitionResult::default();
                refused.partition_index = partition.partition_index;
                refused.low_watermark = -1;
                refused.error_code = TOPIC_DENIED;
                refused
            })
            .collect();
        answer
    })
    .collect()
}

/// DescribeProducers: each topic the caller may not READ is refused.
pub fn describe_producers(access: &Access, request: &mut DescribeProducersRequest) -> Vec<TopicResponse> {
    take_denied(&mut request.topics, |topic| {
        access.topic(Operation::Read, &topic.name)
    })
    .into_iter()
    .map(|topic| {
        let mut answer = TopicResponse::default();
        answer.name = topic.name;
        answer.partitions = topic
            .partition_indexes
            .iter()
            .map(|&index| {
                let mut refused = PartitionResponse::default();
                refused.partition_index = index;
                refused.error_code = TOPIC_DENIED;
                refused
            })
            .collect();
        answer
    })
    .collect()
}
