//! A hostile mirror source (issue 35, item 4): a fake Kafka broker on loopback that answers ApiVersions,
//! Metadata and ListOffsets correctly and then, to a `serve` destination's mirror link, a corrupt batch, a cluster
//! id that changed, offsets going backwards, a response cut short, a size field of 2 GiB, or a batch claiming
//! 2 GiB. Each time the link's partition ends FAILED with a typed error `describe` shows, nothing of what the
//! source sent is stored, and the destination keeps serving its other topics. And a hostile administration client: an unknown version, a body
//! that is not JSON, an unknown action or 100,000 nested arrays close that connection only.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use broker::{BrokerConfig, Server};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use node::mirror::{AdminRequest, AdminResponse, PartitionStatus};
use record_format::BatchBuilder;
use storage_config::{Backend, StorageConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TOPIC: &str = "orders";

/// What the fake source does wrong in its Fetch answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hostility {
    /// A batch whose CRC does not match its bytes.
    CorruptBatch,
    /// The cluster id changes after the link was created.
    OtherCluster,
    /// A batch at offset 5, then one at offset 3.
    OffsetsBackwards,
    /// The answer's size field promises more than is sent, then the connection closes.
    TruncatedResponse,
    /// A size field of 2 GiB.
    TwoGibSize,
    /// A batch whose length field claims 2 GiB: never whole in any answer (it used to be dropped as a partial
    /// tail, fetched again and again in silence).
    BatchClaimsTwoGib,
}

fn batch(base_offset: i64) -> Bytes {
    let mut builder = BatchBuilder::new().base_offset(base_offset);
    builder.add(1_700_000_000_000, None, Some(b"from a hostile source"), &[]);
    builder.build().unwrap().into_bytes()
}

fn records(hostility: Hostility) -> Bytes {
    match hostility {
        Hostility::CorruptBatch => {
            let mut bytes = batch(0).to_vec();
            let last = bytes.len() - 1;
            bytes[last] ^= 0xff;
            Bytes::from(bytes)
        }
        Hostility::OffsetsBackwards => {
            let mut bytes = batch(5).to_vec();
            bytes.extend_from_slice(&batch(3));
            Bytes::from(bytes)
        }
        Hostility::BatchClaimsTwoGib => {
            let mut bytes = batch(0).to_vec();
            bytes[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
            Bytes::from(bytes)
        }
        _ => batch(0),
    }
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// One response frame: size, correlation id (response header v0), body encoded at `version`.
fn frame<M: Encodable>(correlation_id: i32, version: i16, message: &M) -> Vec<u8> {
    let mut body = BytesMut::new();
    body.put_i32(correlation_id);
    message.encode(&mut body, version).unwrap();
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&(body.len() as i32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// The fake source's answer to one request (`None`: close the connection).
fn answer(
    hostility: Hostility,
    port: u16,
    metadata_calls: &AtomicUsize,
    key: i16,
    version: i16,
    correlation_id: i32,
) -> Option<Vec<u8>> {
    match ApiKey::try_from(key).ok()? {
        ApiKey::ApiVersions => {
            let mut response = ApiVersionsResponse::default();
            response.api_keys = [
                (ApiKey::Metadata, 2, 2),
                (ApiKey::Fetch, 4, 4),
                (ApiKey::ListOffsets, 1, 1),
            ]
            .into_iter()
            .map(|(key, min, max)| {
                let mut api = ApiVersion::default();
                api.api_key = key as i16;
                api.min_version = min;
                api.max_version = max;
                api
            })
            .collect();
            Some(frame(correlation_id, 0, &response))
        }
        ApiKey::Metadata => {
            let call = metadata_calls.fetch_add(1, Ordering::SeqCst);
            let mut response = MetadataResponse::default();
            let changed = hostility == Hostility::OtherCluster && call > 0;
            response.cluster_id = Some(s(if changed { "an-impostor" } else { "hostile-source" }));
            let mut broker = MetadataResponseBroker::default();
            broker.node_id = BrokerId(0);
            broker.host = s("127.0.0.1");
            broker.port = i32::from(port);
            response.brokers = vec![broker];
            let mut partition = MetadataResponsePartition::default();
            partition.partition_index = 0;
            partition.leader_id = BrokerId(0);
            partition.replica_nodes = vec![BrokerId(0)];
            partition.isr_nodes = vec![BrokerId(0)];
            let mut topic = MetadataResponseTopic::default();
            topic.name = Some(TopicName(s(TOPIC)));
            topic.partitions = vec![partition];
            response.topics = vec![topic];
            Some(frame(correlation_id, version, &response))
        }
        ApiKey::ListOffsets => {
            let mut partition = ListOffsetsPartitionResponse::default();
            partition.partition_index = 0;
            partition.offset = 0;
            let mut topic = ListOffsetsTopicResponse::default();
            topic.name = TopicName(s(TOPIC));
            topic.partitions = vec![partition];
            let mut response = ListOffsetsResponse::default();
            response.topics = vec![topic];
            Some(frame(correlation_id, version, &response))
        }
        ApiKey::Fetch => match hostility {
            Hostility::TwoGibSize => {
                let mut out = i32::MAX.to_be_bytes().to_vec();
                out.extend_from_slice(&correlation_id.to_be_bytes());
                Some(out)
            }
            Hostility::TruncatedResponse => {
                let mut out = 1_000i32.to_be_bytes().to_vec();
                out.extend_from_slice(&correlation_id.to_be_bytes());
                out.extend_from_slice(&[0u8; 100]);
                Some(out)
            }
            _ => {
                let mut partition = PartitionData::default();
                partition.partition_index = 0;
                partition.high_watermark = 10;
                partition.last_stable_offset = 10;
                partition.records = Some(records(hostility));
                let mut topic = FetchableTopicResponse::default();
                topic.topic = TopicName(s(TOPIC));
                topic.partitions = vec![partition];
                let mut response = FetchResponse::default();
                response.responses = vec![topic];
                Some(frame(correlation_id, version, &response))
            }
        },
        _ => None,
    }
}

async fn serve_connection(
    mut stream: TcpStream,
    hostility: Hostility,
    port: u16,
    metadata_calls: Arc<AtomicUsize>,
) {
    loop {
        let Ok(size) = stream.read_i32().await else { return };
        let mut request = vec![0u8; size.clamp(0, 1 << 20) as usize];
        if stream.read_exact(&mut request).await.is_err() || request.len() < 8 {
            return;
        }
        let key = i16::from_be_bytes([request[0], request[1]]);
        let version = i16::from_be_bytes([request[2], request[3]]);
        let correlation_id = i32::from_be_bytes([request[4], request[5], request[6], request[7]]);
        let Some(reply) = answer(hostility, port, &metadata_calls, key, version, correlation_id) else {
            return;
        };
        if stream.write_all(&reply).await.is_err() {
            return;
        }
        if matches!(hostility, Hostility::TruncatedResponse) && key == ApiKey::Fetch as i16 {
            return;
        }
    }
}

/// The fake source; its address.
async fn hostile_source(hostility: Hostility) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let metadata_calls = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_connection(stream, hostility, port, metadata_calls.clone()));
        }
    });
    format!("127.0.0.1:{port}")
}

/// The destination: a `serve` node with a topic of its own; its address.
async fn destination() -> String {
    let storage = StorageConfig::for_backend(Backend::Memory, std::path::Path::new(""));
    let mut config = BrokerConfig::new("127.0.0.1:0".parse().unwrap(), storage);
    config.node.cluster_id = "destination".to_owned();
    config.node.topics = vec![("local".to_owned(), 1)];
    let server = Server::bind(config).await.unwrap();
    let address = server.local_addr().unwrap().to_string();
    tokio::spawn(async move { server.run(std::future::pending::<()>()).await });
    address
}

async fn admin(address: &str, request: &AdminRequest) -> AdminResponse {
    mirror_link::admin::call(
        address,
        request,
        Duration::from_secs(120),
        &mirror_link::ClientSecurity::plaintext(),
    )
    .await
    .unwrap()
}

/// Describes the link until its partition is FAILED; its status.
async fn failed_partition(dest: &str) -> PartitionStatus {
    let describe = AdminRequest::Describe {
        link: "hostile".to_owned(),
        topics: Vec::new(),
    };
    for _ in 0..200 {
        let answer = admin(dest, &describe).await;
        let status = answer.links[0].partitions[0].clone();
        if status.state == "FAILED" {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the partition never failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_source_fails_its_link_with_a_typed_error_stores_nothing_and_the_destination_keeps_serving()
{
    let cases = [
        (Hostility::CorruptBatch, "crc"),
        (Hostility::OtherCluster, "an-impostor"),
        (Hostility::OffsetsBackwards, "backwards"),
        (Hostility::TruncatedResponse, "eof"),
        (Hostility::TwoGibSize, "2147483647"),
        (Hostility::BatchClaimsTwoGib, "claims 2147483659 bytes"),
    ];
    for (hostility, named) in cases {
        let source = hostile_source(hostility).await;
        let dest = destination().await;
        let created = admin(
            &dest,
            &AdminRequest::Create {
                link: "hostile".to_owned(),
                source,
                topics: vec![TOPIC.to_owned()],
                source_config: Default::default(),
                include: Vec::new(),
                exclude: Vec::new(),
            },
        )
        .await;
        if hostility == Hostility::OtherCluster {
            // Refused at the session's start, before alignment could truncate anything (ADR 0046).
            let refusal = created
                .error
                .clone()
                .map(|error| error.message)
                .unwrap_or_default();
            assert!(refusal.contains(named), "{hostility:?}: {created:?}");
        } else {
            assert!(created.ok, "{hostility:?}: {created:?}");
        }
        let status = failed_partition(&dest).await;
        let error = status.error.clone().unwrap_or_default();
        assert!(!error.is_empty(), "{hostility:?}: no error in {status:?}");
        assert!(
            error.to_lowercase().contains(named),
            "{hostility:?}: the error does not name the problem ({named}): {error}"
        );
        assert_eq!(
            status.log_end_offset, 0,
            "{hostility:?}: something was stored: {status:?}"
        );
        // The destination serves everything else: a produce to its own topic is acknowledged.
        let (code, _) = common::produce_to(dest.parse().unwrap(), "local", 0, common::valid_batch()).await;
        assert_eq!(code, 0, "{hostility:?}: the destination stopped serving");
    }
}

/// Sends one frame with the administration key and `body`; true when the broker closed the connection instead of
/// answering.
async fn closed_on(address: &str, version: i16, body: &[u8]) -> bool {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let mut frame = Vec::new();
    frame.extend_from_slice(&broker::mirror::MIRROR_ADMIN_API_KEY.to_be_bytes());
    frame.extend_from_slice(&version.to_be_bytes());
    frame.extend_from_slice(&7i32.to_be_bytes());
    frame.extend_from_slice(&(-1i16).to_be_bytes());
    frame.extend_from_slice(body);
    let mut sized = (frame.len() as i32).to_be_bytes().to_vec();
    sized.extend_from_slice(&frame);
    stream.write_all(&sized).await.unwrap();
    let mut answer = [0u8; 4];
    matches!(
        tokio::time::timeout(Duration::from_secs(10), stream.read(&mut answer)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_administration_request_closes_its_connection_and_the_broker_keeps_serving() {
    let dest = destination().await;
    let list = br#"{"action": "list"}"#;
    assert!(closed_on(&dest, 1, list).await, "an unknown version was answered");
    assert!(
        closed_on(&dest, 0, b"\xff\x00 not json").await,
        "a body that is not JSON was answered"
    );
    assert!(
        closed_on(&dest, 0, br#"{"action": "explode"}"#).await,
        "an unknown action was answered"
    );
    let nested = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(
        closed_on(&dest, 0, nested.as_bytes()).await,
        "100,000 nested arrays were answered"
    );
    assert!(
        !closed_on(&dest, 0, list).await,
        "a well-formed request was refused"
    );
    let listed = admin(&dest, &AdminRequest::List).await;
    assert!(listed.ok && listed.links.is_empty(), "{listed:?}");
    let (code, _) = common::produce_to(dest.parse().unwrap(), "local", 0, common::valid_batch()).await;
    assert_eq!(code, 0);
}
