//! `POST /topics` (CreateTopics through the controller, as the Kafka handler does) and
//! `GET /topics/{topic}/partitions/{n}/watermark` (the log start offset and the high
//! watermark of a partition this broker leads).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

use super::error::ApiError;
use super::json::{as_object, member, opt_int, parse_body, req_str, BodyResult};
use super::{json_response, ApiState};
use crate::controller::{ControllerError, NewTopic};
use crate::protocol::errors::controller_error;
use crate::protocol::handlers::{client_may_not_create, leader_partition};
use crate::protocol::Ctx;
use crate::replication::Partition;

pub async fn create(State(state): State<Arc<ApiState>>, body: BodyResult) -> Result<Response, ApiError> {
    let body = parse_body(&body?)?;
    let obj = as_object(&body, "body")?;
    for k in obj.keys() {
        if !["name", "partitions", "replication_factor", "configs"].contains(&k.as_str()) {
            return Err(ApiError::bad(k, "unknown field"));
        }
    }
    let name = req_str(obj, "name", "name", 249)?;
    if let Some(why) = client_may_not_create(&name) {
        return Err(ApiError::bad("name", &why));
    }
    let partitions = opt_int(obj, "partitions", "partitions", 1, 100_000)?.unwrap_or(-1) as i32;
    let replication_factor = opt_int(obj, "replication_factor", "replication_factor", 1, 100)?.unwrap_or(-1) as i16;
    let mut configs = Vec::new();
    match member(obj, "configs") {
        None => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let v = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    _ => return Err(ApiError::bad(&format!("configs.{k}"), "must be a string, number or boolean")),
                };
                configs.push((k.clone(), Some(v)));
            }
        }
        Some(_) => return Err(ApiError::bad("configs", "must be an object of config name to value")),
    }
    let names: Vec<String> = configs.iter().map(|(k, _)| k.clone()).collect();
    let req =
        NewTopic { name: name.clone(), num_partitions: partitions, replication_factor, assignments: vec![], configs };
    match state.ctx.controller_op(state.ctx.controller.create_topic(&req, false)).await {
        Ok(t) => {
            let rf = t.partitions.first().map_or(0, |p| p.replicas.len());
            let body = json!({"name": t.name, "topic_id": t.topic_id.to_string(), "partitions": t.partitions.len(),
                "replication_factor": rf});
            Ok(json_response(StatusCode::CREATED, &body))
        }
        Err(e) => {
            let field = match &e {
                ControllerError::TopicAlreadyExists(_) | ControllerError::InvalidTopic(_) => "name".to_owned(),
                ControllerError::InvalidPartitions(_) => "partitions".to_owned(),
                ControllerError::InvalidReplicationFactor(_) | ControllerError::InvalidReplicaAssignment(_) => {
                    "replication_factor".to_owned()
                }
                // The config the controller's message names, else the only one given.
                ControllerError::InvalidConfig(msg) => names
                    .iter()
                    .find(|n| msg.contains(n.as_str()))
                    .or(names.first())
                    .map_or("configs".to_owned(), |n| format!("configs.{n}")),
                _ => String::new(),
            };
            let field = (!field.is_empty()).then_some(field.as_str());
            Err(ApiError::kafka(controller_error(&e), field, e.to_string()))
        }
    }
}

pub async fn watermark(
    State(state): State<Arc<ApiState>>,
    Path((topic, n)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let partition = led_partition(&state.ctx, &topic, &n)?;
    let body = json!({"earliest": partition.log_start_offset(), "latest": partition.high_watermark()});
    Ok(json_response(StatusCode::OK, &body))
}

/// Partition `n` (as the path gives it) of `topic`, which this broker must lead: 404 for
/// an unknown topic or partition, 503 when another broker leads it.
pub fn led_partition(ctx: &Ctx, topic: &str, n: &str) -> Result<Arc<Partition>, ApiError> {
    let index: i32 = n.parse().map_err(|_| ApiError::bad("partition", format!("{n:?} is not a partition number")))?;
    let image = ctx.image();
    let t = image.topic(topic);
    if t.is_none() {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "unknown_topic_or_partition", Some("topic"), "no such topic"));
    }
    leader_partition(ctx, t, index, -1).map_err(|e| {
        let field = if matches!(e, kafka_protocol::error::ResponseError::UnknownTopicOrPartition) {
            "partition"
        } else {
            "topic"
        };
        ApiError::kafka(e, Some(field), format!("partition {index} of {topic:?}"))
    })
}
