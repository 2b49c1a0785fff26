//! SIGTERM drains: the `runnel` process stops accepting, answers what it is serving,
//! flushes and exits; every record it acknowledged is there after a restart.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::batches;
use common::requests::*;
use common::Client;
use tokio::sync::Mutex;

const PARTITIONS: i32 = 4;
const BATCH: usize = 10;

/// Starts the broker binary on a free port; returns it and its address (from the ready line).
fn start(data_dir: &std::path::Path) -> (Child, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_runnel"))
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .env("RUNNEL_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start runnel");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("ready line");
    let addr = line.trim().rsplit(' ').next().and_then(|a| a.parse().ok());
    let addr = addr.unwrap_or_else(|| panic!("no address in the ready line {line:?}"));
    (child, addr)
}

fn sigterm(child: &Child) {
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
}

/// Waits (bounded) for the process to exit; returns its status and how long it took.
fn wait_exit(child: &mut Child) -> (std::process::ExitStatus, Duration) {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status, started.elapsed());
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("runnel did not exit within 30 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// (partition, base offset, values) of each batch the broker acknowledged.
type Acked = Arc<Mutex<Vec<(i32, i64, Vec<String>)>>>;

/// Produces batches to `partition` until the broker stops answering.
async fn produce_until_closed(addr: SocketAddr, partition: i32, acks: i16, acked: Acked) {
    let mut c = Client::connect(addr).await;
    for n in 0.. {
        let prefix = format!("p{partition}-b{n}");
        let req = produce_request("drain", partition, batches::values(&prefix, BATCH), acks);
        let Ok(resp) = c.try_send(PRODUCE_V, req).await else { return };
        let p = &resp.responses[0].partition_responses[0];
        if p.error_code != 0 {
            // A retriable refusal while stopping is not an acknowledgement.
            continue;
        }
        let values = (0..BATCH).map(|i| format!("{prefix}-{i}")).collect();
        acked.lock().await.push((partition, p.base_offset, values));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_loses_no_acknowledged_record() {
    let dir = tempfile::tempdir().unwrap();
    let (mut broker, addr) = start(dir.path());
    Client::connect(addr).await.create_topic_ok("drain", PARTITIONS, &[]).await;

    let acked: Acked = Arc::default();
    let producers: Vec<_> = (0..PARTITIONS)
        .map(|p| tokio::spawn(produce_until_closed(addr, p, if p % 2 == 0 { -1 } else { 1 }, acked.clone())))
        .collect();
    // Let the load build up, then stop the broker under it.
    while acked.lock().await.len() < 200 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    sigterm(&broker);
    let (status, took) = tokio::task::spawn_blocking(move || wait_exit(&mut broker)).await.unwrap();
    assert!(status.success(), "runnel exited with {status}");
    for p in producers {
        tokio::time::timeout(Duration::from_secs(30), p).await.expect("producer stops").unwrap();
    }
    let acked = acked.lock().await.clone();
    eprintln!("SIGTERM under load: {} batches acknowledged, exit took {took:?}", acked.len());

    let (mut broker, addr) = start(dir.path());
    let mut c = Client::connect(addr).await;
    for partition in 0..PARTITIONS {
        let mut stored = std::collections::BTreeMap::new();
        let end = c.log_end_offset("drain", partition).await;
        let mut offset = 0;
        while offset < end {
            let data = c.fetch("drain", partition, offset).await;
            assert_eq!(data.error_code, 0);
            for r in batches::decode(&data.records) {
                let value = String::from_utf8(r.value.unwrap().to_vec()).unwrap();
                stored.insert(r.offset, value);
                offset = r.offset + 1;
            }
        }
        for (_, base, values) in acked.iter().filter(|(p, _, _)| *p == partition) {
            for (i, v) in values.iter().enumerate() {
                let at = base + i as i64;
                assert_eq!(stored.get(&at), Some(v), "acknowledged record {v} missing at {partition}/{at}");
            }
        }
    }
    sigterm(&broker);
    let (status, took) = tokio::task::spawn_blocking(move || wait_exit(&mut broker)).await.unwrap();
    assert!(status.success());
    eprintln!("SIGTERM with idle connections: exit took {took:?}");
}

/// A harness that reads the ready line and closes the pipe (`runnel | head -1`) must not
/// make the broker fail: before the ready and HTTP lines went out in one ignored-error
/// write, the second line's `println!` panicked on the closed pipe and runnel exited 101
/// (in 4 of 5 starts with the pipe closed this way).
#[test]
fn closing_stdout_after_the_ready_line_does_not_stop_the_broker() {
    use std::io::Read;
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_runnel"))
            .args(["--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .env("RUNNEL_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start runnel");
        let mut stdout = child.stdout.take().unwrap();
        let mut byte = [0u8; 1];
        // Byte by byte: the pipe closes right after the first newline, before any later write.
        while stdout.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {}
        drop(stdout);
        std::thread::sleep(Duration::from_millis(300));
        assert!(child.try_wait().unwrap().is_none(), "runnel exited after its stdout closed");
        sigterm(&child);
        let (status, _) = wait_exit(&mut child);
        assert!(status.success(), "runnel exited with {status}");
    }
}
