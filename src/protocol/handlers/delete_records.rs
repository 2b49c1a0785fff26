//! DeleteRecords: advance a partition's log start offset.

use kafka_protocol::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use super::leader_partition;
use crate::protocol::errors::partition_error;
use crate::protocol::Ctx;

pub fn handle(ctx: &Ctx, req: DeleteRecordsRequest, _version: i16) -> DeleteRecordsResponse {
    let image = ctx.image();
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = image.topic(t.name.0.as_str());
            let parts = t
                .partitions
                .into_iter()
                .map(|p| {
                    let base = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1);
                    let partition = match leader_partition(ctx, topic, p.partition_index, -1) {
                        Ok(part) => part,
                        Err(e) => return base.with_error_code(e.code()),
                    };
                    match partition.delete_records_before(p.offset) {
                        Ok(low) => base.with_low_watermark(low),
                        Err(e) => base.with_error_code(partition_error(&e).code()),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default().with_name(t.name).with_partitions(parts)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}
