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
use std::sync::Arc;

use kafka_auth::acl::AuthorizerConfig;
use kafka_auth::Principal;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};
use node::{Endpoint, Node};

use crate::authorize::{admin, data, groups, txn, Access};
use crate::frame::{encode_response, Request};
use crate::metrics::errors::{ErrorCounts, ResponseErrors};
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
    /// A response frame, and the Kafka error codes in it (for the metrics).
    Frame(Bytes, ErrorCounts),
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
    /// DescribeAcls.
    DescribeAcls(DescribeAclsRequest),
    /// CreateAcls.
    CreateAcls(CreateAclsRequest),
    /// DeleteAcls.
    DeleteAcls(DeleteAclsRequest),
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
    let walked = shape::check_request(key, version, &request.body).map_err(|source| RequestError::Shape {
        key,
        version,
        source,
    })?;
    // The decoder reads only what the layout walked (bytes tolerated after a flexible body are not its).
    let body = request.body.slice(..walked);
    macro_rules! decode {
        ($variant:ident) => {
            Decoded::$variant(
                Decodable::decode(&mut body.clone(), version).map_err(|error| RequestError::Decode {
                    key,
                    version,
                    reason: error.to_string(),
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
        ApiKey::DescribeAcls => decode!(DescribeAcls),
        ApiKey::CreateAcls => decode!(CreateAcls),
        ApiKey::DeleteAcls => decode!(DeleteAcls),
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
    /// The broker's ACL authorizer, if it has one (`None`: everything is allowed).
    pub authorizer: Option<Arc<AuthorizerConfig>>,
}

impl Caller {
    /// An anonymous caller of unknown address on the node's first listener.
    pub fn anonymous(node: &Node) -> Self {
        Caller {
            peer: None,
            endpoint: node.advertised().clone(),
            principal: Principal::anonymous(),
            authorizer: None,
        }
    }
}

/// Serves one request from an anonymous caller whose address is not known (a consumer group shows its members'
/// host as `/unknown`).
pub async fn handle(node: &Node, request: &Request) -> Result<Reply, RequestError> {
    handle_from(node, request, &Caller::anonymous(node)).await
}

/// Serves one request from `caller` (authenticated already, if its listener authenticates): the request passes
/// its API's authorization (module `authorize`: what the caller may not touch is answered there, the node serves
/// the rest), then the node answers.
pub async fn handle_from(node: &Node, request: &Request, caller: &Caller) -> Result<Reply, RequestError> {
    let decoded = decode(request)?;
    let access = Access::of(node, caller).await;
    let peer = caller.peer;
    let endpoint = &caller.endpoint;
    let (version, id) = (request.version, request.correlation_id);
    let key = request.key().unwrap_or(ApiKey::ApiVersions);
    // Answers `$refused` when the check refuses the whole request, else what the node answers.
    macro_rules! whole {
        ($refused:expr, $served:expr) => {
            match $refused {
                Some(refused) => frame(key, version, id, &refused),
                None => frame(key, version, id, &$served),
            }
        };
    }
    match decoded {
        Decoded::UnsupportedApiVersions => {
            let mut response = api_versions();
            response.error_code = kafka_types::KafkaError::UnsupportedVersion.code();
            frame(ApiKey::ApiVersions, 0, id, &response)
        }
        Decoded::ApiVersions => frame(key, version, id, &api_versions()),
        Decoded::Metadata(mut request) => {
            let all_topics = request.topics.is_none();
            // v12 names topics by id: DESCRIBE is checked on the names they resolve to, in the answer. A request
            // the node refuses whole (an id before v12, a topic without a name) is refused before anything is
            // authorized or created, as Kafka refuses it.
            let by_id = node::metadata_by_id(&request, version);
            let refused_whole = node::metadata_refused_whole(&request, version);
            let refused = if access.authorizer_on() && !all_topics && !by_id && !refused_whole {
                let auto_create =
                    node.config().auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
                let existing = node.topic_partitions().await;
                data::metadata_request(&access, &mut request, auto_create, &existing)
            } else {
                Vec::new()
            };
            let mut response = node.metadata(request, version, endpoint).await;
            if all_topics {
                data::metadata_response(&access, &mut response);
            }
            if by_id {
                data::metadata_by_id_response(&access, &mut response);
            }
            response.topics.extend(refused);
            frame(key, version, id, &response)
        }
        Decoded::CreateTopics(mut request) => {
            let refused = admin::create_topics(&access, &mut request);
            let mut response = node.create_topics(request, version).await;
            admin::create_topics_answered(&access, &mut response);
            response.topics.extend(refused);
            frame(key, version, id, &response)
        }
        Decoded::FindCoordinator(mut request) => {
            if let Some(refused) = groups::find_coordinator_refused(&access, &request, version) {
                return frame(key, version, id, &refused);
            }
            let refused = groups::find_coordinator_keys(&access, &mut request);
            let mut response = node.find_coordinator(request, version, endpoint).await;
            response.coordinators.extend(refused);
            frame(key, version, id, &response)
        }
        Decoded::Produce(mut request) => {
            let acks = request.acks;
            let refused = data::produce(&access, &mut request);
            let mut response = node.produce(request, version).await;
            response.responses.extend(refused);
            if acks == 0 {
                return Ok(Reply::Nothing);
            }
            frame(key, version, id, &response)
        }
        Decoded::Fetch(mut request) => {
            let refused = data::fetch(&access, &mut request);
            let mut response = node.fetch(request, version).await;
            response.responses.extend(refused);
            frame(key, version, id, &response)
        }
        Decoded::ListOffsets(mut request) => {
            let refused = data::list_offsets(&access, &mut request);
            let mut response = node.list_offsets(request, version).await;
            response.topics.extend(refused);
            frame(key, version, id, &response)
        }
        Decoded::OffsetCommit(mut request) => {
            let refused = groups::offset_commit(&access, &mut request);
            let mut response = node.offset_commit(request, version).await;
            response.topics.extend(refused);
            frame(key, version, id, &response)
        }
        Decoded::OffsetFetch(mut request) => {
            if let Some(refused) = groups::offset_fetch_refused(&access, &request, version) {
                return frame(key, version, id, &refused);
            }
            let refused = groups::offset_fetch_groups(&access, &mut request);
            let named = groups::offset_fetch_named(&request);
            let mut response = node.offset_fetch(request, version).await;
            response.groups.extend(refused);
            groups::offset_fetch_response(&access, &named, &mut response);
            frame(key, version, id, &response)
        }
        Decoded::JoinGroup(join) => {
            if let Some(refused) = groups::join_group(&access, &join) {
                return frame(key, version, id, &refused);
            }
            let client_id = request.client_id.as_deref().unwrap_or("");
            // Kafka writes a member's host as Java's `InetAddress.toString()` does.
            let host = peer.map_or_else(|| "/unknown".to_owned(), |ip| format!("/{ip}"));
            let response = node.join_group(join, version, client_id, &host).await;
            frame(key, version, id, &response)
        }
        Decoded::DescribeGroups(mut request) => {
            let refused = groups::describe_groups(&access, &mut request);
            let mut response = node.describe_groups(request, version).await;
            response.groups.extend(refused);
            frame(key, version, id, &response)
        }
        Decoded::ListGroups(request) => {
            let mut response = node.list_groups(request, version).await;
            groups::list_groups_response(&access, &mut response);
            frame(key, version, id, &response)
        }
        Decoded::DeleteGroups(mut request) => {
            let refused = groups::delete_groups(&access, &mut request);
            let mut response = node.delete_groups(request, version).await;
            response.results.extend(refused);
            frame(key, version, id, &response)
        }
        Decoded::SyncGroup(request) => whole!(
            groups::sync_group(&access, &request),
            node.sync_group(request, version).await
        ),
        Decoded::Heartbeat(request) => whole!(
            groups::heartbeat(&access, &request),
            node.heartbeat(request, version)
        ),
        Decoded::LeaveGroup(request) => whole!(
            groups::leave_group(&access, &request),
            node.leave_group(request, version).await
        ),
        Decoded::TxnOffsetCommit(mut request) => {
            let refused = txn::txn_offset_commit(&access, &mut request);
            let mut response = node.txn_offset_commit(request, version).await;
            response.topics.extend(refused);
            frame(key, version, id, &response)
        }
        Decoded::InitProducerId(request) => whole!(
            txn::init_producer_id(&access, &request),
            node.init_producer_id(request, version).await
        ),
        Decoded::AddPartitionsToTxn(request) => whole!(
            txn::add_partitions_to_txn(&access, &request),
            node.add_partitions_to_txn(request, version).await
        ),
        Decoded::AddOffsetsToTxn(request) => whole!(
            txn::add_offsets_to_txn(&access, &request),
            node.add_offsets_to_txn(request, version).await
        ),
        Decoded::EndTxn(request) => whole!(
            txn::end_txn(&access, &request),
            node.end_txn(request, version).await
        ),
        Decoded::DeleteRecords(mut request) => {
            let refused = data::delete_records(&access, &mut request);
            let mut response = node.delete_records(request, version).await;
            response.topics.extend(refused);
            frame(key, version, id, &response)
        }
        Decoded::DescribeConfigs(mut request) => {
            let refused = admin::describe_configs(&access, &mut request);
            let mut response = node.describe_configs(request, version).await;
            response.results.extend(refused);
            frame(key, version, id, &response)
        }
        Decoded::AlterConfigs(mut request) => {
            let refused = admin::alter_configs(&access, &mut request);
            let mut response = node.alter_configs(request, version).await;
            response.responses.extend(refused);
            frame(key, version, id, &response)
        }
        Decoded::IncrementalAlterConfigs(mut request) => {
            let refused = admin::incremental_alter_configs(&access, &mut request);
            let mut response = node.incremental_alter_configs(request, version).await;
            response.responses.extend(refused);
            frame(key, version, id, &response)
        }
        Decoded::DeleteTopics(mut request) => {
            // Topics named by id (v6) are authorized under their names.
            let mut names_by_id = std::collections::BTreeMap::new();
            for topic in request.topics.iter().filter(|topic| topic.name.is_none()) {
                if let Some(name) = node.topic_named_by(topic.topic_id.into_bytes()).await {
                    names_by_id.insert(topic.topic_id, name);
                }
            }
            let held: std::collections::BTreeSet<String> =
                node.topic_partitions().await.into_keys().collect();
            let refused = admin::delete_topics(&access, &mut request, &names_by_id, &held);
            let mut response = node.delete_topics(request, version).await;
            response.responses.extend(refused);
            frame(key, version, id, &response)
        }
        Decoded::CreatePartitions(mut request) => {
            let refused = admin::create_partitions(&access, &mut request);
            let mut response = node.create_partitions(request, version).await;
            response.results.extend(refused);
            frame(key, version, id, &response)
        }
        // Kafka answers DescribeCluster, like Metadata, to every authenticated caller.
        Decoded::DescribeCluster(request) => frame(
            key,
            version,
            id,
            &node.describe_cluster(request, version, endpoint),
        ),
        Decoded::DescribeLogDirs(request) => whole!(
            admin::describe_log_dirs(&access, version),
            node.describe_log_dirs(request, version).await
        ),
        Decoded::WriteTxnMarkers(request) => whole!(
            txn::write_txn_markers(&access, &request),
            node.write_txn_markers(request, version).await
        ),
        Decoded::OffsetDelete(mut request) => match groups::offset_delete(&access, &mut request) {
            Err(refused) => frame(key, version, id, &refused),
            Ok(refused) => {
                let mut response = node.offset_delete(request, version).await;
                response.topics.extend(refused);
                frame(key, version, id, &response)
            }
        },
        Decoded::DescribeProducers(mut request) => {
            let refused = data::describe_producers(&access, &mut request);
            let mut response = node.describe_producers(request, version).await;
            response.topics.extend(refused);
            frame(key, version, id, &response)
        }
        Decoded::ListTransactions(request) => {
            let mut response = node.list_transactions(request, version).await;
            txn::list_transactions_response(&access, &mut response);
            frame(key, version, id, &response)
        }
        Decoded::DescribeTransactions(mut request) => {
            let refused = txn::describe_transactions(&access, &mut request);
            let mut response = node.describe_transactions(request, version).await;
            txn::describe_transactions_response(&access, &mut response);
            response.transaction_states.extend(refused);
            frame(key, version, id, &response)
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
        Decoded::DescribeUserScramCredentials(request) => whole!(
            admin::describe_user_scram_credentials(&access, &request),
            node.describe_user_scram_credentials(request, version).await
        ),
        Decoded::AlterUserScramCredentials(request) => whole!(
            admin::alter_user_scram_credentials(&access, &request),
            node.alter_user_scram_credentials(request, version).await
        ),
        Decoded::DescribeAcls(request) => whole!(
            admin::describe_acls(&access),
            node.describe_acls(request, version).await
        ),
        Decoded::CreateAcls(request) => whole!(
            admin::create_acls(&access, &request),
            node.create_acls(request, version).await
        ),
        Decoded::DeleteAcls(request) => whole!(
            admin::delete_acls(&access, &request),
            node.delete_acls(request, version).await
        ),
    }
}

/// The answer `message` as a frame, with its error codes counted: every response type says where it carries
/// them ([`ResponseErrors`]).
fn frame<M: Encodable + ResponseErrors>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    message: &M,
) -> Result<Reply, RequestError> {
    let frame = encode_response(key, version, correlation_id, message).map_err(RequestError::Encode)?;
    Ok(Reply::Frame(frame, ErrorCounts::of(message)))
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
