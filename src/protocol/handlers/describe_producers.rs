//! DescribeProducers: the idempotent producers a partition's replica keeps state for
//! (`kafka-transactions describe-producers`).
//!
//! As Kafka's `ReplicaManager.activeProducerState`: any local replica answers, leader or
//! follower; a partition of a known topic with no replica here gets
//! NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION. There are no
//! transactions yet, so `coordinator_epoch` and `current_txn_start_offset` are -1.

use kafka_protocol::messages::describe_producers_response::{PartitionResponse, ProducerState, TopicResponse};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};

use super::local_partition;
use crate::protocol::Ctx;

pub fn handle(ctx: &Ctx, req: DescribeProducersRequest, _version: i16) -> DescribeProducersResponse {
    let image = ctx.image();
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let topic = image.topic(t.name.0.as_str());
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&index| {
                    let base = PartitionResponse::default().with_partition_index(index);
                    let partition = match topic {
                        Some(topic) => local_partition(ctx, topic, index),
                        None => Err(kafka_protocol::error::ResponseError::UnknownTopicOrPartition),
                    };
                    match partition {
                        Ok(p) => base.with_active_producers(p.active_producers().iter().map(producer_state).collect()),
                        Err(e) => base.with_error_code(e.code()),
                    }
                })
                .collect();
            TopicResponse::default().with_name(t.name).with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

fn producer_state(p: &crate::replication::ActiveProducer) -> ProducerState {
    ProducerState::default()
        .with_producer_id(ProducerId(p.producer_id))
        .with_producer_epoch(i32::from(p.producer_epoch))
        .with_last_sequence(p.last_sequence)
        .with_last_timestamp(p.last_timestamp)
        .with_coordinator_epoch(-1)
        .with_current_txn_start_offset(-1)
}
