//! DeleteTopics v6 (KIP-516) through the broker's dispatch, as Kafka's controller answers it: a topic named by id is
//! deleted and answered with its name and id; an id no topic has is UNKNOWN_TOPIC_ID; an entry with both a name and
//! an id, or neither, and a name or an id given twice are INVALID_REQUEST (one answer per duplicate) and delete
//! nothing; a name given beside its own topic's id is refused as one INVALID_REQUEST under the name.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or benchmark fails by panicking

mod common;

use broker::Node;
use common::call;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

const UNKNOWN_TOPIC: i16 = 3;
const INVALID_REQUEST: i16 = 42;
const UNKNOWN_TOPIC_ID: i16 = 100;

/// An in-process broker over memory storage with `orders` and `payments` (one partition each).
async fn broker() -> Node {
    common::memory_broker(&[("orders", 1), ("payments", 1)]).await
}

fn by_name(name: &str) -> delete_topics_request::DeleteTopicState {
    let mut topic = delete_topics_request::DeleteTopicState::default();
    topic.name = Some(TopicName(StrBytes::from_string(name.to_owned())));
    topic
}

fn by_id(id: Uuid) -> delete_topics_request::DeleteTopicState {
    let mut topic = delete_topics_request::DeleteTopicState::default();
    topic.topic_id = id;
    topic
}

async fn id_of(node: &Node, topic: &str) -> Uuid {
    Uuid::from_bytes(node.topic_id(topic).await.expect("the topic has an id"))
}

/// Each answer as (name, id, error code), in the order given.
async fn delete(
    node: &Node,
    topics: Vec<delete_topics_request::DeleteTopicState>,
) -> Vec<(Option<String>, Uuid, i16)> {
    let mut request = DeleteTopicsRequest::default();
    request.topics = topics;
    request.timeout_ms = 10_000;
    let response: DeleteTopicsResponse = call(node, ApiKey::DeleteTopics, 6, &request)
        .await
        .expect("answered");
    response
        .responses
        .into_iter()
        .map(|answer| {
            (
                answer.name.map(|name| name.to_string()),
                answer.topic_id,
                answer.error_code,
            )
        })
        .collect()
}

#[tokio::test]
async fn a_topic_named_by_id_is_deleted_and_answered_with_its_name_and_id() {
    let node = broker().await;
    let id = id_of(&node, "orders").await;
    assert_eq!(
        delete(&node, vec![by_id(id)]).await,
        vec![(Some("orders".to_owned()), id, 0)]
    );
    assert!(node.partition("orders", 0).await.is_none(), "the topic is gone");
    assert!(node.partition("payments", 0).await.is_some());
    // Its id names nothing now.
    assert_eq!(
        delete(&node, vec![by_id(id)]).await,
        vec![(None, id, UNKNOWN_TOPIC_ID)]
    );
}

#[tokio::test]
async fn names_and_ids_mix_in_one_request_and_unknown_ones_are_answered_apart() {
    let node = broker().await;
    let payments = id_of(&node, "payments").await;
    let orders = id_of(&node, "orders").await;
    let stranger = Uuid::from_bytes([9; 16]);
    let mut answers = delete(
        &node,
        vec![
            by_name("orders"),
            by_id(payments),
            by_id(stranger),
            by_name("missing"),
        ],
    )
    .await;
    // A topic deleted by name is answered with its id.
    // Kafka shuffles its answers: compared in any order.
    let mut expected = vec![
        (None, stranger, UNKNOWN_TOPIC_ID),
        (Some("orders".to_owned()), orders, 0),
        (Some("payments".to_owned()), payments, 0),
        (Some("missing".to_owned()), Uuid::nil(), UNKNOWN_TOPIC),
    ];
    answers.sort();
    expected.sort();
    assert_eq!(answers, expected);
    assert!(node.partition("orders", 0).await.is_none());
    assert!(node.partition("payments", 0).await.is_none());
}

#[tokio::test]
async fn an_entry_with_both_a_name_and_an_id_or_neither_is_invalid_and_deletes_nothing() {
    let node = broker().await;
    let id = id_of(&node, "orders").await;
    let mut both = by_name("orders");
    both.topic_id = id;
    let neither = delete_topics_request::DeleteTopicState::default();
    let answers = delete(&node, vec![both, neither]).await;
    assert_eq!(
        answers,
        vec![
            (Some("orders".to_owned()), id, INVALID_REQUEST),
            (None, Uuid::nil(), INVALID_REQUEST)
        ]
    );
    assert!(node.partition("orders", 0).await.is_some(), "nothing was deleted");
}

#[tokio::test]
async fn a_name_or_an_id_given_twice_is_answered_once_as_invalid_and_its_topic_kept() {
    let node = broker().await;
    let payments = id_of(&node, "payments").await;
    let answers = delete(
        &node,
        vec![
            by_name("orders"),
            by_id(payments),
            by_name("orders"),
            by_id(payments),
        ],
    )
    .await;
    assert_eq!(
        answers,
        vec![
            (Some("orders".to_owned()), Uuid::nil(), INVALID_REQUEST),
            (None, payments, INVALID_REQUEST)
        ]
    );
    assert!(node.partition("orders", 0).await.is_some());
    assert!(node.partition("payments", 0).await.is_some());
}

#[tokio::test]
async fn a_name_given_beside_its_own_topics_id_is_refused_once_under_the_name() {
    let node = broker().await;
    let id = id_of(&node, "orders").await;
    let answers = delete(&node, vec![by_id(id), by_name("orders")]).await;
    assert_eq!(answers, vec![(Some("orders".to_owned()), id, INVALID_REQUEST)]);
    assert!(node.partition("orders", 0).await.is_some(), "nothing was deleted");
}

#[tokio::test]
async fn a_name_beside_its_own_topics_id_given_twice_is_refused_too() {
    let node = broker().await;
    let id = id_of(&node, "orders").await;
    let mut answers = delete(&node, vec![by_id(id), by_id(id), by_name("orders")]).await;
    answers.sort();
    assert_eq!(
        answers,
        vec![
            (None, id, INVALID_REQUEST),
            (Some("orders".to_owned()), id, INVALID_REQUEST)
        ]
    );
    assert!(node.partition("orders", 0).await.is_some(), "nothing was deleted");
}

#[tokio::test]
async fn a_topic_deleted_by_id_is_only_the_topic_that_had_the_id() {
    let node = broker().await;
    let id = id_of(&node, "orders").await;
    // The name is created again under another id between the look-up and the deletion.
    node.delete_topic("orders").await.unwrap();
    node.create_topic("orders", 1).await.unwrap();
    assert_eq!(
        node.delete_topic_with_id("orders", id.into_bytes())
            .await
            .map_err(|refusal| refusal.error.code()),
        Err(UNKNOWN_TOPIC_ID)
    );
    assert!(node.partition("orders", 0).await.is_some(), "the new topic stays");
}

#[tokio::test]
async fn a_request_of_many_entries_naming_few_topics_is_answered_once_per_topic() {
    // Duplicates are counted in maps: 100,000 entries cost 100,000 lookups (a pairwise count, 10^10 comparisons,
    // would hold the request for minutes).
    let node = broker().await;
    let id = id_of(&node, "orders").await;
    let mut entries = vec![by_id(id); 50_000];
    entries.extend(vec![by_name("payments"); 50_000]);
    // A guard, not a measurement: the pairwise count took minutes.
    let mut answers = tokio::time::timeout(std::time::Duration::from_secs(60), delete(&node, entries))
        .await
        .expect("answered within a minute");
    answers.sort();
    assert_eq!(
        answers,
        vec![
            (None, id, INVALID_REQUEST),
            (Some("payments".to_owned()), Uuid::nil(), INVALID_REQUEST)
        ]
    );
    assert!(node.partition("orders", 0).await.is_some());
}
