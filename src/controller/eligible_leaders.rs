//! Eligible leader replicas (Kafka's KIP-966, on by default for new Kafka clusters since
//! 4.1): which replicas outside the ISR may still lead without losing an acknowledged
//! record. Pure functions of the partition and the image, used by `partition_change`.
//!
//! Why it is safe: a leader's high watermark does not move while its ISR is smaller than
//! the effective `min.insync.replicas` (`replication::isr`). A replica that leaves the ISR
//! while the ISR is below that minimum (or that the leaving makes go below it) therefore
//! holds every record below the high watermark for as long as the ISR stays small, which
//! is every record acknowledged to an acks=all producer. Such replicas are the ELR. The
//! rules (Kafka's `PartitionChangeBuilder`):
//! * while the ISR is at least the minimum, the ELR is empty (the high watermark moves, so
//!   a replica outside the ISR may lack acknowledged records);
//! * below it, the ELR gains the members the ISR loses, and loses those that rejoin the
//!   ISR, leave the replicas, or restarted after an unclean shutdown (their log may have
//!   lost unflushed records: Kafka's `handleBrokerUncleanShutdown`). The ISR may then become
//!   empty;
//! * a leader is chosen from the ISR; while the ISR is empty, from the ELR (it becomes
//!   the ISR alone); while both are empty, the last leader (`last_known_elr`, Kafka 4's
//!   "balanced recovery"), which leads with what it has when it returns, as it would have
//!   before ELR existed, when the ISR kept its last member.
//!
//! The minimum used here must never be more than the one any replica leads with, or the
//! ELR could name a replica that a leader's moving high watermark left behind. So it is
//! the topic's own `min.insync.replicas` when set (every broker uses that), else the
//! smallest value the replicas' dynamic defaults give, where a replica without one counts
//! as 1 (its static default is not in the image); capped at the replica count, as the
//! leader caps it. A change of `min.insync.replicas` clears the ELR of partitions that
//! have a leader ([`cleared_after_config_change`]), as Kafka clears it.

use super::broker_config;
use super::features::{self, ELIGIBLE_LEADER_REPLICAS_VERSION};
use super::image::{MetadataImage, PartitionImage, TopicImage};
use super::partition_change::NO_LEADER;
use super::records::{MetadataRecord, ELIGIBLE_LEADER_REPLICAS};

/// The config the ELR is kept against, per topic and as a broker-wide default.
pub(super) const MIN_ISR: &str = "min.insync.replicas";

/// How the controller treats the replicas that leave a partition's ISR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ElrRules {
    /// Every registered broker reads ELR records ([`ELIGIBLE_LEADER_REPLICAS`]); until
    /// then an ISR keeps its last member, as before.
    pub enabled: bool,
    /// The `min.insync.replicas` the ELR is kept against (see the module comment).
    pub min_isr: usize,
}

pub(super) fn rules(image: &MetadataImage, topic: &TopicImage, pi: &PartitionImage) -> ElrRules {
    ElrRules { enabled: enabled(image), min_isr: min_isr(image, topic, pi) }
}

/// The finalized `eligible.leader.replicas.version` is 1 (the default; an operator may set
/// 0) and every registered broker reads ELR records.
pub(super) fn enabled(image: &MetadataImage) -> bool {
    features::finalized_level(image, ELIGIBLE_LEADER_REPLICAS_VERSION) >= 1
        && image.brokers_behind(ELIGIBLE_LEADER_REPLICAS).is_empty()
}

/// The records that go back to the rule before ELR when `eligible.leader.replicas.version`
/// is set to 0: every partition forgets its ELR and last known leader, and one whose ISR
/// is empty gets back members that may lead without losing an acknowledged record: its
/// ELR members that are up (the next heartbeat elects one); else its last known leader, the
/// member the ISR would have kept before ELR; else its whole ELR, all down (whichever
/// returns first leads).
///
/// Kafka writes no such records: it forgets lazily, at each partition's next change, and
/// a leaderless partition whose ELR it forgot before an ELR member returned can then be led
/// again only by an unclean election. Here no partition is left so.
pub(super) fn records_to_disable(image: &MetadataImage) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for topic in image.topics.values() {
        for pi in &topic.partitions {
            let isr = if !pi.isr.is_empty() {
                pi.isr.clone()
            } else {
                let up: Vec<i32> = pi.elr.iter().copied().filter(|r| image.broker_staying(*r)).collect();
                [up, pi.last_known_elr.clone(), pi.elr.clone()].into_iter().find(|c| !c.is_empty()).unwrap_or_default()
            };
            let next = PartitionImage { isr, elr: Vec::new(), last_known_elr: Vec::new(), ..pi.clone() };
            out.extend(super::partition_change::change_record(topic.topic_id, pi, next));
        }
    }
    out
}

fn min_isr(image: &MetadataImage, topic: &TopicImage, pi: &PartitionImage) -> usize {
    let parse = |v: &String| v.trim().parse::<i64>().ok().map(|v| v.max(1) as usize);
    let value = topic.configs.get(MIN_ISR).and_then(parse).unwrap_or_else(|| {
        let dynamic = |r: i32| broker_config::set_values(image, Some(r), MIN_ISR).first().and_then(|(_, v)| parse(v));
        pi.replicas.iter().map(|r| dynamic(*r).unwrap_or(1)).min().unwrap_or(1)
    });
    value.clamp(1, pi.replicas.len().max(1))
}

/// The ELR once the ISR becomes `isr` (Kafka's `maybePopulateTargetElr`), in assignment
/// order. `unclean_shutdown`: a replica whose log cannot be trusted to hold what it
/// fetched (it restarted after an unclean shutdown, or its log dir failed).
pub(super) fn next_elr(pi: &PartitionImage, rules: ElrRules, isr: &[i32], unclean_shutdown: Option<i32>) -> Vec<i32> {
    if !rules.enabled || isr.len() >= rules.min_isr {
        return Vec::new();
    }
    pi.replicas
        .iter()
        .copied()
        .filter(|r| pi.elr.contains(r) || pi.isr.contains(r))
        .filter(|r| !isr.contains(r) && Some(*r) != unclean_shutdown)
        .collect()
}

/// The last known leader to keep after a change that leaves the partition with `leader`
/// (Kafka's `maybeUpdateLastKnownLeader`): the leader it loses now, kept while it has
/// none, cleared once it has one. (Kafka records it only once the ISR is empty; here also
/// when the leader goes while other ISR members are down, so that it is known when they
/// are fenced in turn. A partition that lost its leader before ELR was kept has its ISR's
/// last member instead: that member would have led again when it returned.)
pub(super) fn next_last_known(pi: &PartitionImage, rules: ElrRules, isr: &[i32], leader: i32) -> Vec<i32> {
    if !rules.enabled || leader != NO_LEADER {
        return Vec::new();
    }
    if pi.leader != NO_LEADER {
        return vec![pi.leader];
    }
    match (&pi.last_known_elr[..], &pi.isr[..]) {
        ([], [last]) if isr.is_empty() => vec![*last],
        _ => pi.last_known_elr.clone(),
    }
}

/// The last known leader, when it may lead: the ISR and the ELR are empty and it is
/// eligible (alive). It leads with what it has (Kafka counts this an unclean election,
/// but it is what happened before ELR when an ISR's last member came back).
pub(super) fn last_known_leader(
    pi: &PartitionImage,
    isr: &[i32],
    elr: &[i32],
    eligible: &dyn Fn(i32) -> bool,
) -> Option<i32> {
    match pi.last_known_elr[..] {
        [r] if isr.is_empty() && elr.is_empty() && pi.replicas.contains(&r) && eligible(r) => Some(r),
        _ => None,
    }
}

/// `records`, a config change, followed by the records that clear the ELR of the
/// partitions whose `min.insync.replicas` it changes and that have a leader: under a
/// lower minimum their high watermark may move and leave an ELR member behind. (Kafka
/// clears the ELR on any such change too.) A leaderless partition keeps its ELR: without
/// a leader nothing moves.
pub(super) fn cleared_after_config_change(
    image: &MetadataImage,
    mut records: Vec<MetadataRecord>,
) -> Vec<MetadataRecord> {
    let mut every_topic = false;
    let mut topic_ids = Vec::new();
    for r in &records {
        match r {
            MetadataRecord::TopicConfig { topic_id, name, .. } if name == MIN_ISR => topic_ids.push(*topic_id),
            MetadataRecord::BrokerConfig { name, .. } if name == MIN_ISR => every_topic = true,
            _ => {}
        }
    }
    let mut cleared = Vec::new();
    for topic in image.topics.values().filter(|t| every_topic || topic_ids.contains(&t.topic_id)) {
        for pi in topic.partitions.iter().filter(|p| p.leader != NO_LEADER) {
            if pi.elr.is_empty() && pi.last_known_elr.is_empty() {
                continue;
            }
            let next = PartitionImage { elr: Vec::new(), last_known_elr: Vec::new(), ..pi.clone() };
            cleared.extend(super::partition_change::change_record(topic.topic_id, pi, next));
        }
    }
    records.extend(cleared);
    records
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use uuid::Uuid;

    use super::*;
    use crate::controller::operations::{decide, ConfigChange, ControllerOp};

    #[test]
    fn a_change_of_the_minimum_clears_the_elr_of_led_partitions() {
        let t = Uuid::from_u128(3);
        let p = |partition: i32, leader: i32| PartitionImage {
            partition,
            replicas: vec![1, 2, 3],
            isr: if leader == NO_LEADER { vec![] } else { vec![leader] },
            leader,
            elr: vec![2],
            ..Default::default()
        };
        let mut img = MetadataImage::default();
        let configs = [("min.insync.replicas".to_string(), "3".to_string())].into();
        let topic = TopicImage { name: "t".into(), topic_id: t, partitions: vec![p(0, 1), p(1, NO_LEADER)], configs };
        img.topic_names_by_id.insert(t, "t".into());
        img.topics.insert("t".into(), Arc::new(topic));
        let alter = |name: &str, value: &str| ControllerOp::AlterTopicConfigs {
            name: "t".into(),
            changes: vec![ConfigChange::Set(name.into(), value.into())],
            validate_only: false,
        };
        let records = decide(&img, &alter("min.insync.replicas", "2"), 0).unwrap();
        let cleared: Vec<_> = records
            .iter()
            .filter_map(|r| match r {
                MetadataRecord::Partition { partition, eligible_leader_replicas, .. } => {
                    Some((*partition, eligible_leader_replicas.clone()))
                }
                _ => None,
            })
            .collect();
        // Partition 1 has no leader: nothing can move its high watermark.
        assert_eq!(cleared, vec![(0, vec![])]);
        let other = decide(&img, &alter("retention.ms", "1000"), 0).unwrap();
        assert!(other.iter().all(|r| !matches!(r, MetadataRecord::Partition { .. })), "{other:?}");
    }

    /// Turned off, no partition keeps an ELR, and none whose ISR is empty is left without a
    /// member that may lead: the ELR members that are up, else the last known leader, else
    /// the whole ELR.
    #[test]
    fn turned_off_every_partition_goes_back_to_an_isr_that_keeps_a_member() {
        let t = Uuid::from_u128(3);
        let p = |partition: i32, isr: Vec<i32>, elr: Vec<i32>, last: Vec<i32>| PartitionImage {
            partition,
            replicas: vec![1, 2, 3],
            leader: isr.first().copied().unwrap_or(NO_LEADER),
            isr,
            elr,
            last_known_elr: last,
            ..Default::default()
        };
        let mut img = MetadataImage::default();
        for node_id in 1..=3 {
            img.apply(&MetadataRecord::test_registration(node_id, crate::controller::records::METADATA_FORMAT));
        }
        img.apply(&MetadataRecord::BrokerFenced { node_id: 1, fenced: true });
        img.apply(&MetadataRecord::BrokerFenced { node_id: 2, fenced: true });
        let partitions = vec![
            p(0, vec![3], vec![2], vec![]),
            p(1, vec![], vec![2, 3], vec![1]),
            p(2, vec![], vec![2], vec![1]),
            p(3, vec![], vec![1, 2], vec![]),
            p(4, vec![3, 2], vec![], vec![]),
        ];
        let topic = TopicImage { name: "t".into(), topic_id: t, partitions, configs: Default::default() };
        img.topic_names_by_id.insert(t, "t".into());
        img.topics.insert("t".into(), Arc::new(topic));
        assert!(enabled(&img));
        let records = records_to_disable(&img);
        let isrs: Vec<_> = records
            .iter()
            .map(|r| match r {
                MetadataRecord::Partition {
                    partition, isr, leader, eligible_leader_replicas, last_known_elr, ..
                } => {
                    assert!(eligible_leader_replicas.is_empty() && last_known_elr.is_empty(), "{r:?}");
                    assert_eq!(r.format_level(), 0, "every release reads it: {r:?}");
                    (*partition, isr.clone(), *leader)
                }
                other => panic!("{other:?}"),
            })
            .collect();
        // 3 is up; 1 was the last leader; 1 and 2 are both down. Partition 4 is unchanged.
        let expected =
            vec![(0, vec![3], 3), (1, vec![3], NO_LEADER), (2, vec![1], NO_LEADER), (3, vec![1, 2], NO_LEADER)];
        assert_eq!(isrs, expected);
        img.apply(&MetadataRecord::FeatureLevel { name: ELIGIBLE_LEADER_REPLICAS_VERSION.into(), level: 0 });
        assert!(!enabled(&img));
    }

    #[test]
    fn records_that_keep_eligible_leaders_need_the_new_format() {
        let record = |isr: Vec<i32>, elr: Vec<i32>, last: Vec<i32>| MetadataRecord::Partition {
            topic_id: Uuid::from_u128(1),
            partition: 0,
            replicas: vec![1, 2],
            isr,
            leader: NO_LEADER,
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: vec![],
            removing_replicas: vec![],
            eligible_leader_replicas: elr,
            last_known_elr: last,
        };
        assert_eq!(record(vec![1], vec![], vec![]).format_level(), 0);
        assert_eq!(record(vec![1], vec![2], vec![]).format_level(), ELIGIBLE_LEADER_REPLICAS);
        assert_eq!(record(vec![], vec![], vec![1]).format_level(), ELIGIBLE_LEADER_REPLICAS);
        assert_eq!(record(vec![], vec![], vec![]).format_level(), ELIGIBLE_LEADER_REPLICAS);
        // Written as before when it keeps none.
        let json = serde_json::to_string(&record(vec![1], vec![], vec![])).unwrap();
        assert!(!json.contains("eligible_leader_replicas") && !json.contains("last_known_elr"), "{json}");
    }
}
