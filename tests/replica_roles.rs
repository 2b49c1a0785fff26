//! Leader and follower roles over the wire. There is no multi-broker metadata yet, so a
//! hand-made image is applied to the broker's replica manager (`apply_image` is how the
//! broker itself opens partitions at start): the topic exists in the controller's image,
//! and the partitions get the replicas and leaders each test needs.

mod common;

use common::batches;
use common::requests::*;
use common::TestBroker;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::ReplicaState;
use kafka_protocol::messages::*;
use runnel::controller::{MetadataImage, MetadataRecord};

/// The broker's image with partition `partition` of `topic` given these replicas and leader.
fn reassign(broker: &TestBroker, topic: &str, changes: &[(i32, &[i32], i32, i32)]) {
    let ctx = broker.broker().context();
    let mut image: MetadataImage = (*ctx.image()).clone();
    let topic_id = image.topic(topic).unwrap().topic_id;
    for &(partition, replicas, leader, leader_epoch) in changes {
        image.apply(&MetadataRecord::Partition {
            topic_id,
            partition,
            replicas: replicas.to_vec(),
            isr: replicas.to_vec(),
            leader,
            leader_epoch,
            partition_epoch: leader_epoch + 1,
            adding_replicas: vec![],
            removing_replicas: vec![],
            eligible_leader_replicas: vec![],
            last_known_elr: vec![],
        });
    }
    ctx.replicas.apply_image(&image, ctx.now_ms()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_or_a_non_replica_refuses_clients_with_not_leader_or_follower() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let topic_id = c.create_topic_ok("t", 2, &[]).await;
    // Broker 1 follows 2 on partition 0 and holds no replica of partition 1.
    reassign(&broker, "t", &[(0, &[1, 2], 2, 1), (1, &[2, 3], 2, 1)]);
    let not_leader = ResponseError::NotLeaderOrFollower.code();
    for p in 0..2 {
        let r = c.produce_acks("t", p, batches::values("x", 1), 1).await;
        assert_eq!(r.error_code, not_leader, "produce to partition {p}");
        assert_eq!(c.list_offset("t", p, LATEST).await.error_code, not_leader, "list offsets of partition {p}");
        // Before Fetch v11 (no client metadata) a consumer reads from the leader only.
        let resp = c.send(10, fetch_request("t", p, 0, 1 << 20)).await;
        assert_eq!(resp.responses[0].partitions[0].error_code, not_leader, "fetch v10 from partition {p}");
    }
    // From v11 (KIP-392) a follower serves consumers, up to its own high watermark; a
    // broker with no replica still refuses.
    let follower_read = c.fetch("t", 0, 0).await;
    assert_eq!((follower_read.error_code, follower_read.high_watermark), (0, 0));
    assert_eq!(c.fetch("t", 1, 0).await.error_code, not_leader);
    // The request's leader epoch is checked first, as Kafka does.
    let mut req = fetch_request("t", 0, 0, 1 << 20);
    req.topics[0].partitions[0].current_leader_epoch = 0;
    assert_eq!(c.fetch_with(req.clone()).await.error_code, ResponseError::FencedLeaderEpoch.code());
    // KIP-951 (Fetch v16+, Produce v10+): the refusal names the leader the local replica
    // follows, in its epoch; broker 2 is not registered, so no endpoint is listed.
    let by_id = |mut req: FetchRequest| {
        req.topics[0].topic = Default::default();
        req.topics[0].topic_id = topic_id;
        req
    };
    let resp = c.send(16, by_id(req.clone())).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, ResponseError::FencedLeaderEpoch.code());
    assert_eq!((p.current_leader.leader_id.0, p.current_leader.leader_epoch), (2, 1));
    assert!(resp.node_endpoints.is_empty(), "{:?}", resp.node_endpoints);
    let resp = c.send(10, produce_request("t", 0, batches::values("x", 1), 1)).await;
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, not_leader);
    assert_eq!((p.current_leader.leader_id.0, p.current_leader.leader_epoch), (2, 1));
    assert!(resp.node_endpoints.is_empty(), "{:?}", resp.node_endpoints);
    // No local replica: the metadata image names the leader (here still this broker, as
    // the hand-made image was given only to the replica manager).
    let resp = c.send(16, by_id(fetch_request("t", 1, 0, 1 << 20).with_max_wait_ms(0))).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, not_leader);
    assert_eq!(p.current_leader.leader_id.0, 1);
    let ends: Vec<_> = resp.node_endpoints.iter().map(|e| (e.node_id.0, e.port)).collect();
    assert_eq!(ends, [(1, i32::from(broker.addr().port()))]);
    req.topics[0].partitions[0].current_leader_epoch = 5;
    assert_eq!(c.fetch_with(req).await.error_code, ResponseError::UnknownLeaderEpoch.code());
    // A replica fetch to a follower is refused too.
    let mut req = fetch_request("t", 0, 0, 1 << 20).with_replica_id(BrokerId(3));
    req.topics[0].partitions[0].current_leader_epoch = 1;
    assert_eq!(c.fetch_with(req).await.error_code, not_leader);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_fetch_reads_past_the_high_watermark_and_moves_it() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let topic_id = c.create_topic_ok("t", 1, &[]).await;
    reassign(&broker, "t", &[(0, &[1, 2], 1, 3)]);
    let r = c.produce_acks("t", 0, batches::values("x", 4), 1).await;
    assert_eq!(r.error_code, 0);
    // A consumer sees nothing: follower 2 has not fetched.
    let consumer = c.fetch("t", 0, 0).await;
    assert_eq!((consumer.error_code, consumer.high_watermark), (0, 0));
    assert!(batches::decode_values(&consumer.records).is_empty());

    // Follower 2, Fetch v12 (replica_id in the request): records to the log end offset.
    let replica_fetch = |offset: i64, last_fetched_epoch: i32| {
        let mut req = fetch_request("t", 0, offset, 1 << 20).with_replica_id(BrokerId(2));
        let p = &mut req.topics[0].partitions[0];
        p.current_leader_epoch = 3;
        p.last_fetched_epoch = last_fetched_epoch;
        req
    };
    let got = c.fetch_with(replica_fetch(0, -1)).await;
    assert_eq!(got.error_code, 0);
    assert_eq!(batches::decode_values(&got.records).len(), 4);
    assert_eq!(got.high_watermark, 0);
    // Fetching from the end records the follower's position: the high watermark moves,
    // and consumers see the records.
    let got = c.fetch_with(replica_fetch(4, 3)).await;
    assert_eq!((got.error_code, got.high_watermark, got.diverging_epoch.epoch), (0, 4, -1));
    assert_eq!(batches::decode_values(&c.fetch("t", 0, 0).await.records).len(), 4);
    // A follower that claims epoch 3 went on past 4 diverges: epoch 3 ends at 4 here.
    let got = c.fetch_with(replica_fetch(6, 3)).await;
    assert_eq!((got.diverging_epoch.epoch, got.diverging_epoch.end_offset), (3, 4));
    assert!(got.records.as_ref().is_none_or(|r| r.is_empty()));

    // The same over Fetch v17 (ReplicaState, topics by id).
    let mut req = replica_fetch(4, 3).with_replica_id(BrokerId(-1));
    req.replica_state = ReplicaState::default().with_replica_id(BrokerId(2)).with_replica_epoch(-1);
    req.topics[0].topic_id = topic_id;
    let resp = c.send(17, req).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 4));
    broker.shutdown().await;
}
