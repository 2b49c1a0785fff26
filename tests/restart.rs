//! A broker restarted on the same data dir serves the same cluster: topics with their ids,
//! partitions and configs, every record at its offset, log start offsets; new produces
//! continue at the log end. Both after a clean shutdown and after dropping the broker
//! without one.

mod common;

use common::batches::{self, Rec};
use common::requests::*;
use common::{str, Client, TestBroker};
use kafka_protocol::messages::*;

const T0: i64 = 1_700_000_000_000;

/// What the first incarnation of the broker left behind.
struct Before {
    topic_id: uuid::Uuid,
    cluster_id: String,
    values: [Vec<String>; 2],
}

async fn populate(broker: &TestBroker) -> Before {
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
    use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let mut c = broker.client().await;
    let topic_id = c.create_topic_ok("durable", 1, &[("retention.ms", "123456789")]).await;
    // Grown after creation, and a config changed after creation.
    let resp = c
        .send(
            3,
            CreatePartitionsRequest::default().with_topics(vec![CreatePartitionsTopic::default()
                .with_name(topic_name("durable"))
                .with_count(2)
                .with_assignments(None)]),
        )
        .await;
    assert_eq!(resp.results[0].error_code, 0);
    let resp = c
        .send(
            1,
            IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(RESOURCE_TOPIC)
                .with_resource_name(str("durable"))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(str("segment.bytes"))
                    .with_config_operation(0)
                    .with_value(Some(str("2048")))])]),
        )
        .await;
    assert_eq!(resp.responses[0].error_code, 0);

    // Enough batches to roll several 2 KiB segments.
    let mut values: [Vec<String>; 2] = [vec![], vec![]];
    for b in 0..20 {
        for (p, written) in values.iter_mut().enumerate() {
            let recs: Vec<Rec> = (0..3)
                .map(|i| {
                    let n = written.len() as i64 + i;
                    Rec::keyed(&format!("k{p}"), &format!("p{p}-b{b}-r{i}-{}", "z".repeat(100))).at(T0 + n * 1000)
                })
                .collect();
            let base = c.produce_ok("durable", p as i32, batches::batch(&recs)).await;
            assert_eq!(base, written.len() as i64);
            written.extend(recs.iter().map(|r| String::from_utf8(r.value.clone().unwrap()).unwrap()));
        }
    }
    // Partition 1 starts at offset 4 after DeleteRecords.
    let resp = c
        .send(
            2,
            DeleteRecordsRequest::default().with_timeout_ms(30_000).with_topics(vec![DeleteRecordsTopic::default()
                .with_name(topic_name("durable"))
                .with_partitions(vec![DeleteRecordsPartition::default().with_partition_index(1).with_offset(4)])]),
        )
        .await;
    assert_eq!(resp.topics[0].partitions[0].low_watermark, 4);
    // A topic deleted before the restart.
    c.create_topic_ok("gone", 1, &[]).await;
    c.produce_ok("gone", 0, batches::values("g", 2)).await;
    let resp = c.send(5, DeleteTopicsRequest::default().with_topic_names(vec![topic_name("gone")])).await;
    assert_eq!(resp.responses[0].error_code, 0);

    assert!(segment_files(broker.data_dir(), "durable-0") > 1, "segment.bytes=2048 should have rolled segments");
    let cluster = c.send(0, DescribeClusterRequest::default()).await;
    Before { topic_id, cluster_id: cluster.cluster_id.to_string(), values }
}

/// The number of `.log` segment files in any directory named `dir_name` under `root`.
fn segment_files(root: &std::path::Path, dir_name: &str) -> usize {
    let mut count = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "log") && dir.file_name().is_some_and(|n| n == dir_name) {
                count += 1;
            }
        }
    }
    count
}

/// Every fetched value of `topic`-`partition` from `offset` to the log end.
async fn read_all(c: &mut Client, partition: i32, mut offset: i64) -> Vec<String> {
    let mut out = vec![];
    loop {
        let data = c.fetch("durable", partition, offset).await;
        assert_eq!(data.error_code, 0);
        let recs: Vec<_> = batches::decode(&data.records).into_iter().filter(|r| r.offset >= offset).collect();
        if recs.is_empty() {
            return out;
        }
        for r in recs {
            assert_eq!(r.offset, offset, "offsets are dense");
            out.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
            offset += 1;
        }
    }
}

async fn check_after_restart(broker: &TestBroker, before: &Before) {
    let mut c = broker.client().await;
    let cluster = c.send(0, DescribeClusterRequest::default()).await;
    assert_eq!(cluster.cluster_id.as_str(), before.cluster_id, "cluster id");

    let md = c.metadata(&["durable", "gone"]).await;
    let t = &md.topics[0];
    assert_eq!(t.error_code, 0);
    assert_eq!(t.topic_id, before.topic_id, "topic id");
    assert_eq!(t.partitions.len(), 2, "partition count (grown before the restart)");
    assert_eq!(md.topics[1].error_code, 3, "a deleted topic stays deleted");

    let described = c.describe_topic_configs("durable").await;
    assert_eq!(config_entry(&described, "retention.ms"), Some((Some("123456789".into()), 1)));
    assert_eq!(config_entry(&described, "segment.bytes"), Some((Some("2048".into()), 1)));
    assert_eq!(config_entry(&described, "cleanup.policy"), Some((Some("delete".into()), 5)));

    let n = before.values[0].len() as i64;
    assert_eq!(c.log_end_offset("durable", 0).await, n);
    assert_eq!(c.log_end_offset("durable", 1).await, n);
    assert_eq!(c.list_offset("durable", 0, EARLIEST).await.offset, 0);
    assert_eq!(c.list_offset("durable", 1, EARLIEST).await.offset, 4, "log start offset survives");
    assert_eq!(read_all(&mut c, 0, 0).await, before.values[0]);
    assert_eq!(read_all(&mut c, 1, 4).await, before.values[1][4..]);
    assert_eq!(c.fetch("durable", 1, 3).await.error_code, 1, "below the log start offset");

    // The time index is usable: record 30 was stamped T0 + 30 s.
    let r = c.list_offset("durable", 0, T0 + 29_500).await;
    assert_eq!((r.error_code, r.offset, r.timestamp), (0, 30, T0 + 30_000));
    let max = c.list_offset("durable", 0, MAX_TIMESTAMP).await;
    assert_eq!((max.offset, max.timestamp), (n - 1, T0 + (n - 1) * 1000));

    // New records continue at the log end.
    for p in 0..2 {
        assert_eq!(c.produce_ok("durable", p, batches::values("after", 2)).await, n);
        assert_eq!(c.log_end_offset("durable", p).await, n + 2);
    }
    let tail = read_all(&mut c, 0, n).await;
    assert_eq!(tail, ["after-0", "after-1"]);
    // And the deleted topic's name is free again.
    let id = c.create_topic_ok("gone", 1, &[]).await;
    assert_ne!(id, before.topic_id);
    assert_eq!(c.log_end_offset("gone", 0).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_survives_a_clean_restart() {
    let mut broker = TestBroker::start_with(|c| c.auto_create_topics = false).await;
    let before = populate(&broker).await;
    broker.restart().await;
    check_after_restart(&broker, &before).await;
    // A second restart sees the writes of the second incarnation too.
    broker.restart().await;
    let mut c = broker.client().await;
    let n = before.values[0].len() as i64;
    assert_eq!(c.log_end_offset("durable", 0).await, n + 2);
    assert_eq!(c.log_end_offset("gone", 0).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_survives_a_drop_without_shutdown() {
    let mut broker = TestBroker::start_with(|c| c.auto_create_topics = false).await;
    let before = populate(&broker).await;
    broker.crash_and_restart().await;
    check_after_restart(&broker, &before).await;
    broker.crash_and_restart().await;
    let mut c = broker.client().await;
    let n = before.values[0].len() as i64;
    assert_eq!(c.log_end_offset("durable", 0).await, n + 2);
    assert_eq!(c.produce_ok("durable", 0, batches::values("again", 1)).await, n + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_topic_survives_a_restart() {
    let mut broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let id = c.create_topic_ok("empty", 3, &[]).await;
    drop(c);
    broker.restart().await;
    let mut c = broker.client().await;
    let md = c.metadata(&["empty"]).await;
    assert_eq!(md.topics[0].topic_id, id);
    assert_eq!(md.topics[0].partitions.len(), 3);
    for p in 0..3 {
        assert_eq!(c.log_end_offset("empty", p).await, 0);
        assert_eq!(c.produce_ok("empty", p, batches::values("first", 1)).await, 0);
    }
}
