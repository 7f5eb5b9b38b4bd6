//! Committed offsets: OffsetCommit and OffsetFetch of a group without members, and offsets committed in
//! transactions (AddOffsetsToTxn, TxnOffsetCommit).

use kafka_protocol::messages::*;
use kafka_types::KafkaError;
use serde_json::json;

use super::{
    add_partitions_at, ask, end_txn_at, find_coordinator, fresh_topic, init_transactional, top, versions,
};
use crate::error::DiffError;
use crate::observe;
use crate::requests;
use crate::session::Session;

async fn fetch_offsets(
    session: &mut Session,
    step: &str,
    version: i16,
    group: &str,
    topic: &str,
) -> Result<(), DiffError> {
    let partitions: &[i32] = &[0, 1];
    let request = requests::offset_fetch(group, Some(&[(topic, partitions)]), false, version);
    let answer: OffsetFetchResponse = session
        .call_until(
            ApiKey::OffsetFetch,
            version,
            &request,
            |a: &OffsetFetchResponse| observe::fetched_offsets(a).0,
        )
        .await?;
    session.observe(step, observe::offset_fetch(&answer));
    Ok(())
}

pub async fn offset_commit_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 2).await?;
    for version in versions(ApiKey::OffsetCommit) {
        let group = session.transactional_id(&format!("group-v{version}"));
        find_coordinator(session, &group, 0).await?;
        let request =
            requests::offset_commit(&group, &[(&topic, 0, 10 + i64::from(version)), (&topic, 1, 3)]);
        let answer: OffsetCommitResponse = session
            .call_until(
                ApiKey::OffsetCommit,
                version,
                &request,
                |a: &OffsetCommitResponse| observe::first_partition_error(&observe::offset_commit(a)),
            )
            .await?;
        session.observe(&format!("commit v{version}"), observe::offset_commit(&answer));
    }
    let group = session.transactional_id("group-v2");
    find_coordinator(session, &group, 0).await?;
    for version in versions(ApiKey::OffsetFetch) {
        fetch_offsets(session, &format!("fetch v{version}"), version, &group, &topic).await?;
    }
    for version in 2..=top(ApiKey::OffsetFetch) {
        let request = requests::offset_fetch(&group, None, false, version);
        let answer: OffsetFetchResponse = session.call(ApiKey::OffsetFetch, version, &request).await?;
        session.observe(&format!("fetch all v{version}"), observe::offset_fetch(&answer));
    }
    Ok(())
}

pub async fn offset_fetch_unknown_group(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 2).await?;
    let group = session.transactional_id("nobody");
    find_coordinator(session, &group, 0).await?;
    fetch_offsets(
        session,
        "named partitions",
        top(ApiKey::OffsetFetch),
        &group,
        &topic,
    )
    .await?;
    let request = requests::offset_fetch(&group, None, false, top(ApiKey::OffsetFetch));
    let answer: OffsetFetchResponse = ask(session, ApiKey::OffsetFetch, &request).await?;
    session.observe("all", observe::offset_fetch(&answer));
    Ok(())
}

pub async fn offset_commit_unknown_topic(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let missing = session.topic("missing");
    let group = session.transactional_id("group");
    find_coordinator(session, &group, 0).await?;
    let request = requests::offset_commit(&group, &[(&topic, 0, 4), (&missing, 0, 4), (&topic, 9, 4)]);
    let answer: OffsetCommitResponse = session
        .call_until(
            ApiKey::OffsetCommit,
            top(ApiKey::OffsetCommit),
            &request,
            |a: &OffsetCommitResponse| observe::first_partition_error(&observe::offset_commit(a)),
        )
        .await?;
    session.observe(
        "known, unknown topic, unknown partition",
        observe::offset_commit(&answer),
    );
    fetch_offsets(session, "read back", top(ApiKey::OffsetFetch), &group, &topic).await
}

/// Begins a transaction of `txn` that adds `group`'s offsets at `add_version` and commits `offset` for
/// `topic`/0 at `commit_version`; returns the producer.
async fn transactional_offsets(
    session: &mut Session,
    txn: &str,
    producer: (i64, i16),
    group: &str,
    topic: &str,
    offset: i64,
    (add_version, commit_version): (i16, i16),
) -> Result<(), DiffError> {
    let request = requests::add_offsets(txn, producer, group);
    let answer: AddOffsetsToTxnResponse = session
        .call_until(
            ApiKey::AddOffsetsToTxn,
            add_version,
            &request,
            |a: &AddOffsetsToTxnResponse| a.error_code,
        )
        .await?;
    session.observe(
        &format!("AddOffsetsToTxn v{add_version}"),
        json!(answer.error_code),
    );
    let request = requests::txn_offset_commit(txn, producer, group, &[(topic, 0, offset)]);
    let answer: TxnOffsetCommitResponse = session
        .call_until(
            ApiKey::TxnOffsetCommit,
            commit_version,
            &request,
            |a: &TxnOffsetCommitResponse| observe::first_partition_error(&observe::txn_offset_commit(a)),
        )
        .await?;
    session.observe(
        &format!("TxnOffsetCommit v{commit_version}"),
        observe::txn_offset_commit(&answer),
    );
    Ok(())
}

/// An OffsetFetch of `group`'s offset of `topic`/0 at the top version.
fn partition_zero_fetch(group: &str, topic: &str, require_stable: bool) -> OffsetFetchRequest {
    let partitions: &[i32] = &[0];
    requests::offset_fetch(
        group,
        Some(&[(topic, partitions)]),
        require_stable,
        top(ApiKey::OffsetFetch),
    )
}

/// Waits until `group`'s committed offset of `topic`/0 is `expected` (Kafka applies a transaction's offsets
/// once its markers are written) or 10 s passed; then observes it.
async fn settled_offset(
    session: &mut Session,
    step: &str,
    group: &str,
    topic: &str,
    expected: i64,
) -> Result<(), DiffError> {
    let request = partition_zero_fetch(group, topic, false);
    for _attempt in 0..100 {
        let answer: OffsetFetchResponse = ask(session, ApiKey::OffsetFetch, &request).await?;
        let offset = observe::fetched_offsets(&answer).1.first().map(|p| p.2);
        if offset == Some(expected) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let answer: OffsetFetchResponse = ask(session, ApiKey::OffsetFetch, &request).await?;
    session.observe(step, observe::offset_fetch(&answer));
    Ok(())
}

/// Polls OffsetFetch with `require_stable` (at most 100 times, 100 ms apart) until `topic`'s partition 0 of `group`
/// is no longer UNSTABLE_OFFSET_COMMIT: the transaction that staged offsets there has ended in the group's state.
async fn until_stable(session: &mut Session, group: &str, topic: &str) -> Result<(), DiffError> {
    let request = partition_zero_fetch(group, topic, true);
    for _attempt in 0..100 {
        let answer: OffsetFetchResponse = ask(session, ApiKey::OffsetFetch, &request).await?;
        let unstable = observe::fetched_offsets(&answer)
            .1
            .iter()
            .any(|partition| partition.4 == KafkaError::UnstableOffsetCommit.code());
        if !unstable {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Ok(())
}

pub async fn transactional_offsets_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let txn = session.transactional_id("txn");
    let group = session.transactional_id("group");
    find_coordinator(session, &group, 0).await?;
    let producer = init_transactional(session, &txn, 60_000).await?;
    for (add_version, commit_version) in
        versions(ApiKey::AddOffsetsToTxn).zip(versions(ApiKey::TxnOffsetCommit))
    {
        let offset = 100 + i64::from(commit_version);
        transactional_offsets(
            session,
            &txn,
            producer,
            &group,
            &topic,
            offset,
            (add_version, commit_version),
        )
        .await?;
        end_txn_at(session, top(ApiKey::EndTxn), &txn, producer, true, &[]).await?;
        settled_offset(
            session,
            &format!("after commit v{commit_version}"),
            &group,
            &topic,
            offset,
        )
        .await?;
    }
    Ok(())
}

pub async fn transactional_offsets_aborted(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let txn = session.transactional_id("txn");
    let group = session.transactional_id("group");
    find_coordinator(session, &group, 0).await?;
    let producer = init_transactional(session, &txn, 60_000).await?;
    let versions = (top(ApiKey::AddOffsetsToTxn), top(ApiKey::TxnOffsetCommit));
    transactional_offsets(session, &txn, producer, &group, &topic, 5, versions).await?;
    end_txn_at(session, top(ApiKey::EndTxn), &txn, producer, true, &[]).await?;
    settled_offset(session, "committed 5", &group, &topic, 5).await?;
    transactional_offsets(session, &txn, producer, &group, &topic, 9, versions).await?;
    end_txn_at(session, top(ApiKey::EndTxn), &txn, producer, false, &[]).await?;
    // The offset stays 5 on a broker that is right: wait until the abort has landed in the group's offsets (no
    // longer UNSTABLE_OFFSET_COMMIT to a require_stable fetch, KIP-447), then look.
    until_stable(session, &group, &topic).await?;
    settled_offset(session, "after the abort", &group, &topic, 5).await
}

pub async fn txn_offset_commit_group_not_added(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let txn = session.transactional_id("txn");
    let producer = init_transactional(session, &txn, 60_000).await?;
    add_partitions_at(
        session,
        top(ApiKey::AddPartitionsToTxn),
        &txn,
        producer,
        &[(&topic, 0)],
    )
    .await?;
    let group = session.transactional_id("not-added");
    find_coordinator(session, &group, 0).await?;
    let request = requests::txn_offset_commit(&txn, producer, &group, &[(&topic, 0, 3)]);
    let answer: TxnOffsetCommitResponse = ask(session, ApiKey::TxnOffsetCommit, &request).await?;
    session.observe("group not added", observe::txn_offset_commit(&answer));
    Ok(())
}

pub async fn offset_fetch_pending_transactional_offsets(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let txn = session.transactional_id("txn");
    let group = session.transactional_id("group");
    find_coordinator(session, &group, 0).await?;
    let producer = init_transactional(session, &txn, 60_000).await?;
    let versions = (top(ApiKey::AddOffsetsToTxn), top(ApiKey::TxnOffsetCommit));
    transactional_offsets(session, &txn, producer, &group, &topic, 7, versions).await?;
    let partitions: &[i32] = &[0];
    // require_stable came in v7; v8 batches groups.
    for version in 7..=top(ApiKey::OffsetFetch) {
        for (what, require_stable) in [("pending", false), ("pending, require_stable", true)] {
            let request =
                requests::offset_fetch(&group, Some(&[(&topic, partitions)]), require_stable, version);
            let answer: OffsetFetchResponse = session.call(ApiKey::OffsetFetch, version, &request).await?;
            session.observe(&format!("{what} v{version}"), observe::offset_fetch(&answer));
        }
    }
    end_txn_at(session, top(ApiKey::EndTxn), &txn, producer, true, &[]).await?;
    settled_offset(session, "committed", &group, &topic, 7).await
}
