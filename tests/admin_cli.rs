//! The admin CLI (`runnel topic|group|cluster`), run as the real binary against an
//! in-process broker: table and JSON output, exit codes and Kafka error names.

mod common;

use std::process::Stdio;

use bytes::{Bytes, BytesMut};
use common::batches;
use common::requests::produce_request;
use common::TestBroker;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::{GroupId, JoinGroupRequest};
use kafka_protocol::protocol::StrBytes;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }
}

async fn cli(broker: &TestBroker, args: &[&str], stdin: &str) -> Run {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_runnel"))
        .args(args)
        .env("RUNNEL_BROKERS", broker.addr().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runnel runs");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).await.expect("write stdin");
    drop(input);
    let out = tokio::time::timeout(common::REPLY_TIMEOUT, child.wait_with_output())
        .await
        .expect("the CLI finishes")
        .expect("output");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

async fn ok(broker: &TestBroker, args: &[&str], stdin: &str) -> Run {
    let run = cli(broker, args, stdin).await;
    assert_eq!(run.code, 0, "runnel {args:?}: {}", run.stderr);
    run
}

#[tokio::test]
async fn topic_create_list_describe_delete() {
    let broker = TestBroker::start().await;
    let created = ok(&broker, &["topic", "create", "orders", "-p", "3", "-c", "retention.ms=60000"], "").await;
    assert!(created.stdout.contains("created topic orders"), "{}", created.stdout);

    let again = cli(&broker, &["topic", "create", "orders", "--format", "json"], "").await;
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("TOPIC_ALREADY_EXISTS"), "{}", again.stderr);
    assert_eq!(again.stderr.trim().lines().count(), 1, "{}", again.stderr);

    let list = ok(&broker, &["topic", "list", "--format", "json"], "").await.json();
    let orders = list["topics"].as_array().unwrap().iter().find(|t| t["name"] == "orders").cloned().expect("listed");
    assert_eq!(orders["partitions"], 3);

    ok(&broker, &["topic", "produce", "orders", "--partition", "1"], "a\nb\n").await;
    let described = ok(&broker, &["topic", "describe", "orders", "--format", "json"], "").await.json();
    let parts = described["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), 3);
    assert_eq!(parts[1]["high_watermark"], 2);
    assert_eq!(parts[1]["log_start_offset"], 0);
    assert_eq!(parts[0]["leader"], parts[0]["replicas"][0]);
    let retention = described["configs"].as_array().unwrap().iter().find(|c| c["name"] == "retention.ms").cloned();
    assert_eq!(retention.expect("retention.ms")["value"], "60000");
    let table = ok(&broker, &["topic", "describe", "orders"], "").await.stdout;
    assert!(table.contains("HIGH-WATERMARK") && table.contains("retention.ms"), "{table}");

    ok(&broker, &["topic", "delete", "orders"], "").await;
    let gone = cli(&broker, &["topic", "describe", "orders"], "").await;
    assert_eq!(gone.code, 1);
    assert!(gone.stderr.contains("UNKNOWN_TOPIC_OR_PARTITION"), "{}", gone.stderr);
    let missing = cli(&broker, &["topic", "delete", "orders"], "").await;
    assert!(missing.code == 1 && missing.stderr.contains("UNKNOWN_TOPIC_OR_PARTITION"), "{}", missing.stderr);
    broker.shutdown().await;
}

#[tokio::test]
async fn produce_and_consume_round_trip_with_keys_partitions_and_offsets() {
    let broker = TestBroker::start().await;
    ok(&broker, &["topic", "create", "lines", "-p", "2"], "").await;
    let input: String = (0..1200).map(|i| format!("k{}:v{i}\n", i % 7)).collect();
    let produced =
        ok(&broker, &["topic", "produce", "lines", "--key-separator", ":", "--format", "json"], &input).await.json();
    assert_eq!(produced["records"], 1200);

    let consumed = ok(&broker, &["topic", "consume", "lines", "--num", "1200", "--format", "json"], "").await;
    let records: Vec<Value> = consumed.stdout.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(records.len(), 1200);
    // Per key, one partition and the produced order.
    let mut seen = std::collections::HashMap::new();
    for r in &records {
        let key = r["key"].as_str().unwrap().to_owned();
        let p = seen.entry(key.clone()).or_insert(r["partition"].clone());
        assert_eq!(*p, r["partition"], "key {key} in two partitions");
    }
    let mut values: Vec<i64> =
        records.iter().map(|r| r["value"].as_str().unwrap()[1..].parse::<i64>().unwrap()).collect();
    values.sort();
    assert_eq!(values, (0..1200).collect::<Vec<_>>());

    let one = ok(&broker, &["topic", "consume", "lines", "--partition", "0", "--offset", "3", "--num", "2"], "").await;
    assert_eq!(one.stdout.lines().count(), 2, "{}", one.stdout);
    let first_json = ok(
        &broker,
        &["topic", "consume", "lines", "--partition", "0", "--offset", "3", "--num", "1", "--format", "json"],
        "",
    )
    .await
    .json();
    assert_eq!(first_json["offset"], 3);

    // A fresh single partition topic: values come back in order, as plain lines.
    ok(&broker, &["topic", "create", "plain", "-p", "1"], "").await;
    ok(&broker, &["topic", "produce", "plain", "--acks", "1"], "x\ny\nz\n").await;
    let plain = ok(&broker, &["topic", "consume", "plain", "--num", "3"], "").await;
    assert_eq!(plain.stdout, "x\ny\nz\n");
    let end = ok(&broker, &["topic", "consume", "plain", "--offset", "end", "--num", "0"], "").await;
    assert_eq!(end.stdout, "");
    broker.shutdown().await;
}

/// `batch` with its record section gzip-compressed (attributes and CRC updated).
fn gzipped(batch: &Bytes) -> Bytes {
    use runnel::storage::batch::Compression;
    let section = runnel::storage::codec::compress(Compression::Gzip, &batch[61..]).expect("gzip");
    let mut out = BytesMut::from(&batch[..61]);
    out.extend_from_slice(&section);
    let length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    out[22] |= 1; // attributes (low byte): codec 1 = gzip
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

#[tokio::test]
async fn consume_decodes_compressed_batches() {
    let broker = TestBroker::start().await;
    ok(&broker, &["topic", "create", "zipped", "-p", "1"], "").await;
    let mut client = broker.client().await;
    let response = client.send(9, produce_request("zipped", 0, gzipped(&batches::values("g", 50)), -1)).await;
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    let out = ok(&broker, &["topic", "consume", "zipped", "--num", "50"], "").await;
    let expected: String = (0..50).map(|i| format!("g-{i}\n")).collect();
    assert_eq!(out.stdout, expected);
    broker.shutdown().await;
}

#[tokio::test]
async fn groups_describe_seek_list_and_delete() {
    let broker = TestBroker::start().await;
    ok(&broker, &["topic", "create", "events", "-p", "2"], "").await;
    let input: String = (0..10).map(|i| format!("e{i}\n")).collect();
    ok(&broker, &["topic", "produce", "events", "--partition", "0"], &input).await;
    ok(&broker, &["topic", "consume", "events", "--group", "g1", "--num", "4"], "").await;

    let described = ok(&broker, &["group", "describe", "g1", "--format", "json"], "").await.json();
    let offsets = described["offsets"].as_array().unwrap();
    let p0 = offsets.iter().find(|o| o["partition"] == 0).expect("partition 0");
    assert_eq!(
        (p0["committed_offset"].clone(), p0["log_end_offset"].clone(), p0["lag"].clone()),
        (4.into(), 10.into(), 6.into())
    );
    assert_eq!(described["members"].as_array().unwrap().len(), 0);
    let table = ok(&broker, &["group", "describe", "g1"], "").await.stdout;
    assert!(table.contains("LAG") && table.contains("events"), "{table}");

    // Consuming again with the group resumes at the committed offset.
    let resumed =
        ok(&broker, &["topic", "consume", "events", "--group", "g1", "--num", "1", "--partition", "0"], "").await;
    assert_eq!(resumed.stdout, "e4\n");

    let seek = ok(&broker, &["group", "seek", "g1", "--to", "start", "--topic", "events", "--format", "json"], "")
        .await
        .json();
    assert_eq!(seek["offsets"][0]["offset"], 0);
    let after = ok(&broker, &["group", "describe", "g1", "--format", "json"], "").await.json();
    let p0 = after["offsets"].as_array().unwrap().iter().find(|o| o["partition"] == 0).cloned().unwrap();
    assert_eq!(p0["lag"], 10);
    ok(&broker, &["group", "seek", "g1", "--to", "7", "--topic", "events"], "").await;
    ok(&broker, &["group", "seek", "g1", "--to", "end", "--topic", "events"], "").await;

    let list = ok(&broker, &["group", "list", "--format", "json"], "").await.json();
    assert!(list["groups"].as_array().unwrap().iter().any(|g| g["group"] == "g1"), "{list}");

    ok(&broker, &["group", "delete", "g1"], "").await;
    let list = ok(&broker, &["group", "list", "--format", "json"], "").await.json();
    assert!(!list["groups"].as_array().unwrap().iter().any(|g| g["group"] == "g1"), "{list}");
    broker.shutdown().await;
}

#[tokio::test]
async fn seek_is_refused_while_the_group_has_members() {
    let broker = TestBroker::start().await;
    ok(&broker, &["topic", "create", "busy", "-p", "1"], "").await;
    let mut member = broker.client().await;
    let s = |v: &str| StrBytes::from_string(v.to_owned());
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(s("active")))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(""))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(Bytes::from_static(b"m"))]);
    let joined = member.send(3, join).await;
    assert_eq!(joined.error_code, 0);

    let refused = cli(&broker, &["group", "seek", "active", "--to", "start", "--topic", "busy"], "").await;
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    assert!(refused.stderr.contains("active member"), "{}", refused.stderr);
    let delete = cli(&broker, &["group", "delete", "active"], "").await;
    assert!(delete.code == 1 && delete.stderr.contains("NON_EMPTY_GROUP"), "{}", delete.stderr);
    broker.shutdown().await;
}

#[tokio::test]
async fn cluster_info_and_errors() {
    let broker = TestBroker::start().await;
    let info = ok(&broker, &["cluster", "info", "--format", "json"], "").await.json();
    assert!(info["cluster_id"].is_string(), "{info}");
    let brokers = info["brokers"].as_array().unwrap();
    assert_eq!(brokers.len(), 1);
    assert_eq!(brokers[0]["address"], broker.addr().to_string());
    assert_eq!(info["controller_id"], brokers[0]["node_id"]);
    let table = ok(&broker, &["cluster", "info"], "").await.stdout;
    assert!(table.contains(&broker.addr().to_string()), "{table}");

    // Usage errors exit 2 before any request; failures exit 1 with one line.
    for args in [
        &["topic", "create", "t", "-c", "novalue"][..],
        &["topic", "consume", "t", "--offset", "later"],
        &["group", "seek", "g", "--to", "start"],
        &["topic", "produce", "t", "--acks", "2"],
        &["topic", "nosuch"],
    ] {
        let run = cli(&broker, args, "").await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    }
    let unreachable = cli(&broker, &["cluster", "info", "--brokers", "127.0.0.1:1"], "").await;
    assert_eq!(unreachable.code, 1);
    assert!(unreachable.stderr.starts_with("runnel: cannot reach 127.0.0.1:1"), "{}", unreachable.stderr);
    let help = ok(&broker, &["topic", "--help"], "").await.stdout;
    for verb in ["create", "list", "describe", "delete", "produce", "consume"] {
        assert!(help.contains(verb), "{help}");
    }
    broker.shutdown().await;
}
