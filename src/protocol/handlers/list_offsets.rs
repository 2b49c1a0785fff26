//! ListOffsets: earliest, latest, max timestamp, or the first offset at a timestamp.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::leader_partition;
use crate::protocol::errors::partition_error;
use crate::protocol::Ctx;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

pub async fn handle(ctx: &Ctx, req: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
    let image = ctx.image();
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let topic = image.topic(t.name.0.as_str());
        let mut parts = Vec::with_capacity(t.partitions.len());
        for p in t.partitions {
            let base = ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_timestamp(-1)
                .with_offset(-1)
                .with_leader_epoch(-1);
            let partition = match leader_partition(ctx, topic, p.partition_index, p.current_leader_epoch) {
                Ok(part) => part,
                Err(e) => {
                    parts.push(base.with_error_code(e.code()));
                    continue;
                }
            };
            let epoch = partition.leader_epoch();
            // The leader epoch is only in v4+ responses, and -1 when nothing is found.
            let found = |b: ListOffsetsPartitionResponse| if version >= 4 { b.with_leader_epoch(epoch) } else { b };
            let resp = match p.timestamp {
                LATEST => found(base).with_offset(partition.high_watermark()),
                EARLIEST | EARLIEST_LOCAL => found(base).with_offset(partition.log_start_offset()),
                LATEST_TIERED => base.with_offset(-1),
                // Both may decompress stored batches: on the blocking pool.
                MAX_TIMESTAMP => match ctx.replicas.pool().run(move || partition.max_timestamp()).await {
                    Ok(Some((ts, off))) => found(base).with_timestamp(ts).with_offset(off),
                    Ok(None) => base,
                    Err(e) => base.with_error_code(partition_error(&e.into()).code()),
                },
                ts if ts >= 0 => match ctx.replicas.pool().run(move || partition.offset_for_timestamp(ts)).await {
                    Ok(Ok(Some((off, ts)))) => found(base).with_timestamp(ts).with_offset(off),
                    Ok(Ok(None)) => base,
                    Ok(Err(e)) => base.with_error_code(partition_error(&e).code()),
                    Err(e) => base.with_error_code(partition_error(&e.into()).code()),
                },
                _ => base.with_error_code(ResponseError::InvalidRequest.code()),
            };
            parts.push(resp);
        }
        topics.push(ListOffsetsTopicResponse::default().with_name(t.name).with_partitions(parts));
    }
    ListOffsetsResponse::default().with_topics(topics)
}
