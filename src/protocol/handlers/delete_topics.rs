//! DeleteTopics, by name (all versions) or by topic id (v6+).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};

use super::str_bytes;
use crate::protocol::errors::controller_error;
use crate::protocol::Ctx;

pub async fn handle(ctx: &Ctx, req: DeleteTopicsRequest, version: i16) -> DeleteTopicsResponse {
    let targets: Vec<(Option<TopicName>, uuid::Uuid)> = if version >= 6 {
        req.topics.into_iter().map(|t| (t.name, t.topic_id)).collect()
    } else {
        req.topic_names.into_iter().map(|n| (Some(n), uuid::Uuid::nil())).collect()
    };
    let mut responses = Vec::with_capacity(targets.len());
    for (name, id) in targets {
        let image = ctx.image();
        let topic = match &name {
            Some(n) => image.topic(n.0.as_str()),
            None => image.topic_by_id(&id),
        };
        let base = DeletableTopicResult::default().with_name(name.clone()).with_topic_id(id);
        let Some(topic) = topic else {
            let e = if name.is_none() { ResponseError::UnknownTopicId } else { ResponseError::UnknownTopicOrPartition };
            responses.push(base.with_error_code(e.code()));
            continue;
        };
        if topic.is_internal() {
            responses.push(
                base.with_error_code(ResponseError::TopicDeletionDisabled.code())
                    .with_error_message(Some(str_bytes("internal topics cannot be deleted"))),
            );
            continue;
        }
        let result = base.with_name(Some(TopicName(str_bytes(topic.name.clone())))).with_topic_id(topic.topic_id);
        let topic_id = topic.topic_id;
        match ctx.controller_op(ctx.controller.delete_topic(topic_id)).await {
            Ok(()) => {
                tracing::info!(topic = %topic.name, "deleted topic");
                // As Kafka's onPartitionsDeleted: the topic is gone either way; offsets a
                // failed write leaves behind are only logged.
                if let Err(e) = ctx.groups.delete_topic_offsets(&topic.name, ctx.now_ms()).await {
                    tracing::error!(topic = %topic.name, error = %e, "could not delete the topic's committed offsets");
                }
                responses.push(result);
            }
            Err(e) => responses.push(
                result.with_error_code(controller_error(&e).code()).with_error_message(Some(str_bytes(e.to_string()))),
            ),
        }
    }
    DeleteTopicsResponse::default().with_responses(responses)
}
