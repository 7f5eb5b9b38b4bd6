//! Consumer groups' checks: joining, syncing, heartbeats, leaving, committing and fetching offsets need READ on
//! the group (committing also READ on each topic; fetched offsets show only topics the caller may DESCRIBE);
//! DescribeGroups and FindCoordinator need DESCRIBE on the group (or the transactional id); ListGroups lists the
//! groups the caller may DESCRIBE (all with DESCRIBE on the cluster); DeleteGroups and OffsetDelete need DELETE on
//! the group (OffsetDelete also READ on each topic).

use std::collections::BTreeMap;

use kafka_auth::acl::Operation;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::*;
use kafka_types::KafkaError;

use super::{take_denied, Access};

const GROUP_DENIED: i16 = KafkaError::GroupAuthorizationFailed.code();
const TOPIC_DENIED: i16 = KafkaError::TopicAuthorizationFailed.code();

/// JoinGroup refused whole without READ on the group.
pub fn join_group(access: &Access, request: &JoinGroupRequest) -> Option<JoinGroupResponse> {
    (!access.group(Operation::Read, &request.group_id)).then(|| {
        let mut response = JoinGroupResponse::default();
        response.error_code = GROUP_DENIED;
        response.generation_id = -1;
        response
    })
}

/// SyncGroup refused whole without READ on the group.
pub fn sync_group(access: &Access, request: &SyncGroupRequest) -> Option<SyncGroupResponse> {
    (!access.group(Operation::Read, &request.group_id)).then(|| {
        let mut response = SyncGroupResponse::default();
        response.error_code = GROUP_DENIED;
        response
    })
}

/// Heartbeat refused whole without READ on the group.
pub fn heartbeat(access: &Access, request: &HeartbeatRequest) -> Option<HeartbeatResponse> {
    (!access.group(Operation::Read, &request.group_id)).then(|| {
        let mut response = HeartbeatResponse::default();
        response.error_code = GROUP_DENIED;
        response
    })
}

/// LeaveGroup refused whole without READ on the group.
pub fn leave_group(access: &Access, request: &LeaveGroupRequest) -> Option<LeaveGroupResponse> {
    (!access.group(Operation::Read, &request.group_id)).then(|| {
        let mut response = LeaveGroupResponse::default();
        response.error_code = GROUP_DENIED;
        response
    })
}

/// OffsetCommit: every partition refused without READ on the group; each topic the caller may not READ refused.
pub fn offset_commit(access: &Access, request: &mut OffsetCommitRequest) -> Vec<OffsetCommitResponseTopic> {
    let group_allowed = access.group(Operation::Read, &request.group_id);
    let error = if group_allowed { TOPIC_DENIED } else { GROUP_DENIED };
    take_denied(&mut request.topics, |topic| {
        group_allowed && access.topic(Operation::Read, &topic.name)
    })
    .into_iter()
    .map(|topic| {
        let mut answer = OffsetCommitResponseTopic::default();
        answer.name = topic.name;
        answer.topic_id = topic.topic_id;
        answer.partitions = topic
            .partitions
            .iter()
            .map(|partition| {
                let mut refused = OffsetCommitResponsePartition::default();
                refused.partition_index = partition.partition_index;
                refused.error_code = error;
                refused
            })
            .collect();
        answer
    })
    .collect()
}

/// OffsetFetch of one group (v1–v7) refused whole without READ on the group: before v2, which has no top-level
/// error, on each partition asked.
pub fn offset_fetch_refused(
    access: &Access,
    request: &OffsetFetchRequest,
    version: i16,
) -> Option<OffsetFetchResponse> {
    if version >= 8 || access.group(Operation::Read, &request.group_id) {
        return None;
    }
    let mut response = OffsetFetchResponse::default();
    if version >= 2 {
        response.error_code = GROUP_DENIED;
    } else {
        response.topics = request
            .topics
            .iter()
            .flatten()
            .map(|topic| {
                let mut answer = OffsetFetchResponseTopic::default();
                answer.name = topic.name.clone();
                answer.partitions = topic
                    .partition_indexes
                    .iter()
                    .map(|&index| refused_offset(index, GROUP_DENIED))
                    .collect();
                answer
            })
            .collect();
    }
    Some(response)
}

/// OffsetFetch of several groups (v8+): each group the caller may not READ is refused.
pub fn offset_fetch_groups(
    access: &Access,
    request: &mut OffsetFetchRequest,
) -> Vec<OffsetFetchResponseGroup> {
    take_denied(&mut request.groups, |group| {
        access.group(Operation::Read, &group.group_id)
    })
    .into_iter()
    .map(|group| {
        let mut answer = OffsetFetchResponseGroup::default();
        answer.group_id = group.group_id;
        answer.error_code = GROUP_DENIED;
        answer
    })
    .collect()
}

/// Which groups (`""` before v8) named their topics, for [`offset_fetch_response`].
pub fn offset_fetch_named(request: &OffsetFetchRequest) -> BTreeMap<String, bool> {
    let mut named: BTreeMap<String, bool> = request
        .groups
        .iter()
        .map(|group| (group.group_id.to_string(), group.topics.is_some()))
        .collect();
    named.insert(String::new(), request.topics.is_some());
    named
}

/// OffsetFetch, after: a topic the caller may not DESCRIBE is left out of an all-topics answer and refused on each
/// partition when named.
pub fn offset_fetch_response(
    access: &Access,
    named: &BTreeMap<String, bool>,
    response: &mut OffsetFetchResponse,
) {
    let describable = |name: &str| access.topic(Operation::Describe, name);
    let denied = take_denied(&mut response.topics, |topic| describable(&topic.name));
    if named.get("").copied().unwrap_or(false) {
        response.topics.extend(denied.into_iter().map(|mut topic| {
            for partition in &mut topic.partitions {
                *partition = refused_offset(partition.partition_index, TOPIC_DENIED);
            }
            topic
        }));
    }
    for group in &mut response.groups {
        let denied = take_denied(&mut group.topics, |topic| describable(&topic.name));
        if named.get(group.group_id.as_str()).copied().unwrap_or(false) {
            group.topics.extend(denied.into_iter().map(|mut topic| {
                for partition in &mut topic.partitions {
                    let index = partition.partition_index;
                    *partition = Default::default();
                    partition.partition_index = index;
                    partition.committed_offset = -1;
                    partition.committed_leader_epoch = -1;
                    partition.error_code = TOPIC_DENIED;
                }
                topic
            }));
        }
    }
}

fn refused_offset(index: i32, error: i16) -> OffsetFetchResponsePartition {
    let mut refused = OffsetFetchResponsePartition::default();
    refused.partition_index = index;
    refused.committed_offset = -1;
    refused.committed_leader_epoch = -1;
    refused.error_code = error;
    refused
}

/// DescribeGroups: each group the caller may not DESCRIBE is refused.
pub fn describe_groups(access: &Access, request: &mut DescribeGroupsRequest) -> Vec<DescribedGroup> {
    take_denied(&mut request.groups, |group| {
        access.group(Operation::Describe, group)
    })
    .into_iter()
    .map(|group| {
        let mut refused = DescribedGroup::default();
        refused.group_id = group;
        refused.error_code = GROUP_DENIED;
        refused
    })
    .collect()
}

/// ListGroups, after: only the groups the caller may DESCRIBE (every group with DESCRIBE on the cluster).
pub fn list_groups_response(access: &Access, response: &mut ListGroupsResponse) {
    if !access.cluster(Operation::Describe) {
        response
            .groups
            .retain(|group| access.group(Operation::Describe, &group.group_id));
    }
}

/// DeleteGroups: each group the caller may not DELETE is refused.
pub fn delete_groups(access: &Access, request: &mut DeleteGroupsRequest) -> Vec<DeletableGroupResult> {
    take_denied(&mut request.groups_names, |group| {
        access.group(Operation::Delete, group)
    })
    .into_iter()
    .map(|group| {
        let mut refused = DeletableGroupResult::default();
        refused.group_id = group;
        refused.error_code = GROUP_DENIED;
        refused
    })
    .collect()
}

/// OffsetDelete: refused whole without DELETE on the group; each topic the caller may not READ refused.
pub fn offset_delete(
    access: &Access,
    request: &mut OffsetDeleteRequest,
) -> Result<Vec<OffsetDeleteResponseTopic>, OffsetDeleteResponse> {
    if !access.group(Operation::Delete, &request.group_id) {
        let mut response = OffsetDeleteResponse::default();
        response.error_code = GROUP_DENIED;
        return Err(response);
    }
    Ok(take_denied(&mut request.topics, |topic| {
        access.topic(Operation::Read, &topic.name)
    })
    .into_iter()
    .map(|topic| {
        let mut answer = OffsetDeleteResponseTopic::default();
        answer.name = topic.name;
        answer.partitions = topic
            .partitions
            .iter()
            .map(|partition| {
                let mut refused = OffsetDeleteResponsePartition::default();
                refused.partition_index = partition.partition_index;
                refused.error_code = TOPIC_DENIED;
                refused
            })
            .collect();
        answer
    })
    .collect())
}

/// The error for a coordinator key the caller may not DESCRIBE (a group's, or a transactional id's), if denied.
fn coordinator_denied(access: &Access, key_type: i8, key: &str) -> Option<i16> {
    match key_type {
        0 => (!access.group(Operation::Describe, key)).then_some(GROUP_DENIED),
        1 => (!access.transactional_id(Operation::Describe, key))
            .then_some(KafkaError::TransactionalIdAuthorizationFailed.code()),
        _ => None,
    }
}

/// FindCoordinator of one key (v0–v3) refused whole when the caller may not DESCRIBE it.
pub fn find_coordinator_refused(
    access: &Access,
    request: &FindCoordinatorRequest,
    version: i16,
) -> Option<FindCoordinatorResponse> {
    if version >= 4 {
        return None;
    }
    coordinator_denied(access, request.key_type, &request.key).map(|error| {
        let mut response = FindCoordinatorResponse::default();
        response.error_code = error;
        response.node_id = (-1).into();
        response.port = -1;
        response
    })
}

/// FindCoordinator of several keys (v4+): each key the caller may not DESCRIBE is refused.
pub fn find_coordinator_keys(access: &Access, request: &mut FindCoordinatorRequest) -> Vec<Coordinator> {
    let key_type = request.key_type;
    take_denied(&mut request.coordinator_keys, |key| {
        coordinator_denied(access, key_type, key).is_none()
    })
    .into_iter()
    .map(|key| {
        let mut refused = Coordinator::default();
        refused.error_code = coordinator_denied(access, key_type, &key).unwrap_or(GROUP_DENIED);
        refused.key = key;
        refused.node_id = (-1).into();
        refused.port = -1;
        refused
    })
    .collect()
}
