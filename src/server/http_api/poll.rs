//! `GET /consumer-groups/{group}/poll?consumer_id=&topic=&partition=&offset=&max_wait_ms=&max_bytes=`:
//! records of the member's assigned partitions (or the one named), up to the high
//! watermark, waiting up to `max_wait_ms` (capped) in the purgatory for any to arrive,
//! as a Fetch does. Both limits are capped, so no client number sizes an allocation.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::batch::{decode_records, StoredRecord};
use super::error::ApiError;
use super::groups::{assigned_json, check_coordinator, check_group, find_member};
use super::json::{parse_query, put_bytes_fields, query_int};
use super::{json_response, ApiState};
use crate::protocol::errors::partition_error;
use crate::protocol::handlers::local_partition;
use crate::protocol::Ctx;
use crate::replication::{Partition, PartitionKey};

const MAX_WAIT_CAP_MS: i64 = 30_000;
const DEFAULT_WAIT_MS: i64 = 1_000;
const MAX_BYTES_CAP: i64 = 8 << 20;
const DEFAULT_MAX_BYTES: i64 = 1 << 20;

/// One partition to read, from `offset`.
struct Read {
    topic: String,
    index: i32,
    partition: Arc<Partition>,
    offset: i64,
}

pub async fn handle(
    State(state): State<Arc<ApiState>>,
    Path(group): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    check_group(&group)?;
    let q =
        parse_query(query.as_deref(), &["consumer_id", "topic", "partition", "offset", "max_wait_ms", "max_bytes"])?;
    let consumer_id =
        q.get("consumer_id").filter(|c| !c.is_empty()).ok_or_else(|| ApiError::bad("consumer_id", "is required"))?;
    let partition = query_int(&q, "partition", 0, i64::from(i32::MAX))?.map(|p| p as i32);
    let offset = query_int(&q, "offset", 0, i64::MAX)?;
    let wait_ms = query_int(&q, "max_wait_ms", 0, i64::MAX)?.unwrap_or(DEFAULT_WAIT_MS).min(MAX_WAIT_CAP_MS);
    let max_bytes = query_int(&q, "max_bytes", 1, i64::MAX)?.unwrap_or(DEFAULT_MAX_BYTES).min(MAX_BYTES_CAP) as usize;
    if offset.is_some() && partition.is_none() {
        return Err(ApiError::bad("offset", "needs a partition"));
    }
    let m = find_member(&state, &group, consumer_id)?;
    let ctx = &state.ctx;
    check_coordinator(ctx, &group).await?;
    let snap = m.snapshot();
    if let Some(t) = q.get("topic").filter(|t| !m.topics.contains(t)) {
        return Err(ApiError::bad("topic", format!("the member is not subscribed to {t:?}")));
    }
    let topic = match (q.get("topic"), partition) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(_)) if m.topics.len() == 1 => Some(m.topics[0].clone()),
        (None, Some(_)) => return Err(ApiError::bad("topic", "is required with partition when subscribed to several")),
        (None, None) => None,
    };
    let rebalance = |field: &str, msg: String| {
        ApiError::new(StatusCode::CONFLICT, "rebalance", Some(field), msg)
            .with_extra(json!({"generation_id": snap.generation_id, "assigned_partitions": assigned_json(&snap)}))
    };
    let mut selected: Vec<(String, i32)> = Vec::new();
    for (t, ps) in &snap.assignment {
        for p in ps {
            if topic.as_ref().is_none_or(|want| want == t) && partition.is_none_or(|want| want == *p) {
                selected.push((t.clone(), *p));
            }
        }
    }
    if let (Some(t), Some(p), true) = (&topic, partition, selected.is_empty()) {
        return Err(rebalance("partition", format!("partition {p} of {t:?} is not assigned to this member")));
    }
    let mut reads = Vec::with_capacity(selected.len());
    for (t, p) in selected {
        reads.push(start_of(ctx, &group, &m, t, p, offset)?);
    }
    let (records, next) = read(ctx, &reads, wait_ms, max_bytes).await?;
    m.advance(snap.generation_id, next);
    let body = json!({"generation_id": snap.generation_id, "assigned_partitions": assigned_json(&snap),
        "records": records});
    Ok(json_response(StatusCode::OK, &body))
}

/// Where a partition's read starts: the offset asked, else the member's position, else
/// the group's committed offset, else the log start; a position the log no longer (or
/// not yet) holds starts over at the log start, as `auto.offset.reset=earliest`.
fn start_of(
    ctx: &Ctx,
    group: &str,
    m: &super::members::HttpMember,
    topic: String,
    index: i32,
    asked: Option<i64>,
) -> Result<Read, ApiError> {
    let image = ctx.image();
    let t = image
        .topic(&topic)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "unknown_topic", Some("topic"), "no such topic"))?;
    let partition = local_partition(ctx, t, index)
        .map_err(|e| ApiError::kafka(e, Some("partition"), format!("partition {index}")))?;
    if !partition.is_leader() {
        return Err(ApiError::kafka(
            kafka_protocol::error::ResponseError::NotLeaderOrFollower,
            Some("partition"),
            "ask the leader",
        ));
    }
    let (start, hw) = (partition.log_start_offset(), partition.high_watermark());
    let offset = match asked {
        Some(o) if o < start || o > hw => {
            return Err(ApiError::new(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "offset_out_of_range",
                Some("offset"),
                format!("the partition holds offsets {start} to {hw}"),
            ));
        }
        Some(o) => o,
        None => m
            .position(&topic, index)
            .or_else(|| {
                let committed = ctx.groups.fetch_offsets(group, Some(&[(topic.clone(), index)]));
                // Err: this broker stopped coordinating the group; the earliest is a start.
                committed.ok()?.into_iter().find_map(|(_, _, c)| c.map(|c| c.offset))
            })
            .filter(|o| (start..=hw).contains(o))
            .unwrap_or(start),
    };
    Ok(Read { topic, index, partition, offset })
}

pub(super) type Positions = Vec<((String, i32), i64)>;

/// Reads every partition once; when none had records, waits for a high watermark to move
/// (or the deadline) and reads once more.
async fn read(ctx: &Ctx, reads: &[Read], wait_ms: i64, max_bytes: usize) -> Result<(Vec<Value>, Positions), ApiError> {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms as u64);
    loop {
        let mut slices = Vec::new();
        let mut remaining = max_bytes;
        let mut watched = Vec::new();
        for r in reads {
            if remaining == 0 {
                break;
            }
            let f = r
                .partition
                .fetch(r.offset, remaining)
                .map_err(|e| ApiError::kafka(partition_error(&e), Some("partition"), e.to_string()))?;
            watched.push((r.partition.key(), r.partition.clone(), f.high_watermark));
            if !f.records.is_empty() {
                remaining = remaining.saturating_sub(f.records.len());
                slices.push((r, f.records));
            }
        }
        if !slices.is_empty() || tokio::time::Instant::now() >= deadline || watched.is_empty() {
            if watched.is_empty() {
                // Nothing assigned: wait out the poll so a client does not spin.
                tokio::time::sleep_until(deadline).await;
            }
            return decode(ctx, slices).await;
        }
        let keys: Vec<PartitionKey> = watched.iter().map(|(k, _, _)| *k).collect();
        let moved = || watched.iter().any(|(_, p, hw)| p.high_watermark() != *hw || p.is_deleted() || !p.is_leader());
        ctx.replicas.purgatory().wait_until(&keys, deadline, moved).await;
    }
}

async fn decode(
    ctx: &Ctx,
    slices: Vec<(&Read, crate::storage::LogSlices)>,
) -> Result<(Vec<Value>, Positions), ApiError> {
    let jobs: Vec<ReadJob> = slices.into_iter().map(|(r, s)| (r.topic.clone(), r.index, r.offset, s)).collect();
    decode_slices(ctx, jobs).await
}

/// Stored bytes of (topic, partition) read from an offset.
pub(super) type ReadJob = (String, i32, i64, crate::storage::LogSlices);

/// The records of `jobs` as JSON, and the offset after each partition's last one.
/// Reading the files and decompressing is blocking work: on the blocking pool.
pub(super) async fn decode_slices(ctx: &Ctx, jobs: Vec<ReadJob>) -> Result<(Vec<Value>, Positions), ApiError> {
    let done = ctx.replicas.pool().run(move || -> Result<(Vec<Value>, Positions), String> {
        let mut records = Vec::new();
        let mut next = Vec::new();
        for (topic, index, from, s) in jobs {
            let bytes: Bytes = s.read().map_err(|e| e.to_string())?;
            let (recs, after) = decode_records(&bytes, from)?;
            records.extend(recs.iter().map(|r| record_json(&topic, index, r)));
            next.push(((topic, index), after));
        }
        Ok((records, next))
    });
    match done.await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) | Err(crate::replication::blocking_pool::PoolError::JobFailed(e)) => {
            Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "unreadable_records", None, e))
        }
    }
}

fn record_json(topic: &str, partition: i32, r: &StoredRecord) -> Value {
    let mut o = Map::new();
    o.insert("topic".into(), json!(topic));
    o.insert("partition".into(), json!(partition));
    o.insert("offset".into(), json!(r.offset));
    o.insert("timestamp".into(), json!(r.timestamp));
    let headers: Vec<(String, Option<&[u8]>)> = r.headers.iter().map(|(k, v)| (k.clone(), v.as_deref())).collect();
    put_bytes_fields(&mut o, r.key.as_deref(), r.value.as_deref(), &headers);
    Value::Object(o)
}
