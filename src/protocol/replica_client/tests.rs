//! The wire client against a real broker over TCP: a [`Broker`](crate::Broker) leads a
//! partition whose replicas are made [1, 2] by a hand-made image (no multi-broker
//! metadata yet), and broker 2 is a `ReplicaManager` in the test process whose fetcher
//! uses [`TcpLeaderEndpoints`].

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::time::Instant;

use super::*;
use crate::config::BrokerConfig;
use crate::controller::{MetadataImage, MetadataRecord, NewTopic};
use crate::protocol::context::system_clock;
use crate::replication::{Acks, FetcherManager, Partition, ReplicaManager};
use crate::server::embedded::EmbeddedBroker;
use crate::storage::test_util::{build_records_batch, TestRecord};

const PATIENCE: Duration = Duration::from_secs(20);

struct Setup {
    leader: EmbeddedBroker,
    leader_partition: Arc<Partition>,
    follower: Arc<ReplicaManager>,
    _dir: tempfile::TempDir,
}

/// Topic `t` on a real broker (node 1), then an image where its partition has replicas
/// [1, 2] with `isr`, led by 1: applied to the broker's replica manager and to broker 2's.
async fn setup(isr: &[i32]) -> Setup {
    let leader = EmbeddedBroker::start().await.unwrap();
    let ctx = leader.context().clone();
    let new =
        NewTopic { name: "t".into(), num_partitions: 1, replication_factor: -1, assignments: vec![], configs: vec![] };
    let topic = ctx.controller.create_topic(&new, false).await.unwrap();
    let mut image: MetadataImage = (*ctx.image()).clone();
    image.apply(&MetadataRecord::RegisterBroker {
        node_id: 2,
        host: "127.0.0.1".into(),
        port: 1,
        rack: None,
        inter_broker: None,
        incarnation: None,
        metadata_format: crate::controller::records::METADATA_FORMAT,
    });
    image.apply(&MetadataRecord::Partition {
        topic_id: topic.topic_id,
        partition: 0,
        replicas: vec![1, 2],
        isr: isr.to_vec(),
        leader: 1,
        leader_epoch: 0,
        partition_epoch: 1,
        adding_replicas: vec![],
        removing_replicas: vec![],
        eligible_leader_replicas: Vec::new(),
        last_known_elr: Vec::new(),
    });
    ctx.replicas.apply_image(&image, ctx.now_ms()).unwrap();
    let leader_partition = ctx.replicas.partition(&topic.topic_id, 0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut config = BrokerConfig::ephemeral(dir.path());
    config.node_id = 2;
    let follower = Arc::new(ReplicaManager::new(&config, system_clock()).unwrap());
    follower.apply_image(&image, follower.now_ms()).unwrap();
    Setup { leader, leader_partition, follower, _dir: dir }
}

fn fetchers(s: &Setup) -> FetcherManager {
    let addr = s.leader.local_addr();
    let resolve: ResolveBroker = Arc::new(move |id| (id == 1).then(|| (addr.ip().to_string(), addr.port())));
    FetcherManager::start(s.follower.clone(), Arc::new(TcpLeaderEndpoints::new(2, resolve)))
}

fn batch(n: usize, now_ms: i64) -> BytesMut {
    let records: Vec<TestRecord> =
        (0..n).map(|_| TestRecord { key: Some(b"k"), value: Some(b"value"), timestamp: now_ms }).collect();
    BytesMut::from(&build_records_batch(0, &records, -1)[..])
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_replicates_from_a_real_broker_over_tcp() {
    let s = setup(&[1, 2]).await;
    let follower_partition = s.follower.partition(&s.leader_partition.topic_id, 0).unwrap();
    assert!(!follower_partition.is_leader());
    let fetchers = fetchers(&s);
    let ctx = s.leader.context();
    for _ in 0..5 {
        let now = ctx.now_ms();
        let deadline = Instant::now() + PATIENCE;
        let appended = ctx.replicas.append(&s.leader_partition, batch(4, now), Acks::All, deadline, now).await.unwrap();
        // acks=all answered: the follower fetched from past the write, over TCP.
        assert!(follower_partition.log_end_offset() > appended.last_offset);
    }
    assert_eq!(follower_partition.log_bytes(), s.leader_partition.log_bytes());
    eventually("the follower learns the high watermark", || follower_partition.high_watermark() == 20).await;
    // The follower fetched in a session: one full fetch, the rest incremental.
    let stats = ctx.fetch_sessions.stats();
    assert_eq!((stats.sessions, stats.partitions), (1, 1));
    assert!(stats.incremental_fetches >= 4, "{stats:?}");
    // The leader loses the session (as on eviction): the follower opens a new one and
    // replicates on.
    ctx.fetch_sessions.forget_all();
    let now = ctx.now_ms();
    let deadline = Instant::now() + PATIENCE;
    let appended = ctx.replicas.append(&s.leader_partition, batch(4, now), Acks::All, deadline, now).await.unwrap();
    assert!(follower_partition.log_end_offset() > appended.last_offset);
    // (The new session opens once the full fetch that reported the write ends its long poll.)
    eventually("the follower opens a new session", || ctx.fetch_sessions.stats().sessions == 1).await;
    fetchers.shutdown().await;
    s.leader.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_the_leader_log_start_starts_over_there() {
    // Follower 2 is out of the ISR, so the leader's high watermark moves alone and
    // DeleteRecords can move its log start past everything the follower has.
    let s = setup(&[1]).await;
    let ctx = s.leader.context();
    for _ in 0..3 {
        let now = ctx.now_ms();
        ctx.replicas
            .append(&s.leader_partition, batch(2, now), Acks::All, Instant::now() + PATIENCE, now)
            .await
            .unwrap();
    }
    assert_eq!(s.leader_partition.delete_records_before(4).unwrap(), 4);
    let follower_partition = s.follower.partition(&s.leader_partition.topic_id, 0).unwrap();
    assert_eq!(follower_partition.log_end_offset(), 0);
    let fetchers = fetchers(&s);
    eventually("the follower holds the leader's log from its start", || {
        follower_partition.log_end_offset() == 6 && follower_partition.log_bytes() == s.leader_partition.log_bytes()
    })
    .await;
    assert_eq!(follower_partition.log_start_offset(), 4);
    // DeleteRecords on the leader reaches the follower with its next fetch.
    assert_eq!(s.leader_partition.delete_records_before(5).unwrap(), 5);
    eventually("the follower's log start follows the leader's", || follower_partition.log_start_offset() == 5).await;
    fetchers.shutdown().await;
    s.leader.shutdown().await;
}

#[test]
fn a_fetch_request_encodes_what_kafka_replica_fetchers_send() {
    use crate::replication::{PartitionFetch, ReplicaFetchRequest};
    let topic_id = uuid::Uuid::from_u128(9);
    let request = ReplicaFetchRequest {
        replica_id: 2,
        replica_epoch: -1,
        max_wait: Duration::from_millis(500),
        min_bytes: 1,
        max_bytes: 10 << 20,
        partitions: (0..2)
            .map(|i| PartitionFetch {
                topic: "t".into(),
                topic_id,
                partition: i,
                current_leader_epoch: 3,
                fetch_offset: 10 + i64::from(i),
                last_fetched_epoch: Some(2),
                log_start_offset: 0,
                max_bytes: 1 << 20,
            })
            .collect(),
    };
    let prepared = SessionHandler::default().prepare(positions(&request));
    let mut frame = encode_fetch(&request, &prepared, 7, "broker-2-fetcher-0").unwrap();
    let mut body = frame.split_off(4);
    let header = RequestHeader::decode(&mut body, ApiKey::Fetch.request_header_version(FETCH_VERSION)).unwrap();
    assert_eq!(header.client_id.as_deref(), Some("broker-2-fetcher-0"));
    assert_eq!(header.correlation_id, 7);
    let decoded = FetchRequest::decode(&mut body, FETCH_VERSION).unwrap();
    assert_eq!(decoded.replica_state.replica_id.0, 2);
    assert_eq!(decoded.replica_state.replica_epoch, -1);
    assert_eq!(decoded.topics.len(), 1, "partitions of one topic share its entry");
    assert_eq!((decoded.session_id, decoded.session_epoch), (0, 0), "a full fetch that asks for a session");
    let p = &decoded.topics[0].partitions[1];
    assert_eq!((p.partition, p.fetch_offset, p.last_fetched_epoch, p.current_leader_epoch), (1, 11, 2, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diverging_epoch_over_the_wire_makes_the_follower_truncate() {
    let s = setup(&[1, 2]).await;
    let topic_id = s.leader_partition.topic_id;
    let follower_partition = s.follower.partition(&topic_id, 0).unwrap();
    // Broker 2 led epoch 0 on its own for a while (the real broker never saw it).
    let mut led_by_2: MetadataImage = (*s.leader.context().image()).clone();
    let partition = |leader, leader_epoch| MetadataRecord::Partition {
        topic_id,
        partition: 0,
        replicas: vec![1, 2],
        isr: vec![1, 2],
        leader,
        leader_epoch,
        partition_epoch: leader_epoch + 2,
        adding_replicas: vec![],
        removing_replicas: vec![],
        eligible_leader_replicas: Vec::new(),
        last_known_elr: Vec::new(),
    };
    led_by_2.apply(&partition(2, 0));
    s.follower.apply_image(&led_by_2, s.follower.now_ms()).unwrap();
    for _ in 0..3 {
        let now = s.follower.now_ms();
        s.follower
            .append(&follower_partition, batch(3, now), Acks::Leader, Instant::now() + PATIENCE, now)
            .await
            .unwrap();
    }
    assert_eq!(follower_partition.log_end_offset(), 9);
    // Broker 1 is elected in epoch 1 and writes its own records.
    let mut led_by_1 = led_by_2.clone();
    led_by_1.apply(&partition(1, 1));
    let ctx = s.leader.context();
    ctx.replicas.apply_image(&led_by_1, ctx.now_ms()).unwrap();
    s.follower.apply_image(&led_by_1, s.follower.now_ms()).unwrap();
    for _ in 0..2 {
        let now = ctx.now_ms();
        ctx.replicas
            .append(&s.leader_partition, batch(2, now), Acks::Leader, Instant::now() + PATIENCE, now)
            .await
            .unwrap();
    }
    // The follower's first fetch names epoch 0 at offset 9; the leader answers with a
    // diverging epoch, the follower drops its tail and copies the leader's log.
    let fetchers = fetchers(&s);
    eventually("the follower holds exactly the leader's log", || {
        follower_partition.log_bytes() == s.leader_partition.log_bytes()
    })
    .await;
    assert_eq!(follower_partition.log_end_offset(), 4);
    assert_eq!(follower_partition.log_end_offset_for_epoch(1), Some((1, 4)));
    fetchers.shutdown().await;
    s.leader.shutdown().await;
}
