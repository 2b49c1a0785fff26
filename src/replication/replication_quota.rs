//! Replication throttling (Kafka's KIP-73 replication quotas): a bound on the bytes per
//! second that catching-up replicas of throttled partitions move, so that a reassignment
//! does not starve producers and consumers of disk and network.
//!
//! Which partitions are throttled is a topic config (`leader.replication.throttled.replicas`,
//! `follower.replication.throttled.replicas`: "partition:broker" pairs, or `*`); the bound
//! is a dynamic broker config (`leader.replication.throttled.rate`,
//! `follower.replication.throttled.rate`, unlimited by default). Each broker has one quota
//! per side:
//!
//! * leader side: a follower that is not in the ISR gets no records of a throttled
//!   partition while the quota is exceeded (its position is still recorded);
//! * follower side: a replica not in the ISR leaves a throttled partition out of its
//!   fetches while the quota is exceeded.
//!
//! Bytes of throttled partitions count against the quota whichever replica moved them, so
//! in-sync traffic of a throttled partition leaves less room for the catching-up replica;
//! in-sync replicas are never held back (that would hold back acks=all producers).
//!
//! The rate is measured as Kafka's replication quotas measure it (`SimpleRate` over
//! `replication.quota.window.num` = 11 samples of `replication.quota.window.size.seconds`
//! = 1 s): the bytes of the samples that had an event in the last 11 s, divided by the
//! time since the oldest of them began (at least one window). So the first fetch of a
//! throttled replica after an idle spell moves up to one fetch's worth, and the quota
//! then holds it back until the average falls under the bound, or the burst is 11 s old.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::controller::broker_config::UNLIMITED_RATE;

/// Kafka's `replication.quota.window.num` default.
pub const QUOTA_SAMPLES: usize = 11;
/// Kafka's `replication.quota.window.size.seconds` default.
pub const QUOTA_WINDOW: Duration = Duration::from_secs(1);

/// One side's quota: its bound and the bytes recorded against it.
#[derive(Debug)]
pub struct ReplicationQuota {
    state: Mutex<QuotaState>,
}

#[derive(Debug)]
struct QuotaState {
    /// Bytes per second; [`UNLIMITED_RATE`] for none.
    bound: i64,
    /// Oldest first.
    samples: VecDeque<Sample>,
    /// Every byte recorded, for `/metrics`.
    total: u64,
}

/// The bytes recorded in one window.
#[derive(Debug, Clone, Copy)]
struct Sample {
    start: Instant,
    last_event: Instant,
    bytes: u64,
}

impl Default for ReplicationQuota {
    fn default() -> Self {
        ReplicationQuota { state: Mutex::new(QuotaState { bound: UNLIMITED_RATE, samples: VecDeque::new(), total: 0 }) }
    }
}

impl ReplicationQuota {
    fn lock(&self) -> std::sync::MutexGuard<'_, QuotaState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the bound in bytes per second ([`UNLIMITED_RATE`]: none).
    pub fn set_bound(&self, bytes_per_second: i64) {
        self.lock().bound = bytes_per_second;
    }

    /// Counts `bytes` of throttled partitions moved at `now`.
    pub fn record(&self, bytes: u64, now: Instant) {
        if bytes == 0 {
            return;
        }
        let mut s = self.lock();
        s.total += bytes;
        s.purge(now);
        match s.samples.back_mut() {
            Some(current) if now.saturating_duration_since(current.start) < QUOTA_WINDOW => {
                current.bytes += bytes;
                current.last_event = now;
            }
            _ => s.samples.push_back(Sample { start: now, last_event: now, bytes }),
        }
        // Kafka keeps one sample more than it counts in its span (the one being filled).
        while s.samples.len() > QUOTA_SAMPLES + 1 {
            s.samples.pop_front();
        }
    }

    /// The measured rate at `now`, in bytes per second.
    pub fn rate(&self, now: Instant) -> f64 {
        let mut s = self.lock();
        s.purge(now);
        s.rate(now)
    }

    /// Whether the measured rate is over the bound: throttled replicas not in the ISR
    /// wait.
    pub fn is_exceeded(&self, now: Instant) -> bool {
        let mut s = self.lock();
        if s.bound == UNLIMITED_RATE {
            return false;
        }
        s.purge(now);
        s.rate(now) > s.bound as f64
    }

    /// Every byte recorded since start.
    pub fn total_bytes(&self) -> u64 {
        self.lock().total
    }
}

impl QuotaState {
    /// Drops the samples whose last event is a whole span (11 windows) old.
    fn purge(&mut self, now: Instant) {
        let span = QUOTA_WINDOW * QUOTA_SAMPLES as u32;
        self.samples.retain(|s| now.saturating_duration_since(s.last_event) < span);
    }

    fn rate(&self, now: Instant) -> f64 {
        let Some(oldest) = self.samples.iter().map(|s| s.start).min() else { return 0.0 };
        let bytes: u64 = self.samples.iter().map(|s| s.bytes).sum();
        let elapsed = now.saturating_duration_since(oldest).max(QUOTA_WINDOW);
        bytes as f64 / elapsed.as_secs_f64()
    }
}

/// One broker's quotas: both sides of replication, and moves between its log
/// directories (`replica.alter.log.dirs.io.max.bytes.per.second`, which bounds every
/// move's copying).
#[derive(Debug, Default)]
pub struct ReplicationQuotas {
    pub leader: ReplicationQuota,
    pub follower: ReplicationQuota,
    pub alter_log_dirs: ReplicationQuota,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unbounded_quota_is_never_exceeded() {
        let q = ReplicationQuota::default();
        let t = Instant::now();
        q.record(u64::MAX / 4, t);
        assert!(!q.is_exceeded(t));
    }

    #[test]
    fn a_burst_is_held_back_until_the_average_since_it_falls_under_the_bound() {
        let q = ReplicationQuota::default();
        q.set_bound(1000);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert!(!q.is_exceeded(t0));
        // Judged over one window at least: 1000 bytes at once is at the bound, not over.
        q.record(1000, t0);
        assert_eq!(q.rate(t0), 1000.0);
        assert!(!q.is_exceeded(t0));
        q.record(9000, at(100));
        assert_eq!(q.rate(at(500)), 10_000.0);
        assert!(q.is_exceeded(at(500)));
        // 10,000 bytes over 9.9 s is still over; over 10.5 s, under.
        assert!(q.is_exceeded(at(9_900)));
        assert!(!q.is_exceeded(at(10_500)));
        // Once its last event is 11 windows old, the burst is forgotten.
        assert!(q.rate(at(11_099)) > 0.0);
        assert_eq!(q.rate(at(11_100)), 0.0);
        assert_eq!(q.total_bytes(), 10_000);
    }

    #[test]
    fn a_steady_flow_at_twice_the_bound_is_seen_as_twice_the_bound() {
        let q = ReplicationQuota::default();
        q.set_bound(500);
        let t0 = Instant::now();
        for s in 0..30u64 {
            q.record(1000, t0 + Duration::from_secs(s));
        }
        let now = t0 + Duration::from_millis(29_500);
        assert!((q.rate(now) - 1000.0 * 11.0 / 10.5).abs() < 1.0, "{}", q.rate(now));
        assert!(q.is_exceeded(now));
        q.set_bound(UNLIMITED_RATE);
        assert!(!q.is_exceeded(now));
    }
}
