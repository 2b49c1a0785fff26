//! The inter-broker listener: three brokers whose client addresses the other brokers
//! cannot reach (advertised as 127.0.0.2, while they bind 127.0.0.1, as a container's
//! `localhost:<published port>` is unreachable from its neighbours) replicate over their
//! second listener; each listener answers with the brokers' addresses on that listener
//! (Metadata, DescribeCluster, FindCoordinator, KIP-951 hints), as Kafka answers per
//! listener.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::batches;
use common::requests::*;
use common::Client;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{DescribeClusterRequest, FindCoordinatorRequest};
use runnel::server::embedded::EmbeddedCluster;

const DEADLINE: Duration = Duration::from_secs(30);

/// Each broker's two addresses: (client listener, inter-broker listener).
fn listeners(cluster: &EmbeddedCluster) -> Vec<(i32, SocketAddr, SocketAddr)> {
    (1..=3)
        .map(|id| {
            let b = cluster.broker(id).expect("running");
            (id, b.local_addr(), b.inter_broker_addr().expect("an inter-broker listener"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_fetch_over_the_inter_broker_listener_and_each_listener_shows_its_own_addresses() {
    let cluster = EmbeddedCluster::start_with(3, |_, c| {
        c.advertised_listener = Some("127.0.0.2:0".into());
        c.inter_broker_listen = Some("127.0.0.1:0".into());
    })
    .await
    .unwrap();
    let addrs = listeners(&cluster);
    let client_view: Vec<(i32, String, i32)> =
        addrs.iter().map(|(id, c, _)| (*id, "127.0.0.2".to_owned(), i32::from(c.port()))).collect();
    let broker_view: Vec<(i32, String, i32)> =
        addrs.iter().map(|(id, _, b)| (*id, "127.0.0.1".to_owned(), i32::from(b.port()))).collect();
    let (_, client_1, inter_1) = addrs[0];
    let mut on_client = Client::connect(client_1).await;
    let mut on_inter = Client::connect(inter_1).await;

    let md = |m: kafka_protocol::messages::MetadataResponse| -> Vec<(i32, String, i32)> {
        m.brokers.iter().map(|b| (b.node_id.0, b.host.to_string(), b.port)).collect()
    };
    assert_eq!(md(on_client.metadata(&[]).await), client_view);
    assert_eq!(md(on_inter.metadata(&[]).await), broker_view);
    for (c, view) in [(&mut on_client, &client_view), (&mut on_inter, &broker_view)] {
        let dc = c.send(0, DescribeClusterRequest::default()).await;
        let seen: Vec<_> = dc.brokers.iter().map(|b| (b.broker_id.0, b.host.to_string(), b.port)).collect();
        assert_eq!(&seen, view);
    }

    // Every acks=all write needs both followers: they can only fetch over the
    // inter-broker listener.
    let created = on_inter.send(7, create_topics_request("replicated", 1, 3, &[("min.insync.replicas", "3")])).await;
    assert_eq!(created.topics[0].error_code, 0, "{:?}", created.topics[0]);
    let started = Instant::now();
    let leader = loop {
        let m = on_inter.metadata(&["replicated"]).await;
        let p = m.topics[0].partitions.first().map(|p| (p.leader_id.0, p.isr_nodes.len()));
        if let Some((leader, 3)) = p.filter(|(l, _)| *l > 0) {
            break leader;
        }
        assert!(started.elapsed() < DEADLINE, "no leader with a full ISR: {m:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (_, leader_client, leader_inter) = addrs[leader as usize - 1];
    // Broker 1 can apply the committed topic before the leader does; until the leader has,
    // it answers the retriable UNKNOWN_TOPIC_OR_PARTITION, which a client would retry.
    let leader_ctx = cluster.broker(leader).unwrap().context().clone();
    while !leader_ctx.replicas.all_partitions().iter().any(|p| p.topic == "replicated" && p.is_leader()) {
        assert!(started.elapsed() < DEADLINE, "broker {leader} never became the leader it is named as");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut to_leader = Client::connect(leader_inter).await;
    for round in 0..3 {
        let p = to_leader.produce("replicated", 0, batches::values(&format!("r{round}-"), 10)).await;
        assert_eq!((p.error_code, p.base_offset), (0, round * 10), "{:?}", p.error_message);
    }
    // Written on every replica (each broker's own log).
    let started = Instant::now();
    for (id, _, _) in &addrs {
        let ctx = cluster.broker(*id).unwrap().context().clone();
        loop {
            let p = ctx.replicas.all_partitions().into_iter().find(|p| p.topic == "replicated");
            if p.as_ref().is_some_and(|p| p.log_end_offset() == 30) {
                break;
            }
            assert!(started.elapsed() < DEADLINE, "broker {id} never got all 30 records");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    // KIP-951 hints and FindCoordinator: the leader at its address on the asking listener.
    let follower = addrs.iter().find(|(id, _, _)| *id != leader).unwrap();
    let not_leader = ResponseError::NotLeaderOrFollower.code();
    for (addr, expected) in
        [(follower.1, ("127.0.0.2", leader_client.port())), (follower.2, ("127.0.0.1", leader_inter.port()))]
    {
        let mut c = Client::connect(addr).await;
        let resp = c.send(10, produce_request("replicated", 0, batches::values("x", 1), -1)).await;
        assert_eq!(resp.responses[0].partition_responses[0].error_code, not_leader);
        let ends: Vec<_> = resp.node_endpoints.iter().map(|e| (e.node_id.0, e.host.to_string(), e.port)).collect();
        assert_eq!(ends, [(leader, expected.0.to_owned(), i32::from(expected.1))], "asked on {addr}");
        let find = FindCoordinatorRequest::default().with_key(common::str("g")).with_key_type(0);
        let resp = c.send(3, find).await;
        assert_eq!(resp.error_code, 0, "{resp:?}");
        let coordinator = addrs[resp.node_id.0 as usize - 1];
        let port = if addr == follower.1 { coordinator.1.port() } else { coordinator.2.port() };
        assert_eq!(
            (resp.host.as_str(), resp.port),
            (if addr == follower.1 { "127.0.0.2" } else { "127.0.0.1" }, i32::from(port))
        );
    }
    let configs = on_client.send(DESCRIBE_CONFIGS_V, describe_configs_request(RESOURCE_BROKER, "1")).await;
    let advertised = config_entry(&configs.results[0], "advertised.listeners").and_then(|(v, _)| v);
    let expected = format!("PLAINTEXT://127.0.0.2:{},BROKER://127.0.0.1:{}", client_1.port(), inter_1.port());
    assert_eq!(advertised, Some(expected));
    drop((on_client, on_inter, to_leader));
    cluster.shutdown().await;
}
