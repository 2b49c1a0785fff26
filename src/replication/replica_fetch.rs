//! A follower's Fetch in domain terms, both sides of it: what a follower asks
//! ([`ReplicaFetchRequest`]), how the leader answers ([`ReplicaManager::fetch_for_replica`],
//! long-polling like a consumer fetch), and what the follower gets back
//! ([`FetchedPartition`]). `protocol/` maps these to and from Kafka's Fetch messages.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use uuid::Uuid;

use super::partition::{Partition, PartitionError, ReplicaRead};
use super::purgatory::{PartitionKey, WaitOutcome};
use super::ReplicaManager;
use crate::storage::StorageError;

/// Kafka's `replica.fetch.max.bytes` default: per partition.
pub const REPLICA_FETCH_MAX_BYTES: usize = 1_048_576;
/// Kafka's `replica.fetch.response.max.bytes` default: per response.
pub const REPLICA_FETCH_RESPONSE_MAX_BYTES: usize = 10_485_760;
/// Kafka's broker-side `fetch.max.bytes`: what a leader puts in one response at most
/// (beyond one whole first batch), whatever the request asks.
pub const LEADER_FETCH_MAX_BYTES: usize = 57_671_680;
/// Kafka's `replica.fetch.wait.max.ms` default.
pub const REPLICA_FETCH_WAIT_MAX_MS: u64 = 500;
/// Kafka's `replica.fetch.min.bytes` default.
pub const REPLICA_FETCH_MIN_BYTES: usize = 1;
/// Kafka's `replica.fetch.backoff.ms` default: the pause after a failed fetch.
pub const REPLICA_FETCH_BACKOFF_MS: u64 = 1_000;

/// One Fetch from follower `replica_id` to a leader, for every partition it follows there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaFetchRequest {
    pub replica_id: i32,
    /// The broker epoch of the follower's process (KIP-903; -1: not given, as before
    /// Fetch v15).
    pub replica_epoch: i64,
    pub max_wait: Duration,
    pub min_bytes: usize,
    pub max_bytes: usize,
    pub partitions: Vec<PartitionFetch>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionFetch {
    pub topic: String,
    pub topic_id: Uuid,
    pub partition: i32,
    pub current_leader_epoch: i32,
    /// The follower's log end offset.
    pub fetch_offset: i64,
    pub last_fetched_epoch: Option<i32>,
    pub log_start_offset: i64,
    pub max_bytes: usize,
}

/// Why a partition of a replica fetch got no data, in Kafka's terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicaFetchError {
    /// The fetch offset is outside the leader's log, which starts at `log_start_offset`
    /// (-1 when the leader did not say).
    #[error("offset out of range (leader log start offset {log_start_offset})")]
    OffsetOutOfRange { log_start_offset: i64 },
    #[error("not the leader")]
    NotLeaderOrFollower,
    #[error("fenced leader epoch")]
    FencedLeaderEpoch,
    #[error("unknown leader epoch")]
    UnknownLeaderEpoch,
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("error code {0}")]
    Other(i16),
}

impl ReplicaFetchError {
    /// The leader's domain error as the follower sees it.
    pub fn of(e: &PartitionError) -> ReplicaFetchError {
        match e {
            PartitionError::Storage(StorageError::OffsetOutOfRange { log_start_offset, .. }) => {
                ReplicaFetchError::OffsetOutOfRange { log_start_offset: *log_start_offset }
            }
            PartitionError::FencedLeaderEpoch { .. } => ReplicaFetchError::FencedLeaderEpoch,
            PartitionError::UnknownLeaderEpoch { .. } => ReplicaFetchError::UnknownLeaderEpoch,
            PartitionError::NotLeaderOrFollower | PartitionError::NotAReplica(_) | PartitionError::ShuttingDown => {
                ReplicaFetchError::NotLeaderOrFollower
            }
            // KAFKA_STORAGE_ERROR and the like: retried after a backoff.
            _ => ReplicaFetchError::Other(56),
        }
    }
}

/// A leader's answer for one partition, as the follower receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition {
    pub topic_id: Uuid,
    pub partition: i32,
    pub result: Result<FetchedData, ReplicaFetchError>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedData {
    pub records: Bytes,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub diverging_epoch: Option<(i32, i64)>,
}

/// The leader's answer to one partition of a replica fetch, before its bytes are read.
pub struct ReplicaPartitionRead {
    pub partition: Option<Arc<Partition>>,
    pub result: Result<ReplicaRead, PartitionError>,
}

impl ReplicaManager {
    /// The leader's side of a follower's Fetch: each partition read up to its log end
    /// offset with the follower's position recorded (moving the high watermark and waking
    /// what waits on it). Parks like a consumer fetch until `min_bytes` are there, a
    /// partition has an error or a diverging epoch, or `max_wait` passes. Answers in
    /// request order.
    pub async fn fetch_for_replica(&self, req: &ReplicaFetchRequest, now_ms: i64) -> Vec<ReplicaPartitionRead> {
        let deadline = Instant::now() + req.max_wait;
        loop {
            let pass = self.replica_read_once(req, now_ms);
            let bytes: usize = pass.iter().filter_map(|r| r.result.as_ref().ok()).map(|r| r.records.len()).sum();
            let stop = pass.iter().any(|r| r.result.as_ref().map_or(true, |r| r.diverging_epoch.is_some()));
            if stop || bytes >= req.min_bytes.max(1) || req.max_wait.is_zero() || Instant::now() >= deadline {
                return pass;
            }
            let watched: Vec<(Arc<Partition>, i64)> = pass
                .iter()
                .filter_map(|r| Some((r.partition.clone()?, r.result.as_ref().ok()?.log_end_offset)))
                .collect();
            let keys: Vec<PartitionKey> = watched.iter().map(|(p, _)| p.key()).collect();
            let moved =
                || watched.iter().any(|(p, leo)| p.log_end_offset() != *leo || p.is_deleted() || !p.is_leader());
            match self.purgatory().wait_until(&keys, deadline, moved).await {
                WaitOutcome::Satisfied => continue,
                WaitOutcome::TimedOut | WaitOutcome::Closed => return self.replica_read_once(req, now_ms),
            }
        }
    }

    fn replica_read_once(&self, req: &ReplicaFetchRequest, now_ms: i64) -> Vec<ReplicaPartitionRead> {
        let mut remaining = req.max_bytes.min(LEADER_FETCH_MAX_BYTES);
        let mut total = 0usize;
        // The leader's replication throttle (`replication_quota.rs`): judged once per
        // pass, as Kafka judges once per response, and charged with what the pass sends.
        let quota = &self.quotas().leader;
        let now = Instant::now();
        let hold_back = quota.is_exceeded(now);
        let mut throttled_bytes = 0usize;
        let mut out = Vec::with_capacity(req.partitions.len());
        for pf in &req.partitions {
            let Some(p) = self.partition(&pf.topic_id, pf.partition) else {
                out.push(ReplicaPartitionRead { partition: None, result: Err(PartitionError::NotLeaderOrFollower) });
                continue;
            };
            // KIP-74: the first batch of the first partition with data comes whole.
            let limit = pf.max_bytes.min(remaining).max(1);
            let result = p.read_for_follower(
                req.replica_id,
                req.replica_epoch,
                pf.current_leader_epoch,
                pf.fetch_offset,
                pf.last_fetched_epoch,
                limit,
                now_ms,
            );
            let result = result.map(|mut r| {
                let held_back = r.leader_throttled && hold_back && !r.in_sync;
                if held_back || (total > 0 && r.records.len() > remaining) {
                    r.records = Default::default();
                }
                if r.leader_throttled {
                    throttled_bytes += r.records.len();
                }
                r
            });
            if let Ok(r) = &result {
                total += r.records.len();
                remaining = remaining.saturating_sub(r.records.len());
                if r.high_watermark_moved {
                    self.purgatory().wake(p.key());
                }
            }
            self.send_isr_proposal(&p, p.take_isr_proposal());
            out.push(ReplicaPartitionRead { partition: Some(p), result });
        }
        quota.record(throttled_bytes as u64, now);
        out
    }
}
