//! KIP-392: which replica a consumer should read from. A pure choice, as Kafka's
//! `RackAwareReplicaSelector` makes it: a consumer that names its rack (`client.rack`)
//! reads from the leader when the leader is in that rack or no replica is, and otherwise
//! from the most caught-up in-sync follower in its rack. The leader answers such a fetch
//! with `preferred_read_replica` and no records; the consumer then fetches from that
//! follower, which serves up to its own high watermark.
//!
//! Kafka turns this on with `replica.selector.class`; without it (the default) the leader
//! never names another replica, as here.

/// What the leader knows of one replica a consumer could read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaView {
    pub id: i32,
    pub rack: Option<String>,
    pub log_end_offset: i64,
    /// How long since this replica last reached the leader's log end offset (0 for the
    /// leader itself).
    pub since_caught_up_ms: i64,
}

/// The follower `client_rack`'s consumer should read from, or `None` for the leader.
/// `candidates` are the followers that may serve it: in the ISR and holding the offset
/// asked for (the leader filters them; see `IsrState::read_candidates`).
pub fn rack_aware(client_rack: &str, leader: &ReplicaView, candidates: &[ReplicaView]) -> Option<i32> {
    if client_rack.is_empty() || leader.rack.as_deref() == Some(client_rack) {
        return None;
    }
    candidates
        .iter()
        .filter(|r| r.id != leader.id && r.rack.as_deref() == Some(client_rack))
        // The most caught-up: the highest log end offset, then the most recently caught
        // up, then (only to be deterministic) the lowest id.
        .max_by(|a, b| {
            a.log_end_offset
                .cmp(&b.log_end_offset)
                .then(b.since_caught_up_ms.cmp(&a.since_caught_up_ms))
                .then(b.id.cmp(&a.id))
        })
        .map(|r| r.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(id: i32, rack: Option<&str>, leo: i64, since: i64) -> ReplicaView {
        ReplicaView { id, rack: rack.map(str::to_owned), log_end_offset: leo, since_caught_up_ms: since }
    }

    #[test]
    fn a_consumer_without_a_rack_reads_from_the_leader() {
        let leader = view(1, Some("a"), 10, 0);
        assert_eq!(rack_aware("", &leader, &[view(2, Some("b"), 10, 0)]), None);
    }

    #[test]
    fn the_leader_in_the_consumers_rack_is_kept() {
        let leader = view(1, Some("a"), 10, 0);
        assert_eq!(rack_aware("a", &leader, &[view(2, Some("a"), 10, 0)]), None);
    }

    #[test]
    fn a_follower_in_the_consumers_rack_is_preferred() {
        let leader = view(1, Some("a"), 10, 0);
        let followers = [view(2, Some("b"), 10, 0), view(3, Some("c"), 10, 0)];
        assert_eq!(rack_aware("c", &leader, &followers), Some(3));
        assert_eq!(rack_aware("b", &leader, &followers), Some(2));
    }

    #[test]
    fn no_replica_in_the_consumers_rack_means_the_leader() {
        let leader = view(1, Some("a"), 10, 0);
        assert_eq!(rack_aware("z", &leader, &[view(2, Some("b"), 10, 0)]), None);
        assert_eq!(rack_aware("z", &view(1, None, 10, 0), &[view(2, None, 10, 0)]), None);
    }

    #[test]
    fn the_most_caught_up_follower_of_the_rack_wins() {
        let leader = view(1, Some("a"), 10, 0);
        let followers = [view(2, Some("b"), 8, 0), view(3, Some("b"), 10, 500), view(4, Some("b"), 10, 100)];
        assert_eq!(rack_aware("b", &leader, &followers), Some(4));
    }
}
