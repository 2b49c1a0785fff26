//! DescribeQuorum: the controller quorum as its leader sees it (`kafka-metadata-quorum
//! describe --status / --replication`). A broker asks the quorum leader, as Kafka's
//! brokers forward this request to the active controller.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_quorum_response::{Listener, Node, PartitionData, ReplicaState, TopicData};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, TopicName};

use super::str_bytes;
use crate::controller::QuorumReplica;
use crate::protocol::errors::controller_error;
use crate::protocol::Ctx;

/// The metadata log's name, as Kafka calls it; it has one partition.
pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// Kafka's default name for the controller listener.
const CONTROLLER_LISTENER: &str = "CONTROLLER";

pub async fn handle(ctx: &Ctx, req: DescribeQuorumRequest, version: i16) -> DescribeQuorumResponse {
    let asks_metadata_log = req.topics.len() == 1
        && req.topics[0].topic_name.0.as_str() == METADATA_TOPIC
        && req.topics[0].partitions.len() == 1
        && req.topics[0].partitions[0].partition_index == 0;
    if !asks_metadata_log {
        // Kafka answers each requested partition with UNKNOWN_TOPIC_OR_PARTITION.
        let topics = req
            .topics
            .into_iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        PartitionData::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                    })
                    .collect();
                TopicData::default().with_topic_name(t.topic_name).with_partitions(partitions)
            })
            .collect();
        return DescribeQuorumResponse::default().with_topics(topics);
    }
    let quorum = match ctx.controller_op(ctx.controller.describe_quorum()).await {
        Ok(q) => q,
        Err(e) => {
            let code = controller_error(&e);
            return DescribeQuorumResponse::default()
                .with_error_code(code.code())
                .with_error_message(Some(str_bytes(e.to_string())));
        }
    };
    let partition = PartitionData::default()
        .with_leader_id(BrokerId(quorum.leader_id))
        .with_leader_epoch(quorum.leader_epoch)
        .with_high_watermark(quorum.high_watermark)
        .with_current_voters(quorum.voters.iter().map(|r| replica_state(r, version)).collect())
        .with_observers(quorum.observers.iter().map(|r| replica_state(r, version)).collect());
    if version < 2 {
        // Directory ids and endpoints came with v2 (KIP-853); v0-1 cannot carry them.
        return DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
            .with_topic_name(TopicName(str_bytes(METADATA_TOPIC)))
            .with_partitions(vec![partition])]);
    }
    let nodes = quorum
        .endpoints
        .iter()
        .filter_map(|(id, addr)| {
            let (host, port) = addr.rsplit_once(':')?;
            let listener = Listener::default()
                .with_name(str_bytes(CONTROLLER_LISTENER))
                .with_host(str_bytes(host.trim_start_matches('[').trim_end_matches(']')))
                .with_port(port.parse().ok()?);
            Some(Node::default().with_node_id(BrokerId(*id)).with_listeners(vec![listener]))
        })
        .collect();
    DescribeQuorumResponse::default()
        .with_topics(vec![TopicData::default()
            .with_topic_name(TopicName(str_bytes(METADATA_TOPIC)))
            .with_partitions(vec![partition])])
        .with_nodes(nodes)
}

fn replica_state(r: &QuorumReplica, version: i16) -> ReplicaState {
    let state = ReplicaState::default()
        .with_replica_id(BrokerId(r.replica_id))
        .with_log_end_offset(r.log_end_offset)
        .with_last_fetch_timestamp(r.last_fetch_ms)
        .with_last_caught_up_timestamp(r.last_caught_up_ms);
    match version {
        2.. => state.with_replica_directory_id(r.directory_id.unwrap_or_default()),
        _ => state,
    }
}
