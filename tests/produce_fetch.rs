//! Produce and read back through the wire protocol, plus the admin APIs that change what a
//! reader sees: ListOffsets, DeleteRecords, OffsetForLeaderEpoch, CreatePartitions,
//! configs, DeleteTopics.

mod common;

use std::time::Duration;

use common::batches::{self, Rec};
use common::requests::*;
use common::{str, TestBroker};
use kafka_protocol::messages::fetch_request::FetchTopic;
use kafka_protocol::messages::*;

const NO_AUTO_CREATE: fn(&mut runnel::config::BrokerConfig) = |c| c.auto_create_topics = false;

/// Record bytes reach the client the same whether they are copied into the response or
/// sent from the segment file with sendfile (`fetch_sendfile`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_records_with_headers_round_trip_per_partition() {
    for sendfile in [false, true] {
        round_trip_per_partition(TestBroker::start_with(|c| c.fetch_sendfile = sendfile).await).await;
    }
}

async fn round_trip_per_partition(broker: TestBroker) {
    let mut c = broker.client().await;
    c.create_topic_ok("orders", 3, &[]).await;
    for p in 0..3 {
        // Two batches per partition: 3 records, then 2.
        let mut expected = Vec::new();
        for (batch_no, n) in [(0, 3), (1, 2)] {
            let recs: Vec<Rec> = (0..n)
                .map(|i| {
                    Rec::keyed(&format!("k{p}-{batch_no}-{i}"), &format!("v{p}-{batch_no}-{i}"))
                        .header("trace", &format!("t{p}{batch_no}{i}"))
                        .header("empty", "")
                })
                .collect();
            let base = c.produce_ok("orders", p, batches::batch(&recs)).await;
            assert_eq!(base, expected.len() as i64, "partition {p} batch {batch_no}");
            expected.extend(recs);
        }
        let data = c.fetch("orders", p, 0).await;
        assert_eq!(data.error_code, 0);
        assert_eq!(data.high_watermark, 5);
        assert_eq!(data.log_start_offset, 0);
        let got = batches::decode(&data.records);
        assert_eq!(got.len(), expected.len(), "partition {p}");
        for (i, (r, want)) in got.iter().zip(&expected).enumerate() {
            assert_eq!(r.offset, i as i64, "partition {p}");
            assert_eq!(r.key.as_deref(), want.key.as_deref(), "partition {p} offset {i}");
            assert_eq!(r.value.as_deref(), want.value.as_deref(), "partition {p} offset {i}");
            assert_eq!(r.timestamp, want.timestamp, "partition {p} offset {i}");
            let headers: Vec<(String, Option<Vec<u8>>)> =
                r.headers.iter().map(|(k, v)| (k.to_string(), v.as_ref().map(|b| b.to_vec()))).collect();
            assert_eq!(headers, want.headers, "partition {p} offset {i}");
        }
        // A fetch from the middle of a batch returns that batch; the records before the
        // fetch offset are the client's to skip, the offsets must still be right.
        let data = c.fetch("orders", p, 4).await;
        let got = batches::decode(&data.records);
        assert!(got.iter().any(|r| r.offset == 4));
        assert!(got.iter().all(|r| r.offset >= 3), "{:?}", got.iter().map(|r| r.offset).collect::<Vec<_>>());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_larger_than_partition_max_bytes_is_returned_whole() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("big", 1, &[]).await;
    let big = "x".repeat(10_000);
    c.produce_ok("big", 0, batches::batch(&[Rec::value(&big), Rec::value(&big)])).await;
    c.produce_ok("big", 0, batches::batch(&[Rec::value(&big)])).await;

    let data = c.fetch_with(fetch_request("big", 0, 0, 100)).await;
    assert_eq!(data.error_code, 0);
    let sizes = batches::batch_sizes(&data.records);
    assert_eq!(sizes.len(), 1, "exactly the first batch, whole: {sizes:?}");
    assert!(sizes[0] > 20_000, "{sizes:?} {}", data.records.as_ref().unwrap().len());
    assert_eq!(data.records.as_ref().unwrap().len(), sizes[0]);
    assert_eq!(batches::decode(&data.records).len(), 2);

    // A limit between one and two batches: still only whole batches.
    let data = c.fetch_with(fetch_request("big", 0, 0, sizes[0] as i32 + 100)).await;
    assert_eq!(batches::batch_sizes(&data.records), vec![sizes[0]]);

    // The request-level max_bytes also yields to the first batch.
    let data = c.fetch_with(fetch_request("big", 0, 0, 1024 * 1024).with_max_bytes(1)).await;
    assert_eq!(batches::batch_sizes(&data.records), vec![sizes[0]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_at_and_beyond_the_log_end() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("edge", 1, &[]).await;

    // Empty partition: offset 0 is the log end.
    let data = c.fetch("edge", 0, 0).await;
    assert_eq!(data.error_code, 0);
    assert_eq!(data.high_watermark, 0);
    assert!(batches::decode(&data.records).is_empty());

    c.produce_ok("edge", 0, batches::values("e", 4)).await;
    let data = c.fetch("edge", 0, 4).await;
    assert_eq!(data.error_code, 0);
    assert_eq!(data.high_watermark, 4);
    assert_eq!(data.records.as_ref().map_or(0, |r| r.len()), 0);

    let data = c.fetch("edge", 0, 5).await;
    assert_eq!(data.error_code, 1, "OFFSET_OUT_OF_RANGE");
    assert_eq!(data.high_watermark, 4);

    let data = c.fetch("edge", 0, -1).await;
    assert_eq!(data.error_code, 1, "negative offset: OFFSET_OUT_OF_RANGE");

    let data = c.fetch("edge", 3, 0).await;
    assert_eq!(data.error_code, 3, "no partition 3: UNKNOWN_TOPIC_OR_PARTITION");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_fetch_returns_records_produced_while_waiting() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("poll", 2, &[]).await;
    let mut producer = broker.client().await;
    let produced = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        // A write to another partition must not end the wait with nothing to return...
        producer.produce_ok("poll", 1, batches::values("elsewhere", 1)).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        producer.produce_ok("poll", 0, batches::values("late", 2)).await
    });
    let req = fetch_request("poll", 0, 0, 1024 * 1024).with_max_wait_ms(10_000).with_min_bytes(1);
    let data = c.fetch_with(req).await;
    assert_eq!(produced.await.unwrap(), 0);
    assert_eq!(data.error_code, 0);
    // ...so the response holds what was produced to the partition being read.
    assert_eq!(batches::decode_values(&data.records), ["late-0", "late-1"]);
    assert_eq!(data.high_watermark, 2);
}

/// Wake-ups are per partition: appends to partition 1 do not wake (let alone re-read)
/// a fetch parked on partition 0; the append to partition 0 wakes it exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_fetch_is_woken_only_by_appends_to_its_own_partitions() {
    let broker = TestBroker::start().await;
    let purgatory = || broker.broker().context().replicas.purgatory();
    let mut c = broker.client().await;
    c.create_topic_ok("wake", 2, &[]).await;
    let req = fetch_request("wake", 0, 0, 1024 * 1024).with_max_wait_ms(30_000).with_min_bytes(1);
    let fetch = tokio::spawn(async move { c.fetch_with(req).await });
    for _ in 0..500 {
        if purgatory().parked() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(purgatory().parked(), 1, "the fetch parks on partition 0");

    let mut producer = broker.client().await;
    for i in 0..10 {
        producer.produce_ok("wake", 1, batches::values(&format!("b{i}"), 1)).await;
    }
    assert_eq!(purgatory().wakeups(), 0, "appends to partition 1 woke the fetch on partition 0");
    assert!(!fetch.is_finished());

    producer.produce_ok("wake", 0, batches::values("a", 1)).await;
    let data = fetch.await.unwrap();
    assert_eq!(batches::decode_values(&data.records), ["a-0"]);
    assert_eq!(purgatory().wakeups(), 1);
    assert_eq!(purgatory().parked(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_earliest_latest_timestamp_and_max_timestamp() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("times", 1, &[]).await;
    let t = batches::now_ms() - 60_000;
    // Offsets 0..=4 with timestamps t, t+10, t+50 (the max), t+20, t+30.
    c.produce_ok("times", 0, batches::batch(&[Rec::value("a").at(t), Rec::value("b").at(t + 10)])).await;
    c.produce_ok("times", 0, batches::batch(&[Rec::value("c").at(t + 50), Rec::value("d").at(t + 20)])).await;
    c.produce_ok("times", 0, batches::batch(&[Rec::value("e").at(t + 30)])).await;

    let earliest = c.list_offset("times", 0, EARLIEST).await;
    assert_eq!((earliest.error_code, earliest.offset), (0, 0));
    let latest = c.list_offset("times", 0, LATEST).await;
    assert_eq!((latest.error_code, latest.offset), (0, 5));

    // The first offset whose timestamp is >= the target.
    for (target, offset, ts) in [(t - 1, 0, t), (t, 0, t), (t + 5, 1, t + 10), (t + 11, 2, t + 50), (t + 50, 2, t + 50)]
    {
        let r = c.list_offset("times", 0, target).await;
        assert_eq!((r.error_code, r.offset, r.timestamp), (0, offset, ts), "target t+{}", target - t);
    }
    // Beyond every timestamp: no offset.
    let r = c.list_offset("times", 0, t + 51).await;
    assert_eq!((r.error_code, r.offset, r.timestamp), (0, -1, -1));

    let max = c.list_offset("times", 0, MAX_TIMESTAMP).await;
    assert_eq!((max.error_code, max.offset, max.timestamp), (0, 2, t + 50));

    let missing = c.list_offset("times", 9, LATEST).await;
    assert_eq!(missing.error_code, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_advances_the_log_start_offset() {
    use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("trim", 1, &[]).await;
    for i in 0..4 {
        c.produce_ok("trim", 0, batches::values(&format!("b{i}"), 2)).await;
    }
    let delete = |offset: i64| {
        DeleteRecordsRequest::default().with_timeout_ms(30_000).with_topics(vec![DeleteRecordsTopic::default()
            .with_name(topic_name("trim"))
            .with_partitions(vec![DeleteRecordsPartition::default().with_partition_index(0).with_offset(offset)])])
    };
    let resp = c.send(2, delete(3)).await;
    let p = &resp.topics[0].partitions[0];
    assert_eq!((p.error_code, p.low_watermark), (0, 3));

    assert_eq!(c.list_offset("trim", 0, EARLIEST).await.offset, 3);
    assert_eq!(c.list_offset("trim", 0, LATEST).await.offset, 8);
    let below = c.fetch("trim", 0, 2).await;
    assert_eq!(below.error_code, 1, "below the log start offset: OFFSET_OUT_OF_RANGE");
    let at = c.fetch("trim", 0, 3).await;
    assert_eq!(at.error_code, 0);
    assert_eq!(at.log_start_offset, 3);
    let offsets: Vec<i64> = batches::decode(&at.records).iter().map(|r| r.offset).filter(|o| *o >= 3).collect();
    assert_eq!(offsets, [3, 4, 5, 6, 7]);

    // Moving it backwards keeps it where it is; -1 means the high watermark.
    let resp = c.send(2, delete(1)).await;
    assert_eq!(resp.topics[0].partitions[0].low_watermark, 3);
    let resp = c.send(2, delete(-1)).await;
    let p = &resp.topics[0].partitions[0];
    assert_eq!((p.error_code, p.low_watermark), (0, 8));
    assert_eq!(c.list_offset("trim", 0, EARLIEST).await.offset, 8);
    // Beyond the high watermark: OFFSET_OUT_OF_RANGE.
    let resp = c.send(2, delete(9)).await;
    assert_eq!(resp.topics[0].partitions[0].error_code, 1);
    // New records still land after the old log end.
    assert_eq!(c.produce_ok("trim", 0, batches::values("after", 1)).await, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_for_leader_epoch_returns_the_log_end_offset() {
    use kafka_protocol::messages::offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic};
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("epochs", 1, &[]).await;
    c.produce_ok("epochs", 0, batches::values("x", 3)).await;
    c.produce_ok("epochs", 0, batches::values("y", 2)).await;
    let md = c.metadata(&["epochs"]).await;
    assert_eq!(md.topics[0].partitions[0].leader_epoch, 0);
    let ask = |epoch: i32| {
        OffsetForLeaderEpochRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
            OffsetForLeaderTopic::default().with_topic(topic_name("epochs")).with_partitions(vec![
                OffsetForLeaderPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(-1)
                    .with_leader_epoch(epoch),
            ]),
        ])
    };
    let resp = c.send(4, ask(0)).await;
    let p = &resp.topics[0].partitions[0];
    assert_eq!((p.error_code, p.leader_epoch, p.end_offset), (0, 0, 5));
    // A future epoch the leader has not reached yet: Kafka answers UNDEFINED (-1, -1).
    let resp = c.send(4, ask(7)).await;
    let p = &resp.topics[0].partitions[0];
    assert_eq!((p.error_code, p.leader_epoch, p.end_offset), (0, -1, -1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_partitions_grows_a_topic() {
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
    let broker = TestBroker::start_with(NO_AUTO_CREATE).await;
    let mut c = broker.client().await;
    c.create_topic_ok("grow", 1, &[]).await;
    c.produce_ok("grow", 0, batches::values("old", 1)).await;
    let grow = |name: &str, count: i32| {
        CreatePartitionsRequest::default().with_timeout_ms(30_000).with_topics(vec![CreatePartitionsTopic::default()
            .with_name(topic_name(name))
            .with_count(count)
            .with_assignments(None)])
    };
    let resp = c.send(3, grow("grow", 4)).await;
    assert_eq!(resp.results[0].error_code, 0, "{:?}", resp.results[0].error_message);
    let md = c.metadata(&["grow"]).await;
    let mut indexes: Vec<i32> = md.topics[0].partitions.iter().map(|p| p.partition_index).collect();
    indexes.sort();
    assert_eq!(indexes, [0, 1, 2, 3]);
    assert_eq!(c.produce_ok("grow", 3, batches::values("new", 2)).await, 0);
    assert_eq!(batches::decode_values(&c.fetch("grow", 3, 0).await.records), ["new-0", "new-1"]);
    assert_eq!(batches::decode_values(&c.fetch("grow", 0, 0).await.records), ["old-0"]);

    // Shrinking, or staying the same size, is refused.
    let resp = c.send(3, grow("grow", 2)).await;
    assert_eq!(resp.results[0].error_code, 37, "INVALID_PARTITIONS");
    let resp = c.send(3, grow("grow", 4)).await;
    assert_eq!(resp.results[0].error_code, 37, "INVALID_PARTITIONS");
    let resp = c.send(3, grow("nope", 4)).await;
    assert_eq!(resp.results[0].error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    // validate_only changes nothing.
    let resp = c.send(3, grow("grow", 6).with_validate_only(true)).await;
    assert_eq!(resp.results[0].error_code, 0);
    assert_eq!(c.metadata(&["grow"]).await.topics[0].partitions.len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_and_incrementally_alter_topic_configs() {
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("conf", 1, &[]).await;

    let described = c.describe_topic_configs("conf").await;
    assert_eq!(described.error_code, 0);
    let default_retention = broker.config().log_retention_ms.to_string();
    assert_eq!(config_entry(&described, "retention.ms"), Some((Some(default_retention.clone()), 5)));
    assert_eq!(config_entry(&described, "cleanup.policy"), Some((Some("delete".into()), 5)));
    assert_eq!(
        config_entry(&described, "max.message.bytes"),
        Some((Some(broker.config().message_max_bytes.to_string()), 5))
    );
    assert!(config_entry(&described, "segment.bytes").is_some());

    let alter = |op: i8, name: &str, value: Option<&str>| {
        IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(RESOURCE_TOPIC)
            .with_resource_name(str("conf"))
            .with_configs(vec![AlterableConfig::default()
                .with_name(str(name))
                .with_config_operation(op)
                .with_value(value.map(str))])])
    };
    let resp = c.send(1, alter(0, "retention.ms", Some("1000"))).await;
    assert_eq!(resp.responses[0].error_code, 0, "{:?}", resp.responses[0].error_message);
    let described = c.describe_topic_configs("conf").await;
    assert_eq!(config_entry(&described, "retention.ms"), Some((Some("1000".into()), 1)));

    // Invalid values and unknown names are refused and change nothing.
    let resp = c.send(1, alter(0, "retention.ms", Some("soon"))).await;
    assert_eq!(resp.responses[0].error_code, 40, "INVALID_CONFIG");
    let resp = c.send(1, alter(0, "no.such.config", Some("1"))).await;
    assert_eq!(resp.responses[0].error_code, 40, "INVALID_CONFIG");
    let described = c.describe_topic_configs("conf").await;
    assert_eq!(config_entry(&described, "retention.ms"), Some((Some("1000".into()), 1)));

    // APPEND on a list config.
    let resp = c.send(1, alter(2, "cleanup.policy", Some("compact"))).await;
    assert_eq!(resp.responses[0].error_code, 0);
    let described = c.describe_topic_configs("conf").await;
    assert_eq!(config_entry(&described, "cleanup.policy"), Some((Some("delete,compact".into()), 1)));

    // DELETE reverts to the default.
    let resp = c.send(1, alter(1, "retention.ms", None)).await;
    assert_eq!(resp.responses[0].error_code, 0);
    let described = c.describe_topic_configs("conf").await;
    assert_eq!(config_entry(&described, "retention.ms"), Some((Some(default_retention), 5)));

    // Unknown topic.
    let resp = c.send(4, describe_configs_request(RESOURCE_TOPIC, "absent")).await;
    assert_eq!(resp.results[0].error_code, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_configs_replaces_the_whole_set() {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("whole", 1, &[("retention.ms", "5000")]).await;
    let described = c.describe_topic_configs("whole").await;
    assert_eq!(config_entry(&described, "retention.ms"), Some((Some("5000".into()), 1)));

    let set = |pairs: &[(&str, &str)]| {
        AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(RESOURCE_TOPIC)
            .with_resource_name(str("whole"))
            .with_configs(
                pairs
                    .iter()
                    .map(|(k, v)| AlterableConfig::default().with_name(str(k)).with_value(Some(str(v))))
                    .collect(),
            )])
    };
    let resp = c.send(2, set(&[("segment.bytes", "1048576")])).await;
    assert_eq!(resp.responses[0].error_code, 0, "{:?}", resp.responses[0].error_message);
    let described = c.describe_topic_configs("whole").await;
    assert_eq!(config_entry(&described, "segment.bytes"), Some((Some("1048576".into()), 1)));
    assert_eq!(
        config_entry(&described, "retention.ms"),
        Some((Some(broker.config().log_retention_ms.to_string()), 5)),
        "an override not named in AlterConfigs is removed"
    );

    let resp = c.send(2, set(&[("retention.ms", "-7")])).await;
    assert_eq!(resp.responses[0].error_code, 40, "INVALID_CONFIG");
    // validate_only checks without applying.
    let resp = c.send(2, set(&[("retention.ms", "42")]).with_validate_only(true)).await;
    assert_eq!(resp.responses[0].error_code, 0);
    let described = c.describe_topic_configs("whole").await;
    assert_eq!(config_entry(&described, "segment.bytes"), Some((Some("1048576".into()), 1)));
    assert_eq!(config_entry(&described, "retention.ms").unwrap().1, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_topics_are_gone() {
    let broker = TestBroker::start_with(NO_AUTO_CREATE).await;
    let mut c = broker.client().await;
    let old_id = c.create_topic_ok("doomed", 2, &[]).await;
    c.produce_ok("doomed", 0, batches::values("x", 3)).await;
    let resp = c
        .send(5, DeleteTopicsRequest::default().with_topic_names(vec![topic_name("doomed")]).with_timeout_ms(30_000))
        .await;
    assert_eq!(resp.responses[0].error_code, 0);

    let md = c.metadata(&["doomed"]).await;
    assert_eq!(md.topics[0].error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    let all = c.send(METADATA_V, MetadataRequest::default().with_topics(None)).await;
    assert!(all.topics.iter().all(|t| t.name.as_ref().map(|n| n.0.as_str()) != Some("doomed")));
    assert_eq!(c.produce("doomed", 0, batches::values("y", 1)).await.error_code, 3);
    assert_eq!(c.fetch("doomed", 0, 0).await.error_code, 3);
    // By id (v13+ fetch): UNKNOWN_TOPIC_ID.
    let by_id =
        FetchRequest::default().with_max_wait_ms(0).with_max_bytes(1 << 20).with_topics(vec![FetchTopic::default()
            .with_topic_id(old_id)
            .with_partitions(vec![fetch_partition(0, 0, 1 << 20)])]);
    let resp = c.send(13, by_id).await;
    assert_eq!(resp.responses[0].partitions[0].error_code, 100, "UNKNOWN_TOPIC_ID");

    // Re-created under the same name: a new id and an empty log.
    let new_id = c.create_topic_ok("doomed", 1, &[]).await;
    assert_ne!(new_id, old_id);
    assert_eq!(c.log_end_offset("doomed", 0).await, 0);
    assert!(batches::decode(&c.fetch("doomed", 0, 0).await.records).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_zero_gets_no_response_and_the_connection_stays_in_step() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("fire", 1, &[]).await;
    let mut body = bytes::BytesMut::new();
    use kafka_protocol::protocol::Encodable;
    RequestHeader::default()
        .with_request_api_key(ApiKey::Produce as i16)
        .with_request_api_version(PRODUCE_V)
        .with_correlation_id(1000)
        .encode(&mut body, ApiKey::Produce.request_header_version(PRODUCE_V))
        .unwrap();
    produce_request("fire", 0, batches::values("f", 2), 0).encode(&mut body, PRODUCE_V).unwrap();
    c.write_raw(&common::with_size_prefix(&body)).await;
    // The next response on this connection answers the next request, not the produce.
    assert_eq!(c.log_end_offset("fire", 0).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_auto_creates_only_when_allowed() {
    let broker = TestBroker::start_with(|c| c.num_partitions = 2).await;
    let mut c = broker.client().await;
    let req = metadata_request(&["auto"]).with_allow_auto_topic_creation(false);
    let resp = c.send(METADATA_V, req).await;
    assert_eq!(resp.topics[0].error_code, 3);
    // As Kafka 4: the request that creates the topic is answered UNKNOWN_TOPIC_OR_PARTITION
    // with no partitions; the next one shows them.
    let resp = c.send(METADATA_V, metadata_request(&["auto"]).with_allow_auto_topic_creation(true)).await;
    assert_eq!((resp.topics[0].error_code, resp.topics[0].partitions.len()), (3, 0));
    let resp = c.send(METADATA_V, metadata_request(&["auto"]).with_allow_auto_topic_creation(false)).await;
    assert_eq!(resp.topics[0].error_code, 0);
    assert_eq!(resp.topics[0].partitions.len(), 2, "num_partitions from the broker config");
    // Produce auto-creates too.
    assert_eq!(c.produce_ok("auto-by-produce", 1, batches::values("a", 1)).await, 0);
}

/// KIP-74: only the first batch of the first non-empty partition may exceed the limits;
/// after it, the response-level max_bytes holds for the partitions that follow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_max_bytes_holds_after_the_first_partition() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("wide", 2, &[]).await;
    let big = "w".repeat(10_000);
    for p in 0..2 {
        c.produce_ok("wide", p, batches::batch(&[Rec::value(&big)])).await;
    }
    let first = c.fetch("wide", 0, 0).await;
    let size = batches::batch_sizes(&first.records)[0];
    let req = FetchRequest::default().with_max_wait_ms(0).with_max_bytes(size as i32 + 50).with_topics(vec![
        FetchTopic::default()
            .with_topic(topic_name("wide"))
            .with_partitions(vec![fetch_partition(0, 0, 1 << 20), fetch_partition(1, 0, 1 << 20)]),
    ]);
    let resp = c.send(FETCH_V, req).await;
    let parts = &resp.responses[0].partitions;
    assert_eq!(parts.len(), 2);
    assert_eq!(batches::batch_sizes(&parts[0].records), vec![size]);
    assert_eq!((parts[1].error_code, parts[1].high_watermark), (0, 1));
    let second: usize = batches::batch_sizes(&parts[1].records).iter().sum();
    assert!(
        second <= 50,
        "max_bytes {} exceeded: partition 0 returned {size} bytes, then partition 1 {second}",
        size + 50
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_partition_does_not_fail_the_others() {
    use kafka_protocol::messages::produce_request::PartitionProduceData;
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("mixed", 2, &[]).await;
    let good = batches::values("good", 2);
    let mut req = produce_request("mixed", 0, good.clone(), -1);
    req.topic_data[0]
        .partition_data
        .push(PartitionProduceData::default().with_index(1).with_records(Some(batches::with_bad_crc(&good))));
    req.topic_data[0]
        .partition_data
        .push(PartitionProduceData::default().with_index(5).with_records(Some(good.clone())));
    let resp = c.send(PRODUCE_V, req).await;
    let codes: Vec<(i32, i16)> =
        resp.responses[0].partition_responses.iter().map(|p| (p.index, p.error_code)).collect();
    assert_eq!(codes, [(0, 0), (1, 2), (5, 3)]);
    assert_eq!(c.log_end_offset("mixed", 0).await, 2);
    assert_eq!(c.log_end_offset("mixed", 1).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_producers_get_distinct_offsets() {
    let broker = TestBroker::start().await;
    broker.client().await.create_topic_ok("busy", 1, &[]).await;
    let producers: Vec<_> = (0..10)
        .map(|p| {
            let addr = broker.addr();
            tokio::spawn(async move {
                let mut c = common::Client::connect(addr).await;
                let mut bases = vec![];
                for i in 0..20 {
                    bases.push(c.produce_ok("busy", 0, batches::values(&format!("p{p}-{i}"), 3)).await);
                }
                bases
            })
        })
        .collect();
    let mut bases = vec![];
    for p in producers {
        bases.extend(p.await.unwrap());
    }
    bases.sort();
    assert_eq!(bases, (0..200).map(|i| i * 3).collect::<Vec<i64>>());
    let mut c = broker.client().await;
    assert_eq!(c.log_end_offset("busy", 0).await, 600);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_configs_filters_by_key() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("filtered", 1, &[]).await;
    let mut req = describe_configs_request(RESOURCE_TOPIC, "filtered");
    req.resources[0].configuration_keys = Some(vec![str("retention.ms"), str("cleanup.policy")]);
    let resp = c.send(DESCRIBE_CONFIGS_V, req).await;
    let mut names: Vec<&str> = resp.results[0].configs.iter().map(|e| e.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["cleanup.policy", "retention.ms"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_validate_only_and_duplicates_in_one_request() {
    let broker = TestBroker::start_with(NO_AUTO_CREATE).await;
    let mut c = broker.client().await;
    let resp = c.send(CREATE_TOPICS_V, create_topics_request("dry", 3, 1, &[]).with_validate_only(true)).await;
    assert_eq!((resp.topics[0].error_code, resp.topics[0].num_partitions), (0, 3));
    assert_eq!(c.metadata(&["dry"]).await.topics[0].error_code, 3, "validate_only creates nothing");

    let mut req = create_topics_request("twice", 1, 1, &[]);
    req.topics.push(req.topics[0].clone());
    let resp = c.send(CREATE_TOPICS_V, req).await;
    // Kafka's controller answers once per duplicated name.
    let results: Vec<(&str, i16)> = resp.topics.iter().map(|t| (t.name.0.as_str(), t.error_code)).collect();
    assert_eq!(results, [("twice", 42)], "INVALID_REQUEST");
    assert_eq!(c.metadata(&["twice"]).await.topics[0].error_code, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_empty_topic_list_means_all_at_v0_and_none_later() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    c.create_topic_ok("listed", 1, &[]).await;
    let v0 = c.send(0, MetadataRequest::default().with_topics(Some(vec![]))).await;
    assert!(v0.topics.iter().any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "listed")));
    let v1 = c.send(1, MetadataRequest::default().with_topics(Some(vec![]))).await;
    assert!(v1.topics.is_empty());
    let all = c.send(1, MetadataRequest::default().with_topics(None)).await;
    assert_eq!(all.topics.len(), 1);
}
