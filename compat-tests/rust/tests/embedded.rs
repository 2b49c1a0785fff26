//! The broker inside the test process: no binary, no Docker.

mod common;

use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use runnel::server::embedded::{EmbeddedBroker, EmbeddedCluster};

/// The README's example: an in-process broker and a producer in three lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_lines() -> anyhow::Result<()> {
    let broker = EmbeddedBroker::start().await?;
    let producer: FutureProducer = ClientConfig::new().set("bootstrap.servers", broker.bootstrap()).create()?;
    let delivery = producer.send(FutureRecord::to("greetings").key("k").payload("hello"), common::TIMEOUT).await;

    let delivery = delivery.map_err(|(e, _)| e)?;
    assert_eq!((delivery.partition, delivery.offset), (0, 0));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_and_consume_with_rdkafka() -> anyhow::Result<()> {
    let broker = EmbeddedBroker::start().await?;
    common::round_trip(&broker.bootstrap(), "embedded-round-trip", 50).await?;
    assert_eq!(common::advertised_broker(&broker.bootstrap())?, ("127.0.0.1".to_owned(), broker.local_addr().port()));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_removes_the_data_dir() -> anyhow::Result<()> {
    let broker = EmbeddedBroker::start_with(|c| c.num_partitions = 2).await?;
    let dir = broker.data_dir().to_owned();
    common::produce(&broker.bootstrap(), "embedded-shutdown", 3).await?;
    assert!(dir.join("embedded-shutdown-0").is_dir());
    assert!(dir.join("embedded-shutdown-1").is_dir());
    broker.shutdown().await;
    assert!(!dir.exists());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_group_resumes_at_the_committed_offset() -> anyhow::Result<()> {
    let broker = EmbeddedBroker::start().await?;
    common::group_resumes_at_committed_offset(&broker.bootstrap(), "embedded-group", "embedded-group-g").await
}

/// An in-process cluster of three: rdkafka produces (acks=all) to an auto-created topic
/// with three replicas and reads it back, before and after one broker stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_of_three_replicates_and_rides_through_a_stop() -> anyhow::Result<()> {
    let mut cluster = EmbeddedCluster::start_with(3, |_, c| c.default_replication_factor = 3).await?;
    common::round_trip(&cluster.bootstrap(), "embedded-cluster", 50).await?;
    let replicas: Vec<usize> = cluster
        .running()
        .map(|b| b.context().controller.image().topic("embedded-cluster").map_or(0, |t| t.partitions[0].replicas.len()))
        .collect();
    anyhow::ensure!(replicas == vec![3, 3, 3], "replicas per broker's image: {replicas:?}");
    cluster.stop(1).await;
    common::round_trip(&cluster.bootstrap(), "embedded-cluster-after-stop", 50).await?;
    cluster.shutdown().await;
    Ok(())
}
