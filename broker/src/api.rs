//! Request dispatch: the shape check, `kafka-protocol`'s decoder, the node's answer to each API, the response
//! frame.
//!
//! The node (crate `node`) takes the decoded request and its version and returns the response message; protocol
//! errors are Kafka error codes inside it. ApiVersions is answered here, from the advertised table.
//!
//! A request the broker cannot read at all (a shape or decode failure, an unknown API, a version it does not
//! advertise) closes the connection, as Kafka's socket server does — except
//! ApiVersions at an unknown version, which is answered in version 0 with UNSUPPORTED_VERSION so that the client
//! can retry with a version from the list.

use bytes::Bytes;
use kafka_auth::Principal;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};
use node::{Endpoint, Node};

use crate::frame::{encode_response, Request};
use crate::versions::ADVERTISED;
use crate::{shape, versions};

/// Why a request closed its connection.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The API key names no API the broker serves.
    #[error("unknown or unsupported API key {0}")]
    UnknownApi(i16),
    /// The broker does not advertise this version.
    #[error("{key:?} version {version} is not supported")]
    UnsupportedVersion {
        /// The API.
        key: ApiKey,
        /// The version.
        version: i16,
    },
    /// The body does not have the shape of the request.
    #[error("malformed {key:?} v{version} request: {source}")]
    Shape {
        /// The API.
        key: ApiKey,
        /// The version.
        version: i16,
        /// What is wrong.
        source: shape::ShapeError,
    },
    /// The decoder refused the body.
    #[error("undecodable {key:?} v{version} request: {reason}")]
    Decode {
        /// The API.
        key: ApiKey,
        /// The version.
        version: i16,
        /// The decoder's message.
        reason: String,
    },
    /// The response could not be encoded (a bug).
    #[error("cannot encode the response: {0}")]
    Encode(String),
}

/// What a request produced.
#[derive(Debug)]
pub enum Reply {
    /// A response frame.
    Frame(Bytes),
    /// No response (a produce with `acks=0`).
    Nothing,
}

/// A request the broker serves, decoded.
#[derive(Debug, Clone)]
pub enum Decoded {
    /// ApiVersions (its body is not needed).
    ApiVersions,
    /// Metadata.
    Metadata(MetadataRequest),
    /// CreateTopics.
    CreateTopics(CreateTopicsRequest),
    /// FindCoordinator.
    FindCoordinator(FindCoordinatorRequest),
    /// Produce.
    Produce(ProduceRequest),
    /// Fetch.
    Fetch(FetchRequest),
    /// ListOffsets.
    ListOffsets(ListOffsetsRequest),
    /// OffsetCommit.
    OffsetCommit(OffsetCommitRequest),
    /// OffsetFetch.
    OffsetFetch(OffsetFetchRequest),
    /// JoinGroup.
    JoinGroup(JoinGroupRequest),
    /// SyncGroup.
    SyncGroup(SyncGroupRequest),
    /// Heartbeat.
    Heartbeat(HeartbeatRequest),
    /// LeaveGroup.
    LeaveGroup(LeaveGroupRequest),
    /// DescribeGroups.
    DescribeGroups(DescribeGroupsRequest),
    /// ListGroups.
    ListGroups(ListGroupsRequest),
    /// DeleteGroups.
    DeleteGroups(DeleteGroupsRequest),
    /// TxnOffsetCommit.
    TxnOffsetCommit(TxnOffsetCommitRequest),
    /// InitProducerId.
    InitProducerId(InitProducerIdRequest),
    /// AddPartitionsToTxn.
    AddPartitionsToTxn(AddPartitionsToTxnRequest),
    /// AddOffsetsToTxn.
    AddOffsetsToTxn(AddOffsetsToTxnRequest),
    /// DeleteRecords.
    DeleteRecords(DeleteRecordsRequest),
    /// DescribeConfigs.
    DescribeConfigs(DescribeConfigsRequest),
    /// AlterConfigs.
    AlterConfigs(AlterConfigsRequest),
    /// IncrementalAlterConfigs.
    IncrementalAlterConfigs(IncrementalAlterConfigsRequest),
    /// DeleteTopics.
    DeleteTopics(DeleteTopicsRequest),
    /// CreatePartitions.
    CreatePartitions(CreatePartitionsRequest),
    /// DescribeCluster.
    DescribeCluster(DescribeClusterRequest),
    /// DescribeLogDirs.
    DescribeLogDirs(DescribeLogDirsRequest),
    /// WriteTxnMarkers.
    WriteTxnMarkers(WriteTxnMarkersRequest),
    /// OffsetDelete.
    OffsetDelete(OffsetDeleteRequest),
    /// DescribeProducers.
    DescribeProducers(DescribeProducersRequest),
    /// ListTransactions.
    ListTransactions(ListTransactionsRequest),
    /// DescribeTransactions.
    DescribeTransactions(DescribeTransactionsRequest),
    /// EndTxn.
    EndTxn(EndTxnRequest),
    /// SaslHandshake (on a connection that is not authenticating: ILLEGAL_SASL_STATE).
    SaslHandshake(SaslHandshakeRequest),
    /// SaslAuthenticate (likewise).
    SaslAuthenticate(SaslAuthenticateRequest),
    /// DescribeUserScramCredentials.
    DescribeUserScramCredentials(DescribeUserScramCredentialsRequest),
    /// AlterUserScramCredentials.
    AlterUserScramCredentials(AlterUserScramCredentialsRequest),
    /// ApiVersions at a version the broker does not serve: answered in v0 with UNSUPPORTED_VERSION.
    UnsupportedApiVersions,
}

/// Checks and decodes a request: the API and version must be advertised (ApiVersions excepted, see the module
/// docs), the body must pass the shape check, then `kafka-protocol` decodes it.
pub fn decode(request: &Request) -> Result<Decoded, RequestError> {
    let Some(key) = request.key().filter(|key| versions::range(*key).is_some()) else {
        return Err(RequestError::UnknownApi(request.api_key));
    };
    let version = request.version;
    if !versions::supported(key, version) {
        if key == ApiKey::ApiVersions {
            return Ok(Decoded::UnsupportedApiVersions);
        }
        return Err(RequestError::UnsupportedVersion { key, version });
    }
    shape::check(key, version, &request.body).map_err(|source| RequestError::Shape {
        key,
        version,
        source,
    })?;
    macro_rules! decode {
        ($variant:ident) => {
            Decoded::$variant(
                Decodable::decode(&mut request.body.clone(), version).map_err(|error| {
                    RequestError::Decode {
                        key,
                        version,
                        reason: error.to_string(),
                    }
                })?,
            )
        };
    }
    Ok(match key {
        ApiKey::ApiVersions => Decoded::ApiVersions,
        ApiKey::Metadata => decode!(Metadata),
        ApiKey::CreateTopics => decode!(CreateTopics),
        ApiKey::FindCoordinator => decode!(FindCoordinator),
        ApiKey::Produce => decode!(Produce),
        ApiKey::Fetch => decode!(Fetch),
        ApiKey::ListOffsets => decode!(ListOffsets),
        ApiKey::OffsetCommit => decode!(OffsetCommit),
        ApiKey::OffsetFetch => decode!(OffsetFetch),
        ApiKey::JoinGroup => decode!(JoinGroup),
        ApiKey::SyncGroup => decode!(SyncGroup),
        ApiKey::Heartbeat => decode!(Heartbeat),
        ApiKey::LeaveGroup => decode!(LeaveGroup),
        ApiKey::DescribeGroups => decode!(DescribeGroups),
        ApiKey::ListGroups => decode!(ListGroups),
        ApiKey::DeleteGroups => decode!(DeleteGroups),
        ApiKey::TxnOffsetCommit => decode!(TxnOffsetCommit),
        ApiKey::InitProducerId => decode!(InitProducerId),
        ApiKey::AddPartitionsToTxn => decode!(AddPartitionsToTxn),
        ApiKey::AddOffsetsToTxn => decode!(AddOffsetsToTxn),
        ApiKey::EndTxn => decode!(EndTxn),
        ApiKey::DeleteRecords => decode!(DeleteRecords),
        ApiKey::DescribeConfigs => decode!(DescribeConfigs),
        ApiKey::AlterConfigs => decode!(AlterConfigs),
        ApiKey::IncrementalAlterConfigs => decode!(IncrementalAlterConfigs),
        ApiKey::DeleteTopics => decode!(DeleteTopics),
        ApiKey::CreatePartitions => decode!(CreatePartitions),
        ApiKey::DescribeCluster => decode!(DescribeCluster),
        ApiKey::DescribeLogDirs => decode!(DescribeLogDirs),
        ApiKey::WriteTxnMarkers => decode!(WriteTxnMarkers),
        ApiKey::OffsetDelete => decode!(OffsetDelete),
        ApiKey::DescribeProducers => decode!(DescribeProducers),
        ApiKey::ListTransactions => decode!(ListTransactions),
        ApiKey::DescribeTransactions => decode!(DescribeTransactions),
        ApiKey::SaslHandshake => decode!(SaslHandshake),
        ApiKey::SaslAuthenticate => decode!(SaslAuthenticate),
        ApiKey::DescribeUserScramCredentials => decode!(DescribeUserScramCredentials),
        ApiKey::AlterUserScramCredentials => decode!(AlterUserScramCredentials),
        other => return Err(RequestError::UnknownApi(other as i16)),
    })
}

/// Who sent a request, and through which listener.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The client's address (a consumer group shows its members' host from it).
    pub peer: Option<std::net::IpAddr>,
    /// The address of the listener it came in on: what Metadata, DescribeCluster and FindCoordinator answer.
    pub endpoint: Endpoint,
    /// Who it authenticated as (`User:ANONYMOUS` on a PLAINTEXT listener).
    pub principal: Principal,
}

impl Caller {
    /// An anonymous caller of unknown address on the node's first listener.
    pub fn anonymous(node: &Node) -> Self {
        Caller {
            peer: None,
            endpoint: node.advertised().clone(),
            principal: Principal::anonymous(),
        }
    }
}

/// Serves one request from an anonymous caller whose address is not known (a consumer group shows its members'
/// host as `/unknown`).
pub async fn handle(node: &Node, request: &Request) -> Result<Reply, RequestError> {
    handle_from(node, request, &Caller::anonymous(node)).await
}

/// Serves one request from `caller` (authenticated already, if its listener authenticates).
pub async fn handle_from(node: &Node, request: &Request, caller: &Caller) -> Result<Reply, RequestError> {
    let decoded = decode(request)?;
    let peer = caller.peer;
    let endpoint = &caller.endpoint;
    let (version, id) = (request.version, request.correlation_id);
    let key = request.key().unwrap_or(ApiKey::ApiVersions);
    match decoded {
        Decoded::UnsupportedApiVersions => {
            let mut response = api_versions();
            response.error_code = kafka_types::KafkaError::UnsupportedVersion.code();
            frame(ApiKey::ApiVersions, 0, id, &response)
        }
        Decoded::ApiVersions => frame(key, version, id, &api_versions()),
        Decoded::Metadata(request) => {
            frame(key, version, id, &node.metadata(request, version, endpoint).await)
        }
        Decoded::CreateTopics(request) => {
            frame(key, version, id, &node.create_topics(request, version).await)
        }
        Decoded::FindCoordinator(request) => frame(
            key,
            version,
            id,
            &node.find_coordinator(request, version, endpoint).await,
        ),
        Decoded::Produce(request) => {
            let acks = request.acks;
            let response = node.produce(request, version).await;
            if acks == 0 {
                return Ok(Reply::Nothing);
            }
            frame(key, version, id, &response)
        }
        Decoded::Fetch(request) => frame(key, version, id, &node.fetch(request, version).await),
        Decoded::ListOffsets(request) => frame(key, version, id, &node.list_offsets(request, version).await),
        Decoded::OffsetCommit(request) => {
            frame(key, version, id, &node.offset_commit(request, version).await)
        }
        Decoded::OffsetFetch(request) => frame(key, version, id, &node.offset_fetch(request, version).await),
        Decoded::JoinGroup(join) => {
            let client_id = request.client_id.as_deref().unwrap_or("");
            // Kafka writes a member's host as Java's `InetAddress.toString()` does.
            let host = peer.map_or_else(|| "/unknown".to_owned(), |ip| format!("/{ip}"));
            let response = node.join_group(join, version, client_id, &host).await;
            frame(key, version, id, &response)
        }
        Decoded::DescribeGroups(request) => {
            frame(key, version, id, &node.describe_groups(request, version).await)
        }
        Decoded::ListGroups(request) => frame(key, version, id, &node.list_groups(request, version).await),
        Decoded::DeleteGroups(request) => {
            frame(key, version, id, &node.delete_groups(request, version).await)
        }
        Decoded::SyncGroup(request) => frame(key, version, id, &node.sync_group(request, version).await),
        Decoded::Heartbeat(request) => frame(key, version, id, &node.heartbeat(request, version)),
        Decoded::LeaveGroup(request) => frame(key, version, id, &node.leave_group(request, version).await),
        Decoded::TxnOffsetCommit(request) => {
            frame(key, version, id, &node.txn_offset_commit(request, version).await)
        }
        Decoded::InitProducerId(request) => {
            frame(key, version, id, &node.init_producer_id(request, version).await)
        }
        Decoded::AddPartitionsToTxn(request) => frame(
            key,
            version,
            id,
            &node.add_partitions_to_txn(request, version).await,
        ),
        Decoded::AddOffsetsToTxn(request) => {
            frame(key, version, id, &node.add_offsets_to_txn(request, version).await)
        }
        Decoded::EndTxn(request) => frame(key, version, id, &node.end_txn(request, version).await),
        Decoded::DeleteRecords(request) => {
            frame(key, version, id, &node.delete_records(request, version).await)
        }
        Decoded::DescribeConfigs(request) => {
            frame(key, version, id, &node.describe_configs(request, version).await)
        }
        Decoded::AlterConfigs(request) => {
            frame(key, version, id, &node.alter_configs(request, version).await)
        }
        Decoded::IncrementalAlterConfigs(request) => frame(
            key,
            version,
            id,
            &node.incremental_alter_configs(request, version).await,
        ),
        Decoded::DeleteTopics(request) => {
            frame(key, version, id, &node.delete_topics(request, version).await)
        }
        Decoded::CreatePartitions(request) => {
            frame(key, version, id, &node.create_partitions(request, version).await)
        }
        Decoded::DescribeCluster(request) => frame(
            key,
            version,
            id,
            &node.describe_cluster(request, version, endpoint),
        ),
        Decoded::DescribeLogDirs(request) => {
            frame(key, version, id, &node.describe_log_dirs(request, version).await)
        }
        Decoded::WriteTxnMarkers(request) => {
            frame(key, version, id, &node.write_txn_markers(request, version).await)
        }
        Decoded::OffsetDelete(request) => {
            frame(key, version, id, &node.offset_delete(request, version).await)
        }
        Decoded::DescribeProducers(request) => {
            frame(key, version, id, &node.describe_producers(request, version).await)
        }
        Decoded::ListTransactions(request) => {
            frame(key, version, id, &node.list_transactions(request, version).await)
        }
        Decoded::SaslHandshake(_) => {
            // As Kafka's request handler answers a handshake on a connection that is not authenticating.
            let mut response = SaslHandshakeResponse::default();
            response.error_code = kafka_types::KafkaError::IllegalSaslState.code();
            frame(key, version, id, &response)
        }
        Decoded::SaslAuthenticate(_) => {
            let mut response = SaslAuthenticateResponse::default();
            response.error_code = kafka_types::KafkaError::IllegalSaslState.code();
            response.error_message = Some(kafka_protocol::protocol::StrBytes::from_static_str(
                "SaslAuthenticate request received after successful authentication",
            ));
            frame(key, version, id, &response)
        }
        Decoded::DescribeUserScramCredentials(request) => frame(
            key,
            version,
            id,
            &node.describe_user_scram_credentials(request, version).await,
        ),
        Decoded::AlterUserScramCredentials(request) => frame(
            key,
            version,
            id,
            &node.alter_user_scram_credentials(request, version).await,
        ),
        Decoded::DescribeTransactions(request) => frame(
            key,
            version,
            id,
            &node.describe_transactions(request, version).await,
        ),
    }
}

fn frame<M: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    message: &M,
) -> Result<Reply, RequestError> {
    encode_response(key, version, correlation_id, message)
        .map(Reply::Frame)
        .map_err(RequestError::Encode)
}

/// The advertised version table.
pub fn api_versions() -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.api_keys = ADVERTISED
        .iter()
        .map(|&(key, min, max)| {
            let mut version = ApiVersion::default();
            version.api_key = key as i16;
            version.min_version = min;
            version.max_version = max;
            version
        })
        .collect();
    response
}
