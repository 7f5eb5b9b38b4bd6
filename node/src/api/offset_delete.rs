//! OffsetDelete: a group's committed offsets on some partitions forgotten — `kafka-consumer-groups
//! --delete-offsets`. As Kafka's group coordinator decides: an unknown group is GROUP_ID_NOT_FOUND; a group with
//! members of a protocol other than `consumer` is NON_EMPTY_GROUP; a partition that does not exist is
//! UNKNOWN_TOPIC_OR_PARTITION; a consumer group's partitions of topics its members subscribe to are
//! GROUP_SUBSCRIBED_TO_TOPIC, the others are deleted.

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_types::{KafkaError, NO_ERROR};

use crate::node::Node;

/// OffsetDelete.
pub async fn offset_delete(node: &Node, request: OffsetDeleteRequest, _version: i16) -> OffsetDeleteResponse {
    let mut response = OffsetDeleteResponse::default();
    let group = request.group_id.as_str();
    let subscribed = node.membership.subscribed_topics(group);
    // Partitions that do not exist are UNKNOWN_TOPIC_OR_PARTITION, before anything else (as Kafka answers); looked
    // up before the offset store is locked.
    let mut missing: Vec<Vec<i32>> = Vec::new();
    for topic in &request.topics {
        let mut unknown = Vec::new();
        for partition in &topic.partitions {
            if node
                .partition(topic.name.as_str(), partition.partition_index)
                .await
                .is_none()
            {
                unknown.push(partition.partition_index);
            }
        }
        missing.push(unknown);
    }
    let mut offsets = node.offsets.lock().await;
    if subscribed.is_none() && !offsets.has_group(group) && !offsets.stored_groups().contains_key(group) {
        response.error_code = KafkaError::GroupIdNotFound.code();
        return response;
    }
    if subscribed.is_some()
        && node
            .membership
            .protocol_of(group)
            .is_some_and(|(kind, _)| kind.as_deref() != Some("consumer"))
    {
        response.error_code = KafkaError::NonEmptyGroup.code();
        return response;
    }
    for (topic, unknown) in request.topics.into_iter().zip(missing) {
        let name = topic.name.as_str();
        // Unknown subscriptions (Some(None)) count as subscribed to everything: nothing a member reads is lost.
        let held = subscribed
            .as_ref()
            .is_some_and(|topics| topics.as_ref().is_none_or(|topics| topics.contains(name)));
        let indexes: Vec<i32> = topic
            .partitions
            .iter()
            .map(|p| p.partition_index)
            .filter(|index| !unknown.contains(index))
            .collect();
        let error = if held {
            KafkaError::GroupSubscribedToTopic.code()
        } else if indexes.is_empty() {
            NO_ERROR
        } else {
            match offsets.delete_offsets(Some(group), name, Some(indexes)).await {
                Ok(()) => NO_ERROR,
                Err(error) => {
                    tracing::error!(group, topic = %name, %error, "deleting a group's committed offsets failed");
                    KafkaError::KafkaStorageError.code()
                }
            }
        };
        let mut answer = OffsetDeleteResponseTopic::default();
        answer.name = topic.name;
        answer.partitions = topic
            .partitions
            .iter()
            .map(|asked| {
                let mut partition = OffsetDeleteResponsePartition::default();
                partition.partition_index = asked.partition_index;
                partition.error_code = if unknown.contains(&asked.partition_index) {
                    KafkaError::UnknownTopicOrPartition.code()
                } else {
                    error
                };
                partition
            })
            .collect();
        response.topics.push(answer);
    }
    response
}
