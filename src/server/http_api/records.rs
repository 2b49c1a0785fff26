//! `GET /topics/{topic}/partitions/{n}/records?offset=&timestamp=&limit=`: a page of a
//! partition's records for browsing (the web console's record browser), from an offset
//! or from the first record at or after a timestamp (as ListOffsets finds it), up to the
//! high watermark. Read-only: no group, no position. The page is capped in records and
//! in bytes read, so no client number sizes work.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;

use super::error::ApiError;
use super::json::{parse_query, query_int};
use super::poll::decode_slices;
use super::topics::led_partition;
use super::{json_response, ApiState};
use crate::protocol::errors::partition_error;

const DEFAULT_LIMIT: i64 = 50;
const MAX_LIMIT: i64 = 500;
/// Bytes of stored batches read for one page (a page may end before `limit` records).
const MAX_READ_BYTES: usize = 1 << 20;

pub async fn handle(
    State(state): State<Arc<ApiState>>,
    Path((topic, n)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let q = parse_query(query.as_deref(), &["offset", "timestamp", "limit"])?;
    let offset = query_int(&q, "offset", 0, i64::MAX)?;
    let timestamp = query_int(&q, "timestamp", 0, i64::MAX)?;
    let limit = query_int(&q, "limit", 1, MAX_LIMIT)?.unwrap_or(DEFAULT_LIMIT) as usize;
    if offset.is_some() && timestamp.is_some() {
        return Err(ApiError::bad("timestamp", "give an offset or a timestamp, not both"));
    }
    let ctx = &state.ctx;
    let partition = led_partition(ctx, &topic, &n)?;
    let (earliest, latest) = (partition.log_start_offset(), partition.high_watermark());
    let start = match (offset, timestamp) {
        (Some(o), _) if o < earliest || o > latest => {
            return Err(ApiError::new(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "offset_out_of_range",
                Some("offset"),
                format!("the partition holds offsets {earliest} to {latest}"),
            ));
        }
        (Some(o), _) => o,
        // As ListOffsets: may decompress stored batches, so on the blocking pool.
        (None, Some(ts)) => {
            let p = partition.clone();
            match ctx.replicas.pool().run(move || p.offset_for_timestamp(ts)).await {
                Ok(Ok(Some((o, _)))) => o.clamp(earliest, latest),
                // No record at or after the timestamp: the page is empty, at the end.
                Ok(Ok(None)) => latest,
                Ok(Err(e)) => return Err(ApiError::kafka(partition_error(&e), Some("timestamp"), e.to_string())),
                Err(e) => {
                    return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", None, e.to_string()))
                }
            }
        }
        (None, None) => earliest,
    };
    let fetched = partition
        .fetch(start, MAX_READ_BYTES)
        .map_err(|e| ApiError::kafka(partition_error(&e), None, e.to_string()))?;
    let index = partition.key().index;
    let (mut records, _) = if fetched.records.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        decode_slices(ctx, vec![(topic.clone(), index, start, fetched.records)]).await?
    };
    records.truncate(limit);
    let next_offset = records.last().and_then(|r| r["offset"].as_i64()).map_or(start, |o| o + 1);
    let body = json!({"topic": topic, "partition": index, "earliest": earliest, "latest": latest,
        "start_offset": start, "next_offset": next_offset, "records": records});
    Ok(json_response(StatusCode::OK, &body))
}
