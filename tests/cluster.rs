//! Three whole brokers (combined broker and controller roles) on loopback form one
//! cluster: every broker registers through the controller quorum, Metadata from any of
//! them lists all three, and a topic with replication factor 3 gets its replicas placed
//! on all three with leaders spread; a fourth, broker-only node joins as a learner.
//! DescribeQuorum shows the quorum from any broker, and ElectLeaders moves leadership
//! back to the preferred replica after a broker's restart.

mod common;

use std::time::{Duration, Instant};

use common::requests::create_topics_request;
use common::Client;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{
    CreateTopicsRequest, DescribeQuorumRequest, ElectLeadersRequest, ElectLeadersResponse, MetadataRequest,
    MetadataResponse,
};
use runnel::config::BrokerConfig;
use runnel::Broker;

const METADATA_V: i16 = 12;
const DEADLINE: Duration = Duration::from_secs(20);

/// Free loopback ports for the controller listeners (the voters must be known before any
/// broker starts), below the ephemeral range so no `:0` listener takes one meanwhile.
fn free_ports(n: usize) -> Vec<u16> {
    runnel::server::embedded::controller_ports(n).unwrap()
}

async fn metadata(addr: std::net::SocketAddr) -> MetadataResponse {
    let mut c = Client::connect(addr).await;
    c.send(METADATA_V, MetadataRequest::default().with_topics(None)).await
}

/// Three voters on loopback, each a combined broker and controller, with their configs
/// (to restart one) and the voters string (to add a broker-only node).
async fn start_three(dirs: &[tempfile::TempDir]) -> (Vec<Broker>, Vec<BrokerConfig>, String) {
    let ports = free_ports(3);
    let voters: String =
        ports.iter().enumerate().map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1)).collect::<Vec<_>>().join(",");
    let configs: Vec<BrokerConfig> = (0..3)
        .map(|i| {
            let mut config = BrokerConfig::ephemeral(dirs[i].path());
            config.node_id = i as i32 + 1;
            config.controller_quorum_voters = runnel::config::parse_voters(&voters).unwrap();
            config.rack = Some(format!("rack-{i}"));
            config.validate().unwrap();
            config
        })
        .collect();
    let starts: Vec<_> = configs.iter().map(|c| tokio::spawn(Broker::start(c.clone()))).collect();
    let mut brokers = Vec::new();
    for s in starts {
        brokers.push(s.await.unwrap().expect("broker starts"));
    }
    (brokers, configs, voters)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_brokers_register_and_place_replicas_on_all_of_them() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (mut brokers, _, voters) = start_three(&dirs).await;

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

    // DescribeQuorum from any node, the broker-only one too, names the same leader, the
    // three voters with their controller endpoints, and the learner as an observer.
    let mut leaders = Vec::new();
    for b in &brokers {
        let mut c = Client::connect(b.local_addr()).await;
        let resp = c.send(2, describe_quorum_request()).await;
        assert_eq!(resp.error_code, 0, "{resp:?}");
        let p = &resp.topics[0].partitions[0];
        assert_eq!(p.error_code, 0, "{p:?}");
        let mut voters: Vec<i32> = p.current_voters.iter().map(|r| r.replica_id.0).collect();
        voters.sort_unstable();
        assert_eq!(voters, vec![1, 2, 3]);
        assert_eq!(p.observers.iter().map(|r| r.replica_id.0).collect::<Vec<_>>(), vec![4]);
        assert!(p.high_watermark > 0 && p.leader_epoch > 0, "{p:?}");
        let leader = p.current_voters.iter().find(|r| r.replica_id == p.leader_id).expect("the leader is a voter");
        assert!(leader.log_end_offset >= p.high_watermark, "{p:?}");
        assert_eq!(resp.nodes.len(), 3, "{resp:?}");
        leaders.push(p.leader_id.0);
    }
    leaders.dedup();
    assert_eq!(leaders.len(), 1, "one quorum leader: {leaders:?}");
    // v0 and v1 have no endpoints and no directory ids: the answer leaves them out (it
    // could not be encoded with them).
    for v in [0, 1] {
        let mut c = Client::connect(brokers[3].local_addr()).await;
        let resp = c.send(v, describe_quorum_request()).await;
        assert_eq!(resp.topics[0].partitions[0].current_voters.len(), 3, "v{v}: {resp:?}");
        assert!(resp.nodes.is_empty(), "v{v}: {resp:?}");
    }
    // Any other partition of any other topic is not the metadata log.
    let mut c = Client::connect(brokers[0].local_addr()).await;
    let mut other = describe_quorum_request();
    other.topics[0].topic_name = common::requests::topic_name("replicated");
    let resp = c.send(2, other).await;
    assert_eq!(resp.topics[0].partitions[0].error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");

    // The broker-only node first: while voters stop one by one, each controlled shutdown
    // still has a quorum to commit it (stopping voters first would leave the last two
    // asking a quorum that is gone, and each would wait out its timeout).
    for b in brokers.into_iter().rev() {
        b.shutdown().await;
    }
}

fn describe_quorum_request() -> DescribeQuorumRequest {
    DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(common::requests::topic_name("__cluster_metadata"))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])])
}

async fn elect(
    addr: std::net::SocketAddr,
    election_type: i8,
    partitions: Option<&[(&str, i32)]>,
) -> ElectLeadersResponse {
    let partitions = partitions.map(|ps| {
        ps.iter()
            .map(|(t, p)| {
                TopicPartitions::default().with_topic(common::requests::topic_name(t)).with_partitions(vec![*p])
            })
            .collect()
    });
    let req = ElectLeadersRequest::default()
        .with_election_type(election_type)
        .with_topic_partitions(partitions)
        .with_timeout_ms(30_000);
    Client::connect(addr).await.send(2, req).await
}

/// (topic, partition, error code) of every result.
fn election_results(resp: &ElectLeadersResponse) -> Vec<(String, i32, i16)> {
    resp.replica_election_results
        .iter()
        .flat_map(|t| t.partition_result.iter().map(move |p| (t.topic.0.to_string(), p.partition_id, p.error_code)))
        .collect()
}

/// (leader, replicas, isr) of partition 0 of `topic` as `addr` sees it.
async fn partition0(addr: std::net::SocketAddr, topic: &str) -> Option<(i32, Vec<i32>, Vec<i32>)> {
    let md = metadata(addr).await;
    let t = md.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?;
    let p = t.partitions.first()?;
    Some((p.leader_id.0, p.replica_nodes.iter().map(|r| r.0).collect(), p.isr_nodes.iter().map(|r| r.0).collect()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preferred_leader_election_moves_leadership_back_after_a_restart() {
    const PREFERRED: i8 = 0;
    const UNCLEAN: i8 = 1;
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (mut brokers, configs, _) = start_three(&dirs).await;
    let mut c = Client::connect(brokers[0].local_addr()).await;
    let started = Instant::now();
    loop {
        // Brokers join fenced; a replicated topic needs all three unfenced.
        let resp = c.send(5, create_topics_request("elect", 1, 3, &[])).await;
        if resp.topics[0].error_code == 0 {
            break;
        }
        assert!(started.elapsed() < DEADLINE, "{:?}", resp.topics[0]);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (preferred, replicas, _) = partition0(brokers[0].local_addr(), "elect").await.unwrap();
    assert_eq!(preferred, replicas[0]);
    let other = brokers[replicas[1] as usize - 1].local_addr();
    // ElectLeaders classifies partitions by the asked broker's own image, which applies
    // the commit made through broker 1 a little later (under load, after this point).
    let started = Instant::now();
    while partition0(other, "elect").await.is_none() {
        assert!(started.elapsed() < DEADLINE, "the topic never reached the other broker's metadata");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Nothing to do while the preferred replica leads; an unknown partition is named.
    let resp = elect(other, PREFERRED, Some(&[("elect", 0), ("nope", 0), ("elect", 7)])).await;
    assert_eq!(resp.error_code, 0);
    assert_eq!(
        election_results(&resp),
        vec![("elect".into(), 0, 84), ("elect".into(), 7, 3), ("nope".into(), 0, 3)],
        "ELECTION_NOT_NEEDED, UNKNOWN_TOPIC_OR_PARTITION"
    );
    let resp = elect(other, UNCLEAN, Some(&[("elect", 0)])).await;
    assert_eq!(election_results(&resp), vec![("elect".into(), 0, 84)], "it has a leader");

    // The preferred leader stops (leadership moves off) and comes back as a follower.
    let i = preferred as usize - 1;
    brokers.remove(i).shutdown().await;
    let started = Instant::now();
    loop {
        if let Some((leader, _, isr)) = partition0(other, "elect").await {
            if leader != preferred && leader != -1 && !isr.contains(&preferred) {
                break;
            }
        }
        assert!(started.elapsed() < DEADLINE, "leadership never moved off {preferred}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    brokers.insert(i, Broker::start(configs[i].clone()).await.expect("broker restarts"));
    let started = Instant::now();
    loop {
        let (leader, _, isr) = partition0(other, "elect").await.unwrap();
        if isr.len() == 3 {
            assert_ne!(leader, preferred, "nothing moves leadership back by itself");
            break;
        }
        assert!(started.elapsed() < DEADLINE, "{preferred} never rejoined the ISR: {isr:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A request for every partition elects it (and lists only what it elected or could not).
    let resp = elect(other, PREFERRED, None).await;
    assert_eq!(resp.error_code, 0);
    assert!(election_results(&resp).contains(&("elect".into(), 0, 0)), "{resp:?}");
    let (leader, _, isr) = partition0(other, "elect").await.unwrap();
    assert_eq!((leader, isr.len()), (preferred, 3), "applied on the broker that answered");
    let resp = elect(other, PREFERRED, Some(&[("elect", 0)])).await;
    assert_eq!(election_results(&resp), vec![("elect".into(), 0, 84)]);

    for b in brokers {
        b.shutdown().await;
    }
}

/// UnregisterBroker from any client names a broker that is running (the adversarial
/// pass's one-request outage): it leaves every ISR and leadership as Kafka's does, and
/// then registers again by itself, is let back in by its heartbeats and rejoins the ISR,
/// where Kafka's broker stays out until it is restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_broker_unregistered_by_a_client_registers_again_and_rejoins_the_isr() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (brokers, _, _) = start_three(&dirs).await;
    let mut c = Client::connect(brokers[0].local_addr()).await;
    let started = Instant::now();
    loop {
        let resp = c.send(5, create_topics_request("unreg", 1, 3, &[])).await;
        if resp.topics[0].error_code == 0 {
            break;
        }
        assert!(started.elapsed() < DEADLINE, "{:?}", resp.topics[0]);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let addr = brokers[0].local_addr();
    let started = Instant::now();
    while partition0(addr, "unreg").await.is_none_or(|(_, _, isr)| isr.len() != 3) {
        assert!(started.elapsed() < DEADLINE, "the ISR never filled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // An HTTP produce to a broker that does not lead the partition names the leader.
    let (leader, _, _) = partition0(addr, "unreg").await.unwrap();
    let other = brokers.iter().find(|b| b.context().config.node_id != leader).unwrap();
    let (status, body) =
        http_post(other.http_addr().unwrap(), "/topics/unreg/messages", r#"{"value":"v","partition":0}"#).await;
    assert_eq!(status, 503, "{body}");
    let leader_addr = brokers.iter().find(|b| b.context().config.node_id == leader).unwrap().local_addr();
    assert!(
        body.contains(&format!(r#""leader":{{"host":"127.0.0.1","node_id":{leader},"port":{}}}"#, leader_addr.port())),
        "{body}"
    );

    let req = kafka_protocol::messages::UnregisterBrokerRequest::default()
        .with_broker_id(kafka_protocol::messages::BrokerId(3));
    let resp = c.send(0, req).await;
    assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);

    let started = Instant::now();
    loop {
        let md = metadata(addr).await;
        let registered = md.brokers.iter().any(|b| b.node_id.0 == 3);
        let in_isr = partition0(addr, "unreg").await.is_some_and(|(leader, _, isr)| leader > 0 && isr.contains(&3));
        if registered && in_isr {
            break;
        }
        assert!(started.elapsed() < DEADLINE, "broker 3 never came back: {:?}", partition0(addr, "unreg").await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for b in brokers {
        b.shutdown().await;
    }
}

/// POSTs `body` (JSON) to `path`; (status, body).
async fn http_post(addr: std::net::SocketAddr, path: &str, body: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: runnel\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await.unwrap();
    let status = reply.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, reply.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}
