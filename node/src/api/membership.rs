//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup over [`crate::membership`]: the request values turned into the
//! membership's calls, waits for a rebalance awaited here (the connection's task waits, as Kafka's clients expect
//! of a JoinGroup), and the answers turned back into response values for the request's version.

use bytes::Bytes;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::*;
use kafka_types::{KafkaError, NO_ERROR};

use super::str_bytes;
use crate::membership::{JoinAnswer, JoinRequest, Pending, SyncAnswer};
use crate::node::Node;

fn code(error: Option<KafkaError>) -> i16 {
    error.map_or(NO_ERROR, KafkaError::code)
}

/// Waits for an answer the membership gives later; a sender dropped (the member was removed meanwhile) is
/// `gone`.
async fn settle<T>(pending: Pending<T>, gone: impl FnOnce() -> T) -> T {
    match pending {
        Pending::Now(answer) => answer,
        Pending::Wait(receiver) => receiver.await.unwrap_or_else(|_| gone()),
    }
}

/// JoinGroup: answered when the group's rebalance completes. `client_id` and `client_host` are the caller's
/// (its request header's client id, its address as Kafka writes it: `/127.0.0.1`).
pub async fn join_group(
    node: &Node,
    request: JoinGroupRequest,
    version: i16,
    client_id: &str,
    client_host: &str,
) -> JoinGroupResponse {
    let member_id = request.member_id.as_str().to_owned();
    let join = JoinRequest {
        group: request.group_id.as_str().to_owned(),
        member_id: member_id.clone(),
        instance_id: request
            .group_instance_id
            .as_ref()
            .map(|id| id.as_str().to_owned()),
        client_id: client_id.to_owned(),
        client_host: client_host.to_owned(),
        session_timeout_ms: request.session_timeout_ms,
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        protocol_type: request.protocol_type.as_str().to_owned(),
        protocols: request
            .protocols
            .iter()
            .map(|protocol| (protocol.name.as_str().to_owned(), protocol.metadata.clone()))
            .collect(),
        require_known_member_id: version >= 4,
    };
    let pending = node.membership.join(join, node.now_ms());
    // A static member back under a new id changed the stored group.
    let stored = node.store_groups().await;
    let mut answer = settle(pending, || JoinAnswer {
        error: Some(KafkaError::UnknownMemberId),
        generation: -1,
        protocol: None,
        leader: String::new(),
        member_id: member_id.clone(),
        members: Vec::new(),
    })
    .await;
    if let Err(error) = stored {
        answer.error = Some(error);
    }
    let mut response = JoinGroupResponse::default();
    response.error_code = code(answer.error);
    response.generation_id = answer.generation;
    if answer.error.is_none() || version < 7 {
        response.protocol_type = Some(request.protocol_type.clone());
        // Non-nullable before v7: an error answers it empty.
        response.protocol_name = Some(str_bytes(answer.protocol.as_deref().unwrap_or("")));
    }
    response.leader = str_bytes(&answer.leader);
    response.member_id = str_bytes(&answer.member_id);
    response.members = answer
        .members
        .into_iter()
        .map(|(id, instance, metadata)| {
            let mut member = JoinGroupResponseMember::default();
            member.member_id = str_bytes(&id);
            member.group_instance_id = instance.as_deref().map(str_bytes);
            member.metadata = metadata;
            member
        })
        .collect();
    response
}

/// SyncGroup: a follower's answer waits for the leader's assignment. From v5 the request names the protocol type
/// and protocol it expects and the answer names the group's.
pub async fn sync_group(node: &Node, request: SyncGroupRequest, version: i16) -> SyncGroupResponse {
    let group_id = request.group_id.as_str();
    let mut response = SyncGroupResponse::default();
    if version >= 5 && (request.protocol_type.is_none() || request.protocol_name.is_none()) {
        // Both are required from v5 on; Kafka refuses a request without them before anything else.
        response.error_code = KafkaError::InconsistentGroupProtocol.code();
        return response;
    }
    let protocol = node.membership.protocol_of(group_id);
    if let Some((protocol_type, protocol_name)) = &protocol {
        let differs = |asked: &Option<kafka_protocol::protocol::StrBytes>, held: &Option<String>| {
            asked
                .as_ref()
                .is_some_and(|asked| held.as_deref() != Some(asked.as_str()))
        };
        if differs(&request.protocol_type, protocol_type) || differs(&request.protocol_name, protocol_name) {
            response.error_code = KafkaError::InconsistentGroupProtocol.code();
            return response;
        }
    }
    let assignments: Vec<(String, Bytes)> = request
        .assignments
        .iter()
        .map(|assignment| {
            (
                assignment.member_id.as_str().to_owned(),
                assignment.assignment.clone(),
            )
        })
        .collect();
    let pending = node.membership.sync(
        group_id,
        request.generation_id,
        request.member_id.as_str(),
        assignments,
        node.now_ms(),
    );
    // The leader's assignment completed the rebalance: the group is stored before the leader hears so.
    let stored = node.store_groups().await;
    let mut answer = settle(pending, || SyncAnswer {
        error: Some(KafkaError::RebalanceInProgress),
        assignment: Bytes::new(),
    })
    .await;
    if let Err(error) = stored {
        answer.error = Some(error);
    }
    response.error_code = code(answer.error);
    if answer.error.is_none() && version >= 5 {
        if let Some((protocol_type, protocol_name)) = protocol {
            response.protocol_type = protocol_type.as_deref().map(str_bytes);
            response.protocol_name = protocol_name.as_deref().map(str_bytes);
        }
    }
    response.assignment = answer.assignment;
    response
}

/// Heartbeat.
pub fn heartbeat(node: &Node, request: &HeartbeatRequest) -> HeartbeatResponse {
    let mut response = HeartbeatResponse::default();
    response.error_code = code(node.membership.heartbeat(
        request.group_id.as_str(),
        request.generation_id,
        request.member_id.as_str(),
        node.now_ms(),
    ));
    response
}

/// LeaveGroup: one member (versions 0–2) or a list of members (3 and above, static members by instance id).
pub fn leave_group(node: &Node, request: &LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    let group = request.group_id.as_str();
    let now = node.now_ms();
    let mut response = LeaveGroupResponse::default();
    if version < 3 {
        response.error_code = code(
            node.membership
                .leave(group, request.member_id.as_str(), None, now),
        );
        return response;
    }
    for identity in &request.members {
        let mut member = MemberResponse::default();
        member.member_id = identity.member_id.clone();
        member.group_instance_id = identity.group_instance_id.clone();
        member.error_code = code(node.membership.leave(
            group,
            identity.member_id.as_str(),
            identity.group_instance_id.as_ref().map(|id| id.as_str()),
            now,
        ));
        response.members.push(member);
    }
    response
}

/// DescribeGroups: a group that only has committed offsets is `Empty` with no protocol type, one this node does
/// not hold at all `Dead`, without an error (as Kafka answers versions 0–5).
pub async fn describe_groups(node: &Node, request: &DescribeGroupsRequest) -> DescribeGroupsResponse {
    let offsets = node.offsets.lock().await;
    let mut response = DescribeGroupsResponse::default();
    for group_id in &request.groups {
        let mut described = describe_groups_response::DescribedGroup::default();
        described.group_id = group_id.clone();
        match node.membership.describe_group(group_id.as_str()) {
            None if offsets.has_group(group_id.as_str()) => described.group_state = str_bytes("Empty"),
            None => described.group_state = str_bytes("Dead"),
            Some(group) => {
                described.group_state = str_bytes(group.state.name());
                described.protocol_type = str_bytes(&group.protocol_type);
                described.protocol_data = str_bytes(&group.protocol);
                described.members = group
                    .members
                    .into_iter()
                    .map(|member| {
                        let mut out = describe_groups_response::DescribedGroupMember::default();
                        out.member_id = str_bytes(&member.member_id);
                        out.group_instance_id = member.instance_id.as_deref().map(str_bytes);
                        out.client_id = str_bytes(&member.client_id);
                        out.client_host = str_bytes(&member.client_host);
                        out.member_metadata = member.metadata;
                        out.member_assignment = member.assignment;
                        out
                    })
                    .collect();
            }
        }
        response.groups.push(described);
    }
    response
}

/// ListGroups: every group that has or had members, and every group that only committed offsets (`Empty`, no
/// protocol type, as Kafka lists it), in the states (v4+) and of the types (v5+) the request filters on, if it
/// does (case-insensitively, as Kafka matches them; every group here is `classic`).
pub async fn list_groups(node: &Node, request: &ListGroupsRequest) -> ListGroupsResponse {
    let offsets_only: Vec<String> = {
        let offsets = node.offsets.lock().await;
        offsets.groups().into_iter().map(str::to_owned).collect()
    };
    let wanted = |filter: &[kafka_protocol::protocol::StrBytes], value: &str| {
        filter.is_empty() || filter.iter().any(|f| f.as_str().eq_ignore_ascii_case(value))
    };
    let mut response = ListGroupsResponse::default();
    if !wanted(&request.types_filter, "classic") {
        return response;
    }
    let mut groups = node.membership.list();
    for group in offsets_only {
        if node.membership.protocol_of(&group).is_none() {
            groups.push((group, String::new(), crate::membership::GroupState::Empty));
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    response.groups = groups
        .into_iter()
        .filter(|(_, _, state)| wanted(&request.states_filter, state.name()))
        .map(|(id, protocol_type, state)| {
            let mut listed = list_groups_response::ListedGroup::default();
            listed.group_id = GroupId(str_bytes(&id));
            listed.protocol_type = str_bytes(&protocol_type);
            listed.group_state = str_bytes(state.name());
            listed.group_type = str_bytes("classic");
            listed
        })
        .collect();
    response
}

/// DeleteGroups: an empty group (or one that only has committed offsets) is forgotten with its offsets; one with
/// members is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND.
pub async fn delete_groups(node: &Node, request: &DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut response = DeleteGroupsResponse::default();
    for group_id in &request.groups_names {
        let group = group_id.as_str();
        let mut result = delete_groups_response::DeletableGroupResult::default();
        result.group_id = group_id.clone();
        let mut offsets = node.offsets.lock().await;
        let has_offsets = offsets.has_group(group);
        result.error_code = match node.membership.delete(group) {
            Err(error) => error.code(),
            Ok(false) if !has_offsets => KafkaError::GroupIdNotFound.code(),
            // The offsets and the stored membership go durably.
            Ok(_) => match offsets.delete_group(group).await {
                Ok(()) => NO_ERROR,
                Err(_) => KafkaError::KafkaStorageError.code(),
            },
        };
        response.results.push(result);
    }
    response
}
