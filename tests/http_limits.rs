//! The HTTP listener holds a bounded number of connections (an eighth of the open-file
//! limit, at most 512): stalled clients that never send a request cannot take every
//! descriptor of the process. Before, it accepted without bound (~20,100 stalled
//! connections ran the process out of descriptors and the log dirs went offline); now a
//! connection past the bound waits until one closes, and `/metrics` shows it.
//!
//! Alone in its binary: it lowers this process's descriptor limit before the broker
//! starts, so that the bound is small (1,024 / 8 = 128).

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::TestBroker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const LIMIT: usize = 128;

async fn health(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(b"GET /health HTTP/1.1\r\nHost: runnel\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await.unwrap();
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_http_connections_are_bounded_and_a_new_one_waits_for_a_slot() {
    let (_, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
    rlimit::setrlimit(rlimit::Resource::NOFILE, 1024, hard).unwrap();
    let broker = TestBroker::start_with(|c| c.max_open_log_files = 64).await;
    let http = broker.broker().http_addr().expect("the HTTP listener is on");

    // LIMIT clients connect and send nothing.
    let mut stalled = Vec::new();
    for _ in 0..LIMIT {
        stalled.push(TcpStream::connect(http).await.unwrap());
    }
    // The next one is accepted by the kernel but not served while every slot is taken.
    let waiting = tokio::spawn(health(http));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "a connection past the bound was served");

    // One stalled client goes away: the waiting request is served.
    drop(stalled.pop());
    let reply = tokio::time::timeout(common::REPLY_TIMEOUT, waiting).await.expect("served once a slot freed").unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");

    drop(stalled);
    let reply = tokio::time::timeout(common::REPLY_TIMEOUT, async {
        loop {
            let mut stream = TcpStream::connect(http).await.unwrap();
            stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: runnel\r\nConnection: close\r\n\r\n").await.unwrap();
            let mut reply = String::new();
            stream.read_to_string(&mut reply).await.unwrap();
            let reached = reply
                .lines()
                .find_map(|l| l.strip_prefix("http_connection_limit_reached_total "))
                .and_then(|v| v.trim().parse::<f64>().ok());
            if reached.is_some_and(|n| n >= 1.0) {
                return reply;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the limit is counted");
    assert!(reply.contains(&format!("http_connections_limit {LIMIT}")), "{reply}");
}
