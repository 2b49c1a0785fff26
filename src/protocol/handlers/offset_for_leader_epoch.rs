//! OffsetForLeaderEpoch: where a leader epoch ends, so a client (or follower) can detect
//! log divergence after a leader change.

use kafka_protocol::messages::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::leader_partition;
use crate::protocol::Ctx;

pub fn handle(ctx: &Ctx, req: OffsetForLeaderEpochRequest, _version: i16) -> OffsetForLeaderEpochResponse {
    let image = ctx.image();
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = image.topic(t.topic.0.as_str());
            let parts = t
                .partitions
                .into_iter()
                .map(|p| {
                    let base =
                        EpochEndOffset::default().with_partition(p.partition).with_leader_epoch(-1).with_end_offset(-1);
                    let partition = match leader_partition(ctx, topic, p.partition, p.current_leader_epoch) {
                        Ok(part) => part,
                        Err(e) => return base.with_error_code(e.code()),
                    };
                    match partition.end_offset_for_epoch(p.leader_epoch) {
                        Some((epoch, end)) => base.with_leader_epoch(epoch).with_end_offset(end),
                        None => base,
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default().with_topic(t.topic).with_partitions(parts)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
