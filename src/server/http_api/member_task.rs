//! The background task of one HTTP group member: join, then heartbeat every
//! `session_timeout / 10` (100 ms to 3 s); rejoin when the coordinator answers that the
//! group rebalances or no longer knows the generation; leave the group once no request of
//! the client came for `session_timeout`, so the others get its partitions at once.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::error::ApiError;
use super::members::HttpMember;
use crate::coordinator::group::{JoinOutcome, JoinParams, SyncOutcome, SyncParams};
use crate::coordinator::group_coordinator::wait;
use crate::coordinator::GroupError;
use crate::protocol::consumer_protocol::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription, range_assign,
};
use crate::protocol::errors::group_error;
use crate::protocol::Ctx;

pub const PROTOCOL_TYPE: &str = "consumer";
pub const PROTOCOL_NAME: &str = "range";
/// A join or sync parks until the whole group has rejoined: up to the largest rebalance
/// timeout of its members (librdkafka's and Java's default is 5 minutes).
const REBALANCE_WAIT: Duration = Duration::from_secs(610);

pub fn heartbeat_interval(session_timeout_ms: i32) -> Duration {
    Duration::from_millis((session_timeout_ms / 10).clamp(100, 3_000) as u64)
}

pub async fn run(ctx: &Ctx, member: &HttpMember, mut shutdown: broadcast::Receiver<()>) {
    let session = Duration::from_millis(member.session_timeout_ms as u64);
    let interval = heartbeat_interval(member.session_timeout_ms);
    let mut need_join = true;
    loop {
        if member.idle_since() + session <= Instant::now() {
            leave(ctx, member).await;
            let why = "no poll for the session timeout: the member left the group; join again";
            member.end(ApiError::new(StatusCode::NOT_FOUND, "member_expired", Some("consumer_id"), why));
            return;
        }
        if need_join {
            match join_cycle(ctx, member).await {
                Ok(()) => need_join = false,
                Err(e) if fatal(e) => {
                    let e = ApiError::kafka(group_error(e), None, format!("cannot join group {:?}: {e}", member.group));
                    member.end(e);
                    return;
                }
                Err(e) => tracing::debug!(group = %member.group, error = %e, "HTTP member will rejoin"),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.recv() => return,
        }
        if need_join {
            continue;
        }
        let generation = member.snapshot().generation_id;
        let beat = ctx.groups.heartbeat(&member.group, &member.member_id(), generation, None, ctx.now_ms()).await;
        match beat {
            Ok(()) => {}
            Err(GroupError::UnknownMemberId) => {
                member.set_member_id("");
                need_join = true;
            }
            // Not the coordinator right now: try again at the next beat.
            Err(GroupError::Write(_) | GroupError::CoordinatorNotAvailable) => {}
            Err(_) => need_join = true,
        }
    }
}

/// Errors a rejoin cannot fix.
fn fatal(e: GroupError) -> bool {
    matches!(
        e,
        GroupError::InconsistentGroupProtocol
            | GroupError::InvalidSessionTimeout
            | GroupError::GroupMaxSizeReached
            | GroupError::FencedInstanceId
    )
}

async fn leave(ctx: &Ctx, member: &HttpMember) {
    let id = member.member_id();
    if !id.is_empty() {
        let _ = ctx.groups.leave(&member.group, &[(id, None)], ctx.now_ms()).await;
    }
}

/// JoinGroup then SyncGroup, as the Java consumer does them, until a generation's
/// assignment is installed; a few quick retries when the group moves on meanwhile.
async fn join_cycle(ctx: &Ctx, member: &HttpMember) -> Result<(), GroupError> {
    let mut last = GroupError::RebalanceInProgress;
    for _ in 0..5 {
        let params = JoinParams {
            member_id: member.member_id(),
            group_instance_id: None,
            client_id: member.consumer_id.clone(),
            client_host: member.client_host.clone(),
            session_timeout_ms: member.session_timeout_ms,
            rebalance_timeout_ms: member.session_timeout_ms,
            protocol_type: PROTOCOL_TYPE.to_owned(),
            protocols: vec![(PROTOCOL_NAME.to_owned(), encode_subscription(&member.topics))],
            require_known_member_id: false,
        };
        let now = ctx.now_ms();
        let rx = ctx.groups.join(&member.group, params, now).await;
        ctx.groups.tick_group(&member.group, now).await;
        let joined = wait(rx, REBALANCE_WAIT, JoinOutcome::error(GroupError::RebalanceInProgress, "")).await;
        match joined.error {
            None => {}
            Some(GroupError::UnknownMemberId) => {
                member.set_member_id("");
                last = GroupError::UnknownMemberId;
                continue;
            }
            Some(GroupError::RebalanceInProgress | GroupError::IllegalGeneration) => continue,
            Some(e) => return Err(e),
        }
        member.set_member_id(&joined.member_id);
        let assignments = if joined.leader == joined.member_id { assign(ctx, &joined) } else { vec![] };
        let sync = SyncParams {
            member_id: &joined.member_id,
            generation_id: joined.generation_id,
            group_instance_id: None,
            protocol_type: Some(PROTOCOL_TYPE),
            protocol_name: joined.protocol_name.as_deref(),
            assignments,
        };
        let rx = ctx.groups.sync(&member.group, sync, ctx.now_ms()).await;
        let synced = wait(rx, REBALANCE_WAIT, SyncOutcome::error(GroupError::RebalanceInProgress)).await;
        match synced.error {
            None => {
                // An assignment this member cannot read is an empty one.
                let assignment = decode_assignment(synced.assignment).unwrap_or_default();
                member.install(joined.generation_id, assignment);
                return Ok(());
            }
            Some(GroupError::UnknownMemberId) => {
                member.set_member_id("");
                last = GroupError::UnknownMemberId;
            }
            Some(GroupError::RebalanceInProgress | GroupError::IllegalGeneration) => {}
            Some(e) => return Err(e),
        }
    }
    Err(last)
}

/// The leader's range assignment over every member's subscription.
fn assign(ctx: &Ctx, joined: &JoinOutcome) -> Vec<(String, bytes::Bytes)> {
    let subscriptions: BTreeMap<String, Vec<String>> = joined
        .members
        .iter()
        .map(|m| (m.member_id.clone(), decode_subscription(m.metadata.clone()).unwrap_or_default()))
        .collect();
    let image = ctx.image();
    range_assign(&subscriptions, |t| image.topic(t).map(|t| t.partitions.len() as i32))
        .into_iter()
        .map(|(m, a)| (m, encode_assignment(&a)))
        .collect()
}
