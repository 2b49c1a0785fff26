//! DescribeLogDirs: the broker's log directory and the size of each partition in it
//! (`kafka-log-dirs --describe`, and `kafka-reassign-partitions`, which asks it before
//! it moves anything): every log directory (`log_dirs`, else the data dir), each with
//! its partitions and their sizes, a partition moving into it (AlterReplicaLogDirs) as a
//! future replica (`is_future_key`), and its volume's total and usable bytes.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};

use kafka_protocol::error::ResponseError;

use super::str_bytes;
use crate::protocol::Ctx;

pub fn handle(ctx: &Ctx, req: DescribeLogDirsRequest, _version: i16) -> DescribeLogDirsResponse {
    let wanted = |topic: &str, partition: i32| match &req.topics {
        None => true,
        Some(ts) => ts.iter().any(|t| t.topic.0.as_str() == topic && t.partitions.contains(&partition)),
    };
    let dirs = ctx.replicas.log_dirs().dirs();
    // Per log dir: topic → partitions (current replicas, then future ones of moves).
    let mut by_dir: Vec<BTreeMap<String, Vec<DescribeLogDirsPartition>>> = vec![BTreeMap::new(); dirs.len()];
    for p in ctx.replicas.all_partitions() {
        let dir = p.dir();
        let Some(i) = dir.parent().and_then(|parent| dirs.iter().position(|d| d == parent)) else { continue };
        if wanted(&p.topic, p.index) {
            by_dir[i].entry(p.topic.clone()).or_default().push(
                DescribeLogDirsPartition::default()
                    .with_partition_index(p.index)
                    .with_partition_size(i64::try_from(p.size_bytes()).unwrap_or(i64::MAX)),
            );
        }
    }
    for (p, to) in ctx.replicas.moving() {
        let current = p.dir().parent().and_then(|parent| dirs.iter().position(|d| d == parent));
        if current == Some(to) || !wanted(&p.topic, p.index) {
            continue;
        }
        let future = dirs[to].join(format!("{}-{}{}", p.topic, p.index, crate::storage::log_dirs::FUTURE_SUFFIX));
        by_dir[to].entry(p.topic.clone()).or_default().push(
            DescribeLogDirsPartition::default()
                .with_partition_index(p.index)
                .with_partition_size(i64::try_from(dir_bytes(&future)).unwrap_or(i64::MAX))
                .with_is_future_key(true),
        );
    }
    let results = dirs
        .iter()
        .zip(by_dir)
        .enumerate()
        .map(|(i, (dir, by_topic))| {
            if ctx.replicas.log_dirs().is_offline(i) {
                // As Kafka: an offline dir is listed with its error, without partitions or sizes.
                return DescribeLogDirsResult::default()
                    .with_log_dir(str_bytes(dir.display().to_string()))
                    .with_error_code(ResponseError::KafkaStorageError.code());
            }
            let topics = by_topic
                .into_iter()
                .map(|(name, mut partitions)| {
                    partitions.sort_by_key(|p| (p.partition_index, p.is_future_key));
                    DescribeLogDirsTopic::default().with_name(TopicName(str_bytes(name))).with_partitions(partitions)
                })
                .collect();
            let (total, usable) = volume_bytes(dir).unwrap_or((-1, -1));
            DescribeLogDirsResult::default()
                .with_log_dir(str_bytes(dir.display().to_string()))
                .with_topics(topics)
                .with_total_bytes(total)
                .with_usable_bytes(usable)
        })
        .collect();
    DescribeLogDirsResponse::default().with_results(results)
}

/// Bytes of the files in `dir` (a future replica's copy so far); 0 if it cannot be read.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries.flatten().filter_map(|e| e.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum()
        })
        .unwrap_or(0)
}

/// The volume's total size and the bytes available to the broker (Java's
/// `FileStore.getTotalSpace` / `getUsableSpace`, which Kafka reports); `None` if the
/// filesystem cannot be asked (the protocol's -1, unknown).
fn volume_bytes(dir: &std::path::Path) -> Option<(i64, i64)> {
    let st = rustix::fs::statvfs(dir).ok()?;
    let bytes = |blocks: u64| i64::try_from(blocks.saturating_mul(st.f_frsize)).unwrap_or(i64::MAX);
    Some((bytes(st.f_blocks), bytes(st.f_bavail)))
}
