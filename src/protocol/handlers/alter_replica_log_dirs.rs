//! AlterReplicaLogDirs: move local partitions to another of this broker's log directories
//! while they serve (`kafka-reassign-partitions` with `log_dirs`, `kafka-log-dirs`).
//!
//! Errors as Kafka's `ReplicaManager.alterReplicaLogDirs`: a path that is not one of the
//! broker's log directories LOG_DIR_NOT_FOUND; an unknown topic or partition
//! UNKNOWN_TOPIC_OR_PARTITION; a partition of a known topic with no replica here
//! REPLICA_NOT_AVAILABLE; an offline destination KAFKA_STORAGE_ERROR. NONE means the move has started (or there is nothing to move);
//! DescribeLogDirs shows it as a future replica in the destination until it is done.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, TopicName};

use super::local_partition;
use crate::protocol::Ctx;

pub fn handle(ctx: &Ctx, req: AlterReplicaLogDirsRequest, _version: i16) -> AlterReplicaLogDirsResponse {
    let image = ctx.image();
    let mut results: BTreeMap<TopicName, Vec<AlterReplicaLogDirPartitionResult>> = BTreeMap::new();
    for dir in req.dirs {
        let to = ctx.replicas.log_dirs().index_of(dir.path.as_str());
        for topic in dir.topics {
            for index in topic.partitions {
                let outcome = match (to, image.topic(topic.name.0.as_str())) {
                    (None, _) => Err(ResponseError::LogDirNotFound),
                    (Some(to), _) if ctx.replicas.log_dirs().is_offline(to) => Err(ResponseError::KafkaStorageError),
                    (Some(_), None) => Err(ResponseError::UnknownTopicOrPartition),
                    (Some(to), Some(t)) => match local_partition(ctx, t, index) {
                        Ok(p) => {
                            ctx.replicas.move_partition(&p, to);
                            Ok(())
                        }
                        Err(ResponseError::NotLeaderOrFollower) => Err(ResponseError::ReplicaNotAvailable),
                        Err(e) => Err(e),
                    },
                };
                let code = match outcome {
                    Ok(()) => 0,
                    Err(e) => {
                        tracing::warn!(topic = %topic.name.0, partition = index, path = %dir.path, error = ?e, "cannot alter the log dir of a replica");
                        e.code()
                    }
                };
                results.entry(topic.name.clone()).or_default().push(
                    AlterReplicaLogDirPartitionResult::default().with_partition_index(index).with_error_code(code),
                );
            }
        }
    }
    let results = results
        .into_iter()
        .map(|(name, partitions)| {
            AlterReplicaLogDirTopicResult::default().with_topic_name(name).with_partitions(partitions)
        })
        .collect();
    AlterReplicaLogDirsResponse::default().with_results(results)
}
