//! The admin CLI's Kafka client: one TCP connection per broker, ApiVersions on connect,
//! and every request sent at the highest version both sides support (within what this
//! client encodes, [`CLIENT_VERSIONS`]).
//!
//! Every step has a deadline ([`REQUEST_TIMEOUT`]), and a response frame larger than
//! [`MAX_RESPONSE_BYTES`] closes the connection instead of sizing a buffer; inside a
//! frame, kafka-protocol's decoder bounds every length by the bytes present.

use std::collections::HashMap;
use std::time::Duration;

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::CliError;

/// A request (connect included) that takes longer fails with a timeout.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest response frame read; Fetch asks for at most [`super::records::FETCH_MAX_BYTES`].
pub const MAX_RESPONSE_BYTES: usize = 64 << 20;
const CLIENT_ID: &str = "runnel-cli";

/// (api key, min, max) this client can encode and decode with the fields it sets: the
/// upper bounds stop below versions that name topics by id only (Fetch 13, Produce 13,
/// OffsetCommit/OffsetFetch 8+ with batched groups) or change a request's shape.
pub const CLIENT_VERSIONS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::Metadata, 1, 12),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 5),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::ListOffsets, 1, 9),
    (ApiKey::Produce, 3, 12),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::FindCoordinator, 1, 6),
    (ApiKey::ListGroups, 0, 4),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetFetch, 1, 7),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::DescribeCluster, 0, 1),
];

/// One broker connection with the API versions it announced.
pub struct Connection {
    stream: TcpStream,
    addr: String,
    broker_versions: HashMap<i16, (i16, i16)>,
    correlation_id: i32,
}

impl Connection {
    /// Connects to `addr` (host:port) and asks for its API versions.
    pub async fn connect(addr: &str) -> Result<Connection, CliError> {
        let stream = tokio::time::timeout(REQUEST_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| CliError::Timeout(format!("connecting to {addr}")))?
            .map_err(|e| CliError::Connect(addr.to_owned(), e.to_string()))?;
        stream.set_nodelay(true).ok();
        let mut conn = Connection { stream, addr: addr.to_owned(), broker_versions: HashMap::new(), correlation_id: 0 };
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str(CLIENT_ID))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut response = conn.send_at(3, request.clone()).await?;
        if response.error_code == 35 {
            // UNSUPPORTED_VERSION: the broker answered in v0; ask again in v0.
            response = conn.send_at(0, ApiVersionsRequest::default()).await?;
        }
        if response.error_code != 0 {
            return Err(CliError::kafka(format!("ApiVersions from {addr}"), response.error_code));
        }
        for k in response.api_keys {
            conn.broker_versions.insert(k.api_key, (k.min_version, k.max_version));
        }
        Ok(conn)
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The version to send `key` at: the highest both sides support.
    pub fn version(&self, key: ApiKey) -> Result<i16, CliError> {
        let ours = CLIENT_VERSIONS.iter().find(|(k, _, _)| *k == key).map(|(_, lo, hi)| (*lo, *hi));
        let theirs = self.broker_versions.get(&(key as i16)).copied();
        match (ours, theirs) {
            (Some((lo, hi)), Some((blo, bhi))) if hi.min(bhi) >= lo.max(blo) => Ok(hi.min(bhi)),
            _ => Err(CliError::Unsupported(format!("{key:?}"), self.addr.clone())),
        }
    }

    /// Sends `request` at the negotiated version; returns the response and that version.
    pub async fn send<R: Request>(&mut self, request: R) -> Result<(R::Response, i16), CliError> {
        let key = ApiKey::try_from(R::KEY).map_err(|_| CliError::Protocol(format!("api key {}", R::KEY)))?;
        let version = self.version(key)?;
        Ok((self.send_at(version, request).await?, version))
    }

    /// Sends `request` without reading a response (Produce with acks=0 has none).
    pub async fn send_without_response<R: Request>(&mut self, request: R) -> Result<(), CliError> {
        let key = ApiKey::try_from(R::KEY).map_err(|_| CliError::Protocol(format!("api key {}", R::KEY)))?;
        let version = self.version(key)?;
        let (frame, _) = self.frame(version, request)?;
        let addr = self.addr.clone();
        let io = |e: std::io::Error| CliError::Connect(addr.clone(), e.to_string());
        tokio::time::timeout(REQUEST_TIMEOUT, self.stream.write_all(&frame))
            .await
            .map_err(|_| CliError::Timeout(format!("api {} to {}", R::KEY, self.addr)))?
            .map_err(io)
    }

    /// The request frame, size prefix included, and its correlation id.
    fn frame<R: Request>(&mut self, version: i16, request: R) -> Result<(BytesMut, i32), CliError> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let correlation_id = self.correlation_id;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
        let encode = |e: anyhow::Error| CliError::Protocol(format!("cannot encode api {} v{version}: {e}", R::KEY));
        let mut frame = BytesMut::with_capacity(256);
        frame.put_i32(0);
        header.encode(&mut frame, R::header_version(version)).map_err(encode)?;
        request.encode(&mut frame, version).map_err(encode)?;
        let len = (frame.len() - 4) as i32;
        frame[0..4].copy_from_slice(&len.to_be_bytes());
        Ok((frame, correlation_id))
    }

    async fn send_at<R: Request>(&mut self, version: i16, request: R) -> Result<R::Response, CliError> {
        let (frame, correlation_id) = self.frame(version, request)?;
        let addr = self.addr.clone();
        let mut body = tokio::time::timeout(REQUEST_TIMEOUT, self.round_trip(&frame))
            .await
            .map_err(|_| CliError::Timeout(format!("api {} to {addr}", R::KEY)))??;
        let malformed = |e: anyhow::Error| CliError::Protocol(format!("api {} v{version} from {addr}: {e}", R::KEY));
        let rh = ResponseHeader::decode(&mut body, R::Response::header_version(version)).map_err(malformed)?;
        if rh.correlation_id != correlation_id {
            return Err(CliError::Protocol(format!("correlation id {} answers {correlation_id}", rh.correlation_id)));
        }
        let response = R::Response::decode(&mut body, version).map_err(malformed)?;
        if body.has_remaining() {
            return Err(CliError::Protocol(format!("{} bytes after the response body", body.remaining())));
        }
        Ok(response)
    }

    async fn round_trip(&mut self, frame: &[u8]) -> Result<BytesMut, CliError> {
        let io = |e: std::io::Error| CliError::Connect(self.addr.clone(), e.to_string());
        self.stream.write_all(frame).await.map_err(io)?;
        let size = self.stream.read_i32().await.map_err(io)?;
        let size = usize::try_from(size)
            .ok()
            .filter(|s| *s <= MAX_RESPONSE_BYTES)
            .ok_or_else(|| CliError::Protocol(format!("response frame of {size} bytes")))?;
        let mut body = BytesMut::zeroed(size);
        self.stream.read_exact(&mut body).await.map_err(io)?;
        Ok(body)
    }
}
