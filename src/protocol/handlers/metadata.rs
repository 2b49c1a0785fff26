//! Metadata: brokers, controller, topics and their partitions.
//!
//! Auto-creation answers as Kafka 4 does: the request that creates a topic gets
//! UNKNOWN_TOPIC_OR_PARTITION with no partitions (Kafka creates in the background), and the
//! client's next Metadata shows it. runnel creates it before answering, so that next
//! request always finds every partition with its leader.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};

use super::{cluster_ops_all, str_bytes, topic_ops_all, topic_or_auto_create, OPS_NOT_REQUESTED};
use crate::controller::TopicImage;
use crate::protocol::{Ctx, RequestInfo};

pub async fn handle(ctx: &Ctx, info: &RequestInfo, req: MetadataRequest, version: i16) -> MetadataResponse {
    let include_ops = req.include_topic_authorized_operations;
    let mut topics = Vec::new();
    let requested = match req.topics {
        // v0 uses an empty list for "all topics"; v1+ uses null.
        Some(t) if !(version == 0 && t.is_empty()) => Some(t),
        _ => None,
    };
    match requested {
        None => {
            let image = ctx.image();
            for t in image.topics.values() {
                topics.push(describe_topic(t, include_ops));
            }
        }
        Some(list) => {
            // Auto-creation through Metadata exists up to v3 always, from v4 on request.
            let allow = version < 4 || req.allow_auto_topic_creation;
            for rt in list {
                let entry = match rt.name {
                    Some(name) => match ctx.image().topic(name.0.as_str()).cloned() {
                        Some(t) => describe_topic(&t, include_ops),
                        None => {
                            let created = topic_or_auto_create(ctx, name.0.as_str(), allow).await;
                            let error = created.err().unwrap_or(ResponseError::UnknownTopicOrPartition);
                            error_topic(Some(name), rt.topic_id, error)
                        }
                    },
                    None => match ctx.image().topic_by_id(&rt.topic_id) {
                        Some(t) => describe_topic(t, include_ops),
                        None => error_topic(None, rt.topic_id, ResponseError::UnknownTopicId),
                    },
                };
                topics.push(entry);
            }
        }
    }
    let image = ctx.image();
    // Fenced brokers are out of the cluster: clients are not pointed at them.
    let brokers = image
        .brokers
        .values()
        .filter(|b| !b.fenced)
        .map(|b| {
            let (host, port) = b.endpoint(info.listener);
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.node_id))
                .with_host(str_bytes(host.to_owned()))
                .with_port(i32::from(port))
                .with_rack(b.rack.clone().map(str_bytes))
        })
        .collect();
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(str_bytes(image.cluster_id.clone())))
        .with_controller_id(BrokerId(ctx.controller.node_id()))
        .with_topics(topics)
        .with_cluster_authorized_operations(if req.include_cluster_authorized_operations {
            cluster_ops_all()
        } else {
            OPS_NOT_REQUESTED
        })
}

fn error_topic(name: Option<TopicName>, id: uuid::Uuid, e: ResponseError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(e.code())
        .with_name(name)
        .with_topic_id(id)
        .with_topic_authorized_operations(OPS_NOT_REQUESTED)
}

fn describe_topic(t: &TopicImage, include_ops: bool) -> MetadataResponseTopic {
    let partitions = t
        .partitions
        .iter()
        .map(|p| {
            // No leader (every ISR member is down): clients wait and ask again.
            let error = if p.leader < 0 { ResponseError::LeaderNotAvailable.code() } else { 0 };
            MetadataResponsePartition::default()
                .with_error_code(error)
                .with_partition_index(p.partition)
                .with_leader_id(BrokerId(p.leader))
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(p.replicas.iter().map(|r| BrokerId(*r)).collect())
                .with_isr_nodes(p.isr.iter().map(|r| BrokerId(*r)).collect())
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(str_bytes(t.name.clone()))))
        .with_topic_id(t.topic_id)
        .with_is_internal(t.is_internal())
        .with_partitions(partitions)
        .with_topic_authorized_operations(if include_ops { topic_ops_all() } else { OPS_NOT_REQUESTED })
}
