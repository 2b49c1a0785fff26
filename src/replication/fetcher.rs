//! The follower fetcher for one leader broker (Kafka's `ReplicaFetcherThread` with
//! `AbstractFetcherThread`'s rules): one Fetch at a time for every partition this broker
//! follows on that leader. Each answer is applied per partition:
//!
//! * records: appended as they are ([`Partition::append_as_follower`]), then the high
//!   watermark becomes min(leader's high watermark, own log end offset) and the log start
//!   offset follows the leader's (up to that high watermark);
//! * a diverging epoch (the leader's log parted from ours after a leader change, KIP-320):
//!   truncate to where the logs agree, then fetch again from there;
//! * OFFSET_OUT_OF_RANGE with the leader's log starting past ours: start over, empty, at
//!   the leader's log start offset;
//! * other errors: that partition waits [`REPLICA_FETCH_BACKOFF_MS`]; a failed round
//!   trip makes them all wait.
//!
//! Every change names the leadership and log end offset the fetch was made with, so an
//! answer that arrives after a role change or another truncation changes nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use uuid::Uuid;

use super::leader_endpoint::LeaderEndpoint;
use super::partition::{FollowerFetchState, Partition, PartitionError};
use super::replica_fetch::{
    FetchedData, FetchedPartition, PartitionFetch, ReplicaFetchError, ReplicaFetchRequest, REPLICA_FETCH_BACKOFF_MS,
    REPLICA_FETCH_MAX_BYTES, REPLICA_FETCH_MIN_BYTES, REPLICA_FETCH_RESPONSE_MAX_BYTES, REPLICA_FETCH_WAIT_MAX_MS,
};
use super::ReplicaManager;

/// What the fetcher of one leader works with.
pub struct Fetcher {
    leader: i32,
    manager: Arc<ReplicaManager>,
    endpoint: Arc<dyn LeaderEndpoint>,
    /// Partitions in backoff after an error, until when.
    delayed: HashMap<(Uuid, i32), Instant>,
    backoff: Duration,
}

type Followed = Vec<(Arc<Partition>, FollowerFetchState)>;

impl Fetcher {
    pub fn new(leader: i32, manager: Arc<ReplicaManager>, endpoint: Arc<dyn LeaderEndpoint>) -> Fetcher {
        Fetcher {
            leader,
            manager,
            endpoint,
            delayed: HashMap::new(),
            backoff: Duration::from_millis(REPLICA_FETCH_BACKOFF_MS),
        }
    }

    /// Fetches until `stop` turns true (or its sender goes).
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut roles = self.manager.role_changes();
        tracing::info!(leader = self.leader, "replica fetcher started");
        'run: loop {
            if *stop.borrow() || stop.has_changed().is_err() {
                break;
            }
            let now = Instant::now();
            self.delayed.retain(|_, until| *until > now);
            let followed = self.followed();
            let ready: Followed =
                followed.into_iter().filter(|(p, _)| !self.delayed.contains_key(&(p.topic_id, p.index))).collect();
            if ready.is_empty() {
                // Nothing to fetch now: wait for a partition to come back or to change.
                let wake = self.delayed.values().min().copied().unwrap_or(now + Duration::from_secs(3600));
                tokio::select! {
                    _ = tokio::time::sleep_until(wake) => {}
                    changed = roles.changed() => if changed.is_err() { break },
                    _ = stop.changed() => {}
                }
                continue;
            }
            let request = self.request(&ready);
            let endpoint = self.endpoint.clone();
            let fetch = endpoint.fetch(request);
            tokio::pin!(fetch);
            let answer = loop {
                tokio::select! {
                    answer = &mut fetch => break Some(answer),
                    _ = stop.changed() => break None,
                    changed = roles.changed() => {
                        // A partition this broker now follows on this leader (it just
                        // became leader of it: a failover) is fetched at once, not after
                        // the fetch in flight waits out its max_wait with nothing to
                        // send: an acks=all producer on the new leader waits for it.
                        // Dropping the fetch drops its connection; the next reconnects.
                        if changed.is_err() {
                            break 'run; // the replica manager is gone
                        }
                        if self.gained(&ready) {
                            break None;
                        }
                    }
                }
            };
            let Some(answer) = answer else { continue };
            match answer {
                Ok(fetched) => self.apply(&ready, fetched),
                Err(e) => {
                    tracing::warn!(leader = self.leader, error = %e, "replica fetch failed; backing off");
                    tokio::select! {
                        _ = tokio::time::sleep(self.backoff) => {}
                        _ = stop.changed() => {}
                    }
                }
            }
        }
        tracing::info!(leader = self.leader, "replica fetcher stopped");
    }

    /// The partitions this broker follows on this leader, with their fetch positions.
    fn followed(&self) -> Followed {
        self.manager
            .all_partitions()
            .into_iter()
            .filter_map(|p| {
                let state = p.follower_fetch_state()?;
                (state.leader == self.leader).then_some((p, state))
            })
            .collect()
    }

    /// Whether this broker follows a partition on this leader (or at a leader epoch)
    /// that `in_flight` does not fetch.
    fn gained(&self, in_flight: &Followed) -> bool {
        let fetched: std::collections::HashSet<(Uuid, i32, i32)> =
            in_flight.iter().map(|(p, s)| (p.topic_id, p.index, s.leader_epoch)).collect();
        self.followed().iter().any(|(p, s)| {
            !fetched.contains(&(p.topic_id, p.index, s.leader_epoch))
                && !self.delayed.contains_key(&(p.topic_id, p.index))
        })
    }

    fn request(&self, followed: &Followed) -> ReplicaFetchRequest {
        ReplicaFetchRequest {
            replica_id: self.manager.node_id(),
            replica_epoch: -1,
            max_wait: Duration::from_millis(REPLICA_FETCH_WAIT_MAX_MS),
            min_bytes: REPLICA_FETCH_MIN_BYTES,
            max_bytes: REPLICA_FETCH_RESPONSE_MAX_BYTES,
            partitions: followed
                .iter()
                .map(|(p, s)| PartitionFetch {
                    topic: p.topic.clone(),
                    topic_id: p.topic_id,
                    partition: p.index,
                    current_leader_epoch: s.leader_epoch,
                    fetch_offset: s.log_end_offset,
                    last_fetched_epoch: s.last_fetched_epoch,
                    log_start_offset: s.log_start_offset,
                    max_bytes: REPLICA_FETCH_MAX_BYTES,
                })
                .collect(),
        }
    }

    fn apply(&mut self, followed: &Followed, fetched: Vec<FetchedPartition>) {
        let mut by_key: HashMap<(Uuid, i32), FetchedPartition> =
            fetched.into_iter().map(|f| ((f.topic_id, f.partition), f)).collect();
        for (p, state) in followed {
            let Some(answer) = by_key.remove(&(p.topic_id, p.index)) else { continue };
            if let Err(e) = self.apply_one(p, state, answer.result) {
                let stale = matches!(
                    e,
                    PartitionError::LeaderEpochChanged { .. }
                        | PartitionError::FetchOffsetMoved { .. }
                        | PartitionError::NotLeaderOrFollower
                );
                if stale {
                    tracing::debug!(topic = %p.topic, partition = p.index, error = %e, "fetched data no longer applies");
                } else {
                    tracing::warn!(topic = %p.topic, partition = p.index, leader = self.leader, error = %e, "replica fetch of a partition failed; backing off");
                    self.delayed.insert((p.topic_id, p.index), Instant::now() + self.backoff);
                }
            }
        }
    }

    fn apply_one(
        &self,
        p: &Partition,
        state: &FollowerFetchState,
        result: Result<FetchedData, ReplicaFetchError>,
    ) -> Result<(), PartitionError> {
        let data = match result {
            Ok(data) => data,
            Err(ReplicaFetchError::OffsetOutOfRange { log_start_offset })
                if log_start_offset > state.log_end_offset =>
            {
                tracing::warn!(
                    topic = %p.topic, partition = p.index, leader = self.leader, log_end_offset = state.log_end_offset,
                    leader_log_start_offset = log_start_offset, "the leader's log starts past ours; starting over there"
                );
                return p.truncate_fully_as_follower(state, log_start_offset);
            }
            Err(e) => return Err(PartitionError::Replica(e)),
        };
        if let Some((epoch, end_offset)) = data.diverging_epoch {
            let to = p.truncate_diverging_tail(state, epoch, end_offset)?;
            tracing::info!(
                topic = %p.topic, partition = p.index, leader = self.leader, leader_epoch = epoch, leader_end_offset = end_offset,
                truncated_to = to, "follower log diverged from the leader's; truncated"
            );
            return Ok(());
        }
        let mut now_at = *state;
        if !data.records.is_empty() {
            now_at.log_end_offset = p.append_as_follower(state, &data.records, self.manager.now_ms())?;
        }
        if p.set_follower_high_watermark(&now_at, data.high_watermark).is_some() {
            self.manager.purgatory().wake(p.key());
        }
        p.follow_log_start_offset(&now_at, data.log_start_offset)?;
        Ok(())
    }
}
