//! Bad input and load against a running broker (in-process, memory backend, ephemeral loopback port): each bad
//! request is answered with an error or a closed connection, and the broker keeps serving everyone else.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use broker::{BrokerConfig, Server};
use storage_config::StorageConfig;

struct Running {
    address: SocketAddr,
    serving: common::Serving,
}

impl Running {
    async fn start() -> Self {
        let storage = StorageConfig::for_backend(storage_config::Backend::Memory, std::path::Path::new(""));
        let mut config = BrokerConfig::new("127.0.0.1:0".parse().expect("address"), storage);
        config.node.topics = vec![("orders".to_owned(), 1)];
        config.node.group_initial_rebalance_delay_ms = 0;
        config.max_request_bytes = 1 << 20;
        let server = Server::bind(config).await.expect("bind");
        let address = server.local_addr().expect("address");
        Running {
            address,
            serving: common::Serving::run(server),
        }
    }

    async fn shutdown(self) {
        self.serving.shutdown().await;
    }
}

fn request_frame<M: Encodable>(key: ApiKey, version: i16, correlation_id: i32, message: &M) -> Bytes {
    let mut body = BytesMut::new();
    body.put_i16(key as i16);
    body.put_i16(version);
    body.put_i32(correlation_id);
    body.put_i16(4);
    body.put_slice(b"test");
    if key.request_header_version(version) >= 2 {
        body.put_u8(0);
    }
    message.encode(&mut body, version).expect("encode");
    let mut frame = BytesMut::new();
    frame.put_i32(body.len() as i32);
    frame.put_slice(&body);
    frame.freeze()
}

fn raw_frame(api_key: i16, version: i16, body: &[u8]) -> Bytes {
    let mut frame = BytesMut::new();
    frame.put_i32((10 + body.len()) as i32);
    frame.put_i16(api_key);
    frame.put_i16(version);
    frame.put_i32(1);
    frame.put_i16(-1);
    frame.put_slice(body);
    frame.freeze()
}

/// Reads one response frame: `(correlation id, rest)`; `None` when the broker closed the connection.
async fn read_response(stream: &mut TcpStream) -> Option<(i32, Bytes)> {
    let size = tokio::time::timeout(Duration::from_secs(10), stream.read_i32())
        .await
        .expect("the broker answers or closes within 10 s")
        .ok()?;
    let mut body = vec![0u8; size as usize];
    stream.read_exact(&mut body).await.ok()?;
    let mut body = Bytes::from(body);
    let correlation_id = body.get_i32();
    Some((correlation_id, body))
}

async fn api_versions_answered(address: SocketAddr) -> ApiVersionsResponse {
    let mut stream = TcpStream::connect(address).await.expect("connect");
    stream
        .write_all(&request_frame(
            ApiKey::ApiVersions,
            0,
            7,
            &ApiVersionsRequest::default(),
        ))
        .await
        .expect("write");
    let (correlation_id, mut body) = read_response(&mut stream).await.expect("an answer");
    assert_eq!(correlation_id, 7);
    ApiVersionsResponse::decode(&mut body, 0).expect("decode")
}

async fn closed_without_answer(address: SocketAddr, bytes: &[u8]) {
    let mut stream = TcpStream::connect(address).await.expect("connect");
    let _ = stream.write_all(bytes).await;
    assert!(
        read_response(&mut stream).await.is_none(),
        "expected the connection to close"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bytes_close_the_connection_and_the_broker_keeps_serving() {
    let broker = Running::start().await;
    let mut seed: u64 = 0x5eed;
    for length in [1usize, 3, 9, 64, 500] {
        let mut bytes = Vec::with_capacity(length + 4);
        bytes.extend_from_slice(&(length as i32).to_be_bytes());
        for _ in 0..length {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            bytes.push((seed >> 56) as u8);
        }
        closed_without_answer(broker.address, &bytes).await;
    }
    assert_eq!(api_versions_answered(broker.address).await.error_code, 0);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_frame_and_a_two_gib_frame_length_close_the_connection() {
    let broker = Running::start().await;
    // A frame announcing 100 bytes that stops after 12.
    let mut stream = TcpStream::connect(broker.address).await.expect("connect");
    let mut truncated = 100i32.to_be_bytes().to_vec();
    truncated.extend_from_slice(&[0, 18, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]);
    stream.write_all(&truncated).await.expect("write");
    stream.shutdown().await.expect("half-close");
    assert!(read_response(&mut stream).await.is_none());
    // 2 GiB − 1 announced: refused at once, nothing allocated for it.
    closed_without_answer(broker.address, &i32::MAX.to_be_bytes()).await;
    closed_without_answer(broker.address, &(-5i32).to_be_bytes()).await;
    assert_eq!(api_versions_answered(broker.address).await.error_code, 0);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_api_or_unsupported_version_closes_but_api_versions_answers_in_v0() {
    let broker = Running::start().await;
    closed_without_answer(broker.address, &raw_frame(999, 0, &[])).await;
    closed_without_answer(broker.address, &raw_frame(ApiKey::Produce as i16, 99, &[])).await;
    // An array bomb: Metadata v1 claiming i32::MAX topics.
    closed_without_answer(
        broker.address,
        &raw_frame(ApiKey::Metadata as i16, 1, &i32::MAX.to_be_bytes()),
    )
    .await;

    let mut stream = TcpStream::connect(broker.address).await.expect("connect");
    stream
        .write_all(&raw_frame(ApiKey::ApiVersions as i16, 99, &[1, 2, 3]))
        .await
        .expect("write");
    let (_, mut body) = read_response(&mut stream).await.expect("answered");
    let response = ApiVersionsResponse::decode(&mut body, 0).expect("v0 response");
    assert_eq!(response.error_code, 35, "UNSUPPORTED_VERSION");
    assert!(response
        .api_keys
        .iter()
        .any(|api| api.api_key == ApiKey::Produce as i16));
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_idle_connections_do_not_stop_the_broker_serving_others() {
    let broker = Running::start().await;
    let mut idle = Vec::new();
    for _ in 0..1000 {
        idle.push(TcpStream::connect(broker.address).await.expect("connect"));
    }
    // Half of them send half a frame and stall.
    for stream in idle.iter_mut().step_by(2) {
        stream.write_all(&[0, 0, 1, 0, 0]).await.expect("write");
    }
    assert_eq!(api_versions_answered(broker.address).await.error_code, 0);
    drop(idle);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_answered_in_order_behind_a_long_poll_fetch() {
    let broker = Running::start().await;
    let mut stream = TcpStream::connect(broker.address).await.expect("connect");
    let mut partition = fetch_request::FetchPartition::default();
    partition.partition_max_bytes = 1 << 20;
    let mut topic = fetch_request::FetchTopic::default();
    topic.topic = TopicName(StrBytes::from_static_str("orders"));
    topic.partitions = vec![partition];
    let mut fetch = FetchRequest::default();
    fetch.replica_id = BrokerId(-1);
    fetch.max_wait_ms = 400;
    fetch.min_bytes = 1;
    fetch.max_bytes = 1 << 20;
    fetch.topics = vec![topic];
    let mut pipelined = request_frame(ApiKey::Fetch, 11, 1, &fetch).to_vec();
    pipelined.extend_from_slice(&request_frame(
        ApiKey::ApiVersions,
        3,
        2,
        &ApiVersionsRequest::default(),
    ));
    let started = tokio::time::Instant::now();
    stream.write_all(&pipelined).await.expect("write");
    let (first, mut body) = read_response(&mut stream).await.expect("fetch answer");
    assert_eq!(first, 1, "the fetch is answered first");
    assert!(
        started.elapsed() >= Duration::from_millis(350),
        "the fetch waited for data"
    );
    let response = FetchResponse::decode(&mut body, 11).expect("fetch response");
    assert_eq!(response.responses[0].partitions[0].error_code, 0);
    let (second, _) = read_response(&mut stream).await.expect("api versions answer");
    assert_eq!(second, 2);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_produced_batch_with_a_bad_crc_is_refused_with_corrupt_message_and_nothing_is_stored() {
    let broker = Running::start().await;
    let mut corrupt = common::valid_batch().to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff; // a value byte: inside the CRC's range
    let (error, _) = common::produce(broker.address, 0, Bytes::from(corrupt)).await;
    assert_eq!(error, 2, "CORRUPT_MESSAGE");
    let (error, _) = common::produce(broker.address, 0, common::valid_batch()).await;
    assert_eq!(error, 0);
    broker.shutdown().await;
}

fn join_group(member_id: &str, protocols: usize) -> JoinGroupRequest {
    let mut protocol = join_group_request::JoinGroupRequestProtocol::default();
    protocol.name = StrBytes::from_static_str("p");
    let mut request = JoinGroupRequest::default();
    request.group_id = GroupId(StrBytes::from_static_str("group"));
    request.session_timeout_ms = 10_000;
    request.rebalance_timeout_ms = 60_000;
    request.member_id = StrBytes::from_string(member_id.to_owned());
    request.protocol_type = StrBytes::from_static_str("consumer");
    request.protocols = vec![protocol; protocols];
    request
}

/// Sends one request on `stream` and decodes its answer.
async fn ask<Q: Encodable, A: Decodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    request: &Q,
) -> A {
    stream
        .write_all(&request_frame(key, version, 3, request))
        .await
        .expect("write");
    let (_, mut body) = read_response(stream).await.expect("an answer");
    A::decode(&mut body, version).expect("decode")
}

/// Joins `group` as a new member (JoinGroup v5: the id first, then the join) and syncs as its only member.
async fn lone_member(stream: &mut TcpStream) -> (String, i32) {
    let first: JoinGroupResponse = ask(stream, ApiKey::JoinGroup, 5, &join_group("", 1)).await;
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    let joined: JoinGroupResponse = ask(
        stream,
        ApiKey::JoinGroup,
        5,
        &join_group(first.member_id.as_str(), 1),
    )
    .await;
    assert_eq!(joined.error_code, 0);
    let mut sync = SyncGroupRequest::default();
    sync.group_id = GroupId(StrBytes::from_static_str("group"));
    sync.generation_id = joined.generation_id;
    sync.member_id = joined.member_id.clone();
    let synced: SyncGroupResponse = ask(stream, ApiKey::SyncGroup, 3, &sync).await;
    assert_eq!(synced.error_code, 0);
    (joined.member_id.as_str().to_owned(), joined.generation_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_group_requests_close_their_connection_and_a_waiting_join_does_not_hold_the_shutdown() {
    let running = Running::start().await;
    // More protocols than the shape check's element limit: refused before decoding.
    let huge = request_frame(ApiKey::JoinGroup, 5, 1, &join_group("", 100_001));
    assert!(
        huge.len() < 1 << 20,
        "within the frame limit, so the element limit is what refuses it"
    );
    closed_without_answer(running.address, &huge).await;
    // A SyncGroup whose assignment is larger than a frame may be.
    let mut assignment = sync_group_request::SyncGroupRequestAssignment::default();
    assignment.member_id = StrBytes::from_static_str("member");
    assignment.assignment = Bytes::from(vec![1u8; 2 << 20]);
    let mut sync = SyncGroupRequest::default();
    sync.group_id = GroupId(StrBytes::from_static_str("group"));
    sync.member_id = StrBytes::from_static_str("member");
    sync.assignments = vec![assignment];
    closed_without_answer(running.address, &request_frame(ApiKey::SyncGroup, 3, 2, &sync)).await;

    // A member that stays; a second one's join waits for it to rejoin (it never does).
    let mut first = TcpStream::connect(running.address).await.expect("connect");
    lone_member(&mut first).await;
    let mut second = TcpStream::connect(running.address).await.expect("connect");
    let id: JoinGroupResponse = ask(&mut second, ApiKey::JoinGroup, 5, &join_group("", 1)).await;
    second
        .write_all(&request_frame(
            ApiKey::JoinGroup,
            5,
            4,
            &join_group(id.member_id.as_str(), 1),
        ))
        .await
        .expect("write");
    // The second join waits once the group rebalances for it (the group's state, asked on another connection).
    let mut probe = TcpStream::connect(running.address).await.expect("connect");
    let mut describe = DescribeGroupsRequest::default();
    describe.groups = vec![GroupId(StrBytes::from_static_str("group"))];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let described: DescribeGroupsResponse = ask(&mut probe, ApiKey::DescribeGroups, 4, &describe).await;
        if described.groups[0].group_state.as_str() == "PreparingRebalance" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the second join never began a rebalance: {described:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The broker keeps serving others meanwhile, and shuts down without waiting for the rebalance.
    assert!(!api_versions_answered(running.address).await.api_keys.is_empty());
    running.shutdown().await;
    let (_, mut body) = read_response(&mut second)
        .await
        .expect("the waiting join is answered at shutdown");
    let answer = JoinGroupResponse::decode(&mut body, 5).expect("decode");
    assert_eq!(
        answer.error_code, 25,
        "UNKNOWN_MEMBER_ID: the group is gone, join again from scratch"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_groups_and_heartbeats_for_unknown_ones_leave_the_broker_serving() {
    let running = Running::start().await;
    let mut stream = TcpStream::connect(running.address).await.expect("connect");
    const GROUPS: usize = 3_000;
    for n in 0..GROUPS {
        // JoinGroup v3 takes a new member without the id round trip: each group completes its first rebalance.
        let mut join = join_group("", 1);
        join.group_id = GroupId(StrBytes::from_string(format!("group-{n}")));
        let joined: JoinGroupResponse = ask(&mut stream, ApiKey::JoinGroup, 3, &join).await;
        assert_eq!((joined.error_code, joined.generation_id), (0, 1), "group-{n}");
    }
    let listed: ListGroupsResponse =
        ask(&mut stream, ApiKey::ListGroups, 2, &ListGroupsRequest::default()).await;
    assert_eq!(listed.groups.len(), GROUPS);
    for n in 0..100 {
        let mut beat = HeartbeatRequest::default();
        beat.group_id = GroupId(StrBytes::from_string(format!("never-{n}")));
        beat.member_id = StrBytes::from_static_str("made-up");
        beat.generation_id = 1;
        let answer: HeartbeatResponse = ask(&mut stream, ApiKey::Heartbeat, 3, &beat).await;
        assert_eq!(answer.error_code, 25, "UNKNOWN_MEMBER_ID");
    }
    let listed: ListGroupsResponse =
        ask(&mut stream, ApiKey::ListGroups, 2, &ListGroupsRequest::default()).await;
    assert_eq!(listed.groups.len(), GROUPS, "a heartbeat creates no group");
    assert!(!api_versions_answered(running.address).await.api_keys.is_empty());
    running.shutdown().await;
}
