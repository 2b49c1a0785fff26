//! Leader and ISR decisions: pure functions from the image (and which brokers are alive)
//! to the partition records the controller commits. No I/O, no clock.
//!
//! Kafka's rules (`PartitionChangeBuilder`, `ReplicationControlManager`):
//! * a partition keeps its leader while the leader is alive and in the ISR; otherwise the
//!   first replica (in assignment order) that is alive and in the ISR leads; failing that,
//!   with `unclean.leader.election.enable`, the first alive replica (the ISR becomes that
//!   replica alone: records it never had may be lost, which is why it is off by default);
//!   failing that the partition has no leader (-1) until an ISR member comes back;
//! * a fenced or shutting-down broker leaves every ISR, except that an ISR never becomes
//!   empty: its last member stays, so it can lead again when it returns with everything
//!   the ISR acknowledged;
//! * the leader epoch moves when the leader changes, and when a replica leaves the
//!   replicas (a reassignment: the removed replica's fetches are then fenced with
//!   FENCED_LEADER_EPOCH); the partition epoch moves on every change (AlterPartition
//!   requests carry it to detect stale proposals).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::broker_config;
use super::image::{MetadataImage, PartitionImage, TopicImage};
use super::records::MetadataRecord;

/// No leader: every ISR member is offline (Kafka's `NO_LEADER`).
pub const NO_LEADER: i32 = -1;

/// A partition's replica set after a change, before it is a record.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    isr: Vec<i32>,
    leader: i32,
}

fn record(topic_id: Uuid, pi: &PartitionImage, target: Target) -> Option<MetadataRecord> {
    change_record(topic_id, pi, PartitionImage { isr: target.isr, leader: target.leader, ..pi.clone() })
}

/// The record that moves `pi` to `next`'s replicas, ISR, leader and reassignment, unless
/// none of them changes. The epochs are derived, whatever `next` holds: the leader epoch
/// moves with the leader and when a replica leaves (Kafka's
/// `triggerLeaderEpochBumpForReplicaReassignmentIfNeeded`), the partition epoch on every
/// change.
pub(super) fn change_record(topic_id: Uuid, pi: &PartitionImage, next: PartitionImage) -> Option<MetadataRecord> {
    let unchanged = next.replicas == pi.replicas
        && next.isr == pi.isr
        && next.leader == pi.leader
        && next.adding_replicas == pi.adding_replicas
        && next.removing_replicas == pi.removing_replicas;
    if unchanged {
        return None;
    }
    let bump_leader_epoch = next.leader != pi.leader || !pi.replicas.iter().all(|r| next.replicas.contains(r));
    Some(MetadataRecord::Partition {
        topic_id,
        partition: pi.partition,
        replicas: next.replicas,
        isr: next.isr,
        leader: next.leader,
        leader_epoch: if bump_leader_epoch { pi.leader_epoch + 1 } else { pi.leader_epoch },
        partition_epoch: pi.partition_epoch + 1,
        adding_replicas: next.adding_replicas,
        removing_replicas: next.removing_replicas,
    })
}

/// The leader for `isr` among `replicas`: the current one if it may stay, else the first
/// eligible replica in assignment order; unclean election only when nothing in the ISR
/// is eligible. Returns the leader and the ISR to go with it.
fn elect(pi: &PartitionImage, isr: Vec<i32>, eligible: &dyn Fn(i32) -> bool, unclean: bool) -> Target {
    if pi.leader != NO_LEADER && isr.contains(&pi.leader) && eligible(pi.leader) {
        return Target { isr, leader: pi.leader };
    }
    if let Some(&leader) = pi.replicas.iter().find(|r| isr.contains(r) && eligible(**r)) {
        return Target { isr, leader };
    }
    if unclean {
        if let Some(&leader) = pi.replicas.iter().find(|r| eligible(**r)) {
            return Target { isr: vec![leader], leader };
        }
    }
    Target { isr, leader: NO_LEADER }
}

/// `isr` without `gone`, keeping the last member (an ISR never empties).
fn shrink(isr: &[i32], gone: &dyn Fn(i32) -> bool) -> Vec<i32> {
    let kept: Vec<i32> = isr.iter().copied().filter(|r| !gone(*r)).collect();
    if kept.is_empty() {
        isr.to_vec()
    } else {
        kept
    }
}

/// `unclean.leader.election.enable`: the topic's own value, else the cluster-wide
/// default set at runtime, else false. (Kafka's controller also consults its own node's
/// dynamic value between the two; here a decision depends on the image alone, not on
/// which node leads the quorum.)
pub(super) fn unclean_allowed(image: &MetadataImage, topic: &TopicImage) -> bool {
    const NAME: &str = "unclean.leader.election.enable";
    let cluster = || broker_config::set_values(image, None, NAME).into_iter().next().map(|(_, v)| v);
    topic.configs.get(NAME).or_else(cluster).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Broker `node` is fenced (missed its heartbeats) or shutting down: it leaves every ISR
/// (but the last member) and every partition it led gets a new leader from the ISR
/// among the brokers `alive` says are up (the broker itself counts as down).
pub fn remove_broker(image: &MetadataImage, node: i32, alive: &dyn Fn(i32) -> bool) -> Vec<MetadataRecord> {
    let eligible = |r: i32| r != node && alive(r);
    let gone = |r: i32| r == node;
    let mut out = Vec::new();
    for topic in image.topics.values() {
        for pi in topic.partitions.iter().filter(|p| p.replicas.contains(&node)) {
            let isr = shrink(&pi.isr, &gone);
            let target = elect(pi, isr, &eligible, unclean_allowed(image, topic));
            out.extend(record(topic.topic_id, pi, target));
        }
    }
    out
}

/// Broker `node` lost the log directory holding `partitions` (topic id, partition; the
/// others it hosts are untouched): as for a fenced broker, it leaves their ISRs and the
/// ones it led get a new leader from the ISR among the brokers `alive` says are up. Where
/// it led with no one else eligible, nothing changes: Kafka would leave the partition
/// leaderless, but the next heartbeat's election of leaderless partitions would choose
/// this broker again (it is alive, in the ISR), and it answers KAFKA_STORAGE_ERROR either
/// way, a retriable error, until its dir or another replica is back.
pub fn remove_offline_replicas(
    image: &MetadataImage,
    node: i32,
    partitions: &[(Uuid, i32)],
    alive: &dyn Fn(i32) -> bool,
) -> Vec<MetadataRecord> {
    let eligible = |r: i32| r != node && alive(r);
    let gone = |r: i32| r == node;
    let mut out = Vec::new();
    for (topic_id, partition) in partitions {
        let Some(topic) = image.topic_by_id(topic_id) else { continue };
        let Some(pi) = topic.partition(*partition) else { continue };
        if !pi.replicas.contains(&node) {
            continue;
        }
        let target = elect(pi, shrink(&pi.isr, &gone), &eligible, unclean_allowed(image, topic));
        if target.leader == NO_LEADER && pi.leader == node {
            continue;
        }
        out.extend(record(*topic_id, pi, target));
    }
    out
}

/// Partitions without a leader whose ISR (or, where the topic allows unclean election,
/// replica set) has a broker that is alive again: elect it.
pub fn elect_leaderless(image: &MetadataImage, alive: &dyn Fn(i32) -> bool) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for topic in image.topics.values() {
        for pi in topic.partitions.iter().filter(|p| p.leader == NO_LEADER) {
            let target = elect(pi, pi.isr.clone(), alive, unclean_allowed(image, topic));
            out.extend(record(topic.topic_id, pi, target));
        }
    }
    out
}

/// Which election ElectLeaders asks for (Kafka's `ElectionType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElectionType {
    /// Move leadership back to the first replica (the preferred leader).
    Preferred,
    /// Give a leaderless partition a leader, from outside the ISR if nothing else is
    /// left (records the ISR acknowledged may be lost).
    Unclean,
}

/// One partition of an ElectLeaders request (Kafka's `ReplicationControlManager.
/// electLeader`): the record that elects, or why there is none, named as Kafka's error
/// codes.
pub fn elect_requested(
    topic: &TopicImage,
    partition: i32,
    election: ElectionType,
    alive: &dyn Fn(i32) -> bool,
) -> Result<MetadataRecord, ElectionError> {
    let pi = topic.partition(partition).ok_or(ElectionError::UnknownPartition)?;
    let elected = match election {
        ElectionType::Preferred => {
            let preferred = *pi.replicas.first().ok_or(ElectionError::UnknownPartition)?;
            if pi.leader == preferred {
                return Err(ElectionError::ElectionNotNeeded);
            }
            if !pi.isr.contains(&preferred) || !alive(preferred) {
                return Err(ElectionError::PreferredLeaderNotAvailable);
            }
            Target { isr: pi.isr.clone(), leader: preferred }
        }
        ElectionType::Unclean => {
            if pi.leader != NO_LEADER {
                return Err(ElectionError::ElectionNotNeeded);
            }
            elect(pi, pi.isr.clone(), alive, true)
        }
    };
    match record(topic.topic_id, pi, elected) {
        Some(r) if !matches!(r, MetadataRecord::Partition { leader: NO_LEADER, .. }) => Ok(r),
        _ => Err(match election {
            ElectionType::Preferred => ElectionError::PreferredLeaderNotAvailable,
            ElectionType::Unclean => ElectionError::EligibleLeadersNotAvailable,
        }),
    }
}

/// Partitions led by another replica than their preferred one while the preferred one
/// could lead (alive and in the ISR): what Kafka's automatic leader rebalance elects
/// (`auto.leader.rebalance.enable`).
pub fn imbalanced(image: &MetadataImage, alive: &dyn Fn(i32) -> bool) -> Vec<(String, i32)> {
    image
        .topics
        .values()
        .flat_map(|t| {
            t.partitions.iter().filter_map(move |p| {
                let preferred = *p.replicas.first()?;
                (p.leader != preferred && p.isr.contains(&preferred) && alive(preferred))
                    .then(|| (t.name.clone(), p.partition))
            })
        })
        .collect()
}

/// The partitions an ElectLeaders request names, or every partition of `image` for a
/// request that names none.
pub fn election_targets(image: &MetadataImage, requested: Option<&[(String, i32)]>) -> Vec<(String, i32)> {
    match requested {
        Some(r) => r.to_vec(),
        None => {
            image.topics.values().flat_map(|t| t.partitions.iter().map(|p| (t.name.clone(), p.partition))).collect()
        }
    }
}

/// Each requested partition's answer, once the leader's records for the request are
/// known: elected when a record names it, otherwise why not (judged on the image the
/// request was decided against). A request for every partition leaves out those that
/// needed no election, as Kafka does.
pub fn election_outcomes(
    image: &MetadataImage,
    election: ElectionType,
    requested: Option<&[(String, i32)]>,
    records: &[MetadataRecord],
) -> Vec<(String, i32, Result<(), ElectionError>)> {
    let elected = |topic: &str, partition: i32| {
        let id = image.topic(topic).map(|t| t.topic_id);
        records.iter().any(|r| {
            matches!(r, MetadataRecord::Partition { topic_id, partition: p, .. } if Some(*topic_id) == id && *p == partition)
        })
    };
    election_targets(image, requested)
        .into_iter()
        .filter_map(|(topic, partition)| {
            let outcome = if elected(&topic, partition) {
                Ok(())
            } else {
                // With nobody alive, the reason left is the one that held.
                match image.topic(&topic) {
                    Some(t) => elect_requested(t, partition, election, &|_| false).map(drop),
                    None => Err(ElectionError::UnknownPartition),
                }
            };
            let skip = requested.is_none() && outcome == Err(ElectionError::ElectionNotNeeded);
            (!skip).then_some((topic, partition, outcome))
        })
        .collect()
}

/// Why ElectLeaders elected nothing for a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionError {
    /// UNKNOWN_TOPIC_OR_PARTITION
    UnknownPartition,
    /// ELECTION_NOT_NEEDED: the preferred replica leads already (PREFERRED), or the
    /// partition has a leader (UNCLEAN).
    ElectionNotNeeded,
    /// PREFERRED_LEADER_NOT_AVAILABLE: the preferred replica is down or out of the ISR.
    PreferredLeaderNotAvailable,
    /// ELIGIBLE_LEADERS_NOT_AVAILABLE: no replica is alive.
    EligibleLeadersNotAvailable,
}

/// A leader's AlterPartition proposal: replace the ISR of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrProposal {
    pub broker: i32,
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
}

/// Why an AlterPartition is refused, named as Kafka's error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlterPartitionError {
    UnknownTopicOrPartition,
    /// The sender does not lead the partition (NOT_LEADER_OR_FOLLOWER).
    NotLeader,
    /// The sender's leader epoch is not the current one.
    FencedLeaderEpoch,
    /// The proposal was made against an older partition epoch (INVALID_UPDATE_VERSION).
    InvalidUpdateVersion,
    /// A proposed ISR member is not a replica, or is fenced (INELIGIBLE_REPLICA).
    IneligibleReplica,
    /// The ISR leaves out the leader (INVALID_REQUEST).
    InvalidRequest,
}

/// Validate an AlterPartition against the image. Ok(None): the ISR already is the
/// proposal (a retry of a committed change); Ok(Some(record)): commit it.
pub fn alter_partition(
    image: &MetadataImage,
    p: &IsrProposal,
    alive: &dyn Fn(i32) -> bool,
) -> Result<Option<MetadataRecord>, AlterPartitionError> {
    let topic = image.topic_by_id(&p.topic_id).ok_or(AlterPartitionError::UnknownTopicOrPartition)?;
    let pi = topic.partition(p.partition).ok_or(AlterPartitionError::UnknownTopicOrPartition)?;
    if pi.leader != p.broker {
        return Err(AlterPartitionError::NotLeader);
    }
    if p.leader_epoch != pi.leader_epoch {
        return Err(AlterPartitionError::FencedLeaderEpoch);
    }
    let mut isr = p.new_isr.clone();
    isr.sort_unstable();
    isr.dedup();
    let mut current = pi.isr.clone();
    current.sort_unstable();
    if p.partition_epoch != pi.partition_epoch {
        // A retry whose change already committed is answered with the current state.
        return if isr == current { Ok(None) } else { Err(AlterPartitionError::InvalidUpdateVersion) };
    }
    if !isr.contains(&p.broker) {
        return Err(AlterPartitionError::InvalidRequest);
    }
    // A broker may join the ISR only if it is a live replica; members already in it stay
    // eligible to remain (the leader shrinks them out itself).
    if isr.iter().any(|r| !pi.replicas.contains(r) || (!pi.isr.contains(r) && !alive(*r))) {
        return Err(AlterPartitionError::IneligibleReplica);
    }
    // Keep assignment order, as Kafka lists ISR members.
    let ordered: Vec<i32> = pi.replicas.iter().copied().filter(|r| isr.contains(r)).collect();
    Ok(record(topic.topic_id, pi, Target { isr: ordered, leader: pi.leader }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;

    const T: Uuid = Uuid::from_u128(7);

    fn image(parts: &[(&[i32], &[i32], i32)], configs: &[(&str, &str)]) -> MetadataImage {
        let mut img = MetadataImage::default();
        let topic = TopicImage {
            name: "t".into(),
            topic_id: T,
            partitions: parts
                .iter()
                .enumerate()
                .map(|(i, (replicas, isr, leader))| PartitionImage {
                    partition: i as i32,
                    replicas: replicas.to_vec(),
                    isr: isr.to_vec(),
                    leader: *leader,
                    leader_epoch: 5,
                    partition_epoch: 9,
                    adding_replicas: vec![],
                    removing_replicas: vec![],
                })
                .collect(),
            configs: configs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        };
        img.topic_names_by_id.insert(T, "t".into());
        img.topics.insert("t".into(), Arc::new(topic));
        img
    }

    fn parts(records: &[MetadataRecord]) -> Vec<(i32, Vec<i32>, i32, i32, i32)> {
        records
            .iter()
            .map(|r| match r {
                MetadataRecord::Partition { partition, isr, leader, leader_epoch, partition_epoch, .. } => {
                    (*partition, isr.clone(), *leader, *leader_epoch, *partition_epoch)
                }
                other => panic!("unexpected record {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_fenced_leader_is_replaced_from_the_isr_in_assignment_order() {
        let img = image(&[(&[1, 2, 3], &[1, 3, 2], 1), (&[2, 1, 3], &[2, 1, 3], 2), (&[2, 3], &[2, 3], 2)], &[]);
        let recs = remove_broker(&img, 1, &|_| true);
        // p0: new leader 2 (first replica in order), epoch bumped; p1: 1 leaves the ISR,
        // leader stays (epoch kept); p2 does not involve broker 1.
        assert_eq!(parts(&recs), vec![(0, vec![3, 2], 2, 6, 10), (1, vec![2, 3], 2, 5, 10)]);
    }

    #[test]
    fn the_last_isr_member_stays_and_the_partition_goes_leaderless() {
        let img = image(&[(&[1, 2], &[1], 1)], &[]);
        let recs = remove_broker(&img, 1, &|_| true);
        assert_eq!(parts(&recs), vec![(0, vec![1], NO_LEADER, 6, 10)]);
    }

    #[test]
    fn only_live_isr_members_are_elected() {
        let img = image(&[(&[1, 2, 3], &[1, 2, 3], 1)], &[]);
        let recs = remove_broker(&img, 1, &|r| r != 2);
        assert_eq!(parts(&recs), vec![(0, vec![2, 3], 3, 6, 10)]);
    }

    #[test]
    fn unclean_election_only_when_the_topic_allows_it() {
        let clean = image(&[(&[1, 2], &[1], 1)], &[]);
        assert_eq!(parts(&remove_broker(&clean, 1, &|_| true))[0].2, NO_LEADER);
        let unclean = image(&[(&[1, 2], &[1], 1)], &[("unclean.leader.election.enable", "true")]);
        assert_eq!(parts(&remove_broker(&unclean, 1, &|_| true)), vec![(0, vec![2], 2, 6, 10)]);
    }

    #[test]
    fn the_cluster_wide_default_allows_unclean_election_unless_the_topic_says_no() {
        let default = |configs: &[(&str, &str)], resource: &str| {
            let mut img = image(&[(&[1, 2], &[1], 1)], configs);
            img.apply(&MetadataRecord::BrokerConfig {
                resource: resource.into(),
                name: "unclean.leader.election.enable".into(),
                value: Some("TRUE".into()),
            });
            parts(&remove_broker(&img, 1, &|_| true))[0].2
        };
        assert_eq!(default(&[], ""), 2);
        assert_eq!(default(&[("unclean.leader.election.enable", "false")], ""), NO_LEADER);
        // One broker's value is that broker's, not the controller's.
        assert_eq!(default(&[], "2"), NO_LEADER);
    }

    #[test]
    fn a_returning_isr_member_leads_a_leaderless_partition() {
        let img = image(&[(&[1, 2], &[1], NO_LEADER), (&[2, 1], &[2], 2)], &[]);
        assert!(elect_leaderless(&img, &|r| r == 2).is_empty());
        assert_eq!(parts(&elect_leaderless(&img, &|r| r == 1)), vec![(0, vec![1], 1, 6, 10)]);
    }

    #[test]
    fn preferred_election() {
        use ElectionError::*;
        use ElectionType::Preferred;
        let img = image(&[(&[1, 2], &[1, 2], 2), (&[1, 2], &[2], 2), (&[1, 2], &[1, 2], 1)], &[]);
        let t = img.topic("t").unwrap();
        assert_eq!(parts(&[elect_requested(t, 0, Preferred, &|_| true).unwrap()]), vec![(0, vec![1, 2], 1, 6, 10)]);
        assert_eq!(elect_requested(t, 0, Preferred, &|r| r != 1), Err(PreferredLeaderNotAvailable));
        assert_eq!(elect_requested(t, 1, Preferred, &|_| true), Err(PreferredLeaderNotAvailable));
        assert_eq!(elect_requested(t, 2, Preferred, &|_| true), Err(ElectionNotNeeded));
        assert_eq!(elect_requested(t, 9, Preferred, &|_| true), Err(UnknownPartition));
        assert_eq!(elect_requested(t, -1, Preferred, &|_| true), Err(UnknownPartition));
    }

    #[test]
    fn unclean_election_by_request_ignores_the_topic_config() {
        use ElectionError::*;
        use ElectionType::Unclean;
        let img = image(&[(&[1, 2, 3], &[1], NO_LEADER), (&[1, 2], &[1, 2], 1), (&[1, 2], &[1], NO_LEADER)], &[]);
        let t = img.topic("t").unwrap();
        // The ISR member first when it is back; else any live replica, alone in the ISR.
        assert_eq!(parts(&[elect_requested(t, 0, Unclean, &|_| true).unwrap()]), vec![(0, vec![1], 1, 6, 10)]);
        assert_eq!(parts(&[elect_requested(t, 0, Unclean, &|r| r == 3).unwrap()]), vec![(0, vec![3], 3, 6, 10)]);
        assert_eq!(elect_requested(t, 1, Unclean, &|_| true), Err(ElectionNotNeeded));
        assert_eq!(elect_requested(t, 2, Unclean, &|_| false), Err(EligibleLeadersNotAvailable));
    }

    #[test]
    fn election_outcomes_name_every_requested_partition() {
        use ElectionError::*;
        let img = image(&[(&[1, 2], &[1, 2], 2), (&[1, 2], &[1, 2], 1), (&[1, 2], &[2], 2)], &[]);
        let records: Vec<_> = (0..3)
            .filter_map(|p| elect_requested(img.topic("t").unwrap(), p, ElectionType::Preferred, &|_| true).ok())
            .collect();
        let asked = vec![("t".to_string(), 0), ("t".to_string(), 1), ("t".to_string(), 2), ("u".to_string(), 0)];
        let got = election_outcomes(&img, ElectionType::Preferred, Some(&asked), &records);
        let codes: Vec<_> = got.iter().map(|(t, p, o)| (t.as_str(), *p, *o)).collect();
        assert_eq!(
            codes,
            vec![
                ("t", 0, Ok(())),
                ("t", 1, Err(ElectionNotNeeded)),
                ("t", 2, Err(PreferredLeaderNotAvailable)),
                ("u", 0, Err(UnknownPartition))
            ]
        );
        // For every partition: those that needed nothing are left out.
        let all = election_outcomes(&img, ElectionType::Preferred, None, &records);
        assert_eq!(all.iter().map(|(_, p, _)| *p).collect::<Vec<_>>(), vec![0, 2]);
    }

    #[test]
    fn imbalanced_partitions_are_those_a_preferred_election_would_move() {
        let img = image(&[(&[1, 2], &[1, 2], 2), (&[1, 2], &[2], 2), (&[1, 2], &[1, 2], 1)], &[]);
        assert_eq!(imbalanced(&img, &|_| true), vec![("t".to_string(), 0)]);
        assert!(imbalanced(&img, &|r| r != 1).is_empty());
    }

    fn proposal(broker: i32, leader_epoch: i32, partition_epoch: i32, isr: &[i32]) -> IsrProposal {
        IsrProposal { broker, topic_id: T, partition: 0, leader_epoch, partition_epoch, new_isr: isr.to_vec() }
    }

    #[test]
    fn alter_partition_checks_the_sender_and_the_epochs() {
        use AlterPartitionError::*;
        let img = image(&[(&[1, 2, 3], &[1, 2], 1)], &[]);
        let alive = |r: i32| r != 3;
        assert_eq!(alter_partition(&img, &proposal(2, 5, 9, &[1, 2]), &alive), Err(NotLeader));
        assert_eq!(alter_partition(&img, &proposal(1, 4, 9, &[1]), &alive), Err(FencedLeaderEpoch));
        assert_eq!(alter_partition(&img, &proposal(1, 5, 8, &[1]), &alive), Err(InvalidUpdateVersion));
        assert_eq!(alter_partition(&img, &proposal(1, 5, 9, &[2]), &alive), Err(InvalidRequest));
        assert_eq!(alter_partition(&img, &proposal(1, 5, 9, &[1, 2, 3]), &alive), Err(IneligibleReplica));
        assert_eq!(alter_partition(&img, &proposal(1, 5, 9, &[1, 4]), &|_| true), Err(IneligibleReplica));
        let mut missing = proposal(1, 5, 9, &[1]);
        missing.partition = 3;
        assert_eq!(alter_partition(&img, &missing, &alive), Err(UnknownTopicOrPartition));
    }

    #[test]
    fn alter_partition_shrinks_and_expands_keeping_the_leader_epoch() {
        let img = image(&[(&[1, 2, 3], &[1, 2], 1)], &[]);
        let shrink = alter_partition(&img, &proposal(1, 5, 9, &[1]), &|_| true).unwrap().unwrap();
        assert_eq!(parts(&[shrink]), vec![(0, vec![1], 1, 5, 10)]);
        let expand = alter_partition(&img, &proposal(1, 5, 9, &[3, 1, 2]), &|_| true).unwrap().unwrap();
        assert_eq!(parts(&[expand]), vec![(0, vec![1, 2, 3], 1, 5, 10)]);
        // A retry of a change that already committed (older partition epoch, same ISR).
        assert_eq!(alter_partition(&img, &proposal(1, 5, 8, &[2, 1]), &|_| true), Ok(None));
    }
}
