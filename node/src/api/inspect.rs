//! DescribeProducers, ListTransactions and DescribeTransactions: what `kafka-transactions` shows an operator — a
//! partition's producer state (where a failover's `MIRROR_PID_RESET` barrier shows: the mirrored producers are
//! gone after it) and the transaction coordinator's transactional ids. They read state; they change nothing.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::*;
use kafka_types::{KafkaError, TransactionalId as KafkaTransactionalId};
use txn_coordinator::{TxnMetadata, TxnState};

use super::str_bytes;
use crate::node::Node;

/// DescribeProducers: each partition's active producers as its producer-state manager holds them.
pub async fn describe_producers(
    node: &Node,
    request: DescribeProducersRequest,
    _version: i16,
) -> DescribeProducersResponse {
    let mut response = DescribeProducersResponse::default();
    for topic in request.topics {
        let mut answer = TopicResponse::default();
        answer.name = topic.name.clone();
        for index in topic.partition_indexes {
            let mut partition = PartitionResponse::default();
            partition.partition_index = index;
            partition.error_message = None;
            match node.partition(topic.name.as_str(), index).await {
                None => partition.error_code = KafkaError::UnknownTopicOrPartition.code(),
                Some(slot) => {
                    let guard = slot.lock().await;
                    match guard.as_ref() {
                        None => {
                            drop(guard);
                            partition.error_code = node
                                .missing_log_error(topic.name.as_str(), index, &slot)
                                .await
                                .code();
                        }
                        Some(replicas) => {
                            partition.active_producers = replicas
                                .leader
                                .producer_state()
                                .producers()
                                .map(|entry| {
                                    let mut state = ProducerState::default();
                                    state.producer_id = ProducerId(entry.producer_id);
                                    state.producer_epoch = i32::from(entry.producer_epoch);
                                    state.last_sequence =
                                        entry.batches.back().map_or(-1, |batch| batch.last_seq);
                                    state.last_timestamp = entry.last_timestamp;
                                    state.coordinator_epoch = entry.coordinator_epoch;
                                    state.current_txn_start_offset =
                                        entry.current_txn_first_offset.unwrap_or(-1);
                                    state
                                })
                                .collect();
                        }
                    }
                }
            }
            answer.partitions.push(partition);
        }
        response.topics.push(answer);
    }
    response
}

/// Kafka's name of a transaction state (`TransactionState.name`), as ListTransactions and DescribeTransactions
/// answer it and filter by it.
fn state_name(state: TxnState) -> &'static str {
    match state {
        TxnState::Empty => "Empty",
        TxnState::Ongoing => "Ongoing",
        TxnState::PrepareCommit => "PrepareCommit",
        TxnState::PrepareAbort => "PrepareAbort",
        TxnState::CompleteCommit => "CompleteCommit",
        TxnState::CompleteAbort => "CompleteAbort",
        TxnState::Dead => "Dead",
        TxnState::PrepareEpochFence => "PrepareEpochFence",
    }
}

/// ListTransactions: the transactional ids the coordinator holds, filtered by state, producer id, (v1) how long
/// their transaction has been open and (v2, KIP-1152) a regular expression the whole id matches (RE2 syntax, as
/// Kafka's RE2/J; one that does not compile is answered INVALID_REGULAR_EXPRESSION and nothing else).
pub async fn list_transactions(
    node: &Node,
    request: ListTransactionsRequest,
    version: i16,
) -> ListTransactionsResponse {
    let mut response = ListTransactionsResponse::default();
    let known: Vec<&str> = TxnState::ALL.into_iter().map(state_name).collect();
    response.unknown_state_filters = request
        .state_filters
        .iter()
        .filter(|filter| !known.contains(&filter.as_str()))
        .cloned()
        .collect();
    let states: Vec<&str> = request
        .state_filters
        .iter()
        .map(|filter| filter.as_str())
        .collect();
    let producers: Vec<i64> = request.producer_id_filters.iter().map(|id| id.0).collect();
    let duration = if version >= 1 { request.duration_filter } else { -1 };
    let pattern = match request.transactional_id_pattern.as_ref() {
        Some(pattern) if version >= 2 && !pattern.is_empty() => {
            match crate::mirror::filters::whole_name(pattern.as_str()) {
                Ok(pattern) => Some(pattern),
                Err(_) => {
                    let mut refused = ListTransactionsResponse::default();
                    refused.error_code = KafkaError::InvalidRegularExpression.code();
                    return refused;
                }
            }
        }
        _ => None,
    };
    let now = node.now_ms();
    let mut coordinator = node.coordinator.lock().await;
    response.transaction_states = coordinator
        .coordinator()
        .transactions()
        .filter(|txn| txn.state != TxnState::Dead)
        .filter(|txn| states.is_empty() || states.contains(&state_name(txn.state)))
        .filter(|txn| producers.is_empty() || producers.contains(&txn.producer_id.0))
        .filter(|txn| duration < 0 || running_longer_than(txn, now, duration))
        .filter(|txn| {
            pattern
                .as_ref()
                .is_none_or(|pattern| pattern.is_match(&txn.transactional_id.0))
        })
        .map(|txn| {
            let mut state = list_transactions_response::TransactionState::default();
            state.transactional_id = TransactionalId(str_bytes(&txn.transactional_id.0));
            state.producer_id = ProducerId(txn.producer_id.0);
            state.transaction_state = str_bytes(state_name(txn.state));
            state
        })
        .collect();
    response
}

/// Whether `txn`'s last transaction started more than `duration_ms` before `now`. As Kafka compares, an id that
/// never began one counts from −1 (so it is listed).
fn running_longer_than(txn: &TxnMetadata, now: i64, duration_ms: i64) -> bool {
    now.saturating_sub(txn.txn_start_ms.unwrap_or(-1)) > duration_ms
}

/// DescribeTransactions: each named transactional id's state, timeout, open transaction and its partitions.
pub async fn describe_transactions(
    node: &Node,
    request: DescribeTransactionsRequest,
    _version: i16,
) -> DescribeTransactionsResponse {
    let mut response = DescribeTransactionsResponse::default();
    let mut coordinator = node.coordinator.lock().await;
    let coordinator = coordinator.coordinator();
    for id in request.transactional_ids {
        let mut state = describe_transactions_response::TransactionState::default();
        state.transactional_id = id.clone();
        let found = coordinator
            .transaction(&KafkaTransactionalId(id.as_str().to_owned()))
            .filter(|txn| txn.state != TxnState::Dead);
        match found {
            // Kafka leaves every other field at its zero default.
            None => state.error_code = KafkaError::TransactionalIdNotFound.code(),
            Some(txn) => {
                state.transaction_state = str_bytes(state_name(txn.state));
                state.transaction_timeout_ms = i32::try_from(txn.timeout_ms).unwrap_or(i32::MAX);
                state.transaction_start_time_ms = txn.txn_start_ms.unwrap_or(-1);
                state.producer_id = ProducerId(txn.producer_id.0);
                state.producer_epoch = txn.epoch.map_or(-1, |epoch| epoch.0);
                let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
                for partition in &txn.partitions {
                    let index = i32::try_from(partition.partition()).unwrap_or(i32::MAX);
                    topics.entry(partition.topic()).or_default().push(index);
                }
                state.topics = topics
                    .into_iter()
                    .map(|(topic, partitions)| {
                        let mut data = describe_transactions_response::TopicData::default();
                        data.topic = TopicName(str_bytes(topic));
                        data.partitions = partitions;
                        data
                    })
                    .collect();
            }
        }
        response.transaction_states.push(state);
    }
    response
}

/// What the metrics show of the node's consumer groups, transactions and producers, read at each scrape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeGauges {
    /// Consumer groups by Kafka's state name (a group known only by its committed offsets is `Empty`), as
    /// ListGroups lists them.
    pub groups_by_state: BTreeMap<&'static str, usize>,
    /// Transactional ids by Kafka's state name (`Ongoing`: a transaction open), as ListTransactions lists them.
    pub transactions_by_state: BTreeMap<&'static str, usize>,
    /// Producer ids the partitions' producer-state managers hold (a producer writing to three partitions counts
    /// three, as Kafka's per-partition `ProducerIdCount` adds up).
    pub producer_ids: usize,
}

impl Node {
    /// Counts the node's groups, transactional ids and producer ids ([`NodeGauges`]); each partition is locked in
    /// turn, never two at once.
    pub async fn gauges(&self) -> NodeGauges {
        let mut gauges = NodeGauges::default();
        let offsets_only: Vec<String> = {
            let offsets = self.offsets.lock().await;
            offsets.groups().into_iter().map(str::to_owned).collect()
        };
        for (_, _, state) in self.membership.list() {
            *gauges.groups_by_state.entry(state.name()).or_default() += 1;
        }
        for group in offsets_only {
            if self.membership.protocol_of(&group).is_none() {
                *gauges
                    .groups_by_state
                    .entry(crate::membership::GroupState::Empty.name())
                    .or_default() += 1;
            }
        }
        {
            let mut coordinator = self.coordinator.lock().await;
            for txn in coordinator.coordinator().transactions() {
                if txn.state != TxnState::Dead {
                    *gauges
                        .transactions_by_state
                        .entry(state_name(txn.state))
                        .or_default() += 1;
                }
            }
        }
        let slots: Vec<std::sync::Arc<crate::PartitionSlot>> = {
            let topics = self.topics.read().await;
            topics.values().flatten().cloned().collect()
        };
        for slot in slots {
            let guard = slot.lock().await;
            if let Some(replicas) = guard.as_ref() {
                gauges.producer_ids += replicas.leader.producer_state().producers().count();
            }
        }
        gauges
    }
}
