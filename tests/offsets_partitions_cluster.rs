//! Groups coordinated per `__consumer_offsets` partition in a three-broker cluster: each
//! group's coordinator is the leader of its partition (so groups spread over the brokers),
//! a broker that does not lead a group's partition answers NOT_COORDINATOR, and when the
//! coordinator stops, the partition's new leader loads it and serves the group with its
//! committed offsets.

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{str, Client};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::*;
use runnel::coordinator::group_partition::partition_for;
use runnel::server::embedded::EmbeddedCluster;

const DEADLINE: Duration = Duration::from_secs(30);

fn commit(group: &str, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(str(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(str(""))
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(str("t"))).with_partitions(vec![
            OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(offset),
        ])])
}

fn fetch(group: &str) -> OffsetFetchRequest {
    OffsetFetchRequest::default().with_group_id(GroupId(str(group))).with_topics(Some(vec![
        OffsetFetchRequestTopic::default().with_name(TopicName(str("t"))).with_partition_indexes(vec![0]),
    ]))
}

fn addr(cluster: &EmbeddedCluster, node: i32) -> SocketAddr {
    cluster.broker(node).expect("running").local_addr()
}

/// `(error, coordinator node)` of each group, asked in one batched FindCoordinator.
async fn coordinators(c: &mut Client, groups: &[String]) -> Vec<(i16, i32)> {
    let req = FindCoordinatorRequest::default().with_coordinator_keys(groups.iter().map(|g| str(g)).collect());
    c.send(4, req).await.coordinators.iter().map(|k| (k.error_code, k.node_id.0)).collect()
}

/// The leader of each `__consumer_offsets` partition, by Metadata.
async fn offsets_leaders(c: &mut Client) -> Vec<i32> {
    let req = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(TopicName(str("__consumer_offsets"))))]));
    let md = c.send(12, req).await;
    let mut ps: Vec<(i32, i32)> = md.topics[0].partitions.iter().map(|p| (p.partition_index, p.leader_id.0)).collect();
    ps.sort_unstable();
    ps.into_iter().map(|(_, l)| l).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_group_is_coordinated_by_its_partitions_leader_and_moves_with_it() {
    let mut cluster = EmbeddedCluster::start(3).await.expect("cluster starts");
    let mut c = Client::connect(addr(&cluster, 1)).await;
    c.create_topic_ok("t", 1, &[]).await;
    let groups: Vec<String> = (0..20).map(|i| format!("group-{i}")).collect();
    let found = coordinators(&mut c, &groups).await;
    let leaders = offsets_leaders(&mut c).await;
    assert_eq!(leaders.len(), 50);
    for (g, (error, node)) in groups.iter().zip(&found) {
        assert_eq!((*error, *node), (0, leaders[partition_for(g, 50) as usize]), "{g}");
    }
    let distinct: BTreeSet<i32> = found.iter().map(|(_, n)| *n).collect();
    assert!(distinct.len() > 1, "groups spread over the brokers: {found:?}");

    let group = &groups[0];
    let coordinator = found[0].1;
    let other = (1..=3).find(|n| *n != coordinator).unwrap();
    let mut elsewhere = Client::connect(addr(&cluster, other)).await;
    let r = elsewhere.send(8, commit(group, 1)).await;
    assert_eq!(r.topics[0].partitions[0].error_code, ResponseError::NotCoordinator.code());
    let r = elsewhere.send(7, fetch(group)).await;
    assert_eq!(r.error_code, ResponseError::NotCoordinator.code());
    let mut at = Client::connect(addr(&cluster, coordinator)).await;
    // Broker 1 named the coordinator from its own metadata; the coordinator may apply the
    // commit that makes it the partition's leader a moment later, and answers
    // NOT_COORDINATOR (or COORDINATOR_LOAD_IN_PROGRESS) until then, as a client retries.
    let retriable = [ResponseError::NotCoordinator.code(), ResponseError::CoordinatorLoadInProgress.code()];
    let started = Instant::now();
    loop {
        let r = at.send(8, commit(group, 0)).await;
        let error = r.topics[0].partitions[0].error_code;
        if error == 0 {
            break;
        }
        assert!(retriable.contains(&error) && started.elapsed() < DEADLINE, "first commit: error {error}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Enough log (over 64 KiB) that the next leader replays it off the request path.
    for offset in 0..=42 {
        let mut req = commit(group, offset);
        req.topics[0].partitions[0].committed_metadata = Some(str(&"m".repeat(4000)));
        let r = at.send(8, req).await;
        assert_eq!(r.topics[0].partitions[0].error_code, 0);
    }

    // The coordinator stops (its leadership moves off first): another broker leads the
    // group's partition, loads it, and serves the committed offset.
    cluster.stop(coordinator).await;
    let mut c = Client::connect(addr(&cluster, other)).await;
    let until = Instant::now() + DEADLINE;
    let committed = loop {
        let (error, node) = coordinators(&mut c, std::slice::from_ref(group)).await[0];
        if error == 0 && node != coordinator {
            let r = Client::connect(addr(&cluster, node)).await.send(7, fetch(group)).await;
            if r.error_code == 0 {
                break r.topics[0].partitions[0].committed_offset;
            }
            let retriable = [ResponseError::CoordinatorLoadInProgress, ResponseError::NotCoordinator];
            assert!(retriable.iter().any(|e| e.code() == r.error_code), "error {}", r.error_code);
        }
        assert!(Instant::now() < until, "no new coordinator serving {group}: ({error}, {node})");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(committed, 42);
    // Dropped, not shut down: with one voter of three gone, the second to stop would wait
    // for a controller majority to move its leadership off.
    drop(cluster);
}
