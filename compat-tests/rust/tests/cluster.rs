//! Three containers of the runnel image as one cluster on a Docker network
//! ([`RunnelCluster`]): the brokers replicate over their inter-broker listener, named on
//! the network, while rdkafka on the host reaches them only through published ports. A
//! crash of the partition leader (SIGKILL) loses no acknowledged record, the survivors
//! take more, and after a `docker stop` of the next leader the last broker still serves
//! them all.

mod common;

use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::Consumer;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use runnel_compat_rust::cluster::RunnelCluster;
use runnel_compat_rust::container::KAFKA_PORT;

const TOPIC: &str = "cluster-failover";

fn acks_all_producer(bootstrap: &str) -> anyhow::Result<FutureProducer> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", "45000")
        .create()?)
}

/// Produce `range` as `value-<i>` to partition 0; the acknowledged (offset, value) pairs.
async fn produce(bootstrap: &str, range: std::ops::Range<usize>) -> anyhow::Result<Vec<(i64, String)>> {
    let producer = acks_all_producer(bootstrap)?;
    let mut acked = Vec::new();
    for i in range {
        let value = format!("value-{i}");
        let key = format!("key-{i}");
        let delivery = producer
            .send(FutureRecord::to(TOPIC).partition(0).key(&key).payload(&value), common::TIMEOUT)
            .await
            .map_err(|(e, _)| e)
            .with_context(|| format!("record {i}"))?;
        acked.push((delivery.offset, value));
    }
    Ok(acked)
}

/// (leader, isr) of partition 0 as the brokers tell a client.
fn leader_and_isr(bootstrap: &str) -> anyhow::Result<(i32, Vec<i32>)> {
    let consumer = common::consumer(bootstrap)?;
    let metadata = consumer.fetch_metadata(Some(TOPIC), common::TIMEOUT)?;
    let p = &metadata.topics()[0].partitions()[0];
    Ok((p.leader(), p.isr().to_vec()))
}

/// Everything acknowledged is read back at the offset it was acknowledged at. Errors the
/// consumer reports on the way (a connection to a broker that is gone: librdkafka tells
/// the application and retries) are skipped; only records count.
async fn read_back(bootstrap: &str, acked: &[(i64, String)]) -> anyhow::Result<()> {
    let consumer = common::consumer(bootstrap)?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Beginning)?;
    consumer.assign(&tpl)?;
    let deadline = Instant::now() + common::TIMEOUT;
    let mut read = Vec::with_capacity(acked.len());
    while read.len() < acked.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, consumer.recv()).await {
            Ok(Ok(m)) => read.push((m.offset(), String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned())),
            Ok(Err(e)) => println!("consumer error (retried by librdkafka): {e}"),
            Err(_) => anyhow::bail!("{} of {} records read from {bootstrap}", read.len(), acked.len()),
        }
    }
    ensure!(read == acked, "read back differs from what was acknowledged");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_containers_replicate_on_their_network_and_survive_the_leaders_crash() -> anyhow::Result<()> {
    let started = Instant::now();
    let mut cluster = RunnelCluster::start(3).await?;
    let bootstrap = cluster.bootstrap_servers().await?;
    println!("cluster up in {:?}: {bootstrap}", started.elapsed());

    // Clients on the host are told the published addresses (never the network names).
    let consumer = common::consumer(&bootstrap)?;
    let metadata = consumer.fetch_metadata(None, common::TIMEOUT)?;
    let mut seen: Vec<(i32, String)> =
        metadata.brokers().iter().map(|b| (b.id(), format!("{}:{}", b.host(), b.port()))).collect();
    seen.sort();
    let mut published = Vec::new();
    for id in 1..=3 {
        let c = cluster.container(id).context("running")?;
        published.push((id, format!("{}:{}", c.get_host().await?, c.get_host_port_ipv4(KAFKA_PORT).await?)));
    }
    assert_eq!(seen, published);
    drop(consumer);

    let admin: AdminClient<DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", &bootstrap).create()?;
    let topic = NewTopic::new(TOPIC, 1, TopicReplication::Fixed(3)).set("min.insync.replicas", "2");
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let created = admin.create_topics([&topic], &options).await?;
    ensure!(created.iter().all(Result::is_ok), "{created:?}");

    let mut acked = produce(&bootstrap, 0..100).await?;
    ensure!(acked.iter().map(|(o, _)| *o).eq(0..100), "offsets {:?}", acked.iter().map(|(o, _)| o).collect::<Vec<_>>());
    read_back(&bootstrap, &acked).await?;
    // Acknowledged with acks=all: every replica in sync, over the inter-broker listener.
    let (leader, isr) = leader_and_isr(&bootstrap)?;
    let mut isr_sorted = isr.clone();
    isr_sorted.sort();
    assert_eq!(isr_sorted, [1, 2, 3], "leader {leader}");

    let crashed = Instant::now();
    cluster.kill(leader).await?;
    let survivors = cluster.bootstrap_servers().await?;
    acked.extend(produce(&survivors, 100..200).await?);
    println!("100 more acknowledged {:?} after the leader (node {leader}) was killed", crashed.elapsed());
    let (new_leader, isr) = leader_and_isr(&survivors)?;
    ensure!(new_leader != leader && !isr.contains(&leader), "leader {new_leader}, isr {isr:?}");
    ensure!(acked.iter().map(|(o, _)| *o).eq(0..200), "offsets not contiguous after failover");
    read_back(&survivors, &acked).await?;

    // `docker stop` of the new leader: its controlled shutdown hands the partition to the
    // last broker, which still serves all 200 records.
    cluster.stop(new_leader).await?;
    let last = cluster.bootstrap_servers().await?;
    let (last_leader, _) = leader_and_isr(&last)?;
    ensure!(last_leader != new_leader && last_leader != leader, "leader {last_leader} after the stop");
    read_back(&last, &acked).await?;
    println!("whole test: {:?}", started.elapsed());
    Ok(())
}
