//! Fetch: whole batches up to the high watermark, long-polling for min_bytes. A fetch from
//! a follower broker goes to `replica_fetch.rs`.
//!
//! KIP-392, as Kafka's ReplicaManager does it: a consumer's Fetch v11+ may be served by a
//! follower (up to the follower's high watermark); with `replica.selector.class` set, the
//! leader answers a consumer that names its rack with `preferred_read_replica` (no
//! records, at once) when an in-sync follower in that rack holds the offset.
//!
//! KIP-227: a Fetch v7+ may open or use an incremental fetch session
//! (`fetch_session_flow.rs`), a consumer's and a follower's alike.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};

use super::fetch_session_flow::in_session;
use super::{check_leader_epoch, current_leader, local_partition, str_bytes};
use crate::controller::{Listener, TopicImage};
use crate::protocol::errors::partition_error;
use crate::protocol::fetch_encoding::FetchReply;
use crate::protocol::{Ctx, RequestInfo};
use crate::replication::{Partition, PartitionKey, Role, WaitOutcome};
use crate::storage::LogSlices;

/// Fetches wait at most this long, whatever the client asks.
const MAX_WAIT_CAP_MS: i32 = 30_000;
/// Kafka's broker-side `fetch.max.bytes`: a response holds at most this much (beyond one
/// whole first batch), so a request's max_bytes never sizes a larger read buffer.
const FETCH_MAX_BYTES: usize = 57_671_680;

pub async fn handle(ctx: &Ctx, info: &RequestInfo, req: FetchRequest, version: i16) -> FetchReply {
    let replica_id = super::replica_fetch::replica_id(&req, version);
    if replica_id >= 0 {
        let serve = |req| super::replica_fetch::handle(ctx, req, version, replica_id);
        return in_session(ctx, req, version, true, &info.client_id, serve).await;
    }
    let serve = |req: FetchRequest| async move { serve(ctx, info, &req, version).await.reply() };
    in_session(ctx, req, version, false, &info.client_id, serve).await
}

/// Reads the partitions `req` names, waiting up to its max_wait for min_bytes.
async fn serve(ctx: &Ctx, info: &RequestInfo, req: &FetchRequest, version: i16) -> Pass {
    let wait = Duration::from_millis(req.max_wait_ms.clamp(0, MAX_WAIT_CAP_MS) as u64);
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let pass = read_once(ctx, info.listener, req, version);
        let done = pass.bytes >= req.min_bytes.max(0) as usize || pass.any_error || pass.redirected || wait.is_zero();
        if done || tokio::time::Instant::now() >= deadline {
            return pass;
        }
        // Park on the partitions asked for; re-read when one of their high watermarks
        // moved (or one went away), not on appends elsewhere.
        let keys: Vec<PartitionKey> = pass.watched.iter().map(|(p, _, _)| p.key()).collect();
        let moved = || {
            pass.watched.iter().any(|(p, hw, role)| p.high_watermark() != *hw || p.is_deleted() || p.role() != *role)
        };
        match ctx.replicas.purgatory().wait_until(&keys, deadline, moved).await {
            WaitOutcome::Satisfied => continue,
            WaitOutcome::TimedOut | WaitOutcome::Closed => {
                return read_once(ctx, info.listener, req, version);
            }
        }
    }
}

/// One pass over the requested partitions.
struct Pass {
    responses: Vec<FetchableTopicResponse>,
    /// The records of each partition in `responses`, read or sent after the pass.
    records: Vec<Vec<LogSlices>>,
    /// Record bytes in `responses`.
    bytes: usize,
    any_error: bool,
    /// A partition was answered with a preferred read replica: Kafka answers at once.
    redirected: bool,
    /// The partitions read, with the high watermark and role each had when read.
    watched: Vec<(Arc<Partition>, i64, Role)>,
    /// KIP-951: the endpoints of leaders named in `current_leader` fields (v16+).
    node_endpoints: BTreeMap<i32, NodeEndpoint>,
}

impl Pass {
    /// The answer, without a session (`fetch_session_flow.rs` names the session).
    fn reply(self) -> FetchReply {
        let response = FetchResponse::default()
            .with_responses(self.responses)
            .with_session_id(0)
            .with_node_endpoints(self.node_endpoints.into_values().collect());
        FetchReply { response, records: self.records }
    }
}

fn partition_error_data(index: i32, e: ResponseError) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(e.code())
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_records(Some(Default::default()))
}

/// A partition answered without records: its high watermark (also the last stable
/// offset) and log start offset as they are now.
fn no_records(index: i32, partition: &Partition) -> PartitionData {
    let hw = partition.high_watermark();
    PartitionData::default()
        .with_partition_index(index)
        .with_high_watermark(hw)
        .with_last_stable_offset(hw)
        .with_log_start_offset(partition.log_start_offset())
        .with_records(Some(Default::default()))
}

fn read_once(ctx: &Ctx, listener: Listener, req: &FetchRequest, version: i16) -> Pass {
    let image = ctx.image();
    let mut remaining = (req.max_bytes.max(0) as usize).min(FETCH_MAX_BYTES);
    let mut total = 0usize;
    let mut any_error = false;
    let mut redirected = false;
    let mut watched = Vec::new();
    // Fetch v11+ carries the consumer's rack (KIP-392): such a consumer may read from a
    // follower, and may be sent to one.
    let client_metadata = version >= 11;
    let client_rack = req.rack_id.as_str();
    let now_ms = ctx.replicas.now_ms();
    let mut node_endpoints = BTreeMap::new();
    let mut out = Vec::with_capacity(req.topics.len());
    let mut records = Vec::with_capacity(req.topics.len());
    // Each slice read holds its segment's descriptor until the response is sent, beyond
    // the file cache's bound: a fetch of thousands of partitions held one per partition
    // and ran the process out of descriptors. Past this many, partitions answer with no
    // records this time (no error) and the client reads them in its next fetch.
    let max_files = max_files_per_fetch(ctx.replicas.files().capacity());
    let mut files = 0usize;
    for ft in &req.topics {
        let topic = if version >= 13 { image.topic_by_id(&ft.topic_id) } else { image.topic(ft.topic.0.as_str()) };
        let missing =
            if version >= 13 { ResponseError::UnknownTopicId } else { ResponseError::UnknownTopicOrPartition };
        let mut parts = Vec::with_capacity(ft.partitions.len());
        let mut slices = Vec::with_capacity(ft.partitions.len());
        for fp in &ft.partitions {
            // Every partition gets an entry, in response order; only a read fills it.
            slices.push(LogSlices::default());
            let partition = match topic {
                Some(t) => local_partition(ctx, t, fp.partition),
                None => Err(missing),
            };
            let partition = match partition {
                Ok(p) => p,
                Err(e) => {
                    any_error = true;
                    parts.push(partition_error_data(fp.partition, e));
                    continue;
                }
            };
            if let Err(e) = check_leader_epoch(&partition, fp.current_leader_epoch) {
                any_error = true;
                parts.push(partition_error_data(fp.partition, e));
                continue;
            }
            if ctx.config.rack_aware_replica_selector && client_metadata {
                let rack_of =
                    |id: i32| image.broker_alive(id).then(|| image.brokers.get(&id).and_then(|b| b.rack.clone()));
                if let Some(replica) = partition.preferred_read_replica(client_rack, fp.fetch_offset, now_ms, rack_of) {
                    redirected = true;
                    parts.push(no_records(fp.partition, &partition).with_preferred_read_replica(BrokerId(replica)));
                    continue;
                }
            }
            // KIP-74: the first batch of the first non-empty partition is returned whole
            // even when larger than the limits; after that the limits hold.
            let limit = (fp.partition_max_bytes.max(0) as usize).min(remaining);
            let result = if (limit == 0 && total > 0) || files >= max_files {
                Ok(None)
            } else {
                let max = limit.max(1);
                if client_metadata {
                    partition.fetch_from_any_replica(fp.fetch_offset, max).map(Some)
                } else {
                    partition.fetch(fp.fetch_offset, max).map(Some)
                }
            };
            // Only the first partition with data may exceed the limit.
            let result = result.map(|r| r.filter(|r| total == 0 || r.records.len() <= limit));
            match result {
                Ok(Some(r)) => {
                    watched.push((partition.clone(), r.high_watermark, partition.role()));
                    let n = r.records.len();
                    total += n;
                    files += r.records.slices().len();
                    remaining = remaining.saturating_sub(n);
                    parts.push(
                        PartitionData::default()
                            .with_partition_index(fp.partition)
                            .with_high_watermark(r.high_watermark)
                            .with_last_stable_offset(r.last_stable_offset)
                            .with_log_start_offset(r.log_start_offset)
                            .with_aborted_transactions(if req.isolation_level == 1 { Some(vec![]) } else { None })
                            .with_records(Some(Default::default())),
                    );
                    *slices.last_mut().expect("pushed above") = r.records;
                }
                Ok(None) => {
                    let data = no_records(fp.partition, &partition);
                    watched.push((partition.clone(), data.high_watermark, partition.role()));
                    parts.push(data)
                }
                Err(e) => {
                    any_error = true;
                    let mut d = partition_error_data(fp.partition, partition_error(&e));
                    d.high_watermark = partition.high_watermark();
                    d.last_stable_offset = d.high_watermark;
                    d.log_start_offset = partition.log_start_offset();
                    parts.push(d);
                }
            }
        }
        if version >= 16 {
            point_to_leaders(ctx, listener, topic.map(|t| &**t), &mut parts, &mut node_endpoints);
        }
        let name = if version >= 13 {
            TopicName(topic.map(|t| str_bytes(t.name.clone())).unwrap_or_default())
        } else {
            ft.topic.clone()
        };
        out.push(FetchableTopicResponse::default().with_topic(name).with_topic_id(ft.topic_id).with_partitions(parts));
        records.push(slices);
    }
    Pass { responses: out, records, bytes: total, any_error, redirected, watched, node_endpoints }
}

/// How many segment files one fetch response may hold open: a quarter of the file
/// cache's bound (itself half the descriptor limit by default), so that a few such
/// fetches at once still leave descriptors for connections and appends; at least 16.
fn max_files_per_fetch(file_cache_capacity: usize) -> usize {
    (file_cache_capacity / 4).max(16)
}

/// KIP-951, as Kafka's KafkaApis does for Fetch v16+: a partition answered
/// NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries its current leader (id and epoch)
/// and the response lists that leader's endpoint once.
fn point_to_leaders(
    ctx: &Ctx,
    listener: Listener,
    topic: Option<&TopicImage>,
    parts: &mut [PartitionData],
    endpoints: &mut BTreeMap<i32, NodeEndpoint>,
) {
    let redirect = [ResponseError::NotLeaderOrFollower.code(), ResponseError::FencedLeaderEpoch.code()];
    for p in parts.iter_mut().filter(|p| redirect.contains(&p.error_code)) {
        let leader = current_leader(ctx, topic, p.partition_index);
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
