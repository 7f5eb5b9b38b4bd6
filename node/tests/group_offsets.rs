//! Group offsets across a restart: DeleteGroups forgets a group's committed offsets durably, and another group's
//! stay.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

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
