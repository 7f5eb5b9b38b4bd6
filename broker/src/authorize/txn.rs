//! Transactions' and producers' checks: a transactional id is used with WRITE on it (InitProducerId,
//! AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit) and seen with DESCRIBE (DescribeTransactions,
//! ListTransactions); an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic; the
//! partitions added to a transaction need WRITE, the group of its offsets READ; WriteTxnMarkers is a broker's
//! action (CLUSTER_ACTION on the cluster).

use kafka_auth::acl::{Operation, ResourceType};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_transactions_response::TransactionState;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::*;
use kafka_types::KafkaError;

use super::{take_denied, Access};

const ID_DENIED: i16 = KafkaError::TransactionalIdAuthorizationFailed.code();

/// InitProducerId refused: without WRITE on its transactional id, or (idempotent, no id) without
/// IDEMPOTENT_WRITE on the cluster nor WRITE on any topic.
pub fn init_producer_id(access: &Access, request: &InitProducerIdRequest) -> Option<InitProducerIdResponse> {
    let error = match request.transactional_id.as_ref().filter(|id| !id.is_empty()) {
        Some(id) => (!access.transactional_id(Operation::Write, id)).then_some(ID_DENIED),
        None => (!access.cluster(Operation::IdempotentWrite)
            && !access.allows_some(Operation::Write, ResourceType::Topic))
        .then_some(KafkaError::ClusterAuthorizationFailed.code()),
    };
    error.map(|error| {
        let mut response = InitProducerIdResponse::default();
        response.error_code = error;
        response.producer_id = (-1).into();
        response.producer_epoch = -1;
        response
    })
}

/// AddPartitionsToTxn (v0–v2) refused whole: every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED without WRITE
/// on the id; otherwise, if any topic may not be written, those partitions TOPIC_AUTHORIZATION_FAILED and the
/// others OPERATION_NOT_ATTEMPTED (nothing is added).
pub fn add_partitions_to_txn(
    access: &Access,
    request: &AddPartitionsToTxnRequest,
) -> Option<AddPartitionsToTxnResponse> {
    let id_denied = !access.transactional_id(Operation::Write, &request.v3_and_below_transactional_id);
    let topic_denied = |name: &str| !access.topic(Operation::Write, name);
    if !id_denied
        && !request
            .v3_and_below_topics
            .iter()
            .any(|topic| topic_denied(&topic.name))
    {
        return None;
    }
    let mut response = AddPartitionsToTxnResponse::default();
    response.results_by_topic_v3_and_below = request
        .v3_and_below_topics
        .iter()
        .map(|topic| {
            let error = if id_denied {
                ID_DENIED
            } else if topic_denied(&topic.name) {
                KafkaError::TopicAuthorizationFailed.code()
            } else {
                KafkaError::OperationNotAttempted.code()
            };
            let mut answer = AddPartitionsToTxnTopicResult::default();
            answer.name = topic.name.clone();
            answer.results_by_partition = topic
                .partitions
                .iter()
                .map(|&index| {
                    let mut result = AddPartitionsToTxnPartitionResult::default();
                    result.partition_index = index;
                    result.partition_error_code = error;
                    result
                })
                .collect();
            answer
        })
        .collect();
    Some(response)
}

/// AddOffsetsToTxn refused without WRITE on the id or READ on the group.
pub fn add_offsets_to_txn(
    access: &Access,
    request: &AddOffsetsToTxnRequest,
) -> Option<AddOffsetsToTxnResponse> {
    let error = if !access.transactional_id(Operation::Write, &request.transactional_id) {
        ID_DENIED
    } else if !access.group(Operation::Read, &request.group_id) {
        KafkaError::GroupAuthorizationFailed.code()
    } else {
        return None;
    };
    let mut response = AddOffsetsToTxnResponse::default();
    response.error_code = error;
    Some(response)
}

/// EndTxn refused without WRITE on the id.
pub fn end_txn(access: &Access, request: &EndTxnRequest) -> Option<EndTxnResponse> {
    (!access.transactional_id(Operation::Write, &request.transactional_id)).then(|| {
        let mut response = EndTxnResponse::default();
        response.error_code = ID_DENIED;
        response.producer_id = (-1).into();
        response.producer_epoch = -1;
        response
    })
}

/// TxnOffsetCommit: every partition refused without WRITE on the id or READ on the group; each topic the caller
/// may not READ refused.
pub fn txn_offset_commit(
    access: &Access,
    request: &mut TxnOffsetCommitRequest,
) -> Vec<TxnOffsetCommitResponseTopic> {
    let whole = if !access.transactional_id(Operation::Write, &request.transactional_id) {
        Some(ID_DENIED)
    } else if !access.group(Operation::Read, &request.group_id) {
        Some(KafkaError::GroupAuthorizationFailed.code())
    } else {
        None
    };
    take_denied(&mut request.topics, |topic| {
        whole.is_none() && access.topic(Operation::Read, &topic.name)
    })
    .into_iter()
    .map(|topic| {
        let error = whole.unwrap_or(KafkaError::TopicAuthorizationFailed.code());
        let mut answer = TxnOffsetCommitResponseTopic::default();
        answer.name = topic.name;
        answer.partitions = topic
            .partitions
            .iter()
            .map(|partition| {
                let mut refused = TxnOffsetCommitResponsePartition::default();
                refused.partition_index = partition.partition_index;
                refused.error_code = error;
                refused
            })
            .collect();
        answer
    })
    .collect()
}

/// DescribeTransactions: each id the caller may not DESCRIBE is refused.
pub fn describe_transactions(
    access: &Access,
    request: &mut DescribeTransactionsRequest,
) -> Vec<TransactionState> {
    take_denied(&mut request.transactional_ids, |id| {
        access.transactional_id(Operation::Describe, id)
    })
    .into_iter()
    .map(|id| {
        let mut refused = TransactionState::default();
        refused.transactional_id = id;
        refused.error_code = ID_DENIED;
        refused
    })
    .collect()
}

/// DescribeTransactions, after: a transaction's partitions of topics the caller may not DESCRIBE are left out.
pub fn describe_transactions_response(access: &Access, response: &mut DescribeTransactionsResponse) {
    for state in &mut response.transaction_states {
        state
            .topics
            .retain(|topic| access.topic(Operation::Describe, &topic.topic));
    }
}

/// ListTransactions, after: only the ids the caller may DESCRIBE.
pub fn list_transactions_response(access: &Access, response: &mut ListTransactionsResponse) {
    response
        .transaction_states
        .retain(|state| access.transactional_id(Operation::Describe, &state.transactional_id));
}

/// WriteTxnMarkers refused whole (every partition CLUSTER_AUTHORIZATION_FAILED) without CLUSTER_ACTION.
pub fn write_txn_markers(
    access: &Access,
    request: &WriteTxnMarkersRequest,
) -> Option<WriteTxnMarkersResponse> {
    if access.cluster(Operation::ClusterAction) {
        return None;
    }
    let mut response = WriteTxnMarkersResponse::default();
    response.markers = request
        .markers
        .iter()
        .map(|marker| {
            let mut result = WritableTxnMarkerResult::default();
            result.producer_id = marker.producer_id;
            result.topics = marker
                .topics
                .iter()
                .map(|topic| {
                    let mut answer = WritableTxnMarkerTopicResult::default();
                    answer.name = topic.name.clone();
                    answer.partitions = topic
                        .partition_indexes
                        .iter()
                        .map(|&index| {
                            let mut refused = WritableTxnMarkerPartitionResult::default();
                            refused.partition_index = index;
                            refused.error_code = KafkaError::ClusterAuthorizationFailed.code();
                            refused
                        })
                        .collect();
                    answer
                })
                .collect();
            result
        })
        .collect();
    Some(response)
}
