//! Hostile and invalid input. Frames the broker cannot parse close that connection, and
//! only that one; invalid but well-formed requests get the Kafka error code. After each
//! case a second, healthy connection must still be served. The broker runs in the test
//! process, so a decode that aborts on a huge allocation fails the whole test binary.

mod common;

use bytes::Bytes;
use common::batches::{self, Rec};
use common::requests::*;
use common::{raw_request, with_size_prefix, Client, RawReply, TestBroker};
use kafka_protocol::messages::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const REQUEST_MAX: usize = 1024 * 1024;

async fn broker() -> TestBroker {
    TestBroker::start_with(|c| {
        c.socket_request_max_bytes = REQUEST_MAX;
        c.auto_create_topics = false;
    })
    .await
}

/// A new connection gets ApiVersions and Metadata answered.
async fn assert_serving(broker: &TestBroker) {
    let mut c = broker.client().await;
    let resp = c
        .send(
            3,
            ApiVersionsRequest::default()
                .with_client_software_name(common::str("it"))
                .with_client_software_version(common::str("1")),
        )
        .await;
    assert_eq!(resp.error_code, 0);
    let md = c.send(METADATA_V, MetadataRequest::default().with_topics(None)).await;
    assert_eq!(md.brokers.len(), 1);
}

/// Send `bytes` on a fresh connection; the broker must close it without answering, and
/// keep serving others.
async fn assert_closes(broker: &TestBroker, what: &str, bytes: &[u8]) {
    let mut c = broker.client().await;
    match c.send_raw(bytes).await {
        RawReply::Closed => {}
        RawReply::Frame(f) => panic!("{what}: expected the connection closed, got a {}-byte response", f.len()),
    }
    assert_serving(broker).await;
}

fn compact_len(n: u32) -> Vec<u8> {
    // Unsigned varint of n + 1 (compact arrays, strings and bytes store length + 1).
    let mut v = u64::from(n) + 1;
    let mut out = vec![];
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

const HUGE: u32 = 0x7fff_ffff;
const FOUR: [u8; 4] = [0, 0, 0, 0];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_api_and_unsupported_versions_close_the_connection() {
    let broker = broker().await;
    assert_closes(&broker, "api key 1000", &raw_request(1000, 0, 1, &[])).await;
    assert_closes(&broker, "api key -1", &raw_request(-1, 0, 1, &[])).await;
    // A real Kafka API this broker does not serve (WriteTxnMarkers).
    assert_closes(&broker, "api key 27", &raw_request(27, 1, 2, &[0, 0])).await;
    let md = common::encode_body(&metadata_request(&["x"]), 12);
    assert_closes(&broker, "Metadata v99", &raw_request(3, 99, 2, &md)).await;
    assert_closes(&broker, "Metadata v-1", &raw_request(3, -1, 1, &[])).await;
    // Produce v0-2 are below the served range (message set formats).
    assert_closes(&broker, "Produce v2", &raw_request(0, 2, 1, &[0xff, 0xff, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frame_sizes_close_the_connection() {
    let broker = broker().await;
    let mut too_big = ((REQUEST_MAX + 1) as i32).to_be_bytes().to_vec();
    too_big.extend_from_slice(&[0; 64]);
    assert_closes(&broker, "frame over socket_request_max_bytes", &too_big).await;
    assert_closes(&broker, "frame of 2 GiB", &[0x7f, 0xff, 0xff, 0xff, 0, 0]).await;
    assert_closes(&broker, "negative frame size", &[0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 0]).await;
    assert_closes(&broker, "frame size -1", &(-1i32).to_be_bytes()).await;
    assert_closes(&broker, "frame shorter than a header", &with_size_prefix(&[0, 3, 0])).await;
    assert_closes(&broker, "empty frame", &with_size_prefix(&[])).await;

    // A frame of exactly the maximum is served: a produce sized to fill it.
    let mut c = broker.client().await;
    c.create_topic_ok("max-frame", 1, &[]).await;
    let frame_for = |value_len: usize| {
        let records = batches::batch(&[Rec::value(&"m".repeat(value_len))]);
        let req = produce_request("max-frame", 0, records, -1);
        raw_request(
            0,
            PRODUCE_V,
            ApiKey::Produce.request_header_version(PRODUCE_V),
            &common::encode_body(&req, PRODUCE_V),
        )
    };
    let mut value_len = REQUEST_MAX - 200;
    let mut frame = frame_for(value_len);
    while frame.len() != REQUEST_MAX + 4 {
        value_len = (value_len as i64 + (REQUEST_MAX + 4) as i64 - frame.len() as i64) as usize;
        frame = frame_for(value_len);
    }
    let mut reply = match c.send_raw(&frame).await {
        RawReply::Frame(f) => f,
        RawReply::Closed => panic!("a frame of exactly socket_request_max_bytes was refused"),
    };
    use kafka_protocol::protocol::Decodable;
    ResponseHeader::decode(&mut reply, ApiKey::Produce.response_header_version(PRODUCE_V)).unwrap();
    let resp = ProduceResponse::decode(&mut reply, PRODUCE_V).unwrap();
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(c.log_end_offset("max-frame", 0).await, 1);
    // One byte more is refused.
    let mut over = frame.clone();
    over[..4].copy_from_slice(&((REQUEST_MAX + 1) as i32).to_be_bytes());
    over.push(0);
    assert!(broker.client().await.send_raw(&over).await.is_closed());
    assert_serving(&broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_array_counts_close_the_connection_without_aborting() {
    let broker = broker().await;
    // Metadata v12: topics compact array.
    let body = [compact_len(HUGE), FOUR.to_vec()].concat();
    assert_closes(&broker, "Metadata v12 topics", &raw_request(3, 12, 2, &body)).await;
    let body = [vec![0xff, 0xff, 0xff, 0xff, 0x0f], FOUR.to_vec()].concat();
    assert_closes(&broker, "Metadata v12 topics 2^32-2", &raw_request(3, 12, 2, &body)).await;
    // Metadata v8: classic i32 array.
    let body = [HUGE.to_be_bytes().to_vec(), FOUR.to_vec()].concat();
    assert_closes(&broker, "Metadata v8 topics", &raw_request(3, 8, 1, &body)).await;

    // Produce v9: transactional id null, acks, timeout, then topic_data.
    let prefix = [vec![0], (-1i16).to_be_bytes().to_vec(), 30_000i32.to_be_bytes().to_vec()].concat();
    let body = [prefix.clone(), compact_len(HUGE), FOUR.to_vec()].concat();
    assert_closes(&broker, "Produce v9 topic_data", &raw_request(0, 9, 2, &body)).await;
    // ...one topic whose partition_data claims too much.
    let topic = [compact_len(1), compact_len(1), b"t".to_vec()].concat();
    let body = [prefix.clone(), topic.clone(), compact_len(HUGE), FOUR.to_vec()].concat();
    assert_closes(&broker, "Produce v9 partition_data", &raw_request(0, 9, 2, &body)).await;
    // ...one partition whose records claim 2^31 bytes.
    let body =
        [prefix.clone(), topic, compact_len(1), 0i32.to_be_bytes().to_vec(), compact_len(HUGE), FOUR.to_vec()].concat();
    assert_closes(&broker, "Produce v9 records", &raw_request(0, 9, 2, &body)).await;
    // Produce v8 (not flexible).
    let body = [
        (-1i16).to_be_bytes().to_vec(),
        (-1i16).to_be_bytes().to_vec(),
        30_000i32.to_be_bytes().to_vec(),
        HUGE.to_be_bytes().to_vec(),
        FOUR.to_vec(),
    ]
    .concat();
    assert_closes(&broker, "Produce v8 topic_data", &raw_request(0, 8, 1, &body)).await;

    // CreateTopics v5: topics.
    let body = [compact_len(HUGE), FOUR.to_vec()].concat();
    assert_closes(&broker, "CreateTopics v5 topics", &raw_request(19, 5, 2, &body)).await;
    // ...one topic whose configs claim too much.
    let body = [
        compact_len(1),
        compact_len(1),
        b"t".to_vec(),
        1i32.to_be_bytes().to_vec(),
        1i16.to_be_bytes().to_vec(),
        compact_len(0),
        compact_len(HUGE),
        FOUR.to_vec(),
    ]
    .concat();
    assert_closes(&broker, "CreateTopics v5 configs", &raw_request(19, 5, 2, &body)).await;

    // Fetch v12: replica id, max wait, min bytes, max bytes, isolation, session id and epoch.
    let fetch_prefix = [
        (-1i32).to_be_bytes().to_vec(),
        0i32.to_be_bytes().to_vec(),
        0i32.to_be_bytes().to_vec(),
        1i32.to_be_bytes().to_vec(),
        vec![0],
        0i32.to_be_bytes().to_vec(),
        (-1i32).to_be_bytes().to_vec(),
    ]
    .concat();
    let body = [fetch_prefix, compact_len(HUGE), FOUR.to_vec()].concat();
    assert_closes(&broker, "Fetch v12 topics", &raw_request(1, 12, 2, &body)).await;

    // DescribeConfigs v4: resources.
    let body = [compact_len(HUGE), FOUR.to_vec()].concat();
    assert_closes(&broker, "DescribeConfigs v4 resources", &raw_request(32, 4, 2, &body)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lengths_beyond_the_frame_close_the_connection() {
    let broker = broker().await;
    // Metadata v8: one topic whose name claims 32767 bytes; three follow.
    let body = [1i32.to_be_bytes().to_vec(), 0x7fffi16.to_be_bytes().to_vec(), b"abc".to_vec()].concat();
    assert_closes(&broker, "Metadata v8 topic name", &raw_request(3, 8, 1, &body)).await;
    // Metadata v12: one topic (id, then a compact name claiming 1 MiB).
    let body = [compact_len(1), vec![0; 16], compact_len(1 << 20), b"abc".to_vec()].concat();
    assert_closes(&broker, "Metadata v12 topic name", &raw_request(3, 12, 2, &body)).await;
    // The client id in the request header.
    let mut header = vec![0, 3, 0, 8, 0, 0, 0, 1];
    header.extend_from_slice(&0x7fffi16.to_be_bytes());
    header.extend_from_slice(b"client");
    assert_closes(&broker, "client id", &with_size_prefix(&header)).await;
    // A body cut short.
    let full = common::encode_body(&metadata_request(&["some-topic"]), 8);
    assert_closes(&broker, "truncated Metadata v8", &raw_request(3, 8, 1, &full[..full.len() - 3])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_record_batches_are_refused_and_nothing_is_appended() {
    let broker = broker().await;
    let mut c = broker.client().await;
    c.create_topic_ok("damaged", 1, &[]).await;
    let good = batches::batch(&[Rec::keyed("k", "value-0"), Rec::keyed("k", "value-1")]);

    let cases: Vec<(&str, Bytes, Option<i16>)> = vec![
        ("bad CRC", batches::with_bad_crc(&good), Some(2)),
        // Kafka's batch iterator sees no batch when a batch's bytes are not all there:
        // INVALID_RECORD, as Kafka 4.4 answers (differential/test_errors.py).
        ("truncated batch", good.slice(..good.len() - 5), Some(87)),
        ("shorter than a batch header", good.slice(..30), Some(87)),
        (
            "batch length beyond the data",
            batches::tampered(&good, |b| b[8..12].copy_from_slice(&10_000i32.to_be_bytes())),
            Some(87),
        ),
        (
            "batch length below a header",
            batches::tampered(&good, |b| b[8..12].copy_from_slice(&10i32.to_be_bytes())),
            Some(2),
        ),
        ("magic 1", batches::with_magic(&good, 1), Some(87)),
        ("magic 0", batches::with_magic(&good, 0), Some(87)),
        ("magic 3", batches::with_magic(&good, 3), Some(87)),
        (
            "negative records count",
            batches::tampered(&good, |b| b[57..61].copy_from_slice(&(-1i32).to_be_bytes())),
            None,
        ),
        (
            "negative last offset delta",
            batches::tampered(&good, |b| b[23..27].copy_from_slice(&(-1i32).to_be_bytes())),
            None,
        ),
        ("empty records", Bytes::new(), Some(87)),
        ("two batches for one partition", Bytes::from([good.to_vec(), good.to_vec()].concat()), Some(87)),
        ("a good batch followed by garbage", Bytes::from([good.to_vec(), vec![0xde, 0xad]].concat()), None),
    ];
    for (what, records, code) in cases {
        let p = c.produce("damaged", 0, records).await;
        match code {
            Some(code) => assert_eq!(p.error_code, code, "{what}"),
            None => assert_ne!(p.error_code, 0, "{what}"),
        }
        assert_eq!(c.log_end_offset("damaged", 0).await, 0, "{what}: nothing appended");
    }
    // Null records.
    let mut req = produce_request("damaged", 0, Bytes::new(), -1);
    req.topic_data[0].partition_data[0].records = None;
    let resp = c.send(PRODUCE_V, req).await;
    assert_ne!(resp.responses[0].partition_responses[0].error_code, 0, "null records");

    // The same connection still works, and the log only ever held good batches.
    assert_eq!(c.produce_ok("damaged", 0, good.clone()).await, 0);
    assert_eq!(batches::decode_values(&c.fetch("damaged", 0, 0).await.records), ["value-0", "value-1"]);
}

/// A batch whose header disagrees with its records (with a correct CRC) is refused, as
/// Kafka's LogValidator refuses it: otherwise the log stores what no consumer can read,
/// or offsets that hold no record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_whose_records_do_not_match_the_header_are_refused() {
    let broker = broker().await;
    let mut c = broker.client().await;
    let good = batches::batch(&[Rec::value("a"), Rec::value("b")]);
    let cases: Vec<(&str, Bytes)> = vec![
        (
            "records count above the records present",
            batches::tampered(&good, |b| b[57..61].copy_from_slice(&5i32.to_be_bytes())),
        ),
        ("records count 0", batches::tampered(&good, |b| b[57..61].copy_from_slice(&0i32.to_be_bytes()))),
        (
            "last offset delta beyond the records",
            batches::tampered(&good, |b| b[23..27].copy_from_slice(&1000i32.to_be_bytes())),
        ),
        ("records that are not records", batches::tampered(&good, |b| b[61..].fill(0xff))),
        ("compression codec 7", batches::tampered(&good, |b| b[22] |= 0x07)),
    ];
    let mut failures = vec![];
    for (i, (what, records)) in cases.into_iter().enumerate() {
        let topic = format!("inconsistent-{i}");
        c.create_topic_ok(&topic, 1, &[]).await;
        let p = c.produce(&topic, 0, records).await;
        let leo = c.log_end_offset(&topic, 0).await;
        if p.error_code == 0 || leo != 0 {
            failures.push(format!(
                "{what}: error {}, base offset {}, log end offset now {leo}",
                p.error_code, p.base_offset
            ));
        }
    }
    assert!(failures.is_empty(), "accepted inconsistent batches:\n{}", failures.join("\n"));
}

/// Kafka 4 rejects a record stamped more than message.timestamp.after.max.ms (default one
/// hour) ahead of the broker clock with INVALID_TIMESTAMP; runnel lists the config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_from_the_far_future_are_refused() {
    let broker = broker().await;
    let mut c = broker.client().await;
    c.create_topic_ok("future", 1, &[]).await;
    let described = c.describe_topic_configs("future").await;
    assert_eq!(config_entry(&described, "message.timestamp.after.max.ms"), Some((Some("3600000".into()), 5)));
    let two_hours_ahead = batches::now_ms() + 2 * 3600 * 1000;
    let p = c.produce("future", 0, batches::batch(&[Rec::value("late").at(two_hours_ahead)])).await;
    assert_eq!(p.error_code, 32, "INVALID_TIMESTAMP");
    assert_eq!(c.log_end_offset("future", 0).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_over_max_message_bytes_is_too_large() {
    let broker = broker().await;
    let mut c = broker.client().await;
    c.create_topic_ok("small", 1, &[("max.message.bytes", "1000")]).await;
    let big = batches::batch(&[Rec::value(&"x".repeat(2000))]);
    let p = c.produce("small", 0, big).await;
    assert_eq!(p.error_code, 10, "MESSAGE_TOO_LARGE");
    assert_eq!(c.log_end_offset("small", 0).await, 0);
    // Under the limit is fine.
    assert_eq!(c.produce_ok("small", 0, batches::values("ok", 3)).await, 0);
    // Raising the limit lets the big batch in.
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let resp = c
        .send(
            1,
            IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(RESOURCE_TOPIC)
                .with_resource_name(common::str("small"))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(common::str("max.message.bytes"))
                    .with_config_operation(0)
                    .with_value(Some(common::str("100000")))])]),
        )
        .await;
    assert_eq!(resp.responses[0].error_code, 0);
    assert_eq!(c.produce_ok("small", 0, batches::batch(&[Rec::value(&"x".repeat(2000))])).await, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_validation() {
    let broker = broker().await;
    let mut c = broker.client().await;
    let long = "a".repeat(250);
    for name in ["bad name!", "", ".", "..", long.as_str(), "slash/y", "tab\t"] {
        let r = c.create_topic(name, 1, &[]).await;
        assert_eq!(r.error_code, 17, "INVALID_TOPIC_EXCEPTION for {name:?}");
    }
    // 249 characters is the longest legal name.
    c.create_topic_ok(&"a".repeat(249), 1, &[]).await;
    for n in [-5, 0] {
        let r = c.create_topic(&format!("parts{n}"), n, &[]).await;
        assert_eq!(r.error_code, 37, "INVALID_PARTITIONS for {n}");
    }
    // -1 (v4+) means the broker default.
    let r = c.create_topic("default-parts", -1, &[]).await;
    assert_eq!((r.error_code, r.num_partitions), (0, broker.config().num_partitions));

    c.create_topic_ok("dup", 1, &[]).await;
    assert_eq!(c.create_topic("dup", 1, &[]).await.error_code, 36, "TOPIC_ALREADY_EXISTS");

    for (k, v) in
        [("retention.ms", "forever"), ("cleanup.policy", "shred"), ("no.such.config", "1"), ("segment.bytes", "3")]
    {
        let r = c.create_topic("cfg", 1, &[(k, v)]).await;
        assert_eq!(r.error_code, 40, "INVALID_CONFIG for {k}={v}");
    }
    for rf in [3, 0] {
        let resp = c.send(CREATE_TOPICS_V, create_topics_request("rf", 1, rf, &[])).await;
        assert_eq!(resp.topics[0].error_code, 38, "INVALID_REPLICATION_FACTOR for {rf}");
    }
    // None of the refused topics exists.
    let md = c.metadata(&["cfg", "rf", "parts0"]).await;
    assert!(
        md.topics.iter().all(|t| t.error_code == 3),
        "{:?}",
        md.topics.iter().map(|t| t.error_code).collect::<Vec<_>>()
    );
    assert_serving(&broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_request_errors() {
    let broker = broker().await;
    let mut c = broker.client().await;
    c.create_topic_ok("acks", 1, &[]).await;
    c.create_topic_ok("isr", 1, &[("min.insync.replicas", "2")]).await;

    for acks in [2, -2, 5] {
        let p = c.produce_acks("acks", 0, batches::values("a", 1), acks).await;
        assert_eq!(p.error_code, 21, "INVALID_REQUIRED_ACKS for acks={acks}");
    }
    assert_eq!(c.log_end_offset("acks", 0).await, 0);

    // min.insync.replicas counts at most the partition's replicas (Kafka 4.4's
    // Partition.effectiveMinIsr): one replica, in sync, meets min.insync.replicas=2.
    // (NOT_ENOUGH_REPLICAS itself is checked where there are replicas to miss: the
    // replica manager's tests, and the cluster differential against Kafka.)
    let p = c.produce_acks("isr", 0, batches::values("i", 1), -1).await;
    assert_eq!((p.error_code, p.base_offset), (0, 0), "acks=all with min.insync.replicas above the replicas");
    let p = c.produce_acks("isr", 0, batches::values("i", 1), 1).await;
    assert_eq!((p.error_code, p.base_offset), (0, 1));

    let p = c.produce("acks", 1, batches::values("a", 1)).await;
    assert_eq!(p.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION for partition 1");
    let p = c.produce("acks", -1, batches::values("a", 1)).await;
    assert_eq!(p.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION for partition -1");
    let p = c.produce("missing", 0, batches::values("a", 1)).await;
    assert_eq!(p.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION for a missing topic");
}

/// A small xorshift generator: the same garbage every run.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn garbage(seed: u64) -> Vec<u8> {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15 ^ seed.wrapping_mul(0x2545_f491_4f6c_dd1d));
    let len = 1 + (rng.next() % 3000) as usize;
    match seed % 3 {
        // Pure noise, size prefix included.
        0 => rng.bytes(len),
        // A plausible size prefix, then noise.
        1 => with_size_prefix(&rng.bytes(len)),
        // A valid header for a served API and version, then noise as the body.
        _ => {
            let (api, lo, hi) = runnel::protocol::versions::SUPPORTED[(rng.next() % 15) as usize];
            let version = lo + (rng.next() % (hi - lo + 1) as u64) as i16;
            raw_request(api as i16, version, api.request_header_version(version), &rng.bytes(len))
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_connections_of_garbage_at_once() {
    let broker = broker().await;
    let addr = broker.addr();
    let tasks: Vec<_> = (0..50u64)
        .map(|seed| {
            tokio::spawn(async move {
                let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                let _ = s.write_all(&garbage(seed)).await;
                let _ = s.shutdown().await;
                // The broker must end the connection: by closing on garbage, or at EOF.
                let mut sink = Vec::new();
                tokio::time::timeout(common::REPLY_TIMEOUT, s.read_to_end(&mut sink))
                    .await
                    .unwrap_or_else(|_| panic!("connection {seed} still open"))
                    .ok();
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_serving(&broker).await;
    // And real work still gets done.
    let mut c = broker.client().await;
    c.create_topic_ok("after-garbage", 1, &[]).await;
    assert_eq!(c.produce_ok("after-garbage", 0, batches::values("g", 2)).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_mid_frame_harms_no_one() {
    let broker = broker().await;
    let addr = broker.addr();
    for cut in [2usize, 4, 10] {
        let frame = raw_request(3, 12, 2, &common::encode_body(&metadata_request(&["x"]), 12));
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(&frame[..cut]).await.unwrap();
        drop(s);
    }
    assert_serving(&broker).await;
    // Two requests in one write are both answered, in order.
    let mut c = Client::connect(addr).await;
    let one = raw_request(18, 0, 1, &[]);
    let both = [one.clone(), one].concat();
    assert!(matches!(c.send_raw(&both).await, RawReply::Frame(_)));
    assert!(matches!(c.read_frame().await, RawReply::Frame(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_topic_refuses_records_without_a_key() {
    let broker = broker().await;
    let mut c = broker.client().await;
    c.create_topic_ok("compacted", 1, &[("cleanup.policy", "compact")]).await;
    let p = c.produce("compacted", 0, batches::batch(&[Rec::value("no key")])).await;
    assert_eq!(p.error_code, 87, "INVALID_RECORD");
    assert_eq!(c.log_end_offset("compacted", 0).await, 0);
    // With a key it is accepted; a delete-policy topic takes keyless records.
    assert_eq!(c.produce_ok("compacted", 0, batches::batch(&[Rec::keyed("k", "v")])).await, 0);
    c.create_topic_ok("plain", 1, &[]).await;
    assert_eq!(c.produce_ok("plain", 0, batches::batch(&[Rec::value("no key")])).await, 0);
}
