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
//! * the leader does not know yet what this broker knows (UNKNOWN_LEADER_EPOCH,
//!   NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION: right after a failover or a
//!   topic creation, its metadata is a moment behind): that partition is retried soon,
//!   after [`LAG_RETRY_FIRST`], doubling up to the backoff below;
//! * other errors: that partition waits [`REPLICA_FETCH_BACKOFF_MS`]; a failed round
//!   trip makes them all wait.
//!
//! A delay belongs to the leadership it was taken in: a new leader or leader epoch for
//! the partition ends it.
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
use super::partition::{FetchApplied, FollowerFetchState, Partition, PartitionError};
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
    /// Partitions in backoff after an error.
    delayed: HashMap<(Uuid, i32), Delay>,
    /// How many times in a row each partition's leader was behind this broker.
    lagging: HashMap<(Uuid, i32), u32>,
    backoff: Duration,
}

type Followed = Vec<(Arc<Partition>, FollowerFetchState)>;

/// The first retry of a partition whose leader's metadata is behind this broker's.
pub const LAG_RETRY_FIRST: Duration = Duration::from_millis(25);

/// A partition held back after an error.
#[derive(Debug, Clone, Copy)]
struct Delay {
    until: Instant,
    /// The leader epoch the error came in.
    leader_epoch: i32,
    /// Shorter than the full backoff: a fetch in flight is given up when it ends, so the
    /// retry is not held behind that fetch's long poll.
    soon: bool,
}

impl Fetcher {
    pub fn new(leader: i32, manager: Arc<ReplicaManager>, endpoint: Arc<dyn LeaderEndpoint>) -> Fetcher {
        Fetcher {
            leader,
            manager,
            endpoint,
            delayed: HashMap::new(),
            lagging: HashMap::new(),
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
            let followed = self.followed();
            if !self.delayed.is_empty() || !self.lagging.is_empty() {
                // Only when some partition is held back: not a map per fetch round.
                let epochs: HashMap<(Uuid, i32), i32> =
                    followed.iter().map(|(p, s)| ((p.topic_id, p.index), s.leader_epoch)).collect();
                self.delayed.retain(|k, d| d.until > now && epochs.get(k) == Some(&d.leader_epoch));
                self.lagging.retain(|k, _| epochs.contains_key(k));
            }
            let mut ready: Followed = followed.into_iter().filter(|(p, s)| !self.is_delayed(p, s)).collect();
            let far = now + Duration::from_secs(3600);
            let throttled = self.hold_back_throttled(&mut ready, now);
            if ready.is_empty() {
                // Nothing to fetch now: wait for a partition to come back or to change,
                // or (throttled) for the replication quota to make room, as Kafka's
                // fetcher does: it backs off when it has nothing to ask for.
                let quota_wait = throttled.then(|| now + self.backoff);
                let wake = self.delayed.values().map(|d| d.until).chain(quota_wait).min().unwrap_or(far);
                tokio::select! {
                    _ = tokio::time::sleep_until(wake) => {}
                    changed = roles.changed() => if changed.is_err() { break },
                    _ = stop.changed() => {}
                }
                continue;
            }
            let request = self.request(&ready);
            let soon = self.delayed.values().filter(|d| d.soon).map(|d| d.until).min();
            let endpoint = self.endpoint.clone();
            let fetch = endpoint.fetch(request);
            tokio::pin!(fetch);
            let answer = loop {
                tokio::select! {
                    answer = &mut fetch => break Some(answer),
                    _ = stop.changed() => break None,
                    // A partition retried soon is due: ask again with it.
                    _ = tokio::time::sleep_until(soon.unwrap_or(far)), if soon.is_some() => break None,
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

    /// Leaves out of `ready` the partitions the follower's replication quota holds back
    /// (throttled here, not in the ISR, quota exceeded); returns whether it left any out.
    fn hold_back_throttled(&self, ready: &mut Followed, now: Instant) -> bool {
        let quota = &self.manager.quotas().follower;
        if !quota.is_exceeded(now) {
            return false;
        }
        let node_id = self.manager.node_id();
        let before = ready.len();
        ready.retain(|(p, _)| !p.follower_throttled_out_of_sync(node_id));
        ready.len() != before
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
        self.followed()
            .iter()
            .any(|(p, s)| !fetched.contains(&(p.topic_id, p.index, s.leader_epoch)) && !self.is_delayed(p, s))
    }

    /// Held back after an error in its current leadership.
    fn is_delayed(&self, p: &Partition, s: &FollowerFetchState) -> bool {
        self.delayed.get(&(p.topic_id, p.index)).is_some_and(|d| d.leader_epoch == s.leader_epoch)
    }

    /// How long a partition waits after `error` (counting a leader that is behind).
    fn delay_after(&mut self, key: (Uuid, i32), error: &PartitionError) -> Duration {
        let behind = matches!(
            error,
            PartitionError::Replica(
                ReplicaFetchError::UnknownLeaderEpoch
                    | ReplicaFetchError::NotLeaderOrFollower
                    | ReplicaFetchError::UnknownTopicOrPartition
            )
        );
        if !behind {
            self.lagging.remove(&key);
            return self.backoff;
        }
        let times = self.lagging.entry(key).or_insert(0);
        let delay = LAG_RETRY_FIRST.saturating_mul(1 << (*times).min(10)).min(self.backoff);
        *times += 1;
        delay
    }

    fn request(&self, followed: &Followed) -> ReplicaFetchRequest {
        ReplicaFetchRequest {
            replica_id: self.manager.node_id(),
            replica_epoch: self.manager.broker_epoch(),
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
            let key = (p.topic_id, p.index);
            let Some(answer) = by_key.remove(&key) else { continue };
            if let Err(e) = self.apply_one(p, state, answer.result) {
                // The high watermark may have moved before the error (following the
                // leader's log start offset comes after it): what waits on it looks again.
                self.manager.purgatory().wake(p.key());
                let stale = matches!(
                    e,
                    PartitionError::LeaderEpochChanged { .. }
                        | PartitionError::FetchOffsetMoved { .. }
                        | PartitionError::NotLeaderOrFollower
                );
                if stale {
                    tracing::debug!(topic = %p.topic, partition = p.index, error = %e, "fetched data no longer applies");
                    continue;
                }
                let delay = self.delay_after(key, &e);
                let soon = delay < self.backoff;
                if soon {
                    tracing::debug!(topic = %p.topic, partition = p.index, leader = self.leader, error = %e, retry_ms = delay.as_millis() as u64, "the leader is behind this broker's metadata; retrying soon");
                } else {
                    tracing::warn!(topic = %p.topic, partition = p.index, leader = self.leader, error = %e, "replica fetch of a partition failed; backing off");
                }
                let until = Instant::now() + delay;
                self.delayed.insert(key, Delay { until, leader_epoch: state.leader_epoch, soon });
            } else {
                self.lagging.remove(&key);
            }
        }
    }

    fn apply_one(
        &self,
        p: &Partition,
        state: &FollowerFetchState,
        result: Result<FetchedData, ReplicaFetchError>,
    ) -> Result<(), PartitionError> {
        match p.apply_fetched(state, result.as_ref(), self.manager.now_ms())? {
            FetchApplied::StartedOver { log_start_offset } => tracing::warn!(
                topic = %p.topic, partition = p.index, leader = self.leader, log_end_offset = state.log_end_offset,
                leader_log_start_offset = log_start_offset, "the leader's log starts past ours; starting over there"
            ),
            FetchApplied::Truncated { epoch, end_offset, to } => tracing::info!(
                topic = %p.topic, partition = p.index, leader = self.leader, leader_epoch = epoch, leader_end_offset = end_offset,
                truncated_to = to, "follower log diverged from the leader's; truncated"
            ),
            FetchApplied::Appended { bytes, high_watermark_moved } => {
                if bytes > 0 && p.follower_throttled(self.manager.node_id()) {
                    self.manager.quotas().follower.record(bytes as u64, Instant::now());
                }
                if high_watermark_moved {
                    self.manager.purgatory().wake(p.key());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BrokerConfig;
    use crate::protocol::context::system_clock;
    use crate::replication::leader_endpoint::EndpointFuture;
    use crate::replication::EndpointError;

    struct Unused;

    impl LeaderEndpoint for Unused {
        fn fetch(&self, _: ReplicaFetchRequest) -> EndpointFuture<'_, Result<Vec<FetchedPartition>, EndpointError>> {
            Box::pin(std::future::pending())
        }
    }

    #[test]
    fn a_leader_behind_is_retried_soon_then_less_often_and_other_errors_wait_the_full_backoff() {
        let dir = tempfile::tempdir().unwrap();
        let mut broker = BrokerConfig::build(&[]).unwrap();
        broker.data_dir = dir.path().to_path_buf();
        let manager = Arc::new(ReplicaManager::new(&broker, system_clock()).unwrap());
        let mut f = Fetcher::new(1, manager, Arc::new(Unused));
        let key = (Uuid::from_u128(1), 0);
        let behind = PartitionError::Replica(ReplicaFetchError::UnknownLeaderEpoch);
        let ms: Vec<u128> = (0..8).map(|_| f.delay_after(key, &behind).as_millis()).collect();
        assert_eq!(ms, vec![25, 50, 100, 200, 400, 800, 1000, 1000]);
        let storage = PartitionError::Replica(ReplicaFetchError::Other(56));
        assert_eq!(f.delay_after(key, &storage), Duration::from_millis(REPLICA_FETCH_BACKOFF_MS));
        let not_leader = PartitionError::Replica(ReplicaFetchError::NotLeaderOrFollower);
        assert_eq!(f.delay_after(key, &not_leader).as_millis(), 25, "another error started the count again");
    }
}
