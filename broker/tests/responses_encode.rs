//! Property: whatever sequence of requests a client sends — known and unknown topics and partitions, any
//! producer ids, epochs and sequences, corrupt batches, transactions in any order, every advertised version of
//! each API — every answer the broker builds encodes at the request's version and decodes again as a client reads
//! it. `kafka-protocol`'s encoder refuses a response that sets a field its version lacks; the broker would close
//! the client's connection instead of answering (aiokafka's ListOffsets v1–v3 once did).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use broker::Node;
use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use proptest::prelude::*;
use record_format::BatchBuilder;

const TOPICS: [&str; 2] = ["orders", "missing"];
const TXNS: [&str; 2] = ["txn-a", "txn-b"];
const GROUPS: [&str; 2] = ["group-a", "group-b"];

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn topic_name(text: &str) -> TopicName {
    TopicName(s(text))
}

async fn broker() -> Node {
    common::memory_broker(&[(TOPICS[0], 2)]).await
}

/// One request a client may send.
#[derive(Debug, Clone)]
enum Op {
    Produce {
        version: i16,
        topic: usize,
        partition: i32,
        producer: Option<(i64, i16, i32)>,
        transactional: Option<usize>,
        acks: i16,
        corrupt: bool,
    },
    Fetch {
        version: i16,
        partition: i32,
        offset: i64,
        isolation: i8,
    },
    ListOffsets {
        version: i16,
        partition: i32,
        timestamp: i64,
        isolation: i8,
    },
    Metadata {
        version: i16,
        named: Option<usize>,
    },
    InitProducerId {
        version: i16,
        txn: Option<usize>,
        timeout_ms: i32,
        producer: (i64, i16),
    },
    AddPartitions {
        version: i16,
        txn: usize,
        producer: (i64, i16),
        topic: usize,
        partition: i32,
    },
    AddOffsets {
        version: i16,
        txn: usize,
        producer: (i64, i16),
        group: usize,
    },
    EndTxn {
        version: i16,
        txn: usize,
        producer: (i64, i16),
        committed: bool,
    },
    TxnOffsetCommit {
        version: i16,
        txn: usize,
        producer: (i64, i16),
        group: usize,
        offset: i64,
    },
    OffsetCommit {
        version: i16,
        group: usize,
        topic: usize,
        offset: i64,
    },
    OffsetFetch {
        version: i16,
        group: usize,
        all: bool,
    },
    FindCoordinator {
        version: i16,
        key_type: i8,
    },
    CreateTopics {
        version: i16,
        partitions: i32,
        replication: i16,
        validate_only: bool,
    },
    ApiVersions {
        version: i16,
    },
    DeleteRecords {
        version: i16,
        topic: usize,
        partition: i32,
        offset: i64,
    },
}

fn version(key: ApiKey) -> impl Strategy<Value = i16> {
    let (low, high) = broker::versions::range(key).expect("advertised");
    low..=high
}

fn producer() -> impl Strategy<Value = (i64, i16)> {
    (0i64..3, 0i16..3)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (version(ApiKey::Produce), 0..2usize, -1i32..3, proptest::option::of((0i64..3, 0i16..3, 0i32..6)),
              proptest::option::of(0..2usize), prop_oneof![Just(-1i16), Just(0), Just(1)], proptest::bool::weighted(0.1))
            .prop_map(|(version, topic, partition, producer, transactional, acks, corrupt)| Op::Produce {
                version, topic, partition, producer, transactional, acks, corrupt }),
        2 => (version(ApiKey::Fetch), -1i32..3, -2i64..12, 0i8..2)
            .prop_map(|(version, partition, offset, isolation)| Op::Fetch { version, partition, offset, isolation }),
        2 => (version(ApiKey::ListOffsets), -1i32..3,
              prop_oneof![Just(-7i64), Just(-3), Just(-2), Just(-1), 0i64..5, Just(4_000_000_000_000)], 0i8..2)
            .prop_map(|(version, partition, timestamp, isolation)| Op::ListOffsets { version, partition, timestamp, isolation }),
        1 => (version(ApiKey::Metadata), proptest::option::of(0..2usize))
            .prop_map(|(version, named)| Op::Metadata { version, named }),
        2 => (version(ApiKey::InitProducerId), proptest::option::of(0..2usize), prop_oneof![Just(60_000), Just(i32::MAX)], producer())
            .prop_map(|(version, txn, timeout_ms, producer)| Op::InitProducerId { version, txn, timeout_ms, producer }),
        2 => (version(ApiKey::AddPartitionsToTxn), 0..2usize, producer(), 0..2usize, -1i32..3)
            .prop_map(|(version, txn, producer, topic, partition)| Op::AddPartitions { version, txn, producer, topic, partition }),
        1 => (version(ApiKey::AddOffsetsToTxn), 0..2usize, producer(), 0..2usize)
            .prop_map(|(version, txn, producer, group)| Op::AddOffsets { version, txn, producer, group }),
        2 => (version(ApiKey::EndTxn), 0..2usize, producer(), any::<bool>())
            .prop_map(|(version, txn, producer, committed)| Op::EndTxn { version, txn, producer, committed }),
        1 => (version(ApiKey::TxnOffsetCommit), 0..2usize, producer(), 0..2usize, -1i64..5)
            .prop_map(|(version, txn, producer, group, offset)| Op::TxnOffsetCommit { version, txn, producer, group, offset }),
        1 => (version(ApiKey::OffsetCommit), 0..2usize, 0..2usize, -1i64..5)
            .prop_map(|(version, group, topic, offset)| Op::OffsetCommit { version, group, topic, offset }),
        1 => (version(ApiKey::OffsetFetch), 0..2usize, any::<bool>())
            .prop_map(|(version, group, all)| Op::OffsetFetch { version, group, all }),
        1 => (version(ApiKey::FindCoordinator), 0i8..3)
            .prop_map(|(version, key_type)| Op::FindCoordinator { version, key_type }),
        1 => (version(ApiKey::CreateTopics), -1i32..3, -1i16..3, any::<bool>())
            .prop_map(|(version, partitions, replication, validate_only)| Op::CreateTopics { version, partitions, replication, validate_only }),
        1 => version(ApiKey::ApiVersions).prop_map(|version| Op::ApiVersions { version }),
        1 => (version(ApiKey::DeleteRecords), 0..2usize, -1i32..3, -2i64..12)
            .prop_map(|(version, topic, partition, offset)| Op::DeleteRecords { version, topic, partition, offset }),
    ]
}

fn records(producer: Option<(i64, i16, i32)>, transactional: bool, corrupt: bool) -> Bytes {
    let mut builder = BatchBuilder::new().transactional(transactional);
    if let Some((id, epoch, sequence)) = producer {
        builder = builder.producer(id, epoch, sequence);
    }
    builder.add(
        1_700_000_000_000,
        Some(b"key"),
        Some(b"value"),
        &[("h", Some(b"v"))],
    );
    let mut bytes = builder.build().expect("batch").into_bytes().to_vec();
    if corrupt {
        if let Some(last) = bytes.last_mut() {
            *last ^= 0xff;
        }
    }
    Bytes::from(bytes)
}

async fn run(broker: &Node, op: Op) {
    match op {
        Op::Produce {
            version,
            topic,
            partition,
            producer,
            transactional,
            acks,
            corrupt,
        } => {
            let mut data = produce_request::PartitionProduceData::default();
            data.index = partition;
            data.records = Some(records(producer, transactional.is_some(), corrupt));
            let mut topic_data = produce_request::TopicProduceData::default();
            topic_data.name = topic_name(TOPICS[topic]);
            topic_data.partition_data = vec![data];
            let mut request = ProduceRequest::default();
            request.transactional_id = transactional.map(|txn| TransactionalId(s(TXNS[txn])));
            request.acks = acks;
            request.timeout_ms = 1_000;
            request.topic_data = vec![topic_data];
            common::call::<_, ProduceResponse>(broker, ApiKey::Produce, version, &request).await;
        }
        Op::Fetch {
            version,
            partition,
            offset,
            isolation,
        } => {
            let mut wanted = fetch_request::FetchPartition::default();
            wanted.partition = partition;
            wanted.fetch_offset = offset;
            wanted.partition_max_bytes = 1 << 16;
            let mut topic = fetch_request::FetchTopic::default();
            topic.topic = topic_name(TOPICS[0]);
            topic.partitions = vec![wanted];
            let mut request = FetchRequest::default();
            request.replica_id = BrokerId(-1);
            request.max_bytes = 1 << 20;
            request.isolation_level = isolation;
            request.topics = vec![topic];
            common::call::<_, FetchResponse>(broker, ApiKey::Fetch, version, &request).await;
        }
        Op::ListOffsets {
            version,
            partition,
            timestamp,
            isolation,
        } => {
            let mut wanted = list_offsets_request::ListOffsetsPartition::default();
            wanted.partition_index = partition;
            wanted.timestamp = timestamp;
            let mut topic = list_offsets_request::ListOffsetsTopic::default();
            topic.name = topic_name(TOPICS[0]);
            topic.partitions = vec![wanted];
            let mut request = ListOffsetsRequest::default();
            request.replica_id = BrokerId(-1);
            if version >= 2 {
                request.isolation_level = isolation;
            }
            request.topics = vec![topic];
            common::call::<_, ListOffsetsResponse>(broker, ApiKey::ListOffsets, version, &request).await;
        }
        Op::Metadata { version, named } => {
            let mut request = MetadataRequest::default();
            request.topics = named.map(|index| {
                let mut topic = metadata_request::MetadataRequestTopic::default();
                topic.name = Some(topic_name(TOPICS[index]));
                vec![topic]
            });
            if version >= 4 {
                request.allow_auto_topic_creation = false;
            }
            common::call::<_, MetadataResponse>(broker, ApiKey::Metadata, version, &request).await;
        }
        Op::InitProducerId {
            version,
            txn,
            timeout_ms,
            producer,
        } => {
            let mut request = InitProducerIdRequest::default();
            request.transactional_id = txn.map(|txn| TransactionalId(s(TXNS[txn])));
            request.transaction_timeout_ms = timeout_ms;
            if version >= 3 {
                request.producer_id = ProducerId(producer.0);
                request.producer_epoch = producer.1;
            }
            common::call::<_, InitProducerIdResponse>(broker, ApiKey::InitProducerId, version, &request)
                .await;
        }
        Op::AddPartitions {
            version,
            txn,
            producer,
            topic,
            partition,
        } => {
            let mut wanted = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
            wanted.name = topic_name(TOPICS[topic]);
            wanted.partitions = vec![partition];
            let mut request = AddPartitionsToTxnRequest::default();
            request.v3_and_below_transactional_id = TransactionalId(s(TXNS[txn]));
            request.v3_and_below_producer_id = ProducerId(producer.0);
            request.v3_and_below_producer_epoch = producer.1;
            request.v3_and_below_topics = vec![wanted];
            common::call::<_, AddPartitionsToTxnResponse>(
                broker,
                ApiKey::AddPartitionsToTxn,
                version,
                &request,
            )
            .await;
        }
        Op::AddOffsets {
            version,
            txn,
            producer,
            group,
        } => {
            let mut request = AddOffsetsToTxnRequest::default();
            request.transactional_id = TransactionalId(s(TXNS[txn]));
            request.producer_id = ProducerId(producer.0);
            request.producer_epoch = producer.1;
            request.group_id = GroupId(s(GROUPS[group]));
            common::call::<_, AddOffsetsToTxnResponse>(broker, ApiKey::AddOffsetsToTxn, version, &request)
                .await;
        }
        Op::EndTxn {
            version,
            txn,
            producer,
            committed,
        } => {
            let mut request = EndTxnRequest::default();
            request.transactional_id = TransactionalId(s(TXNS[txn]));
            request.producer_id = ProducerId(producer.0);
            request.producer_epoch = producer.1;
            request.committed = committed;
            common::call::<_, EndTxnResponse>(broker, ApiKey::EndTxn, version, &request).await;
        }
        Op::TxnOffsetCommit {
            version,
            txn,
            producer,
            group,
            offset,
        } => {
            let mut partition = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
            partition.committed_offset = offset;
            let mut topic = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
            topic.name = topic_name(TOPICS[0]);
            topic.partitions = vec![partition];
            let mut request = TxnOffsetCommitRequest::default();
            request.transactional_id = TransactionalId(s(TXNS[txn]));
            request.group_id = GroupId(s(GROUPS[group]));
            request.producer_id = ProducerId(producer.0);
            request.producer_epoch = producer.1;
            request.topics = vec![topic];
            common::call::<_, TxnOffsetCommitResponse>(broker, ApiKey::TxnOffsetCommit, version, &request)
                .await;
        }
        Op::OffsetCommit {
            version,
            group,
            topic,
            offset,
        } => {
            let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
            partition.committed_offset = offset;
            let mut wanted = offset_commit_request::OffsetCommitRequestTopic::default();
            wanted.name = topic_name(TOPICS[topic]);
            wanted.partitions = vec![partition];
            let mut request = OffsetCommitRequest::default();
            request.group_id = GroupId(s(GROUPS[group]));
            request.generation_id_or_member_epoch = -1;
            request.topics = vec![wanted];
            common::call::<_, OffsetCommitResponse>(broker, ApiKey::OffsetCommit, version, &request).await;
        }
        Op::OffsetFetch { version, group, all } => {
            let mut request = OffsetFetchRequest::default();
            if version >= 8 {
                let mut batched = offset_fetch_request::OffsetFetchRequestGroup::default();
                batched.group_id = GroupId(s(GROUPS[group]));
                batched.topics = (!all).then(|| {
                    let mut topic = offset_fetch_request::OffsetFetchRequestTopics::default();
                    topic.name = topic_name(TOPICS[0]);
                    topic.partition_indexes = vec![0, 1, 5];
                    vec![topic]
                });
                request.groups = vec![batched];
            } else {
                request.group_id = GroupId(s(GROUPS[group]));
                request.topics = if all && version >= 2 {
                    None
                } else {
                    let mut topic = offset_fetch_request::OffsetFetchRequestTopic::default();
                    topic.name = topic_name(TOPICS[0]);
                    topic.partition_indexes = vec![0, 1, 5];
                    Some(vec![topic])
                };
            }
            common::call::<_, OffsetFetchResponse>(broker, ApiKey::OffsetFetch, version, &request).await;
        }
        Op::FindCoordinator { version, key_type } => {
            let mut request = FindCoordinatorRequest::default();
            if version >= 4 {
                request.coordinator_keys = vec![s(GROUPS[0]), s(GROUPS[1])];
            } else {
                request.key = s(GROUPS[0]);
            }
            if version >= 1 {
                request.key_type = key_type;
            }
            common::call::<_, FindCoordinatorResponse>(broker, ApiKey::FindCoordinator, version, &request)
                .await;
        }
        Op::CreateTopics {
            version,
            partitions,
            replication,
            validate_only,
        } => {
            let mut topic = create_topics_request::CreatableTopic::default();
            topic.name = topic_name(&format!("created-{partitions}-{replication}"));
            topic.num_partitions = partitions;
            topic.replication_factor = replication;
            let mut request = CreateTopicsRequest::default();
            request.timeout_ms = 1_000;
            request.validate_only = validate_only;
            request.topics = vec![topic];
            common::call::<_, CreateTopicsResponse>(broker, ApiKey::CreateTopics, version, &request).await;
        }
        Op::ApiVersions { version } => {
            let mut request = ApiVersionsRequest::default();
            if version >= 3 {
                request.client_software_name = s("property");
                request.client_software_version = s("1");
            }
            common::call::<_, ApiVersionsResponse>(broker, ApiKey::ApiVersions, version, &request).await;
        }
        Op::DeleteRecords {
            version,
            topic,
            partition,
            offset,
        } => {
            let mut wanted = delete_records_request::DeleteRecordsPartition::default();
            wanted.partition_index = partition;
            wanted.offset = offset;
            let mut delete_topic = delete_records_request::DeleteRecordsTopic::default();
            delete_topic.name = topic_name(TOPICS[topic]);
            delete_topic.partitions = vec![wanted];
            let mut request = DeleteRecordsRequest::default();
            request.timeout_ms = 1_000;
            request.topics = vec![delete_topic];
            common::call::<_, DeleteRecordsResponse>(broker, ApiKey::DeleteRecords, version, &request).await;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_answer_to_any_request_sequence_encodes_at_the_requests_version(ops in proptest::collection::vec(op(), 1..30)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            let broker = broker().await;
            for op in ops {
                run(&broker, op).await;
            }
            broker.close().await.expect("close");
        });
    }
}
