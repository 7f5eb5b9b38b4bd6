//! The request shape check against `kafka-protocol`'s own encoder: every advertised version of every request,
//! encoded there with non-empty arrays and strings, walks to exactly its last byte; every truncation of it and
//! every impossible count is refused before anything is decoded.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};

use broker::shape::{self, ShapeError};
use broker::versions::ADVERTISED;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn topic(name: &str) -> TopicName {
    TopicName(s(name))
}

/// A request of `key` with something in every array, encodable at `version`.
fn sample(key: ApiKey, version: i16) -> BytesMut {
    let mut out = BytesMut::new();
    let result = match key {
        ApiKey::Produce => {
            let mut partition = produce_request::PartitionProduceData::default();
            partition.index = 2;
            partition.records = Some(Bytes::from_static(b"not-a-batch-but-bytes"));
            let mut data = produce_request::TopicProduceData::default();
            data.name = topic("orders");
            data.partition_data = vec![partition.clone(), partition];
            let mut request = ProduceRequest::default();
            request.transactional_id = Some(TransactionalId(s("tx")));
            request.acks = -1;
            request.topic_data = vec![data];
            request.encode(&mut out, version)
        }
        ApiKey::Fetch => {
            let mut partition = fetch_request::FetchPartition::default();
            partition.fetch_offset = 7;
            partition.partition_max_bytes = 1 << 20;
            let mut fetch_topic = fetch_request::FetchTopic::default();
            fetch_topic.topic = topic("orders");
            fetch_topic.partitions = vec![partition.clone(), partition];
            let mut request = FetchRequest::default();
            request.max_wait_ms = 500;
            request.topics = vec![fetch_topic];
            if version >= 7 {
                let mut forgotten = fetch_request::ForgottenTopic::default();
                forgotten.topic = topic("old");
                forgotten.partitions = vec![1, 2];
                request.forgotten_topics_data = vec![forgotten];
            }
            if version >= 11 {
                request.rack_id = s("rack-a");
            }
            request.encode(&mut out, version)
        }
        ApiKey::ListOffsets => {
            let mut partition = list_offsets_request::ListOffsetsPartition::default();
            partition.timestamp = -1;
            let mut offsets_topic = list_offsets_request::ListOffsetsTopic::default();
            offsets_topic.name = topic("orders");
            offsets_topic.partitions = vec![partition.clone(), partition];
            let mut request = ListOffsetsRequest::default();
            request.topics = vec![offsets_topic];
            request.encode(&mut out, version)
        }
        ApiKey::Metadata => {
            let mut requested = metadata_request::MetadataRequestTopic::default();
            requested.name = Some(topic("orders"));
            let mut request = MetadataRequest::default();
            request.topics = Some(vec![requested.clone(), requested]);
            request.encode(&mut out, version)
        }
        ApiKey::OffsetCommit => {
            let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
            partition.committed_offset = 42;
            partition.committed_metadata = Some(s("meta"));
            let mut commit_topic = offset_commit_request::OffsetCommitRequestTopic::default();
            commit_topic.name = topic("orders");
            commit_topic.partitions = vec![partition.clone(), partition];
            let mut request = OffsetCommitRequest::default();
            request.group_id = GroupId(s("group"));
            request.member_id = s("member");
            request.topics = vec![commit_topic];
            request.encode(&mut out, version)
        }
        ApiKey::OffsetFetch => {
            let mut fetch_topic = offset_fetch_request::OffsetFetchRequestTopic::default();
            fetch_topic.name = topic("orders");
            fetch_topic.partition_indexes = vec![0, 1, 2];
            let mut request = OffsetFetchRequest::default();
            if version >= 8 {
                let mut batched_topic = offset_fetch_request::OffsetFetchRequestTopics::default();
                batched_topic.name = topic("orders");
                batched_topic.partition_indexes = vec![0, 1, 2];
                let mut group = offset_fetch_request::OffsetFetchRequestGroup::default();
                group.group_id = GroupId(s("group"));
                group.topics = Some(vec![batched_topic]);
                let mut every = offset_fetch_request::OffsetFetchRequestGroup::default();
                every.group_id = GroupId(s("other"));
                request.groups = vec![group, every];
                request.require_stable = true;
            } else {
                request.group_id = GroupId(s("group"));
                request.topics = Some(vec![fetch_topic]);
            }
            request.encode(&mut out, version)
        }
        ApiKey::FindCoordinator => {
            let mut request = FindCoordinatorRequest::default();
            if version >= 4 {
                request.coordinator_keys = vec![s("group"), s("other")];
            } else {
                request.key = s("group");
            }
            request.encode(&mut out, version)
        }
        ApiKey::JoinGroup => {
            let mut protocol = join_group_request::JoinGroupRequestProtocol::default();
            protocol.name = s("range");
            protocol.metadata = Bytes::from_static(b"subscription");
            let mut request = JoinGroupRequest::default();
            request.group_id = GroupId(s("group"));
            request.session_timeout_ms = 10_000;
            request.member_id = s("member");
            request.group_instance_id = (version >= 5).then(|| s("instance"));
            request.protocol_type = s("consumer");
            request.protocols = vec![protocol.clone(), protocol];
            request.reason = (version >= 8).then(|| s("rebalance wanted"));
            request.encode(&mut out, version)
        }
        ApiKey::SyncGroup => {
            let mut assignment = sync_group_request::SyncGroupRequestAssignment::default();
            assignment.member_id = s("member");
            assignment.assignment = Bytes::from_static(b"partitions");
            let mut request = SyncGroupRequest::default();
            request.group_id = GroupId(s("group"));
            request.generation_id = 3;
            request.member_id = s("member");
            if version >= 5 {
                request.protocol_type = Some(s("consumer"));
                request.protocol_name = Some(s("range"));
            }
            request.assignments = vec![assignment.clone(), assignment];
            request.encode(&mut out, version)
        }
        ApiKey::DescribeGroups => {
            let mut request = DescribeGroupsRequest::default();
            request.groups = vec![GroupId(s("group")), GroupId(s("other"))];
            request.include_authorized_operations = version >= 3;
            request.encode(&mut out, version)
        }
        ApiKey::ListGroups => {
            let mut request = ListGroupsRequest::default();
            if version >= 4 {
                request.states_filter = vec![s("Stable"), s("Empty")];
            }
            if version >= 5 {
                request.types_filter = vec![s("classic")];
            }
            request.encode(&mut out, version)
        }
        ApiKey::DeleteGroups => {
            let mut request = DeleteGroupsRequest::default();
            request.groups_names = vec![GroupId(s("group")), GroupId(s("other"))];
            request.encode(&mut out, version)
        }
        ApiKey::Heartbeat => {
            let mut request = HeartbeatRequest::default();
            request.group_id = GroupId(s("group"));
            request.generation_id = 3;
            request.member_id = s("member");
            request.encode(&mut out, version)
        }
        ApiKey::LeaveGroup => {
            let mut identity = leave_group_request::MemberIdentity::default();
            identity.member_id = s("member");
            identity.group_instance_id = Some(s("instance"));
            identity.reason = (version >= 5).then(|| s("shutting down"));
            let mut request = LeaveGroupRequest::default();
            request.group_id = GroupId(s("group"));
            if version < 3 {
                request.member_id = s("member");
            } else {
                request.members = vec![identity.clone(), identity];
            }
            request.encode(&mut out, version)
        }
        ApiKey::CreateTopics => {
            let mut config = create_topics_request::CreatableTopicConfig::default();
            config.name = s("cleanup.policy");
            config.value = Some(s("delete"));
            let mut assignment = create_topics_request::CreatableReplicaAssignment::default();
            assignment.broker_ids = vec![BrokerId(0)];
            let mut creatable = create_topics_request::CreatableTopic::default();
            creatable.name = topic("orders");
            creatable.num_partitions = 3;
            creatable.replication_factor = 1;
            creatable.assignments = vec![assignment];
            creatable.configs = vec![config];
            let mut request = CreateTopicsRequest::default();
            request.topics = vec![creatable];
            request.encode(&mut out, version)
        }
        ApiKey::InitProducerId => {
            let mut request = InitProducerIdRequest::default();
            request.transactional_id = Some(TransactionalId(s("tx")));
            request.transaction_timeout_ms = 60_000;
            request.encode(&mut out, version)
        }
        ApiKey::AddPartitionsToTxn => {
            let mut txn_topic = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
            txn_topic.name = topic("orders");
            txn_topic.partitions = vec![0, 1];
            let mut request = AddPartitionsToTxnRequest::default();
            request.v3_and_below_transactional_id = TransactionalId(s("tx"));
            request.v3_and_below_topics = vec![txn_topic];
            request.encode(&mut out, version)
        }
        ApiKey::AddOffsetsToTxn => {
            let mut request = AddOffsetsToTxnRequest::default();
            request.transactional_id = TransactionalId(s("tx"));
            request.group_id = GroupId(s("group"));
            request.encode(&mut out, version)
        }
        ApiKey::EndTxn => {
            let mut request = EndTxnRequest::default();
            request.transactional_id = TransactionalId(s("tx"));
            request.committed = true;
            request.encode(&mut out, version)
        }
        ApiKey::TxnOffsetCommit => {
            let mut partition = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
            partition.committed_offset = 9;
            let mut commit_topic = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
            commit_topic.name = topic("orders");
            commit_topic.partitions = vec![partition.clone(), partition];
            let mut request = TxnOffsetCommitRequest::default();
            request.transactional_id = TransactionalId(s("tx"));
            request.group_id = GroupId(s("group"));
            request.topics = vec![commit_topic];
            request.encode(&mut out, version)
        }
        ApiKey::DeleteRecords => {
            let mut partition = delete_records_request::DeleteRecordsPartition::default();
            partition.offset = 12;
            let mut delete_topic = delete_records_request::DeleteRecordsTopic::default();
            delete_topic.name = topic("orders");
            delete_topic.partitions = vec![partition.clone(), partition];
            let mut request = DeleteRecordsRequest::default();
            request.topics = vec![delete_topic];
            request.timeout_ms = 30_000;
            request.encode(&mut out, version)
        }
        ApiKey::ApiVersions => {
            let mut request = ApiVersionsRequest::default();
            if version >= 3 {
                request.client_software_name = s("librdkafka");
                request.client_software_version = s("2.16.1");
            }
            request.encode(&mut out, version)
        }
        ApiKey::DescribeConfigs => {
            let mut named = describe_configs_request::DescribeConfigsResource::default();
            named.resource_type = 2;
            named.resource_name = s("orders");
            named.configuration_keys = Some(vec![s("retention.ms"), s("cleanup.policy")]);
            let mut all = describe_configs_request::DescribeConfigsResource::default();
            all.resource_type = 4;
            all.resource_name = s("0");
            all.configuration_keys = None;
            let mut request = DescribeConfigsRequest::default();
            request.resources = vec![named, all];
            request.include_synonyms = true;
            request.include_documentation = version >= 3;
            request.encode(&mut out, version)
        }
        ApiKey::AlterConfigs => {
            let mut set = alter_configs_request::AlterableConfig::default();
            set.name = s("retention.ms");
            set.value = Some(s("1000"));
            let mut null = alter_configs_request::AlterableConfig::default();
            null.name = s("cleanup.policy");
            null.value = None;
            let mut resource = alter_configs_request::AlterConfigsResource::default();
            resource.resource_type = 2;
            resource.resource_name = s("orders");
            resource.configs = vec![set, null];
            let mut request = AlterConfigsRequest::default();
            request.resources = vec![resource.clone(), resource];
            request.validate_only = true;
            request.encode(&mut out, version)
        }
        ApiKey::IncrementalAlterConfigs => {
            let mut set = incremental_alter_configs_request::AlterableConfig::default();
            set.name = s("cleanup.policy");
            set.config_operation = 2;
            set.value = Some(s("compact"));
            let mut delete = incremental_alter_configs_request::AlterableConfig::default();
            delete.name = s("retention.ms");
            delete.config_operation = 1;
            delete.value = None;
            let mut resource = incremental_alter_configs_request::AlterConfigsResource::default();
            resource.resource_type = 2;
            resource.resource_name = s("orders");
            resource.configs = vec![set, delete];
            let mut request = IncrementalAlterConfigsRequest::default();
            request.resources = vec![resource.clone(), resource];
            request.encode(&mut out, version)
        }
        ApiKey::DescribeProducers => {
            let mut named = describe_producers_request::TopicRequest::default();
            named.name = topic("orders");
            named.partition_indexes = vec![0, 1, 2];
            let mut request = DescribeProducersRequest::default();
            request.topics = vec![named.clone(), named];
            request.encode(&mut out, version)
        }
        ApiKey::ListTransactions => {
            let mut request = ListTransactionsRequest::default();
            request.state_filters = vec![s("Ongoing"), s("PrepareCommit")];
            request.producer_id_filters = vec![ProducerId(7), ProducerId(9)];
            if version >= 1 {
                request.duration_filter = 60_000;
            }
            request.encode(&mut out, version)
        }
        ApiKey::DescribeTransactions => {
            let mut request = DescribeTransactionsRequest::default();
            request.transactional_ids = vec![TransactionalId(s("tx")), TransactionalId(s("other"))];
            request.encode(&mut out, version)
        }
        ApiKey::DeleteTopics => {
            let mut request = DeleteTopicsRequest::default();
            if version >= 6 {
                let mut by_name = delete_topics_request::DeleteTopicState::default();
                by_name.name = Some(topic("orders"));
                let mut by_id = delete_topics_request::DeleteTopicState::default();
                by_id.topic_id = uuid::Uuid::from_bytes([7; 16]);
                request.topics = vec![by_name, by_id];
            } else {
                request.topic_names = vec![topic("orders"), topic("other")];
            }
            request.timeout_ms = 30_000;
            request.encode(&mut out, version)
        }
        ApiKey::CreatePartitions => {
            let mut grown = create_partitions_request::CreatePartitionsTopic::default();
            grown.name = topic("orders");
            grown.count = 4;
            let mut assignment = create_partitions_request::CreatePartitionsAssignment::default();
            assignment.broker_ids = vec![BrokerId(0)];
            grown.assignments = Some(vec![assignment]);
            let mut request = CreatePartitionsRequest::default();
            request.topics = vec![grown.clone(), grown];
            request.validate_only = true;
            request.encode(&mut out, version)
        }
        ApiKey::DescribeCluster => {
            let mut request = DescribeClusterRequest::default();
            request.include_cluster_authorized_operations = true;
            if version >= 1 {
                request.endpoint_type = 1;
            }
            if version >= 2 {
                request.include_fenced_brokers = true;
            }
            request.encode(&mut out, version)
        }
        ApiKey::DescribeLogDirs => {
            let mut asked = describe_log_dirs_request::DescribableLogDirTopic::default();
            asked.topic = topic("orders");
            asked.partitions = vec![0, 1];
            let mut request = DescribeLogDirsRequest::default();
            request.topics = Some(vec![asked]);
            request.encode(&mut out, version)
        }
        ApiKey::WriteTxnMarkers => {
            let mut written = write_txn_markers_request::WritableTxnMarkerTopic::default();
            written.name = topic("orders");
            written.partition_indexes = vec![0, 1];
            let mut marker = write_txn_markers_request::WritableTxnMarker::default();
            marker.producer_id = ProducerId(7);
            marker.producer_epoch = 3;
            marker.coordinator_epoch = 5;
            marker.topics = vec![written.clone(), written];
            let mut request = WriteTxnMarkersRequest::default();
            request.markers = vec![marker.clone(), marker];
            request.encode(&mut out, version)
        }
        ApiKey::OffsetDelete => {
            let mut partition = offset_delete_request::OffsetDeleteRequestPartition::default();
            partition.partition_index = 3;
            let mut deleted = offset_delete_request::OffsetDeleteRequestTopic::default();
            deleted.name = topic("orders");
            deleted.partitions = vec![partition.clone(), partition];
            let mut request = OffsetDeleteRequest::default();
            request.group_id = GroupId(s("group"));
            request.topics = vec![deleted.clone(), deleted];
            request.encode(&mut out, version)
        }
        ApiKey::SaslHandshake => {
            let mut request = SaslHandshakeRequest::default();
            request.mechanism = s("SCRAM-SHA-256");
            request.encode(&mut out, version)
        }
        ApiKey::SaslAuthenticate => {
            let mut request = SaslAuthenticateRequest::default();
            request.auth_bytes = bytes::Bytes::from_static(b"n,,n=alice,r=abc");
            request.encode(&mut out, version)
        }
        ApiKey::DescribeUserScramCredentials => {
            let mut user = describe_user_scram_credentials_request::UserName::default();
            user.name = s("alice");
            let mut request = DescribeUserScramCredentialsRequest::default();
            request.users = Some(vec![user.clone(), user]);
            request.encode(&mut out, version)
        }
        ApiKey::AlterUserScramCredentials => {
            let mut deletion = alter_user_scram_credentials_request::ScramCredentialDeletion::default();
            deletion.name = s("bob");
            deletion.mechanism = 2;
            let mut upsertion = alter_user_scram_credentials_request::ScramCredentialUpsertion::default();
            upsertion.name = s("alice");
            upsertion.mechanism = 1;
            upsertion.iterations = 4096;
            upsertion.salt = bytes::Bytes::from_static(b"salt");
            upsertion.salted_password = bytes::Bytes::from_static(&[1; 32]);
            let mut request = AlterUserScramCredentialsRequest::default();
            request.deletions = vec![deletion];
            request.upsertions = vec![upsertion.clone(), upsertion];
            request.encode(&mut out, version)
        }
        ApiKey::DescribeAcls => {
            let mut request = DescribeAclsRequest::default();
            request.resource_type_filter = 2;
            request.resource_name_filter = Some(s("orders"));
            request.pattern_type_filter = 2;
            request.principal_filter = None;
            request.host_filter = Some(s("*"));
            request.operation = 3;
            request.permission_type = 3;
            request.encode(&mut out, version)
        }
        ApiKey::CreateAcls => {
            let mut creation = create_acls_request::AclCreation::default();
            creation.resource_type = 2;
            creation.resource_name = s("orders");
            creation.resource_pattern_type = 4;
            creation.principal = s("User:alice");
            creation.host = s("*");
            creation.operation = 3;
            creation.permission_type = 3;
            let mut request = CreateAclsRequest::default();
            request.creations = vec![creation.clone(), creation];
            request.encode(&mut out, version)
        }
        ApiKey::DeleteAcls => {
            let mut filter = delete_acls_request::DeleteAclsFilter::default();
            filter.resource_type_filter = 1;
            filter.resource_name_filter = None;
            filter.pattern_type_filter = 4;
            filter.principal_filter = Some(s("User:alice"));
            filter.host_filter = None;
            filter.operation = 1;
            filter.permission_type = 2;
            let mut request = DeleteAclsRequest::default();
            request.filters = vec![filter.clone(), filter];
            request.encode(&mut out, version)
        }
        other => panic!("no sample for {other:?}"),
    };
    if let Err(error) = result {
        panic!("{key:?} v{version}: {error}");
    }
    out
}

#[test]
fn every_advertised_request_encoded_by_kafka_protocol_passes_the_shape_check_to_its_last_byte() {
    let mut checked = 0;
    for &(key, low, high) in ADVERTISED {
        for version in low..=high {
            let body = sample(key, version);
            assert_eq!(
                shape::check_exact(key, version, &body),
                Ok(()),
                "{key:?} v{version}"
            );
            checked += 1;
        }
    }
    assert!(checked > 60, "{checked} versions checked");
}

#[test]
fn every_truncation_of_a_valid_request_is_refused() {
    for &(key, low, high) in ADVERTISED {
        for version in low..=high {
            let body = sample(key, version);
            for cut in 0..body.len() {
                assert!(
                    shape::check(key, version, &body[..cut]).is_err(),
                    "{key:?} v{version} cut at {cut} of {}",
                    body.len()
                );
            }
        }
    }
}

#[test]
fn an_array_count_beyond_the_bytes_left_is_refused_before_decoding() {
    // Metadata v1: a topic array claiming i32::MAX topics in a 4-byte body (kafka-protocol alone would ask for
    // hundreds of gigabytes and abort the process).
    let body = i32::MAX.to_be_bytes();
    assert!(matches!(
        shape::check(ApiKey::Metadata, 1, &body),
        Err(ShapeError::ImpossibleCount { count, .. }) if count == i64::from(i32::MAX)
    ));
}

#[test]
fn more_elements_than_the_limit_are_refused() {
    // OffsetFetch v1: one topic with MAX_ELEMENTS + 1 partition indexes.
    let count = shape::MAX_ELEMENTS + 1;
    let mut body = Vec::new();
    body.extend_from_slice(&1i16.to_be_bytes());
    body.push(b'g');
    body.extend_from_slice(&1i32.to_be_bytes());
    body.extend_from_slice(&1i16.to_be_bytes());
    body.push(b't');
    body.extend_from_slice(&(count as i32).to_be_bytes());
    body.resize(body.len() + 4 * count, 0);
    assert_eq!(
        shape::check(ApiKey::OffsetFetch, 1, &body),
        Err(ShapeError::TooManyElements)
    );
}

#[test]
fn trailing_bytes_are_refused() {
    let mut body = sample(ApiKey::EndTxn, 1).to_vec();
    body.push(0);
    assert_eq!(
        shape::check(ApiKey::EndTxn, 1, &body),
        Err(ShapeError::TrailingBytes(1))
    );
}

#[test]
fn bytes_after_a_flexible_body_are_tolerated_as_kafka_tolerates_librdkafkas() {
    // librdkafka 2.x ends a flexible AlterUserScramCredentials with a second empty tagged-field section.
    let mut body = sample(ApiKey::AlterUserScramCredentials, 0).to_vec();
    body.push(0);
    assert_eq!(shape::check(ApiKey::AlterUserScramCredentials, 0, &body), Ok(()));
    // librdkafka 2.16's Metadata v12 for every topic: its null topic array written as four bytes.
    let every_topic = [0, 0, 0, 0, 1, 0, 0];
    assert_eq!(shape::check(ApiKey::Metadata, 12, &every_topic), Ok(()));
    // The same bytes at a non-flexible version are refused.
    let mut body = sample(ApiKey::Metadata, 8).to_vec();
    body.extend_from_slice(&[1, 0, 0]);
    assert_eq!(
        shape::check(ApiKey::Metadata, 8, &body),
        Err(ShapeError::TrailingBytes(3))
    );
}

mod mutations {
    use super::*;
    use proptest::prelude::*;

    fn frame_of(key: ApiKey, version: i16, body: &[u8]) -> Bytes {
        let mut frame = BytesMut::new();
        frame.extend_from_slice(&(key as i16).to_be_bytes());
        frame.extend_from_slice(&version.to_be_bytes());
        frame.extend_from_slice(&1i32.to_be_bytes());
        frame.extend_from_slice(&(-1i16).to_be_bytes());
        if key.request_header_version(version) >= 2 {
            frame.extend_from_slice(&[0]);
        }
        frame.extend_from_slice(body);
        frame.freeze()
    }

    proptest! {
        /// Any byte of any advertised request changed, or bytes cut or added: the header parser, the shape check
        /// and the decoder answer (a request or an error) and never panic.
        #[test]
        fn mutated_requests_never_panic(
            api in 0..ADVERTISED.len(),
            version_pick in 0i16..16,
            edits in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..8),
            cut in any::<u16>(),
            tail in proptest::collection::vec(any::<u8>(), 0..8),
        ) {
            let (key, low, high) = ADVERTISED[api];
            let version = low + version_pick % (high - low + 1);
            let mut bytes = frame_of(key, version, &sample(key, version)).to_vec();
            for (position, value) in edits {
                let index = position as usize % bytes.len();
                bytes[index] = value;
            }
            let keep = bytes.len() - (cut as usize % 4).min(bytes.len());
            bytes.truncate(keep);
            bytes.extend_from_slice(&tail);
            if let Ok(request) = broker::frame::parse_request(Bytes::from(bytes)) {
                let _ = broker::decode(&request);
            }
        }

        /// Random frames of any length.
        #[test]
        fn random_frames_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(request) = broker::frame::parse_request(Bytes::from(bytes)) {
                let _ = broker::decode(&request);
            }
        }
    }
}
