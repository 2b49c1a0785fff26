//! AlterPartitionReassignments and ListPartitionReassignments
//! (`kafka-reassign-partitions --execute / --verify / --cancel`): moving a partition's
//! replicas to other brokers, decided by the controller; the new replicas catch up
//! before the old ones are dropped.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};

use super::str_bytes;
use crate::controller::ReassignmentError;
use crate::protocol::errors::controller_error;
use crate::protocol::Ctx;

pub async fn alter(
    ctx: &Ctx,
    req: AlterPartitionReassignmentsRequest,
    version: i16,
) -> AlterPartitionReassignmentsResponse {
    // v0 has no such field: the replication factor may change, as before KIP-860.
    let allow_rf_change = version == 0 || req.allow_replication_factor_change;
    let partitions: Vec<(String, i32, Option<Vec<i32>>)> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                let target = p.replicas.as_ref().map(|rs| rs.iter().map(|r| r.0).collect());
                (t.name.0.to_string(), p.partition_index, target)
            })
        })
        .collect();
    let base = AlterPartitionReassignmentsResponse::default().with_allow_replication_factor_change(allow_rf_change);
    let outcomes = match ctx.controller_op(ctx.controller.alter_reassignments(partitions, allow_rf_change)).await {
        Ok(o) => o,
        Err(e) => {
            return base.with_error_code(controller_error(&e).code()).with_error_message(Some(str_bytes(e.to_string())))
        }
    };
    let mut by_topic: BTreeMap<String, Vec<ReassignablePartitionResponse>> = BTreeMap::new();
    for (topic, partition, outcome) in outcomes {
        let mut r = ReassignablePartitionResponse::default().with_partition_index(partition);
        match outcome {
            Ok(()) => tracing::info!(topic, partition, "partition reassignment changed"),
            Err(e) => {
                let (code, message) = reassignment_error(&e);
                r = r.with_error_code(code.code()).with_error_message(Some(str_bytes(message)));
            }
        }
        by_topic.entry(topic).or_default().push(r);
    }
    let responses = by_topic
        .into_iter()
        .map(|(name, partitions)| {
            ReassignableTopicResponse::default().with_name(TopicName(str_bytes(name))).with_partitions(partitions)
        })
        .collect();
    base.with_responses(responses)
}

fn reassignment_error(e: &ReassignmentError) -> (ResponseError, String) {
    match e {
        ReassignmentError::UnknownPartition => {
            (ResponseError::UnknownTopicOrPartition, ResponseError::UnknownTopicOrPartition.to_string())
        }
        ReassignmentError::InvalidAssignment(m) => (ResponseError::InvalidReplicaAssignment, m.clone()),
        ReassignmentError::ReplicationFactorChange => (
            ResponseError::InvalidReplicationFactor,
            "The replication factor is changed, but allow_replication_factor_change is false".into(),
        ),
        ReassignmentError::NoReassignmentInProgress => {
            (ResponseError::NoReassignmentInProgress, ResponseError::NoReassignmentInProgress.to_string())
        }
    }
}

/// The reassignments in progress: every one, or those of the requested partitions.
pub fn list(ctx: &Ctx, req: ListPartitionReassignmentsRequest, _version: i16) -> ListPartitionReassignmentsResponse {
    let image = ctx.image();
    let wanted = |topic: &str, partition: i32| match &req.topics {
        None => true,
        Some(ts) => ts.iter().any(|t| t.name.0.as_str() == topic && t.partition_indexes.contains(&partition)),
    };
    let ids = |rs: &[i32]| rs.iter().map(|r| BrokerId(*r)).collect::<Vec<_>>();
    let topics = image
        .topics
        .values()
        .filter_map(|t| {
            let partitions: Vec<OngoingPartitionReassignment> = t
                .partitions
                .iter()
                .filter(|p| p.is_reassigning() && wanted(&t.name, p.partition))
                .map(|p| {
                    OngoingPartitionReassignment::default()
                        .with_partition_index(p.partition)
                        .with_replicas(ids(&p.replicas))
                        .with_adding_replicas(ids(&p.adding_replicas))
                        .with_removing_replicas(ids(&p.removing_replicas))
                })
                .collect();
            (!partitions.is_empty()).then(|| {
                OngoingTopicReassignment::default()
                    .with_name(TopicName(str_bytes(t.name.clone())))
                    .with_partitions(partitions)
            })
        })
        .collect();
    ListPartitionReassignmentsResponse::default().with_topics(topics)
}
