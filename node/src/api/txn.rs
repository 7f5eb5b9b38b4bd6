//! InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn through the transaction coordinator.
//!
//! Every outcome's records are durable before its answer goes out; markers are written (COORDINATOR origin,
//! each partition's high watermark moved past its marker) **before EndTxn is answered**. Kafka answers EndTxn
//! once PrepareCommit/PrepareAbort is durable and writes the markers afterwards; answering after the markers
//! means a read_committed consumer sees a transaction as soon as its producer's commit returns. Clients speak
//! EndTxn v0–2, so transactions follow transaction version 1 (no epoch bump per transaction).

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::*;
use kafka_types::{KafkaError, ProducerEpoch, ProducerId, TransactionalId, NO_ERROR};
use storage::PartitionId;

use crate::node::Node;

fn transactional_id(id: &kafka_protocol::messages::TransactionalId) -> TransactionalId {
    TransactionalId(id.as_str().to_owned())
}

fn code(result: Result<(), KafkaError>) -> i16 {
    result.err().map_or(NO_ERROR, KafkaError::code)
}

/// The error as a request of `version` can carry it: PRODUCER_FENCED exists from `fenced_since` on (KIP-588:
/// InitProducerId v4, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v2); older clients hear
/// INVALID_PRODUCER_EPOCH, which they handle as fencing too — what Kafka answers them.
fn for_version(error: KafkaError, version: i16, fenced_since: i16) -> KafkaError {
    if error == KafkaError::ProducerFenced && version < fenced_since {
        KafkaError::InvalidProducerEpoch
    } else {
        error
    }
}

/// InitProducerId: a new idempotent producer id, or a transactional id's producer id and bumped epoch (fencing
/// and aborting an open transaction; KIP-360 bumps from v3 when the client names its current id and epoch).
pub async fn init_producer_id(
    node: &Node,
    request: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    response.producer_id = kafka_protocol::messages::ProducerId(-1);
    response.producer_epoch = -1;
    let id = request.transactional_id.as_ref().map(transactional_id);
    let expected = (version >= 3 && request.producer_id.0 >= 0).then_some((
        ProducerId(request.producer_id.0),
        ProducerEpoch(request.producer_epoch),
    ));
    let mut coordinator = node.coordinator.lock().await;
    let outcome = coordinator.coordinator().init_producer_id(
        id.as_ref(),
        i64::from(request.transaction_timeout_ms),
        expected,
        node.now_ms(),
    );
    match node.coordinate(&mut coordinator, outcome).await {
        Ok((producer_id, epoch)) => {
            response.producer_id = kafka_protocol::messages::ProducerId(producer_id.get());
            response.producer_epoch = epoch.get();
        }
        Err(error) => response.error_code = for_version(error, version, 4).code(),
    }
    response
}

/// AddPartitionsToTxn (v0–3 form: one transactional id): unknown partitions fail the whole request with
/// UNKNOWN_TOPIC_OR_PARTITION on them and OPERATION_NOT_ATTEMPTED on the others, as Kafka does.
pub async fn add_partitions(
    node: &Node,
    request: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let mut partitions = Vec::new();
    let mut unknown = Vec::new();
    for topic in &request.v3_and_below_topics {
        for &index in &topic.partitions {
            let known = node.partition(topic.name.as_str(), index).await.is_some();
            let id = u32::try_from(index)
                .ok()
                .and_then(|index| PartitionId::new(topic.name.as_str(), index).ok());
            match id {
                Some(id) if known => partitions.push(id),
                _ => unknown.push((topic.name.clone(), index)),
            }
        }
    }
    let result = if unknown.is_empty() {
        let mut coordinator = node.coordinator.lock().await;
        let outcome = coordinator.coordinator().add_partitions(
            &transactional_id(&request.v3_and_below_transactional_id),
            ProducerId(request.v3_and_below_producer_id.0),
            ProducerEpoch(request.v3_and_below_producer_epoch),
            &partitions,
            node.now_ms(),
        );
        node.coordinate(&mut coordinator, outcome)
            .await
            .map_err(|error| for_version(error, version, 2))
    } else {
        Ok(())
    };
    let mut response = AddPartitionsToTxnResponse::default();
    for topic in &request.v3_and_below_topics {
        let mut topic_result = AddPartitionsToTxnTopicResult::default();
        topic_result.name = topic.name.clone();
        for &index in &topic.partitions {
            let mut partition = AddPartitionsToTxnPartitionResult::default();
            partition.partition_index = index;
            partition.partition_error_code =
                if unknown.iter().any(|(name, i)| name == &topic.name && *i == index) {
                    KafkaError::UnknownTopicOrPartition.code()
                } else if !unknown.is_empty() {
                    KafkaError::OperationNotAttempted.code()
                } else {
                    code(result)
                };
            topic_result.results_by_partition.push(partition);
        }
        response.results_by_topic_v3_and_below.push(topic_result);
    }
    response
}

/// AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction.
pub async fn add_offsets(
    node: &Node,
    request: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let mut coordinator = node.coordinator.lock().await;
    let outcome = coordinator.coordinator().add_offsets(
        &transactional_id(&request.transactional_id),
        ProducerId(request.producer_id.0),
        ProducerEpoch(request.producer_epoch),
        request.group_id.as_str(),
        node.now_ms(),
    );
    let mut response = AddOffsetsToTxnResponse::default();
    let result = node.coordinate(&mut coordinator, outcome).await;
    response.error_code = code(result.map_err(|error| for_version(error, version, 2)));
    response
}

/// EndTxn: commit or abort; answered once every marker is written.
pub async fn end_txn(node: &Node, request: EndTxnRequest, version: i16) -> EndTxnResponse {
    let mut coordinator = node.coordinator.lock().await;
    let outcome = coordinator.coordinator().end_txn(
        &transactional_id(&request.transactional_id),
        ProducerId(request.producer_id.0),
        ProducerEpoch(request.producer_epoch),
        request.committed,
        crate::config::TRANSACTION_VERSION,
        node.now_ms(),
    );
    let mut response = EndTxnResponse::default();
    if let Err(error) = node.coordinate(&mut coordinator, outcome).await {
        response.error_code = for_version(error, version, 2).code();
    }
    response
}
