//! The response layouts against `kafka-protocol`'s own encoder: every version a client checks, encoded there with
//! every array holding two elements and every nullable field set, walks to exactly its last byte; every cut of it
//! is refused, and so is a count larger than the bytes left.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_shape::{check_response, ShapeError};

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn encode<M: Encodable>(message: &M, version: i16) -> Bytes {
    let mut body = BytesMut::new();
    message.encode(&mut body, version).unwrap();
    body.freeze()
}

fn api_versions(version: i16) -> Bytes {
    let mut response = ApiVersionsResponse::default();
    response.error_code = 35;
    response.api_keys = (0..2)
        .map(|index| {
            let mut api = api_versions_response::ApiVersion::default();
            api.api_key = index;
            api.min_version = 1;
            api.max_version = 9;
            api
        })
        .collect();
    if version >= 1 {
        response.throttle_time_ms = 5;
    }
    encode(&response, version)
}

fn metadata(version: i16) -> Bytes {
    let mut response = MetadataResponse::default();
    if version >= 3 {
        response.throttle_time_ms = 5;
    }
    response.brokers = (0..2)
        .map(|index| {
            let mut broker = metadata_response::MetadataResponseBroker::default();
            broker.node_id = BrokerId(index);
            broker.host = s("broker.example");
            broker.port = 9092;
            broker.rack = Some(s("rack-a"));
            broker
        })
        .collect();
    response.cluster_id = Some(s("the-cluster"));
    response.controller_id = BrokerId(1);
    response.topics = (0..2)
        .map(|index| {
            let mut topic = metadata_response::MetadataResponseTopic::default();
            // At v12 a topic asked by id may come back without a name (the id, all zero here, is 16 bytes
            // from v10 either way).
            topic.name = (version < 12 || index == 0).then(|| TopicName(s(&format!("topic-{index}"))));
            topic.is_internal = true;
            topic.partitions = (0..2)
                .map(|partition_index| {
                    let mut partition = metadata_response::MetadataResponsePartition::default();
                    partition.partition_index = partition_index;
                    partition.leader_id = BrokerId(1);
                    if version >= 7 {
                        partition.leader_epoch = 4;
                    }
                    partition.replica_nodes = vec![BrokerId(0), BrokerId(1)];
                    partition.isr_nodes = vec![BrokerId(0), BrokerId(1)];
                    if version >= 5 {
                        partition.offline_replicas = vec![BrokerId(2), BrokerId(3)];
                    }
                    partition
                })
                .collect();
            if version >= 8 {
                topic.topic_authorized_operations = 7;
            }
            topic
        })
        .collect();
    if (8..=10).contains(&version) {
        response.cluster_authorized_operations = 7;
    }
    encode(&response, version)
}

fn fetch(version: i16) -> Bytes {
    let mut response = FetchResponse::default();
    response.throttle_time_ms = 5;
    if version >= 7 {
        response.session_id = 3;
    }
    response.responses = (0..2)
        .map(|index| {
            let mut topic = fetch_response::FetchableTopicResponse::default();
            if version >= 13 {
                topic.topic_id = uuid::Uuid::from_bytes([index as u8 + 1; 16]);
            } else {
                topic.topic = TopicName(s(&format!("topic-{index}")));
            }
            topic.partitions = (0..2)
                .map(|partition_index| {
                    let mut data = fetch_response::PartitionData::default();
                    data.partition_index = partition_index;
                    data.high_watermark = 100;
                    if version >= 4 {
                        data.last_stable_offset = 90;
                        data.aborted_transactions = Some(
                            (0..2)
                                .map(|first| {
                                    let mut aborted = fetch_response::AbortedTransaction::default();
                                    aborted.producer_id = ProducerId(7);
                                    aborted.first_offset = first;
                                    aborted
                                })
                                .collect(),
                        );
                    }
                    if version >= 5 {
                        data.log_start_offset = 2;
                    }
                    if version >= 11 {
                        data.preferred_read_replica = BrokerId(1);
                    }
                    if version >= 12 {
                        // Tagged fields (KIP-482): walked as a tagged section, never decoded here.
                        data.diverging_epoch.epoch = 3;
                        data.diverging_epoch.end_offset = 40;
                        data.current_leader.leader_id = BrokerId(2);
                    }
                    data.records = Some(Bytes::from_static(b"not decoded here"));
                    data
                })
                .collect();
            topic
        })
        .collect();
    encode(&response, version)
}

fn list_offsets(version: i16) -> Bytes {
    let mut response = ListOffsetsResponse::default();
    if version >= 2 {
        response.throttle_time_ms = 5;
    }
    response.topics = (0..2)
        .map(|index| {
            let mut topic = list_offsets_response::ListOffsetsTopicResponse::default();
            topic.name = TopicName(s(&format!("topic-{index}")));
            topic.partitions = (0..2)
                .map(|partition_index| {
                    let mut answer = list_offsets_response::ListOffsetsPartitionResponse::default();
                    answer.partition_index = partition_index;
                    answer.timestamp = 1_000;
                    answer.offset = 42;
                    if version >= 4 {
                        answer.leader_epoch = 3;
                    }
                    answer
                })
                .collect();
            topic
        })
        .collect();
    encode(&response, version)
}

fn list_groups(version: i16) -> Bytes {
    let mut response = ListGroupsResponse::default();
    response.groups = ["readers", "writers"]
        .iter()
        .map(|name| {
            let mut group = list_groups_response::ListedGroup::default();
            group.group_id = GroupId(s(name));
            group.protocol_type = s("consumer");
            group
        })
        .collect();
    encode(&response, version)
}

fn offset_fetch(version: i16) -> Bytes {
    let mut response = OffsetFetchResponse::default();
    response.topics = ["orders", "payments"]
        .iter()
        .map(|name| {
            let mut topic = offset_fetch_response::OffsetFetchResponseTopic::default();
            topic.name = TopicName(s(name));
            topic.partitions = (0..2)
                .map(|index| {
                    let mut partition = offset_fetch_response::OffsetFetchResponsePartition::default();
                    partition.partition_index = index;
                    partition.committed_offset = 40 + i64::from(index);
                    partition.metadata = Some(s("meta"));
                    partition
                })
                .collect();
            topic
        })
        .collect();
    encode(&response, version)
}

fn describe_configs(version: i16) -> Bytes {
    let mut response = DescribeConfigsResponse::default();
    response.results = ["orders", "payments"]
        .iter()
        .map(|name| {
            let mut result = describe_configs_response::DescribeConfigsResult::default();
            result.error_message = Some(s("none"));
            result.resource_type = 2;
            result.resource_name = s(name);
            result.configs = ["retention.ms", "cleanup.policy"]
                .iter()
                .map(|config| {
                    let mut entry = describe_configs_response::DescribeConfigsResourceResult::default();
                    entry.name = s(config);
                    entry.value = Some(s("1"));
                    entry.config_source = 1;
                    entry.synonyms = (0..2)
                        .map(|_| {
                            let mut synonym = describe_configs_response::DescribeConfigsSynonym::default();
                            synonym.name = s(config);
                            synonym.value = Some(s("2"));
                            synonym
                        })
                        .collect();
                    entry.documentation = Some(s("docs"));
                    entry
                })
                .collect();
            result
        })
        .collect();
    encode(&response, version)
}

fn describe_acls(version: i16) -> Bytes {
    let mut response = DescribeAclsResponse::default();
    response.error_message = Some(s("none"));
    response.resources = ["orders", "payments"]
        .iter()
        .map(|name| {
            let mut resource = describe_acls_response::DescribeAclsResource::default();
            resource.resource_type = 2;
            resource.resource_name = s(name);
            resource.pattern_type = 3;
            resource.acls = (0..2)
                .map(|_| {
                    let mut acl = describe_acls_response::AclDescription::default();
                    acl.principal = s("User:alice");
                    acl.host = s("*");
                    acl.operation = 3;
                    acl.permission_type = 3;
                    acl
                })
                .collect();
            resource
        })
        .collect();
    encode(&response, version)
}

/// Every (API, version, encoded response) a client checks.
fn cases() -> Vec<(ApiKey, i16, Bytes)> {
    let mut cases = Vec::new();
    for version in 0..=2 {
        cases.push((ApiKey::ApiVersions, version, api_versions(version)));
    }
    for version in 2..=12 {
        cases.push((ApiKey::Metadata, version, metadata(version)));
    }
    for version in 4..=13 {
        cases.push((ApiKey::Fetch, version, fetch(version)));
    }
    for version in 1..=5 {
        cases.push((ApiKey::ListOffsets, version, list_offsets(version)));
    }
    for version in 0..=2 {
        cases.push((ApiKey::ListGroups, version, list_groups(version)));
    }
    for version in 1..=5 {
        cases.push((ApiKey::OffsetFetch, version, offset_fetch(version)));
    }
    // kafka-protocol encodes v1 on (Kafka 4 removed v0); DescribeAcls v2 is flexible.
    cases.push((ApiKey::DescribeAcls, 1, describe_acls(1)));
    // kafka-protocol encodes v1 on (Kafka 4 removed v0).
    for version in 1..=3 {
        cases.push((ApiKey::DescribeConfigs, version, describe_configs(version)));
    }
    for version in 0..=1 {
        let mut handshake = SaslHandshakeResponse::default();
        handshake.error_code = 33;
        handshake.mechanisms = vec![s("PLAIN"), s("SCRAM-SHA-512")];
        cases.push((ApiKey::SaslHandshake, version, encode(&handshake, version)));
        let mut authenticate = SaslAuthenticateResponse::default();
        authenticate.error_message = Some(s("refused"));
        authenticate.auth_bytes = Bytes::from_static(b"r=abc,s=c2FsdA==,i=4096");
        authenticate.session_lifetime_ms = 0;
        cases.push((ApiKey::SaslAuthenticate, version, encode(&authenticate, version)));
    }
    cases
}

#[test]
fn every_checked_response_version_walks_to_its_last_byte() {
    for (key, version, body) in cases() {
        assert_eq!(check_response(key, version, &body), Ok(()), "{key:?} v{version}");
        let mut longer = body.to_vec();
        longer.push(0);
        assert_eq!(
            check_response(key, version, &longer),
            Err(ShapeError::TrailingBytes(1)),
            "{key:?} v{version}"
        );
    }
}

#[test]
fn every_cut_of_a_response_is_refused() {
    for (key, version, body) in cases() {
        for cut in 0..body.len() {
            assert!(
                check_response(key, version, &body[..cut]).is_err(),
                "{key:?} v{version} cut at {cut}"
            );
        }
    }
}

#[test]
fn a_count_of_two_billion_topics_in_a_few_bytes_is_refused_before_decoding() {
    // ListOffsets v1: the topic array's count first.
    let body = [0x7f, 0xff, 0xff, 0xff, 0, 0];
    assert!(matches!(
        check_response(ApiKey::ListOffsets, 1, &body),
        Err(ShapeError::ImpossibleCount { .. })
    ));
}

#[test]
fn flexible_and_unknown_responses_have_no_layout() {
    assert_eq!(
        check_response(ApiKey::Metadata, 13, &[]),
        Err(ShapeError::Unsupported)
    );
    assert_eq!(
        check_response(ApiKey::Fetch, 14, &[]),
        Err(ShapeError::Unsupported)
    );
    assert_eq!(
        check_response(ApiKey::DescribeAcls, 2, &[]),
        Err(ShapeError::Unsupported)
    );
    assert_eq!(
        check_response(ApiKey::DescribeConfigs, 4, &[]),
        Err(ShapeError::Unsupported)
    );
    assert_eq!(
        check_response(ApiKey::Produce, 8, &[]),
        Err(ShapeError::Unsupported)
    );
}
