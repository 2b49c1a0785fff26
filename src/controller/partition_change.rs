//! Leader and ISR decisions: pure functions from the image (and which brokers are alive)
//! to the partition records the controller commits. No I/O, no clock.
//!
//! Kafka's rules (`PartitionChangeBuilder`, `ReplicationControlManager`):
//! * a partition keeps its leader while the leader is alive and in the ISR; otherwise the
//!   first replica (in assignment order) that is alive and in the ISR leads; while the ISR
//!   is empty, the first alive eligible leader replica, else the last known leader
//!   (KIP-966, `eligible_leaders`); failing that, with `unclean.leader.election.enable`,
//!   the first alive replica (the ISR becomes that replica alone: records it never had may
//!   be lost, which is why it is off by default); failing that the partition has no leader
//!   (-1) until one of those comes back;
//! * a fenced or shutting-down broker leaves every ISR, into the ELR where the ISR is below
//!   `min.insync.replicas` (the ISR may become empty). Until every broker reads ELR
//!   records (a cluster upgrading from an older release) an ISR never becomes empty
//!   instead: its last member stays, so it can lead again when it returns with everything
//!   the ISR acknowledged;
//! * the leader epoch moves when the leader changes, and when a replica leaves the
//!   replicas (a reassignment: the removed replica's fetches are then fenced with
//!   FENCED_LEADER_EPOCH); the partition epoch moves on every change (AlterPartition
//!   requests carry it to detect stale proposals).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::broker_config;
use super::eligible_leaders::{self, ElrRules};
use super::image::{MetadataImage, PartitionImage, TopicImage};
use super::records::MetadataRecord;

/// No leader: every ISR member is offline (Kafka's `NO_LEADER`).
pub const NO_LEADER: i32 = -1;

/// A partition's replica set after a change, before it is a record.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    isr: Vec<i32>,
    leader: i32,
    elr: Vec<i32>,
    last_known_elr: Vec<i32>,
}

fn record(topic_id: Uuid, pi: &PartitionImage, target: Target) -> Option<MetadataRecord> {
    let Target { isr, leader, elr, last_known_elr } = target;
    change_record(topic_id, pi, PartitionImage { isr, leader, elr, last_known_elr, ..pi.clone() })
}

/// The record that moves `pi` to `next`'s replicas, ISR, leader, reassignment and
/// eligible leader replicas, unless none of them changes. The epochs are derived,
/// whatever `next` holds: the leader epoch moves with the leader and when a replica
/// leaves (Kafka's `triggerLeaderEpochBumpForReplicaReassignmentIfNeeded`), the partition
/// epoch on every change. A replica that leaves the replicas leaves the ELR too.
pub(super) fn change_record(topic_id: Uuid, pi: &PartitionImage, mut next: PartitionImage) -> Option<MetadataRecord> {
    next.elr.retain(|r| next.replicas.contains(r));
    next.last_known_elr.retain(|r| next.replicas.contains(r));
    let unchanged = next.replicas == pi.replicas
        && next.isr == pi.isr
        && next.leader == pi.leader
        && next.adding_replicas == pi.adding_replicas
        && next.removing_replicas == pi.removing_replicas
        && next.elr == pi.elr
        && next.last_known_elr == pi.last_known_elr;
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
        eligible_leader_replicas: next.elr,
        last_known_elr: next.last_known_elr,
    })
}

/// What decides a partition's change besides its state.
#[derive(Debug, Clone, Copy)]
struct Rules {
    elr: ElrRules,
    /// `unclean.leader.election.enable` (or an UNCLEAN ElectLeaders).
    unclean: bool,
}

fn rules(image: &MetadataImage, topic: &TopicImage, pi: &PartitionImage) -> Rules {
    Rules { elr: eligible_leaders::rules(image, topic, pi), unclean: unclean_allowed(image, topic) }
}

/// `pi` with its ISR becoming `isr`, and the leader that follows (Kafka's
/// `PartitionChangeBuilder.build`): the current leader if it may stay, else the first
/// eligible replica in assignment order that is in the ISR or, while the ISR is empty, in
/// the ELR (it becomes the ISR alone); else the last known leader while the ISR and ELR
/// are empty; unclean election (any eligible replica, alone in the ISR) only after all of
/// these. Without ELR an ISR never becomes empty: its last member stays, so it can lead
/// again when it returns with everything the ISR acknowledged.
fn decide(
    pi: &PartitionImage,
    rules: Rules,
    isr: Vec<i32>,
    eligible: &dyn Fn(i32) -> bool,
    unclean_shutdown: Option<i32>,
) -> Target {
    let isr = if isr.is_empty() && !rules.elr.enabled { pi.isr.clone() } else { isr };
    let elr = eligible_leaders::next_elr(pi, rules.elr, &isr, unclean_shutdown);
    let valid = |r: i32| (isr.contains(&r) || (isr.is_empty() && elr.contains(&r))) && eligible(r);
    let chosen = if pi.leader != NO_LEADER && valid(pi.leader) {
        Some(pi.leader)
    } else {
        pi.replicas.iter().copied().find(|r| valid(*r))
    };
    let (isr, leader, mut elr) = match chosen {
        Some(leader) if isr.contains(&leader) => (isr, leader, elr),
        Some(leader) => (vec![leader], leader, elr.into_iter().filter(|r| *r != leader).collect()),
        None => match eligible_leaders::last_known_leader(pi, &isr, &elr, eligible) {
            Some(leader) => (vec![leader], leader, elr),
            None => match pi.replicas.iter().copied().find(|r| rules.unclean && eligible(*r)) {
                Some(leader) => (vec![leader], leader, Vec::new()),
                None => (isr, NO_LEADER, elr),
            },
        },
    };
    if isr.len() >= rules.elr.min_isr {
        // An ELR member elected: the ISR it makes may be large enough for the high
        // watermark to move, past what the others hold. (Kafka keeps them here.)
        elr.clear();
    }
    let last_known_elr = eligible_leaders::next_last_known(pi, rules.elr, &isr, leader);
    Target { isr, leader, elr, last_known_elr }
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

fn without(isr: &[i32], node: i32) -> Vec<i32> {
    isr.iter().copied().filter(|r| *r != node).collect()
}

/// Broker `node` is fenced (missed its heartbeats) or shutting down: it leaves every ISR
/// (into the ELR where the ISR is below its minimum; without ELR the last member stays)
/// and every partition it led gets a new leader among the brokers `alive` says are up
/// (the broker itself counts as down).
pub fn remove_broker(image: &MetadataImage, node: i32, alive: &dyn Fn(i32) -> bool) -> Vec<MetadataRecord> {
    leave(image, node, alive, &|p| p.replicas.contains(&node), false)
}

/// A new process of broker `node` registered after an unclean shutdown (Kafka's
/// `handleBrokerUncleanShutdown`): its logs may have lost records that were not flushed,
/// so it leaves every ISR and ELR it is in. (It is fenced already: it leads nothing.)
/// Without ELR nothing changes: an ISR's last member stays, as before.
pub fn remove_unclean_shutdown(image: &MetadataImage, node: i32, alive: &dyn Fn(i32) -> bool) -> Vec<MetadataRecord> {
    if !eligible_leaders::enabled(image) {
        return Vec::new();
    }
    leave(image, node, alive, &|p| p.isr.contains(&node) || p.elr.contains(&node), true)
}

/// Broker `node` leaves the ISR of each partition `which` picks, and its leadership
/// (the broker itself counts as down); `unclean_shutdown`: it leaves the ELR too.
fn leave(
    image: &MetadataImage,
    node: i32,
    alive: &dyn Fn(i32) -> bool,
    which: &dyn Fn(&PartitionImage) -> bool,
    unclean_shutdown: bool,
) -> Vec<MetadataRecord> {
    let eligible = |r: i32| r != node && alive(r);
    let mut out = Vec::new();
    for topic in image.topics.values() {
        for pi in topic.partitions.iter().filter(|p| which(p)) {
            let target = decide(
                pi,
                rules(image, topic, pi),
                without(&pi.isr, node),
                &eligible,
                unclean_shutdown.then_some(node),
            );
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
    let mut out = Vec::new();
    for (topic_id, partition) in partitions {
        let Some(topic) = image.topic_by_id(topic_id) else { continue };
        let Some(pi) = topic.partition(*partition) else { continue };
        if !pi.replicas.contains(&node) {
            continue;
        }
        // Its log is unreadable: it is no eligible leader replica either.
        let target = decide(pi, rules(image, topic, pi), without(&pi.isr, node), &eligible, Some(node));
        if target.leader == NO_LEADER && pi.leader == node {
            continue;
        }
        out.extend(record(*topic_id, pi, target));
    }
    out
}

/// Partitions without a leader whose ISR (while it is empty: ELR, else the last known
/// leader; where the topic allows unclean election, replica set) has a broker that is
/// alive again: elect it.
pub fn elect_leaderless(image: &MetadataImage, alive: &dyn Fn(i32) -> bool) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for topic in image.topics.values() {
        for pi in topic.partitions.iter().filter(|p| p.leader == NO_LEADER) {
            let target = decide(pi, rules(image, topic, pi), pi.isr.clone(), alive, None);
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
    image: &MetadataImage,
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
            Target { isr: pi.isr.clone(), leader: preferred, elr: pi.elr.clone(), last_known_elr: Vec::new() }
        }
        ElectionType::Unclean => {
            if pi.leader != NO_LEADER {
                return Err(ElectionError::ElectionNotNeeded);
            }
            decide(pi, Rules { unclean: true, ..rules(image, topic, pi) }, pi.isr.clone(), alive, None)
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
                    Some(t) => elect_requested(image, t, partition, election, &|_| false).map(drop),
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
    let elr = eligible_leaders::next_elr(pi, eligible_leaders::rules(image, topic, pi), &ordered, None);
    Ok(record(topic.topic_id, pi, Target { isr: ordered, leader: pi.leader, elr, last_known_elr: Vec::new() }))
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
                    elr: Vec::new(),
                    last_known_elr: Vec::new(),
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

    /// (ISR, leader, ELR, last known ELR) of partition 0 after `records` apply.
    fn elr_state(img: &mut MetadataImage, records: &[MetadataRecord]) -> (Vec<i32>, i32, Vec<i32>, Vec<i32>) {
        records.iter().for_each(|r| img.apply(r));
        let p = img.topic("t").unwrap().partition(0).unwrap().clone();
        (p.isr, p.leader, p.elr, p.last_known_elr)
    }

    /// A broker of a release before ELR is registered: no ELR is kept.
    fn without_elr(img: &mut MetadataImage) {
        let old = MetadataRecord::RegisterBroker {
            node_id: 9,
            host: "h".into(),
            port: 1,
            rack: None,
            inter_broker: None,
            incarnation: None,
            metadata_format: 2,
        };
        img.apply(&old);
    }

    #[test]
    fn replicas_that_leave_an_isr_below_its_minimum_become_eligible_leaders() {
        let mut img = image(&[(&[1, 3, 4], &[3, 4], 3)], &[("min.insync.replicas", "2")]);
        // Both in-sync brokers are fenced at once (neither is alive for the other).
        let dead = |_: i32| false;
        let first = remove_broker(&img, 3, &dead);
        assert_eq!(elr_state(&mut img, &first), (vec![4], NO_LEADER, vec![3], vec![3]));
        let second = remove_broker(&img, 4, &dead);
        assert_eq!(elr_state(&mut img, &second), (vec![], NO_LEADER, vec![3, 4], vec![3]));
        // 4 comes back: it leads from the ELR, alone in the ISR; 3 stays eligible.
        let back = elect_leaderless(&img, &|r| r == 4);
        assert_eq!(elr_state(&mut img, &back), (vec![4], 4, vec![3], vec![]));
        // 3 catches up and joins: the ISR reaches its minimum and the ELR empties.
        let join = alter_partition(&img, &proposal_at(&img, 4, &[4, 3]), &|_| true).unwrap().unwrap();
        assert_eq!(elr_state(&mut img, &[join]), (vec![3, 4], 4, vec![], vec![]));
    }

    #[test]
    fn at_or_above_the_minimum_no_replica_outside_the_isr_is_eligible() {
        let mut img = image(&[(&[1, 2, 3], &[1, 2, 3], 1)], &[("min.insync.replicas", "2")]);
        let shrink = remove_broker(&img, 3, &|_| true);
        assert_eq!(elr_state(&mut img, &shrink), (vec![1, 2], 1, vec![], vec![]));
        let below = remove_broker(&img, 2, &|r| r == 1);
        assert_eq!(elr_state(&mut img, &below), (vec![1], 1, vec![2], vec![]));
        // The leader is fenced: the ISR empties, and 3 (out since before) is not eligible.
        let gone = remove_broker(&img, 1, &|r| r == 3);
        assert_eq!(elr_state(&mut img, &gone), (vec![], NO_LEADER, vec![1, 2], vec![1]));
        assert!(elect_leaderless(&img, &|r| r == 3).is_empty());
    }

    #[test]
    fn an_unclean_shutdown_leaves_the_elr_and_the_last_leader_returns() {
        let mut img = image(&[(&[1, 2], &[1], 1)], &[("min.insync.replicas", "2")]);
        let gone = remove_broker(&img, 1, &|_| false);
        assert_eq!(elr_state(&mut img, &gone), (vec![], NO_LEADER, vec![1], vec![1]));
        // A new process of 1 after an unclean shutdown: out of the ELR, still the last leader.
        let unclean = remove_unclean_shutdown(&img, 1, &|_| false);
        assert_eq!(elr_state(&mut img, &unclean), (vec![], NO_LEADER, vec![], vec![1]));
        // 2 was never in sync with it; 1 leads again once back, with what it has.
        assert!(elect_leaderless(&img, &|r| r == 2).is_empty());
        let back = elect_leaderless(&img, &|r| r == 1);
        assert_eq!(elr_state(&mut img, &back), (vec![1], 1, vec![], vec![]));
    }

    #[test]
    fn an_elected_eligible_replica_that_reaches_the_minimum_clears_the_others() {
        // ELR [1, 2] kept under min.insync.replicas=2 by a partition without a leader,
        // which keeps it when the minimum drops to 1 (nothing moves without a leader).
        let mut img = image(&[(&[1, 2, 3], &[1, 2], 1)], &[("min.insync.replicas", "2")]);
        let a = remove_broker(&img, 2, &|_| false);
        let a = {
            a.iter().for_each(|r| img.apply(r));
            remove_broker(&img, 1, &|_| false)
        };
        assert_eq!(elr_state(&mut img, &a), (vec![], NO_LEADER, vec![1, 2], vec![1]));
        img.apply(&MetadataRecord::TopicConfig {
            topic_id: T,
            name: "min.insync.replicas".into(),
            value: Some("1".into()),
        });
        // 1 leads, alone in the ISR: enough for its high watermark to move past what 2
        // holds, so 2 is no longer eligible.
        let back = elect_leaderless(&img, &|r| r == 1);
        assert_eq!(elr_state(&mut img, &back), (vec![1], 1, vec![], vec![]));
    }

    #[test]
    fn without_elr_an_isr_keeps_its_last_member() {
        let mut img = image(&[(&[1, 2], &[1, 2], 1)], &[("min.insync.replicas", "2")]);
        without_elr(&mut img);
        let a = remove_broker(&img, 2, &|r| r == 1);
        assert_eq!(elr_state(&mut img, &a), (vec![1], 1, vec![], vec![]));
        let b = remove_broker(&img, 1, &|_| false);
        assert_eq!(elr_state(&mut img, &b), (vec![1], NO_LEADER, vec![], vec![]));
        assert!(remove_unclean_shutdown(&img, 1, &|_| false).is_empty());
        assert!(b.iter().all(|r| r.format_level() == 0));
    }

    #[test]
    fn the_minimum_is_the_smallest_any_replica_may_lead_with() {
        let set = |img: &mut MetadataImage, resource: &str, v: &str| {
            img.apply(&MetadataRecord::BrokerConfig {
                resource: resource.into(),
                name: "min.insync.replicas".into(),
                value: Some(v.into()),
            })
        };
        let below_two = |img: &MetadataImage| {
            // ISR [1] of three: below a minimum of 2 (ELR [2]), not below 1 (no ELR).
            let mut img = img.clone();
            let a = remove_broker(&img, 2, &|_| true);
            elr_state(&mut img, &a).2 == vec![2]
        };
        let isr_of_two = || image(&[(&[1, 2, 3], &[1, 2], 1)], &[]);
        // No topic value, no dynamic default: a replica's static default is unknown: 1.
        assert!(!below_two(&isr_of_two()));
        let mut img = isr_of_two();
        set(&mut img, "", "2");
        assert!(below_two(&img), "the cluster-wide default");
        set(&mut img, "3", "1");
        assert!(!below_two(&img), "one replica's own default is lower");
        let topic = image(&[(&[1, 2, 3], &[1, 2], 1)], &[("min.insync.replicas", "2")]);
        assert!(below_two(&topic), "the topic's own value");
        // Capped at the replica count.
        let mut small = image(&[(&[1, 2], &[1, 2], 1)], &[("min.insync.replicas", "3")]);
        let a = remove_broker(&small, 2, &|_| true);
        assert_eq!(elr_state(&mut small, &a), (vec![1], 1, vec![2], vec![]));
    }

    fn proposal_at(img: &MetadataImage, broker: i32, isr: &[i32]) -> IsrProposal {
        let p = img.topic("t").unwrap().partition(0).unwrap();
        IsrProposal {
            broker,
            topic_id: T,
            partition: 0,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: isr.to_vec(),
        }
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
    fn without_elr_the_last_isr_member_stays_and_the_partition_goes_leaderless() {
        let mut img = image(&[(&[1, 2], &[1], 1)], &[]);
        without_elr(&mut img);
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
        assert_eq!(
            parts(&[elect_requested(&img, t, 0, Preferred, &|_| true).unwrap()]),
            vec![(0, vec![1, 2], 1, 6, 10)]
        );
        assert_eq!(elect_requested(&img, t, 0, Preferred, &|r| r != 1), Err(PreferredLeaderNotAvailable));
        assert_eq!(elect_requested(&img, t, 1, Preferred, &|_| true), Err(PreferredLeaderNotAvailable));
        assert_eq!(elect_requested(&img, t, 2, Preferred, &|_| true), Err(ElectionNotNeeded));
        assert_eq!(elect_requested(&img, t, 9, Preferred, &|_| true), Err(UnknownPartition));
        assert_eq!(elect_requested(&img, t, -1, Preferred, &|_| true), Err(UnknownPartition));
    }

    #[test]
    fn unclean_election_by_request_ignores_the_topic_config() {
        use ElectionError::*;
        use ElectionType::Unclean;
        let img = image(&[(&[1, 2, 3], &[1], NO_LEADER), (&[1, 2], &[1, 2], 1), (&[1, 2], &[1], NO_LEADER)], &[]);
        let t = img.topic("t").unwrap();
        // The ISR member first when it is back; else any live replica, alone in the ISR.
        assert_eq!(parts(&[elect_requested(&img, t, 0, Unclean, &|_| true).unwrap()]), vec![(0, vec![1], 1, 6, 10)]);
        assert_eq!(parts(&[elect_requested(&img, t, 0, Unclean, &|r| r == 3).unwrap()]), vec![(0, vec![3], 3, 6, 10)]);
        assert_eq!(elect_requested(&img, t, 1, Unclean, &|_| true), Err(ElectionNotNeeded));
        assert_eq!(elect_requested(&img, t, 2, Unclean, &|_| false), Err(EligibleLeadersNotAvailable));
    }

    #[test]
    fn election_outcomes_name_every_requested_partition() {
        use ElectionError::*;
        let img = image(&[(&[1, 2], &[1, 2], 2), (&[1, 2], &[1, 2], 1), (&[1, 2], &[2], 2)], &[]);
        let records: Vec<_> = (0..3)
            .filter_map(|p| elect_requested(&img, img.topic("t").unwrap(), p, ElectionType::Preferred, &|_| true).ok())
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
