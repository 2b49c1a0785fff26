//! The follower's wire client: [`LeaderEndpoint`] over TCP with Kafka's Fetch (v17,
//! `ReplicaState { replica_id, replica_epoch }` with this process's broker epoch
//! (KIP-903), topics by id, in a KIP-227 fetch session ([`session`])), as Kafka's
//! `ReplicaFetcherThread` sends it, with client id `broker-<id>-fetcher-0`.
//!
//! One connection per leader, opened on first use and dropped on any error (the next
//! fetch reconnects, after the fetcher's backoff, and opens a new session). A leader that
//! no longer knows the session (it evicted it) is asked again at once with a full fetch.
//! Every step has a deadline, and a response frame larger than [`MAX_RESPONSE_BYTES`]
//! closes the connection instead of sizing a buffer.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, ReplicaState};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::handlers::str_bytes;
use crate::replication::{
    EndpointError, EndpointFuture, FetchedData, FetchedPartition, LeaderEndpoint, LeaderEndpoints, ReplicaFetchError,
    ReplicaFetchRequest,
};

mod session;
pub use session::{Prepared, SessionHandler};

/// The Fetch version followers send. v18 only adds the follower's high watermark
/// (KIP-1166), which lets a Kafka leader answer at once when the follower's is stale;
/// runnel's leader does not use it yet, so followers stay at v17.
const FETCH_VERSION: i16 = 17;
/// Kafka's `socket.connection.setup.timeout.ms` default.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Kafka's `replica.socket.timeout.ms` default, on top of the fetch's own wait.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(30);
/// A response frame larger than this is refused: the request asks for at most
/// `replica.fetch.response.max.bytes` (10 MiB) beyond one whole first batch.
pub const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// Where broker `id` listens (host, port), from the current metadata image.
pub type ResolveBroker = Arc<dyn Fn(i32) -> Option<(String, u16)> + Send + Sync>;

/// Endpoints for the fetchers of broker `node_id`.
pub struct TcpLeaderEndpoints {
    node_id: i32,
    resolve: ResolveBroker,
}

impl TcpLeaderEndpoints {
    pub fn new(node_id: i32, resolve: ResolveBroker) -> TcpLeaderEndpoints {
        TcpLeaderEndpoints { node_id, resolve }
    }
}

impl LeaderEndpoints for TcpLeaderEndpoints {
    fn endpoint(&self, leader: i32) -> Arc<dyn LeaderEndpoint> {
        Arc::new(TcpLeaderEndpoint {
            leader,
            client_id: format!("broker-{}-fetcher-0", self.node_id),
            resolve: self.resolve.clone(),
            connection: Mutex::new(None),
            session: Mutex::new(SessionHandler::default()),
            correlation_id: AtomicI32::new(0),
        })
    }
}

/// One leader over TCP.
pub struct TcpLeaderEndpoint {
    leader: i32,
    client_id: String,
    resolve: ResolveBroker,
    /// Taken for the length of a fetch and put back after a clean one (never locked
    /// across an await).
    connection: Mutex<Option<TcpStream>>,
    /// The fetch session with this leader (never locked across an await).
    session: Mutex<SessionHandler>,
    correlation_id: AtomicI32,
}

impl LeaderEndpoint for TcpLeaderEndpoint {
    fn fetch(&self, request: ReplicaFetchRequest) -> EndpointFuture<'_, Result<Vec<FetchedPartition>, EndpointError>> {
        Box::pin(async move {
            let taken = self.connection.lock().unwrap_or_else(|e| e.into_inner()).take();
            let mut stream = match taken {
                Some(s) => s,
                None => self.connect().await?,
            };
            loop {
                let prepared = self.session().prepare(positions(&request));
                let incremental = prepared.epoch > 0;
                let correlation_id = self.correlation_id.fetch_add(1, Ordering::Relaxed);
                let frame = encode_fetch(&request, &prepared, correlation_id, &self.client_id)?;
                let deadline = request.max_wait + SOCKET_TIMEOUT;
                let response = tokio::time::timeout(deadline, round_trip(&mut stream, &frame))
                    .await
                    .map_err(|_| EndpointError::Timeout(deadline))??;
                let answer = decode_fetch(response, correlation_id)?;
                self.session().complete(prepared, answer.error_code, answer.session_id);
                if answer.error_code != 0 {
                    if incremental && SESSION_ERRORS.contains(&answer.error_code) {
                        // The leader lost the session (evicted, or a mix-up): start a new one now.
                        tracing::info!(
                            leader = self.leader,
                            error_code = answer.error_code,
                            "fetch session ended by the leader; fetching in full"
                        );
                        continue;
                    }
                    return Err(EndpointError::Response(answer.error_code));
                }
                // Only a connection that completed a clean exchange is reused.
                *self.connection.lock().unwrap_or_else(|e| e.into_inner()) = Some(stream);
                return Ok(answer.partitions);
            }
        })
    }
}

/// FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR.
const SESSION_ERRORS: [i16; 3] = [70, 71, 106];

impl TcpLeaderEndpoint {
    fn session(&self) -> std::sync::MutexGuard<'_, SessionHandler> {
        self.session.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn connect(&self) -> Result<TcpStream, EndpointError> {
        let (host, port) = (self.resolve)(self.leader).ok_or(EndpointError::UnknownLeader(self.leader))?;
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((host.as_str(), port)))
            .await
            .map_err(|_| EndpointError::Timeout(CONNECT_TIMEOUT))??;
        stream.set_nodelay(true)?;
        tracing::debug!(leader = self.leader, %host, port, "replica fetcher connected");
        Ok(stream)
    }
}

async fn round_trip(stream: &mut TcpStream, frame: &[u8]) -> Result<BytesMut, EndpointError> {
    stream.write_all(frame).await?;
    let size = stream.read_i32().await?;
    let size = usize::try_from(size)
        .ok()
        .filter(|s| *s <= MAX_RESPONSE_BYTES)
        .ok_or_else(|| EndpointError::Protocol(format!("response frame size {size}")))?;
    let mut body = BytesMut::zeroed(size);
    stream.read_exact(&mut body).await?;
    Ok(body)
}

/// The fetch position of every partition of `request`, by topic id, in order.
pub fn positions(request: &ReplicaFetchRequest) -> Vec<(uuid::Uuid, FetchPartition)> {
    request
        .partitions
        .iter()
        .map(|p| {
            let position = FetchPartition::default()
                .with_partition(p.partition)
                .with_current_leader_epoch(p.current_leader_epoch)
                .with_fetch_offset(p.fetch_offset)
                .with_last_fetched_epoch(p.last_fetched_epoch.unwrap_or(-1))
                .with_log_start_offset(p.log_start_offset)
                .with_partition_max_bytes(clamp_i32(p.max_bytes));
            (p.topic_id, position)
        })
        .collect()
}

/// The request frame, size prefix included: `request`'s limits with the partitions and
/// session fields `session` prepared.
pub fn encode_fetch(
    request: &ReplicaFetchRequest,
    session: &Prepared,
    correlation_id: i32,
    client_id: &str,
) -> Result<BytesMut, EndpointError> {
    let body = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_replica_state(
            ReplicaState::default()
                .with_replica_id(BrokerId(request.replica_id))
                .with_replica_epoch(request.replica_epoch),
        )
        .with_max_wait_ms(clamp_i32(request.max_wait.as_millis() as usize))
        .with_min_bytes(clamp_i32(request.min_bytes))
        .with_max_bytes(clamp_i32(request.max_bytes))
        .with_isolation_level(0)
        .with_session_id(session.session_id)
        .with_session_epoch(session.epoch)
        .with_topics(session.topics.clone())
        .with_forgotten_topics_data(session.forgotten.clone());
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Fetch as i16)
        .with_request_api_version(FETCH_VERSION)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(str_bytes(client_id)));
    let mut buf = BytesMut::with_capacity(128 + 64 * request.partitions.len());
    buf.put_i32(0);
    let encode_err = |e: anyhow::Error| EndpointError::Protocol(format!("cannot encode the fetch: {e}"));
    header.encode(&mut buf, ApiKey::Fetch.request_header_version(FETCH_VERSION)).map_err(encode_err)?;
    body.encode(&mut buf, FETCH_VERSION).map_err(encode_err)?;
    let len = (buf.len() - 4) as i32;
    buf[0..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf)
}

/// A decoded answer: its top-level error and session, and (without an error) the
/// partitions it answers.
#[derive(Debug)]
pub struct FetchAnswer {
    pub error_code: i16,
    pub session_id: i32,
    pub partitions: Vec<FetchedPartition>,
}

/// The response frame (without its size prefix) as domain results.
pub fn decode_fetch(mut frame: BytesMut, correlation_id: i32) -> Result<FetchAnswer, EndpointError> {
    let malformed = |e: anyhow::Error| EndpointError::Protocol(e.to_string());
    let header =
        ResponseHeader::decode(&mut frame, ApiKey::Fetch.response_header_version(FETCH_VERSION)).map_err(malformed)?;
    if header.correlation_id != correlation_id {
        return Err(EndpointError::Protocol(format!(
            "correlation id {} answers request {correlation_id}",
            header.correlation_id
        )));
    }
    let response = FetchResponse::decode(&mut frame.freeze(), FETCH_VERSION).map_err(malformed)?;
    if response.error_code != 0 {
        return Ok(FetchAnswer { error_code: response.error_code, session_id: 0, partitions: Vec::new() });
    }
    let mut out = Vec::new();
    for topic in response.responses {
        for p in topic.partitions {
            out.push(FetchedPartition { topic_id: topic.topic_id, partition: p.partition_index, result: result_of(p) });
        }
    }
    Ok(FetchAnswer { error_code: 0, session_id: response.session_id, partitions: out })
}

fn result_of(p: PartitionData) -> Result<FetchedData, ReplicaFetchError> {
    let code = p.error_code;
    if code != 0 {
        return Err(match code {
            c if c == ResponseError::OffsetOutOfRange.code() => {
                ReplicaFetchError::OffsetOutOfRange { log_start_offset: p.log_start_offset }
            }
            c if c == ResponseError::NotLeaderOrFollower.code() => ReplicaFetchError::NotLeaderOrFollower,
            c if c == ResponseError::FencedLeaderEpoch.code() => ReplicaFetchError::FencedLeaderEpoch,
            c if c == ResponseError::UnknownLeaderEpoch.code() => ReplicaFetchError::UnknownLeaderEpoch,
            c if c == ResponseError::UnknownTopicOrPartition.code() || c == ResponseError::UnknownTopicId.code() => {
                ReplicaFetchError::UnknownTopicOrPartition
            }
            c => ReplicaFetchError::Other(c),
        });
    }
    let diverging = &p.diverging_epoch;
    Ok(FetchedData {
        records: p.records.clone().unwrap_or_default(),
        high_watermark: p.high_watermark,
        log_start_offset: p.log_start_offset,
        diverging_epoch: (diverging.epoch >= 0 && diverging.end_offset >= 0)
            .then_some((diverging.epoch, diverging.end_offset)),
    })
}

fn clamp_i32(v: usize) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests;
