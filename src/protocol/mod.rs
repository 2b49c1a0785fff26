//! The Kafka protocol layer: frame → guard → decode → handler → encode.
//!
//! Only this layer knows `kafka_protocol::messages` types. A frame is checked by
//! [`guard`] before the codec sees it (the codec would otherwise pre-allocate arrays sized
//! by lengths read from the wire). Unknown API keys, unsupported versions (other than
//! ApiVersions, which answers UNSUPPORTED_VERSION as Kafka does) and malformed requests
//! close the connection, as Kafka does.

pub mod api_table;
pub mod consumer_protocol;
pub mod context;
pub mod errors;
pub mod fetch_encoding;
pub mod fetch_sessions;
pub mod guard;
pub mod handlers;
pub mod offsets_topic;
pub mod refusal_log;
pub mod replica_client;
pub mod request_metrics;
pub mod versions;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};
use thiserror::Error;

pub use crate::controller::Listener;
pub use context::Ctx;
pub use fetch_encoding::{Chunk, FetchReply};

#[derive(Debug, Error)]
pub enum ProtocolError {
    #[error("frame of {0} bytes is too short for a request header")]
    ShortFrame(usize),
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    #[error("unsupported version {version} of {api:?}")]
    UnsupportedVersion { api: ApiKey, version: i16 },
    #[error("malformed request: {0}")]
    Malformed(String),
    #[error("failed to encode response: {0}")]
    Encode(String),
}

/// What a handler produced: a response body to encode, a Fetch response whose records
/// stay in the log's files until sent, or nothing (acks=0 produce).
pub enum Reply {
    Response(Box<ResponseKind>),
    Fetch(Box<FetchReply>),
    NoResponse,
}

/// Who sent a request, and on which listener.
#[derive(Debug, Clone, Default)]
pub struct RequestInfo {
    pub peer: Option<std::net::SocketAddr>,
    pub client_id: String,
    /// Brokers are shown to the sender at their addresses on this listener, as Kafka
    /// answers each listener with its own endpoints.
    pub listener: Listener,
    /// What the connection's ApiVersions (v3+) said the client is, if it said.
    pub client_software: Option<std::sync::Arc<ClientSoftware>>,
}

/// KIP-511: the client software a connection's ApiVersions request named (cut to
/// [`ClientSoftware::MAX_LEN`] bytes each), kept for the connection's later requests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientSoftware {
    pub name: String,
    pub version: String,
}

impl ClientSoftware {
    pub const MAX_LEN: usize = 128;

    fn from_api_versions(req: &ApiVersionsRequest) -> Option<ClientSoftware> {
        let cut = |s: &str| {
            let mut end = s.len().min(Self::MAX_LEN);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s[..end].to_owned()
        };
        let name = req.client_software_name.as_str();
        (!name.is_empty())
            .then(|| ClientSoftware { name: cut(name), version: cut(req.client_software_version.as_str()) })
    }
}

impl RequestInfo {
    /// Kafka's `client_host` in DescribeGroups: "/" + the peer's IP.
    pub fn client_host(&self) -> String {
        self.peer.map(|p| format!("/{}", p.ip())).unwrap_or_default()
    }
}

/// Handle one request frame (without its size prefix). Returns the encoded response
/// frame (with size prefix) as chunks to write in order (record bytes of a Fetch response
/// as slices of the log's files), or `None` when the request gets no response.
pub async fn handle_frame(
    ctx: &Ctx,
    peer: Option<std::net::SocketAddr>,
    listener: Listener,
    client_software: &mut Option<std::sync::Arc<ClientSoftware>>,
    frame: Bytes,
) -> Result<Option<Vec<Chunk>>, ProtocolError> {
    if frame.len() < 8 {
        return Err(ProtocolError::ShortFrame(frame.len()));
    }
    let started = std::time::Instant::now();
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let api = ApiKey::try_from(raw_key).map_err(|_| ProtocolError::UnknownApiKey(raw_key))?;
    if !versions::is_supported(api, version) {
        if api == ApiKey::ApiVersions {
            // Kafka answers an unknown ApiVersions version with a v0 response carrying
            // UNSUPPORTED_VERSION and the version ranges, so the client can pick one.
            let body = handlers::api_versions::unsupported_version_response();
            return encode(ApiKey::ApiVersions, 0, correlation_id, &ResponseKind::ApiVersions(body))
                .map(|b| Some(vec![Chunk::Mem(b.freeze())]));
        }
        return Err(ProtocolError::UnsupportedVersion { api, version });
    }
    guard::check_request(&frame).map_err(|e| ProtocolError::Malformed(e.to_string()))?;
    let mut buf = frame;
    let header_version = api.request_header_version(version);
    let header =
        RequestHeader::decode(&mut buf, header_version).map_err(|e| ProtocolError::Malformed(e.to_string()))?;
    let request = RequestKind::decode(api, &mut buf, version).map_err(|e| ProtocolError::Malformed(e.to_string()))?;
    let client_id = header.client_id.as_ref().map(|c| c.to_string()).unwrap_or_default();
    if let RequestKind::ApiVersions(r) = &request {
        if let Some(software) = ClientSoftware::from_api_versions(r) {
            *client_software = Some(std::sync::Arc::new(software));
        }
    }
    let info = RequestInfo { peer, client_id, listener, client_software: client_software.clone() };
    let reply = dispatch(ctx, &info, request, version).await?;
    let encoded = match reply {
        Reply::NoResponse => Ok(None),
        Reply::Fetch(reply) => {
            fetch_encoding::encode_fetch(*reply, version, correlation_id, ctx.config.fetch_sendfile).map(Some)
        }
        Reply::Response(body) => {
            encode(api, version, correlation_id, &body).map(|b| Some(vec![Chunk::Mem(b.freeze())]))
        }
    };
    ctx.requests.observe_request(api, started.elapsed());
    encoded
}

async fn dispatch(ctx: &Ctx, info: &RequestInfo, request: RequestKind, v: i16) -> Result<Reply, ProtocolError> {
    use handlers::*;
    if matches!(
        request,
        RequestKind::JoinGroup(_)
            | RequestKind::SyncGroup(_)
            | RequestKind::Heartbeat(_)
            | RequestKind::LeaveGroup(_)
            | RequestKind::OffsetCommit(_)
            | RequestKind::OffsetFetch(_)
            | RequestKind::DescribeGroups(_)
            | RequestKind::ListGroups(_)
            | RequestKind::DeleteGroups(_)
            | RequestKind::OffsetDelete(_)
    ) {
        // Groups follow the leadership of their `__consumer_offsets` partitions.
        offsets_topic::prepare_group_request(ctx).await;
    }
    let resp = match request {
        RequestKind::ApiVersions(r) => ResponseKind::ApiVersions(api_versions::handle(ctx, r, v)),
        RequestKind::Metadata(r) => ResponseKind::Metadata(metadata::handle(ctx, info, r, v).await),
        RequestKind::Produce(r) => {
            let (acks, started) = (r.acks, std::time::Instant::now());
            let traced =
                ctx.traces.as_ref().map(|_| (crate::traces::ProduceSpan::start(), produce::traced_topics(ctx, &r)));
            let mut appended = None;
            let resp = produce::handle(ctx, info, r, v, &mut appended).await;
            ctx.requests.observe_produce(acks, started.elapsed());
            if let (Some(queue), Some((start, topics))) = (&ctx.traces, traced) {
                queue.push(produce::span(start, topics, acks, info, resp.as_ref(), appended));
            }
            match resp {
                Some(resp) => ResponseKind::Produce(resp),
                None => return Ok(Reply::NoResponse),
            }
        }
        RequestKind::Fetch(r) => return Ok(Reply::Fetch(Box::new(fetch::handle(ctx, info, r, v).await))),
        RequestKind::ListOffsets(r) => ResponseKind::ListOffsets(list_offsets::handle(ctx, r, v).await),
        RequestKind::CreateTopics(r) => ResponseKind::CreateTopics(create_topics::handle(ctx, r, v).await),
        RequestKind::DeleteTopics(r) => ResponseKind::DeleteTopics(delete_topics::handle(ctx, r, v).await),
        RequestKind::CreatePartitions(r) => ResponseKind::CreatePartitions(create_partitions::handle(ctx, r, v).await),
        RequestKind::DescribeConfigs(r) => ResponseKind::DescribeConfigs(configs::describe(ctx, r, v)),
        RequestKind::AlterConfigs(r) => ResponseKind::AlterConfigs(configs::alter(ctx, r, v).await),
        RequestKind::IncrementalAlterConfigs(r) => {
            ResponseKind::IncrementalAlterConfigs(configs::incremental_alter(ctx, r, v).await)
        }
        RequestKind::DescribeCluster(r) => ResponseKind::DescribeCluster(describe_cluster::handle(ctx, info, r, v)),
        RequestKind::DescribeTopicPartitions(r) => {
            ResponseKind::DescribeTopicPartitions(describe_topic_partitions::handle(ctx, r, v))
        }
        RequestKind::DescribeProducers(r) => ResponseKind::DescribeProducers(describe_producers::handle(ctx, r, v)),
        RequestKind::UpdateFeatures(r) => ResponseKind::UpdateFeatures(update_features::handle(ctx, r, v).await),
        RequestKind::ListConfigResources(r) => {
            ResponseKind::ListConfigResources(list_config_resources::handle(ctx, r, v))
        }
        RequestKind::ElectLeaders(r) => ResponseKind::ElectLeaders(elect_leaders::handle(ctx, r, v).await),
        RequestKind::UnregisterBroker(r) => ResponseKind::UnregisterBroker(unregister_broker::handle(ctx, r, v).await),
        RequestKind::AddRaftVoter(r) => ResponseKind::AddRaftVoter(raft_voters::add(ctx, r, v).await),
        RequestKind::RemoveRaftVoter(r) => ResponseKind::RemoveRaftVoter(raft_voters::remove(ctx, r, v).await),
        RequestKind::AlterPartitionReassignments(r) => {
            ResponseKind::AlterPartitionReassignments(reassignments::alter(ctx, r, v).await)
        }
        RequestKind::ListPartitionReassignments(r) => {
            ResponseKind::ListPartitionReassignments(reassignments::list(ctx, r, v))
        }
        RequestKind::DescribeLogDirs(r) => ResponseKind::DescribeLogDirs(describe_log_dirs::handle(ctx, r, v)),
        RequestKind::AlterReplicaLogDirs(r) => {
            ResponseKind::AlterReplicaLogDirs(alter_replica_log_dirs::handle(ctx, r, v))
        }
        RequestKind::DescribeQuorum(r) => ResponseKind::DescribeQuorum(describe_quorum::handle(ctx, r, v).await),
        RequestKind::DeleteRecords(r) => ResponseKind::DeleteRecords(delete_records::handle(ctx, r, v)),
        RequestKind::OffsetForLeaderEpoch(r) => {
            ResponseKind::OffsetForLeaderEpoch(offset_for_leader_epoch::handle(ctx, r, v))
        }
        RequestKind::InitProducerId(r) => ResponseKind::InitProducerId(init_producer_id::handle(ctx, r, v).await),
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(groups::find_coordinator(ctx, info, r, v).await)
        }
        RequestKind::GetTelemetrySubscriptions(r) => {
            ResponseKind::GetTelemetrySubscriptions(telemetry::get_subscriptions(ctx, info, r, v))
        }
        RequestKind::PushTelemetry(r) => ResponseKind::PushTelemetry(telemetry::push(ctx, info, r, v)),
        RequestKind::JoinGroup(r) => ResponseKind::JoinGroup(groups::join_group(ctx, info, r, v).await),
        RequestKind::SyncGroup(r) => ResponseKind::SyncGroup(groups::sync_group(ctx, r, v).await),
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(groups::heartbeat(ctx, r, v).await),
        RequestKind::LeaveGroup(r) => ResponseKind::LeaveGroup(groups::leave_group(ctx, r, v).await),
        RequestKind::DescribeGroups(r) => ResponseKind::DescribeGroups(groups::describe_groups(ctx, r, v)),
        RequestKind::ListGroups(r) => ResponseKind::ListGroups(groups::list_groups(ctx, r, v)),
        RequestKind::DeleteGroups(r) => ResponseKind::DeleteGroups(groups::delete_groups(ctx, r, v).await),
        RequestKind::OffsetCommit(r) => ResponseKind::OffsetCommit(group_offsets::offset_commit(ctx, r, v).await),
        RequestKind::OffsetFetch(r) => ResponseKind::OffsetFetch(group_offsets::offset_fetch(ctx, r, v)),
        RequestKind::OffsetDelete(r) => ResponseKind::OffsetDelete(group_offsets::offset_delete(ctx, r, v).await),
        _ => return Err(ProtocolError::Malformed(format!("no handler for this API (client {:?})", info.client_id))),
    };
    Ok(Reply::Response(Box::new(resp)))
}

/// Encode a response frame: size prefix, response header, body.
pub fn encode(api: ApiKey, version: i16, correlation_id: i32, body: &ResponseKind) -> Result<BytesMut, ProtocolError> {
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let hv = api.response_header_version(version);
    header.encode(&mut buf, hv).map_err(|e| ProtocolError::Encode(e.to_string()))?;
    body.encode(&mut buf, version).map_err(|e| ProtocolError::Encode(e.to_string()))?;
    let len = (buf.len() - 4) as i32;
    buf[0..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf)
}

/// Peek the correlation id of a frame, for log lines about frames that fail to parse.
pub fn peek_correlation_id(frame: &[u8]) -> Option<i32> {
    let mut b = frame.get(4..8)?;
    Some(b.get_i32())
}
