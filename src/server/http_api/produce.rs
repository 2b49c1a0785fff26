//! `POST /topics/{topic}/messages`: one record (`{key, value, headers, partition,
//! timestamp, encoding}`) or a batch (a JSON array of them, or `{"records": [...]}`),
//! appended through the replica manager as a Kafka Produce is: one batch per partition,
//! all appended first, then each waited for to meet `acks` (`0`, `1` default, `all`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use kafka_protocol::error::ResponseError;
use serde_json::{json, Map, Value};
use tokio::time::Instant;

use super::batch::{encode_batch, NewRecord};
use super::error::ApiError;
use super::json::{parse_query, BodyResult};
use super::partitioner::partition_for_key;
use super::produce_body::{self, ProduceBody};
use super::{json_response, ApiState};
use crate::controller::TopicImage;
use crate::protocol::errors::partition_error;
use crate::protocol::handlers::{current_leader, local_partition, topic_or_auto_create};
use crate::protocol::Ctx;
use crate::replication::Acks;

/// What became of one record: its partition, and its offset and timestamp or the error.
type Produced = (i32, Result<(i64, i64), ApiError>);

/// How long an acks=all write may wait for the in-sync replicas.
const ACKS_ALL_TIMEOUT: Duration = Duration::from_secs(30);

pub async fn handle(
    State(state): State<Arc<ApiState>>,
    Path(topic): Path<String>,
    RawQuery(query): RawQuery,
    body: BodyResult,
) -> Result<Response, ApiError> {
    let q = parse_query(query.as_deref(), &["acks"])?;
    let acks = match q.get("acks").map(String::as_str) {
        None | Some("1") => Acks::Leader,
        Some("0") => Acks::None,
        Some("all" | "-1") => Acks::All,
        Some(other) => return Err(ApiError::bad("acks", format!("{other:?}: must be 0, 1 or all"))),
    };
    let ctx = &state.ctx;
    let started = std::time::Instant::now();
    let now = ctx.now_ms();
    let ProduceBody { records, single } = produce_body::parse(&body?, now)?;
    let topic = topic_or_auto_create(ctx, &topic, true).await.map_err(|e| {
        let why = match e {
            ResponseError::UnknownTopicOrPartition => "no such topic, and auto.create.topics.enable is off".to_owned(),
            e => e.to_string(),
        };
        ApiError::kafka(e, Some("topic"), format!("topic {topic:?}: {why}"))
    })?;
    // The coordinators' topics hold their own records: a client's would corrupt them.
    if topic.is_internal() {
        return Err(ApiError::bad("topic", format!("{:?} is an internal topic", topic.name)));
    }
    let partitions = topic.partitions.len() as i32;
    // Keyless records of this request all go to one partition, chosen in turn.
    let keyless = state.keyless.next(partitions);
    let mut by_partition: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    for (i, (r, explicit)) in records.iter().enumerate() {
        let p = match (explicit, &r.key) {
            (Some(p), _) if *p >= partitions => {
                let f = if single { "partition".to_owned() } else { format!("records[{i}].partition") };
                return Err(ApiError::bad(&f, format!("the topic has {partitions} partitions")));
            }
            (Some(p), _) => *p,
            (None, Some(k)) => partition_for_key(k, partitions),
            (None, None) => keyless,
        };
        by_partition.entry(p).or_default().push(i);
    }
    // Per record: (partition, Ok((offset, timestamp)) or the error).
    let mut results: Vec<Option<Produced>> = vec![None; records.len()];
    let mut pending = Vec::new();
    for (p, indexes) in by_partition {
        let batch: Vec<NewRecord> = indexes.iter().map(|i| records[*i].0.clone()).collect();
        let appended = match local_partition(ctx, &topic, p) {
            Ok(partition) => ctx
                .replicas
                .append_local(&partition, encode_batch(&batch), acks, now)
                .await
                .map(|a| (partition, a))
                .map_err(|e| ApiError::kafka(partition_error(&e), None, e.to_string())),
            Err(e) => Err(ApiError::kafka(e, Some("partition"), format!("partition {p}"))),
        };
        let appended = appended.map_err(|e| name_the_leader(ctx, &topic, p, e));
        match appended {
            Ok(a) => pending.push((p, indexes, a)),
            Err(e) => indexes.iter().for_each(|i| results[*i] = Some((p, Err(e.clone())))),
        }
    }
    let deadline = Instant::now() + ACKS_ALL_TIMEOUT;
    for (p, indexes, (partition, appended)) in pending {
        let done = ctx
            .replicas
            .complete(&partition, appended, acks, deadline)
            .await
            .map_err(|e| ApiError::kafka(partition_error(&e), None, e.to_string()));
        for (n, i) in indexes.iter().enumerate() {
            let r = done.as_ref().map_err(Clone::clone).map(|a| {
                let ts = if a.log_append_time >= 0 { a.log_append_time } else { records[*i].0.timestamp };
                (a.base_offset + n as i64, ts)
            });
            results[*i] = Some((p, r));
        }
    }
    // Counted with the Kafka protocol's produces: one latency per request that reached
    // the log, by its acks.
    let acks_code = match acks {
        Acks::None => 0,
        Acks::Leader => 1,
        Acks::All => -1,
    };
    ctx.requests.observe_produce(acks_code, started.elapsed());
    respond(results.into_iter().flatten().collect(), single, acks)
}

/// A produce sent to a broker that does not lead the partition: the answer names the
/// leader (its id and Kafka address, as KIP-951 names it to Kafka clients), so a client
/// of the HTTP API can send it there.
fn name_the_leader(ctx: &Ctx, topic: &TopicImage, partition: i32, e: ApiError) -> ApiError {
    if e.error != "not_leader_or_follower" {
        return e;
    }
    let leader = current_leader(ctx, Some(topic), partition);
    let Some(b) = leader.endpoint else {
        return ApiError { message: format!("partition {partition} has no leader now; retry later"), ..e };
    };
    let message =
        format!("this broker does not lead partition {partition}; broker {} at {}:{} does", b.node_id, b.host, b.port);
    ApiError { message, ..e }.with_extra(json!({"leader": {"node_id": b.node_id, "host": b.host, "port": b.port}}))
}

fn respond(results: Vec<Produced>, single: bool, acks: Acks) -> Result<Response, ApiError> {
    let entry = |(p, r): &Produced| -> Value {
        match r {
            Ok(_) if acks == Acks::None => json!({"partition": p}),
            Ok((offset, ts)) => json!({"partition": p, "offset": offset, "timestamp": ts}),
            Err(e) => {
                let mut body = e.body();
                if let Some(o) = body.as_object_mut() {
                    o.insert("partition".into(), json!(p));
                }
                body
            }
        }
    };
    let first_error = results.iter().find_map(|(_, r)| r.as_ref().err()).cloned();
    if single {
        return match first_error {
            Some(e) => Err(e),
            None => Ok(json_response(StatusCode::OK, &entry(&results[0]))),
        };
    }
    // A partly failed batch answers with the first error's status; each record says
    // what happened to it.
    let status = first_error.map_or(StatusCode::OK, |e| e.status);
    let mut body = Map::new();
    body.insert("offsets".into(), Value::Array(results.iter().map(entry).collect()));
    Ok(json_response(status, &Value::Object(body)))
}
