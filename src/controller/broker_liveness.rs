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
//!   The image names each broker's last registered process (its incarnation id): a first
//!   heartbeat from another process registers it, fenced, as under the old leader. (A
//!   broker that lost power while the controller leadership moved would otherwise keep
//!   its ISR places with a log missing its unflushed tail.)
//! * A broker that missed a heartbeat ([`SUSPECT_AFTER_MS`] without one) is a suspect:
//!   the leader checks whether anything still listens at its address. A refused
//!   connection means its process is gone (a crash, a kill, an out-of-memory kill): it is
//!   fenced then, not at the end of its session. A process that is slow, paused or cut
//!   off still has its listening socket (the kernel answers for it), or cannot be reached
//!   at all, so only its session decides, and a loaded machine does not get its brokers
//!   fenced sooner. (Kafka waits for the session in every case.)

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::image::MetadataImage;

/// Kafka's `broker.session.timeout.ms` default.
pub const BROKER_SESSION_TIMEOUT_MS: i64 = 9_000;
/// Kafka's `broker.heartbeat.interval.ms` default.
pub const BROKER_HEARTBEAT_INTERVAL_MS: i64 = 2_000;
/// A broker not heard from for this long (one heartbeat missed, with half an interval to
/// spare) is checked for a live process ([`BrokerLiveness::suspects`]).
pub const SUSPECT_AFTER_MS: i64 = BROKER_HEARTBEAT_INTERVAL_MS * 3 / 2;

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
    /// After a controller failover, the process the image names (the last one
    /// registered): a first heartbeat from another is a restart.
    registered: Option<Uuid>,
    last_heartbeat_ms: i64,
    fenced: bool,
    shutting_down: bool,
    /// Replicas (topic id, partition) this incarnation reported in a failed log dir:
    /// kept out of the ISR (a fetch it sent before the failure may still land at the
    /// leader and look caught up). Gone with the incarnation.
    offline: BTreeSet<(Uuid, i32)>,
    /// A check that began at this time (ms) found nothing listening at the broker's
    /// address, and no heartbeat came since: its process is gone.
    gone_since: Option<i64>,
}

impl Broker {
    fn new(incarnation: Option<Uuid>, now_ms: i64, fenced: bool) -> Broker {
        Broker {
            incarnation,
            registered: None,
            last_heartbeat_ms: now_ms,
            fenced,
            shutting_down: false,
            offline: BTreeSet::new(),
            gone_since: None,
        }
    }

    /// Not fenced yet, and its session ran out at `now` or its process is gone.
    fn expired(&self, session_timeout_ms: i64, now_ms: i64) -> bool {
        !self.fenced && (now_ms - self.last_heartbeat_ms > session_timeout_ms || self.gone_since.is_some())
    }
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
    /// A broker not heard from for this long is a suspect (see [`Self::suspects`]): one
    /// heartbeat interval and a half.
    suspect_after_ms: i64,
}

impl BrokerLiveness {
    pub fn new(session_timeout_ms: i64) -> BrokerLiveness {
        BrokerLiveness { brokers: BTreeMap::new(), session_timeout_ms, suspect_after_ms: SUSPECT_AFTER_MS }
    }

    /// For brokers that heartbeat every `heartbeat_interval_ms` (`broker.heartbeat.interval.ms`).
    pub fn with_heartbeat_interval(mut self, heartbeat_interval_ms: i64) -> BrokerLiveness {
        self.suspect_after_ms = heartbeat_interval_ms.saturating_mul(3) / 2;
        self
    }

    /// This controller just became the quorum leader: it knows of `nodes` (id, fenced)
    /// from the image but has heard from none of them; each gets a full session from
    /// now, and its next heartbeat's incarnation is taken as its current one.
    pub fn became_leader(&mut self, nodes: impl IntoIterator<Item = (i32, bool)>, now_ms: i64) {
        self.brokers = nodes.into_iter().map(|(node, fenced)| (node, Broker::new(None, now_ms, fenced))).collect();
    }

    /// [`became_leader`](Self::became_leader) with what `image` says of every broker:
    /// fenced, in controlled shutdown (what the old leader decided; a broker's next
    /// heartbeat may say otherwise), and its registered process.
    pub fn became_leader_of(&mut self, image: &MetadataImage, now_ms: i64) {
        self.became_leader(image.brokers.values().map(|b| (b.node_id, b.fenced)), now_ms);
        for node in &image.controlled_shutdown {
            if let Some(b) = self.brokers.get_mut(node) {
                b.shutting_down = true;
            }
        }
        for (node, b) in self.brokers.iter_mut() {
            b.registered = image.brokers.get(node).and_then(|i| i.incarnation);
        }
    }

    pub fn heartbeat(&mut self, node: i32, incarnation: Uuid, want_shut_down: bool, now_ms: i64) -> HeartbeatOutcome {
        let fresh = Broker::new(Some(incarnation), now_ms, true);
        let Some(b) = self.brokers.get_mut(&node) else {
            self.brokers.insert(node, fresh);
            return HeartbeatOutcome::Registered;
        };
        b.last_heartbeat_ms = now_ms;
        b.gone_since = None;
        match b.incarnation {
            None if b.registered.is_some_and(|r| r != incarnation) => {
                // It restarted while the controller leadership moved.
                *b = fresh;
                return HeartbeatOutcome::Registered;
            }
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
        self.brokers.values().any(|b| b.expired(self.session_timeout_ms, now_ms))
    }

    /// Brokers not heard from for a heartbeat and a half at `now`, not fenced, and not
    /// found gone yet: the leader checks whether anything listens at their addresses.
    pub fn suspects(&self, now_ms: i64) -> Vec<i32> {
        self.brokers
            .iter()
            .filter(|(_, b)| {
                !b.fenced && b.gone_since.is_none() && now_ms - b.last_heartbeat_ms > self.suspect_after_ms
            })
            .map(|(node, _)| *node)
            .collect()
    }

    /// A check of `node` that began at `began_ms` found nothing listening at its address
    /// (a refused connection): unless a heartbeat came since the check began, its process
    /// is gone, and the next [`expire`](Self::expire) fences it.
    pub fn nothing_listening(&mut self, node: i32, began_ms: i64) {
        if let Some(b) = self.brokers.get_mut(&node).filter(|b| !b.fenced && b.last_heartbeat_ms < began_ms) {
            b.gone_since = Some(began_ms);
        }
    }

    /// Whether a check found `node`'s process gone (and no heartbeat came since).
    pub fn found_gone(&self, node: i32) -> bool {
        self.brokers.get(&node).is_some_and(|b| b.gone_since.is_some())
    }

    /// Brokers whose session expired at `now`, or whose process a check found gone; they
    /// are fenced from now on.
    pub fn expire(&mut self, now_ms: i64) -> Vec<i32> {
        let mut out = Vec::new();
        let session_timeout_ms = self.session_timeout_ms;
        for (node, b) in self.brokers.iter_mut() {
            if b.expired(session_timeout_ms, now_ms) {
                b.fenced = true;
                out.push(*node);
            }
        }
        out
    }

    /// Whether a request from process `incarnation` of `node` (an AlterPartition) is
    /// from a process that was replaced: this controller has heard from another one
    /// since, or, before it has heard from any, the image names another (Kafka's
    /// STALE_BROKER_EPOCH; a newer process heartbeats, and is named, before it can lead).
    /// A broker the image names no process for is taken at its word.
    pub fn is_stale(&self, node: i32, incarnation: Uuid) -> bool {
        self.brokers.get(&node).and_then(|b| b.incarnation.or(b.registered)).is_some_and(|known| known != incarnation)
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

    /// `node`'s heartbeat named all its replicas in failed log dirs: they replace what
    /// was known. Returns those not known before (a new controller leader knows none).
    pub fn offline_replicas_are(&mut self, node: i32, partitions: &[(Uuid, i32)]) -> Vec<(Uuid, i32)> {
        let Some(b) = self.brokers.get_mut(&node) else { return Vec::new() };
        let new = partitions.iter().copied().filter(|p| !b.offline.contains(p)).collect();
        b.offline = partitions.iter().copied().collect();
        new
    }

    pub fn is_replica_offline(&self, node: i32, topic_id: Uuid, partition: i32) -> bool {
        self.brokers.get(&node).is_some_and(|b| b.offline.contains(&(topic_id, partition)))
    }

    pub fn is_fenced(&self, node: i32) -> bool {
        self.brokers.get(&node).is_none_or(|b| b.fenced)
    }

    /// `node`'s registration is being dropped: this controller forgets it (a process of
    /// it that registers again starts over, fenced).
    pub fn unregister(&mut self, node: i32) {
        self.brokers.remove(&node);
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

    /// `broker_session_timeout_ms` and `broker_heartbeat_interval_ms` as settings: the
    /// session and the suspicion follow them.
    #[test]
    fn the_session_and_the_suspicion_follow_the_settings() {
        let mut l = BrokerLiveness::new(1_500).with_heartbeat_interval(200);
        l.heartbeat(1, A, false, 0);
        l.heartbeat(1, A, false, 0);
        assert!(l.suspects(300).is_empty());
        assert_eq!(l.suspects(301), vec![1], "one heartbeat and a half");
        assert!(!l.any_expired(1_500));
        assert_eq!(l.expire(1_501), vec![1]);
    }

    /// A broker that missed a heartbeat is checked; nothing listening at its address
    /// fences it before its session ends, unless it was heard from since the check began.
    #[test]
    fn a_broker_found_gone_is_fenced_before_its_session_ends() {
        let mut l = BrokerLiveness::new(9_000);
        for node in [1, 2] {
            l.heartbeat(node, A, false, 0);
            l.heartbeat(node, A, false, 0);
        }
        assert!(l.suspects(SUSPECT_AFTER_MS).is_empty(), "not past one missed heartbeat");
        assert_eq!(l.suspects(SUSPECT_AFTER_MS + 1), vec![1, 2]);
        // Broker 2 heartbeats while its check is on its way: the check does not count.
        l.heartbeat(2, A, false, 3_200);
        l.nothing_listening(2, 3_100);
        assert!(!l.any_expired(3_300) && !l.found_gone(2));
        // Broker 1 is gone.
        l.nothing_listening(1, 3_100);
        assert!(l.found_gone(1) && l.any_expired(3_300));
        assert!(l.suspects(3_300).is_empty(), "found gone: no more checks");
        assert_eq!(l.expire(3_300), vec![1]);
        assert!(l.is_fenced(1) && l.is_alive(2));
        assert!(l.suspects(5_300).iter().all(|n| *n != 1), "fenced brokers are not checked");
        l.nothing_listening(1, 5_400);
        assert!(l.expire(5_500).is_empty(), "fenced once");
        // Its next process registers as any restarted one.
        assert_eq!(l.heartbeat(1, B, false, 6_000), HeartbeatOutcome::Registered);
        assert_eq!(l.heartbeat(1, B, false, 6_001), HeartbeatOutcome::Unfenced);
        assert!(!l.found_gone(1));
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

    /// A new controller leader knows each broker's registered process from the image:
    /// that process is adopted as before, another one is a restart (fenced). A broker
    /// the image names no process for (records from before they did) is adopted.
    #[test]
    fn a_new_controller_leader_fences_a_process_the_image_does_not_name() {
        let mut img = MetadataImage::default();
        for (node_id, incarnation) in [(1, Some(A)), (2, Some(A)), (3, None)] {
            img.apply(&crate::controller::records::MetadataRecord::RegisterBroker {
                node_id,
                host: "h".into(),
                port: 1,
                rack: None,
                inter_broker: None,
                incarnation,
                metadata_format: crate::controller::records::METADATA_FORMAT,
            });
        }
        let mut l = BrokerLiveness::new(9_000);
        l.became_leader_of(&img, 0);
        assert!(l.is_stale(2, B) && !l.is_stale(2, A), "before a heartbeat, as the image says");
        assert!(!l.is_stale(3, B), "named nowhere: taken at its word");
        assert_eq!(l.heartbeat(1, A, false, 1), HeartbeatOutcome::Unchanged);
        assert!(l.may_join_isr(1));
        assert_eq!(l.heartbeat(2, B, false, 1), HeartbeatOutcome::Registered, "2 restarted meanwhile");
        assert!(l.is_fenced(2) && l.is_stale(2, A));
        assert_eq!(l.heartbeat(2, B, false, 2), HeartbeatOutcome::Unfenced);
        assert_eq!(l.heartbeat(3, B, false, 1), HeartbeatOutcome::Unchanged);
        assert!(l.may_join_isr(3));
    }
}
