//! `POST /consumer-groups/{group}/join` and `POST /consumer-groups/{group}/commit`; the
//! poll is in [`super::poll`]. Membership itself is [`super::members`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::connect_info::ConnectInfo;
use axum::extract::{Path, State};
use axum::http::{Extensions, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use super::error::ApiError;
use super::json::{as_object, member, opt_int, parse_body, req_str, BodyResult};
use super::members::{HttpMember, JoinRequest, Snapshot};
use super::{json_response, ApiState};
use crate::coordinator::offsets::{MemberRef, OffsetCommit};
use crate::coordinator::CoordinatorError;
use crate::protocol::errors::coordinator_error;
use crate::protocol::offsets_topic;
use crate::protocol::Ctx;

/// A join answers once the first generation is assigned, or after this long (the member
/// goes on joining; a poll shows its assignment).
const JOIN_WAIT: Duration = Duration::from_secs(60);
const DEFAULT_SESSION_TIMEOUT_MS: i64 = 30_000;
const MAX_TOPICS: usize = 1000;

pub fn check_group(group: &str) -> Result<(), ApiError> {
    if group.is_empty() || group.len() > 255 {
        return Err(ApiError::bad("group", "must be 1 to 255 bytes long"));
    }
    Ok(())
}

/// A group is served by the broker leading its partition of `__consumer_offsets` (the
/// topic is created on first use, as FindCoordinator does); elsewhere 503, naming the
/// coordinator when there is one. The one place the API asks who coordinates `group`.
pub async fn check_coordinator(ctx: &Ctx, group: &str) -> Result<(), ApiError> {
    offsets_topic::ensure_topic_exists(ctx)
        .await
        .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "coordinator_not_available", None, e))?;
    offsets_topic::refresh_coordinator(ctx);
    let partition = ctx.groups.partition_for(group);
    if !ctx.groups.owned_partitions().iter().any(|(p, _)| *p == partition) {
        let coordinator = offsets_topic::coordinator_node(&ctx.image(), group)
            .map_or_else(|| "none is available now".to_owned(), |n| format!("it is broker {n}"));
        let msg = format!(
            "this broker is not the coordinator of group {group} (the leader of __consumer_offsets partition {partition}); {coordinator}"
        );
        return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "not_coordinator", None, msg));
    }
    Ok(())
}

/// `{topic, partitions}` per assigned topic.
pub fn assigned_json(s: &Snapshot) -> Value {
    Value::Array(s.assignment.iter().map(|(t, ps)| json!({"topic": t, "partitions": ps})).collect())
}

/// The member `consumer_id` names in `group`; 404 when there is none (never joined, or
/// left after its session timeout).
pub fn find_member(state: &ApiState, group: &str, consumer_id: &str) -> Result<Arc<HttpMember>, ApiError> {
    let m = state.members.get(group, consumer_id).ok_or_else(|| {
        let msg = "no such member: join first (a member leaves after its session timeout without a poll)";
        ApiError::new(StatusCode::NOT_FOUND, "unknown_member", Some("consumer_id"), msg)
    })?;
    if let Some(e) = m.snapshot().ended {
        return Err(e);
    }
    m.touch();
    Ok(m)
}

pub async fn join(
    State(state): State<Arc<ApiState>>,
    Path(group): Path<String>,
    extensions: Extensions,
    body: BodyResult,
) -> Result<Response, ApiError> {
    check_group(&group)?;
    let body = parse_body(&body?)?;
    let obj = as_object(&body, "body")?;
    for k in obj.keys() {
        if !["consumer_id", "topics", "session_timeout_ms"].contains(&k.as_str()) {
            return Err(ApiError::bad(k, "unknown field"));
        }
    }
    let consumer_id = req_str(obj, "consumer_id", "consumer_id", 255)?;
    let topics = match member(obj, "topics") {
        Some(Value::Array(a)) if !a.is_empty() && a.len() <= MAX_TOPICS => a
            .iter()
            .enumerate()
            .map(|(i, t)| match t.as_str() {
                Some(s) if !s.is_empty() && s.len() <= 249 => Ok(s.to_owned()),
                _ => Err(ApiError::bad(&format!("topics[{i}]"), "must be a topic name")),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(ApiError::bad("topics", format!("must be an array of 1 to {MAX_TOPICS} topic names"))),
    };
    let c = &state.ctx.config;
    let (min, max) = (i64::from(c.group_min_session_timeout_ms), i64::from(c.group_max_session_timeout_ms));
    let session = opt_int(obj, "session_timeout_ms", "session_timeout_ms", min, max)?
        .unwrap_or(DEFAULT_SESSION_TIMEOUT_MS.clamp(min, max));
    check_coordinator(&state.ctx, &group).await?;
    let peer = extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let req = JoinRequest {
        group,
        consumer_id,
        topics,
        session_timeout_ms: session as i32,
        client_host: peer.map_or_else(String::new, |ip| format!("/{ip}")),
    };
    let m = state.members.join(&state.ctx, req)?;
    let s = m.joined(JOIN_WAIT).await;
    if let Some(e) = s.ended {
        return Err(e);
    }
    let status = if s.generation_id >= 0 { StatusCode::OK } else { StatusCode::ACCEPTED };
    let body = json!({"member_id": s.member_id, "generation_id": s.generation_id,
        "assigned_partitions": assigned_json(&s), "session_timeout_ms": session});
    Ok(json_response(status, &body))
}

pub async fn commit(
    State(state): State<Arc<ApiState>>,
    Path(group): Path<String>,
    body: BodyResult,
) -> Result<Response, ApiError> {
    check_group(&group)?;
    let body = parse_body(&body?)?;
    let obj = as_object(&body, "body")?;
    let consumer_id = req_str(obj, "consumer_id", "consumer_id", 255)?;
    let items = match member(obj, "offsets") {
        Some(Value::Array(a)) if !a.is_empty() && a.len() <= 10_000 => a,
        _ => return Err(ApiError::bad("offsets", "must be an array of 1 to 10000 {topic, partition, offset}")),
    };
    let image = state.ctx.image();
    let mut offsets = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let f = |n: &str| format!("offsets[{i}].{n}");
        let o = as_object(item, &format!("offsets[{i}]"))?;
        let topic = req_str(o, "topic", &f("topic"), 249)?;
        let partition = opt_int(o, "partition", &f("partition"), 0, i64::from(i32::MAX))?
            .ok_or_else(|| ApiError::bad(&f("partition"), "is required"))? as i32;
        let offset = opt_int(o, "offset", &f("offset"), 0, i64::MAX)?
            .ok_or_else(|| ApiError::bad(&f("offset"), "is required"))?;
        let count = image.topic(&topic).map(|t| t.partitions.len() as i32);
        match count {
            None => {
                return Err(ApiError::new(StatusCode::NOT_FOUND, "unknown_topic", Some(&f("topic")), "no such topic"))
            }
            Some(n) if partition >= n => {
                return Err(ApiError::bad(&f("partition"), format!("the topic has {n} partitions")))
            }
            Some(_) => {}
        }
        let metadata = o.get("metadata").and_then(Value::as_str).unwrap_or_default().to_owned();
        offsets.push(OffsetCommit { topic, partition, offset, leader_epoch: -1, metadata });
    }
    let m = find_member(&state, &group, &consumer_id)?;
    check_coordinator(&state.ctx, &group).await?;
    let s = m.snapshot();
    // Only partitions the member owns: a commit of one that moved is a rebalance the
    // client has not seen yet.
    if let Some((i, o)) = offsets.iter().enumerate().find(|(_, o)| !owns(&s, &o.topic, o.partition)) {
        let msg = format!("partition {} of {:?} is not assigned to this member", o.partition, o.topic);
        let e = ApiError::new(StatusCode::CONFLICT, "rebalance", Some(&format!("offsets[{i}].partition")), msg);
        return Err(e.with_extra(json!({"generation_id": s.generation_id, "assigned_partitions": assigned_json(&s)})));
    }
    let who = MemberRef { member_id: &s.member_id, generation_id: s.generation_id, group_instance_id: None };
    let n = offsets.len();
    let results = state.ctx.groups.commit_offsets(&group, who, offsets, state.ctx.now_ms()).await;
    let first_error = match results {
        Err(e) => Some(e),
        Ok(rs) => rs.into_iter().find_map(Result::err),
    };
    if let Some(e) = first_error {
        return Err(commit_error(e, &s));
    }
    Ok(json_response(StatusCode::OK, &json!({"committed": n, "generation_id": s.generation_id})))
}

fn owns(s: &Snapshot, topic: &str, partition: i32) -> bool {
    s.assignment.get(topic).is_some_and(|ps| ps.contains(&partition))
}

/// A commit refused because the group moved on is a rebalance: the member's task is
/// rejoining; the client polls (to see its new partitions) and commits again.
fn commit_error(e: CoordinatorError, s: &Snapshot) -> ApiError {
    let err = ApiError::kafka(coordinator_error(e), None, e.to_string());
    if err.status == StatusCode::CONFLICT {
        let mut rebalance = ApiError::new(StatusCode::CONFLICT, "rebalance", Some("consumer_id"), err.message);
        rebalance.extra = Some(json!({"generation_id": s.generation_id, "assigned_partitions": assigned_json(s)}));
        return rebalance;
    }
    err
}
