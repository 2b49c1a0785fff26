//! DescribeLogDirs: the broker's log directory and the size of each partition in it
//! (`kafka-log-dirs --describe`, and `kafka-reassign-partitions`, which asks it before
//! it moves anything). runnel keeps every partition in one directory, the data dir.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};

use super::str_bytes;
use crate::protocol::Ctx;

pub fn handle(ctx: &Ctx, req: DescribeLogDirsRequest, _version: i16) -> DescribeLogDirsResponse {
    let wanted = |topic: &str, partition: i32| match &req.topics {
        None => true,
        Some(ts) => ts.iter().any(|t| t.topic.0.as_str() == topic && t.partitions.contains(&partition)),
    };
    let mut by_topic: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    for p in ctx.replicas.all_partitions() {
        if wanted(&p.topic, p.index) {
            by_topic.entry(p.topic.clone()).or_default().push(
                DescribeLogDirsPartition::default()
                    .with_partition_index(p.index)
                    .with_partition_size(i64::try_from(p.size_bytes()).unwrap_or(i64::MAX)),
            );
        }
    }
    let topics = by_topic
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|p| p.partition_index);
            DescribeLogDirsTopic::default().with_name(TopicName(str_bytes(name))).with_partitions(partitions)
        })
        .collect();
    let dir = std::fs::canonicalize(&ctx.config.data_dir).unwrap_or_else(|_| ctx.config.data_dir.clone());
    // The volume's total and usable bytes stay -1 (the protocol's "unknown").
    let result = DescribeLogDirsResult::default()
        .with_log_dir(str_bytes(dir.display().to_string()))
        .with_topics(topics)
        .with_total_bytes(-1)
        .with_usable_bytes(-1);
    DescribeLogDirsResponse::default().with_results(vec![result])
}
