//! KIP-951 over the wire: two whole brokers form a cluster; a Produce or Fetch sent to the
//! broker that does not lead a partition is answered NOT_LEADER_OR_FOLLOWER with the
//! partition's current leader (id and epoch, from the metadata image) and that leader's
//! endpoint in `node_endpoints`, from the versions that have those fields (Produce v10,
//! Fetch v16); older versions get the bare error. (FENCED_LEADER_EPOCH: tests/replica_roles.rs.)
//! A broker stopping in a controlled way keeps answering for a moment after its
//! leadership moved off, so a client that still routes to it is sent on, not refused.

mod common;

use std::time::{Duration, Instant};

use common::batches;
use common::requests::*;
use common::Client;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::FetchTopic;
use runnel::config::BrokerConfig;
use runnel::Broker;

const DEADLINE: Duration = Duration::from_secs(30);

/// Free loopback ports for the controller listeners (the voters must be known before any
/// broker starts), below the ephemeral range so no `:0` listener takes one meanwhile.
fn free_ports(n: usize) -> Vec<u16> {
    runnel::server::embedded::controller_ports(n).unwrap()
}

async fn two_brokers(dirs: &[tempfile::TempDir]) -> Vec<Broker> {
    let ports = free_ports(2);
    let voters = format!("1@127.0.0.1:{},2@127.0.0.1:{}", ports[0], ports[1]);
    let starts: Vec<_> = (0..2)
        .map(|i| {
            let mut config = BrokerConfig::ephemeral(dirs[i].path());
            config.node_id = i as i32 + 1;
            config.controller_quorum_voters = runnel::config::parse_voters(&voters).unwrap();
            config.rack = Some(format!("rack-{}", i + 1));
            config.validate().unwrap();
            tokio::spawn(Broker::start(config))
        })
        .collect();
    let mut brokers = Vec::new();
    for s in starts {
        brokers.push(s.await.unwrap().expect("broker starts"));
    }
    brokers
}

/// Waits until broker 1's Metadata lists both brokers and `topic` with every partition
/// led; returns (partition, leader, leader epoch) for each.
async fn led_partitions(c: &mut Client, topic: &str) -> Vec<(i32, i32, i32)> {
    let started = Instant::now();
    loop {
        let md = c.metadata(&[topic]).await;
        let t = &md.topics[0];
        if md.brokers.len() == 2 && t.error_code == 0 && !t.partitions.is_empty() {
            let parts: Vec<_> =
                t.partitions.iter().map(|p| (p.partition_index, p.leader_id.0, p.leader_epoch)).collect();
            if parts.iter().all(|(_, leader, _)| *leader > 0) {
                return parts;
            }
        }
        assert!(started.elapsed() < DEADLINE, "metadata never settled: {md:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits for both brokers to be in (unfenced), then creates `topic`: replicas are placed
/// only on registered brokers.
async fn create_topic_on_both(c: &mut Client, topic: &str, partitions: i32, replication_factor: i16) {
    let started = Instant::now();
    while c.metadata(&[]).await.brokers.len() < 2 {
        assert!(started.elapsed() < DEADLINE, "broker 2 never joined");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let resp = c.send(5, create_topics_request(topic, partitions, replication_factor, &[])).await;
    assert_eq!(resp.topics[0].error_code, 0, "{:?}", resp.topics[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_leader_answers_name_the_current_leader_and_its_endpoint() {
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let brokers = two_brokers(&dirs).await;
    let mut c = Client::connect(brokers[0].local_addr()).await;
    create_topic_on_both(&mut c, "hinted", 4, 1).await;
    let parts = led_partitions(&mut c, "hinted").await;
    let &(remote, leader, epoch) = parts.iter().find(|(_, l, _)| *l == 2).expect("a partition led by broker 2");
    let &(local, _, _) = parts.iter().find(|(_, l, _)| *l == 1).expect("a partition led by broker 1");
    let topic_id = c.metadata(&["hinted"]).await.topics[0].topic_id;
    let b2 = brokers[1].local_addr();
    let not_leader = ResponseError::NotLeaderOrFollower.code();

    for v in [9, 10, 12, 13] {
        let mut req = produce_request("hinted", remote, batches::values("x", 1), 1);
        if v >= 13 {
            req.topic_data[0].name = Default::default();
            req.topic_data[0].topic_id = topic_id;
        }
        let resp = c.send(v, req).await;
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(p.error_code, not_leader, "produce v{v}");
        if v >= 10 {
            assert_eq!((p.current_leader.leader_id.0, p.current_leader.leader_epoch), (leader, epoch), "produce v{v}");
            assert_eq!(resp.node_endpoints.len(), 1, "produce v{v}: {:?}", resp.node_endpoints);
            let e = &resp.node_endpoints[0];
            assert_eq!((e.node_id.0, e.host.as_str(), e.port), (2, "127.0.0.1", i32::from(b2.port())), "v{v}");
            assert_eq!(e.rack.as_deref(), Some("rack-2"));
        } else {
            assert_eq!(p.current_leader.leader_id.0, -1, "produce v{v}: no hint before v10");
            assert!(resp.node_endpoints.is_empty());
        }
        // A partition this broker leads: accepted, no endpoints.
        let ok = c.send(v, produce_request("hinted", local, batches::values("y", 1), 1)).await;
        if v < 13 {
            assert_eq!(ok.responses[0].partition_responses[0].error_code, 0, "produce v{v} to the leader");
            assert!(ok.node_endpoints.is_empty());
        }
    }

    let fetch_at = |v: i16, partition: i32, current_leader_epoch: i32| {
        let mut req = fetch_request("hinted", partition, 0, 1 << 20).with_max_wait_ms(0);
        req.topics[0].partitions[0].current_leader_epoch = current_leader_epoch;
        if v >= 13 {
            let parts = std::mem::take(&mut req.topics[0].partitions);
            req.topics = vec![FetchTopic::default().with_topic_id(topic_id).with_partitions(parts)];
        }
        req
    };
    for v in [15, 16, 17, 18] {
        let resp = c.send(v, fetch_at(v, remote, -1)).await;
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, not_leader, "fetch v{v}");
        if v >= 16 {
            assert_eq!((p.current_leader.leader_id.0, p.current_leader.leader_epoch), (leader, epoch), "fetch v{v}");
            let ends: Vec<_> = resp.node_endpoints.iter().map(|e| (e.node_id.0, e.port)).collect();
            assert_eq!(ends, [(2, i32::from(b2.port()))], "fetch v{v}");
        } else {
            assert_eq!(p.current_leader.leader_id.0, -1, "fetch v{v}: no hint before v16");
            assert!(resp.node_endpoints.is_empty());
        }
    }
    drop(c);
    // Together: the second of two voters to stop alone would wait for a quorum.
    let mut brokers = brokers.into_iter();
    let (b1, b2) = (brokers.next().unwrap(), brokers.next().unwrap());
    tokio::join!(b1.shutdown(), b2.shutdown());
}

/// A client with a connection to a partition's leader when the leader is stopped: the
/// answers stay successes while it leads, then (leadership moved off, the broker still
/// answering) NOT_LEADER_OR_FOLLOWER naming the new leader and its endpoint, and a new
/// connection still gets Metadata that names the new leader. Before the grace the
/// listener closed as soon as the move applied, so a client that had not sent in that
/// instant found the port refused and (franz-go) waited seconds to refresh its metadata.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_broker_sends_clients_to_the_new_leader_before_it_closes() {
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut brokers = two_brokers(&dirs).await;
    let mut c = Client::connect(brokers[0].local_addr()).await;
    create_topic_on_both(&mut c, "moving", 1, 2).await;
    // Both replicas in sync, so the controlled shutdown has somewhere to move it.
    let started = Instant::now();
    let leader = loop {
        let md = c.metadata(&["moving"]).await;
        if let Some(p) = md.topics[0].partitions.first() {
            if p.leader_id.0 > 0 && p.isr_nodes.len() == 2 {
                break p.leader_id.0;
            }
        }
        assert!(started.elapsed() < DEADLINE, "never in sync: {md:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let follower = 3 - leader;
    // The leader's own image too: a broker that does not yet see a live follower in the
    // ISR has nothing to move, and stops without the grace.
    let mut on_leader = Client::connect(brokers[leader as usize - 1].local_addr()).await;
    while on_leader.metadata(&["moving"]).await.topics[0].partitions.first().map(|p| p.isr_nodes.len()) != Some(2) {
        assert!(started.elapsed() < DEADLINE, "the leader never saw its follower in sync");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(on_leader);
    let stopping = brokers.remove(leader as usize - 1);
    let staying = brokers.remove(0);
    let (stopping_addr, staying_addr) = (stopping.local_addr(), staying.local_addr());
    let mut to_leader = Client::connect(stopping_addr).await;
    let stop = tokio::spawn(stopping.shutdown());

    let not_leader = ResponseError::NotLeaderOrFollower.code();
    let started = Instant::now();
    let mut accepted = 0;
    loop {
        let resp = to_leader
            .try_send(10, produce_request("moving", 0, batches::values("m", 1), 1))
            .await
            .unwrap_or_else(|e| panic!("after {accepted} accepted, before any NOT_LEADER_OR_FOLLOWER: {e:#}"));
        let p = &resp.responses[0].partition_responses[0];
        if p.error_code == 0 {
            accepted += 1;
            assert!(started.elapsed() < DEADLINE, "leadership never moved off broker {leader}");
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        assert_eq!(p.error_code, not_leader, "{p:?}");
        assert_eq!(p.current_leader.leader_id.0, follower, "{p:?}");
        let ends: Vec<_> = resp.node_endpoints.iter().map(|e| (e.node_id.0, e.port)).collect();
        assert_eq!(ends, [(follower, i32::from(staying_addr.port()))]);
        break;
    }
    // Still listening: a client that connects now (stale bootstrap or metadata) is told
    // where the partition went.
    let md = Client::connect(stopping_addr).await.metadata(&["moving"]).await;
    assert_eq!(md.topics[0].partitions[0].leader_id.0, follower, "{md:?}");

    stop.await.unwrap();
    staying.shutdown().await;
}
