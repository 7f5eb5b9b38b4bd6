//! Groups across a restart: DeleteGroups forgets a group's committed offsets durably, and another group's stay; a
//! stable group's membership (generation, members, assignments) is stored and restored.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use bytes::Bytes;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use node::{Node, NodeConfig};
use storage_config::{Backend, StorageConfig};

const TOPIC: &str = "orders";

async fn node_in(dir: &std::path::Path) -> Node {
    let storage = StorageConfig::for_backend(Backend::Fs, dir);
    let mut config = NodeConfig::new(storage);
    config.topics = vec![(TOPIC.to_owned(), 1)];
    // No group timers run here: a join must complete without one.
    config.group_initial_rebalance_delay_ms = 0;
    Node::open(config, ("localhost".to_owned(), 9092)).await.unwrap()
}

fn group(name: &str) -> GroupId {
    GroupId(StrBytes::from_string(name.to_owned()))
}

async fn commit(node: &Node, name: &str, offset: i64) {
    let mut partition = OffsetCommitRequestPartition::default();
    partition.committed_offset = offset;
    let mut topic = OffsetCommitRequestTopic::default();
    topic.name = TopicName(StrBytes::from_static_str(TOPIC));
    topic.partitions = vec![partition];
    let mut request = OffsetCommitRequest::default();
    request.group_id = group(name);
    request.generation_id_or_member_epoch = -1;
    request.topics = vec![topic];
    let answer = node.offset_commit(request, 7).await;
    assert_eq!(answer.topics[0].partitions[0].error_code, 0);
}

async fn committed(node: &Node, name: &str) -> i64 {
    let mut topic = OffsetFetchRequestTopic::default();
    topic.name = TopicName(StrBytes::from_static_str(TOPIC));
    topic.partition_indexes = vec![0];
    let mut request = OffsetFetchRequest::default();
    request.group_id = group(name);
    request.topics = Some(vec![topic]);
    node.offset_fetch(request, 5).await.topics[0].partitions[0].committed_offset
}

#[tokio::test]
async fn a_deleted_group_stays_deleted_after_a_restart_and_the_others_keep_their_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let node = node_in(dir.path()).await;
    commit(&node, "deleted", 5).await;
    commit(&node, "kept", 9).await;
    let mut request = DeleteGroupsRequest::default();
    request.groups_names = vec![group("deleted"), group("never")];
    let answer = node.delete_groups(request, 1).await;
    let codes: Vec<i16> = answer.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![0, 69], "deleted; GROUP_ID_NOT_FOUND");
    assert_eq!(committed(&node, "deleted").await, -1);
    node.close().await.unwrap();
    drop(node);

    let node = node_in(dir.path()).await;
    assert_eq!(committed(&node, "deleted").await, -1, "the deletion was durable");
    assert_eq!(committed(&node, "kept").await, 9);
}

/// One member joins `name` and, as its leader, assigns itself `assignment`: (member id, generation).
async fn form_group(node: &Node, name: &str, assignment: &'static [u8]) -> (StrBytes, i32) {
    let mut protocol = join_group_request::JoinGroupRequestProtocol::default();
    protocol.name = StrBytes::from_static_str("range");
    protocol.metadata = Bytes::from_static(b"subscription");
    let mut join = JoinGroupRequest::default();
    join.group_id = group(name);
    join.session_timeout_ms = 10_000;
    join.rebalance_timeout_ms = 10_000;
    join.protocol_type = StrBytes::from_static_str("consumer");
    join.protocols = vec![protocol];
    let joined = node.join_group(join, 3, "client", "/127.0.0.1").await;
    assert_eq!(joined.error_code, 0);
    let synced = sync(node, name, &joined.member_id, joined.generation_id, assignment).await;
    assert_eq!(synced.error_code, 0);
    (joined.member_id, joined.generation_id)
}

async fn sync(
    node: &Node,
    name: &str,
    member: &StrBytes,
    generation: i32,
    assignment: &'static [u8],
) -> SyncGroupResponse {
    let mut assigned = sync_group_request::SyncGroupRequestAssignment::default();
    assigned.member_id = member.clone();
    assigned.assignment = Bytes::from_static(assignment);
    let mut request = SyncGroupRequest::default();
    request.group_id = group(name);
    request.generation_id = generation;
    request.member_id = member.clone();
    request.assignments = vec![assigned];
    node.sync_group(request, 3).await
}

fn heartbeat(node: &Node, name: &str, member: &StrBytes, generation: i32) -> i16 {
    let mut request = HeartbeatRequest::default();
    request.group_id = group(name);
    request.member_id = member.clone();
    request.generation_id = generation;
    node.heartbeat(request, 3).error_code
}

async fn describe(node: &Node, name: &str) -> describe_groups_response::DescribedGroup {
    let mut request = DescribeGroupsRequest::default();
    request.groups = vec![group(name)];
    node.describe_groups(request, 4).await.groups.remove(0)
}

#[tokio::test]
async fn a_stable_group_keeps_its_generation_members_and_assignment_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let node = node_in(dir.path()).await;
    let (member, generation) = form_group(&node, "stable", b"orders-0").await;
    node.close_groups();
    node.close().await.unwrap();
    drop(node);

    let node = node_in(dir.path()).await;
    assert_eq!(
        heartbeat(&node, "stable", &member, generation),
        0,
        "the member carries on, no rebalance"
    );
    let described = describe(&node, "stable").await;
    assert_eq!(described.group_state.as_str(), "Stable");
    assert_eq!(described.members.len(), 1);
    assert_eq!(
        described.members[0].member_assignment,
        Bytes::from_static(b"orders-0")
    );
    // A follower's re-sync at the same generation gets the stored assignment back.
    let synced = sync(
        &node,
        "stable",
        &member,
        generation,
        b"ignored: the group is stable",
    )
    .await;
    assert_eq!(
        (synced.error_code, synced.assignment),
        (0, Bytes::from_static(b"orders-0"))
    );
    // A member the restored group never had is still unknown.
    assert_eq!(
        heartbeat(
            &node,
            "stable",
            &StrBytes::from_static_str("stranger"),
            generation
        ),
        25
    );
}

#[tokio::test]
async fn a_group_emptied_by_its_last_member_leaving_is_restored_empty_with_its_generation() {
    let dir = tempfile::tempdir().unwrap();
    let node = node_in(dir.path()).await;
    let (member, generation) = form_group(&node, "emptied", b"orders-0").await;
    let mut identity = leave_group_request::MemberIdentity::default();
    identity.member_id = member.clone();
    let mut leave = LeaveGroupRequest::default();
    leave.group_id = group("emptied");
    leave.members = vec![identity];
    assert_eq!(node.leave_group(leave, 3).await.error_code, 0);
    node.close().await.unwrap();
    drop(node);

    let node = node_in(dir.path()).await;
    let described = describe(&node, "emptied").await;
    assert_eq!(described.group_state.as_str(), "Empty");
    assert!(described.members.is_empty());
    assert_eq!(
        heartbeat(&node, "emptied", &member, generation),
        25,
        "UNKNOWN_MEMBER_ID: it left"
    );
}
