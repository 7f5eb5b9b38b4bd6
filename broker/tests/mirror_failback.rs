//! Mirroring between `serve` nodes over the Kafka protocol, beyond the records: failback (issue 35) — a former
//! source that mirrors back from its former destination asks that `serve` node, on the administration key, where
//! its failover cut the partition, and aligns its log there — it fetches only what the destination wrote after the
//! cut, not the whole log again; a source that is not a mirrorlog node (it closes the connection on the unknown
//! key) counts as never having mirrored from us. And consumer group offsets: the destination copies what the
//! source's groups committed on mirrored partitions, so consumers resume there after a failover.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use common::mirror::{admin, config, log_bytes, serve};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    offset_commit_request, offset_fetch_request, ApiVersionsResponse, GroupId, OffsetCommitRequest,
    OffsetFetchRequest, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use mirror_link::{FetcherConfig, KafkaSources};
use node::mirror::{AdminRequest, AdminResponse, MirrorLinks};
use node::{Node, SystemClock};
use record_format::BatchBuilder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOPIC: &str = "orders";
/// A second topic, mirrored beside `TOPIC` by the group offsets test.
const OTHER: &str = "payments";

/// Produces one idempotent batch of `count` records to `TOPIC`'s partition 0; the error code.
async fn produce(node: &Node, producer_id: i64, sequence: i32, count: usize) -> i16 {
    produce_to(node, TOPIC, producer_id, sequence, count).await
}

/// Produces one idempotent batch of `count` records to `topic`'s partition 0; the error code.
async fn produce_to(node: &Node, topic_name: &str, producer_id: i64, sequence: i32, count: usize) -> i16 {
    let mut builder = BatchBuilder::new().producer(producer_id, 0, sequence);
    for index in 0..count {
        builder.add(0, None, Some(format!("record {index}").as_bytes()), &[]);
    }
    let mut data = PartitionProduceData::default();
    data.index = 0;
    data.records = Some(builder.build().unwrap().into_bytes());
    let mut topic = TopicProduceData::default();
    topic.name = TopicName(StrBytes::from_string(topic_name.to_owned()));
    topic.partition_data = vec![data];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 10_000;
    request.topic_data = vec![topic];
    let response = node.produce(request, 8).await;
    response.responses[0].partition_responses[0].error_code
}

/// Creates the link `a-to-b` on the destination at `b_address`, mirroring `TOPIC` from `a_address`.
async fn create_link(b_address: &str, a_address: &str) {
    create_link_of(b_address, a_address, &[TOPIC]).await;
}

/// Creates the link `a-to-b` on the destination at `b_address`, mirroring `topics` from `a_address`.
async fn create_link_of(b_address: &str, a_address: &str, topics: &[&str]) {
    let created = admin(
        b_address,
        AdminRequest::Create {
            link: "a-to-b".to_owned(),
            source: a_address.to_owned(),
            topics: topics.iter().map(|topic| (*topic).to_owned()).collect(),
            source_config: Default::default(),
            include: Vec::new(),
            exclude: Vec::new(),
        },
    )
    .await;
    assert!(created.ok, "{created:?}");
}

/// Fails the link `a-to-b` over on the destination at `b_address`.
async fn fail_over(b_address: &str) {
    fail_over_topics(b_address, &[]).await;
}

/// Fails `topics` of the link `a-to-b` over on the destination at `b_address` (all of them when empty).
async fn fail_over_topics(b_address: &str, topics: &[&str]) {
    let failover = admin(
        b_address,
        AdminRequest::Failover {
            link: "a-to-b".to_owned(),
            topics: topics.iter().map(|topic| (*topic).to_owned()).collect(),
        },
    )
    .await;
    assert!(failover.ok, "{failover:?}");
}

fn caught_up(answer: &AdminResponse) -> bool {
    answer
        .links
        .iter()
        .flat_map(|link| &link.partitions)
        .all(|partition| partition.state == "MIRRORING" && partition.lag_offsets == Some(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failback_from_a_serve_node_fetches_only_what_it_wrote_after_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let a_config = config(&dir.path().join("a"), "cluster-a", &[(TOPIC, 1)]);
    let (a_address, a, stop_a, a_running) = serve(a_config.clone(), None).await;
    for sequence in 0..20 {
        assert_eq!(produce(&a, 1, sequence * 5, 5).await, 0);
    }

    // B mirrors A, fails over, and takes writes of its own.
    let (b_address, b, stop_b, b_running) =
        serve(config(&dir.path().join("b"), "cluster-b", &[]), None).await;
    create_link(&b_address, &a_address).await;
    let describe = |link: &str| AdminRequest::Describe {
        link: link.to_owned(),
        topics: Vec::new(),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !caught_up(&admin(&b_address, describe("a-to-b")).await) {
        assert!(tokio::time::Instant::now() < deadline, "B never caught up with A");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    fail_over(&b_address).await;
    for sequence in 0..3 {
        assert_eq!(produce(&b, 9, sequence * 2, 2).await, 0);
    }
    let b_batches = log_bytes(&b, TOPIC, 0).await.len();
    assert_eq!(b_batches, 20 + 1 + 3, "A's batches, the barrier, B's own");

    // A comes back (its links run here, counted) and mirrors from B over the protocol.
    stop_a.send(()).unwrap();
    a_running.await.unwrap();
    let storage = a_config.storage.clone();
    let a = Node::open_on(
        a_config,
        ("127.0.0.1".to_owned(), 0),
        storage.open().unwrap(),
        Arc::new(SystemClock),
    )
    .await
    .unwrap();
    let sources = Arc::new(KafkaSources::new(FetcherConfig::new(b_address.clone())));
    let mut links = MirrorLinks::open(&a, sources).await.unwrap();
    let reversed = links
        .handle(
            &a,
            AdminRequest::Reverse {
                link: "b-to-a".to_owned(),
                source: b_address.clone(),
                topics: vec![TOPIC.to_owned()],
                source_config: Default::default(),
            },
        )
        .await;
    assert!(reversed.ok, "{reversed:?}");
    let mut appended = 0;
    for _ in 0..500 {
        appended += links.step(&a).await;
        if caught_up(&links.handle(&a, describe("b-to-a")).await) {
            break;
        }
    }
    assert_eq!(
        log_bytes(&a, TOPIC, 0).await,
        log_bytes(&b, TOPIC, 0).await,
        "A holds B's log"
    );
    assert_eq!(
        appended, 4,
        "aligned at B's cut: only B's barrier and its three batches were fetched, not A's twenty again"
    );
    drop(links);
    stop_b.send(()).unwrap();
    b_running.await.unwrap();
}

/// Commits `offset` for `group` on `TOPIC`'s partition 0 (a group without members takes it).
async fn commit(node: &Node, group: &str, offset: i64) {
    commit_offsets(node, group, &[(TOPIC, offset)]).await;
}

/// Commits, in one request, each `(topic, offset)` for `group` on the topic's partition 0.
async fn commit_offsets(node: &Node, group: &str, offsets: &[(&str, i64)]) {
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(StrBytes::from_string(group.to_owned()));
    request.generation_id_or_member_epoch = -1;
    for (topic_name, offset) in offsets {
        let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
        partition.committed_offset = *offset;
        partition.committed_metadata = Some(StrBytes::from_static_str("from A"));
        let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
        topic.name = TopicName(StrBytes::from_string((*topic_name).to_owned()));
        topic.partitions = vec![partition];
        request.topics.push(topic);
    }
    let answer = node.offset_commit(request, 7).await;
    for topic in &answer.topics {
        assert_eq!(topic.partitions[0].error_code, 0);
    }
}

/// `group`'s committed offset and metadata on `TOPIC`'s partition 0 (-1 for none).
async fn committed(node: &Node, group: &str) -> (i64, Option<String>) {
    committed_on(node, group, TOPIC).await
}

/// `group`'s committed offset and metadata on `topic_name`'s partition 0 (-1 for none).
async fn committed_on(node: &Node, group: &str, topic_name: &str) -> (i64, Option<String>) {
    let mut topic = offset_fetch_request::OffsetFetchRequestTopic::default();
    topic.name = TopicName(StrBytes::from_string(topic_name.to_owned()));
    topic.partition_indexes = vec![0];
    let mut request = OffsetFetchRequest::default();
    request.group_id = GroupId(StrBytes::from_string(group.to_owned()));
    request.topics = Some(vec![topic]);
    let answer = node.offset_fetch(request, 5).await;
    let partition = &answer.topics[0].partitions[0];
    (
        partition.committed_offset,
        partition.metadata.as_ref().map(|m| m.as_str().to_owned()),
    )
}

/// Polls `group`'s committed offset on `topic` at `node` until it is `offset`, for at most 30 s.
async fn wait_for_committed(node: &Node, group: &str, topic: &str, offset: i64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while committed_on(node, group, topic).await.0 != offset && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        committed_on(node, group, topic).await.0,
        offset,
        "{group} on {topic}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_destination_carries_the_source_groups_offsets_over_and_keeps_them_after_failover() {
    let dir = tempfile::tempdir().unwrap();
    let (a_address, a, stop_a, a_running) = serve(
        config(&dir.path().join("a"), "cluster-a", &[(TOPIC, 1), (OTHER, 1)]),
        None,
    )
    .await;
    for sequence in 0..20 {
        assert_eq!(produce(&a, 1, sequence * 5, 5).await, 0);
        assert_eq!(produce_to(&a, OTHER, 2, sequence * 5, 5).await, 0);
    }
    commit(&a, "readers", 60).await;
    let (b_address, b, stop_b, b_running) =
        serve(config(&dir.path().join("b"), "cluster-b", &[]), None).await;
    create_link_of(&b_address, &a_address, &[TOPIC, OTHER]).await;
    // The link copies the source's groups every few seconds.
    wait_for_committed(&b, "readers", TOPIC, 60).await;
    assert_eq!(committed(&b, "readers").await, (60, Some("from A".to_owned())));
    // A later commit on A follows.
    commit(&a, "readers", 75).await;
    wait_for_committed(&b, "readers", TOPIC, 75).await;

    // Only TOPIC fails over: OTHER, still mirrored, is the witness that the group's offsets were synced again.
    fail_over_topics(&b_address, &[TOPIC]).await;
    commit_offsets(&a, "readers", &[(TOPIC, 90), (OTHER, 40)]).await;
    wait_for_committed(&b, "readers", OTHER, 40).await;
    // The round that carried OTHER's offset of the same commit did not touch the failed-over partition: the
    // group's offsets on it are B's own now.
    assert_eq!(committed(&b, "readers").await.0, 75);
    stop_b.send(()).unwrap();
    b_running.await.unwrap();
    stop_a.send(()).unwrap();
    a_running.await.unwrap();
}

async fn read_request(socket: &mut tokio::net::TcpStream) -> Vec<u8> {
    let mut size = [0u8; 4];
    socket.read_exact(&mut size).await.unwrap();
    let mut request = vec![0u8; i32::from_be_bytes(size) as usize];
    socket.read_exact(&mut request).await.unwrap();
    request
}

/// Accepts one connection on `listener`, answers its ApiVersions handshake, reads the administration request and
/// either answers `answer` (a JSON body) or, with `None`, closes the connection as Apache Kafka does with an API key
/// it does not know.
async fn answer_the_question_once(listener: &tokio::net::TcpListener, answer: Option<&str>) {
    let (mut socket, _) = listener.accept().await.unwrap();
    let request = read_request(&mut socket).await;
    let correlation_id = i32::from_be_bytes(request[4..8].try_into().unwrap());
    let mut body = BytesMut::new();
    body.put_i32(correlation_id);
    ApiVersionsResponse::default().encode(&mut body, 0).unwrap();
    socket
        .write_all(&(body.len() as i32).to_be_bytes())
        .await
        .unwrap();
    socket.write_all(&body).await.unwrap();
    let request = read_request(&mut socket).await;
    assert_eq!(
        i16::from_be_bytes(request[0..2].try_into().unwrap()),
        mirror_admin::MIRROR_ADMIN_API_KEY
    );
    let Some(answer) = answer else {
        return;
    };
    let correlation_id = i32::from_be_bytes(request[4..8].try_into().unwrap());
    let mut body = BytesMut::new();
    body.put_i32(correlation_id);
    body.extend_from_slice(answer.as_bytes());
    socket
        .write_all(&(body.len() as i32).to_be_bytes())
        .await
        .unwrap();
    socket.write_all(&body).await.unwrap();
}

async fn ask(address: &str) -> Option<i64> {
    mirror_link::peer::last_mirrored_offset(
        address,
        "test",
        Duration::from_secs(5),
        &mirror_link::ClientSecurity::plaintext(),
        "cluster-a",
        TOPIC,
        0,
    )
    .await
    .unwrap()
}

/// Two fresh connections, each answering ApiVersions and closing on the question: the broker's answer, "not a
/// mirrorlog node".
#[tokio::test]
async fn a_source_that_closes_the_connection_on_the_question_never_mirrored_from_us() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let closing = tokio::spawn(async move {
        answer_the_question_once(&listener, None).await;
        answer_the_question_once(&listener, None).await;
    });
    assert_eq!(ask(&address).await, None);
    closing.await.unwrap();
}

/// One closing is a fault, not an answer (a mirrorlog node restarting): the question is asked again, and the
/// answer counts.
#[tokio::test]
async fn one_closed_connection_is_not_taken_as_never_mirrored() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let peer = tokio::spawn(async move {
        answer_the_question_once(&listener, None).await;
        answer_the_question_once(&listener, Some(r#"{"ok": true, "last_mirrored_offset": 7}"#)).await;
    });
    assert_eq!(ask(&address).await, Some(7));
    peer.await.unwrap();
}

/// A source given as a bootstrap list whose first broker is down (issue 50, item 2): `create` describes it
/// through the next address, and the link mirrors it to the end; a list that does not parse is refused at
/// `create`, naming the bad entry, and no topic is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_whose_first_bootstrap_address_is_down_mirrors_through_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let (a_address, a, stop_a, a_running) =
        serve(config(&dir.path().join("a"), "cluster-a", &[(TOPIC, 1)]), None).await;
    for sequence in 0..4 {
        assert_eq!(produce(&a, 1, sequence * 5, 5).await, 0);
    }
    let (b_address, b, stop_b, b_running) =
        serve(config(&dir.path().join("b"), "cluster-b", &[]), None).await;
    // A port nobody listens on: connections are refused.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let refused = admin(
        &b_address,
        AdminRequest::Create {
            link: "a-to-b".to_owned(),
            source: format!("{a_address},"),
            topics: vec![TOPIC.to_owned()],
            source_config: Default::default(),
            include: Vec::new(),
            exclude: Vec::new(),
        },
    )
    .await;
    assert!(!refused.ok, "{refused:?}");
    let message = refused
        .error
        .as_ref()
        .map(|error| error.message.clone())
        .unwrap_or_default();
    assert!(message.contains("empty entry"), "{message}");
    assert!(
        b.topic_partitions().await.is_empty(),
        "nothing made for a refused create"
    );

    create_link(&b_address, &format!("{dead},{a_address}")).await;
    let describe = AdminRequest::Describe {
        link: "a-to-b".to_owned(),
        topics: Vec::new(),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut answer = admin(&b_address, describe.clone()).await;
    while !caught_up(&answer) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        answer = admin(&b_address, describe.clone()).await;
    }
    assert!(caught_up(&answer), "{answer:?}");
    assert_eq!(log_bytes(&b, TOPIC, 0).await, log_bytes(&a, TOPIC, 0).await);
    stop_b.send(()).unwrap();
    b_running.await.unwrap();
    stop_a.send(()).unwrap();
    a_running.await.unwrap();
}

/// The error `describe` gives for the link `a-to-b`'s partition 0 of `TOPIC`, if any.
fn partition_error(answer: &AdminResponse) -> Option<String> {
    answer
        .links
        .iter()
        .flat_map(|link| &link.partitions)
        .find(|partition| partition.topic == TOPIC && partition.partition == 0)
        .and_then(|partition| partition.error.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_created_again_on_a_serve_source_fails_its_mirror_by_topic_id_and_mixes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (a_address, a, stop_a, a_running) =
        serve(config(&dir.path().join("a"), "cluster-a", &[(TOPIC, 1)]), None).await;
    for sequence in 0..3 {
        assert_eq!(produce(&a, 1, sequence * 5, 5).await, 0);
    }
    let (b_address, b, stop_b, b_running) =
        serve(config(&dir.path().join("b"), "cluster-b", &[]), None).await;
    create_link(&b_address, &a_address).await;
    let describe = AdminRequest::Describe {
        link: "a-to-b".to_owned(),
        topics: Vec::new(),
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !caught_up(&admin(&b_address, describe.clone()).await) {
        assert!(tokio::time::Instant::now() < deadline, "B never caught up with A");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mirrored = log_bytes(&b, TOPIC, 0).await;
    assert_eq!(mirrored.len(), 3);

    // A's topic is deleted and created again, and the new one written past where B's mirror ends (15).
    let first = a.topic_id(TOPIC).await.unwrap();
    a.delete_topic(TOPIC).await.unwrap();
    a.create_topic(TOPIC, 1).await.unwrap();
    assert_ne!(a.topic_id(TOPIC).await, Some(first));
    for sequence in 0..5 {
        assert_eq!(produce(&a, 2, sequence * 5, 5).await, 0);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let error = loop {
        let answer = admin(&b_address, describe.clone()).await;
        if let Some(error) = partition_error(&answer).filter(|error| error.contains("has topic id")) {
            break error;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the mirror never named the new topic: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(error.contains("deleted and created again"), "{error}");
    assert_eq!(
        log_bytes(&b, TOPIC, 0).await,
        mirrored,
        "B keeps what it mirrored and takes none of the new topic"
    );
    stop_b.send(()).unwrap();
    b_running.await.unwrap();
    stop_a.send(()).unwrap();
    a_running.await.unwrap();
}
