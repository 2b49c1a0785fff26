//! Log compaction over the wire: a compacted topic keeps the newest record per key at its
//! original offset, and `__consumer_offsets` (compacted, as in Kafka) stays small while
//! committed offsets survive a restart after cleaning.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::batches::{self, Rec};
use common::{str, Client, TestBroker};
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::*;
use runnel::coordinator::group_partition;

/// Bytes of `.log` files in the partition directory `name` under the broker's data dir.
fn log_bytes(broker: &TestBroker, name: &str) -> u64 {
    let dir = broker.data_dir().join(name);
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
                .map(|e| e.metadata().map_or(0, |m| m.len()))
                .sum()
        })
        .unwrap_or(0)
}

/// Every record of the partition from offset 0 as `(offset, key, value)`.
async fn read_all(c: &mut Client, topic: &str) -> Vec<(i64, String, Option<String>)> {
    let mut out = vec![];
    let mut offset = 0;
    loop {
        let data = c.fetch(topic, 0, offset).await;
        assert_eq!(data.error_code, 0);
        let recs: Vec<_> = batches::decode(&data.records).into_iter().filter(|r| r.offset >= offset).collect();
        let Some(last) = recs.last() else { return out };
        offset = last.offset + 1;
        for r in recs {
            let key = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
            out.push((r.offset, key, r.value.map(|v| String::from_utf8(v.to_vec()).unwrap())));
        }
    }
}

async fn wait_until(what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_topic_keeps_the_newest_value_per_key_at_its_offset() {
    let mut broker = TestBroker::start_with(|c| c.log_cleaner_backoff_ms = 20).await;
    let mut c = broker.client().await;
    c.create_topic_ok("table", 1, &[("cleanup.policy", "compact"), ("segment.bytes", "400")]).await;
    let mut produced = vec![];
    for round in 0..30 {
        let key = format!("k{}", round % 5);
        let value = format!("v{round}");
        let offset = c.produce_ok("table", 0, batches::batch(&[Rec::keyed(&key, &value)])).await;
        produced.push((offset, key, Some(value)));
    }
    let end = produced.len() as i64;
    wait_until("the cleaner has run", async || read_all(&mut c, "table").await.len() < produced.len()).await;
    let after = read_all(&mut c, "table").await;
    // Every survivor is a produced record at its produced offset, in order.
    for rec in &after {
        assert!(produced.contains(rec), "{rec:?}");
    }
    assert!(after.windows(2).all(|w| w[0].0 < w[1].0));
    // Each key's newest value is still there.
    let mut newest: HashMap<&str, &(i64, String, Option<String>)> = HashMap::new();
    for rec in &produced {
        newest.insert(rec.1.as_str(), rec);
    }
    for rec in newest.values() {
        assert!(after.contains(rec), "newest {rec:?} kept");
    }
    let hw = c.list_offset("table", 0, common::requests::LATEST).await;
    assert_eq!(hw.offset, end);

    // Produce continues at the log end, and the cleaned log survives a restart.
    broker.restart().await;
    let mut c = broker.client().await;
    let again = read_all(&mut c, "table").await;
    assert!(again.len() <= after.len() && again.iter().all(|r| after.contains(r)));
    assert_eq!(c.produce_ok("table", 0, batches::batch(&[Rec::keyed("k0", "later")])).await, end);
}

fn commit(group: &str, topic: &str, partition: i32, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(str(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(str(""))
        .with_topics(vec![OffsetCommitRequestTopic::default().with_name(TopicName(str(topic))).with_partitions(vec![
            OffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(offset)
                .with_committed_metadata(Some(str("m"))),
        ])])
}

async fn committed(c: &mut Client, group: &str, topic: &str) -> Vec<i64> {
    let r = c
        .send(
            7,
            OffsetFetchRequest::default().with_group_id(GroupId(str(group))).with_topics(Some(vec![
                OffsetFetchRequestTopic::default()
                    .with_name(TopicName(str(topic)))
                    .with_partition_indexes(vec![0, 1, 2]),
            ])),
        )
        .await;
    assert_eq!(r.error_code, 0);
    r.topics[0].partitions.iter().map(|p| p.committed_offset).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_offsets_is_compacted_and_commits_survive_a_restart() {
    let mut broker = TestBroker::start_with(|c| {
        c.log_cleaner_backoff_ms = 20;
        c.offsets_topic_segment_bytes = 1024;
    })
    .await;
    let mut c = broker.client().await;
    c.create_topic_ok("t", 3, &[]).await;
    for round in 0..100 {
        for (group, partition) in [("g1", 0), ("g1", 1), ("g2", 2)] {
            let r = c.send(8, commit(group, "t", partition, round)).await;
            assert_eq!(r.topics[0].partitions[0].error_code, 0);
        }
    }
    // 300 commit records of ~100 bytes each; cleaned, a few segments of newest commits.
    // g1 and g2 live on their own partitions of __consumer_offsets (Kafka's hash of 50).
    let logs = ["g1", "g2"].map(|g| format!("__consumer_offsets-{}", group_partition::partition_for(g, 50)));
    assert_ne!(logs[0], logs[1]);
    let offsets_bytes = || logs.iter().map(|l| log_bytes(&broker, l)).sum::<u64>();
    wait_until("__consumer_offsets is compacted", async || offsets_bytes() < 8_000).await;
    assert_eq!(committed(&mut c, "g1", "t").await, vec![99, 99, -1]);

    broker.restart().await;
    let mut c = broker.client().await;
    assert_eq!(committed(&mut c, "g1", "t").await, vec![99, 99, -1]);
    assert_eq!(committed(&mut c, "g2", "t").await, vec![-1, -1, 99]);
    // And the group goes on committing.
    let r = c.send(8, commit("g1", "t", 0, 100)).await;
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    assert_eq!(committed(&mut c, "g1", "t").await, vec![100, 99, -1]);
}
