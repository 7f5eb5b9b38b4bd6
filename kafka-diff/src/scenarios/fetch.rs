//! Fetch and ListOffsets: versions, isolation levels, transactions' effect on what is visible.

use kafka_protocol::messages::*;

use super::{
    ask, consume, create_topic, end_txn_at, fetch_observed, fresh_topic, open_transaction, produce_plain,
    read_back, top, versions,
};
use crate::error::DiffError;
use crate::observe;
use crate::requests::{self, BatchSpec, BASE_TIMESTAMP};
use crate::session::Session;

/// Fills `topic`/0 with a plain batch, a committed transaction, an aborted one and another plain batch.
async fn mixed_partition(session: &mut Session, topic: &str) -> Result<(), DiffError> {
    create_topic(session, topic, 1).await?;
    produce_plain(session, "plain", topic, 0, "p1", 3).await?;
    for (index, committed) in [(0, true), (1, false)] {
        let txn = session.transactional_id(&format!("txn{index}"));
        let producer = open_transaction(session, &txn, &[(topic, 0)], 2).await?;
        end_txn_at(
            session,
            top(ApiKey::EndTxn),
            &txn,
            producer,
            committed,
            &[(topic, 0)],
        )
        .await?;
    }
    produce_plain(session, "plain after", topic, 0, "p2", 2).await?;
    Ok(())
}

pub async fn fetch_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = session.topic("t");
    mixed_partition(session, &topic).await?;
    for version in versions(ApiKey::Fetch) {
        for isolation in [0, 1] {
            let seen = consume(session, version, isolation, &[(&topic, 0, 0)]).await?;
            session.observe(&format!("v{version} isolation {isolation}"), seen);
        }
    }
    Ok(())
}

pub async fn fetch_offset_out_of_range(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    produce_plain(session, "plain", &topic, 0, "p", 3).await?;
    fetch_observed(session, "at the end", 0, &[(&topic, 0, 3)]).await?;
    fetch_observed(session, "past the end", 0, &[(&topic, 0, 1_000)]).await?;
    fetch_observed(session, "negative", 0, &[(&topic, 0, -5)]).await
}

pub async fn fetch_unknown_topic_and_partition(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let missing = session.topic("missing");
    fetch_observed(
        session,
        "unknown",
        0,
        &[(&topic, 0, 0), (&topic, 4, 0), (&missing, 0, 0)],
    )
    .await
}

pub async fn fetch_open_transaction(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    produce_plain(session, "plain", &topic, 0, "p1", 2).await?;
    let txn = session.transactional_id("open");
    open_transaction(session, &txn, &[(&topic, 0)], 3).await?;
    produce_plain(session, "plain after", &topic, 0, "p2", 2).await?;
    fetch_observed(session, "read_uncommitted", 0, &[(&topic, 0, 0)]).await?;
    fetch_observed(session, "read_committed", 1, &[(&topic, 0, 0)]).await?;
    fetch_observed(session, "read_committed from the LSO", 1, &[(&topic, 0, 2)]).await
}

pub async fn fetch_aborted_transactions(session: &mut Session) -> Result<(), DiffError> {
    let topic = session.topic("t");
    mixed_partition(session, &topic).await?;
    // The aborted transaction's batch starts at offset 6 (3 plain, 2 committed, their marker).
    for offset in [0, 6, 7, 8, 9] {
        fetch_observed(
            session,
            &format!("read_committed from {offset}"),
            1,
            &[(&topic, 0, offset)],
        )
        .await?;
    }
    Ok(())
}

pub async fn fetch_middle_of_batch(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    produce_plain(session, "five", &topic, 0, "five", 5).await?;
    produce_plain(session, "two", &topic, 0, "two", 2).await?;
    fetch_observed(session, "from 2", 0, &[(&topic, 0, 2)]).await?;
    fetch_observed(session, "from 5", 0, &[(&topic, 0, 5)]).await
}

pub async fn fetch_small_max_bytes(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    produce_plain(session, "one", &topic, 0, "one", 4).await?;
    produce_plain(session, "two", &topic, 0, "two", 4).await?;
    let mut request = requests::fetch(0, &[(&topic, 0, 0)]);
    for partition in request
        .topics
        .iter_mut()
        .flat_map(|topic| topic.partitions.iter_mut())
    {
        partition.partition_max_bytes = 10;
    }
    request.max_bytes = 10;
    let answer: FetchResponse = ask(session, ApiKey::Fetch, &request).await?;
    let seen = observe::fetch(session, &answer);
    session.observe("max bytes 10", seen);
    Ok(())
}

pub async fn list_offsets_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    produce_plain(session, "first", &topic, 0, "a", 3).await?;
    produce_plain(session, "second", &topic, 0, "b", 3).await?;
    // Older than the batches before it: the largest timestamp is not the last record's.
    let mut older = BatchSpec::plain("c", 2);
    older.base_timestamp = Some(BASE_TIMESTAMP - 100);
    super::produce_observed(session, "older", None, vec![(topic.as_str(), 0, older)]).await?;
    let times = [
        -2,
        -1,
        BASE_TIMESTAMP,
        BASE_TIMESTAMP + 1,
        BASE_TIMESTAMP + 2,
        BASE_TIMESTAMP + 3,
        4_000_000_000_000,
    ];
    for version in versions(ApiKey::ListOffsets) {
        let mut times = times.to_vec();
        // v7 asks for the largest timestamp (-3), v8 for the earliest local offset (-4), v9 for the latest tiered
        // one (-5; none without tiered storage).
        times.extend((version >= 7).then_some(-3));
        times.extend((version >= 8).then_some(-4));
        times.extend((version >= 9).then_some(-5));
        let parts: Vec<(&str, i32, i64)> = times.iter().map(|&time| (topic.as_str(), 0, time)).collect();
        let levels: &[i8] = if version >= 2 { &[0, 1] } else { &[0] };
        for &isolation in levels {
            // Kafka refuses a partition named twice in one request: one request per timestamp.
            let mut seen = Vec::new();
            for part in &parts {
                let request = requests::list_offsets(isolation, std::slice::from_ref(part));
                let answer: ListOffsetsResponse =
                    session.call(ApiKey::ListOffsets, version, &request).await?;
                seen.push(observe::list_offsets(&answer));
            }
            session.observe(
                &format!("v{version} isolation {isolation}"),
                serde_json::json!(seen),
            );
        }
    }
    Ok(())
}

/// Observes `topic`/0's latest offset under both isolation levels as `<step>, isolation <n>`.
async fn latest_offsets(session: &mut Session, topic: &str, step: &str) -> Result<(), DiffError> {
    for isolation in [0, 1] {
        let request = requests::list_offsets(isolation, &[(topic, 0, -1)]);
        let answer: ListOffsetsResponse = ask(session, ApiKey::ListOffsets, &request).await?;
        session.observe(
            &format!("{step}, isolation {isolation}"),
            observe::list_offsets(&answer),
        );
    }
    Ok(())
}

pub async fn list_offsets_open_transaction(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    produce_plain(session, "plain", &topic, 0, "p", 2).await?;
    let txn = session.transactional_id("open");
    let producer = open_transaction(session, &txn, &[(&topic, 0)], 3).await?;
    latest_offsets(session, &topic, "open").await?;
    end_txn_at(session, top(ApiKey::EndTxn), &txn, producer, true, &[(&topic, 0)]).await?;
    latest_offsets(session, &topic, "committed").await
}

pub async fn list_offsets_unknown(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let missing = session.topic("missing");
    for (step, part) in [
        ("unknown partition", (topic.as_str(), 3, -1)),
        ("unknown topic", (missing.as_str(), 0, -1)),
        ("timestamp -7", (topic.as_str(), 0, -7)),
    ] {
        let request = requests::list_offsets(0, &[part]);
        let answer: ListOffsetsResponse = ask(session, ApiKey::ListOffsets, &request).await?;
        session.observe(step, observe::list_offsets(&answer));
    }
    Ok(())
}

pub async fn delete_records_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 2).await?;
    let missing = session.topic("missing");
    produce_plain(session, "five", &topic, 0, "five", 5).await?;
    produce_plain(session, "three", &topic, 0, "three", 3).await?;
    produce_plain(session, "other partition", &topic, 1, "one", 3).await?;
    // One partition per request at most once: Kafka keeps only the last entry of a partition named twice.
    let (topic, missing) = (topic.as_str(), missing.as_str());
    let steps = [
        (
            0,
            "inside a batch; beyond the end; unknown",
            vec![(topic, 0, 2), (topic, 1, 9), (missing, 0, 1), (topic, 4, 1)],
        ),
        (
            1,
            "below the start; up to the high watermark",
            vec![(topic, 0, 1), (topic, 1, -1)],
        ),
        (1, "-5", vec![(topic, 0, -5)]),
    ];
    for (version, step, parts) in steps {
        let request = requests::delete_records(&parts);
        let answer: DeleteRecordsResponse = session.call(ApiKey::DeleteRecords, version, &request).await?;
        session.observe(&format!("v{version}: {step}"), observe::delete_records(&answer));
    }
    let earliest = requests::list_offsets(0, &[(topic, 0, -2), (topic, 1, -2)]);
    let answer: ListOffsetsResponse = ask(session, ApiKey::ListOffsets, &earliest).await?;
    session.observe("earliest after", observe::list_offsets(&answer));
    fetch_observed(session, "fetch from 0", 0, &[(topic, 0, 0)]).await?;
    fetch_observed(session, "fetch from the new start", 0, &[(topic, 0, 2)]).await
}

pub async fn list_offsets_empty_partition(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    for isolation in [0, 1] {
        let mut seen = Vec::new();
        for timestamp in [-2, -1, BASE_TIMESTAMP] {
            let request = requests::list_offsets(isolation, &[(&topic, 0, timestamp)]);
            let answer: ListOffsetsResponse = ask(session, ApiKey::ListOffsets, &request).await?;
            seen.push(observe::list_offsets(&answer));
        }
        session.observe(&format!("isolation {isolation}"), serde_json::json!(seen));
    }
    fetch_observed(session, "fetch from 0", 1, &[(&topic, 0, 0)]).await
}

pub async fn two_open_transactions(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let first = session.transactional_id("first");
    let second = session.transactional_id("second");
    let first_producer = open_transaction(session, &first, &[(&topic, 0)], 2).await?;
    let second_producer = open_transaction(session, &second, &[(&topic, 0)], 3).await?;
    produce_plain(session, "plain", &topic, 0, "plain", 1).await?;
    // The later transaction ends first: the LSO stays at the first one's start.
    let request = requests::end_txn(&second, second_producer, true);
    let answer: EndTxnResponse = session
        .call_until(
            ApiKey::EndTxn,
            top(ApiKey::EndTxn),
            &request,
            |a: &EndTxnResponse| a.error_code,
        )
        .await?;
    session.observe("second committed", serde_json::json!(answer.error_code));
    // Its marker follows the plain batch (offset 6); wait until it is in the log.
    for _attempt in 0..300 {
        let request = requests::list_offsets(0, &[(&topic, 0, -1)]);
        let answer: ListOffsetsResponse = ask(session, ApiKey::ListOffsets, &request).await?;
        let end = answer
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .map_or(-1, |p| p.offset);
        if end >= 7 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    latest_offsets(session, &topic, "one still open").await?;
    fetch_observed(
        session,
        "read_committed while the first is open",
        1,
        &[(&topic, 0, 0)],
    )
    .await?;
    end_txn_at(
        session,
        top(ApiKey::EndTxn),
        &first,
        first_producer,
        false,
        &[(&topic, 0)],
    )
    .await?;
    latest_offsets(session, &topic, "both ended").await?;
    read_back(session, &topic, 1).await
}
