//! A source of several brokers, as a Kafka cluster is (issue 50, item 2): the link reaches it through any address
//! of its bootstrap list and, once the bootstrap brokers are gone, through the brokers its last answer named;
//! follows a leader that moved after `NOT_LEADER_OR_FOLLOWER`; and a topic deleted at the source, or a partition
//! without a leader, fails only its own partitions, with the error Kafka named.
//!
//! The source is a scripted cluster on loopback: each broker answers ApiVersions, Metadata and Fetch from one
//! shared state the test changes (leaders, topics, brokers up or down). A broker that is down closes every
//! connection, as a killed process's sockets do.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use mirror_fsm::{FetchLimits, PartitionFetch};
use mirror_link::{FetcherConfig, SourceCluster};
use record_format::BatchBuilder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const CLUSTER_ID: &str = "multi-broker-source";

/// What the scripted cluster answers.
#[derive(Debug, Default)]
struct State {
    /// Broker id → (address, up).
    brokers: BTreeMap<i32, (String, bool)>,
    /// Topic → its partitions' leaders (−1: none).
    leaders: BTreeMap<String, Vec<i32>>,
    /// Topics answered with this error.
    topic_errors: BTreeMap<String, i16>,
    /// Every partition holds one batch at offset 0.
    batch: Bytes,
    /// Each topic's id, answered in Metadata v10+ and looked up by Fetch v13+ (none: the source has no ids).
    topic_ids: BTreeMap<String, [u8; 16]>,
    /// The highest Fetch and Metadata versions advertised (0: the defaults, 11 and 8, from before topic ids).
    highest_versions: Option<(i16, i16)>,
    /// The version of every Fetch received.
    fetch_versions: Vec<i16>,
    /// Brokers up but not yet named in Metadata (joining the cluster later).
    unlisted: Vec<i32>,
    /// Topics whose fetches (only) are answered with this error (Metadata describes them).
    fetch_errors: BTreeMap<String, i16>,
}

type Shared = Arc<Mutex<State>>;

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap()
}

/// Starts `count` brokers (ids 1..=count) on loopback; every partition of `leaders` led as given.
async fn cluster(count: i32, leaders: &[(&str, Vec<i32>)]) -> Shared {
    let mut builder = BatchBuilder::new().base_offset(0);
    builder.add(1_000, None, Some(b"value"), &[]);
    let state: Shared = Arc::new(Mutex::new(State {
        leaders: leaders
            .iter()
            .map(|(topic, leaders)| (topic.to_string(), leaders.clone()))
            .collect(),
        batch: builder.build().unwrap().into_bytes(),
        ..State::default()
    }));
    for id in 1..=count {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        lock(&state).brokers.insert(id, (address, true));
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                if !up(&state, id) {
                    continue; // a down broker closes what it accepts
                }
                tokio::spawn(serve(stream, Arc::clone(&state), id));
            }
        });
    }
    state
}

fn up(state: &Shared, id: i32) -> bool {
    lock(state).brokers.get(&id).is_some_and(|(_, up)| *up)
}

fn address(state: &Shared, id: i32) -> String {
    lock(state).brokers[&id].0.clone()
}

/// One connection: requests answered in order while the broker is up.
async fn serve(mut stream: TcpStream, state: Shared, id: i32) {
    loop {
        let Ok(size) = stream.read_i32().await else {
            return;
        };
        let mut request = vec![0u8; size as usize];
        if stream.read_exact(&mut request).await.is_err() || !up(&state, id) {
            return;
        }
        let key = i16::from_be_bytes([request[0], request[1]]);
        let version = i16::from_be_bytes([request[2], request[3]]);
        let api = ApiKey::try_from(key).unwrap();
        let mut body = Bytes::from(request);
        let header = RequestHeader::decode(&mut body, api.request_header_version(version)).unwrap();
        let answer = match api {
            ApiKey::ApiVersions => encode(&api_versions(&state), version),
            ApiKey::Metadata => encode(&metadata(&state), version),
            ApiKey::Fetch => {
                let request = FetchRequest::decode(&mut body, version).unwrap();
                lock(&state).fetch_versions.push(version);
                encode(&fetch(&state, id, &request, version), version)
            }
            other => panic!("the scripted broker does not serve {other:?}"),
        };
        let mut head = BytesMut::new();
        let mut response_header = ResponseHeader::default();
        response_header.correlation_id = header.correlation_id;
        response_header
            .encode(&mut head, api.response_header_version(version))
            .unwrap();
        let size = (head.len() + answer.len()) as i32;
        let mut frame = size.to_be_bytes().to_vec();
        frame.extend_from_slice(&head);
        frame.extend_from_slice(&answer);
        if stream.write_all(&frame).await.is_err() {
            return;
        }
    }
}

fn encode<T: Encodable>(message: &T, version: i16) -> BytesMut {
    let mut out = BytesMut::new();
    message.encode(&mut out, version).unwrap();
    out
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn api_versions(state: &Shared) -> ApiVersionsResponse {
    let (fetch, metadata) = lock(state).highest_versions.unwrap_or((11, 8));
    let mut response = ApiVersionsResponse::default();
    for (key, min, max) in [
        (ApiKey::ApiVersions, 0, 0),
        (ApiKey::Metadata, 2, metadata),
        (ApiKey::Fetch, 4, fetch),
    ] {
        let mut api = ApiVersion::default();
        api.api_key = key as i16;
        api.min_version = min;
        api.max_version = max;
        response.api_keys.push(api);
    }
    response
}

fn metadata(state: &Shared) -> MetadataResponse {
    let state = lock(state);
    let mut response = MetadataResponse::default();
    response.cluster_id = Some(s(CLUSTER_ID));
    for (&id, (address, _)) in &state.brokers {
        if state.unlisted.contains(&id) {
            continue;
        }
        let (host, port) = address.rsplit_once(':').unwrap();
        let mut broker = MetadataResponseBroker::default();
        broker.node_id = BrokerId(id);
        broker.host = s(host);
        broker.port = port.parse().unwrap();
        response.brokers.push(broker);
    }
    for (name, leaders) in &state.leaders {
        let mut topic = MetadataResponseTopic::default();
        topic.name = Some(TopicName(s(name)));
        if let Some(id) = state.topic_ids.get(name) {
            topic.topic_id = uuid::Uuid::from_bytes(*id);
        }
        if let Some(&code) = state.topic_errors.get(name) {
            topic.error_code = code;
        } else {
            for (index, &leader) in leaders.iter().enumerate() {
                let mut partition = MetadataResponsePartition::default();
                partition.partition_index = index as i32;
                partition.leader_id = BrokerId(leader);
                partition.error_code = if leader < 0 { 5 } else { 0 };
                topic.partitions.push(partition);
            }
        }
        response.topics.push(topic);
    }
    response
}

/// Fetch v13+ names topics by id: an id no topic has now answers UNKNOWN_TOPIC_ID, as Kafka does.
fn fetch(state: &Shared, id: i32, request: &FetchRequest, version: i16) -> FetchResponse {
    let state = lock(state);
    let mut response = FetchResponse::default();
    for asked in &request.topics {
        let mut topic = FetchableTopicResponse::default();
        let name = if version >= 13 {
            topic.topic_id = asked.topic_id;
            state
                .topic_ids
                .iter()
                .find(|(_, id)| *id == asked.topic_id.as_bytes())
                .map(|(name, _)| name.clone())
        } else {
            topic.topic = asked.topic.clone();
            Some(asked.topic.to_string())
        };
        for wanted in &asked.partitions {
            let mut partition = PartitionData::default();
            partition.partition_index = wanted.partition;
            let Some(name) = name.as_deref() else {
                partition.error_code = 100; // UNKNOWN_TOPIC_ID
                topic.partitions.push(partition);
                continue;
            };
            let leader = state
                .leaders
                .get(name)
                .and_then(|leaders| leaders.get(wanted.partition as usize))
                .copied();
            if let Some(&code) = state.topic_errors.get(name).or(state.fetch_errors.get(name)) {
                partition.error_code = code;
            } else if leader != Some(id) {
                partition.error_code = 6; // NOT_LEADER_OR_FOLLOWER
            } else {
                partition.high_watermark = 1;
                partition.last_stable_offset = 1;
                partition.records = (wanted.fetch_offset == 0).then(|| state.batch.clone());
            }
            topic.partitions.push(partition);
        }
        response.responses.push(topic);
    }
    response
}

fn source(bootstrap: String) -> SourceCluster {
    let mut config = FetcherConfig::new(bootstrap);
    config.timeout = Duration::from_secs(5);
    SourceCluster::new(config)
}

fn wanted(partitions: &[(&str, i32)]) -> Vec<PartitionFetch> {
    partitions
        .iter()
        .map(|(topic, partition)| PartitionFetch {
            topic: topic.to_string(),
            partition: *partition,
            offset: 0,
            topic_id: None,
        })
        .collect()
}

/// One round; for each partition, its batch count or its error.
async fn round(source: &mut SourceCluster, partitions: &[(&str, i32)]) -> Vec<Result<usize, String>> {
    round_of(source, wanted(partitions)).await
}

/// One round of `wanted`; for each partition, its batch count or its error.
async fn round_of(source: &mut SourceCluster, wanted: Vec<PartitionFetch>) -> Vec<Result<usize, String>> {
    source
        .fetch(&wanted, FetchLimits::single(1 << 20), 0)
        .await
        .into_iter()
        .map(|answer| {
            answer
                .map(|fetched| fetched.response.batches.len())
                .map_err(|error| format!("{error:?}"))
        })
        .collect()
}

#[tokio::test]
async fn a_source_is_reached_through_the_next_bootstrap_address_when_the_first_is_down() {
    let state = cluster(2, &[("orders", vec![2])]).await;
    lock(&state).brokers.get_mut(&1).unwrap().1 = false;
    let mut source = source(format!("{},{}", address(&state, 1), address(&state, 2)));
    assert_eq!(round(&mut source, &[("orders", 0)]).await, vec![Ok(1)]);
    assert_eq!(source.cluster_id(), Some(CLUSTER_ID));
}

#[tokio::test]
async fn when_every_bootstrap_broker_is_gone_the_session_reopens_through_a_broker_the_source_named() {
    let state = cluster(3, &[("orders", vec![2])]).await;
    let mut source = source(address(&state, 1));
    assert_eq!(round(&mut source, &[("orders", 0)]).await, vec![Ok(1)]);
    // The bootstrap broker dies and the leader moves: broker 2 says NOT_LEADER_OR_FOLLOWER, the session ends.
    lock(&state).brokers.get_mut(&1).unwrap().1 = false;
    lock(&state).leaders.insert("orders".into(), vec![3]);
    let moved = round(&mut source, &[("orders", 0)]).await;
    assert!(
        moved[0]
            .as_ref()
            .unwrap_err()
            .contains("NOT_LEADER_OR_FOLLOWER (6)"),
        "{moved:?}"
    );
    // The next round asks brokers 2 and 3 (named by the last answer) and fetches from the new leader.
    assert_eq!(round(&mut source, &[("orders", 0)]).await, vec![Ok(1)]);
}

#[tokio::test]
async fn a_deleted_topic_fails_only_its_own_partitions_with_the_error_kafka_named() {
    let state = cluster(2, &[("orders", vec![1, 2]), ("payments", vec![2])]).await;
    let mut source = source(address(&state, 1));
    let both = [("orders", 0), ("orders", 1), ("payments", 0)];
    assert_eq!(round(&mut source, &both).await, vec![Ok(1), Ok(1), Ok(1)]);
    lock(&state).topic_errors.insert("payments".into(), 3);
    // The fetch of payments-0 hears UNKNOWN_TOPIC_OR_PARTITION, which makes the next round ask for Metadata
    // again; from then on payments alone fails, with Kafka's error for the topic, retryable.
    let first = round(&mut source, &both).await;
    assert_eq!(first[..2], [Ok(1), Ok(1)], "{first:?}");
    assert!(
        first[2]
            .as_ref()
            .unwrap_err()
            .contains("UNKNOWN_TOPIC_OR_PARTITION (3)"),
        "{first:?}"
    );
    let answers = round(&mut source, &both).await;
    assert_eq!(answers[..2], [Ok(1), Ok(1)], "{answers:?}");
    let error = answers[2].as_ref().unwrap_err();
    assert!(
        error.contains("UNKNOWN_TOPIC_OR_PARTITION (3)") && error.contains("for the topic"),
        "{error}"
    );
    assert!(error.contains("retryable: true"), "{error}");
}

#[tokio::test]
async fn a_partition_without_a_leader_waits_with_leader_not_available_while_the_others_go_on() {
    let state = cluster(2, &[("orders", vec![1, -1])]).await;
    let mut source = source(address(&state, 2));
    let answers = round(&mut source, &[("orders", 0), ("orders", 1)]).await;
    assert_eq!(answers[0], Ok(1), "{answers:?}");
    let error = answers[1].as_ref().unwrap_err();
    assert!(error.contains("LEADER_NOT_AVAILABLE (5)"), "{error}");
    assert!(error.contains("retryable: true"), "{error}");
    // The election ends: the next round finds the leader.
    lock(&state).leaders.insert("orders".into(), vec![1, 2]);
    assert_eq!(
        round(&mut source, &[("orders", 0), ("orders", 1)]).await,
        vec![Ok(1), Ok(1)]
    );
}

#[tokio::test]
async fn a_source_none_of_whose_addresses_answers_names_each_one_tried() {
    let state = cluster(2, &[("orders", vec![1])]).await;
    for id in [1, 2] {
        lock(&state).brokers.get_mut(&id).unwrap().1 = false;
    }
    let (first, second) = (address(&state, 1), address(&state, 2));
    let mut source = source(format!("{first},{second}"));
    let answers = round(&mut source, &[("orders", 0)]).await;
    let error = answers[0].as_ref().unwrap_err();
    assert!(error.contains("no source broker answered Metadata"), "{error}");
    assert!(error.contains(&first) && error.contains(&second), "{error}");
    assert!(error.contains("retryable: true"), "{error}");
}

const FIRST_ID: [u8; 16] = [1; 16];
const SECOND_ID: [u8; 16] = [2; 16];

/// A source with topic ids (Kafka 2.8+): Fetch v13, Metadata v12.
async fn cluster_with_topic_ids() -> Shared {
    let state = cluster(2, &[("orders", vec![1])]).await;
    let mut locked = lock(&state);
    locked.highest_versions = Some((13, 12));
    locked.topic_ids.insert("orders".into(), FIRST_ID);
    drop(locked);
    state
}

/// ADR 0050: the id the link recorded at `create` goes on the wire, so a topic deleted and created again under the
/// same name is never fetched from — not even after a Metadata refresh has learnt the new topic's id, which a
/// fetch by the session's id (or by name) would then follow into the other topic's log.
#[tokio::test]
async fn a_fetch_asks_for_the_recorded_topic_id_and_a_topic_created_again_answers_unknown_topic_id() {
    let state = cluster_with_topic_ids().await;
    let mut source = source(address(&state, 1));
    let recorded = || {
        let mut wanted = wanted(&[("orders", 0)]);
        wanted[0].topic_id = Some(FIRST_ID);
        wanted
    };
    assert_eq!(round_of(&mut source, recorded()).await, vec![Ok(1)]);
    assert_eq!(lock(&state).fetch_versions, vec![13], "asked by topic id");
    lock(&state).topic_ids.insert("orders".into(), SECOND_ID);
    for attempt in 0..3 {
        // The first round's answer makes the next ask for Metadata again, which names the new id: still refused.
        let answers = round_of(&mut source, recorded()).await;
        let error = answers[0].as_ref().unwrap_err();
        assert!(
            error.contains("UNKNOWN_TOPIC_ID (100)"),
            "attempt {attempt}: {error}"
        );
        assert!(error.contains(&mirror_fsm::topic_id_text(FIRST_ID)), "{error}");
        assert!(error.contains("created again"), "{error}");
        // Retryable: the partition's retry prepares again, and its Metadata tells a topic deleted (still absent:
        // wait) from one created again (another id: failed for good, nothing truncated).
        assert!(error.contains("retryable: true"), "{error}");
    }
}

/// ADR 0050: a preparation's first question (before anything is truncated) tells the three cases apart — the
/// recorded topic (go on), no topic of that name (deleted, or created again and not yet in this broker's metadata:
/// wait, retryably — an absence is no evidence), another id (created again: failed for good).
#[tokio::test]
async fn a_preparation_goes_on_with_the_recorded_topic_waits_while_it_is_absent_and_refuses_another_id() {
    let state = cluster_with_topic_ids().await;
    let mut source = source(address(&state, 1));
    let verified = source.verified_cluster_id("orders", Some(FIRST_ID)).await;
    assert_eq!(verified.unwrap(), CLUSTER_ID);

    {
        let mut locked = lock(&state);
        locked.topic_ids.remove("orders");
        locked.topic_errors.insert("orders".into(), 3); // UNKNOWN_TOPIC_OR_PARTITION
    }
    let absent = format!(
        "{:?}",
        source
            .verified_cluster_id("orders", Some(FIRST_ID))
            .await
            .unwrap_err()
    );
    assert!(absent.contains("is not in the Metadata"), "{absent}");
    assert!(
        absent.contains("(UNKNOWN_TOPIC_OR_PARTITION)"),
        "Kafka's answer named: {absent}"
    );
    assert!(!absent.contains("  "), "one line: {absent}");
    assert!(absent.contains("retryable: true"), "{absent}");
    // Kafka answers a topic the link may not describe with TOPIC_AUTHORIZATION_FAILED and no id: that error, final,
    // not the wait for a deleted topic.
    lock(&state).topic_errors.insert("orders".into(), 29);
    let denied = format!(
        "{:?}",
        source
            .verified_cluster_id("orders", Some(FIRST_ID))
            .await
            .unwrap_err()
    );
    assert!(denied.contains("TOPIC_AUTHORIZATION_FAILED (29)"), "{denied}");
    assert!(denied.contains("retryable: false"), "{denied}");

    {
        let mut locked = lock(&state);
        locked.topic_ids.insert("orders".into(), SECOND_ID);
        locked.topic_errors.remove("orders");
    }
    let other = format!(
        "{:?}",
        source
            .verified_cluster_id("orders", Some(FIRST_ID))
            .await
            .unwrap_err()
    );
    assert!(other.contains("created again"), "{other}");
    assert!(other.contains("retryable: false"), "{other}");
    // Without a recorded id (a link to a source without topic ids) the name is all there is.
    assert_eq!(
        source.verified_cluster_id("orders", None).await.unwrap(),
        CLUSTER_ID
    );
}

#[tokio::test]
async fn without_a_recorded_id_a_fetch_names_the_topic_by_the_id_metadata_gave() {
    let state = cluster_with_topic_ids().await;
    let mut source = source(address(&state, 1));
    assert_eq!(round(&mut source, &[("orders", 0)]).await, vec![Ok(1)]);
    assert_eq!(lock(&state).fetch_versions, vec![13]);
}

#[tokio::test]
async fn a_source_without_fetch_by_topic_id_is_asked_by_name_even_with_a_recorded_id() {
    let state = cluster(1, &[("orders", vec![1])]).await;
    let mut source = source(address(&state, 1));
    let mut wanted = wanted(&[("orders", 0)]);
    wanted[0].topic_id = Some(FIRST_ID);
    assert_eq!(round_of(&mut source, wanted).await, vec![Ok(1)]);
    assert_eq!(lock(&state).fetch_versions, vec![11]);
}

/// Kafka's `metadata.max.age.ms`: a session asks Metadata again when its answer is older, errors or not — so a
/// broker that joined the source after the link opened is where the session reopens once every broker it knew
/// is gone (without the refresh, only the brokers of the first answer would be tried).
#[tokio::test]
async fn metadata_older_than_its_max_age_is_asked_again_and_names_brokers_that_joined_since() {
    let state = cluster(3, &[("orders", vec![1])]).await;
    lock(&state).unlisted.push(3);
    let mut config = FetcherConfig::new(address(&state, 1));
    config.timeout = Duration::from_secs(5);
    config.metadata_max_age = Duration::ZERO;
    let mut source = SourceCluster::new(config);
    assert_eq!(round(&mut source, &[("orders", 0)]).await, vec![Ok(1)]);
    // Broker 3 joins; the next round's Metadata (its answer is older than zero) names it.
    lock(&state).unlisted.clear();
    assert_eq!(round(&mut source, &[("orders", 0)]).await, vec![Ok(1)]);
    // Brokers 1 and 2 die and broker 3 takes the partition over.
    for id in [1, 2] {
        lock(&state).brokers.get_mut(&id).unwrap().1 = false;
    }
    lock(&state).leaders.insert("orders".into(), vec![3]);
    // The next round's Metadata reaches broker 3, which the session learnt of, and fetches from it.
    assert_eq!(round(&mut source, &[("orders", 0)]).await, vec![Ok(1)]);
}

#[tokio::test]
async fn within_its_max_age_a_session_asks_metadata_once() {
    let state = cluster(3, &[("orders", vec![1])]).await;
    lock(&state).unlisted.push(3);
    let mut source = source(address(&state, 1));
    assert_eq!(round(&mut source, &[("orders", 0)]).await, vec![Ok(1)]);
    lock(&state).unlisted.clear();
    for _ in 0..3 {
        assert_eq!(round(&mut source, &[("orders", 0)]).await, vec![Ok(1)]);
    }
    for id in [1, 2] {
        lock(&state).brokers.get_mut(&id).unwrap().1 = false;
    }
    lock(&state).leaders.insert("orders".into(), vec![3]);
    // The session knows brokers 1 and 2 only: nobody it can ask answers.
    for _ in 0..2 {
        let answers = round(&mut source, &[("orders", 0)]).await;
        assert!(answers[0].is_err(), "{answers:?}");
    }
}

/// Issue 53, item 6: a topic the link may describe but not read (Fetch answers TOPIC_AUTHORIZATION_FAILED) is
/// named by the readability check `create` runs; a readable one passes, whatever else its fetch answers.
#[tokio::test]
async fn the_readability_check_names_a_topic_the_source_refuses_to_let_the_link_read() {
    let state = cluster(
        1,
        &[("orders", vec![1]), ("public", vec![1]), ("leaderless", vec![-1])],
    )
    .await;
    lock(&state).fetch_errors.insert("orders".into(), 29); // TOPIC_AUTHORIZATION_FAILED
    let mut source = source(address(&state, 1));
    let readable: Vec<String> = vec!["public".into(), "leaderless".into()];
    assert_eq!(source.check_readable(&readable).await, Ok(()));
    let error = source
        .check_readable(&["public".to_owned(), "orders".to_owned()])
        .await
        .unwrap_err();
    assert_eq!(error.code, Some(29));
    assert!(!error.retryable);
    assert!(error.message.contains("may not read topic orders"), "{error}");
}
