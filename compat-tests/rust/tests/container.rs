//! The runnel image under testcontainers-rs: the image `docker/build-image.sh` builds
//! (`runnel:dev`, or `$RUNNEL_IMAGE`), its port published on a random host port.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use rdkafka::consumer::Consumer;
use runnel_compat_rust::container::{bootstrap_servers, Runnel, KAFKA_PORT};
use serde_json::json;
use testcontainers::core::ExecCommand;
use testcontainers::runners::AsyncRunner;
use testcontainers::ContainerAsync;

async fn host_and_port(c: &ContainerAsync<Runnel>) -> anyhow::Result<(String, u16)> {
    Ok((c.get_host().await?.to_string(), c.get_host_port_ipv4(KAFKA_PORT).await?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_round_trip_through_a_random_host_port() -> anyhow::Result<()> {
    let runnel = Runnel::default().start().await?;
    let bootstrap = bootstrap_servers(&runnel).await?;
    let (host, port) = host_and_port(&runnel).await?;
    assert_ne!(port, 9092, "testcontainers publishes a random host port");
    // The broker advertises the published address, not its own 0.0.0.0:9092, so that the
    // client's second connection (to the partition leader) reaches it too.
    assert_eq!(common::advertised_broker(&bootstrap)?, (host, port));
    common::round_trip(&bootstrap, "container-round-trip", 50).await
}

/// Consumer groups through the published port: the coordinator the broker names in
/// FindCoordinator is the advertised address too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_group_resumes_at_the_committed_offset() -> anyhow::Result<()> {
    let runnel = Runnel::default().start().await?;
    let bootstrap = bootstrap_servers(&runnel).await?;
    common::group_resumes_at_committed_offset(&bootstrap, "container-group", "container-group-g").await
}

/// A client of another language and another protocol implementation: kafka-python (pure
/// Python), from the compat suite's venv (compat-tests/setup/python.sh).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_round_trip() -> anyhow::Result<()> {
    let python = runnel_compat_rust::cache_dir().join("venv/bin/python");
    ensure!(python.exists(), "{} missing: run compat-tests/setup/python.sh", python.display());
    let runnel = Runnel::default().start().await?;
    let bootstrap = bootstrap_servers(&runnel).await?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/kafka_python_round_trip.py");
    let out = tokio::process::Command::new(&python)
        .args([script, &bootstrap, "container-kafka-python", "10"])
        .output()
        .await?;
    ensure!(out.status.success(), "kafka-python failed: {}", String::from_utf8_lossy(&out.stderr));
    let got: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let (host, port) = host_and_port(&runnel).await?;
    let records: Vec<_> = (0..10).map(|i| json!([format!("key-{i}"), format!("value-{i}"), i])).collect();
    assert_eq!(got["offsets"], json!((0..10).collect::<Vec<_>>()));
    assert_eq!(got["records"], json!(records));
    // kafka-python, too, was told the published address.
    assert_eq!(got["brokers"], json!([[host, port]]));
    // And what kafka-python wrote, rdkafka reads.
    let records = common::consume(&bootstrap, "container-kafka-python", 10).await?;
    assert_eq!(records[9], ("key-9".to_owned(), "value-9".to_owned(), 9));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_come_from_runnel_environment_variables() -> anyhow::Result<()> {
    let runnel = Runnel::default().with_setting("NUM_PARTITIONS", "3").start().await?;
    let bootstrap = bootstrap_servers(&runnel).await?;
    common::produce(&bootstrap, "container-three-partitions", 1).await?;
    let consumer = common::consumer(&bootstrap)?;
    let metadata = consumer.fetch_metadata(Some("container-three-partitions"), common::TIMEOUT)?;
    assert_eq!(metadata.topics()[0].partitions().len(), 3);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_as_non_root_with_data_in_the_volume_and_reports_healthy() -> anyhow::Result<()> {
    let runnel = Runnel::default().start().await?;
    let bootstrap = bootstrap_servers(&runnel).await?;
    common::produce(&bootstrap, "container-volume", 1).await?;

    let mut id = runnel.exec(ExecCommand::new(["id", "-u"])).await?;
    assert_eq!(String::from_utf8(id.stdout_to_vec().await?)?.trim(), "10001");
    let mut ls = runnel.exec(ExecCommand::new(["ls", "/data"])).await?;
    let listing = String::from_utf8(ls.stdout_to_vec().await?)?;
    assert!(listing.lines().any(|l| l == "container-volume-0"), "/data holds: {listing}");

    // The image's HEALTHCHECK (interval 2 s) turns the container healthy.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = Command::new("docker")
            .args(["inspect", "-f", "{{.State.Health.Status}}", runnel.id()])
            .output()
            .context("docker inspect")?;
        let status = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if status == "healthy" {
            break;
        }
        ensure!(Instant::now() < deadline, "health status still {status:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

/// `docker stop` sends SIGTERM to runnel (PID 1 through the entrypoint's exec), which
/// shuts down cleanly: exit code 0 (a SIGKILL after docker's grace period would be 137).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_stop_is_a_clean_shutdown() -> anyhow::Result<()> {
    let runnel = Runnel::default().start().await?;
    common::produce(&bootstrap_servers(&runnel).await?, "container-stop", 1).await?;
    runnel.stop().await?;
    assert_eq!(runnel.exit_code().await?, Some(0));
    Ok(())
}
