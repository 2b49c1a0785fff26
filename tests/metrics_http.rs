//! The HTTP listener: `/health`, `/ready`, `/metrics` after real Kafka traffic (produce
//! with each acks, a fetch, a consumer group that commits), with the exposition parsed
//! strictly and the values checked against what the traffic must have produced.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use bytes::Bytes;
use common::batches::values;
use common::requests::{produce_request, PRODUCE_V};
use common::TestBroker;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use runnel::config::FlushMode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MEMBER_ID_REQUIRED: i16 = 79;

/// Sends `request` as is, reads until the server closes; returns (status, body).
async fn http_raw(addr: SocketAddr, request: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect to the HTTP listener");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut reply = Vec::new();
    tokio::time::timeout(common::REPLY_TIMEOUT, stream.read_to_end(&mut reply))
        .await
        .expect("HTTP reply within the timeout")
        .unwrap();
    let text = String::from_utf8(reply).expect("UTF-8 reply");
    let status_line = text.lines().next().unwrap_or_default().to_owned();
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{text:?}"));
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    http_raw(addr, &format!("GET {path} HTTP/1.1\r\nHost: runnel\r\nConnection: close\r\n\r\n")).await
}

/// A sample's name and its labels, sorted.
type Key = (String, BTreeMap<String, String>);

/// Parses the Prometheus text format strictly: every line is `# HELP name text`,
/// `# TYPE name kind`, or `name{label="value",...} value` with a float value; label
/// values are quoted; every sample belongs to a declared family. Panics otherwise.
fn parse_exposition(text: &str) -> BTreeMap<Key, f64> {
    let mut samples = BTreeMap::new();
    let mut families: BTreeMap<String, String> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kind, name, tail) = (parts.next(), parts.next(), parts.next());
            match (kind, name, tail) {
                (Some("HELP"), Some(name), Some(_)) => assert!(valid_name(name), "{line}"),
                (Some("TYPE"), Some(name), Some(t)) => {
                    assert!(["counter", "gauge", "histogram"].contains(&t), "{line}");
                    families.insert(name.to_owned(), t.to_owned());
                }
                _ => panic!("unexpected comment line: {line:?}"),
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value: {line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}').unwrap_or_else(|| panic!("{line:?}")))),
            None => (series, BTreeMap::new()),
        };
        assert!(valid_name(name), "bad metric name in {line:?}");
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| families.get(*f).is_some_and(|t| t == "histogram")))
            .unwrap_or(name);
        assert!(families.contains_key(family), "sample of an undeclared family: {line:?}");
        assert!(samples.insert((name.to_owned(), labels), value).is_none(), "duplicate sample {line:?}");
    }
    samples
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn parse_labels(mut s: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    while !s.is_empty() {
        let (name, rest) = s.split_once("=\"").unwrap_or_else(|| panic!("label without =\": {s:?}"));
        assert!(valid_name(name), "bad label name {name:?}");
        // Values here never contain escaped quotes (topic, group and API names).
        let (value, rest) = rest.split_once('"').unwrap_or_else(|| panic!("unterminated label value: {s:?}"));
        labels.insert(name.to_owned(), value.to_owned());
        s = rest.strip_prefix(',').unwrap_or(rest);
    }
    labels
}

fn value(samples: &BTreeMap<Key, f64>, name: &str, labels: &[(&str, &str)]) -> f64 {
    let key = (name.to_owned(), labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect());
    *samples.get(&key).unwrap_or_else(|| panic!("no sample {name}{labels:?}"))
}

/// Every histogram's `le` buckets never decrease and end with `+Inf` equal to `_count`.
fn check_histograms(samples: &BTreeMap<Key, f64>) {
    let mut series: BTreeMap<Key, Vec<(f64, f64)>> = BTreeMap::new();
    for ((name, labels), v) in samples {
        if let Some(family) = name.strip_suffix("_bucket") {
            let mut rest = labels.clone();
            let le = rest.remove("le").expect("a bucket has le");
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap() };
            series.entry((family.to_owned(), rest)).or_default().push((le, *v));
        }
    }
    assert!(!series.is_empty());
    for ((family, labels), mut buckets) in series {
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{family}{labels:?} decreases: {buckets:?}");
        let (le, last) = *buckets.last().unwrap();
        assert_eq!(le, f64::INFINITY, "{family}{labels:?}");
        assert_eq!(samples[&(format!("{family}_count"), labels.clone())], last, "{family}{labels:?}");
    }
}

fn s(v: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(v.to_owned())
}

fn join(group: &str, member: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(member))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(Bytes::from_static(b"m"))])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_ready_and_metrics_after_real_traffic() {
    // fsync mode: acks=1 and acks=all produces wait for an fsync, so the fsync histogram
    // must move.
    let broker = TestBroker::start_with(|c| c.flush_mode = FlushMode::Fsync).await;
    let http = broker.broker().http_addr().expect("the HTTP listener is on");

    assert_eq!(get(http, "/health").await, (200, "ok\n".to_owned()));
    assert_eq!(get(http, "/ready").await, (200, "ready\n".to_owned()));
    assert_eq!(get(http, "/no-such-page").await.0, 404);
    assert_eq!(
        http_raw(http, "POST /metrics HTTP/1.1\r\nHost: r\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await.0,
        405
    );
    assert_eq!(http_raw(http, "NOT HTTP AT ALL\r\n\r\n").await.0, 400);
    let fsyncs_before = runnel::metrics::fsync_latency().count();

    let mut c = broker.client().await;
    c.create_topic_ok("orders", 2, &[]).await;
    let p0 = values("a", 10);
    let p1_acks1 = values("b", 3);
    let p1_acks0 = values("c", 2);
    assert_eq!(c.produce_acks("orders", 0, p0.clone(), -1).await.error_code, 0);
    assert_eq!(c.produce_acks("orders", 1, p1_acks1.clone(), 1).await.error_code, 0);
    // acks=0 gets no response; the next request on the connection is handled after it.
    let acks0 = produce_request("orders", 1, p1_acks0.clone(), 0);
    c.write_raw(&common::raw_request(0, PRODUCE_V, 2, &common::encode_body(&acks0, PRODUCE_V))).await;
    let fetched = c.fetch("orders", 0, 0).await;
    assert_eq!(fetched.records.as_ref().map(Bytes::len), Some(p0.len()));
    assert_eq!(c.log_end_offset("orders", 1).await, 5);

    // A one-member group that committed 4 of partition 0's 10 records and all 5 of
    // partition 1's.
    let first = c.send(5, join("g", "")).await;
    assert_eq!(first.error_code, MEMBER_ID_REQUIRED);
    let joined = c.send(5, join("g", first.member_id.as_str())).await;
    assert_eq!(joined.error_code, 0);
    let member = joined.member_id.to_string();
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id(joined.generation_id)
        .with_member_id(s(&member))
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(s(&member))
            .with_assignment(Bytes::from_static(b"a"))]);
    assert_eq!(c.send(3, sync).await.error_code, 0);
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id_or_member_epoch(joined.generation_id)
        .with_member_id(s(&member))
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(s("orders"))).with_partitions(
            vec![
                OffsetCommitRequestPartition::default().with_partition_index(0).with_committed_offset(4),
                OffsetCommitRequestPartition::default().with_partition_index(1).with_committed_offset(5),
            ],
        )]);
    let committed = c.send(8, commit).await;
    assert!(committed.topics[0].partitions.iter().all(|p| p.error_code == 0));

    let (status, text) = get(http, "/metrics").await;
    assert_eq!(status, 200);
    let m = parse_exposition(&text);
    check_histograms(&m);

    let orders = |p: &'static str| [("topic", "orders"), ("partition", p)];
    let lag = |p| value(&m, "consumer_lag_messages", &[("group", "g"), ("topic", "orders"), ("partition", p)]);
    assert_eq!(lag("0"), 6.0);
    assert_eq!(lag("1"), 0.0);
    assert_eq!(value(&m, "rebalances_total", &[("group", "g")]), joined.generation_id as f64);
    assert!(joined.generation_id >= 1);

    for (acks, n) in [("0", 1.0), ("1", 1.0), ("all", 1.0)] {
        assert_eq!(value(&m, "produce_latency_seconds_count", &[("acks", acks)]), n, "acks={acks}");
    }
    assert!(value(&m, "produce_latency_seconds_sum", &[("acks", "all")]) > 0.0);
    for (api, n) in
        [("Produce", 3.0), ("CreateTopics", 1.0), ("JoinGroup", 2.0), ("SyncGroup", 1.0), ("OffsetCommit", 1.0)]
    {
        assert_eq!(value(&m, "requests_total", &[("api", api)]), n, "{api}");
        assert_eq!(value(&m, "request_latency_seconds_count", &[("api", api)]), n, "{api}");
    }

    let produced = (p0.len() + p1_acks1.len() + p1_acks0.len()) as f64;
    assert_eq!(value(&m, "bytes_in_total", &[("topic", "orders")]), produced);
    assert_eq!(value(&m, "bytes_out_total", &[("topic", "orders")]), p0.len() as f64);
    assert_eq!(value(&m, "log_size_bytes", &orders("0")), p0.len() as f64);
    assert_eq!(value(&m, "log_size_bytes", &orders("1")), (p1_acks1.len() + p1_acks0.len()) as f64);
    assert_eq!(value(&m, "log_segments", &orders("0")), 1.0);
    assert_eq!(value(&m, "log_start_offset", &orders("0")), 0.0);
    assert_eq!(value(&m, "log_end_offset", &orders("0")), 10.0);
    assert_eq!(value(&m, "log_end_offset", &orders("1")), 5.0);

    assert_eq!(value(&m, "open_connections", &[]), 1.0);
    assert!(value(&m, "fsync_latency_seconds_count", &[]) > fsyncs_before as f64);
    for zero in [
        "under_replicated_partitions",
        "isr_shrinks_total",
        "isr_expands_total",
        "unclean_leader_elections_total",
        "offline_partitions",
        "fenced_brokers",
        "offline_log_dirs",
        "storage_resource_shortages_total",
    ] {
        assert_eq!(value(&m, zero, &[]), 0.0, "{zero}");
    }
    // A single node is its own active controller, with itself as the one broker.
    assert_eq!(value(&m, "active_controller", &[]), 1.0);
    assert_eq!(value(&m, "active_brokers", &[]), 1.0);
    assert!(value(&m, "http_connections_limit", &[]) >= 8.0);
    assert!(value(&m, "open_http_connections", &[]) >= 1.0, "the scrape's own connection");
    for side in ["leader", "follower", "alter_log_dirs"] {
        assert_eq!(value(&m, "replication_throttled_bytes_total", &[("side", side)]), 0.0, "{side}");
    }
    let disk = value(&m, "broker_disk_used_ratio", &[]);
    assert!((0.0..=1.0).contains(&disk), "{disk}");

    drop(c);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_listener_can_be_turned_off() {
    let broker = TestBroker::start_with(|c| c.http_listen = None).await;
    assert_eq!(broker.broker().http_addr(), None);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_http_request_does_not_hold_up_shutdown() {
    let broker = TestBroker::start().await;
    let http = broker.broker().http_addr().expect("the HTTP listener is on");
    let mut stalled = TcpStream::connect(http).await.unwrap();
    stalled.write_all(b"GET /metrics HTTP/1.1\r\nHost: runnel\r\n").await.unwrap();
    // The request line reached the server: it answers another connection meanwhile.
    assert_eq!(get(http, "/health").await.0, 200);
    tokio::time::timeout(common::REPLY_TIMEOUT, broker.shutdown()).await.expect("shutdown finishes");
    drop(stalled);
}
