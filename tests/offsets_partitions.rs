//! `__consumer_offsets` over the wire: groups spread over Kafka's 50 partitions by Kafka's
//! hash, each written to its own partition, and a data dir from before (one partition)
//! opens unchanged, keeping its groups and committed offsets.

mod common;

use common::{str, Client, TestBroker};
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::*;
use runnel::coordinator::group_partition::partition_for;

fn commit(group: &str, topic: &str, partition: i32, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(str(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(str(""))
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(str(topic))).with_partitions(vec![
            OffsetCommitRequestPartition::default().with_partition_index(partition).with_committed_offset(offset),
        ])])
}

async fn commit_ok(c: &mut Client, group: &str, offset: i64) {
    let r = c.send(8, commit(group, "t", 0, offset)).await;
    assert_eq!(r.topics[0].partitions[0].error_code, 0, "commit of {group}");
}

async fn committed(c: &mut Client, group: &str) -> i64 {
    let req = OffsetFetchRequest::default().with_group_id(GroupId(str(group))).with_topics(Some(vec![
        OffsetFetchRequestTopic::default().with_name(TopicName(str("t"))).with_partition_indexes(vec![0]),
    ]));
    let r = c.send(7, req).await;
    assert_eq!(r.error_code, 0, "offset fetch of {group}");
    r.topics[0].partitions[0].committed_offset
}

/// The `__consumer_offsets-N` directories in the data dir, sorted by N.
fn offsets_partition_dirs(broker: &TestBroker) -> Vec<i32> {
    let mut ps: Vec<i32> = std::fs::read_dir(broker.data_dir())
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("__consumer_offsets-")?.parse().ok())
        .collect();
    ps.sort_unstable();
    ps
}

fn log_bytes(broker: &TestBroker, partition: i32) -> u64 {
    let dir = broker.data_dir().join(format!("__consumer_offsets-{partition}"));
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| e.metadata().map_or(0, |m| m.len()))
        .sum()
}

async fn find_coordinators(c: &mut Client, keys: &[&str]) -> Vec<(String, i16, i32)> {
    let req = FindCoordinatorRequest::default().with_coordinator_keys(keys.iter().map(|k| str(k)).collect());
    let r = c.send(4, req).await;
    r.coordinators.into_iter().map(|k| (k.key.to_string(), k.error_code, k.node_id.0)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_spread_over_fifty_partitions_each_written_to_its_own() {
    let mut broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("t", 1, &[]).await;
    let found = find_coordinators(&mut c, &["g", "my-group"]).await;
    assert_eq!(found, vec![("g".into(), 0, 1), ("my-group".into(), 0, 1)]);
    assert_eq!(offsets_partition_dirs(&broker), (0..50).collect::<Vec<_>>());
    // Kafka's hash: "g" is on partition 3, "my-group" on 12.
    assert_eq!((partition_for("g", 50), partition_for("my-group", 50)), (3, 12));
    commit_ok(&mut c, "g", 5).await;
    commit_ok(&mut c, "my-group", 7).await;
    let written: Vec<i32> = (0..50).filter(|p| log_bytes(&broker, *p) > 0).collect();
    assert_eq!(written, vec![3, 12]);
    let listed = c.send(4, ListGroupsRequest::default()).await;
    let mut ids: Vec<String> = listed.groups.iter().map(|g| g.group_id.0.to_string()).collect();
    ids.sort();
    assert_eq!(ids, vec!["g", "my-group"]);

    broker.restart().await;
    let mut c = broker.client().await;
    assert_eq!((committed(&mut c, "g").await, committed(&mut c, "my-group").await), (5, 7));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_partition_offsets_topic_from_before_keeps_its_groups() {
    // The layout of earlier versions: one partition holding every group.
    let mut broker = TestBroker::start_with(|c| c.offsets_topic_num_partitions = 1).await;
    let mut c = broker.client().await;
    c.create_topic_ok("t", 1, &[]).await;
    for (group, offset) in [("g", 5), ("my-group", 7), ("g1", 9)] {
        commit_ok(&mut c, group, offset).await;
    }
    assert_eq!(offsets_partition_dirs(&broker), vec![0]);

    // Restarted with the default of 50: the topic's own count wins.
    broker.restart_with(|c| c.offsets_topic_num_partitions = 50).await;
    let mut c = broker.client().await;
    assert_eq!(
        find_coordinators(&mut c, &["g", "my-group"]).await,
        vec![("g".into(), 0, 1), ("my-group".into(), 0, 1)]
    );
    assert_eq!(offsets_partition_dirs(&broker), vec![0], "no partitions added");
    for (group, offset) in [("g", 5), ("my-group", 7), ("g1", 9)] {
        assert_eq!(committed(&mut c, group).await, offset, "{group}");
    }
    // And the groups go on committing, to partition 0.
    let before = log_bytes(&broker, 0);
    commit_ok(&mut c, "my-group", 8).await;
    assert!(log_bytes(&broker, 0) > before);
    assert_eq!(committed(&mut c, "my-group").await, 8);
}
