//! Consumer groups, the classic protocol: a member's whole life (JoinGroup — MEMBER_ID_REQUIRED first from v4 —,
//! SyncGroup as the leader, Heartbeat, an OffsetCommit at its generation, LeaveGroup) at every version, and the
//! answers to requests a group refuses. Member ids are random on both brokers: only whether an id is there, and
//! whether the leader is the member itself, are observed.

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Encodable;
use serde_json::json;

use super::{end_txn_at, find_coordinator, fresh_topic, init_transactional, top, versions};
use crate::error::DiffError;
use crate::requests::{self, s};
use crate::session::Session;

/// A consumer's subscription to the scenario's topic, as the consumer protocol writes it (version 0; Kafka 4's
/// group coordinator reads the subscriptions of `consumer` groups).
fn subscription() -> Bytes {
    let mut subscription = ConsumerProtocolSubscription::default();
    subscription.topics = vec![s(TOPIC)];
    consumer_protocol(&subscription)
}

/// An assignment of the topic's partition 0 (consumer protocol version 0).
fn assignment() -> Bytes {
    let mut partition = consumer_protocol_assignment::TopicPartition::default();
    partition.topic = requests::topic_name(TOPIC);
    partition.partitions = vec![0];
    let mut assignment = ConsumerProtocolAssignment::default();
    assignment.assigned_partitions = vec![partition];
    consumer_protocol(&assignment)
}

fn consumer_protocol<M: Encodable>(message: &M) -> Bytes {
    let mut out = bytes::BytesMut::new();
    out.extend_from_slice(&0i16.to_be_bytes());
    // A version-0 consumer protocol message always encodes.
    let _ = message.encode(&mut out, 0);
    out.freeze()
}

/// The topic the members subscribe to (it need not exist).
const TOPIC: &str = "subscribed";

fn join_request(group: &str, member_id: &str, session_timeout_ms: i32) -> JoinGroupRequest {
    let mut protocol = join_group_request::JoinGroupRequestProtocol::default();
    protocol.name = s("range");
    protocol.metadata = subscription();
    let mut request = JoinGroupRequest::default();
    request.group_id = GroupId(s(group));
    request.session_timeout_ms = session_timeout_ms;
    request.rebalance_timeout_ms = 10_000;
    request.member_id = s(member_id);
    request.protocol_type = s("consumer");
    request.protocols = vec![protocol];
    request
}

fn heartbeat_request(group: &str, generation: i32, member_id: &str) -> HeartbeatRequest {
    let mut request = HeartbeatRequest::default();
    request.group_id = GroupId(s(group));
    request.generation_id = generation;
    request.member_id = s(member_id);
    request
}

fn leave_request(group: &str, member_id: &str, version: i16) -> LeaveGroupRequest {
    let mut request = LeaveGroupRequest::default();
    request.group_id = GroupId(s(group));
    if version < 3 {
        request.member_id = s(member_id);
    } else {
        let mut identity = leave_group_request::MemberIdentity::default();
        identity.member_id = s(member_id);
        request.members = vec![identity];
    }
    request
}

/// Joins `group` as a new member at JoinGroup `version` (rejoining with the id a MEMBER_ID_REQUIRED answer
/// carries); the member id and generation.
async fn join(
    session: &mut Session,
    step: &str,
    group: &str,
    version: i16,
) -> Result<(String, i32), DiffError> {
    let mut answer: JoinGroupResponse = session
        .call(ApiKey::JoinGroup, version, &join_request(group, "", 10_000))
        .await?;
    if answer.error_code != 0 {
        session.observe(
            &format!("{step}: first join"),
            json!({ "error": answer.error_code, "has_member_id": !answer.member_id.is_empty() }),
        );
        let request = join_request(group, answer.member_id.as_str(), 10_000);
        answer = session.call(ApiKey::JoinGroup, version, &request).await?;
    }
    session.observe(
        &format!("{step}: join"),
        json!({
            "error": answer.error_code,
            "generation": answer.generation_id,
            "protocol": answer.protocol_name.as_ref().map(|name| name.as_str().to_owned()),
            "leads": answer.leader == answer.member_id,
            "members": answer.members.len(),
            "metadata": answer.members.iter().map(|m| m.metadata.to_vec()).collect::<Vec<_>>(),
        }),
    );
    Ok((answer.member_id.as_str().to_owned(), answer.generation_id))
}

/// A SyncGroup request at `version` from `member` of `group` at `generation`, assigning `assigned` to the members
/// it names; from v5 it names the protocol type and protocol the scenarios' members join with, as clients do.
fn sync_request(
    group: &str,
    generation: i32,
    member: &str,
    assigned: &[&str],
    version: i16,
) -> SyncGroupRequest {
    let mut sync = SyncGroupRequest::default();
    sync.group_id = GroupId(s(group));
    sync.generation_id = generation;
    sync.member_id = s(member);
    sync.assignments = assigned
        .iter()
        .map(|to| {
            let mut one = sync_group_request::SyncGroupRequestAssignment::default();
            one.member_id = s(to);
            one.assignment = assignment();
            one
        })
        .collect();
    if version >= 5 {
        sync.protocol_type = Some(s("consumer"));
        sync.protocol_name = Some(s("range"));
    }
    sync
}

pub async fn group_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let join_versions = versions(ApiKey::JoinGroup);
    for round in 0..=*join_versions.end() {
        let at = |key: ApiKey| round.clamp(*versions(key).start(), *versions(key).end());
        let (join_v, sync_v, beat_v, leave_v) = (
            at(ApiKey::JoinGroup),
            at(ApiKey::SyncGroup),
            at(ApiKey::Heartbeat),
            at(ApiKey::LeaveGroup),
        );
        let step =
            format!("JoinGroup v{join_v} SyncGroup v{sync_v} Heartbeat v{beat_v} LeaveGroup v{leave_v}");
        let group = session.transactional_id(&format!("group-{round}"));
        find_coordinator(session, &group, 0).await?;
        let (member, generation) = join(session, &step, &group, join_v).await?;

        let sync = sync_request(&group, generation, &member, &[&member], sync_v);
        let synced: SyncGroupResponse = session.call(ApiKey::SyncGroup, sync_v, &sync).await?;
        session.observe(
            &format!("{step}: sync"),
            json!({
                "error": synced.error_code,
                "assignment": synced.assignment.to_vec(),
                "protocol_type": synced.protocol_type.as_ref().map(|t| t.as_str()),
                "protocol_name": synced.protocol_name.as_ref().map(|n| n.as_str()),
            }),
        );

        for (what, generation) in [("current", generation), ("stale", generation + 1)] {
            let request = heartbeat_request(&group, generation, &member);
            let beat: HeartbeatResponse = session.call(ApiKey::Heartbeat, beat_v, &request).await?;
            session.observe(
                &format!("{step}: heartbeat, {what} generation"),
                json!({ "error": beat.error_code }),
            );
        }

        let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
        partition.committed_offset = 1;
        let mut commit_topic = offset_commit_request::OffsetCommitRequestTopic::default();
        commit_topic.name = requests::topic_name(&topic);
        commit_topic.partitions = vec![partition];
        let mut commit = OffsetCommitRequest::default();
        commit.group_id = GroupId(s(&group));
        commit.topics = vec![commit_topic];
        for (what, generation, member_id) in [
            ("simple", -1, String::new()),
            ("stale generation", generation + 1, member.clone()),
            ("member", generation, member.clone()),
        ] {
            commit.generation_id_or_member_epoch = generation;
            commit.member_id = s(&member_id);
            let answer: OffsetCommitResponse = session
                .call(ApiKey::OffsetCommit, top(ApiKey::OffsetCommit), &commit)
                .await?;
            let code = answer.topics[0].partitions[0].error_code;
            session.observe(&format!("{step}: commit, {what}"), json!({ "error": code }));
        }

        let left: LeaveGroupResponse = session
            .call(
                ApiKey::LeaveGroup,
                leave_v,
                &leave_request(&group, &member, leave_v),
            )
            .await?;
        session.observe(
            &format!("{step}: leave"),
            json!({
                "error": left.error_code,
                "members": left.members.iter().map(|m| m.error_code).collect::<Vec<_>>(),
            }),
        );
        let request = heartbeat_request(&group, generation, &member);
        let beat: HeartbeatResponse = session.call(ApiKey::Heartbeat, beat_v, &request).await?;
        session.observe(
            &format!("{step}: heartbeat after leaving"),
            json!({ "error": beat.error_code }),
        );
    }
    Ok(())
}

pub async fn group_refusals(session: &mut Session) -> Result<(), DiffError> {
    let group = session.transactional_id("group");
    find_coordinator(session, &group, 0).await?;
    let version = top(ApiKey::JoinGroup);
    let too_short: JoinGroupResponse = session
        .call(ApiKey::JoinGroup, version, &join_request(&group, "", 100))
        .await?;
    session.observe(
        "join, session timeout 100 ms",
        json!({ "error": too_short.error_code }),
    );
    let unknown: JoinGroupResponse = session
        .call(
            ApiKey::JoinGroup,
            version,
            &join_request(&group, "made-up", 10_000),
        )
        .await?;
    session.observe(
        "join with an unknown member id",
        json!({ "error": unknown.error_code }),
    );
    let (member, generation) = join(session, "member", &group, version).await?;
    let mut other = join_request(&group, "", 10_000);
    other.protocols[0].name = s("roundrobin");
    let inconsistent: JoinGroupResponse = session.call(ApiKey::JoinGroup, version, &other).await?;
    session.observe(
        "join without a common protocol",
        json!({ "error": inconsistent.error_code }),
    );
    let sync_version = top(ApiKey::SyncGroup);
    let sync = sync_request(&group, generation + 1, &member, &[], sync_version);
    let stale: SyncGroupResponse = session.call(ApiKey::SyncGroup, sync_version, &sync).await?;
    session.observe("sync at a stale generation", json!({ "error": stale.error_code }));
    let sync = sync_request(&group, generation, "made-up", &[], sync_version);
    let unknown_member: SyncGroupResponse = session.call(ApiKey::SyncGroup, sync_version, &sync).await?;
    session.observe(
        "sync from an unknown member",
        json!({ "error": unknown_member.error_code }),
    );
    // From v5 the protocol type and name are required and must be the group's.
    let mut unnamed = sync_request(&group, generation, &member, &[], sync_version);
    unnamed.protocol_name = None;
    let answer: SyncGroupResponse = session.call(ApiKey::SyncGroup, sync_version, &unnamed).await?;
    session.observe(
        "sync without a protocol name",
        json!({ "error": answer.error_code }),
    );
    let mut other = sync_request(&group, generation, &member, &[], sync_version);
    other.protocol_name = Some(s("roundrobin"));
    let answer: SyncGroupResponse = session.call(ApiKey::SyncGroup, sync_version, &other).await?;
    session.observe(
        "sync naming another protocol",
        json!({ "error": answer.error_code }),
    );
    let mut other = sync_request(&group, generation, &member, &[], sync_version);
    other.protocol_type = Some(s("connect"));
    let answer: SyncGroupResponse = session.call(ApiKey::SyncGroup, sync_version, &other).await?;
    session.observe(
        "sync naming another protocol type",
        json!({ "error": answer.error_code }),
    );
    let request = heartbeat_request(&group, generation, "made-up");
    let beat: HeartbeatResponse = session
        .call(ApiKey::Heartbeat, top(ApiKey::Heartbeat), &request)
        .await?;
    session.observe(
        "heartbeat from an unknown member",
        json!({ "error": beat.error_code }),
    );
    let never = session.transactional_id("never-joined");
    find_coordinator(session, &never, 0).await?;
    let request = heartbeat_request(&never, 1, "made-up");
    let beat: HeartbeatResponse = session
        .call(ApiKey::Heartbeat, top(ApiKey::Heartbeat), &request)
        .await?;
    session.observe(
        "heartbeat for a group never joined",
        json!({ "error": beat.error_code }),
    );
    let sync = sync_request(&never, 1, "made-up", &[], top(ApiKey::SyncGroup));
    let synced: SyncGroupResponse = session
        .call(ApiKey::SyncGroup, top(ApiKey::SyncGroup), &sync)
        .await?;
    session.observe(
        "sync for a group never joined",
        json!({ "error": synced.error_code }),
    );
    let leave_version = top(ApiKey::LeaveGroup);
    let left: LeaveGroupResponse = session
        .call(
            ApiKey::LeaveGroup,
            leave_version,
            &leave_request(&group, "made-up", leave_version),
        )
        .await?;
    session.observe(
        "leave of an unknown member",
        json!({ "error": left.error_code, "members": left.members.iter().map(|m| m.error_code).collect::<Vec<_>>() }),
    );
    Ok(())
}

/// KIP-345: a static member (`group.instance.id`) that comes back under a new member id while its group is Stable
/// takes its place without a rebalance — the current generation, and the leader id as it was — and its old id is
/// fenced.
pub async fn static_member_returns(session: &mut Session) -> Result<(), DiffError> {
    let group = session.transactional_id("static");
    find_coordinator(session, &group, 0).await?;
    let version = top(ApiKey::JoinGroup);
    let static_join = |member_id: &str| {
        let mut request = join_request(&group, member_id, 10_000);
        request.group_instance_id = Some(s("instance-1"));
        request
    };
    let first: JoinGroupResponse = session.call(ApiKey::JoinGroup, version, &static_join("")).await?;
    session.observe(
        "static member joins",
        json!({
            "error": first.error_code,
            "generation": first.generation_id,
            "leads": first.leader == first.member_id,
            "members": first.members.len(),
        }),
    );
    let old = first.member_id.as_str().to_owned();
    let sync_version = top(ApiKey::SyncGroup);
    let mut sync = sync_request(&group, first.generation_id, &old, &[old.as_str()], sync_version);
    sync.group_instance_id = Some(s("instance-1"));
    let synced: SyncGroupResponse = session.call(ApiKey::SyncGroup, sync_version, &sync).await?;
    session.observe("leader syncs", json!({ "error": synced.error_code }));
    let back: JoinGroupResponse = session.call(ApiKey::JoinGroup, version, &static_join("")).await?;
    session.observe(
        "the same instance joins again with no member id",
        json!({
            "error": back.error_code,
            "same_generation": back.generation_id == first.generation_id,
            "new_member_id": back.member_id != first.member_id,
            "leader_is_the_old_id": back.leader.as_str() == old,
            "members": back.members.len(),
        }),
    );
    let mut sync = sync_request(
        &group,
        back.generation_id,
        back.member_id.as_str(),
        &[],
        sync_version,
    );
    sync.group_instance_id = Some(s("instance-1"));
    let resynced: SyncGroupResponse = session.call(ApiKey::SyncGroup, sync_version, &sync).await?;
    session.observe(
        "the returned member syncs",
        json!({ "error": resynced.error_code, "assignment_kept": resynced.assignment == synced.assignment }),
    );
    let stale: JoinGroupResponse = session
        .call(ApiKey::JoinGroup, version, &static_join(&old))
        .await?;
    session.observe("the old member id joins", json!({ "error": stale.error_code }));
    Ok(())
}

/// What DescribeGroups and ListGroups say of `group` (whose one member, if any, is `member`), at every version.
async fn describe_and_list(
    session: &mut Session,
    step: &str,
    group: &str,
    member: &str,
) -> Result<(), DiffError> {
    for version in versions(ApiKey::DescribeGroups) {
        let mut request = DescribeGroupsRequest::default();
        request.groups = vec![GroupId(s(group)), GroupId(s(&session.transactional_id("nobody")))];
        let answer: DescribeGroupsResponse = session.call(ApiKey::DescribeGroups, version, &request).await?;
        let groups: Vec<_> = answer
            .groups
            .iter()
            .map(|g| {
                json!({
                    "error": g.error_code,
                    "state": g.group_state.as_str(),
                    "protocol_type": g.protocol_type.as_str(),
                    "protocol": g.protocol_data.as_str(),
                    "members": g.members.iter().map(|m| json!({
                        "is_the_member": m.member_id.as_str() == member,
                        "instance": m.group_instance_id.as_ref().map(|id| id.as_str().to_owned()),
                        "client_id": m.client_id.as_str(),
                        "client_host": m.client_host.as_str(),
                        "metadata": m.member_metadata.to_vec(),
                        "assignment": m.member_assignment.to_vec(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        session.observe(&format!("{step}: DescribeGroups v{version}"), json!(groups));
    }
    for version in versions(ApiKey::ListGroups) {
        // Unfiltered, then (v4+) by state — the group's own in its case-insensitive spelling, and another —
        // and (v5+) by type.
        let mut filters: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![("", vec![], vec![])];
        if version >= 4 {
            filters.push((" in states stable and empty", vec!["stable", "EMPTY"], vec![]));
            filters.push((" in state Dead", vec!["Dead"], vec![]));
        }
        if version >= 5 {
            filters.push((" of type classic", vec![], vec!["Classic"]));
            filters.push((" of type consumer", vec![], vec!["consumer"]));
        }
        for (what, states, types) in filters {
            let mut request = ListGroupsRequest::default();
            request.states_filter = states.into_iter().map(s).collect();
            request.types_filter = types.into_iter().map(s).collect();
            let answer: ListGroupsResponse = session.call(ApiKey::ListGroups, version, &request).await?;
            // The reference broker holds every scenario's groups: only this one is observed.
            let listed: Vec<_> = answer
                .groups
                .iter()
                .filter(|g| g.group_id.as_str() == group)
                .map(
                    |g| json!({ "protocol_type": g.protocol_type.as_str(), "state": g.group_state.as_str() }),
                )
                .collect();
            session.observe(
                &format!("{step}: ListGroups v{version}{what}"),
                json!({ "error": answer.error_code, "listed": listed }),
            );
        }
    }
    Ok(())
}

pub async fn describe_and_list_groups_every_version(session: &mut Session) -> Result<(), DiffError> {
    let group = session.transactional_id("group");
    find_coordinator(session, &group, 0).await?;
    let (member, generation) = join(session, "member", &group, top(ApiKey::JoinGroup)).await?;
    let sync = sync_request(&group, generation, &member, &[&member], top(ApiKey::SyncGroup));
    let synced: SyncGroupResponse = session
        .call(ApiKey::SyncGroup, top(ApiKey::SyncGroup), &sync)
        .await?;
    session.observe("sync", json!({ "error": synced.error_code }));
    describe_and_list(session, "stable", &group, &member).await?;
    let version = top(ApiKey::LeaveGroup);
    let left: LeaveGroupResponse = session
        .call(
            ApiKey::LeaveGroup,
            version,
            &leave_request(&group, &member, version),
        )
        .await?;
    session.observe("leave", json!({ "error": left.error_code }));
    describe_and_list(session, "emptied", &group, &member).await?;
    // A group that only ever committed offsets (a consumer that assigns its partitions).
    let topic = fresh_topic(session, "t", 1).await?;
    let simple = session.transactional_id("offsets-only");
    find_coordinator(session, &simple, 0).await?;
    let commit = requests::offset_commit(&simple, &[(&topic, 0, 4)]);
    let answer: OffsetCommitResponse = super::ask(session, ApiKey::OffsetCommit, &commit).await?;
    session.observe("offsets-only commit", crate::observe::offset_commit(&answer));
    describe_and_list(session, "offsets only", &simple, "").await
}

/// KIP-447: a transaction's offsets (TxnOffsetCommit v3+) name the group member and generation they were read
/// under; an unknown member or a stale generation is refused, the current one accepted.
pub async fn transactional_offsets_checked_against_the_group(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    let group = session.transactional_id("group");
    find_coordinator(session, &group, 0).await?;
    let (member, generation) = join(session, "member", &group, top(ApiKey::JoinGroup)).await?;
    let sync = sync_request(&group, generation, &member, &[], top(ApiKey::SyncGroup));
    let synced: SyncGroupResponse = session
        .call(ApiKey::SyncGroup, top(ApiKey::SyncGroup), &sync)
        .await?;
    session.observe("sync", json!({ "error": synced.error_code }));
    let txn = session.transactional_id("txn");
    let producer = init_transactional(session, &txn, 60_000).await?;
    let add = requests::add_offsets(&txn, producer, &group);
    let added: AddOffsetsToTxnResponse = session
        .call(ApiKey::AddOffsetsToTxn, top(ApiKey::AddOffsetsToTxn), &add)
        .await?;
    session.observe("AddOffsetsToTxn", json!({ "error": added.error_code }));
    for (what, generation, member_id) in [
        ("an unknown member", generation, "made-up".to_owned()),
        ("a stale generation", generation + 1, member.clone()),
        ("the current member", generation, member.clone()),
    ] {
        let mut request = requests::txn_offset_commit(&txn, producer, &group, &[(&topic, 0, 7)]);
        request.generation_id = generation;
        request.member_id = s(&member_id);
        let answer: TxnOffsetCommitResponse = session
            .call(ApiKey::TxnOffsetCommit, top(ApiKey::TxnOffsetCommit), &request)
            .await?;
        let code = answer.topics[0].partitions[0].error_code;
        session.observe(&format!("TxnOffsetCommit from {what}"), json!({ "error": code }));
    }
    end_txn_at(session, top(ApiKey::EndTxn), &txn, producer, false, &[]).await?;
    Ok(())
}

/// DeleteGroups at every version: a group with a member, the same group emptied, a group that only has committed
/// offsets (then what OffsetFetch says), and a group that never existed.
pub async fn delete_groups_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 1).await?;
    for version in versions(ApiKey::DeleteGroups) {
        let group = session.transactional_id(&format!("group-v{version}"));
        let simple = session.transactional_id(&format!("simple-v{version}"));
        let nobody = session.transactional_id(&format!("nobody-v{version}"));
        find_coordinator(session, &group, 0).await?;
        find_coordinator(session, &simple, 0).await?;
        let (member, _) = join(session, &format!("v{version}"), &group, top(ApiKey::JoinGroup)).await?;
        let commit = requests::offset_commit(&simple, &[(&topic, 0, 5)]);
        let committed: OffsetCommitResponse = session
            .call(ApiKey::OffsetCommit, top(ApiKey::OffsetCommit), &commit)
            .await?;
        session.observe(
            &format!("v{version}: simple commit"),
            json!({ "error": committed.topics[0].partitions[0].error_code }),
        );
        let mut delete = DeleteGroupsRequest::default();
        delete.groups_names = vec![GroupId(s(&group)), GroupId(s(&simple)), GroupId(s(&nobody))];
        let answer: DeleteGroupsResponse = session.call(ApiKey::DeleteGroups, version, &delete).await?;
        // Kafka answers in an order of its own: each result by the group it names.
        let by_group: std::collections::BTreeMap<&str, i16> = answer
            .results
            .iter()
            .map(|r| {
                let role = match r.group_id.as_str() {
                    name if name == group => "with a member",
                    name if name == simple => "only offsets",
                    name if name == nobody => "never seen",
                    _ => "unasked",
                };
                (role, r.error_code)
            })
            .collect();
        session.observe(&format!("v{version}: delete"), json!(by_group));
        let leave_version = top(ApiKey::LeaveGroup);
        let left: LeaveGroupResponse = session
            .call(
                ApiKey::LeaveGroup,
                leave_version,
                &leave_request(&group, &member, leave_version),
            )
            .await?;
        session.observe(&format!("v{version}: leave"), json!({ "error": left.error_code }));
        delete.groups_names = vec![GroupId(s(&group))];
        let answer: DeleteGroupsResponse = session.call(ApiKey::DeleteGroups, version, &delete).await?;
        let codes: Vec<i16> = answer.results.iter().map(|r| r.error_code).collect();
        session.observe(&format!("v{version}: delete the emptied group"), json!(codes));
        let partitions: &[i32] = &[0];
        let fetch = requests::offset_fetch(
            &simple,
            Some(&[(&topic, partitions)]),
            false,
            top(ApiKey::OffsetFetch),
        );
        let fetched: OffsetFetchResponse = session
            .call(ApiKey::OffsetFetch, top(ApiKey::OffsetFetch), &fetch)
            .await?;
        session.observe(
            &format!("v{version}: the deleted simple group's offset"),
            json!(crate::observe::fetched_offsets(&fetched).1.first().map(|p| p.2)),
        );
    }
    Ok(())
}

/// OffsetDelete's per-partition errors, keyed `topic/partition`, and the top-level error.
fn offset_delete_answer(answer: &OffsetDeleteResponse, names: &[(&str, &str)]) -> serde_json::Value {
    let mut partitions = std::collections::BTreeMap::new();
    for topic in &answer.topics {
        let name = names
            .iter()
            .find(|(actual, _)| *actual == topic.name.as_str())
            .map_or(topic.name.as_str(), |(_, role)| role);
        for partition in &topic.partitions {
            partitions.insert(
                format!("{name}/{}", partition.partition_index),
                partition.error_code,
            );
        }
    }
    json!({ "error": answer.error_code, "partitions": partitions })
}

pub async fn offset_delete_every_version(session: &mut Session) -> Result<(), DiffError> {
    let topic = fresh_topic(session, "t", 2).await?;
    for version in versions(ApiKey::OffsetDelete) {
        let simple = session.transactional_id(&format!("simple-v{version}"));
        let group = session.transactional_id(&format!("group-v{version}"));
        let nobody = session.transactional_id(&format!("nobody-v{version}"));
        for id in [&simple, &group, &nobody] {
            find_coordinator(session, id, 0).await?;
        }
        for (id, parts) in [
            (&simple, vec![(topic.as_str(), 0, 5), (topic.as_str(), 1, 6)]),
            (&group, vec![(topic.as_str(), 0, 8)]),
        ] {
            let commit = requests::offset_commit(id, &parts);
            let committed: OffsetCommitResponse = session
                .call(ApiKey::OffsetCommit, top(ApiKey::OffsetCommit), &commit)
                .await?;
            let codes: Vec<i16> = committed
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect();
            session.observe(&format!("v{version}: commit"), json!(codes));
        }
        let (member, _) = join(session, &format!("v{version}"), &group, top(ApiKey::JoinGroup)).await?;
        let names = [
            (topic.as_str(), "t"),
            (TOPIC, "subscribed"),
            ("offset-delete-unknown", "unknown"),
        ];
        let delete = |id: &str, parts: &[(&str, i32)]| {
            let mut request = OffsetDeleteRequest::default();
            request.group_id = GroupId(s(id));
            request.topics = parts
                .iter()
                .map(|&(name, index)| {
                    let mut partition = offset_delete_request::OffsetDeleteRequestPartition::default();
                    partition.partition_index = index;
                    let mut topic = offset_delete_request::OffsetDeleteRequestTopic::default();
                    topic.name = requests::topic_name(name);
                    topic.partitions = vec![partition];
                    topic
                })
                .collect();
            request
        };
        let steps = [
            (
                "offsets only",
                delete(&simple, &[(topic.as_str(), 0), ("offset-delete-unknown", 0)]),
            ),
            (
                "a member subscribed",
                delete(&group, &[(TOPIC, 0), (topic.as_str(), 0)]),
            ),
            ("never seen", delete(&nobody, &[(topic.as_str(), 0)])),
        ];
        for (step, request) in steps {
            let answer: OffsetDeleteResponse = session.call(ApiKey::OffsetDelete, version, &request).await?;
            session.observe(
                &format!("v{version}: {step}"),
                offset_delete_answer(&answer, &names),
            );
        }
        for (role, id, partitions) in [
            ("offsets only", &simple, &[0, 1][..]),
            ("a member subscribed", &group, &[0][..]),
        ] {
            let fetch =
                requests::offset_fetch(id, Some(&[(&topic, partitions)]), false, top(ApiKey::OffsetFetch));
            let fetched: OffsetFetchResponse = session
                .call(ApiKey::OffsetFetch, top(ApiKey::OffsetFetch), &fetch)
                .await?;
            let offsets: Vec<i64> = crate::observe::fetched_offsets(&fetched)
                .1
                .iter()
                .map(|p| p.2)
                .collect();
            session.observe(&format!("v{version}: {role}, offsets after"), json!(offsets));
        }
        let leave_version = top(ApiKey::LeaveGroup);
        let _: LeaveGroupResponse = session
            .call(
                ApiKey::LeaveGroup,
                leave_version,
                &leave_request(&group, &member, leave_version),
            )
            .await?;
    }
    Ok(())
}
