//! Read-only views for the web console (and any other client):
//!
//! * `GET /cluster`: the cluster id, the active controller and the brokers.
//! * `GET /topics`: every topic with its partitions: leader, replicas and ISR from the
//!   metadata image, and the watermarks and size of the replicas this broker holds.
//! * `GET /consumer-groups`: the groups this broker coordinates.
//! * `GET /consumer-groups/{group}`: a group's members with their assignments, and per
//!   partition the committed offset, the high watermark and the lag.
//!
//! They read what DescribeCluster, Metadata, ListOffsets, DescribeGroups and
//! OffsetFetch read, through the same calls.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

use super::error::ApiError;
use super::groups::{check_coordinator, check_group};
use super::{json_response, ApiState};
use crate::controller::TopicImage;
use crate::protocol::consumer_protocol::decode_assignment;
use crate::protocol::errors::group_error;
use crate::protocol::Ctx;

pub async fn cluster(State(state): State<Arc<ApiState>>) -> Response {
    let ctx = &state.ctx;
    let image = ctx.image();
    let controller = ctx.controller.leader();
    let brokers: Vec<Value> = image
        .brokers
        .values()
        .map(|b| {
            json!({"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack, "fenced": b.fenced,
                "controller": controller == Some(b.node_id), "this_broker": b.node_id == ctx.config.node_id})
        })
        .collect();
    let body = json!({"cluster_id": image.cluster_id, "controller_id": controller, "node_id": ctx.config.node_id,
        "brokers": brokers});
    json_response(StatusCode::OK, &body)
}

pub async fn topics(State(state): State<Arc<ApiState>>) -> Response {
    let ctx = &state.ctx;
    let image = ctx.image();
    let topics: Vec<Value> = image.topics.values().map(|t| topic_json(ctx, t)).collect();
    json_response(StatusCode::OK, &json!({"topics": topics}))
}

/// Watermarks are the leader's (this broker's, when it leads the partition; `null`
/// otherwise, as a ListOffsets here would be refused); the size is of the local replica.
fn topic_json(ctx: &Ctx, t: &TopicImage) -> Value {
    let partitions: Vec<Value> = t
        .partitions
        .iter()
        .map(|p| {
            let local = ctx.replicas.partition(&t.topic_id, p.partition);
            let led = local.as_ref().filter(|l| l.is_leader());
            json!({"partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
                "replicas": p.replicas, "isr": p.isr,
                "earliest": led.map(|l| l.log_start_offset()), "latest": led.map(|l| l.high_watermark()),
                "size_bytes": local.map(|l| l.size_bytes())})
        })
        .collect();
    json!({"name": t.name, "topic_id": t.topic_id.to_string(), "internal": t.is_internal(),
        "configs": t.configs, "partitions": partitions})
}

pub async fn groups(State(state): State<Arc<ApiState>>) -> Result<Response, ApiError> {
    let listed =
        state.ctx.groups.list().map_err(|e| ApiError::kafka(group_error(e), None, "cannot list the groups now"))?;
    let groups: Vec<Value> = listed
        .into_iter()
        .map(|g| json!({"group_id": g.group_id, "protocol_type": g.protocol_type, "state": g.state.name()}))
        .collect();
    Ok(json_response(StatusCode::OK, &json!({"groups": groups})))
}

pub async fn group(State(state): State<Arc<ApiState>>, Path(group): Path<String>) -> Result<Response, ApiError> {
    check_group(&group)?;
    let ctx = &state.ctx;
    check_coordinator(ctx, &group).await?;
    let described = ctx
        .groups
        .describe(&group)
        .map_err(|e| ApiError::kafka(group_error(e), Some("group"), "cannot describe the group now"))?;
    let committed = ctx
        .groups
        .fetch_offsets(&group, None)
        .map_err(|e| ApiError::kafka(group_error(e), Some("group"), "cannot fetch its offsets now"))?;
    let Some(d) = described else {
        if committed.is_empty() {
            return Err(ApiError::new(StatusCode::NOT_FOUND, "group_id_not_found", Some("group"), "no such group"));
        }
        return Ok(json_response(StatusCode::OK, &group_json(ctx, &group, "Empty", "", "", Vec::new(), committed)));
    };
    let members: Vec<(Value, Vec<(String, i32)>)> = d
        .members
        .into_iter()
        .map(|m| {
            let assigned = decode_assignment(m.assignment).unwrap_or_default();
            let pairs: Vec<(String, i32)> =
                assigned.iter().flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p))).collect();
            let assignment: Vec<Value> = assigned.iter().map(|(t, ps)| json!({"topic": t, "partitions": ps})).collect();
            let v = json!({"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "client_id": m.client_id, "client_host": m.client_host, "assignment": assignment});
            (v, pairs)
        })
        .collect();
    let body = group_json(ctx, &group, d.state.name(), &d.protocol_type, &d.protocol_name, members, committed);
    Ok(json_response(StatusCode::OK, &body))
}

type Committed = Vec<(String, i32, Option<crate::coordinator::offsets_codec::CommittedOffset>)>;

/// Per partition a member holds or the group committed: the owner, the committed offset,
/// the high watermark (when this broker holds a replica of the partition: a follower's is
/// the leader's as last fetched, what `/metrics`' `consumer_lag_messages` uses too) and
/// the lag between them.
fn group_json(
    ctx: &Ctx,
    group: &str,
    state: &str,
    protocol_type: &str,
    protocol: &str,
    members: Vec<(Value, Vec<(String, i32)>)>,
    committed: Committed,
) -> Value {
    let mut rows: BTreeMap<(String, i32), (Option<String>, Option<i64>)> = BTreeMap::new();
    for (m, pairs) in &members {
        for tp in pairs {
            rows.entry(tp.clone()).or_default().0 = m["member_id"].as_str().map(str::to_owned);
        }
    }
    for (t, p, c) in committed {
        rows.entry((t, p)).or_default().1 = c.map(|c| c.offset);
    }
    let image = ctx.image();
    let offsets: Vec<Value> = rows
        .into_iter()
        .map(|((t, p), (owner, committed))| {
            let latest = image
                .topic(&t)
                .and_then(|ti| ctx.replicas.partition(&ti.topic_id, p))
                .map(|l| l.high_watermark());
            let lag = match (committed, latest) {
                (Some(c), Some(l)) => Some((l - c).max(0)),
                _ => None,
            };
            json!({"topic": t, "partition": p, "member_id": owner, "committed": committed, "latest": latest, "lag": lag})
        })
        .collect();
    let members: Vec<Value> = members.into_iter().map(|(m, _)| m).collect();
    json!({"group_id": group, "state": state, "protocol_type": protocol_type, "protocol": protocol,
        "members": members, "offsets": offsets})
}
