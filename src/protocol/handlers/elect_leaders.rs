//! ElectLeaders: preferred or unclean leader election, decided by the controller
//! (`kafka-leader-election`).

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};

use super::str_bytes;
use crate::controller::{ElectionError, ElectionType};
use crate::protocol::errors::controller_error;
use crate::protocol::Ctx;

pub async fn handle(ctx: &Ctx, req: ElectLeadersRequest, version: i16) -> ElectLeadersResponse {
    // v0 has no election type: it asks for preferred elections.
    let election = match (version, req.election_type) {
        (0, _) | (_, 0) => ElectionType::Preferred,
        (_, 1) => ElectionType::Unclean,
        (_, other) => {
            tracing::info!(election_type = other, "ElectLeaders with an unknown election type");
            return ElectLeadersResponse::default().with_error_code(ResponseError::InvalidRequest.code());
        }
    };
    let partitions: Option<Vec<(String, i32)>> = req.topic_partitions.map(|topics| {
        topics.into_iter().flat_map(|t| t.partitions.into_iter().map(move |p| (t.topic.0.to_string(), p))).collect()
    });
    let asked = partitions.as_ref().map_or(0, Vec::len);
    let outcomes = match ctx.controller_op(ctx.controller.elect_leaders(election, partitions)).await {
        Ok(o) => o,
        Err(e) => {
            return ElectLeadersResponse::default().with_error_code(controller_error(&e).code());
        }
    };
    let elected = outcomes.iter().filter(|(_, _, o)| o.is_ok()).count();
    tracing::info!(?election, asked, elected, "leader election requested");
    let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
    for (topic, partition, outcome) in outcomes {
        let mut result = PartitionResult::default().with_partition_id(partition);
        if let Err(e) = outcome {
            let code = election_error(e);
            result = result.with_error_code(code.code()).with_error_message(Some(str_bytes(code.to_string())));
        }
        by_topic.entry(topic).or_default().push(result);
    }
    let results = by_topic
        .into_iter()
        .map(|(topic, partition_result)| {
            ReplicaElectionResult::default()
                .with_topic(TopicName(str_bytes(topic)))
                .with_partition_result(partition_result)
        })
        .collect();
    ElectLeadersResponse::default().with_replica_election_results(results)
}

fn election_error(e: ElectionError) -> ResponseError {
    match e {
        ElectionError::UnknownPartition => ResponseError::UnknownTopicOrPartition,
        ElectionError::ElectionNotNeeded => ResponseError::ElectionNotNeeded,
        ElectionError::PreferredLeaderNotAvailable => ResponseError::PreferredLeaderNotAvailable,
        ElectionError::EligibleLeadersNotAvailable => ResponseError::EligibleLeadersNotAvailable,
    }
}
