//! The HTTP API against an in-process broker: every endpoint, the records seen by the
//! Kafka protocol (and the other way round), HTTP group members sharing a group, and bad
//! input answered 4xx with the field named.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::batches::{batch, decode_values, Rec};
use common::TestBroker;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use runnel::server::http_api::partitioner::partition_for_key;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One request on its own connection; (status, JSON body or `null`).
async fn call(addr: SocketAddr, method: &str, path: &str, body: Option<&[u8]>) -> (u16, Value) {
    let mut stream = TcpStream::connect(addr).await.expect("connect to the HTTP listener");
    let body = body.unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: runnel\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // The broker may answer (413) before reading all of a large body.
    let _ = stream.write_all(body).await;
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut reply)).await.expect("a reply");
    let text = String::from_utf8_lossy(&reply);
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{text:?}"));
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

async fn post(addr: SocketAddr, path: &str, body: Value) -> (u16, Value) {
    call(addr, "POST", path, Some(body.to_string().as_bytes())).await
}

async fn get(addr: SocketAddr, path: &str) -> (u16, Value) {
    call(addr, "GET", path, None).await
}

fn http(broker: &TestBroker) -> SocketAddr {
    broker.broker().http_addr().expect("the HTTP listener is on")
}

/// Asserts a 4xx JSON refusal naming `field`.
fn refused(reply: (u16, Value), status: u16, field: &str) {
    assert_eq!(reply.0, status, "{}", reply.1);
    assert_eq!(reply.1["field"], json!(field), "{}", reply.1);
    assert!(reply.1["error"].is_string() && reply.1["message"].is_string(), "{}", reply.1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topic_produce_and_watermark() {
    let broker = TestBroker::start().await;
    let h = http(&broker);
    let created = post(h, "/topics", json!({"name": "t7", "partitions": 7, "configs": {"retention.ms": 60000}})).await;
    assert_eq!(created.0, 201, "{}", created.1);
    assert_eq!((created.1["partitions"].clone(), created.1["replication_factor"].clone()), (json!(7), json!(1)));
    refused(post(h, "/topics", json!({"name": "t7", "partitions": 1})).await, 409, "name");
    refused(
        post(h, "/topics", json!({"name": "x", "configs": {"cleanup.policy": "sometimes"}})).await,
        400,
        "configs.cleanup.policy",
    );
    refused(post(h, "/topics", json!({"name": "x", "partitions": 0})).await, 400, "partitions");
    refused(post(h, "/topics", json!({"name": "bad/name"})).await, 400, "name");
    refused(post(h, "/topics", json!({"partitions": 1})).await, 400, "name");
    refused(post(h, "/topics", json!({"name": "x", "colour": 1})).await, 400, "colour");

    // A keyed record lands where the Java client's partitioner puts it.
    for key in ["a", "order-17", "🙂", ""] {
        let (s, r) = post(h, "/topics/t7/messages", json!({"key": key, "value": "v"})).await;
        assert_eq!(s, 200, "{r}");
        assert_eq!(r["partition"], json!(partition_for_key(key.as_bytes(), 7)), "key {key:?}");
        assert!(r["offset"].as_i64().unwrap() >= 0 && r["timestamp"].as_i64().unwrap() > 0, "{r}");
    }
    // A batch, three ways; keyless records of one request share a partition.
    let (s, r) =
        post(h, "/topics/t7/messages", json!([{"value": "a"}, {"value": "b"}, {"value": "c", "partition": 6}])).await;
    assert_eq!(s, 200, "{r}");
    let offsets = r["offsets"].as_array().unwrap();
    assert_eq!(offsets.len(), 3);
    assert_eq!(offsets[0]["partition"], offsets[1]["partition"]);
    assert_eq!(offsets[1]["offset"].as_i64().unwrap(), offsets[0]["offset"].as_i64().unwrap() + 1);
    assert_eq!(offsets[2]["partition"], json!(6));
    let (s, r) = post(h, "/topics/t7/messages?acks=all", json!({"records": [{"value": "x", "partition": 3}]})).await;
    assert_eq!((s, r["offsets"][0]["partition"].clone()), (200, json!(3)), "{r}");
    let (s, r) = post(h, "/topics/t7/messages?acks=0", json!({"value": "y", "partition": 3})).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r, json!({"partition": 3}), "acks=0 answers without an offset");

    // HTTP produces count in produce_latency_seconds by acks, as Kafka produces do.
    let mut stream = TcpStream::connect(h).await.unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: runnel\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut metrics = String::new();
    stream.read_to_string(&mut metrics).await.unwrap();
    let count = |acks: &str| {
        let prefix = format!("produce_latency_seconds_count{{acks=\"{acks}\"}} ");
        metrics.lines().find_map(|l| l.strip_prefix(prefix.as_str())).map(|v| v.trim().parse::<f64>().unwrap())
    };
    assert_eq!((count("0"), count("1"), count("all")), (Some(1.0), Some(5.0), Some(1.0)), "{metrics}");

    // Partition 3 holds x and y: the watermark and a Kafka fetch agree.
    let (s, w) = get(h, "/topics/t7/partitions/3/watermark").await;
    assert_eq!((s, w), (200, json!({"earliest": 0, "latest": 2})));
    let mut c = broker.client().await;
    assert_eq!(decode_values(&c.fetch("t7", 3, 0).await.records), vec!["x", "y"]);

    // Bad input.
    refused(post(h, "/topics/t7/messages?acks=2", json!({"value": "v"})).await, 400, "acks");
    refused(post(h, "/topics/t7/messages?ack=1", json!({"value": "v"})).await, 400, "ack");
    refused(call(h, "POST", "/topics/t7/messages", Some(b"{not json")).await, 400, "body");
    refused(post(h, "/topics/t7/messages", json!([])).await, 400, "records");
    let many: Vec<Value> = (0..1001).map(|_| json!({"value": "v"})).collect();
    refused(post(h, "/topics/t7/messages", Value::Array(many)).await, 400, "records");
    refused(post(h, "/topics/t7/messages", json!({"value": "v", "partition": 7})).await, 400, "partition");
    refused(post(h, "/topics/t7/messages", json!([{"value": "v"}, {"value": 5}])).await, 400, "records[1].value");
    refused(post(h, "/topics/t7/messages", json!({"value": "*", "encoding": "base64"})).await, 400, "value");
    refused(post(h, "/topics/t7/messages", json!({"value": "v", "encoding": "rot13"})).await, 400, "encoding");
    refused(
        post(h, "/topics/t7/messages", json!({"value": "v", "headers": [{"value": "no key"}]})).await,
        400,
        "headers[0]",
    );
    refused(post(h, "/topics/t7/messages", json!("just a string")).await, 400, "body");
    let huge = vec![b' '; 17 << 20];
    refused(call(h, "POST", "/topics/t7/messages", Some(&huge)).await, 413, "body");
    refused(get(h, "/topics/t7/partitions/x/watermark").await, 400, "partition");
    // Groups create __consumer_offsets; clients do not write to it.
    post(h, "/consumer-groups/g/join", json!({"consumer_id": "c", "topics": ["t7"]})).await;
    refused(post(h, "/topics/__consumer_offsets/messages", json!({"value": "v"})).await, 400, "topic");
    refused(get(h, "/topics/t7/partitions/7/watermark").await, 404, "partition");
    refused(get(h, "/topics/nope/partitions/0/watermark").await, 404, "topic");
    // A record larger than the topic's max.message.bytes.
    post(h, "/topics", json!({"name": "small", "configs": {"max.message.bytes": "100"}})).await;
    let (s, r) = post(h, "/topics/small/messages", json!({"value": "v".repeat(200)})).await;
    assert_eq!((s, r["error"].clone()), (413, json!("message_too_large")), "{r}");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_auto_creates_only_when_allowed() {
    let broker = TestBroker::start_with(|c| c.num_partitions = 3).await;
    let (s, r) = post(http(&broker), "/topics/auto/messages", json!({"key": "k", "value": "v"})).await;
    assert_eq!((s, r["partition"].clone()), (200, json!(partition_for_key(b"k", 3))), "{r}");
    broker.shutdown().await;
    let broker = TestBroker::start_with(|c| c.auto_create_topics = false).await;
    refused(post(http(&broker), "/topics/auto/messages", json!({"value": "v"})).await, 404, "topic");
    broker.shutdown().await;
}

fn assigned(reply: &Value) -> Vec<i32> {
    let mut out: Vec<i32> = reply["assigned_partitions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["partitions"].as_array().unwrap().iter().map(|p| p.as_i64().unwrap() as i32))
        .collect();
    out.sort_unstable();
    out
}

async fn committed(c: &mut common::Client, group: &str, topic: &str, partition: i32) -> i64 {
    let req = OffsetFetchRequest::default().with_group_id(GroupId(StrBytes::from_string(group.into()))).with_topics(
        Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_indexes(vec![partition])]),
    );
    let resp = c.send(7, req).await;
    resp.topics[0].partitions[0].committed_offset
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_members_join_poll_commit_and_share_a_group() {
    let broker = TestBroker::start_with(|c| c.group_min_session_timeout_ms = 1_000).await;
    let h = http(&broker);
    assert_eq!(post(h, "/topics", json!({"name": "g4", "partitions": 4})).await.0, 201);
    let mut c = broker.client().await;
    // Partition 0: a record from Kafka with a header and a binary value, then two from HTTP.
    c.produce_ok("g4", 0, batch(&[Rec::keyed("k0", "kafka").header("h", "1")])).await;
    let (s, _) = post(
        h,
        "/topics/g4/messages",
        json!([{"value": "aGk=", "encoding": "base64", "partition": 0},
        {"value": "/w==", "key": "AA==", "encoding": "base64", "partition": 0}]),
    )
    .await;
    assert_eq!(s, 200);

    let join = json!({"consumer_id": "a", "topics": ["g4"], "session_timeout_ms": 2000});
    let (s, a) = post(h, "/consumer-groups/grp/join", join.clone()).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(assigned(&a), vec![0, 1, 2, 3]);
    assert!(a["member_id"].as_str().unwrap().starts_with("a-"), "{a}");

    let (s, p) = get(h, "/consumer-groups/grp/poll?consumer_id=a&partition=0&max_wait_ms=0").await;
    assert_eq!(s, 200, "{p}");
    let recs = p["records"].as_array().unwrap();
    assert_eq!(recs.len(), 3, "{p}");
    assert_eq!((recs[0]["key"].clone(), recs[0]["value"].clone()), (json!("k0"), json!("kafka")));
    assert_eq!(recs[0]["headers"], json!([{"key": "h", "value": "1"}]));
    assert_eq!((recs[1]["value"].clone(), recs[1].get("encoding")), (json!("hi"), None));
    assert_eq!((recs[2]["value"].clone(), recs[2]["key"].clone()), (json!("/w=="), json!("AA==")));
    assert_eq!(recs[2]["encoding"], json!("base64"));
    assert_eq!(recs.iter().map(|r| r["offset"].as_i64().unwrap()).collect::<Vec<_>>(), vec![0, 1, 2]);
    // The position moved on: the next poll waits and returns nothing, until a record comes.
    let (s, p) = get(h, "/consumer-groups/grp/poll?consumer_id=a&topic=g4&partition=0&max_wait_ms=50").await;
    assert_eq!((s, p["records"].clone()), (200, json!([])));
    let waiter = tokio::spawn(get(h, "/consumer-groups/grp/poll?consumer_id=a&max_wait_ms=20000"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    post(h, "/topics/g4/messages", json!({"value": "late", "partition": 2})).await;
    let (s, p) = waiter.await.unwrap();
    assert_eq!((s, p["records"][0]["value"].clone()), (200, json!("late")), "{p}");
    // An explicit offset reads again.
    let (_, p) = get(h, "/consumer-groups/grp/poll?consumer_id=a&partition=0&offset=2&max_wait_ms=0").await;
    assert_eq!(p["records"].as_array().unwrap().len(), 1);

    // Commits are the group's committed offsets, as Kafka's OffsetFetch reads them.
    let commit = json!({"consumer_id": "a", "offsets": [{"topic": "g4", "partition": 0, "offset": 2}]});
    let (s, r) = post(h, "/consumer-groups/grp/commit", commit).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(committed(&mut c, "grp", "g4", 0).await, 2);

    // A second member: the first rejoins from its heartbeat task; no overlap, all covered.
    let (s, b) =
        post(h, "/consumer-groups/grp/join", json!({"consumer_id": "b", "topics": ["g4"], "session_timeout_ms": 2000}))
            .await;
    assert_eq!(s, 200, "{b}");
    let (_, pa) = get(h, "/consumer-groups/grp/poll?consumer_id=a&max_wait_ms=0").await;
    let (mut got_a, got_b) = (assigned(&pa), assigned(&b));
    assert_eq!((got_a.len(), got_b.len()), (2, 2), "{pa} {b}");
    got_a.extend(&got_b);
    got_a.sort_unstable();
    assert_eq!(got_a, vec![0, 1, 2, 3]);
    assert_eq!(pa["generation_id"], b["generation_id"]);
    // b reads partition 0 from a's commit, if it holds it; a poll of a's lost partition is a rebalance.
    let lost = got_b[0];
    let (s, r) = get(h, &format!("/consumer-groups/grp/poll?consumer_id=a&partition={lost}&max_wait_ms=0")).await;
    assert_eq!((s, r["error"].clone()), (409, json!("rebalance")), "{r}");
    assert_eq!(assigned(&r), assigned(&pa));
    let commit = json!({"consumer_id": "a", "offsets": [{"topic": "g4", "partition": lost, "offset": 1}]});
    let (s, r) = post(h, "/consumer-groups/grp/commit", commit).await;
    assert_eq!((s, r["error"].clone(), r["field"].clone()), (409, json!("rebalance"), json!("offsets[0].partition")));
    refused(get(h, "/consumer-groups/grp/poll?consumer_id=a&topic=other&max_wait_ms=0").await, 400, "topic");
    if got_b.contains(&0) {
        let (_, pb) = get(h, "/consumer-groups/grp/poll?consumer_id=b&partition=0&max_wait_ms=0").await;
        assert_eq!(pb["records"][0]["offset"], json!(2), "{pb}");
    }
    // Describe lists both, with the consumer ids as client ids.
    let d =
        c.send(5, DescribeGroupsRequest::default().with_groups(vec![GroupId(StrBytes::from_static_str("grp"))])).await;
    let mut clients: Vec<String> = d.groups[0].members.iter().map(|m| m.client_id.to_string()).collect();
    clients.sort();
    assert_eq!(clients, vec!["a", "b"]);
    assert_eq!(d.groups[0].protocol_data.as_str(), "range");

    // b stops polling; a keeps on and gets everything once b's session ran out.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (s, p) = get(h, "/consumer-groups/grp/poll?consumer_id=a&max_wait_ms=200").await;
        assert_eq!(s, 200, "{p}");
        if assigned(&p) == vec![0, 1, 2, 3] {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "b was never rebalanced out: {p}");
    }
    refused(get(h, "/consumer-groups/grp/poll?consumer_id=b").await, 404, "consumer_id");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_endpoints_refuse_bad_input() {
    let broker = TestBroker::start().await;
    let h = http(&broker);
    post(h, "/topics", json!({"name": "t", "partitions": 1})).await;
    refused(post(h, "/consumer-groups/g/join", json!({"topics": ["t"]})).await, 400, "consumer_id");
    refused(post(h, "/consumer-groups/g/join", json!({"consumer_id": "a"})).await, 400, "topics");
    refused(post(h, "/consumer-groups/g/join", json!({"consumer_id": "a", "topics": [1]})).await, 400, "topics[0]");
    refused(
        post(h, "/consumer-groups/g/join", json!({"consumer_id": "a", "topics": ["t"], "session_timeout_ms": 10}))
            .await,
        400,
        "session_timeout_ms",
    );
    refused(get(h, "/consumer-groups/g/poll").await, 400, "consumer_id");
    refused(get(h, "/consumer-groups/g/poll?consumer_id=nobody").await, 404, "consumer_id");
    refused(get(h, "/consumer-groups/g/poll?consumer_id=a&max_wait_ms=-1").await, 400, "max_wait_ms");
    refused(get(h, "/consumer-groups/g/poll?consumer_id=a&max_bytes=0").await, 400, "max_bytes");
    refused(get(h, "/consumer-groups/g/poll?consumer_id=a&offset=1").await, 400, "offset");
    refused(post(h, "/consumer-groups/g/commit", json!({"consumer_id": "a"})).await, 400, "offsets");
    let c = json!({"consumer_id": "a", "offsets": [{"topic": "t", "partition": 0, "offset": -1}]});
    refused(post(h, "/consumer-groups/g/commit", c).await, 400, "offsets[0].offset");
    let c = json!({"consumer_id": "a", "offsets": [{"topic": "t", "partition": 5, "offset": 1}]});
    refused(post(h, "/consumer-groups/g/commit", c).await, 400, "offsets[0].partition");
    let c = json!({"consumer_id": "nobody", "offsets": [{"topic": "t", "partition": 0, "offset": 1}]});
    refused(post(h, "/consumer-groups/g/commit", c).await, 404, "consumer_id");
    // Huge numbers are capped, not allocated: a poll of a real member answers.
    let (s, _) = post(h, "/consumer-groups/g/join", json!({"consumer_id": "a", "topics": ["t"]})).await;
    assert_eq!(s, 200);
    let (s, p) = get(h, "/consumer-groups/g/poll?consumer_id=a&max_bytes=9223372036854775807&max_wait_ms=0").await;
    assert_eq!((s, p["records"].clone()), (200, json!([])));
    refused(get(h, "/consumer-groups/g/poll?consumer_id=a&partition=0&offset=99").await, 416, "offset");
    // The same consumer id with other topics is refused; with the same, it is the same member.
    post(h, "/topics", json!({"name": "u"})).await;
    refused(post(h, "/consumer-groups/g/join", json!({"consumer_id": "a", "topics": ["u"]})).await, 400, "topics");
    let (s, again) = post(h, "/consumer-groups/g/join", json!({"consumer_id": "a", "topics": ["t"]})).await;
    assert_eq!((s, assigned(&again)), (200, vec![0]));

    // The OpenAPI document is JSON and lists the API.
    let (s, doc) = get(h, "/openapi.json").await;
    assert_eq!(s, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    for path in ["/topics", "/topics/{topic}/messages", "/consumer-groups/{group}/poll"] {
        assert!(doc["paths"][path].is_object(), "{path}");
    }
    broker.shutdown().await;
}

/// The web console's read-only views: topics with watermarks and sizes, a page of records
/// from an offset or a timestamp, the cluster, and a group's lag per partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_views_show_topics_records_groups_and_the_cluster() {
    let broker = TestBroker::start_with(|c| c.group_min_session_timeout_ms = 1_000).await;
    let h = http(&broker);
    assert_eq!(post(h, "/topics", json!({"name": "cv", "partitions": 2})).await.0, 201);
    let recs: Vec<Value> =
        (0..4).map(|i| json!({"value": format!("v{i}"), "partition": 0, "timestamp": 1_000 * (i + 1)})).collect();
    assert_eq!(post(h, "/topics/cv/messages", json!(recs)).await.0, 200);

    let (s, t) = get(h, "/topics").await;
    assert_eq!(s, 200, "{t}");
    let cv = t["topics"].as_array().unwrap().iter().find(|t| t["name"] == "cv").expect("topic cv").clone();
    let p0 = &cv["partitions"][0];
    assert_eq!((p0["leader"].clone(), p0["replicas"].clone(), p0["isr"].clone()), (json!(1), json!([1]), json!([1])));
    assert_eq!((p0["earliest"].clone(), p0["latest"].clone()), (json!(0), json!(4)));
    assert!(p0["size_bytes"].as_u64().unwrap() > 0, "{p0}");
    assert_eq!(cv["partitions"][1]["latest"], json!(0));

    let (s, page) = get(h, "/topics/cv/partitions/0/records?offset=1&limit=2").await;
    assert_eq!(s, 200, "{page}");
    let offsets: Vec<i64> = page["records"].as_array().unwrap().iter().map(|r| r["offset"].as_i64().unwrap()).collect();
    assert_eq!((offsets, page["next_offset"].clone()), (vec![1, 2], json!(3)));
    assert_eq!(page["records"][0]["value"], json!("v1"));
    // The first record at or after 2500 ms is offset 2 (3000 ms).
    let (s, page) = get(h, "/topics/cv/partitions/0/records?timestamp=2500").await;
    assert_eq!(
        (s, page["start_offset"].clone(), page["records"][0]["timestamp"].clone()),
        (200, json!(2), json!(3000))
    );
    assert_eq!(page["records"].as_array().unwrap().len(), 2);
    refused(get(h, "/topics/cv/partitions/0/records?offset=5").await, 416, "offset");
    refused(get(h, "/topics/cv/partitions/0/records?limit=501").await, 400, "limit");
    refused(get(h, "/topics/cv/partitions/0/records?offset=1&timestamp=1").await, 400, "timestamp");
    refused(get(h, "/topics/cv/partitions/2/records").await, 404, "partition");

    let (s, c) = get(h, "/cluster").await;
    assert_eq!(s, 200, "{c}");
    assert_eq!((c["controller_id"].clone(), c["brokers"][0]["controller"].clone()), (json!(1), json!(true)));

    // An HTTP member holding both partitions commits 1 on partition 0: lag 3 there.
    let join = json!({"consumer_id": "m", "topics": ["cv"], "session_timeout_ms": 5000});
    let (s, j) = post(h, "/consumer-groups/cvg/join", join).await;
    assert_eq!(s, 200, "{j}");
    let commit = json!({"consumer_id": "m", "offsets": [{"topic": "cv", "partition": 0, "offset": 1}]});
    assert_eq!(post(h, "/consumer-groups/cvg/commit", commit).await.0, 200);
    let (s, gs) = get(h, "/consumer-groups").await;
    assert_eq!(
        (s, gs["groups"][0]["group_id"].clone(), gs["groups"][0]["state"].clone()),
        (200, json!("cvg"), json!("Stable"))
    );
    let (s, g) = get(h, "/consumer-groups/cvg").await;
    assert_eq!(s, 200, "{g}");
    assert_eq!(g["members"][0]["client_id"], json!("m"), "{g}");
    assert_eq!(g["members"][0]["assignment"], json!([{"topic": "cv", "partitions": [0, 1]}]), "{g}");
    let lag: Vec<(Value, Value, Value)> = g["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["committed"].clone(), o["latest"].clone(), o["lag"].clone()))
        .collect();
    assert_eq!(lag, vec![(json!(1), json!(4), json!(3)), (Value::Null, json!(0), Value::Null)], "{g}");
    refused(get(h, "/consumer-groups/nobody").await, 404, "group");
}
