//! DescribeProducers, ListTransactions and DescribeTransactions: what `kafka-transactions` shows. Producer ids are
//! numbered in order of appearance, broker-clock times are named rather than valued, and a listing keeps only this
//! scenario's transactional ids (the broker holds every scenario's).

use kafka_protocol::messages::*;
use serde_json::{json, Value};

use super::{end_txn_at, fresh_topic, idempotent_producer, open_transaction, produce_observed, versions};
use crate::error::DiffError;
use crate::requests::{s, topic_name, BatchSpec, BASE_TIMESTAMP};
use crate::session::Session;

/// A time as observed: a client's timestamp (the scenarios stamp records near [`BASE_TIMESTAMP`]) or a special
/// value as it is, the broker's clock named.
fn client_or_broker_time(time: i64) -> Value {
    if time > BASE_TIMESTAMP + 1_000_000_000 {
        json!("broker clock")
    } else {
        json!(time)
    }
}

/// A DescribeProducers answer: per partition its error and its producers, in the order of their numbers.
fn producers(session: &mut Session, answer: &DescribeProducersResponse) -> Value {
    let mut partitions = Vec::new();
    for topic in &answer.topics {
        for partition in &topic.partitions {
            let mut active: Vec<Value> = partition
                .active_producers
                .iter()
                .map(|state| {
                    json!({
                        "producer": session.producer(state.producer_id.0),
                        "epoch": state.producer_epoch,
                        "last_sequence": state.last_sequence,
                        "last_timestamp": client_or_broker_time(state.last_timestamp),
                        "coordinator_epoch": state.coordinator_epoch,
                        "current_txn_start_offset": state.current_txn_start_offset,
                    })
                })
                .collect();
            active.sort_by_key(|producer| producer["producer"].to_string());
            partitions.push(json!({
                "topic": topic.name.as_str(),
                "partition": partition.partition_index,
                "error": partition.error_code,
                "producers": active,
            }));
        }
    }
    crate::observe::sort_by_partition(&mut partitions);
    json!(partitions)
}

pub async fn describe_producers_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 2).await?;
    let producer = idempotent_producer(session).await?;
    produce_observed(
        session,
        "idempotent",
        None,
        vec![(topic.as_str(), 0, BatchSpec::plain("a", 3).by(producer, 0))],
    )
    .await?;
    produce_observed(
        session,
        "idempotent again",
        None,
        vec![(topic.as_str(), 0, BatchSpec::plain("b", 2).by(producer, 3))],
    )
    .await?;
    let txn = session.transactional_id("open");
    let txn_producer = open_transaction(session, &txn, &[(topic.as_str(), 1)], 2).await?;
    let missing = session.topic("missing");
    let request = |partitions: &[(&str, &[i32])]| {
        let mut request = DescribeProducersRequest::default();
        request.topics = partitions
            .iter()
            .map(|&(name, indexes)| {
                let mut topic = describe_producers_request::TopicRequest::default();
                topic.name = topic_name(name);
                topic.partition_indexes = indexes.to_vec();
                topic
            })
            .collect();
        request
    };
    let asked = request(&[(topic.as_str(), &[0, 1, 5]), (missing.as_str(), &[0])]);
    for version in versions(ApiKey::DescribeProducers) {
        let answer: DescribeProducersResponse =
            session.call(ApiKey::DescribeProducers, version, &asked).await?;
        let seen = producers(session, &answer);
        session.observe(&format!("v{version} while a transaction is open"), seen);
    }
    end_txn_at(
        session,
        super::top(ApiKey::EndTxn),
        &txn,
        txn_producer,
        true,
        &[(topic.as_str(), 1)],
    )
    .await?;
    let answer: DescribeProducersResponse = super::ask(session, ApiKey::DescribeProducers, &asked).await?;
    let seen = producers(session, &answer);
    session.observe("after the commit", seen);
    Ok(())
}

/// This scenario's transactions in a ListTransactions answer, sorted by id.
fn listed(session: &mut Session, answer: &ListTransactionsResponse) -> Value {
    let prefix = session.transactional_id("");
    let mut states: Vec<(String, i64, String)> = answer
        .transaction_states
        .iter()
        .filter(|state| state.transactional_id.as_str().starts_with(&prefix))
        .map(|state| {
            (
                state.transactional_id.as_str().to_owned(),
                state.producer_id.0,
                state.transaction_state.as_str().to_owned(),
            )
        })
        .collect();
    states.sort();
    let states: Vec<Value> = states
        .into_iter()
        .map(|(id, producer, state)| json!({ "id": id, "producer": session.producer(producer), "state": state }))
        .collect();
    json!({
        "error": answer.error_code,
        "unknown_state_filters": answer.unknown_state_filters.iter().map(|f| f.as_str()).collect::<Vec<_>>(),
        "transactions": states,
    })
}

/// One open and one committed transaction over `topic`'s partitions 0 and 1.
async fn two_transactions(session: &mut Session, topic: &str) -> Result<((i64, i16), (i64, i16)), DiffError> {
    let open = session.transactional_id("open");
    let open_producer = open_transaction(session, &open, &[(topic, 0)], 1).await?;
    let done = session.transactional_id("done");
    let done_producer = open_transaction(session, &done, &[(topic, 1)], 1).await?;
    end_txn_at(
        session,
        super::top(ApiKey::EndTxn),
        &done,
        done_producer,
        true,
        &[(topic, 1)],
    )
    .await?;
    Ok((open_producer, done_producer))
}

pub async fn list_transactions_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 2).await?;
    let (open, _) = two_transactions(session, &topic).await?;
    for version in versions(ApiKey::ListTransactions) {
        let mut requests = vec![
            ("all", ListTransactionsRequest::default()),
            ("by state", {
                let mut request = ListTransactionsRequest::default();
                request.state_filters = vec![s("Ongoing"), s("NoSuchState")];
                request
            }),
            ("by producer", {
                let mut request = ListTransactionsRequest::default();
                request.producer_id_filters = vec![ProducerId(open.0)];
                request
            }),
        ];
        if version >= 1 {
            for (step, duration) in [
                ("open longer than an hour", 3_600_000),
                ("open longer than 0 ms", 0),
            ] {
                let mut request = ListTransactionsRequest::default();
                request.duration_filter = duration;
                requests.push((step, request));
            }
        }
        if version >= 2 {
            // KIP-1152: the whole id must match (RE2/J's `matches`); empty means no filter; one that does not
            // compile is refused.
            for (step, pattern) in [
                ("ids ending in open", ".*open"),
                ("a pattern matching only part of an id", "open"),
                ("an empty pattern", ""),
                ("a pattern that does not compile", "(open"),
            ] {
                let mut request = ListTransactionsRequest::default();
                request.transactional_id_pattern = Some(s(pattern));
                requests.push((step, request));
            }
        }
        for (step, mut request) in requests {
            if version == 0 {
                request.duration_filter = -1;
            }
            let answer: ListTransactionsResponse =
                session.call(ApiKey::ListTransactions, version, &request).await?;
            let seen = listed(session, &answer);
            session.observe(&format!("v{version} {step}"), seen);
        }
    }
    Ok(())
}

pub async fn describe_transactions_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 2).await?;
    two_transactions(session, &topic).await?;
    let mut request = DescribeTransactionsRequest::default();
    request.transactional_ids = ["open", "done", "never"]
        .into_iter()
        .map(|suffix| TransactionalId(s(&session.transactional_id(suffix))))
        .collect();
    for version in versions(ApiKey::DescribeTransactions) {
        let answer: DescribeTransactionsResponse = session
            .call(ApiKey::DescribeTransactions, version, &request)
            .await?;
        let mut seen = Vec::new();
        for state in &answer.transaction_states {
            let mut topics: Vec<(String, Vec<i32>)> = state
                .topics
                .iter()
                .map(|topic| {
                    let mut partitions = topic.partitions.clone();
                    partitions.sort_unstable();
                    (topic.topic.as_str().to_owned(), partitions)
                })
                .collect();
            topics.sort();
            seen.push(json!({
                "error": state.error_code,
                "state": state.transaction_state.as_str(),
                "timeout_ms": state.transaction_timeout_ms,
                // The broker's clock when the transaction began: named, not valued.
                "start_time": client_or_broker_time(state.transaction_start_time_ms),
                "producer": if state.producer_id.0 >= 0 { session.producer(state.producer_id.0) } else { json!(state.producer_id.0) },
                "epoch": state.producer_epoch,
                "topics": topics,
            }));
        }
        session.observe(&format!("v{version}"), json!(seen));
    }
    Ok(())
}

/// A transaction a client closes with WriteTxnMarkers, as `kafka-transactions abort` closes a hanging one: the
/// producer's id and epoch as DescribeProducers shows them, then what each isolation level reads.
pub async fn write_txn_markers_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    for version in versions(ApiKey::WriteTxnMarkers) {
        let txn = session.transactional_id(&format!("hanging-v{version}"));
        let (producer_id, epoch) = open_transaction(session, &txn, &[(topic.as_str(), 0)], 2).await?;
        let mut marker = write_txn_markers_request::WritableTxnMarker::default();
        marker.producer_id = ProducerId(producer_id);
        marker.producer_epoch = epoch;
        marker.transaction_result = false;
        marker.coordinator_epoch = 0;
        for (name, index) in [(topic.as_str(), 0), (topic.as_str(), 9)] {
            let mut written = write_txn_markers_request::WritableTxnMarkerTopic::default();
            written.name = topic_name(name);
            written.partition_indexes = vec![index];
            marker.topics.push(written);
        }
        let mut request = WriteTxnMarkersRequest::default();
        request.markers = vec![marker];
        let answer: WriteTxnMarkersResponse =
            session.call(ApiKey::WriteTxnMarkers, version, &request).await?;
        let codes: Vec<(i32, i16)> = answer
            .markers
            .iter()
            .flat_map(|m| {
                m.topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| (p.partition_index, p.error_code)))
            })
            .collect();
        session.observe(&format!("v{version} abort"), json!(codes));
        super::wait_for_markers(session, &[(topic.as_str(), 0)]).await?;
        super::fetch_observed(
            session,
            &format!("v{version} read_committed"),
            1,
            &[(topic.as_str(), 0, 0)],
        )
        .await?;
    }
    Ok(())
}
