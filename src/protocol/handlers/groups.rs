//! Consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! DescribeGroups, ListGroups, DeleteGroups.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::{str_bytes, OPS_NOT_REQUESTED};
use crate::coordinator::group::{JoinOutcome, JoinParams, SyncOutcome, SyncParams};
use crate::coordinator::group_coordinator::wait;
use crate::coordinator::GroupError;
use crate::protocol::errors::{coordinator_error, group_error};
use crate::protocol::{Ctx, RequestInfo};

const KEY_TYPE_GROUP: i8 = 0;

pub async fn find_coordinator(
    ctx: &Ctx,
    info: &RequestInfo,
    req: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    // Creating `__consumer_offsets` is a controller round trip: done once, before the
    // lookups, off the async workers.
    let wants_group =
        req.key_type == KEY_TYPE_GROUP && (!req.key.is_empty() || req.coordinator_keys.iter().any(|k| !k.is_empty()));
    let offsets_topic =
        if wants_group { crate::protocol::offsets_topic::ensure_topic_exists(ctx).await } else { Ok(()) };
    if wants_group {
        // Load the partitions this broker leads now, so that a group whose coordinator it
        // names here is served at once (a new partition is empty and loads in place).
        crate::protocol::offsets_topic::refresh_coordinator(ctx);
    }
    let image = ctx.image();
    // A group's coordinator is the leader of its partition of `__consumer_offsets`.
    let lookup = |key: &str| -> Result<(i32, String, i32), ResponseError> {
        if req.key_type != KEY_TYPE_GROUP {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        if key.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        if let Err(e) = &offsets_topic {
            tracing::error!(error = %e, "cannot create __consumer_offsets");
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        let b = crate::protocol::offsets_topic::coordinator_node(&image, key)
            .and_then(|id| image.brokers.get(&id))
            .ok_or(ResponseError::CoordinatorNotAvailable)?;
        let (host, port) = b.endpoint(info.listener);
        Ok((b.node_id, host.to_owned(), i32::from(port)))
    };
    if version < 4 {
        return match lookup(req.key.as_str()) {
            Ok((id, host, port)) => {
                FindCoordinatorResponse::default().with_node_id(BrokerId(id)).with_host(str_bytes(host)).with_port(port)
            }
            Err(e) => {
                FindCoordinatorResponse::default().with_error_code(e.code()).with_node_id(BrokerId(-1)).with_port(-1)
            }
        };
    }
    let coordinators = req
        .coordinator_keys
        .iter()
        .map(|k| match lookup(k.as_str()) {
            Ok((id, host, port)) => Coordinator::default()
                .with_key(k.clone())
                .with_node_id(BrokerId(id))
                .with_host(str_bytes(host))
                .with_port(port),
            Err(e) => Coordinator::default()
                .with_key(k.clone())
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(e.code()),
        })
        .collect();
    FindCoordinatorResponse::default().with_coordinators(coordinators)
}

fn opt_str(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|v| v.to_string())
}

/// JoinGroup/SyncGroup before v7 carry the protocol name as a non-null string.
fn protocol_name(name: Option<String>, version: i16) -> Option<StrBytes> {
    match (name, version >= 7) {
        (Some(n), _) => Some(str_bytes(n)),
        (None, true) => None,
        (None, false) => Some(StrBytes::default()),
    }
}

fn join_response(o: JoinOutcome, version: i16) -> JoinGroupResponse {
    let error = o.error.map(group_error);
    JoinGroupResponse::default()
        .with_error_code(error.map_or(0, |e| e.code()))
        .with_generation_id(o.generation_id)
        .with_protocol_type(if version >= 7 { o.protocol_type.map(str_bytes) } else { None })
        .with_protocol_name(protocol_name(o.protocol_name, version))
        .with_leader(str_bytes(o.leader))
        .with_member_id(str_bytes(o.member_id))
        .with_skip_assignment(o.skip_assignment && version >= 9)
        .with_members(
            o.members
                .into_iter()
                .map(|m| {
                    JoinGroupResponseMember::default()
                        .with_member_id(str_bytes(m.member_id))
                        .with_group_instance_id(m.group_instance_id.map(str_bytes))
                        .with_metadata(m.metadata)
                })
                .collect(),
        )
}

pub async fn join_group(ctx: &Ctx, info: &RequestInfo, req: JoinGroupRequest, version: i16) -> JoinGroupResponse {
    let group_id = req.group_id.0.to_string();
    if group_id.is_empty() {
        return JoinGroupResponse::default()
            .with_error_code(ResponseError::InvalidGroupId.code())
            .with_generation_id(-1)
            .with_protocol_name(protocol_name(None, version));
    }
    // v0 had no rebalance timeout: it equals the session timeout.
    let rebalance_timeout = if version >= 1 { req.rebalance_timeout_ms } else { req.session_timeout_ms };
    let params = JoinParams {
        member_id: req.member_id.to_string(),
        group_instance_id: opt_str(&req.group_instance_id),
        client_id: info.client_id.clone(),
        client_host: info.client_host(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: rebalance_timeout,
        protocol_type: req.protocol_type.to_string(),
        protocols: req.protocols.iter().map(|p| (p.name.to_string(), p.metadata.clone())).collect(),
        require_known_member_id: version >= 4,
    };
    let now = ctx.now_ms();
    let rx = ctx.groups.join(&group_id, params, now).await;
    ctx.groups.tick_group(&group_id, now).await;
    let limit = Duration::from_millis(rebalance_timeout.clamp(0, 600_000) as u64 + 5_000);
    let fallback = JoinOutcome {
        error: Some(GroupError::RebalanceInProgress),
        generation_id: -1,
        protocol_type: None,
        protocol_name: None,
        leader: String::new(),
        member_id: req.member_id.to_string(),
        members: vec![],
        skip_assignment: false,
    };
    join_response(wait(rx, limit, fallback).await, version)
}

fn sync_response(o: SyncOutcome, version: i16) -> SyncGroupResponse {
    SyncGroupResponse::default()
        .with_error_code(o.error.map_or(0, |e| group_error(e).code()))
        .with_protocol_type(if version >= 5 { o.protocol_type.map(str_bytes) } else { None })
        .with_protocol_name(if version >= 5 { o.protocol_name.map(str_bytes) } else { None })
        .with_assignment(o.assignment)
}

pub async fn sync_group(ctx: &Ctx, req: SyncGroupRequest, version: i16) -> SyncGroupResponse {
    let assignments: Vec<(String, Bytes)> =
        req.assignments.iter().map(|a| (a.member_id.to_string(), a.assignment.clone())).collect();
    let params = SyncParams {
        member_id: req.member_id.as_str(),
        generation_id: req.generation_id,
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.as_str()),
        protocol_type: req.protocol_type.as_ref().map(|s| s.as_str()),
        protocol_name: req.protocol_name.as_ref().map(|s| s.as_str()),
        assignments,
    };
    let rx = ctx.groups.sync(req.group_id.0.as_str(), params, ctx.now_ms()).await;
    let fallback = SyncOutcome {
        error: Some(GroupError::RebalanceInProgress),
        protocol_type: None,
        protocol_name: None,
        assignment: Bytes::new(),
    };
    sync_response(wait(rx, Duration::from_secs(610), fallback).await, version)
}

pub async fn heartbeat(ctx: &Ctx, req: HeartbeatRequest, _version: i16) -> HeartbeatResponse {
    let r = ctx
        .groups
        .heartbeat(
            req.group_id.0.as_str(),
            req.member_id.as_str(),
            req.generation_id,
            req.group_instance_id.as_ref().map(|s| s.as_str()),
            ctx.now_ms(),
        )
        .await;
    let code = match r {
        // As Kafka's GroupCoordinatorService answers a heartbeat to a group whose partition
        // still loads: no error ("blindly respond"); the member keeps beating and learns of
        // a rebalance once the group is loaded.
        Ok(()) | Err(GroupError::CoordinatorLoadInProgress) => 0,
        Err(e) => group_error(e).code(),
    };
    HeartbeatResponse::default().with_error_code(code)
}

pub async fn leave_group(ctx: &Ctx, req: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        req.members.iter().map(|m| (m.member_id.to_string(), opt_str(&m.group_instance_id))).collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    match ctx.groups.leave(req.group_id.0.as_str(), &members, ctx.now_ms()).await {
        Err(e) => LeaveGroupResponse::default().with_error_code(group_error(e).code()),
        Ok(results) if version < 3 => {
            LeaveGroupResponse::default().with_error_code(results[0].err().map_or(0, |e| group_error(e).code()))
        }
        Ok(results) => LeaveGroupResponse::default().with_members(
            members
                .into_iter()
                .zip(results)
                .map(|((id, iid), r)| {
                    MemberResponse::default()
                        .with_member_id(str_bytes(id))
                        .with_group_instance_id(iid.map(str_bytes))
                        .with_error_code(r.err().map_or(0, |e| group_error(e).code()))
                })
                .collect(),
        ),
    }
}

pub fn describe_groups(ctx: &Ctx, req: DescribeGroupsRequest, version: i16) -> DescribeGroupsResponse {
    let groups = req
        .groups
        .into_iter()
        .map(|gid| {
            let ops = if req.include_authorized_operations { super::group_ops_all() } else { OPS_NOT_REQUESTED };
            match ctx.groups.describe(gid.0.as_str()) {
                Err(e) => DescribedGroup::default()
                    .with_error_code(group_error(e).code())
                    .with_group_id(gid)
                    .with_authorized_operations(ops),
                Ok(None) if version >= 6 => DescribedGroup::default()
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_error_message(Some(str_bytes(format!("Group {} not found.", gid.0.as_str()))))
                    .with_group_id(gid)
                    .with_group_state(str_bytes("Dead"))
                    .with_authorized_operations(ops),
                Ok(None) => DescribedGroup::default()
                    .with_group_id(gid)
                    .with_group_state(str_bytes("Dead"))
                    .with_authorized_operations(ops),
                Ok(Some(d)) => DescribedGroup::default()
                    .with_group_id(gid)
                    .with_group_state(str_bytes(d.state.name()))
                    .with_protocol_type(str_bytes(d.protocol_type))
                    .with_protocol_data(str_bytes(d.protocol_name))
                    .with_authorized_operations(ops)
                    .with_members(
                        d.members
                            .into_iter()
                            .map(|m| {
                                DescribedGroupMember::default()
                                    .with_member_id(str_bytes(m.member_id))
                                    .with_group_instance_id(m.group_instance_id.map(str_bytes))
                                    .with_client_id(str_bytes(m.client_id))
                                    .with_client_host(str_bytes(m.client_host))
                                    .with_member_metadata(m.metadata)
                                    .with_member_assignment(m.assignment)
                            })
                            .collect(),
                    ),
            }
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}

pub fn list_groups(ctx: &Ctx, req: ListGroupsRequest, version: i16) -> ListGroupsResponse {
    let states: Vec<String> = req.states_filter.iter().map(|s| s.to_ascii_lowercase()).collect();
    let types: Vec<String> = req.types_filter.iter().map(|s| s.to_ascii_lowercase()).collect();
    let listed = match ctx.groups.list() {
        Ok(l) => l,
        Err(e) => return ListGroupsResponse::default().with_error_code(group_error(e).code()),
    };
    let groups = listed
        .into_iter()
        .filter(|g| states.is_empty() || states.contains(&g.state.name().to_ascii_lowercase()))
        .filter(|_| types.is_empty() || types.contains(&"classic".to_owned()))
        .map(|g| {
            let mut l = ListedGroup::default()
                .with_group_id(GroupId(str_bytes(g.group_id)))
                .with_protocol_type(str_bytes(g.protocol_type));
            if version >= 4 {
                l = l.with_group_state(str_bytes(g.state.name()));
            }
            if version >= 5 {
                l = l.with_group_type(str_bytes("classic"));
            }
            l
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}

pub async fn delete_groups(ctx: &Ctx, req: DeleteGroupsRequest, _version: i16) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(req.groups_names.len());
    for gid in req.groups_names {
        let r = ctx.groups.delete_group(gid.0.as_str(), ctx.now_ms()).await;
        results.push(
            DeletableGroupResult::default()
                .with_group_id(gid)
                .with_error_code(r.err().map_or(0, |e| coordinator_error(e).code())),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
