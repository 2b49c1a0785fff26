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
    let (total, usable) = volume_bytes(&dir).unwrap_or((-1, -1));
    let result = DescribeLogDirsResult::default()
        .with_log_dir(str_bytes(dir.display().to_string()))
        .with_topics(topics)
        .with_total_bytes(total)
        .with_usable_bytes(usable);
    DescribeLogDirsResponse::default().with_results(vec![result])
}

/// The volume's total size and the bytes available to the broker (Java's
/// `FileStore.getTotalSpace` / `getUsableSpace`, which Kafka reports); `None` if the
/// filesystem cannot be asked (the protocol's -1, unknown).
fn volume_bytes(dir: &std::path::Path) -> Option<(i64, i64)> {
    let st = rustix::fs::statvfs(dir).ok()?;
    let bytes = |blocks: u64| i64::try_from(blocks.saturating_mul(st.f_frsize)).unwrap_or(i64::MAX);
    Some((bytes(st.f_blocks), bytes(st.f_bavail)))
}
