//! Three whole brokers (combined broker and controller roles) on loopback form one
//! cluster: every broker registers through the controller quorum, Metadata from any of
//! them lists all three, and a topic with replication factor 3 gets its replicas placed
//! on all three with leaders spread; a fourth, broker-only node joins as a learner.
//! (Partition data is not replicated yet.)

mod common;

use std::time::{Duration, Instant};

use common::requests::create_topics_request;
use common::Client;
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest, MetadataResponse};
use runnel::config::BrokerConfig;
use runnel::Broker;

const METADATA_V: i16 = 12;
const DEADLINE: Duration = Duration::from_secs(20);

/// Free loopback ports for the controller listeners (bound, then released: the voters
/// must be known before any broker starts).
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> =
        (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    held.iter().map(|l| l.local_addr().unwrap().port()).collect()
}

async fn metadata(addr: std::net::SocketAddr) -> MetadataResponse {
    let mut c = Client::connect(addr).await;
    c.send(METADATA_V, MetadataRequest::default().with_topics(None)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_brokers_register_and_place_replicas_on_all_of_them() {
    let ports = free_ports(3);
    let voters: String =
        ports.iter().enumerate().map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1)).collect::<Vec<_>>().join(",");
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let starts = (0..3).map(|i| {
        let mut config = BrokerConfig::ephemeral(dirs[i].path());
        config.node_id = i as i32 + 1;
        config.controller_quorum_voters = runnel::config::parse_voters(&voters).unwrap();
        config.rack = Some(format!("rack-{i}"));
        config.validate().unwrap();
        tokio::spawn(Broker::start(config))
    });
    let mut brokers = Vec::new();
    for s in starts.collect::<Vec<_>>() {
        brokers.push(s.await.unwrap().expect("broker starts"));
    }

    let started = Instant::now();
    for b in &brokers {
        loop {
            let md = metadata(b.local_addr()).await;
            if md.brokers.len() == 3 {
                let racks: Vec<_> = md.brokers.iter().map(|b| b.rack.as_ref().map(|r| r.to_string())).collect();
                assert!(racks.iter().all(Option::is_some), "{racks:?}");
                break;
            }
            assert!(started.elapsed() < DEADLINE, "broker {} lists {:?}", b.local_addr(), md.brokers);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    let mut c = Client::connect(brokers[1].local_addr()).await;
    let req: CreateTopicsRequest = create_topics_request("replicated", 3, 3, &[]);
    let resp = c.send(5, req).await;
    assert_eq!(resp.topics[0].error_code, 0, "{:?}", resp.topics[0]);

    let started = Instant::now();
    for b in &brokers {
        loop {
            let md = metadata(b.local_addr()).await;
            let topic = md.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "replicated"));
            if let Some(t) = topic {
                assert_eq!(t.partitions.len(), 3);
                let mut leaders = Vec::new();
                for p in &t.partitions {
                    let mut replicas: Vec<i32> = p.replica_nodes.iter().map(|r| r.0).collect();
                    assert_eq!(p.leader_id.0, replicas[0], "the first replica leads");
                    leaders.push(p.leader_id.0);
                    replicas.sort_unstable();
                    assert_eq!(replicas, vec![1, 2, 3]);
                }
                leaders.sort_unstable();
                assert_eq!(leaders, vec![1, 2, 3], "leaders spread over the brokers");
                break;
            }
            assert!(started.elapsed() < DEADLINE, "broker {} never saw the topic", b.local_addr());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    // A broker-only node follows the metadata log as a learner and registers too.
    let dir = tempfile::tempdir().unwrap();
    let mut config = BrokerConfig::ephemeral(dir.path());
    config.node_id = 4;
    config.process_roles = "broker".into();
    config.controller_listen = Some("127.0.0.1:0".into());
    config.controller_quorum_voters = runnel::config::parse_voters(&voters).unwrap();
    config.validate().unwrap();
    brokers.push(Broker::start(config).await.expect("broker-only node starts"));
    let started = Instant::now();
    for b in &brokers {
        loop {
            let md = metadata(b.local_addr()).await;
            let sees_topic = md.topics.iter().any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "replicated"));
            if md.brokers.len() == 4 && sees_topic {
                break;
            }
            assert!(started.elapsed() < DEADLINE, "broker {} lists {:?}", b.local_addr(), md.brokers);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let mut c = Client::connect(brokers[3].local_addr()).await;
    let resp = c.send(5, create_topics_request("via-broker-only", 1, 2, &[])).await;
    assert_eq!(resp.topics[0].error_code, 0, "{:?}", resp.topics[0]);
    let md = metadata(brokers[3].local_addr()).await;
    assert!(md.topics.iter().any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "via-broker-only")));

    for b in brokers {
        b.shutdown().await;
    }
}
