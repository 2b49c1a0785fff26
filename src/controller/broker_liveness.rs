//! Which brokers the controller counts as alive: heartbeats in, fencing decisions out.
//! A pure state machine with the time passed in (Kafka's `BrokerHeartbeatManager`).
//!
//! * Heartbeats carry the broker process's incarnation id. The first heartbeat of an
//!   incarnation registers it fenced (a restarted process must catch up before it may
//!   lead or be in sync); its next heartbeat unfences it. A broker is fenced when no
//!   heartbeat arrived for `broker.session.timeout.ms` (Kafka's default 9 s, heartbeats
//!   every 2 s).
//! * A broker that asks to shut down (`want_shut_down`) keeps heartbeating while its
//!   leadership moves off; it is reported as shutting down, not fenced. The image
//!   records the request (KIP-841), so the next controller leader starts with it too.
//! * A controller that just became leader has heard from nobody yet: every broker gets a
//!   full session timeout from that moment before it can be fenced (Kafka does the same
//!   on controller failover), so a controller election never fences healthy brokers.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::image::MetadataImage;

/// Kafka's `broker.session.timeout.ms` default.
pub const BROKER_SESSION_TIMEOUT_MS: i64 = 9_000;
/// Kafka's `broker.heartbeat.interval.ms` default.
pub const BROKER_HEARTBEAT_INTERVAL_MS: i64 = 2_000;

/// A broker epoch that was not given (Kafka's -1: a fetch from before Fetch v15, a caller
/// that does not know).
pub const NO_BROKER_EPOCH: i64 = -1;

/// The broker epoch a broker process names itself by on the wire (a follower's Fetch
/// `ReplicaState.ReplicaEpoch`, KIP-903): its incarnation id's two halves folded into 63
/// bits, never negative (negative: [`NO_BROKER_EPOCH`]). Kafka numbers a broker's registrations;
/// runnel's controller knows a process by its incarnation id instead, so the epoch is
/// derived from that.
pub fn broker_epoch_of(incarnation: Uuid) -> i64 {
    let (high, low) = incarnation.as_u64_pair();
    ((high ^ low) & i64::MAX as u64) as i64
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Broker {
    /// The process's incarnation id; `None` after a controller failover, until the
    /// broker's next heartbeat names it.
    incarnation: Option<Uuid>,
    last_heartbeat_ms: i64,
    fenced: bool,
    shutting_down: bool,
    /// Replicas (topic id, partition) this incarnation reported in a failed log dir:
    /// kept out of the ISR (a fetch it sent before the failure may still land at the
    /// leader and look caught up). Gone with the incarnation.
    offline: BTreeSet<(Uuid, i32)>,
}

/// What a heartbeat changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeartbeatOutcome {
    /// A broker this controller did not know, or a new incarnation of one it knew (the
    /// process restarted): fenced from now on, until its next heartbeat.
    Registered,
    /// The broker was fenced and is now alive again: elect it where it can lead.
    Unfenced,
    /// The broker asked to shut down for the first time: move its leadership off.
    ShutdownRequested,
    Unchanged,
}

#[derive(Debug, Clone)]
pub struct BrokerLiveness {
    brokers: BTreeMap<i32, Broker>,
    session_timeout_ms: i64,
}

impl BrokerLiveness {
    pub fn new(session_timeout_ms: i64) -> BrokerLiveness {
        BrokerLiveness { brokers: BTreeMap::new(), session_timeout_ms }
    }

    /// This controller just became the quorum leader: it knows of `nodes` (id, fenced)
    /// from the image but has heard from none of them; each gets a full session from
    /// now, and its next heartbeat's incarnation is taken as its current one.
    pub fn became_leader(&mut self, nodes: impl IntoIterator<Item = (i32, bool)>, now_ms: i64) {
        self.brokers = nodes
            .into_iter()
            .map(|(node, fenced)| {
                let broker = Broker {
                    incarnation: None,
                    last_heartbeat_ms: now_ms,
                    fenced,
                    shutting_down: false,
                    offline: BTreeSet::new(),
                };
                (node, broker)
            })
            .collect();
    }

    /// [`became_leader`](Self::became_leader) with what `image` says of every broker:
    /// fenced, and in controlled shutdown (what the old leader decided; a broker's next
    /// heartbeat may say otherwise).
    pub fn became_leader_of(&mut self, image: &MetadataImage, now_ms: i64) {
        self.became_leader(image.brokers.values().map(|b| (b.node_id, b.fenced)), now_ms);
        for node in &image.controlled_shutdown {
            if let Some(b) = self.brokers.get_mut(node) {
                b.shutting_down = true;
            }
        }
    }

    pub fn heartbeat(&mut self, node: i32, incarnation: Uuid, want_shut_down: bool, now_ms: i64) -> HeartbeatOutcome {
        let fresh = Broker {
            incarnation: Some(incarnation),
            last_heartbeat_ms: now_ms,
            fenced: true,
            shutting_down: false,
            offline: BTreeSet::new(),
        };
        let Some(b) = self.brokers.get_mut(&node) else {
            self.brokers.insert(node, fresh);
            return HeartbeatOutcome::Registered;
        };
        b.last_heartbeat_ms = now_ms;
        match b.incarnation {
            None => {
                // The first word from this broker under this leader: if the image said it
                // was shutting down and it no longer says so, it is not.
                b.incarnation = Some(incarnation);
                b.shutting_down &= want_shut_down;
            }
            Some(known) if known != incarnation => {
                *b = fresh;
                return HeartbeatOutcome::Registered;
            }
            Some(_) => {}
        }
        if want_shut_down && !b.shutting_down {
            b.shutting_down = true;
            return HeartbeatOutcome::ShutdownRequested;
        }
        if b.fenced && !b.shutting_down {
            b.fenced = false;
            return HeartbeatOutcome::Unfenced;
        }
        HeartbeatOutcome::Unchanged
    }

    /// Whether [`expire`](Self::expire) at `now_ms` would fence anyone (a read-only look,
    /// so the leader can check often without deciding an operation each time).
    pub fn any_expired(&self, now_ms: i64) -> bool {
        self.brokers.values().any(|b| !b.fenced && now_ms - b.last_heartbeat_ms > self.session_timeout_ms)
    }

    /// Brokers whose session expired at `now`; they are fenced from now on.
    pub fn expire(&mut self, now_ms: i64) -> Vec<i32> {
        let mut out = Vec::new();
        for (node, b) in self.brokers.iter_mut() {
            if !b.fenced && now_ms - b.last_heartbeat_ms > self.session_timeout_ms {
                b.fenced = true;
                out.push(*node);
            }
        }
        out
    }

    /// Whether a request from process `incarnation` of `node` (an AlterPartition) is
    /// from a process that was replaced: this controller has heard from another one
    /// since (Kafka's STALE_BROKER_EPOCH). A broker not heard from under this leader
    /// is taken at its word.
    pub fn is_stale(&self, node: i32, incarnation: Uuid) -> bool {
        self.brokers.get(&node).and_then(|b| b.incarnation).is_some_and(|known| known != incarnation)
    }

    /// The broker epoch ([`broker_epoch_of`]) of `node`'s process as this controller
    /// knows it, if it has heard from one.
    pub fn broker_epoch(&self, node: i32) -> Option<i64> {
        self.brokers.get(&node).and_then(|b| b.incarnation).map(broker_epoch_of)
    }

    /// Alive: registered, not fenced, not shutting down (may lead and join ISRs).
    pub fn is_alive(&self, node: i32) -> bool {
        self.brokers.get(&node).is_some_and(|b| !b.fenced && !b.shutting_down)
    }

    /// May join an ISR: alive, and heard from by this controller. A new controller
    /// leader has heard from nobody: a broker that has gone (its controlled shutdown is
    /// in the image, see [`became_leader_of`](Self::became_leader_of), but a broker can
    /// also stop without one, or before the old leader committed it) would otherwise be
    /// let back in by the leaders it last fetched from, and acks=all would wait on it
    /// until its session ran out. A live broker is heard from within
    /// `broker.heartbeat.interval.ms`.
    pub fn may_join_isr(&self, node: i32) -> bool {
        self.is_alive(node) && self.brokers.get(&node).is_some_and(|b| b.incarnation.is_some())
    }

    /// `node` reported these replicas in a log dir that failed.
    pub fn replicas_offline(&mut self, node: i32, partitions: &[(Uuid, i32)]) {
        if let Some(b) = self.brokers.get_mut(&node) {
            b.offline.extend(partitions.iter().copied());
        }
    }

    pub fn is_replica_offline(&self, node: i32, topic_id: Uuid, partition: i32) -> bool {
        self.brokers.get(&node).is_some_and(|b| b.offline.contains(&(topic_id, partition)))
    }

    pub fn is_fenced(&self, node: i32) -> bool {
        self.brokers.get(&node).is_none_or(|b| b.fenced)
    }

    pub fn is_shutting_down(&self, node: i32) -> bool {
        self.brokers.get(&node).is_some_and(|b| b.shutting_down)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Uuid = Uuid::from_u128(1);
    const B: Uuid = Uuid::from_u128(2);

    #[test]
    fn a_new_broker_starts_fenced_is_unfenced_by_its_next_heartbeat_and_fenced_after_the_session() {
        let mut l = BrokerLiveness::new(9_000);
        assert_eq!(l.heartbeat(1, A, false, 0), HeartbeatOutcome::Registered);
        assert!(l.is_fenced(1) && !l.is_alive(1));
        assert_eq!(l.heartbeat(1, A, false, 100), HeartbeatOutcome::Unfenced);
        assert!(l.is_alive(1));
        assert_eq!(l.heartbeat(1, A, false, 2_100), HeartbeatOutcome::Unchanged);
        assert!(!l.any_expired(11_100));
        assert!(l.expire(11_100).is_empty(), "exactly the session timeout is not past it");
        assert!(l.any_expired(11_101), "the look agrees with the decision");
        assert_eq!(l.expire(11_101), vec![1]);
        assert!(!l.any_expired(30_000), "fenced brokers do not expire again");
        assert!(l.is_fenced(1));
        assert!(l.expire(30_000).is_empty(), "fenced once");
        assert_eq!(l.heartbeat(1, A, false, 30_001), HeartbeatOutcome::Unfenced);
    }

    #[test]
    fn a_restarted_broker_is_a_new_incarnation_and_starts_fenced() {
        let mut l = BrokerLiveness::new(9_000);
        l.heartbeat(1, A, false, 0);
        l.heartbeat(1, A, false, 1);
        assert!(l.is_alive(1));
        assert_eq!(l.heartbeat(1, B, false, 10), HeartbeatOutcome::Registered);
        assert!(l.is_fenced(1));
        assert_eq!(l.heartbeat(1, B, false, 12), HeartbeatOutcome::Unfenced);
    }

    #[test]
    fn a_shutting_down_broker_is_not_alive_but_not_fenced() {
        let mut l = BrokerLiveness::new(9_000);
        l.heartbeat(1, A, false, 0);
        l.heartbeat(1, A, false, 1);
        assert_eq!(l.heartbeat(1, A, true, 2), HeartbeatOutcome::ShutdownRequested);
        assert_eq!(l.heartbeat(1, A, true, 3), HeartbeatOutcome::Unchanged);
        assert!(!l.is_alive(1) && !l.is_fenced(1) && l.is_shutting_down(1));
    }

    #[test]
    fn a_new_controller_leader_gives_every_broker_a_full_session_and_adopts_its_incarnation() {
        let mut l = BrokerLiveness::new(9_000);
        l.became_leader([(1, false), (2, true)], 50_000);
        assert!(l.is_alive(1) && l.is_fenced(2));
        assert!(!l.may_join_isr(1), "not heard from yet");
        assert_eq!(l.heartbeat(1, A, false, 50_001), HeartbeatOutcome::Unchanged, "no fencing after a failover");
        assert!(l.may_join_isr(1));
        assert!(l.expire(59_001).is_empty());
        assert_eq!(l.expire(59_002), vec![1]);
        assert_eq!(l.heartbeat(2, B, false, 59_003), HeartbeatOutcome::Unfenced);
    }
}
