//! CreatePartitions: grow a topic.

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use super::str_bytes;
use crate::protocol::errors::controller_error;
use crate::protocol::Ctx;

pub async fn handle(ctx: &Ctx, req: CreatePartitionsRequest, _version: i16) -> CreatePartitionsResponse {
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let base = CreatePartitionsTopicResult::default().with_name(t.name.clone());
        let (name, count, validate_only) = (t.name.0.to_string(), t.count, req.validate_only);
        let assignments =
            t.assignments.map(|a| a.into_iter().map(|a| a.broker_ids.into_iter().map(|b| b.0).collect()).collect());
        match ctx.controller_op(ctx.controller.create_partitions(&name, count, assignments, validate_only)).await {
            Ok(()) => {
                results.push(base);
            }
            Err(e) => results.push(
                base.with_error_code(controller_error(&e).code()).with_error_message(Some(str_bytes(e.to_string()))),
            ),
        }
    }
    CreatePartitionsResponse::default().with_results(results)
}
