//! OffsetForLeaderEpoch: where a leader epoch ends, so a client (or follower) can detect
//! log divergence after a leader change.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::local_partition;
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
                    let partition = match topic
                        .ok_or(ResponseError::UnknownTopicOrPartition)
                        .and_then(|t| local_partition(ctx, t, p.partition))
                    {
                        Ok(part) => part,
                        Err(e) => return base.with_error_code(e.code()),
                    };
                    let current = partition.leader_epoch();
                    if p.current_leader_epoch >= 0 && p.current_leader_epoch != current {
                        let e = if p.current_leader_epoch > current {
                            ResponseError::UnknownLeaderEpoch
                        } else {
                            ResponseError::FencedLeaderEpoch
                        };
                        return base.with_error_code(e.code());
                    }
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
