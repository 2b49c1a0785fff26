//! rdkafka round trips shared by the embedded, subprocess and container tests.
#![allow(dead_code)] // each test binary uses a different subset

use std::time::Duration;

use anyhow::{ensure, Context};
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

pub const TIMEOUT: Duration = Duration::from_secs(30);

pub fn producer(bootstrap: &str) -> anyhow::Result<FutureProducer> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("message.timeout.ms", "30000")
        .set("enable.idempotence", "true")
        .create()?)
}

/// A consumer that `assign`s partitions and commits nothing (no group membership);
/// librdkafka still wants a `group.id` before it assigns.
pub fn consumer(bootstrap: &str) -> anyhow::Result<StreamConsumer> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "runnel-compat-assign-only")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create()?)
}

/// Produce `n` keyed records to partition 0 of `topic` (auto-created); returns their offsets.
pub async fn produce(bootstrap: &str, topic: &str, n: usize) -> anyhow::Result<Vec<i64>> {
    let producer = producer(bootstrap)?;
    let mut offsets = Vec::with_capacity(n);
    for i in 0..n {
        let key = format!("key-{i}");
        let value = format!("value-{i}");
        let delivery = producer
            .send(FutureRecord::to(topic).partition(0).key(&key).payload(&value), TIMEOUT)
            .await
            .map_err(|(e, _)| e)
            .with_context(|| format!("producing record {i} to {topic} via {bootstrap}"))?;
        ensure!(delivery.partition == 0, "delivered to partition {}", delivery.partition);
        offsets.push(delivery.offset);
    }
    producer.flush(TIMEOUT)?;
    Ok(offsets)
}

/// Read `n` records from the start of partition 0 of `topic`: (key, value, offset).
pub async fn consume(bootstrap: &str, topic: &str, n: usize) -> anyhow::Result<Vec<(String, String, i64)>> {
    let consumer = consumer(bootstrap)?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)?;
    consumer.assign(&tpl)?;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let m = tokio::time::timeout(TIMEOUT, consumer.recv())
            .await
            .with_context(|| format!("no record after {} of {n} from {topic}", out.len()))??;
        let text = |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
        out.push((text(m.key()), text(m.payload()), m.offset()));
    }
    Ok(out)
}

/// Produce `n` records, read them back, check order, offsets and content.
pub async fn round_trip(bootstrap: &str, topic: &str, n: usize) -> anyhow::Result<()> {
    let offsets = produce(bootstrap, topic, n).await?;
    ensure!(offsets == (0..n as i64).collect::<Vec<_>>(), "offsets {offsets:?}");
    let records = consume(bootstrap, topic, n).await?;
    for (i, (key, value, offset)) in records.iter().enumerate() {
        ensure!(*offset == i as i64, "record {i} has offset {offset}");
        ensure!(key == &format!("key-{i}") && value == &format!("value-{i}"), "record {i}: {key}={value}");
    }
    Ok(())
}

/// The address the broker advertises for itself in Metadata (host, port).
pub fn advertised_broker(bootstrap: &str) -> anyhow::Result<(String, u16)> {
    let producer = producer(bootstrap)?;
    let metadata = producer.client().fetch_metadata(None, TIMEOUT)?;
    let brokers = metadata.brokers();
    ensure!(brokers.len() == 1, "{} brokers in metadata", brokers.len());
    Ok((brokers[0].host().to_owned(), u16::try_from(brokers[0].port())?))
}

fn group_consumer(bootstrap: &str, group: &str, topic: &str) -> anyhow::Result<StreamConsumer> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "10000")
        .create()?;
    consumer.subscribe(&[topic])?;
    Ok(consumer)
}

/// The consumer-group round trip: a member of `group` subscribes to `topic`, reads the 10
/// records there, commits and leaves; 5 more records are produced; the next member of the
/// group resumes at the committed offset 10 (FindCoordinator, JoinGroup, SyncGroup,
/// Heartbeat, OffsetCommit, OffsetFetch, LeaveGroup, all through `bootstrap`).
pub async fn group_resumes_at_committed_offset(bootstrap: &str, topic: &str, group: &str) -> anyhow::Result<()> {
    produce(bootstrap, topic, 10).await?;
    {
        let first = group_consumer(bootstrap, group, topic)?;
        for i in 0..10 {
            let m = tokio::time::timeout(TIMEOUT, first.recv()).await.context("first member: no record")??;
            ensure!(m.offset() == i, "first member read offset {} as record {i}", m.offset());
        }
        first.commit_consumer_state(CommitMode::Sync)?;
        let committed = first.committed(TIMEOUT)?;
        let offset = committed.find_partition(topic, 0).context("no committed offset")?.offset();
        ensure!(offset == Offset::Offset(10), "committed {offset:?}");
    } // dropped: leaves the group
    let offsets = produce(bootstrap, topic, 5).await?;
    ensure!(offsets == vec![10, 11, 12, 13, 14], "offsets {offsets:?}");
    let second = group_consumer(bootstrap, group, topic)?;
    let m = tokio::time::timeout(TIMEOUT, second.recv()).await.context("second member: no record")??;
    ensure!(m.offset() == 10, "second member started at offset {}", m.offset());
    Ok(())
}
