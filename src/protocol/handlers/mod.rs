//! One module per Kafka API: `handle(ctx, request, version) -> response`. Handlers never
//! touch the socket.

pub mod alter_replica_log_dirs;
pub mod api_versions;
pub mod configs;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod elect_leaders;
pub mod fetch;
pub mod fetch_session_flow;
pub mod group_offsets;
pub mod groups;
pub mod init_producer_id;
pub mod list_config_resources;
pub mod list_offsets;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod raft_voters;
pub mod reassignments;
pub mod replica_fetch;
pub mod telemetry;
pub mod unregister_broker;
pub mod update_features;

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::protocol::StrBytes;

use super::errors::controller_error;
use super::Ctx;
use crate::controller::{ControllerError, NewTopic, TopicImage};
use crate::replication::{Partition, Role};

pub fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Why a client may not create topic `name` (CreateTopics, auto-creation, the HTTP API),
/// if it may not. `__cluster_metadata` is the controller's log, refused with Kafka's
/// code and message. `__consumer_offsets` is the broker's: it creates it itself, on the
/// first group request, compacted and with `offsets.topic.num.partitions` partitions.
/// Created by a client first (Kafka allows it) it could be a one-partition topic with
/// `cleanup.policy=delete`, which would put every group on one coordinator and let
/// retention delete committed offsets.
pub fn client_may_not_create(name: &str) -> Option<String> {
    match name {
        "__cluster_metadata" | crate::protocol::offsets_topic::OFFSETS_TOPIC => {
            Some(format!("Creation of internal topic {name} is prohibited."))
        }
        _ => None,
    }
}

/// Look a topic up; when it is missing and auto-creation is allowed, create it with the
/// broker defaults (synchronously: the caller can use it at once). The broker's internal
/// topics are not created this way: `__consumer_offsets` is created as the coordinator
/// needs it, `__cluster_metadata` never.
pub async fn topic_or_auto_create(
    ctx: &Ctx,
    name: &str,
    allow_auto_create: bool,
) -> Result<Arc<TopicImage>, ResponseError> {
    if let Some(t) = ctx.image().topic(name) {
        return Ok(t.clone());
    }
    if !(allow_auto_create && ctx.config.auto_create_topics) || client_may_not_create(name).is_some() {
        return Err(ResponseError::UnknownTopicOrPartition);
    }
    let req = NewTopic {
        name: name.to_owned(),
        num_partitions: ctx.config.num_partitions,
        replication_factor: -1,
        assignments: vec![],
        configs: vec![],
    };
    match ctx.controller_op(ctx.controller.create_topic(&req, false)).await {
        Ok(t) => {
            tracing::info!(topic = name, partitions = t.partitions.len(), "auto-created topic");
            Ok(t)
        }
        // Lost a race with another creator: fine.
        Err(ControllerError::TopicAlreadyExists(_)) => {
            ctx.image().topic(name).cloned().ok_or(ResponseError::UnknownTopicOrPartition)
        }
        Err(e) => Err(controller_error(&e)),
    }
}

/// The local partition `index` of `topic`; NOT_LEADER_OR_FOLLOWER when the partition
/// exists but this broker holds no replica of it, else UNKNOWN_TOPIC_OR_PARTITION.
pub fn local_partition(ctx: &Ctx, topic: &TopicImage, index: i32) -> Result<Arc<Partition>, ResponseError> {
    ctx.replicas.partition(&topic.topic_id, index).ok_or_else(|| {
        let exists = usize::try_from(index).is_ok_and(|i| i < topic.partitions.len());
        if exists {
            ResponseError::NotLeaderOrFollower
        } else {
            ResponseError::UnknownTopicOrPartition
        }
    })
}

/// Kafka's check of a request's `current_leader_epoch` (-1: none given): an epoch older
/// than the leader's gets FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH.
pub fn check_leader_epoch(partition: &Partition, current_leader_epoch: i32) -> Result<(), ResponseError> {
    let epoch = partition.leader_epoch();
    if current_leader_epoch < 0 || current_leader_epoch == epoch {
        Ok(())
    } else if current_leader_epoch > epoch {
        Err(ResponseError::UnknownLeaderEpoch)
    } else {
        Err(ResponseError::FencedLeaderEpoch)
    }
}

/// The partition a per-partition request names (`topic` is `None` when unknown), its
/// leader epoch checked as [`check_leader_epoch`] does, led by this broker.
pub fn leader_partition(
    ctx: &Ctx,
    topic: Option<&Arc<TopicImage>>,
    index: i32,
    current_leader_epoch: i32,
) -> Result<Arc<Partition>, ResponseError> {
    let partition = local_partition(ctx, topic.ok_or(ResponseError::UnknownTopicOrPartition)?, index)?;
    check_leader_epoch(&partition, current_leader_epoch)?;
    if !partition.is_leader() {
        return Err(ResponseError::NotLeaderOrFollower);
    }
    Ok(partition)
}

/// KIP-951: where a partition's leader is, for a client told NOT_LEADER_OR_FOLLOWER (or
/// FENCED_LEADER_EPOCH) so it can go there without a Metadata round trip.
#[derive(Debug, Clone, PartialEq)]
pub struct CurrentLeader {
    /// -1 when the partition is unknown or has no leader.
    pub leader_id: i32,
    /// -1 when the partition is unknown.
    pub leader_epoch: i32,
    /// The leader's endpoint when it is a registered, unfenced broker.
    pub endpoint: Option<crate::controller::BrokerImage>,
}

/// The current leader of `topic`'s partition `index`, as Kafka's
/// `KafkaApis.getCurrentLeader` finds it: from the local replica when this broker holds
/// one (its role and leader epoch), else from the metadata image; the endpoint only when
/// that broker is registered and unfenced.
pub fn current_leader(ctx: &Ctx, topic: Option<&TopicImage>, index: i32) -> CurrentLeader {
    let image = ctx.image();
    let local = topic.and_then(|t| ctx.replicas.partition(&t.topic_id, index));
    let (leader_id, leader_epoch) = match local {
        Some(p) => match p.role() {
            Role::Leader => (ctx.controller.node_id(), p.leader_epoch()),
            Role::Follower { leader } => (leader, p.leader_epoch()),
        },
        None => topic
            .and_then(|t| usize::try_from(index).ok().and_then(|i| t.partitions.get(i)))
            .map_or((-1, -1), |p| (p.leader, p.leader_epoch)),
    };
    let endpoint = image.brokers.get(&leader_id).filter(|b| !b.fenced).cloned();
    CurrentLeader { leader_id, leader_epoch, endpoint }
}

/// `-2147483648`: "authorized operations not requested" in Metadata/DescribeCluster.
pub const OPS_NOT_REQUESTED: i32 = i32::MIN;

/// Everything is allowed (no ACLs yet): the bit set Kafka reports for a topic.
pub fn topic_ops_all() -> i32 {
    // READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11
    [3, 4, 5, 6, 7, 8, 10, 11].iter().fold(0, |acc, b| acc | (1 << b))
}

pub fn cluster_ops_all() -> i32 {
    // CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12
    [5, 7, 8, 9, 10, 11, 12].iter().fold(0, |acc, b| acc | (1 << b))
}

pub fn group_ops_all() -> i32 {
    // READ 3, DELETE 6, DESCRIBE 8
    [3, 6, 8].iter().fold(0, |acc, b| acc | (1 << b))
}
