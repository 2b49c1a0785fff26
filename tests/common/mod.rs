//! Shared harness for the integration tests: a broker on an ephemeral port over a
//! temporary data dir ([`TestBroker`]), a small Kafka client speaking kafka-protocol's
//! encoders ([`Client`]), and record batch builders.
//!
//! Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

pub mod batches;
pub mod requests;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use runnel::config::BrokerConfig;
use runnel::coordinator::OffsetsWriter;
use runnel::Broker;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a test waits for a response (or for the broker to close the connection)
/// before it calls the broker hung. A bound on liveness, never an assertion on speed.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(20);

/// A broker started on `127.0.0.1:0` over a data dir that outlives restarts.
pub struct TestBroker {
    dir: TempDir,
    config: BrokerConfig,
    broker: Option<Broker>,
}

impl TestBroker {
    pub async fn start() -> TestBroker {
        Self::start_with(|_| {}).await
    }

    /// Start with the test defaults adjusted by `tweak` (kept across restarts).
    pub async fn start_with(tweak: impl FnOnce(&mut BrokerConfig)) -> TestBroker {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = BrokerConfig {
            listen: "127.0.0.1:0".into(),
            http_listen: Some("127.0.0.1:0".into()),
            data_dir: dir.path().to_path_buf(),
            ..BrokerConfig::default()
        };
        tweak(&mut config);
        config.validate().expect("test config is valid");
        let broker = Broker::start(config.clone()).await.expect("broker starts");
        TestBroker { dir, config, broker: Some(broker) }
    }

    /// Start with the test defaults and `writer` in place of the group coordinator's
    /// `__consumer_offsets` writer. Restarts go back to the real writer.
    pub async fn start_with_offsets_writer(writer: Arc<dyn OffsetsWriter>) -> TestBroker {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = BrokerConfig {
            listen: "127.0.0.1:0".into(),
            http_listen: Some("127.0.0.1:0".into()),
            data_dir: dir.path().to_path_buf(),
            ..BrokerConfig::default()
        };
        config.validate().expect("test config is valid");
        let broker = Broker::start_with_offsets_writer(config.clone(), writer).await.expect("broker starts");
        TestBroker { dir, config, broker: Some(broker) }
    }

    pub fn broker(&self) -> &Broker {
        self.broker.as_ref().expect("broker running")
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        self.broker().local_addr()
    }

    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.addr()).await
    }

    /// Graceful restart on the same data dir (the port changes).
    pub async fn restart(&mut self) {
        if let Some(b) = self.broker.take() {
            b.shutdown().await;
        }
        self.broker = Some(Broker::start(self.config.clone()).await.expect("broker restarts"));
    }

    /// Graceful restart on the same data dir with a changed configuration.
    pub async fn restart_with(&mut self, tweak: impl FnOnce(&mut BrokerConfig)) {
        tweak(&mut self.config);
        self.config.validate().expect("test config is valid");
        self.restart().await;
    }

    /// Drop the broker without `shutdown` (no final flush), then start again on the same
    /// data dir: as close to a crash as an in-process broker allows.
    pub async fn crash_and_restart(&mut self) {
        drop(self.broker.take());
        // The aborted tasks release the listener and file handles asynchronously.
        tokio::task::yield_now().await;
        self.broker = Some(Broker::start(self.config.clone()).await.expect("broker restarts after crash"));
    }

    pub async fn shutdown(mut self) {
        if let Some(b) = self.broker.take() {
            b.shutdown().await;
        }
    }

    pub fn data_dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// What came back for raw bytes: a response frame (without the size prefix) or a closed
/// connection.
#[derive(Debug)]
pub enum RawReply {
    Frame(Bytes),
    Closed,
}

impl RawReply {
    pub fn is_closed(&self) -> bool {
        matches!(self, RawReply::Closed)
    }
}

pub struct Client {
    stream: TcpStream,
    next_correlation_id: i32,
}

impl Client {
    pub async fn connect(addr: std::net::SocketAddr) -> Client {
        Client::from_stream(TcpStream::connect(addr).await.expect("connect to broker"))
    }

    pub fn from_stream(stream: TcpStream) -> Client {
        stream.set_nodelay(true).unwrap();
        Client { stream, next_correlation_id: 1 }
    }

    /// Send `req` at `version` and decode the response at that version; panics on any
    /// failure (use [`Client::try_send`] to inspect failures).
    pub async fn send<R: Request>(&mut self, version: i16, req: R) -> R::Response {
        match self.try_send(version, req).await {
            Ok(r) => r,
            Err(e) => panic!("api {} v{version}: {e:#}", R::KEY),
        }
    }

    pub async fn try_send<R: Request>(&mut self, version: i16, req: R) -> anyhow::Result<R::Response> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("runnel-it")));
        let mut body = BytesMut::new();
        header.encode(&mut body, R::header_version(version)).context("encode request header")?;
        req.encode(&mut body, version).context("encode request body")?;
        let mut frame = match self.send_raw(&with_size_prefix(&body)).await {
            RawReply::Frame(f) => f,
            RawReply::Closed => bail!("broker closed the connection instead of answering"),
        };
        let rh = ResponseHeader::decode(&mut frame, R::Response::header_version(version))
            .context("decode response header")?;
        if rh.correlation_id != correlation_id {
            bail!("correlation id {} in response to {correlation_id}", rh.correlation_id);
        }
        let resp = R::Response::decode(&mut frame, version).context("decode response body")?;
        if frame.has_remaining() {
            bail!("{} bytes left after the response body", frame.remaining());
        }
        Ok(resp)
    }

    /// Write `bytes` verbatim (the caller supplies any size prefix) and read one response
    /// frame, or notice that the broker closed the connection.
    pub async fn send_raw(&mut self, bytes: &[u8]) -> RawReply {
        if self.stream.write_all(bytes).await.is_err() {
            return RawReply::Closed;
        }
        self.read_frame().await
    }

    /// Read one response frame, or `Closed` if the peer closes (or resets) first.
    pub async fn read_frame(&mut self) -> RawReply {
        let read = async {
            let mut size = [0u8; 4];
            if self.stream.read_exact(&mut size).await.is_err() {
                return RawReply::Closed;
            }
            let size = i32::from_be_bytes(size);
            assert!(size >= 0, "broker sent a negative frame size {size}");
            let mut buf = vec![0u8; size as usize];
            if self.stream.read_exact(&mut buf).await.is_err() {
                return RawReply::Closed;
            }
            RawReply::Frame(Bytes::from(buf))
        };
        tokio::time::timeout(REPLY_TIMEOUT, read)
            .await
            .unwrap_or_else(|_| panic!("broker neither answered nor closed within {REPLY_TIMEOUT:?}"))
    }

    /// Write without reading (for requests that get no response, e.g. acks=0).
    pub async fn write_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }
}

pub fn with_size_prefix(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 4);
    out.put_i32(body.len() as i32);
    out.extend_from_slice(body);
    out
}

/// A request header followed by `body`, size-prefixed: for hand-made (hostile) frames.
pub fn raw_request(api_key: i16, version: i16, header_version: i16, body: &[u8]) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(api_key)
        .with_request_api_version(version)
        .with_correlation_id(99)
        .with_client_id(Some(StrBytes::from_static_str("runnel-it")));
    let mut out = BytesMut::new();
    header.encode(&mut out, header_version).expect("encode header");
    out.extend_from_slice(body);
    with_size_prefix(&out)
}

/// Encode a typed request body at `version` (no header).
pub fn encode_body<R: Encodable>(req: &R, version: i16) -> Vec<u8> {
    let mut out = BytesMut::new();
    req.encode(&mut out, version).expect("encode body");
    out.to_vec()
}

pub fn str(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// Fail with a message unless `cond`; for checks gathered into one report.
pub fn ensure(cond: bool, what: impl FnOnce() -> String) -> anyhow::Result<()> {
    if cond {
        Ok(())
    } else {
        Err(anyhow!(what()))
    }
}
