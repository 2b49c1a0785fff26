//! Connection limits: idle and stalled connections are closed, one address cannot take
//! every slot, a full broker makes room for a new client by closing the least recently
//! active idle connection, and partially received requests share a byte budget while
//! small requests keep being served. Timeouts here are short so the tests are quick; the
//! waits are bounded by `REPLY_TIMEOUT`, never asserted as durations.

mod common;

use common::batches;
use common::requests::*;
use common::{encode_body, raw_request, Client, RawReply, TestBroker};
use kafka_protocol::messages::*;
use tokio::net::TcpSocket;

async fn api_versions(c: &mut Client) -> anyhow::Result<ApiVersionsResponse> {
    c.try_send(
        3,
        ApiVersionsRequest::default()
            .with_client_software_name(common::str("it"))
            .with_client_software_version(common::str("1")),
    )
    .await
}

/// A client whose socket is bound to `ip` (any 127.x.y.z is loopback).
async fn connect_from(broker: &TestBroker, ip: [u8; 4]) -> Client {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(std::net::SocketAddr::from((ip, 0))).unwrap();
    Client::from_stream(socket.connect(broker.addr()).await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_and_busy_ones_are_not() {
    let broker = TestBroker::start_with(|c| c.connections_max_idle_ms = 1_000).await;
    let mut busy = broker.client().await;
    let mut idle = broker.client().await;
    assert!(api_versions(&mut idle).await.is_ok());
    // Requests every 100 ms keep a connection open well past the idle timeout (a margin of
    // 900 ms for a loaded machine).
    for _ in 0..16 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        api_versions(&mut busy).await.expect("an active connection stays open");
    }
    assert!(idle.read_frame().await.is_closed(), "the idle connection was closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_stalls_mid_frame_closes_its_connection() {
    let broker = TestBroker::start_with(|c| c.request_read_timeout_ms = 300).await;
    let mut stalled = broker.client().await;
    // A size prefix and one byte of a 100-byte frame, then nothing.
    stalled.write_raw(&[0, 0, 0, 100, 0]).await;
    assert!(stalled.read_frame().await.is_closed());
    let mut fresh = broker.client().await;
    api_versions(&mut fresh).await.expect("others are served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_cannot_take_every_connection() {
    let broker = TestBroker::start_with(|c| c.max_connections_per_ip = 2).await;
    let mut a = connect_from(&broker, [127, 0, 0, 1]).await;
    let mut b = connect_from(&broker, [127, 0, 0, 1]).await;
    let mut refused = connect_from(&broker, [127, 0, 0, 1]).await;
    assert!(refused.read_frame().await.is_closed(), "a third connection from 127.0.0.1 is closed");
    let mut other = connect_from(&broker, [127, 0, 0, 2]).await;
    api_versions(&mut other).await.expect("another address is served");
    api_versions(&mut a).await.unwrap();
    api_versions(&mut b).await.unwrap();
    drop(a);
    // The slot comes back once the broker sees the close.
    let mut again = None;
    for _ in 0..100 {
        let mut c = connect_from(&broker, [127, 0, 0, 1]).await;
        if api_versions(&mut c).await.is_ok() {
            again = Some(c);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(again.is_some(), "a closed connection frees its address's slot");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_broker_closes_the_least_recently_active_idle_connection_for_a_new_client() {
    let broker = TestBroker::start_with(|c| c.max_connections = 3).await;
    let mut oldest = broker.client().await;
    api_versions(&mut oldest).await.unwrap();
    let mut second = broker.client().await;
    api_versions(&mut second).await.unwrap();
    let mut third = broker.client().await;
    api_versions(&mut third).await.unwrap();
    // `second` was used last but one: make `oldest` the least recently active.
    api_versions(&mut second).await.unwrap();
    let mut newcomer = broker.client().await;
    api_versions(&mut newcomer).await.expect("the new client is served at once");
    assert!(oldest.read_frame().await.is_closed(), "the least recently active idle connection made room");
    api_versions(&mut second).await.expect("others stay open");
    api_versions(&mut third).await.expect("others stay open");
}

/// Two clients each start a 150 kB request under a 200 kB budget: the second waits for
/// the first (unread) while small requests on other connections are served; then both
/// complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_requests_share_a_byte_budget_and_small_requests_go_on() {
    let broker = TestBroker::start_with(|c| {
        c.socket_request_max_bytes = 200_000;
        c.queued_max_request_bytes = 200_000;
    })
    .await;
    let mut admin = broker.client().await;
    admin.create_topic_ok("big", 1, &[]).await;
    let big_frame = |value: &str| {
        let records = batches::batch(&[batches::Rec::value(value)]);
        let body = encode_body(&produce_request("big", 0, records, 1), PRODUCE_V);
        raw_request(0, PRODUCE_V, 2, &body)
    };
    let value = "v".repeat(150_000);
    let (frame_a, frame_b) = (big_frame(&value), big_frame(&value));
    assert!(frame_a.len() > 150_000 && frame_a.len() < 200_000);
    let mut a = broker.client().await;
    let mut b = broker.client().await;
    // Both send all but the last byte: A holds 150 kB of the budget, B waits for it.
    a.write_raw(&frame_a[..frame_a.len() - 1]).await;
    b.write_raw(&frame_b[..frame_b.len() - 1]).await;
    for _ in 0..5 {
        let mut small = broker.client().await;
        api_versions(&mut small).await.expect("small requests are served meanwhile");
        let md = small.send(METADATA_V, metadata_request(&["big"])).await;
        assert_eq!(md.topics[0].error_code, 0);
    }
    a.write_raw(&frame_a[frame_a.len() - 1..]).await;
    b.write_raw(&frame_b[frame_b.len() - 1..]).await;
    for c in [&mut a, &mut b] {
        match c.read_frame().await {
            RawReply::Frame(f) => assert!(f.len() > 8, "a produce response"),
            RawReply::Closed => panic!("a budgeted request was dropped"),
        }
    }
    let offsets = admin.send(LIST_OFFSETS_V, list_offsets_request("big", 0, LATEST)).await;
    assert_eq!(offsets.topics[0].partitions[0].offset, 2, "both records stored");
}
