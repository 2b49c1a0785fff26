//! Replication throttles (`replication_quota.rs`) between in-process brokers: a
//! catching-up replica of a throttled partition stops getting records once the quota is
//! exceeded and catches up when the bound is lifted; an in-sync replica is never held
//! back. The bound (1000 bytes/s, judged over at least 10 s) is far below what one
//! fetch moves, so "held back" is not a race with the machine's speed.

use super::*;
use crate::controller::broker_config::{FOLLOWER_REPLICATION_THROTTLED_RATE, LEADER_REPLICATION_THROTTLED_RATE};
use crate::controller::MetadataDelta;

/// Bytes per record value: a batch of 8 is 64 KiB and more.
const VALUE_BYTES: usize = 8 * 1024;

/// `image` with topic config `name=value` and dynamic broker config `rate` on `node`.
fn throttled(mut image: MetadataImage, name: &str, value: &str, node: i32, rate: &str) -> MetadataImage {
    image.apply(&MetadataRecord::TopicConfig { topic_id: TOPIC_ID, name: name.into(), value: Some(value.into()) });
    image.apply(&MetadataRecord::BrokerConfig {
        resource: node.to_string(),
        name: rate.into(),
        value: Some("1000".into()),
    });
    image
}

/// Appends `batches` batches of 8 records of [`VALUE_BYTES`] on the leader.
async fn produce_large(node: &Node, batches: usize) {
    let value = vec![b'x'; VALUE_BYTES];
    for _ in 0..batches {
        let now = node.manager.now_ms();
        let records: Vec<TestRecord> =
            (0..8).map(|_| TestRecord { key: None, value: Some(&value), timestamp: now }).collect();
        let batch = BytesMut::from(&build_records_batch(0, &records, -1)[..]);
        let p = node.partition();
        node.manager.append(&p, batch, Acks::Leader, Instant::now() + PATIENCE, now).await.unwrap();
    }
}

/// Replica 2 gets some records, then none while the quota holds it back; lifting the
/// bound on `node` lets it catch up.
async fn held_back_then_released(image: MetadataImage, node: i32, rate: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (_cluster, mut nodes) = cluster(dir.path(), &image, &[1, 2]);
    produce_large(&nodes[&1], 32).await; // 2 MiB and more: beyond one fetch
    let leader_end = nodes[&1].partition().log_end_offset();
    eventually("replica 2 gets its first records", || nodes[&2].partition().log_end_offset() > 0).await;
    let quotas = nodes[&node].manager.quotas();
    let quota = if rate == LEADER_REPLICATION_THROTTLED_RATE { &quotas.leader } else { &quotas.follower };
    eventually("the quota is exceeded", || quota.is_exceeded(Instant::now())).await;
    let got = nodes[&2].partition().log_end_offset();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(nodes[&2].partition().log_end_offset(), got, "a held-back replica got more records");
    assert!(got < leader_end, "replica 2 caught up ({got} of {leader_end}) under a 1000 bytes/s bound");
    assert!(quota.total_bytes() > 0);

    // The operator lifts the bound: replica 2 catches up.
    let mut lifted = image.clone();
    lifted.apply(&MetadataRecord::BrokerConfig { resource: node.to_string(), name: rate.into(), value: None });
    let manager = &nodes[&node].manager;
    manager.apply_delta(&lifted, &MetadataDelta::default(), manager.now_ms()).unwrap();
    eventually("replica 2 catches up", || in_sync(&nodes, 1, &[2])).await;
    for n in nodes.values_mut() {
        n.stop_fetching().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_holds_back_a_throttled_replica_outside_the_isr_until_the_bound_is_lifted() {
    let image = throttled(
        catching_up(&[1, 2]),
        "leader.replication.throttled.replicas",
        "0:1",
        1,
        LEADER_REPLICATION_THROTTLED_RATE,
    );
    held_back_then_released(image, 1, LEADER_REPLICATION_THROTTLED_RATE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_follower_holds_back_its_own_throttled_replica_outside_the_isr_until_the_bound_is_lifted() {
    let image = throttled(
        catching_up(&[1, 2]),
        "follower.replication.throttled.replicas",
        "0:2",
        2,
        FOLLOWER_REPLICATION_THROTTLED_RATE,
    );
    held_back_then_released(image, 2, FOLLOWER_REPLICATION_THROTTLED_RATE).await;
}

/// An in-sync replica is never held back (acks=all producers wait for it); its bytes
/// still count against the quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_sync_replica_is_never_held_back() {
    let image = throttled(
        image(&[1, 2], 1, 0),
        "leader.replication.throttled.replicas",
        "*",
        1,
        LEADER_REPLICATION_THROTTLED_RATE,
    );
    let image =
        throttled(image, "follower.replication.throttled.replicas", "*", 2, FOLLOWER_REPLICATION_THROTTLED_RATE);
    let dir = tempfile::tempdir().unwrap();
    let (_cluster, mut nodes) = cluster(dir.path(), &image, &[1, 2]);
    produce_large(&nodes[&1], 32).await;
    eventually("the in-sync replica holds the leader's log", || in_sync(&nodes, 1, &[2])).await;
    assert!(nodes[&1].manager.quotas().leader.is_exceeded(Instant::now()));
    assert!(nodes[&2].manager.quotas().follower.is_exceeded(Instant::now()));
    for n in nodes.values_mut() {
        n.stop_fetching().await;
    }
}

/// A partition that is not named, or a replica of another broker, is not throttled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_the_lists_do_not_name_are_not_held_back() {
    let image = throttled(
        catching_up(&[1, 2]),
        "leader.replication.throttled.replicas",
        "1:1,0:3",
        1,
        LEADER_REPLICATION_THROTTLED_RATE,
    );
    let image =
        throttled(image, "follower.replication.throttled.replicas", "0:1", 2, FOLLOWER_REPLICATION_THROTTLED_RATE);
    let dir = tempfile::tempdir().unwrap();
    let (_cluster, mut nodes) = cluster(dir.path(), &image, &[1, 2]);
    produce_large(&nodes[&1], 32).await;
    eventually("replica 2 holds the leader's log", || in_sync(&nodes, 1, &[2])).await;
    assert_eq!(nodes[&1].manager.quotas().leader.total_bytes(), 0);
    assert_eq!(nodes[&2].manager.quotas().follower.total_bytes(), 0);
    for n in nodes.values_mut() {
        n.stop_fetching().await;
    }
}
