//! Every advertised (API, version) pair answered and encoded: for each pair, a fresh in-process broker serves a
//! scenario that reaches the API's success and error answers (unknown topics and partitions, invalid arguments,
//! a corrupt batch, duplicates, out-of-order sequences, fencing, read_committed), and every response must encode
//! at the request's version and decode again as a client would read it.
//!
//! `kafka-protocol`'s encoder refuses a response that sets a field the version does not have; a broker that sets
//! one closes the client's connection instead of answering (aiokafka's ListOffsets v1–v3 did, on `leader_epoch`).
//! Fencing errors follow the request version as Kafka maps them: PRODUCER_FENCED exists from InitProducerId v4,
//! AddPartitionsToTxn v2, AddOffsetsToTxn v2 and EndTxn v2; older versions hear INVALID_PRODUCER_EPOCH.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use common::call;

use broker::Node;
use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use record_format::BatchBuilder;

const TOPIC: &str = "orders";
const PRODUCER_FENCED: i16 = 90;
const INVALID_PRODUCER_EPOCH: i16 = 47;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn topic_name(text: &str) -> TopicName {
    TopicName(s(text))
}

/// An in-process broker over memory storage with `orders` (2 partitions).
async fn broker() -> Node {
    // Joins answered at once: these tests drive every version, not the initial rebalance delay.
    common::memory_broker_with(&[(TOPIC, 2)], |config| {
        config.group_initial_rebalance_delay_ms = 0
    })
    .await
}

/// A client batch of `count` records.
fn batch(producer: Option<(i64, i16, i32)>, transactional: bool, count: usize) -> Bytes {
    let mut builder = BatchBuilder::new();
    if let Some((id, epoch, sequence)) = producer {
        builder = builder.producer(id, epoch, sequence);
    }
    if transactional {
        builder = builder.transactional(true);
    }
    for index in 0..count {
        builder.add(
            1_700_000_000_000 + index as i64,
            Some(b"key"),
            Some(b"value"),
            &[],
        );
    }
    builder.build().expect("batch").into_bytes()
}

/// A control batch, which no client may send.
fn control_batch() -> Bytes {
    let mut builder = BatchBuilder::new().control(true);
    builder.add(
        1_700_000_000_000,
        Some(&[0, 0, 0, 1]),
        Some(&[0, 0, 0, 0, 0, 0]),
        &[],
    );
    builder.build().expect("control batch").into_bytes()
}

fn produce_request(
    transactional_id: Option<&str>,
    acks: i16,
    parts: Vec<(&str, i32, Bytes)>,
) -> ProduceRequest {
    let mut request = ProduceRequest::default();
    request.transactional_id = transactional_id.map(|id| TransactionalId(s(id)));
    request.acks = acks;
    request.timeout_ms = 10_000;
    for (name, index, records) in parts {
        let mut data = produce_request::PartitionProduceData::default();
        data.index = index;
        data.records = Some(records);
        let mut topic = produce_request::TopicProduceData::default();
        topic.name = topic_name(name);
        topic.partition_data = vec![data];
        request.topic_data.push(topic);
    }
    request
}

async fn produce(broker: &Node, version: i16, request: &ProduceRequest) -> Vec<i16> {
    let response: ProduceResponse = call(broker, ApiKey::Produce, version, request)
        .await
        .expect("acks != 0 answers");
    response
        .responses
        .iter()
        .flat_map(|topic| topic.partition_responses.iter().map(|p| p.error_code))
        .collect()
}

async fn init_producer_id(
    broker: &Node,
    version: i16,
    transactional_id: Option<&str>,
) -> InitProducerIdResponse {
    let mut request = InitProducerIdRequest::default();
    request.transactional_id = transactional_id.map(|id| TransactionalId(s(id)));
    request.transaction_timeout_ms = 60_000;
    call(broker, ApiKey::InitProducerId, version, &request)
        .await
        .expect("answered")
}

fn add_partitions_request(
    txn: &str,
    id: i64,
    epoch: i16,
    partitions: &[(&str, i32)],
) -> AddPartitionsToTxnRequest {
    let mut request = AddPartitionsToTxnRequest::default();
    request.v3_and_below_transactional_id = TransactionalId(s(txn));
    request.v3_and_below_producer_id = ProducerId(id);
    request.v3_and_below_producer_epoch = epoch;
    for (name, index) in partitions {
        let mut topic = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
        topic.name = topic_name(name);
        topic.partitions = vec![*index];
        request.v3_and_below_topics.push(topic);
    }
    request
}

fn end_txn_request(txn: &str, id: i64, epoch: i16, committed: bool) -> EndTxnRequest {
    let mut request = EndTxnRequest::default();
    request.transactional_id = TransactionalId(s(txn));
    request.producer_id = ProducerId(id);
    request.producer_epoch = epoch;
    request.committed = committed;
    request
}

/// The highest advertised version of `key` (setup calls use it).
fn max(key: ApiKey) -> i16 {
    broker::versions::range(key).expect("advertised").1
}

/// Opens a transaction of `txn` holding `orders`/0 with one record; returns (producer id, epoch).
async fn open_transaction(broker: &Node, txn: &str) -> (i64, i16) {
    let init = init_producer_id(broker, max(ApiKey::InitProducerId), Some(txn)).await;
    assert_eq!(init.error_code, 0);
    let (id, epoch) = (init.producer_id.0, init.producer_epoch);
    let add: AddPartitionsToTxnResponse = call(
        broker,
        ApiKey::AddPartitionsToTxn,
        max(ApiKey::AddPartitionsToTxn),
        &add_partitions_request(txn, id, epoch, &[(TOPIC, 0)]),
    )
    .await
    .expect("answered");
    assert_eq!(
        add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        0
    );
    let codes = produce(
        broker,
        max(ApiKey::Produce),
        &produce_request(
            Some(txn),
            -1,
            vec![(TOPIC, 0, batch(Some((id, epoch, 0)), true, 1))],
        ),
    )
    .await;
    assert_eq!(codes, vec![0]);
    (id, epoch)
}

/// Fences `txn`'s current producer by initialising it again; returns the fenced (id, epoch).
async fn fenced_producer(broker: &Node, txn: &str) -> (i64, i16) {
    let fenced = open_transaction(broker, txn).await;
    // The open transaction is aborted first: CONCURRENT_TRANSACTIONS (51) until it is, as clients retry.
    let mut again = init_producer_id(broker, max(ApiKey::InitProducerId), Some(txn)).await;
    for _retry in 0..10 {
        if again.error_code != 51 {
            break;
        }
        again = init_producer_id(broker, max(ApiKey::InitProducerId), Some(txn)).await;
    }
    assert_eq!(again.error_code, 0);
    assert!(again.producer_epoch > fenced.1);
    fenced
}

/// The error a fenced producer hears at `version` of an API that has PRODUCER_FENCED from `since`.
fn fencing_code(version: i16, since: i16) -> i16 {
    if version >= since {
        PRODUCER_FENCED
    } else {
        INVALID_PRODUCER_EPOCH
    }
}

async fn scenario(key: ApiKey, version: i16) {
    let broker = broker().await;
    let b = &broker;
    match key {
        ApiKey::ApiVersions => {
            let response: ApiVersionsResponse = call(b, key, version, &ApiVersionsRequest::default())
                .await
                .expect("answered");
            assert_eq!(response.error_code, 0);
            assert!(!response.api_keys.is_empty());
        }
        ApiKey::Metadata => {
            let mut all = MetadataRequest::default();
            all.topics = if version == 0 { Some(Vec::new()) } else { None };
            let response: MetadataResponse = call(b, key, version, &all).await.expect("answered");
            assert_eq!(response.topics.len(), 1);
            assert_eq!(response.topics[0].partitions.len(), 2);
            let mut named = MetadataRequest::default();
            named.topics = Some(
                [TOPIC, "missing", "__internal"]
                    .into_iter()
                    .map(|name| {
                        let mut topic = metadata_request::MetadataRequestTopic::default();
                        topic.name = Some(topic_name(name));
                        topic
                    })
                    .collect(),
            );
            let response: MetadataResponse = call(b, key, version, &named).await.expect("answered");
            let codes: Vec<i16> = response.topics.iter().map(|t| t.error_code).collect();
            assert_eq!(codes, vec![0, 3, 3], "v{version}");
            let ids: Vec<bool> = response.topics.iter().map(|t| !t.topic_id.is_nil()).collect();
            // KIP-516: from v10 a topic that exists carries its id; the encoder drops it below v10.
            assert_eq!(ids, vec![version >= 10, false, false], "v{version}");
            if version >= 10 {
                assert_eq!(
                    b.topic_id(TOPIC).await.as_ref(),
                    Some(response.topics[0].topic_id.as_bytes())
                );
                // Topics asked by id: answered from v12 (an unknown id is UNKNOWN_TOPIC_ID), INVALID_REQUEST
                // before, as Kafka 4.1 answers them.
                let asked = |id| {
                    let mut topic = metadata_request::MetadataRequestTopic::default();
                    topic.topic_id = id;
                    topic.name = None;
                    topic
                };
                let mut request = MetadataRequest::default();
                let unknown = uuid::Uuid::from_u128(response.topics[0].topic_id.as_u128() ^ 1);
                request.topics = Some(vec![asked(response.topics[0].topic_id), asked(unknown)]);
                let by_id: MetadataResponse = call(b, key, version, &request).await.expect("answered");
                let seen: Vec<(i16, Option<&str>, usize)> = by_id
                    .topics
                    .iter()
                    .map(|t| {
                        (
                            t.error_code,
                            t.name.as_ref().map(|n| n.as_str()),
                            t.partitions.len(),
                        )
                    })
                    .collect();
                if version >= 12 {
                    // Kafka lists the unknown ids first.
                    assert_eq!(seen, vec![(100, None, 0), (0, Some(TOPIC), 2)], "v{version}");
                    assert_eq!(by_id.topics[0].topic_id, unknown);
                } else {
                    assert_eq!(seen, vec![(42, Some(""), 0), (42, Some(""), 0)], "v{version}");
                }
            }
        }
        ApiKey::CreateTopics => {
            let topic = |name: &str, partitions: i32, replication: i16| {
                let mut topic = create_topics_request::CreatableTopic::default();
                topic.name = topic_name(name);
                topic.num_partitions = partitions;
                topic.replication_factor = replication;
                topic
            };
            let mut request = CreateTopicsRequest::default();
            request.timeout_ms = 10_000;
            request.topics = vec![
                topic("fresh", 3, 1),
                topic(TOPIC, 1, 1),
                topic("zero", 0, 1),
                topic("replicated", 1, 3),
                topic("__cluster_metadata", 1, 1),
                topic("__transaction_state", 1, 1),
                topic("__mirrorlog_group_offsets", 1, 1),
                topic("__double_underscored", 1, 1),
            ];
            let response: CreateTopicsResponse = call(b, key, version, &request).await.expect("answered");
            let codes: Vec<i16> = response.topics.iter().map(|t| t.error_code).collect();
            // Kafka's internal names and serve's own are refused (INVALID_REQUEST); other `__` names are topics.
            assert_eq!(codes, vec![0, 36, 37, 38, 42, 42, 42, 0], "v{version}");
            assert_eq!(
                response.topics[4].error_message.as_deref(),
                Some("Creation of internal topic __cluster_metadata is prohibited.")
            );
            request.validate_only = true;
            request.topics = vec![topic("checked", 1, 1)];
            let response: CreateTopicsResponse = call(b, key, version, &request).await.expect("answered");
            assert_eq!(response.topics[0].error_code, 0);
        }
        ApiKey::FindCoordinator => {
            let mut request = FindCoordinatorRequest::default();
            // The answer's errors, whatever the version (from v4 one per key, KIP-699).
            let errors = |response: &FindCoordinatorResponse| {
                if version >= 4 {
                    response.coordinators.iter().map(|c| c.error_code).collect()
                } else {
                    vec![response.error_code]
                }
            };
            if version >= 4 {
                request.coordinator_keys = vec![s("group"), s("other")];
            } else {
                request.key = s("group");
            }
            let response: FindCoordinatorResponse = call(b, key, version, &request).await.expect("answered");
            assert!(errors(&response).iter().all(|&e| e == 0), "v{version}");
            if version >= 4 {
                assert_eq!(response.coordinators.len(), 2);
            }
            if version >= 1 {
                request.key_type = 1;
                let response: FindCoordinatorResponse =
                    call(b, key, version, &request).await.expect("answered");
                assert!(errors(&response).iter().all(|&e| e == 0), "v{version}");
                request.key_type = 9;
                let response: FindCoordinatorResponse =
                    call(b, key, version, &request).await.expect("answered");
                assert!(errors(&response).iter().all(|&e| e != 0), "v{version}");
            }
        }
        ApiKey::Produce => {
            let plain = produce_request(None, -1, vec![(TOPIC, 0, batch(None, false, 3))]);
            assert_eq!(produce(b, version, &plain).await, vec![0]);
            let unknown = produce_request(
                None,
                1,
                vec![
                    ("missing", 0, batch(None, false, 1)),
                    (TOPIC, 7, batch(None, false, 1)),
                ],
            );
            assert_eq!(produce(b, version, &unknown).await, vec![3, 3]);
            let mut corrupt = batch(None, false, 1).to_vec();
            let last = corrupt.len() - 1;
            corrupt[last] ^= 0xff;
            let corrupt = produce_request(None, -1, vec![(TOPIC, 0, Bytes::from(corrupt))]);
            assert_eq!(produce(b, version, &corrupt).await, vec![2]);
            let init = init_producer_id(b, max(ApiKey::InitProducerId), None).await;
            let producer = (init.producer_id.0, init.producer_epoch);
            let first = produce_request(
                None,
                -1,
                vec![(TOPIC, 1, batch(Some((producer.0, producer.1, 0)), false, 2))],
            );
            assert_eq!(produce(b, version, &first).await, vec![0]);
            assert_eq!(
                produce(b, version, &first).await,
                vec![0],
                "a duplicate is answered as a success"
            );
            let gap = produce_request(
                None,
                -1,
                vec![(TOPIC, 1, batch(Some((producer.0, producer.1, 5)), false, 1))],
            );
            assert_eq!(produce(b, version, &gap).await, vec![45]);
            let control = produce_request(None, -1, vec![(TOPIC, 1, control_batch())]);
            assert_ne!(produce(b, version, &control).await, vec![0]);
            let fire_and_forget = produce_request(None, 0, vec![(TOPIC, 0, batch(None, false, 1))]);
            let none: Option<ProduceResponse> = call(b, key, version, &fire_and_forget).await;
            assert!(none.is_none(), "acks=0 is not answered");
        }
        ApiKey::Fetch => {
            let plain = produce_request(None, -1, vec![(TOPIC, 0, batch(None, false, 3))]);
            assert_eq!(produce(b, max(ApiKey::Produce), &plain).await, vec![0]);
            open_transaction(b, "fetch-txn").await;
            let partition = |index: i32, offset: i64| {
                let mut partition = fetch_request::FetchPartition::default();
                partition.partition = index;
                partition.fetch_offset = offset;
                partition.partition_max_bytes = 1 << 20;
                partition
            };
            let mut topic = fetch_request::FetchTopic::default();
            topic.topic = topic_name(TOPIC);
            topic.partitions = vec![
                partition(0, 0),
                partition(1, 0),
                partition(0, 1_000),
                partition(9, 0),
            ];
            let mut missing = fetch_request::FetchTopic::default();
            missing.topic = topic_name("missing");
            missing.partitions = vec![partition(0, 0)];
            let mut request = FetchRequest::default();
            request.replica_id = BrokerId(-1);
            request.max_wait_ms = 0;
            request.min_bytes = 1;
            request.max_bytes = 1 << 20;
            request.topics = vec![topic, missing];
            for isolation in [0, 1] {
                request.isolation_level = isolation;
                let response: FetchResponse = call(b, key, version, &request).await.expect("answered");
                let codes: Vec<i16> = response
                    .responses
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                    .collect();
                assert_eq!(codes, vec![0, 0, 1, 3, 3], "v{version} isolation {isolation}");
                assert!(response.responses[0].partitions[0]
                    .records
                    .as_ref()
                    .is_some_and(|r| !r.is_empty()));
            }
        }
        ApiKey::ListOffsets => {
            let plain = produce_request(None, -1, vec![(TOPIC, 0, batch(None, false, 3))]);
            assert_eq!(produce(b, max(ApiKey::Produce), &plain).await, vec![0]);
            open_transaction(b, "list-txn").await;
            let partition = |index: i32, timestamp: i64| {
                let mut partition = list_offsets_request::ListOffsetsPartition::default();
                partition.partition_index = index;
                partition.timestamp = timestamp;
                partition
            };
            let mut topic = list_offsets_request::ListOffsetsTopic::default();
            topic.name = topic_name(TOPIC);
            topic.partitions = vec![
                partition(0, -2),
                partition(0, -1),
                partition(0, 1_700_000_000_001),
                partition(0, 4_000_000_000_000),
                partition(0, -7),
                partition(5, -1),
            ];
            let mut request = ListOffsetsRequest::default();
            request.replica_id = BrokerId(-1);
            request.topics = vec![topic];
            let levels: &[i8] = if version >= 2 { &[0, 1] } else { &[0] };
            for &isolation in levels {
                request.isolation_level = isolation;
                let response: ListOffsetsResponse = call(b, key, version, &request).await.expect("answered");
                let answers = &response.topics[0].partitions;
                let codes: Vec<i16> = answers.iter().map(|p| p.error_code).collect();
                assert_eq!(codes[..4], [0, 0, 0, 0], "v{version}");
                assert_ne!(codes[4], 0, "v{version}: an invalid timestamp");
                assert_eq!(codes[5], 3, "v{version}: an unknown partition");
                assert_eq!(answers[0].offset, 0);
                let latest = if isolation == 1 { 3 } else { 4 };
                assert_eq!(answers[1].offset, latest, "v{version} isolation {isolation}");
                assert_eq!(answers[2].offset, 1, "v{version}: the record at the timestamp");
                assert_eq!(answers[3].offset, -1, "v{version}: no record that late");
            }
        }
        ApiKey::OffsetCommit => {
            let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
            partition.partition_index = 0;
            partition.committed_offset = 42;
            let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
            topic.name = topic_name(TOPIC);
            topic.partitions = vec![partition];
            let mut request = OffsetCommitRequest::default();
            request.group_id = GroupId(s("group"));
            request.generation_id_or_member_epoch = -1;
            request.topics = vec![topic];
            let response: OffsetCommitResponse = call(b, key, version, &request).await.expect("answered");
            assert_eq!(response.topics[0].partitions[0].error_code, 0);
        }
        ApiKey::OffsetFetch if version >= 8 => {
            // Batched (KIP-709): a group naming its partitions and one asking for all it committed.
            let mut topic = offset_fetch_request::OffsetFetchRequestTopics::default();
            topic.name = topic_name(TOPIC);
            topic.partition_indexes = vec![0, 1];
            let mut named = offset_fetch_request::OffsetFetchRequestGroup::default();
            named.group_id = GroupId(s("group"));
            named.topics = Some(vec![topic]);
            let mut every = offset_fetch_request::OffsetFetchRequestGroup::default();
            every.group_id = GroupId(s("other"));
            let mut request = OffsetFetchRequest::default();
            request.groups = vec![named, every];
            let response: OffsetFetchResponse = call(b, key, version, &request).await.expect("answered");
            assert_eq!(response.groups.len(), 2);
            let offsets: Vec<i64> = response.groups[0].topics[0]
                .partitions
                .iter()
                .map(|p| p.committed_offset)
                .collect();
            assert_eq!(offsets, vec![-1, -1]);
            assert!(response.groups[1].topics.is_empty());
        }
        ApiKey::OffsetFetch => {
            let mut topic = offset_fetch_request::OffsetFetchRequestTopic::default();
            topic.name = topic_name(TOPIC);
            topic.partition_indexes = vec![0, 1];
            let mut request = OffsetFetchRequest::default();
            request.group_id = GroupId(s("group"));
            request.topics = Some(vec![topic]);
            let response: OffsetFetchResponse = call(b, key, version, &request).await.expect("answered");
            let offsets: Vec<i64> = response.topics[0]
                .partitions
                .iter()
                .map(|p| p.committed_offset)
                .collect();
            assert_eq!(offsets, vec![-1, -1]);
            if version >= 2 {
                request.topics = None;
                let _all: OffsetFetchResponse = call(b, key, version, &request).await.expect("answered");
            }
        }
        ApiKey::TxnOffsetCommit => {
            let (id, epoch) = open_transaction(b, "offsets-txn").await;
            let mut add = AddOffsetsToTxnRequest::default();
            add.transactional_id = TransactionalId(s("offsets-txn"));
            add.producer_id = ProducerId(id);
            add.producer_epoch = epoch;
            add.group_id = GroupId(s("group"));
            let added: AddOffsetsToTxnResponse =
                call(b, ApiKey::AddOffsetsToTxn, max(ApiKey::AddOffsetsToTxn), &add)
                    .await
                    .expect("answered");
            assert_eq!(added.error_code, 0);
            let mut partition = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
            partition.partition_index = 0;
            partition.committed_offset = 7;
            let mut topic = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
            topic.name = topic_name(TOPIC);
            topic.partitions = vec![partition];
            let mut request = TxnOffsetCommitRequest::default();
            request.transactional_id = TransactionalId(s("offsets-txn"));
            request.group_id = GroupId(s("group"));
            request.producer_id = ProducerId(id);
            request.producer_epoch = epoch;
            request.topics = vec![topic];
            let response: TxnOffsetCommitResponse = call(b, key, version, &request).await.expect("answered");
            assert_eq!(response.topics[0].partitions[0].error_code, 0);
            request.group_id = GroupId(s("not-added"));
            let response: TxnOffsetCommitResponse = call(b, key, version, &request).await.expect("answered");
            assert_ne!(
                response.topics[0].partitions[0].error_code, 0,
                "a group not in the transaction"
            );
        }
        ApiKey::InitProducerId => {
            let idempotent = init_producer_id(b, version, None).await;
            assert_eq!(idempotent.error_code, 0);
            assert!(idempotent.producer_id.0 >= 0);
            let first = init_producer_id(b, version, Some("init")).await;
            assert_eq!(first.error_code, 0);
            let mut too_long = InitProducerIdRequest::default();
            too_long.transactional_id = Some(TransactionalId(s("init")));
            too_long.transaction_timeout_ms = i32::MAX;
            let refused: InitProducerIdResponse = call(b, key, version, &too_long).await.expect("answered");
            assert_eq!(refused.error_code, 50, "v{version}: INVALID_TRANSACTION_TIMEOUT");
            if version >= 3 {
                let (id, epoch) = fenced_producer(b, "bump").await;
                let mut bump = InitProducerIdRequest::default();
                bump.transactional_id = Some(TransactionalId(s("bump")));
                bump.transaction_timeout_ms = 60_000;
                bump.producer_id = ProducerId(id);
                bump.producer_epoch = epoch;
                let stale: InitProducerIdResponse = call(b, key, version, &bump).await.expect("answered");
                assert_eq!(
                    stale.error_code,
                    fencing_code(version, 4),
                    "v{version}: a stale epoch's bump"
                );
            }
        }
        ApiKey::AddPartitionsToTxn => {
            let init = init_producer_id(b, max(ApiKey::InitProducerId), Some("add")).await;
            let (id, epoch) = (init.producer_id.0, init.producer_epoch);
            let request = add_partitions_request("add", id, epoch, &[(TOPIC, 0), (TOPIC, 1)]);
            let response: AddPartitionsToTxnResponse =
                call(b, key, version, &request).await.expect("answered");
            let codes: Vec<i16> = response
                .results_by_topic_v3_and_below
                .iter()
                .flat_map(|t| t.results_by_partition.iter().map(|p| p.partition_error_code))
                .collect();
            assert_eq!(codes, vec![0, 0]);
            let request = add_partitions_request("add", id, epoch, &[(TOPIC, 0), ("missing", 0)]);
            let response: AddPartitionsToTxnResponse =
                call(b, key, version, &request).await.expect("answered");
            let codes: Vec<i16> = response
                .results_by_topic_v3_and_below
                .iter()
                .flat_map(|t| t.results_by_partition.iter().map(|p| p.partition_error_code))
                .collect();
            assert_eq!(codes, vec![55, 3]);
            let (id, epoch) = fenced_producer(b, "add-fenced").await;
            let request = add_partitions_request("add-fenced", id, epoch, &[(TOPIC, 1)]);
            let response: AddPartitionsToTxnResponse =
                call(b, key, version, &request).await.expect("answered");
            let code = response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code;
            assert_eq!(code, fencing_code(version, 2), "v{version}");
        }
        ApiKey::AddOffsetsToTxn => {
            let (id, epoch) = open_transaction(b, "add-offsets").await;
            let mut request = AddOffsetsToTxnRequest::default();
            request.transactional_id = TransactionalId(s("add-offsets"));
            request.producer_id = ProducerId(id);
            request.producer_epoch = epoch;
            request.group_id = GroupId(s("group"));
            let response: AddOffsetsToTxnResponse = call(b, key, version, &request).await.expect("answered");
            assert_eq!(response.error_code, 0);
            let (id, epoch) = fenced_producer(b, "add-offsets-fenced").await;
            request.transactional_id = TransactionalId(s("add-offsets-fenced"));
            request.producer_id = ProducerId(id);
            request.producer_epoch = epoch;
            let response: AddOffsetsToTxnResponse = call(b, key, version, &request).await.expect("answered");
            assert_eq!(response.error_code, fencing_code(version, 2), "v{version}");
        }
        ApiKey::EndTxn => {
            for committed in [true, false] {
                let (id, epoch) = open_transaction(b, "end").await;
                let response: EndTxnResponse =
                    call(b, key, version, &end_txn_request("end", id, epoch, committed))
                        .await
                        .expect("answered");
                assert_eq!(response.error_code, 0, "v{version} committed {committed}");
            }
            let (id, epoch) = fenced_producer(b, "zombie").await;
            let response: EndTxnResponse = call(b, key, version, &end_txn_request("zombie", id, epoch, true))
                .await
                .expect("answered");
            assert_eq!(
                response.error_code,
                fencing_code(version, 2),
                "v{version}: a zombie's commit"
            );
            let response: EndTxnResponse =
                call(b, key, version, &end_txn_request("never-initialised", 5, 0, true))
                    .await
                    .expect("answered");
            assert_ne!(response.error_code, 0);
        }
        ApiKey::DeleteRecords => {
            let plain = produce_request(None, -1, vec![(TOPIC, 0, batch(None, false, 5))]);
            assert_eq!(produce(b, max(ApiKey::Produce), &plain).await, vec![0]);
            let delete = |parts: Vec<(&str, i32, i64)>| {
                let mut request = DeleteRecordsRequest::default();
                request.timeout_ms = 10_000;
                for (name, index, offset) in parts {
                    let mut partition = delete_records_request::DeleteRecordsPartition::default();
                    partition.partition_index = index;
                    partition.offset = offset;
                    let mut topic = delete_records_request::DeleteRecordsTopic::default();
                    topic.name = topic_name(name);
                    topic.partitions = vec![partition];
                    request.topics.push(topic);
                }
                request
            };
            let request = delete(vec![
                (TOPIC, 0, 2),
                (TOPIC, 1, 9),
                ("missing", 0, 1),
                (TOPIC, 0, -7),
            ]);
            let response: DeleteRecordsResponse = call(b, key, version, &request).await.expect("answered");
            let answers: Vec<(i16, i64)> = response
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| (p.error_code, p.low_watermark)))
                .collect();
            assert_eq!(answers, vec![(0, 2), (1, -1), (3, -1), (1, -1)], "v{version}");
            let request = delete(vec![(TOPIC, 0, -1)]);
            let response: DeleteRecordsResponse = call(b, key, version, &request).await.expect("answered");
            let result = &response.topics[0].partitions[0];
            assert_eq!(
                (result.error_code, result.low_watermark),
                (0, 5),
                "-1: up to the high watermark"
            );
        }
        ApiKey::JoinGroup | ApiKey::SyncGroup | ApiKey::Heartbeat | ApiKey::LeaveGroup => {
            group_cycle(b, key, version).await;
        }
        ApiKey::DeleteGroups => {
            let (member, _) = stable_member(b).await;
            let mut delete = DeleteGroupsRequest::default();
            delete.groups_names = vec![GroupId(s("group")), GroupId(s("nobody"))];
            let answer: DeleteGroupsResponse = call(b, key, version, &delete).await.expect("answered");
            let codes: Vec<i16> = answer.results.iter().map(|r| r.error_code).collect();
            assert_eq!(codes, vec![68, 69], "NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND");
            let mut leave = LeaveGroupRequest::default();
            leave.group_id = GroupId(s("group"));
            leave.member_id = member;
            let left: LeaveGroupResponse = call(b, ApiKey::LeaveGroup, 1, &leave).await.expect("answered");
            assert_eq!(left.error_code, 0);
            let answer: DeleteGroupsResponse = call(b, key, version, &delete).await.expect("answered");
            let codes: Vec<i16> = answer.results.iter().map(|r| r.error_code).collect();
            assert_eq!(codes, vec![0, 69], "the emptied group is deleted");
        }
        ApiKey::DescribeGroups | ApiKey::ListGroups => {
            let (member, _) = stable_member(b).await;
            let mut describe = DescribeGroupsRequest::default();
            describe.groups = vec![GroupId(s("group")), GroupId(s("nobody"))];
            let version_of = |api: ApiKey| if api == key { version } else { max(api) };
            let described: DescribeGroupsResponse = call(
                b,
                ApiKey::DescribeGroups,
                version_of(ApiKey::DescribeGroups),
                &describe,
            )
            .await
            .expect("answered");
            let group = &described.groups[0];
            assert_eq!((group.error_code, group.group_state.as_str()), (0, "Stable"));
            assert_eq!(
                (group.protocol_type.as_str(), group.protocol_data.as_str()),
                ("consumer", "range")
            );
            assert_eq!(group.members.len(), 1);
            assert_eq!(group.members[0].member_id, member);
            assert_eq!(group.members[0].client_id.as_str(), "every-version");
            assert_eq!(
                group.members[0].member_assignment,
                Bytes::from_static(b"orders-0,orders-1")
            );
            assert_eq!(described.groups[1].group_state.as_str(), "Dead");
            let listed: ListGroupsResponse = call(
                b,
                ApiKey::ListGroups,
                version_of(ApiKey::ListGroups),
                &ListGroupsRequest::default(),
            )
            .await
            .expect("answered");
            let groups: Vec<(&str, &str)> = listed
                .groups
                .iter()
                .map(|g| (g.group_id.as_str(), g.protocol_type.as_str()))
                .collect();
            assert_eq!(groups, vec![("group", "consumer")]);
        }
        ApiKey::DescribeConfigs => {
            let mut request = DescribeConfigsRequest::default();
            request.include_synonyms = true;
            request.include_documentation = version >= 3;
            for (resource_type, name) in [(2, TOPIC), (2, "missing"), (4, "0"), (4, "7")] {
                let mut resource = describe_configs_request::DescribeConfigsResource::default();
                resource.resource_type = resource_type;
                resource.resource_name = s(name);
                resource.configuration_keys = None;
                request.resources.push(resource);
            }
            let response: DescribeConfigsResponse = call(b, key, version, &request).await.expect("answered");
            let codes: Vec<i16> = response.results.iter().map(|r| r.error_code).collect();
            assert_eq!(codes, vec![0, 3, 0, 42], "v{version}");
            let retention = response.results[0]
                .configs
                .iter()
                .find(|c| c.name.as_str() == "retention.ms")
                .expect("retention.ms described");
            assert_eq!(retention.value.as_deref(), Some("604800000"));
            assert_eq!(retention.config_source, 5);
            // log.retention.ms, its primary broker synonym, has no default of its own: Kafka lists none.
            assert!(retention.synonyms.is_empty(), "v{version}");
            let segment = response.results[0]
                .configs
                .iter()
                .find(|c| c.name.as_str() == "segment.bytes")
                .expect("segment.bytes described");
            assert_eq!(segment.synonyms.len(), 1, "v{version}");
            assert_eq!(retention.config_type, if version >= 3 { 5 } else { 0 });
            if version >= 3 {
                assert!(retention
                    .documentation
                    .as_deref()
                    .is_some_and(|doc| !doc.is_empty()));
            }
            assert!(response.results[2]
                .configs
                .iter()
                .any(|c| c.name.as_str() == "message.max.bytes" && c.read_only));
        }
        ApiKey::AlterConfigs => {
            let alter = |configs: &[(&str, Option<&str>)], validate_only: bool| {
                let mut resource = alter_configs_request::AlterConfigsResource::default();
                resource.resource_type = 2;
                resource.resource_name = s(TOPIC);
                resource.configs = configs
                    .iter()
                    .map(|&(name, value)| {
                        let mut config = alter_configs_request::AlterableConfig::default();
                        config.name = s(name);
                        config.value = value.map(s);
                        config
                    })
                    .collect();
                let mut request = AlterConfigsRequest::default();
                request.resources = vec![resource];
                request.validate_only = validate_only;
                request
            };
            let refused: AlterConfigsResponse = call(
                b,
                key,
                version,
                &alter(&[("cleanup.policy", Some("bogus"))], false),
            )
            .await
            .expect("answered");
            assert_eq!(refused.responses[0].error_code, 40, "v{version}");
            assert!(refused.responses[0]
                .error_message
                .as_deref()
                .is_some_and(|message| message.contains("cleanup.policy")));
            let checked: AlterConfigsResponse = call(
                b,
                key,
                version,
                &alter(&[("max.message.bytes", Some("100"))], true),
            )
            .await
            .expect("answered");
            assert_eq!(checked.responses[0].error_code, 0);
            let plain = produce_request(None, -1, vec![(TOPIC, 0, batch(None, false, 5))]);
            assert_eq!(
                produce(b, max(ApiKey::Produce), &plain).await,
                vec![0],
                "validate_only changed nothing"
            );
            let altered: AlterConfigsResponse = call(
                b,
                key,
                version,
                &alter(&[("max.message.bytes", Some("100"))], false),
            )
            .await
            .expect("answered");
            assert_eq!(altered.responses[0].error_code, 0);
            assert_eq!(
                produce(b, max(ApiKey::Produce), &plain).await,
                vec![10],
                "MESSAGE_TOO_LARGE"
            );
        }
        ApiKey::IncrementalAlterConfigs => {
            let alter = |name: &str, operation: i8, value: Option<&str>| {
                let mut config = incremental_alter_configs_request::AlterableConfig::default();
                config.name = s(name);
                config.config_operation = operation;
                config.value = value.map(s);
                let mut resource = incremental_alter_configs_request::AlterConfigsResource::default();
                resource.resource_type = 2;
                resource.resource_name = s(TOPIC);
                resource.configs = vec![config];
                let mut request = IncrementalAlterConfigsRequest::default();
                request.resources = vec![resource];
                request
            };
            let appended: IncrementalAlterConfigsResponse =
                call(b, key, version, &alter("cleanup.policy", 2, Some("compact")))
                    .await
                    .expect("answered");
            assert_eq!(appended.responses[0].error_code, 0, "v{version}");
            let refused: IncrementalAlterConfigsResponse =
                call(b, key, version, &alter("retention.mss", 0, Some("1")))
                    .await
                    .expect("answered");
            assert_eq!(refused.responses[0].error_code, 40);
            let set: IncrementalAlterConfigsResponse =
                call(b, key, version, &alter("max.message.bytes", 0, Some("100")))
                    .await
                    .expect("answered");
            assert_eq!(set.responses[0].error_code, 0);
            let plain = produce_request(None, -1, vec![(TOPIC, 0, batch(None, false, 5))]);
            assert_eq!(
                produce(b, max(ApiKey::Produce), &plain).await,
                vec![10],
                "MESSAGE_TOO_LARGE"
            );
            let deleted: IncrementalAlterConfigsResponse =
                call(b, key, version, &alter("max.message.bytes", 1, None))
                    .await
                    .expect("answered");
            assert_eq!(deleted.responses[0].error_code, 0);
            assert_eq!(
                produce(b, max(ApiKey::Produce), &plain).await,
                vec![0],
                "the broker's limit again"
            );
        }
        ApiKey::DescribeProducers => {
            let (id, epoch) = open_transaction(b, "open").await;
            let mut topic = describe_producers_request::TopicRequest::default();
            topic.name = topic_name(TOPIC);
            topic.partition_indexes = vec![0, 1, 7];
            let mut request = DescribeProducersRequest::default();
            request.topics = vec![topic];
            let response: DescribeProducersResponse =
                call(b, key, version, &request).await.expect("answered");
            let partitions = &response.topics[0].partitions;
            let codes: Vec<i16> = partitions.iter().map(|p| p.error_code).collect();
            assert_eq!(codes, vec![0, 0, 3]);
            let producer = &partitions[0].active_producers[0];
            assert_eq!(
                (
                    producer.producer_id.0,
                    producer.producer_epoch,
                    producer.last_sequence
                ),
                (id, i32::from(epoch), 0)
            );
            assert_eq!(
                producer.current_txn_start_offset, 0,
                "the open transaction starts at offset 0"
            );
            assert!(partitions[1].active_producers.is_empty());
        }
        ApiKey::ListTransactions => {
            open_transaction(b, "open").await;
            let ended = open_transaction(b, "ended").await;
            let response: EndTxnResponse = call(
                b,
                ApiKey::EndTxn,
                max(ApiKey::EndTxn),
                &end_txn_request("ended", ended.0, ended.1, true),
            )
            .await
            .expect("answered");
            assert_eq!(response.error_code, 0);
            let mut request = ListTransactionsRequest::default();
            request.state_filters = vec![s("Ongoing"), s("NoSuchState")];
            request.duration_filter = -1;
            let response: ListTransactionsResponse = call(b, key, version, &request).await.expect("answered");
            let listed: Vec<(&str, &str)> = response
                .transaction_states
                .iter()
                .map(|t| (t.transactional_id.as_str(), t.transaction_state.as_str()))
                .collect();
            assert_eq!(listed, vec![("open", "Ongoing")], "v{version}");
            assert_eq!(response.unknown_state_filters, vec![s("NoSuchState")]);
            let response: ListTransactionsResponse =
                call(b, key, version, &ListTransactionsRequest::default())
                    .await
                    .expect("answered");
            assert_eq!(response.transaction_states.len(), 2, "no filter lists both");
        }
        ApiKey::DescribeTransactions => {
            let (id, _) = open_transaction(b, "open").await;
            let mut request = DescribeTransactionsRequest::default();
            request.transactional_ids = vec![TransactionalId(s("open")), TransactionalId(s("unknown"))];
            let response: DescribeTransactionsResponse =
                call(b, key, version, &request).await.expect("answered");
            let open = &response.transaction_states[0];
            assert_eq!((open.error_code, open.transaction_state.as_str()), (0, "Ongoing"));
            assert_eq!((open.producer_id.0, open.transaction_timeout_ms), (id, 60_000));
            assert_eq!(open.topics.len(), 1);
            assert_eq!(
                (
                    open.topics[0].topic.as_str(),
                    open.topics[0].partitions.as_slice()
                ),
                (TOPIC, &[0][..])
            );
            assert_eq!(
                response.transaction_states[1].error_code, 105,
                "TRANSACTIONAL_ID_NOT_FOUND"
            );
        }
        ApiKey::DeleteTopics => {
            let plain = produce_request(None, -1, vec![(TOPIC, 0, batch(None, false, 5))]);
            assert_eq!(produce(b, max(ApiKey::Produce), &plain).await, vec![0]);
            let id = b.topic_id(TOPIC).await.expect("the topic has an id");
            let mut request = DeleteTopicsRequest::default();
            if version >= 6 {
                // v6 names topics in `topics`: by name here (by id in authorization.rs and delete_topics.rs).
                request.topics = [TOPIC, "missing"]
                    .map(|name| {
                        let mut topic = delete_topics_request::DeleteTopicState::default();
                        topic.name = Some(topic_name(name));
                        topic
                    })
                    .to_vec();
            } else {
                request.topic_names = vec![topic_name(TOPIC), topic_name("missing")];
            }
            request.timeout_ms = 10_000;
            let response: DeleteTopicsResponse = call(b, key, version, &request).await.expect("answered");
            let codes: Vec<i16> = response.responses.iter().map(|r| r.error_code).collect();
            assert_eq!(codes, vec![0, 3], "v{version}");
            if version >= 6 {
                // The deleted topic's answer carries its id; the missing one's the zero id.
                let ids: Vec<[u8; 16]> = response
                    .responses
                    .iter()
                    .map(|r| r.topic_id.into_bytes())
                    .collect();
                assert_eq!(ids, vec![id, [0; 16]], "v{version}");
            }
            assert_eq!(
                produce(b, max(ApiKey::Produce), &plain).await,
                vec![3],
                "the topic is gone"
            );
            assert!(b.partition(TOPIC, 0).await.is_none());
        }
        ApiKey::CreatePartitions => {
            let grow = |name: &str, count: i32, validate_only: bool| {
                let mut topic = create_partitions_request::CreatePartitionsTopic::default();
                topic.name = topic_name(name);
                topic.count = count;
                topic.assignments = None;
                let mut request = CreatePartitionsRequest::default();
                request.topics = vec![topic];
                request.timeout_ms = 10_000;
                request.validate_only = validate_only;
                request
            };
            let codes = |response: &CreatePartitionsResponse| -> Vec<i16> {
                response.results.iter().map(|r| r.error_code).collect()
            };
            let checked: CreatePartitionsResponse = call(b, key, version, &grow(TOPIC, 4, true))
                .await
                .expect("answered");
            assert_eq!(codes(&checked), vec![0]);
            assert!(
                b.partition(TOPIC, 2).await.is_none(),
                "validate_only adds nothing"
            );
            let grown: CreatePartitionsResponse = call(b, key, version, &grow(TOPIC, 4, false))
                .await
                .expect("answered");
            assert_eq!(codes(&grown), vec![0], "v{version}");
            assert!(b.partition(TOPIC, 3).await.is_some());
            let shrunk: CreatePartitionsResponse = call(b, key, version, &grow(TOPIC, 3, false))
                .await
                .expect("answered");
            assert_eq!(codes(&shrunk), vec![37], "INVALID_PARTITIONS");
            let missing: CreatePartitionsResponse = call(b, key, version, &grow("missing", 3, false))
                .await
                .expect("answered");
            assert_eq!(codes(&missing), vec![3]);
        }
        ApiKey::DescribeCluster => {
            let mut request = DescribeClusterRequest::default();
            request.endpoint_type = 1; // brokers (the default, and the only type before v1)
            let response: DescribeClusterResponse = call(b, key, version, &request).await.expect("answered");
            assert_eq!(response.error_code, 0);
            assert_eq!(response.brokers.len(), 1);
            assert_eq!(response.controller_id.0, 0);
        }
        ApiKey::DescribeLogDirs => {
            let mut every = DescribeLogDirsRequest::default();
            every.topics = None; // null: every topic
            let all: DescribeLogDirsResponse = call(b, key, version, &every).await.expect("answered");
            assert_eq!(all.results.len(), 1, "one log directory");
            let dir = &all.results[0];
            assert_eq!(dir.error_code, 0);
            assert!(!dir.log_dir.is_empty());
            assert!(
                dir.topics.iter().any(|topic| topic.name.0.as_str() == TOPIC),
                "v{version}"
            );
            if version >= 4 {
                let known = dir.total_bytes >= dir.usable_bytes && dir.usable_bytes >= 0;
                let memory =
                    dir.log_dir.as_str() == "memory" && (dir.total_bytes, dir.usable_bytes) == (-1, -1);
                assert!(known || memory, "v{version}: {dir:?}");
            }
            let mut asked = describe_log_dirs_request::DescribableLogDirTopic::default();
            asked.topic = topic_name(TOPIC);
            asked.partitions = vec![0, 99];
            let mut missing = describe_log_dirs_request::DescribableLogDirTopic::default();
            missing.topic = topic_name("missing");
            missing.partitions = vec![0];
            let mut request = DescribeLogDirsRequest::default();
            request.topics = Some(vec![asked, missing]);
            let some: DescribeLogDirsResponse = call(b, key, version, &request).await.expect("answered");
            let topics = &some.results[0].topics;
            assert_eq!(topics.len(), 1, "the missing topic is left out");
            let partitions: Vec<i32> = topics[0].partitions.iter().map(|p| p.partition_index).collect();
            assert_eq!(partitions, [0], "the missing partition is left out");
            assert!(topics[0].partitions[0].partition_size >= 0);
        }
        ApiKey::WriteTxnMarkers => {
            let (id, epoch) = open_transaction(b, "hanging").await;
            let lso = |b| async move {
                let mut partition = list_offsets_request::ListOffsetsPartition::default();
                partition.timestamp = -1;
                let mut topic = list_offsets_request::ListOffsetsTopic::default();
                topic.name = topic_name(TOPIC);
                topic.partitions = vec![partition];
                let mut request = ListOffsetsRequest::default();
                request.isolation_level = 1;
                request.topics = vec![topic];
                let response: ListOffsetsResponse =
                    call(b, ApiKey::ListOffsets, max(ApiKey::ListOffsets), &request)
                        .await
                        .expect("answered");
                response.topics[0].partitions[0].offset
            };
            assert_eq!(lso(b).await, 0, "the open transaction holds the LSO");
            let mut marker = write_txn_markers_request::WritableTxnMarker::default();
            marker.producer_id = ProducerId(id);
            marker.producer_epoch = epoch;
            marker.transaction_result = false;
            marker.coordinator_epoch = 0;
            for (name, index) in [(TOPIC, 0), ("missing", 0)] {
                let mut topic = write_txn_markers_request::WritableTxnMarkerTopic::default();
                topic.name = topic_name(name);
                topic.partition_indexes = vec![index];
                marker.topics.push(topic);
            }
            let mut request = WriteTxnMarkersRequest::default();
            request.markers = vec![marker];
            let response: WriteTxnMarkersResponse = call(b, key, version, &request).await.expect("answered");
            let codes: Vec<i16> = response.markers[0]
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect();
            assert_eq!(codes, vec![0, 3]);
            assert_eq!(
                lso(b).await,
                2,
                "the abort marker (offset 1) closed the transaction"
            );
        }
        ApiKey::OffsetDelete => {
            let mut committed = Vec::new();
            for index in [0, 1] {
                let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
                partition.partition_index = index;
                partition.committed_offset = 42;
                committed.push(partition);
            }
            let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
            topic.name = topic_name(TOPIC);
            topic.partitions = committed;
            let mut commit = OffsetCommitRequest::default();
            commit.group_id = GroupId(s("group"));
            commit.generation_id_or_member_epoch = -1;
            commit.topics = vec![topic];
            let response: OffsetCommitResponse =
                call(b, ApiKey::OffsetCommit, max(ApiKey::OffsetCommit), &commit)
                    .await
                    .expect("answered");
            assert_eq!(response.topics[0].partitions[0].error_code, 0);
            let delete = |group: &str| {
                let mut partition = offset_delete_request::OffsetDeleteRequestPartition::default();
                partition.partition_index = 0;
                let mut topic = offset_delete_request::OffsetDeleteRequestTopic::default();
                topic.name = topic_name(TOPIC);
                topic.partitions = vec![partition];
                let mut request = OffsetDeleteRequest::default();
                request.group_id = GroupId(s(group));
                request.topics = vec![topic];
                request
            };
            let response: OffsetDeleteResponse =
                call(b, key, version, &delete("group")).await.expect("answered");
            assert_eq!(response.error_code, 0);
            assert_eq!(response.topics[0].partitions[0].error_code, 0);
            let response: OffsetDeleteResponse =
                call(b, key, version, &delete("unknown")).await.expect("answered");
            assert_eq!(response.error_code, 69, "GROUP_ID_NOT_FOUND");
            let mut fetched = offset_fetch_request::OffsetFetchRequestTopic::default();
            fetched.name = topic_name(TOPIC);
            fetched.partition_indexes = vec![0, 1];
            let mut fetch = OffsetFetchRequest::default();
            fetch.group_id = GroupId(s("group"));
            fetch.topics = Some(vec![fetched]);
            let response: OffsetFetchResponse =
                call(b, ApiKey::OffsetFetch, 7, &fetch).await.expect("answered");
            let offsets: Vec<i64> = response.topics[0]
                .partitions
                .iter()
                .map(|p| p.committed_offset)
                .collect();
            assert_eq!(
                offsets,
                vec![-1, 42],
                "partition 0's offset deleted, partition 1's kept"
            );
        }
        ApiKey::SaslHandshake => {
            // In process (no SASL listener): as Kafka answers a handshake outside an authentication.
            let mut request = SaslHandshakeRequest::default();
            request.mechanism = s("SCRAM-SHA-512");
            let response: SaslHandshakeResponse = call(b, key, version, &request).await.expect("answered");
            assert_eq!(response.error_code, 34, "ILLEGAL_SASL_STATE");
        }
        ApiKey::SaslAuthenticate => {
            let mut request = SaslAuthenticateRequest::default();
            request.auth_bytes = Bytes::from_static(b"n,,n=alice,r=abc");
            let response: SaslAuthenticateResponse = call(b, key, version, &request).await.expect("answered");
            assert_eq!(response.error_code, 34, "ILLEGAL_SASL_STATE");
        }
        ApiKey::AlterUserScramCredentials => {
            let upsert = |name: &str, mechanism: i8, iterations: i32| {
                let mut upsertion = alter_user_scram_credentials_request::ScramCredentialUpsertion::default();
                upsertion.name = s(name);
                upsertion.mechanism = mechanism;
                upsertion.iterations = iterations;
                upsertion.salt = Bytes::from_static(b"salt");
                upsertion.salted_password = Bytes::from_static(&[7; 32]);
                upsertion
            };
            let mut request = AlterUserScramCredentialsRequest::default();
            request.upsertions = vec![
                upsert("alice", 1, 4096),
                upsert("bob", 3, 4096),
                upsert("carol", 2, 100),
                upsert("dave", 2, 8192),
                upsert("dave", 2, 8192),
            ];
            let mut deletion = alter_user_scram_credentials_request::ScramCredentialDeletion::default();
            deletion.name = s("erin");
            deletion.mechanism = 1;
            request.deletions = vec![deletion];
            let response: AlterUserScramCredentialsResponse =
                call(b, key, version, &request).await.expect("answered");
            let codes: Vec<(&str, i16)> = response
                .results
                .iter()
                .map(|result| (result.user.as_str(), result.error_code))
                .collect();
            assert_eq!(
                codes,
                vec![("erin", 91), ("alice", 0), ("bob", 33), ("carol", 93), ("dave", 92)],
                "RESOURCE_NOT_FOUND, ok, UNSUPPORTED_SASL_MECHANISM, UNACCEPTABLE_CREDENTIAL, DUPLICATE_RESOURCE"
            );
            let described: DescribeUserScramCredentialsResponse = call(
                b,
                ApiKey::DescribeUserScramCredentials,
                0,
                &DescribeUserScramCredentialsRequest::default(),
            )
            .await
            .expect("answered");
            let users: Vec<&str> = described
                .results
                .iter()
                .map(|result| result.user.as_str())
                .collect();
            assert_eq!(users, vec!["alice"], "only alice's change applied");
        }
        ApiKey::DescribeUserScramCredentials => {
            let mut request = DescribeUserScramCredentialsRequest::default();
            let name = |text: &str| {
                let mut user = describe_user_scram_credentials_request::UserName::default();
                user.name = s(text);
                user
            };
            request.users = Some(vec![name("nobody"), name("twice"), name("twice")]);
            let response: DescribeUserScramCredentialsResponse =
                call(b, key, version, &request).await.expect("answered");
            let codes: Vec<(&str, i16)> = response
                .results
                .iter()
                .map(|result| (result.user.as_str(), result.error_code))
                .collect();
            assert_eq!(codes, vec![("nobody", 91), ("twice", 92)]);
        }
        ApiKey::CreateAcls | ApiKey::DescribeAcls | ApiKey::DeleteAcls => acl_scenario(b, key, version).await,
        other => panic!("{other:?} is advertised but this test has no scenario for it: add one"),
    }
    broker.close().await.expect("close");
}

/// The ACL APIs: SECURITY_DISABLED without an authorizer; with one, a super user's valid and invalid creations,
/// filters and deletions (INVALID_REQUEST for the invalid ones).
async fn acl_scenario(b: &Node, key: ApiKey, version: i16) {
    let admin = broker::Caller {
        principal: kafka_auth::Principal::user("admin"),
        authorizer: Some(std::sync::Arc::new(kafka_auth::acl::AuthorizerConfig {
            super_users: ["User:admin".to_owned()].into(),
            allow_everyone_if_no_acl_found: false,
        })),
        ..broker::Caller::anonymous(b)
    };
    let creation = |resource_type: i8| {
        let mut creation = create_acls_request::AclCreation::default();
        creation.resource_type = resource_type;
        creation.resource_name = s(TOPIC);
        creation.resource_pattern_type = 3;
        creation.principal = s("User:alice");
        creation.host = s("*");
        creation.operation = 3;
        creation.permission_type = 3;
        creation
    };
    let mut create = CreateAclsRequest::default();
    create.creations = vec![creation(2), creation(0)];
    let filter = |resource_type: i8| {
        let mut filter = delete_acls_request::DeleteAclsFilter::default();
        filter.resource_type_filter = resource_type;
        filter.resource_name_filter = None;
        filter.pattern_type_filter = 1;
        filter.principal_filter = None;
        filter.host_filter = None;
        filter.operation = 1;
        filter.permission_type = 1;
        filter
    };
    match key {
        ApiKey::CreateAcls => {
            let response: CreateAclsResponse = call(b, key, version, &create).await.expect("answered");
            let codes: Vec<i16> = response.results.iter().map(|result| result.error_code).collect();
            assert_eq!(codes, vec![54, 54], "no authorizer: SECURITY_DISABLED");
            let response: CreateAclsResponse = common::call_as(b, &admin, key, version, &create)
                .await
                .expect("answered");
            let codes: Vec<i16> = response.results.iter().map(|result| result.error_code).collect();
            assert_eq!(codes, vec![0, 42]);
        }
        ApiKey::DescribeAcls => {
            let _: CreateAclsResponse = common::call_as(b, &admin, ApiKey::CreateAcls, 3, &create)
                .await
                .expect("answered");
            let mut describe = DescribeAclsRequest::default();
            describe.resource_type_filter = 1;
            describe.resource_name_filter = None;
            describe.pattern_type_filter = 1;
            describe.principal_filter = None;
            describe.host_filter = None;
            describe.operation = 1;
            describe.permission_type = 1;
            let response: DescribeAclsResponse = common::call_as(b, &admin, key, version, &describe)
                .await
                .expect("answered");
            assert_eq!((response.error_code, response.resources.len()), (0, 1));
            describe.resource_type_filter = 0;
            let response: DescribeAclsResponse = common::call_as(b, &admin, key, version, &describe)
                .await
                .expect("answered");
            assert_eq!(response.error_code, 42);
        }
        _ => {
            let _: CreateAclsResponse = common::call_as(b, &admin, ApiKey::CreateAcls, 3, &create)
                .await
                .expect("answered");
            let mut delete = DeleteAclsRequest::default();
            delete.filters = vec![filter(1), filter(0)];
            let response: DeleteAclsResponse = common::call_as(b, &admin, key, version, &delete)
                .await
                .expect("answered");
            let outcome: Vec<(i16, usize)> = response
                .filter_results
                .iter()
                .map(|result| (result.error_code, result.matching_acls.len()))
                .collect();
            assert_eq!(outcome, vec![(0, 1), (42, 0)]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_advertised_version_answers_with_a_response_that_encodes() {
    let mut failures = Vec::new();
    for &(key, low, high) in broker::versions::ADVERTISED {
        for version in low..=high {
            // A task per pair, so that one failure does not hide the others.
            if let Err(error) = tokio::spawn(scenario(key, version)).await {
                let message = error.into_panic();
                let message = message
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| message.downcast_ref::<&str>().map(|text| (*text).to_owned()))
                    .unwrap_or_default();
                failures.push(format!("{key:?} v{version}: {message}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} pairs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// One member's whole life in a group — join (with MEMBER_ID_REQUIRED first from JoinGroup v4), sync as the
/// leader, heartbeat, commit at its generation, leave — with `key` at `version` and the other APIs at their
/// highest version.
async fn group_cycle(b: &Node, key: ApiKey, version: i16) {
    let at = |api: ApiKey| if api == key { version } else { max(api) };
    let mut join = join_request();
    let join_version = at(ApiKey::JoinGroup);
    let mut joined: JoinGroupResponse = call(b, ApiKey::JoinGroup, join_version, &join)
        .await
        .expect("answered");
    if join_version >= 4 {
        assert_eq!(joined.error_code, 79, "MEMBER_ID_REQUIRED");
        join.member_id = joined.member_id.clone();
        joined = call(b, ApiKey::JoinGroup, join_version, &join)
            .await
            .expect("answered");
    }
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.leader, joined.member_id);
    assert_eq!(joined.members.len(), 1);
    let member = joined.member_id.clone();
    let generation = joined.generation_id;

    let sync = sync_request(&member, generation);
    let synced: SyncGroupResponse = call(b, ApiKey::SyncGroup, at(ApiKey::SyncGroup), &sync)
        .await
        .expect("answered");
    assert_eq!(synced.error_code, 0);
    assert_eq!(synced.assignment, Bytes::from_static(b"orders-0,orders-1"));

    let mut heartbeat = HeartbeatRequest::default();
    heartbeat.group_id = GroupId(s("group"));
    heartbeat.generation_id = generation;
    heartbeat.member_id = member.clone();
    let beat: HeartbeatResponse = call(b, ApiKey::Heartbeat, at(ApiKey::Heartbeat), &heartbeat)
        .await
        .expect("answered");
    assert_eq!(beat.error_code, 0);
    heartbeat.generation_id = generation + 1;
    let stale: HeartbeatResponse = call(b, ApiKey::Heartbeat, at(ApiKey::Heartbeat), &heartbeat)
        .await
        .expect("answered");
    assert_eq!(stale.error_code, 22, "ILLEGAL_GENERATION");

    let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
    partition.committed_offset = 7;
    let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
    topic.name = topic_name(TOPIC);
    topic.partitions = vec![partition];
    let mut commit = OffsetCommitRequest::default();
    commit.group_id = GroupId(s("group"));
    commit.generation_id_or_member_epoch = -1;
    commit.topics = vec![topic];
    let simple: OffsetCommitResponse = call(b, ApiKey::OffsetCommit, max(ApiKey::OffsetCommit), &commit)
        .await
        .expect("answered");
    assert_eq!(
        simple.topics[0].partitions[0].error_code, 25,
        "UNKNOWN_MEMBER_ID: the group has a member"
    );
    commit.generation_id_or_member_epoch = generation;
    commit.member_id = member.clone();
    let current: OffsetCommitResponse = call(b, ApiKey::OffsetCommit, max(ApiKey::OffsetCommit), &commit)
        .await
        .expect("answered");
    assert_eq!(current.topics[0].partitions[0].error_code, 0);

    let leave_version = at(ApiKey::LeaveGroup);
    let mut leave = LeaveGroupRequest::default();
    leave.group_id = GroupId(s("group"));
    if leave_version < 3 {
        leave.member_id = member.clone();
    } else {
        let mut identity = leave_group_request::MemberIdentity::default();
        identity.member_id = member.clone();
        leave.members = vec![identity];
    }
    let left: LeaveGroupResponse = call(b, ApiKey::LeaveGroup, leave_version, &leave)
        .await
        .expect("answered");
    assert_eq!(left.error_code, 0);
    if leave_version >= 3 {
        assert_eq!(left.members[0].error_code, 0);
    }
    let again: HeartbeatResponse = call(b, ApiKey::Heartbeat, at(ApiKey::Heartbeat), &heartbeat)
        .await
        .expect("answered");
    assert_eq!(again.error_code, 25, "UNKNOWN_MEMBER_ID after leaving");
}

/// A group `group` with one member, stable with the assignment `orders-0,orders-1`: the member id and generation.
async fn stable_member(b: &Node) -> (StrBytes, i32) {
    let joined: JoinGroupResponse = call(b, ApiKey::JoinGroup, 3, &join_request())
        .await
        .expect("answered");
    assert_eq!(joined.error_code, 0);
    let sync = sync_request(&joined.member_id, joined.generation_id);
    let synced: SyncGroupResponse = call(b, ApiKey::SyncGroup, 3, &sync).await.expect("answered");
    assert_eq!(synced.error_code, 0);
    (joined.member_id, joined.generation_id)
}

/// A new member's JoinGroup for `group` (protocol `range`).
fn join_request() -> JoinGroupRequest {
    let mut protocol = join_group_request::JoinGroupRequestProtocol::default();
    protocol.name = s("range");
    protocol.metadata = Bytes::from_static(b"subscription");
    let mut join = JoinGroupRequest::default();
    join.group_id = GroupId(s("group"));
    join.session_timeout_ms = 10_000;
    join.rebalance_timeout_ms = 10_000;
    join.protocol_type = s("consumer");
    join.protocols = vec![protocol];
    join
}

/// The leader's SyncGroup assigning it `orders-0,orders-1`.
fn sync_request(member: &StrBytes, generation: i32) -> SyncGroupRequest {
    let mut assignment = sync_group_request::SyncGroupRequestAssignment::default();
    assignment.member_id = member.clone();
    assignment.assignment = Bytes::from_static(b"orders-0,orders-1");
    let mut sync = SyncGroupRequest::default();
    sync.group_id = GroupId(s("group"));
    sync.generation_id = generation;
    sync.member_id = member.clone();
    sync.protocol_type = Some(s("consumer"));
    sync.protocol_name = Some(s("range"));
    sync.assignments = vec![assignment];
    sync
}
