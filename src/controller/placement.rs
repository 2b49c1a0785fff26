//! Replica placement for new partitions, as Kafka places them without explicit
//! assignments: brokers are ordered alternating between racks, partition `p`'s leader is
//! the broker at `(start + p) mod n` (leaders spread round robin), and its followers are
//! the next brokers at a shift that grows every `n` partitions, skipping racks that
//! already hold a replica while a rack without one is left (Kafka's rack-aware
//! `assignReplicasToBrokers`, which `StripedReplicaPlacer` generalizes).
//!
//! Pure: brokers and a start index in, replica lists out.

use std::collections::{BTreeMap, BTreeSet};

use super::image::BrokerImage;

/// Replica lists for partitions `first..first + count` with `replication_factor`
/// distinct brokers each. `start` picks the first leader (the controller draws it at
/// random, as Kafka does, so that topics do not all start on the same broker). The
/// caller checks `replication_factor <= brokers.len()` and that `brokers` is not empty.
pub fn place(
    brokers: &[BrokerImage],
    first: i32,
    count: i32,
    replication_factor: usize,
    start: usize,
) -> Vec<Vec<i32>> {
    let arranged = rack_alternated(brokers);
    let n = arranged.len();
    let rack_of: BTreeMap<i32, &str> = brokers.iter().map(|b| (b.node_id, b.rack.as_deref().unwrap_or(""))).collect();
    let num_racks = rack_of.values().collect::<BTreeSet<_>>().len();
    let rf = replication_factor.min(n);
    let start = start % n.max(1);
    let mut out = Vec::with_capacity(count.max(0) as usize);
    for p in first..first + count {
        let p = p as usize;
        let first_index = (p + start) % n;
        let shift = (p / n) * num_racks;
        let leader = arranged[first_index];
        let mut replicas = vec![leader];
        let mut racks = BTreeSet::from([rack_of[&leader]]);
        let mut k = 0;
        while replicas.len() < rf && k < 2 * n * n {
            let idx = (first_index + 1 + (shift + k) % (n - 1)) % n;
            let b = arranged[idx];
            let rack_ok = !racks.contains(rack_of[&b]) || racks.len() == num_racks || k >= n;
            if rack_ok && !replicas.contains(&b) {
                replicas.push(b);
                racks.insert(rack_of[&b]);
            }
            k += 1;
        }
        out.push(replicas);
    }
    out
}

/// Brokers in node id order, interleaved by rack: r1's first, r2's first, r3's first,
/// r1's second, ... so that neighbours in the list sit on different racks.
fn rack_alternated(brokers: &[BrokerImage]) -> Vec<i32> {
    let mut by_rack: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for b in brokers {
        by_rack.entry(b.rack.as_deref().unwrap_or("")).or_default().push(b.node_id);
    }
    by_rack.values_mut().for_each(|v| v.sort_unstable());
    let longest = by_rack.values().map(Vec::len).max().unwrap_or(0);
    (0..longest).flat_map(|i| by_rack.values().filter_map(move |v| v.get(i).copied())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(id: i32, rack: Option<&str>) -> BrokerImage {
        BrokerImage {
            node_id: id,
            host: "h".into(),
            port: 1,
            rack: rack.map(str::to_owned),
            fenced: false,
            inter_broker: None,
            incarnation: None,
            metadata_format: crate::controller::records::METADATA_FORMAT,
        }
    }

    #[test]
    fn leaders_spread_round_robin_and_replicas_are_distinct() {
        let brokers: Vec<_> = (1..=3).map(|i| broker(i, None)).collect();
        let placed = place(&brokers, 0, 6, 3, 0);
        assert_eq!(placed[0], vec![1, 2, 3]);
        assert_eq!(placed[1], vec![2, 3, 1]);
        assert_eq!(placed[2], vec![3, 1, 2]);
        let leaders: Vec<i32> = placed.iter().map(|r| r[0]).collect();
        assert_eq!(leaders, vec![1, 2, 3, 1, 2, 3]);
        for r in &placed {
            assert_eq!(r.iter().collect::<BTreeSet<_>>().len(), 3, "{r:?}");
        }
        // The follower order shifts after a full round, as Kafka's does.
        assert_eq!(placed[3], vec![1, 3, 2]);
        // The start index moves the first leader.
        assert_eq!(place(&brokers, 0, 1, 2, 1)[0][0], 2);
        // New partitions continue the pattern from their own index.
        assert_eq!(place(&brokers, 4, 1, 2, 0)[0][0], 2);
    }

    #[test]
    fn replicas_of_a_partition_land_on_distinct_racks() {
        let brokers = vec![
            broker(1, Some("a")),
            broker(2, Some("a")),
            broker(3, Some("b")),
            broker(4, Some("b")),
            broker(5, Some("c")),
            broker(6, Some("c")),
        ];
        let rack = |id: i32| brokers[id as usize - 1].rack.clone().unwrap();
        for start in 0..6 {
            for replicas in place(&brokers, 0, 12, 3, start) {
                let racks: BTreeSet<_> = replicas.iter().map(|&b| rack(b)).collect();
                assert_eq!(racks.len(), 3, "start {start}: {replicas:?}");
            }
        }
        // Two racks, three replicas: every rack used, no broker twice.
        let two = &brokers[..4];
        for replicas in place(two, 0, 8, 3, 0) {
            assert_eq!(replicas.iter().collect::<BTreeSet<_>>().len(), 3);
            assert_eq!(replicas.iter().map(|&b| rack(b)).collect::<BTreeSet<_>>().len(), 2);
        }
    }

    #[test]
    fn one_broker() {
        assert_eq!(place(&[broker(7, None)], 0, 3, 1, 5), vec![vec![7], vec![7], vec![7]]);
    }
}
