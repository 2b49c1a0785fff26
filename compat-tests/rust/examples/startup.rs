//! Time from "start the broker" to the first acknowledged produce, for each way of running
//! a broker in a test suite. A measurement, not a test: prints a Markdown table.
//!
//!   cargo run --release --example startup -- [RUNS] [KAFKA_RUNS]   (defaults 10 and 5)
//!
//! * binary: spawn `runnel --listen 127.0.0.1:0 --data-dir <tmp>` (release build, or
//!   $RUNNEL_BIN), read the ready line;
//! * container: `Runnel::default().start()` with testcontainers (image runnel:dev);
//! * embedded: `EmbeddedBroker::start()` in this process;
//! * Apache Kafka 4.4: `compat-tests/reference-kafka.sh start 29092`, as the reference
//!   harness starts it (fresh log dir, `kafka-storage format`, JVM start, polls for
//!   ApiVersions every 0.5 s); stopped after each run, outside the timing.
//!
//! Then, in every case, a new rdkafka producer sends one record (acks=all) to a topic that
//! does not exist yet (auto-created) and waits for the acknowledgement. "ready" is when the
//! harness considers the broker started; "first ack" when the produce was acknowledged.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use runnel::server::embedded::EmbeddedBroker;
use runnel_compat_rust::container::{bootstrap_servers, Runnel};
use runnel_compat_rust::subprocess::{runnel_bin, RunnelProcess};
use testcontainers::runners::AsyncRunner;

const KAFKA_PORT: u16 = 29092;

async fn first_ack(bootstrap: &str) -> anyhow::Result<()> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap).set("acks", "all").set("message.timeout.ms", "60000");
    let producer: FutureProducer = config.create()?;
    producer
        .send(FutureRecord::to("startup-probe").key("k").payload("v"), Duration::from_secs(60))
        .await
        .map_err(|(e, _)| e)?;
    Ok(())
}

/// (to ready, to first ack) of one run.
type Sample = (Duration, Duration);

async fn binary() -> anyhow::Result<Sample> {
    let bin = runnel_bin();
    let t0 = Instant::now();
    let runnel = RunnelProcess::start(&bin, &[])?;
    let ready = t0.elapsed();
    first_ack(runnel.bootstrap()).await?;
    Ok((ready, t0.elapsed()))
}

async fn embedded() -> anyhow::Result<Sample> {
    let t0 = Instant::now();
    let broker = EmbeddedBroker::start().await?;
    let ready = t0.elapsed();
    first_ack(&broker.bootstrap()).await?;
    let sample = (ready, t0.elapsed());
    broker.shutdown().await;
    Ok(sample)
}

async fn container() -> anyhow::Result<Sample> {
    let t0 = Instant::now();
    let runnel = Runnel::default().start().await?;
    let ready = t0.elapsed();
    first_ack(&bootstrap_servers(&runnel).await?).await?;
    Ok((ready, t0.elapsed()))
}

async fn kafka(script: &Path) -> anyhow::Result<Sample> {
    let t0 = Instant::now();
    let out = Command::new("bash").arg(script).args(["start", &KAFKA_PORT.to_string()]).output()?;
    ensure!(out.status.success(), "reference Kafka did not start: {}", String::from_utf8_lossy(&out.stderr));
    let ready = t0.elapsed();
    let acked = first_ack(&format!("127.0.0.1:{KAFKA_PORT}")).await;
    let total = t0.elapsed();
    let stopped = Command::new("bash").arg(script).args(["stop", &KAFKA_PORT.to_string()]).status()?;
    acked?;
    ensure!(stopped.success(), "reference Kafka did not stop");
    Ok((ready, total))
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 100.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.0}")
    }
}

/// "median (min–max)" in milliseconds.
fn summary(mut xs: Vec<Duration>) -> String {
    xs.sort();
    let n = xs.len();
    let median = if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2 };
    format!("{} ({}–{})", ms(median), ms(xs[0]), ms(xs[n - 1]))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(10);
    let kafka_runs: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(5);
    let script = runnel_compat_rust::repo_root().join("compat-tests/reference-kafka.sh");

    println!("| broker | runs | to ready, ms: median (min–max) | to first ack, ms: median (min–max) |");
    println!("|---|---|---|---|");
    for name in [
        "runnel binary (subprocess)",
        "runnel embedded (in-process)",
        "runnel container (testcontainers)",
        "Apache Kafka 4.4 (reference-kafka.sh)",
    ] {
        let n = if name.starts_with("Apache") { kafka_runs } else { runs };
        if n == 0 {
            continue;
        }
        let mut samples = Vec::with_capacity(n);
        for i in 0..n {
            let sample = match name {
                "runnel binary (subprocess)" => binary().await,
                "runnel embedded (in-process)" => embedded().await,
                "runnel container (testcontainers)" => container().await,
                _ => kafka(&script).await,
            }
            .with_context(|| format!("{name}, run {i}"))?;
            samples.push(sample);
        }
        let (ready, ack): (Vec<_>, Vec<_>) = samples.into_iter().unzip();
        println!("| {name} | {n} | {} | {} |", summary(ready), summary(ack));
    }
    eprintln!("(runnel binary: {})", runnel_bin().display());
    Ok(())
}
