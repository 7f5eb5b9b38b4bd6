//! OffsetCommit, OffsetFetch and TxnOffsetCommit over the group offset store ([`crate::offsets`]). An
//! OffsetCommit to a group with members must come from a current member at the group's generation
//! ([`crate::membership`]); a group without members takes commits from anyone (consumers that `assign()`).

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_types::{KafkaError, TransactionalId, NO_ERROR};
use txn_coordinator::TxnState;

use super::str_bytes;
use crate::node::Node;
use crate::offsets::{Committed, OffsetEntry};

/// OffsetCommit: every partition of a known topic is committed in one durable write.
pub async fn offset_commit(node: &Node, request: OffsetCommitRequest, _version: i16) -> OffsetCommitResponse {
    let group = request.group_id.as_str().to_owned();
    let mut entries = Vec::new();
    let mut topics = Vec::new();
    for topic in &request.topics {
        let mut answer = OffsetCommitResponseTopic::default();
        answer.name = topic.name.clone();
        for partition in &topic.partitions {
            let mut result = OffsetCommitResponsePartition::default();
            result.partition_index = partition.partition_index;
            if node
                .partition(topic.name.as_str(), partition.partition_index)
                .await
                .is_none()
            {
                result.error_code = KafkaError::UnknownTopicOrPartition.code();
            } else {
                entries.push(entry(
                    &group,
                    &topic.name,
                    partition.partition_index,
                    partition.committed_offset,
                    partition.committed_metadata.as_ref(),
                ));
            }
            answer.partitions.push(result);
        }
        topics.push(answer);
    }
    let refused = node.membership.check_commit(
        &group,
        request.generation_id_or_member_epoch,
        request.member_id.as_str(),
    );
    if group.is_empty() {
        set_all(&mut topics, KafkaError::InvalidRequest.code());
    } else if let Some(error) = refused {
        set_all(&mut topics, error.code());
    } else if node.offsets.lock().await.commit(entries).await.is_err() {
        set_all(&mut topics, KafkaError::KafkaStorageError.code());
    }
    let mut response = OffsetCommitResponse::default();
    response.topics = topics;
    response
}

/// One offset to store.
fn entry(
    group: &str,
    topic: &TopicName,
    partition: i32,
    offset: i64,
    metadata: Option<&kafka_protocol::protocol::StrBytes>,
) -> OffsetEntry {
    OffsetEntry {
        group: group.to_owned(),
        topic: topic.as_str().to_owned(),
        partition,
        committed: Committed::new(offset, metadata.map(|m| m.as_str().to_owned())),
    }
}

fn set_all(topics: &mut [OffsetCommitResponseTopic], code: i16) {
    for partition in topics.iter_mut().flat_map(|topic| topic.partitions.iter_mut()) {
        if partition.error_code == NO_ERROR {
            partition.error_code = code;
        }
    }
}

/// One partition of an OffsetFetch answer: its index, its committed offset (if any) and an error.
type FetchedPartition = (i32, Option<Committed>, i16);

/// The committed offsets of `group`: of the partitions `topics` names, or every committed one when `None`.
/// With `require_stable` (v7+, KIP-447), a partition whose offsets a transaction staged and has not ended is
/// answered UNSTABLE_OFFSET_COMMIT; the client retries.
fn fetch_group(
    offsets: &crate::offsets::GroupOffsets,
    group: &str,
    topics: Option<Vec<(TopicName, Vec<i32>)>>,
    require_stable: bool,
) -> Vec<(TopicName, Vec<FetchedPartition>)> {
    match topics {
        Some(topics) => topics
            .into_iter()
            .map(|(name, indexes)| {
                let partitions = indexes
                    .into_iter()
                    .map(|index| {
                        if require_stable && offsets.pending(group, name.as_str(), index) {
                            (index, None, KafkaError::UnstableOffsetCommit.code())
                        } else {
                            (
                                index,
                                offsets.committed(group, name.as_str(), index).cloned(),
                                NO_ERROR,
                            )
                        }
                    })
                    .collect();
                (name, partitions)
            })
            .collect(),
        None => {
            let mut answer: Vec<(TopicName, Vec<FetchedPartition>)> = Vec::new();
            for (topic, index, committed) in offsets.group(group) {
                if answer.last().is_none_or(|(last, _)| last.as_str() != topic) {
                    answer.push((TopicName(str_bytes(topic)), Vec::new()));
                }
                if let Some((_, partitions)) = answer.last_mut() {
                    partitions.push((index, Some(committed.clone()), NO_ERROR));
                }
            }
            answer
        }
    }
}

/// A partition's committed offset as OffsetFetch answers it (-1 and empty metadata for none).
fn committed_fields(committed: Option<&Committed>) -> (i64, Option<kafka_protocol::protocol::StrBytes>) {
    (
        committed.map_or(-1, |c| c.offset),
        Some(str_bytes(
            committed.and_then(|c| c.metadata.as_deref()).unwrap_or(""),
        )),
    )
}

/// An OffsetFetch answer's topics from [`fetch_group`]'s, for either response type (v1–7's and v8's batched
/// form, which have the same fields under different names).
macro_rules! answered_topics {
    ($fetched:expr, $topic:ty, $partition:ty) => {
        $fetched
            .into_iter()
            .map(|(name, partitions)| {
                let mut topic = <$topic>::default();
                topic.name = name;
                topic.partitions = partitions
                    .into_iter()
                    .map(|(index, committed, error_code): FetchedPartition| {
                        let mut partition = <$partition>::default();
                        partition.partition_index = index;
                        (partition.committed_offset, partition.metadata) =
                            committed_fields(committed.as_ref());
                        partition.committed_leader_epoch = -1;
                        partition.error_code = error_code;
                        partition
                    })
                    .collect();
                topic
            })
            .collect()
    };
}

/// OffsetFetch: the committed offset of each named partition (-1 when none), or of every partition the group
/// committed when the topic list is null; one group (v1–7) or several (v8+, KIP-709).
pub async fn offset_fetch(node: &Node, request: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    let offsets = node.offsets.lock().await;
    let mut response = OffsetFetchResponse::default();
    if version >= 8 {
        for group in request.groups {
            let topics = group.topics.map(|topics| {
                topics
                    .into_iter()
                    .map(|topic| (topic.name, topic.partition_indexes))
                    .collect()
            });
            let fetched = fetch_group(&offsets, group.group_id.as_str(), topics, request.require_stable);
            let mut answer = offset_fetch_response::OffsetFetchResponseGroup::default();
            answer.topics = answered_topics!(
                fetched,
                offset_fetch_response::OffsetFetchResponseTopics,
                offset_fetch_response::OffsetFetchResponsePartitions
            );
            answer.group_id = group.group_id;
            response.groups.push(answer);
        }
        return response;
    }
    let topics = request.topics.map(|topics| {
        topics
            .into_iter()
            .map(|topic| (topic.name, topic.partition_indexes))
            .collect()
    });
    let fetched = fetch_group(
        &offsets,
        request.group_id.as_str(),
        topics,
        request.require_stable,
    );
    response.topics = answered_topics!(fetched, OffsetFetchResponseTopic, OffsetFetchResponsePartition);
    response
}

/// TxnOffsetCommit: staged until the transaction's marker reaches the group's offsets partition. The producer
/// must hold the transactional id at its current epoch with the group's partition in the open transaction.
pub async fn txn_offset_commit(
    node: &Node,
    request: TxnOffsetCommitRequest,
    _version: i16,
) -> TxnOffsetCommitResponse {
    let group = request.group_id.as_str().to_owned();
    let member = node.membership.check_txn_commit(
        &group,
        request.generation_id,
        request.member_id.as_str(),
        request.group_instance_id.as_ref().map(|id| id.as_str()),
    );
    let check = if let Some(refused) = member {
        Err(refused.code())
    } else {
        let mut coordinator = node.coordinator.lock().await;
        let id = TransactionalId(request.transactional_id.as_str().to_owned());
        match coordinator.coordinator().transaction(&id) {
            None => Err(KafkaError::InvalidProducerIdMapping.code()),
            Some(txn) if txn.producer_id.get() != request.producer_id.0 => {
                Err(KafkaError::InvalidProducerIdMapping.code())
            }
            Some(txn) if txn.epoch.map(|e| e.get()) != Some(request.producer_epoch) => {
                Err(KafkaError::InvalidProducerEpoch.code())
            }
            Some(txn) => {
                let joined = txn_coordinator::offsets_partition_for(&group)
                    .is_some_and(|partition| txn.partitions.contains(&partition));
                if txn.state == TxnState::Ongoing && joined {
                    Ok(())
                } else {
                    Err(KafkaError::InvalidTxnState.code())
                }
            }
        }
    };
    let mut entries = Vec::new();
    let mut response = TxnOffsetCommitResponse::default();
    for topic in &request.topics {
        let mut answer = TxnOffsetCommitResponseTopic::default();
        answer.name = topic.name.clone();
        for partition in &topic.partitions {
            let mut result = TxnOffsetCommitResponsePartition::default();
            result.partition_index = partition.partition_index;
            result.error_code = check.err().unwrap_or(NO_ERROR);
            if check.is_ok() {
                entries.push(entry(
                    &group,
                    &topic.name,
                    partition.partition_index,
                    partition.committed_offset,
                    partition.committed_metadata.as_ref(),
                ));
            }
            answer.partitions.push(result);
        }
        response.topics.push(answer);
    }
    if check.is_ok()
        && node
            .offsets
            .lock()
            .await
            .stage(request.producer_id.0, entries)
            .await
            .is_err()
    {
        for partition in response.topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
            partition.error_code = KafkaError::KafkaStorageError.code();
        }
    }
    response
}
