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
        committed: Committed {
            offset,
            metadata: metadata.map(|m| m.as_str().to_owned()),
        },
    }
}

fn set_all(topics: &mut [OffsetCommitResponseTopic], code: i16) {
    for partition in topics.iter_mut().flat_map(|topic| topic.partitions.iter_mut()) {
        if partition.error_code == NO_ERROR {
            partition.error_code = code;
        }
    }
}

/// OffsetFetch: the committed offset of each named partition (-1 when none), or of every partition the group
/// committed when the topic list is null.
pub async fn offset_fetch(node: &Node, request: OffsetFetchRequest, _version: i16) -> OffsetFetchResponse {
    let group = request.group_id.as_str();
    let offsets = node.offsets.lock().await;
    let answer = |partition_index: i32, committed: Option<&Committed>| {
        let mut partition = OffsetFetchResponsePartition::default();
        partition.partition_index = partition_index;
        partition.committed_offset = committed.map_or(-1, |c| c.offset);
        partition.committed_leader_epoch = -1;
        partition.metadata = Some(str_bytes(
            committed.and_then(|c| c.metadata.as_deref()).unwrap_or(""),
        ));
        partition
    };
    let mut response = OffsetFetchResponse::default();
    match request.topics {
        Some(topics) => {
            for topic in topics {
                let mut topic_answer = OffsetFetchResponseTopic::default();
                topic_answer.name = topic.name.clone();
                for index in topic.partition_indexes {
                    let name = topic.name.as_str();
                    if request.require_stable && offsets.pending(group, name, index) {
                        // v7 (KIP-447): a transaction's offsets are pending; the client retries.
                        let mut unstable = answer(index, None);
                        unstable.error_code = KafkaError::UnstableOffsetCommit.code();
                        topic_answer.partitions.push(unstable);
                        continue;
                    }
                    topic_answer
                        .partitions
                        .push(answer(index, offsets.committed(group, name, index)));
                }
                response.topics.push(topic_answer);
            }
        }
        None => {
            for (topic, index, committed) in offsets.group(group) {
                if response
                    .topics
                    .last()
                    .is_none_or(|last| last.name.as_str() != topic)
                {
                    let mut topic_answer = OffsetFetchResponseTopic::default();
                    topic_answer.name = TopicName(str_bytes(topic));
                    response.topics.push(topic_answer);
                }
                if let Some(last) = response.topics.last_mut() {
                    last.partitions.push(answer(index, Some(committed)));
                }
            }
        }
    }
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
