//! The node's answers to Kafka's requests, one module per family. Each takes the decoded request value and the
//! version it came in (errors that a version cannot carry are mapped to the one Kafka sends that version) and
//! returns the response value; framing, shape checks and encoding are the wire front end's.

mod acls;
mod admin;
mod configs;
mod delete;
mod fetch;
mod groups;
mod inspect;
mod log_dirs;
mod markers;
mod membership;
mod offset_delete;
mod produce;
mod topics;
mod txn;
mod users;

pub use admin::{metadata_by_id, metadata_refused_whole};
pub use inspect::NodeGauges;
pub use topics::{create_topics_given_twice, delete_topics_given_twice};

use kafka_protocol::messages::*;

use crate::node::{Endpoint, Node};
use kafka_types::KafkaError;

/// A `kafka-protocol` string from a Rust one.
fn str_bytes(text: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(text.to_owned())
}

impl Node {
    /// Metadata: this node leads every partition; missing topics are auto-created when allowed.
    /// `endpoint` is the address of the listener the request came in on (Kafka answers per listener).
    pub async fn metadata(
        &self,
        request: MetadataRequest,
        version: i16,
        endpoint: &Endpoint,
    ) -> MetadataResponse {
        admin::metadata(self, request, version, endpoint).await
    }

    /// CreateTopics (one replica).
    pub async fn create_topics(&self, request: CreateTopicsRequest, version: i16) -> CreateTopicsResponse {
        topics::create_topics(self, request, version).await
    }

    /// DescribeConfigs: topics' configs with their sources, and the broker's settings.
    pub async fn describe_configs(
        &self,
        request: DescribeConfigsRequest,
        version: i16,
    ) -> DescribeConfigsResponse {
        configs::describe_configs(self, request, version).await
    }

    /// AlterConfigs: replaces topics' config overrides.
    pub async fn alter_configs(&self, request: AlterConfigsRequest, version: i16) -> AlterConfigsResponse {
        configs::alter_configs(self, request, version).await
    }

    /// IncrementalAlterConfigs: changes topics' config overrides one operation at a time.
    pub async fn incremental_alter_configs(
        &self,
        request: IncrementalAlterConfigsRequest,
        version: i16,
    ) -> IncrementalAlterConfigsResponse {
        configs::incremental_alter_configs(self, request, version).await
    }

    /// DeleteTopics: topics deleted with their data.
    pub async fn delete_topics(&self, request: DeleteTopicsRequest, version: i16) -> DeleteTopicsResponse {
        topics::delete_topics(self, request, version).await
    }

    /// CreatePartitions: topics grown.
    pub async fn create_partitions(
        &self,
        request: CreatePartitionsRequest,
        version: i16,
    ) -> CreatePartitionsResponse {
        topics::create_partitions(self, request, version).await
    }

    /// DescribeLogDirs: the data directory, the size of each partition asked for.
    pub async fn describe_log_dirs(
        &self,
        request: DescribeLogDirsRequest,
        version: i16,
    ) -> DescribeLogDirsResponse {
        log_dirs::describe_log_dirs(self, request, version).await
    }

    /// DescribeCluster: this broker.
    pub fn describe_cluster(
        &self,
        request: DescribeClusterRequest,
        version: i16,
        endpoint: &Endpoint,
    ) -> DescribeClusterResponse {
        topics::describe_cluster(self, request, version, endpoint)
    }

    /// WriteTxnMarkers: markers a client writes (`kafka-transactions abort`).
    pub async fn write_txn_markers(
        &self,
        request: WriteTxnMarkersRequest,
        version: i16,
    ) -> WriteTxnMarkersResponse {
        markers::write_txn_markers(self, request, version).await
    }

    /// DescribeUserScramCredentials: users' SCRAM mechanisms and iteration counts.
    pub async fn describe_user_scram_credentials(
        &self,
        request: DescribeUserScramCredentialsRequest,
        version: i16,
    ) -> DescribeUserScramCredentialsResponse {
        users::describe_user_scram_credentials(self, request, version).await
    }

    /// AlterUserScramCredentials: users' SCRAM credentials set and deleted, durably.
    pub async fn alter_user_scram_credentials(
        &self,
        request: AlterUserScramCredentialsRequest,
        version: i16,
    ) -> AlterUserScramCredentialsResponse {
        users::alter_user_scram_credentials(self, request, version).await
    }

    /// CreateAcls: ACLs added, durably (the broker checks that an authorizer is on and the caller may).
    pub async fn create_acls(&self, request: CreateAclsRequest, version: i16) -> CreateAclsResponse {
        acls::create_acls(self, request, version).await
    }

    /// DescribeAcls: the ACLs that pass a filter.
    pub async fn describe_acls(&self, request: DescribeAclsRequest, version: i16) -> DescribeAclsResponse {
        acls::describe_acls(self, request, version).await
    }

    /// DeleteAcls: the ACLs that pass each filter removed, durably.
    pub async fn delete_acls(&self, request: DeleteAclsRequest, version: i16) -> DeleteAclsResponse {
        acls::delete_acls(self, request, version).await
    }

    /// OffsetDelete: a group's committed offsets on some partitions forgotten.
    pub async fn offset_delete(&self, request: OffsetDeleteRequest, version: i16) -> OffsetDeleteResponse {
        offset_delete::offset_delete(self, request, version).await
    }

    /// DescribeProducers: each partition's active producers.
    pub async fn describe_producers(
        &self,
        request: DescribeProducersRequest,
        version: i16,
    ) -> DescribeProducersResponse {
        inspect::describe_producers(self, request, version).await
    }

    /// ListTransactions: the coordinator's transactional ids, filtered.
    pub async fn list_transactions(
        &self,
        request: ListTransactionsRequest,
        version: i16,
    ) -> ListTransactionsResponse {
        inspect::list_transactions(self, request, version).await
    }

    /// DescribeTransactions: named transactional ids' state and open transaction.
    pub async fn describe_transactions(
        &self,
        request: DescribeTransactionsRequest,
        version: i16,
    ) -> DescribeTransactionsResponse {
        inspect::describe_transactions(self, request, version).await
    }

    /// FindCoordinator: this node coordinates every group and transactional id.
    pub async fn find_coordinator(
        &self,
        request: FindCoordinatorRequest,
        version: i16,
        endpoint: &Endpoint,
    ) -> FindCoordinatorResponse {
        admin::find_coordinator(self, request, version, endpoint).await
    }

    /// Produce: each partition's batches appended as leader, made durable, then acknowledged.
    pub async fn produce(&self, request: ProduceRequest, version: i16) -> ProduceResponse {
        produce::produce(self, request, version).await
    }

    /// Fetch, long-polling on `max_wait_ms`/`min_bytes` (a request with `max_wait_ms` 0 never waits).
    pub async fn fetch(&self, request: FetchRequest, version: i16) -> FetchResponse {
        fetch::fetch(self, request, version).await
    }

    /// ListOffsets.
    pub async fn list_offsets(&self, request: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
        fetch::list_offsets(self, request, version).await
    }

    /// OffsetCommit.
    pub async fn offset_commit(&self, request: OffsetCommitRequest, version: i16) -> OffsetCommitResponse {
        groups::offset_commit(self, request, version).await
    }

    /// JoinGroup: answered when the group's rebalance completes (this call waits). `client_id` and
    /// `client_host` are what DescribeGroups shows of the member (the request header's client id; the address as
    /// Kafka writes it, `/127.0.0.1`).
    pub async fn join_group(
        &self,
        request: JoinGroupRequest,
        version: i16,
        client_id: &str,
        client_host: &str,
    ) -> JoinGroupResponse {
        membership::join_group(self, request, version, client_id, client_host).await
    }

    /// DescribeGroups.
    pub async fn describe_groups(
        &self,
        request: DescribeGroupsRequest,
        _version: i16,
    ) -> DescribeGroupsResponse {
        membership::describe_groups(self, &request).await
    }

    /// DeleteGroups.
    pub async fn delete_groups(&self, request: DeleteGroupsRequest, _version: i16) -> DeleteGroupsResponse {
        membership::delete_groups(self, &request).await
    }

    /// ListGroups (versions without a state filter).
    pub async fn list_groups(&self, request: ListGroupsRequest, _version: i16) -> ListGroupsResponse {
        membership::list_groups(self, &request).await
    }

    /// SyncGroup: a follower's answer waits for the leader's assignment.
    pub async fn sync_group(&self, request: SyncGroupRequest, version: i16) -> SyncGroupResponse {
        membership::sync_group(self, request, version).await
    }

    /// Heartbeat.
    pub fn heartbeat(&self, request: HeartbeatRequest, _version: i16) -> HeartbeatResponse {
        membership::heartbeat(self, &request)
    }

    /// LeaveGroup.
    pub async fn leave_group(&self, request: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
        let mut response = membership::leave_group(self, &request, version);
        if let Err(error) = self.store_groups().await {
            response.error_code = error.code();
        }
        response
    }

    /// Consumer groups' timers on the node's clock: expired sessions removed, overdue rebalances completed (and
    /// the groups that changed stored).
    pub async fn tick_groups(&self) {
        self.membership.tick(self.now_ms());
        // A failed write has poisoned the offset store: every later commit or join is answered
        // KAFKA_STORAGE_ERROR, so the failure is not lost by ignoring it here.
        let _ = self.store_groups().await;
    }

    /// Writes the groups whose membership changed into the offset log: KAFKA_STORAGE_ERROR when it cannot,
    /// UNKNOWN_SERVER_ERROR for a group too large to store (as Kafka answers a SyncGroup whose group metadata
    /// exceeds what its offsets topic takes).
    pub(crate) async fn store_groups(&self) -> Result<(), KafkaError> {
        let changed = self.membership.take_unstored();
        if changed.is_empty() {
            return Ok(());
        }
        self.offsets
            .lock()
            .await
            .store_groups(changed)
            .await
            .map_err(|error| match error {
                crate::NodeError::GroupTooLarge { .. } => KafkaError::UnknownServerError,
                _ => KafkaError::KafkaStorageError,
            })
    }

    /// Forgets every consumer group, answering the joins and syncs that wait (before a shutdown drains its
    /// connections).
    pub fn close_groups(&self) {
        self.membership.close();
    }

    /// OffsetFetch.
    pub async fn offset_fetch(&self, request: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
        groups::offset_fetch(self, request, version).await
    }

    /// TxnOffsetCommit: offsets staged until the transaction's marker.
    pub async fn txn_offset_commit(
        &self,
        request: TxnOffsetCommitRequest,
        version: i16,
    ) -> TxnOffsetCommitResponse {
        groups::txn_offset_commit(self, request, version).await
    }

    /// InitProducerId.
    pub async fn init_producer_id(
        &self,
        request: InitProducerIdRequest,
        version: i16,
    ) -> InitProducerIdResponse {
        txn::init_producer_id(self, request, version).await
    }

    /// AddPartitionsToTxn (v0–3 form).
    pub async fn add_partitions_to_txn(
        &self,
        request: AddPartitionsToTxnRequest,
        version: i16,
    ) -> AddPartitionsToTxnResponse {
        txn::add_partitions(self, request, version).await
    }

    /// AddOffsetsToTxn.
    pub async fn add_offsets_to_txn(
        &self,
        request: AddOffsetsToTxnRequest,
        version: i16,
    ) -> AddOffsetsToTxnResponse {
        txn::add_offsets(self, request, version).await
    }

    /// DeleteRecords: log start offsets moved up.
    pub async fn delete_records(&self, request: DeleteRecordsRequest, version: i16) -> DeleteRecordsResponse {
        delete::delete_records(self, request, version).await
    }

    /// EndTxn: answered once every marker is written.
    pub async fn end_txn(&self, request: EndTxnRequest, version: i16) -> EndTxnResponse {
        txn::end_txn(self, request, version).await
    }
}
