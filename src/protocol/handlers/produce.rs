//! Produce: translate the request for the replica manager, and its outcome back.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{BrokerId, ProduceRequest, ProduceResponse};

use tokio::time::Instant;

use super::{current_leader, local_partition, str_bytes, topic_or_auto_create};
use crate::controller::TopicImage;
use crate::protocol::errors::partition_error;
use crate::protocol::{Ctx, Listener, RequestInfo};
use crate::replication::{Acks, AppendResult, PartitionError};
use crate::storage::BatchError;

fn partition_response(index: i32, e: ResponseError, message: Option<String>) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(e.code())
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(message.map(str_bytes))
}

/// `None` for acks=0: the producer expects no response.
///
/// The handler translates; the replica manager decides when a write is safe. Every
/// partition's records are appended first (`append_local`), then the handler waits for
/// each to meet the request's acks (`complete`), so the waits overlap.
/// When produce tracing is on, `appended` is set when the local appends are done (what
/// follows is the wait acks=all adds), for the request's trace span.
pub async fn handle(
    ctx: &Ctx,
    info: &RequestInfo,
    req: ProduceRequest,
    version: i16,
    appended: &mut Option<Instant>,
) -> Option<ProduceResponse> {
    let acks = Acks::from_wire(req.acks);
    let deadline = Instant::now() + Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(0));
    let mut responses = Vec::with_capacity(req.topic_data.len());
    // The topic of each entry in `responses`, when known.
    let mut topics = Vec::with_capacity(req.topic_data.len());
    // (topic slot, partition slot, partition, what was appended)
    let mut pending = Vec::new();
    for td in req.topic_data {
        let mut parts = Vec::with_capacity(td.partition_data.len());
        let topic = match acks {
            None => Err(ResponseError::InvalidRequiredAcks),
            Some(acks) => resolve_topic(ctx, &td, version).await.map(|t| (t, acks)),
        };
        let name = match &topic {
            Ok((t, _)) => t.name.clone(),
            Err(_) => td.name.0.to_string(),
        };
        for pd in td.partition_data {
            let (topic, acks) = match &topic {
                Ok((t, acks)) => (t, *acks),
                Err(e) => {
                    parts.push(partition_response(pd.index, *e, None));
                    continue;
                }
            };
            let partition = match local_partition(ctx, topic, pd.index) {
                Ok(p) => p,
                Err(e) => {
                    parts.push(partition_response(pd.index, e, None));
                    continue;
                }
            };
            let records = pd.records.unwrap_or_default();
            if let Err(why) = crate::storage::batch::exactly_one_v2_batch(&records) {
                let e = PartitionError::InvalidBatch(BatchError::InvalidRecord(why));
                log_refused(ctx, info, &name, pd.index, &e);
                parts.push(error_response(&name, pd.index, &e, version));
                continue;
            }
            match ctx.replicas.append_local(&partition, into_mut(records), acks, ctx.now_ms()).await {
                Ok(res) => {
                    pending.push((responses.len(), parts.len(), partition, res));
                    parts.push(success(pd.index, &res));
                }
                Err(e) => {
                    log_refused(ctx, info, &name, pd.index, &e);
                    parts.push(error_response(&name, pd.index, &e, version));
                }
            }
        }
        topics.push(topic.ok().map(|(t, _)| t));
        // v13 names topics by id only; before, by name only (the codec refuses a field
        // the version does not have).
        responses.push(
            TopicProduceResponse::default()
                .with_name(td.name)
                .with_topic_id(td.topic_id)
                .with_partition_responses(parts),
        );
    }
    // Invalid acks: every partition already says INVALID_REQUIRED_ACKS; nothing pending.
    let Some(acks) = acks else { return Some(ProduceResponse::default().with_responses(responses)) };
    if ctx.traces.is_some() {
        *appended = Some(Instant::now());
    }
    for (t, i, partition, appended) in pending {
        // The success response written after the append stands unless the wait fails.
        if let Err(e) = ctx.replicas.complete(&partition, appended, acks, deadline).await {
            log_refused(ctx, info, &partition.topic, partition.index, &e);
            responses[t].partition_responses[i] = error_response(&partition.topic, partition.index, &e, version);
        }
    }
    if acks == Acks::None {
        return None;
    }
    let node_endpoints =
        if version >= 10 { point_to_leaders(ctx, info.listener, &mut responses, &topics) } else { vec![] };
    Some(ProduceResponse::default().with_responses(responses).with_node_endpoints(node_endpoints))
}

/// The topic a request's entry names: by id from v13 (UNKNOWN_TOPIC_ID when the image has
/// no such id), else by name, auto-created as the broker allows.
async fn resolve_topic(ctx: &Ctx, td: &TopicProduceData, version: i16) -> Result<Arc<TopicImage>, ResponseError> {
    if version >= 13 {
        return ctx.image().topic_by_id(&td.topic_id).cloned().ok_or(ResponseError::UnknownTopicId);
    }
    topic_or_auto_create(ctx, td.name.0.as_str(), true).await
}

/// KIP-951, as Kafka's KafkaApis does for Produce v10+: a partition answered
/// NOT_LEADER_OR_FOLLOWER carries its current leader (id and epoch) and the response
/// lists that leader's endpoint once.
fn point_to_leaders(
    ctx: &Ctx,
    listener: Listener,
    responses: &mut [TopicProduceResponse],
    topics: &[Option<Arc<TopicImage>>],
) -> Vec<NodeEndpoint> {
    let mut endpoints: BTreeMap<i32, NodeEndpoint> = BTreeMap::new();
    for (t, topic) in responses.iter_mut().zip(topics) {
        for p in &mut t.partition_responses {
            if p.error_code != ResponseError::NotLeaderOrFollower.code() {
                continue;
            }
            let leader = current_leader(ctx, topic.as_deref(), p.index);
            p.current_leader = LeaderIdAndEpoch::default()
                .with_leader_id(BrokerId(leader.leader_id))
                .with_leader_epoch(leader.leader_epoch);
            if let Some(b) = leader.endpoint {
                endpoints.entry(b.node_id).or_insert_with(|| {
                    let (host, port) = b.endpoint(listener);
                    NodeEndpoint::default()
                        .with_node_id(BrokerId(b.node_id))
                        .with_host(str_bytes(host.to_owned()))
                        .with_port(i32::from(port))
                        .with_rack(b.rack.map(str_bytes))
                });
            }
        }
    }
    endpoints.into_values().collect()
}

fn success(index: i32, res: &AppendResult) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_base_offset(res.base_offset)
        .with_log_append_time_ms(res.log_append_time)
        .with_log_start_offset(res.log_start_offset)
}

fn error_response(topic: &str, index: i32, e: &PartitionError, version: i16) -> PartitionProduceResponse {
    let mut resp = partition_response(index, partition_error(e), Some(e.to_string()));
    // KIP-467: name the offending records so the client fails only those.
    if let (true, PartitionError::InvalidBatch(BatchError::RecordsWithoutKey(indexes))) = (version >= 8, e) {
        let msg = format!("Compacted topic cannot accept message without key in topic partition {topic}-{index}.");
        resp.error_message = Some(str_bytes("One or more records have been rejected"));
        resp.record_errors = indexes
            .iter()
            .map(|i| {
                BatchIndexAndErrorMessage::default()
                    .with_batch_index(*i)
                    .with_batch_index_error_message(Some(str_bytes(msg.clone())))
            })
            .collect();
    }
    resp
}

/// Refused batches are a client's fault: warn (rate limited per client), else debug.
fn log_refused(ctx: &Ctx, info: &RequestInfo, topic: &str, partition: i32, e: &PartitionError) {
    let warn = match e {
        PartitionError::InvalidBatch(_) => {
            ctx.refusals.should_warn(info.peer.map(|p| p.ip()), &info.client_id, ctx.now_ms())
        }
        PartitionError::Pool(_) | PartitionError::FlushFailed(_) => {
            tracing::error!(peer = ?info.peer, topic, partition, error = %e, "produce failed");
            return;
        }
        _ => None,
    };
    match warn {
        Some(suppressed) => tracing::warn!(
            peer = ?info.peer, client_id = %info.client_id, topic, partition, error = %e,
            refused_since_last_warning = suppressed, "produce refused: invalid record batch, nothing stored"
        ),
        None => {
            tracing::debug!(peer = ?info.peer, client_id = %info.client_id, topic, partition, error = %e, "produce refused")
        }
    }
}

/// The request buffer is usually uniquely owned, so this is normally free.
fn into_mut(b: Bytes) -> BytesMut {
    b.try_into_mut().unwrap_or_else(|shared| BytesMut::from(&shared[..]))
}

/// The topics a traced request names (v13 by id: named from the image) and how many
/// partitions it writes.
pub fn traced_topics(ctx: &Ctx, req: &ProduceRequest) -> (Vec<String>, u32) {
    let image = (req.topic_data.iter().any(|t| t.name.is_empty())).then(|| ctx.image());
    let names = req
        .topic_data
        .iter()
        .take(crate::traces::MAX_TOPICS_NAMED)
        .map(|t| match &image {
            Some(image) if t.name.is_empty() => {
                image.topic_by_id(&t.topic_id).map_or_else(|| t.topic_id.to_string(), |t| t.name.clone())
            }
            _ => t.name.to_string(),
        })
        .collect();
    let partitions = req.topic_data.iter().map(|t| t.partition_data.len()).sum::<usize>();
    (names, u32::try_from(partitions).unwrap_or(u32::MAX))
}

/// The finished span of a produce request (`resp` is `None` for acks=0).
pub fn span(
    start: crate::traces::SpanStart,
    (topics, partitions): (Vec<String>, u32),
    acks: i16,
    info: &RequestInfo,
    resp: Option<&ProduceResponse>,
    appended: Option<Instant>,
) -> crate::traces::ProduceSpan {
    let duration = start.started.elapsed();
    let error_code = resp.and_then(|r| {
        r.responses.iter().flat_map(|t| t.partition_responses.iter()).map(|p| p.error_code).find(|c| *c != 0)
    });
    crate::traces::ProduceSpan {
        trace_id: start.trace_id,
        span_id: start.span_id,
        start_unix_nanos: start.start_unix_nanos,
        appended_after: appended.map_or(duration, |a| a.into_std().saturating_duration_since(start.started)),
        duration,
        acks,
        client_id: info.client_id.clone(),
        topics,
        partitions,
        error_code,
    }
}
