//! CreateTopics.

use std::collections::HashMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};

use super::configs::topic_config_entries;
use super::{client_may_not_create, str_bytes};
use crate::controller::NewTopic;
use crate::protocol::errors::controller_error;
use crate::protocol::Ctx;

pub async fn handle(ctx: &Ctx, req: CreateTopicsRequest, version: i16) -> CreateTopicsResponse {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for t in &req.topics {
        *counts.entry(t.name.0.to_string()).or_default() += 1;
    }
    let mut results = Vec::with_capacity(req.topics.len());
    let mut reported_duplicates = std::collections::HashSet::new();
    for t in req.topics {
        let name = t.name.0.to_string();
        if counts[&name] > 1 && !reported_duplicates.insert(name.clone()) {
            // Kafka answers a name given twice with one INVALID_REQUEST entry.
            continue;
        }
        let base = CreatableTopicResult::default()
            .with_name(t.name.clone())
            .with_num_partitions(-1)
            .with_replication_factor(-1);
        if counts[&name] > 1 {
            results.push(
                base.with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(str_bytes(format!("Duplicate topic name: {name}")))),
            );
            continue;
        }
        if let Some(why) = client_may_not_create(&name) {
            tracing::info!(topic = %name, "CreateTopics refused: an internal topic");
            results.push(
                base.with_error_code(ResponseError::InvalidRequest.code()).with_error_message(Some(str_bytes(why))),
            );
            continue;
        }
        let new_topic = NewTopic {
            name: name.clone(),
            num_partitions: t.num_partitions,
            replication_factor: t.replication_factor,
            assignments: t
                .assignments
                .iter()
                .map(|a| (a.partition_index, a.broker_ids.iter().map(|b| b.0).collect()))
                .collect(),
            configs: t.configs.iter().map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string()))).collect(),
        };
        let validate_only = req.validate_only;
        match ctx.controller_op(ctx.controller.create_topic(&new_topic, validate_only)).await {
            Ok(topic) => {
                let rf = topic.partitions.first().map_or(1, |p| p.replicas.len() as i16);
                let mut r = base
                    .with_topic_id(if req.validate_only { uuid::Uuid::nil() } else { topic.topic_id })
                    .with_num_partitions(topic.partitions.len() as i32)
                    .with_replication_factor(rf);
                if version >= 5 {
                    let entries = topic_config_entries(ctx, &topic)
                        .into_iter()
                        .map(|e| {
                            CreatableTopicConfigs::default()
                                .with_name(str_bytes(e.name))
                                .with_value(Some(str_bytes(e.value)))
                                .with_read_only(false)
                                .with_config_source(e.source)
                                .with_is_sensitive(false)
                        })
                        .collect();
                    r = r.with_configs(Some(entries));
                }
                results.push(r);
            }
            Err(e) => {
                tracing::info!(topic = %name, error = %e, "CreateTopics refused");
                results.push(
                    base.with_error_code(controller_error(&e).code())
                        .with_error_message(Some(str_bytes(e.to_string()))),
                );
            }
        }
    }
    CreateTopicsResponse::default().with_topics(results)
}
