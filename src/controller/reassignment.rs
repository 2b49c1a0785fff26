//! Partition reassignment (Kafka's AlterPartitionReassignments): pure decisions from a
//! partition's image to the record that starts, completes or cancels a reassignment.
//!
//! Kafka's rules (`ReplicationControlManager`, `PartitionReassignmentReplicas`,
//! `PartitionReassignmentRevert`):
//! * starting moves the partition to `target ++ (replicas − target)`: the new replicas
//!   join as `adding` (they fetch from the leader like any follower, outside the ISR), the
//!   ones leaving stay as `removing` until the new ones caught up, and the leader stays;
//! * it completes once every adding replica is in the ISR and the ISR keeps a target
//!   replica: the replicas become the target, the ISR loses the removed ones, and a leader
//!   that is not a target replica hands over to the first live target replica in the ISR.
//!   So no acknowledged record depends on a replica that leaves before the others have
//!   it. A broker that is no longer a replica deletes its copy;
//! * cancelling (no target) goes back to the original replicas (`replicas − adding`, in
//!   that order, as Kafka's revert does), and the ISR loses the adding ones. If that
//!   would leave it empty (only adding replicas were in sync), the cancel needs an
//!   unclean election: refused unless the topic allows it, and then the first live
//!   original replica (else the first) becomes the ISR alone, as Kafka's revert does;
//! * a new target while one runs starts from the replicas the partition has now, the
//!   running move's adding ones included (KRaft's `changePartitionReassignment`; the
//!   ZooKeeper controller reverted first). Nothing leaves at once, so the leader and the
//!   ISR stay valid: going back to the original replicas first could leave a leader that
//!   was one of the adding replicas leading a partition it is no longer a replica of.
//!
//! Whatever the change, the leader ends up a live member of both the replicas and the
//! ISR, or there is none (Kafka's `PartitionChangeBuilder` elects whenever the leader
//! would leave the ISR).

use std::collections::HashSet;

use super::image::{PartitionImage, TopicImage};
use super::partition_change::{change_record, NO_LEADER};
use super::records::MetadataRecord;

/// Why a reassignment request for a partition is refused, named as Kafka's error codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReassignmentError {
    /// UNKNOWN_TOPIC_OR_PARTITION
    UnknownPartition,
    /// INVALID_REPLICA_ASSIGNMENT
    InvalidAssignment(String),
    /// INVALID_REPLICATION_FACTOR: the target changes the replica count while the
    /// request does not allow it (v1 `allow_replication_factor_change=false`).
    ReplicationFactorChange,
    /// NO_REASSIGNMENT_IN_PROGRESS: a cancellation with nothing to cancel.
    NoReassignmentInProgress,
}

/// The replicas a partition had before its reassignment (itself when none runs).
fn original(pi: &PartitionImage) -> Vec<i32> {
    pi.replicas.iter().copied().filter(|r| !pi.adding_replicas.contains(r)).collect()
}

fn minus(a: &[i32], b: &[i32]) -> Vec<i32> {
    a.iter().copied().filter(|r| !b.contains(r)).collect()
}

/// A partition's next state, before it is a record.
struct Next {
    replicas: Vec<i32>,
    isr: Vec<i32>,
    leader: i32,
    adding: Vec<i32>,
    removing: Vec<i32>,
}

impl Next {
    fn of(pi: &PartitionImage) -> Next {
        Next {
            replicas: pi.replicas.clone(),
            isr: pi.isr.clone(),
            leader: pi.leader,
            adding: pi.adding_replicas.clone(),
            removing: pi.removing_replicas.clone(),
        }
    }

    /// A leader that is not among `replicas` and in the ISR (and alive) hands over to the
    /// first one that is.
    fn keep_or_elect_leader(&mut self, alive: &dyn Fn(i32) -> bool) {
        let eligible = |r: i32| self.replicas.contains(&r) && self.isr.contains(&r) && alive(r);
        if self.leader == NO_LEADER || !eligible(self.leader) {
            self.leader = self.replicas.iter().copied().find(|r| eligible(*r)).unwrap_or(NO_LEADER);
        }
    }

    /// Completes the reassignment if every adding replica is in the ISR and the ISR
    /// keeps a target replica (Kafka's `maybeCompleteReassignment`).
    fn try_complete(&mut self, alive: &dyn Fn(i32) -> bool) {
        if self.adding.is_empty() && self.removing.is_empty() {
            return;
        }
        let target = minus(&self.replicas, &self.removing);
        let isr: Vec<i32> = self.isr.iter().copied().filter(|r| target.contains(r)).collect();
        if !self.adding.iter().all(|r| self.isr.contains(r)) || isr.is_empty() {
            return;
        }
        let ordered: Vec<i32> = target.iter().copied().filter(|r| isr.contains(r)).collect();
        *self = Next { replicas: target, isr: ordered, leader: self.leader, adding: vec![], removing: vec![] };
        self.keep_or_elect_leader(alive);
    }

    fn record(self, topic_id: uuid::Uuid, pi: &PartitionImage) -> Option<MetadataRecord> {
        let next = PartitionImage {
            replicas: self.replicas,
            isr: self.isr,
            leader: self.leader,
            adding_replicas: self.adding,
            removing_replicas: self.removing,
            ..pi.clone()
        };
        change_record(topic_id, pi, next)
    }
}

/// One partition of an AlterPartitionReassignments request: `target` replicas, or `None`
/// to cancel. `registered`: the broker id is known to the cluster; `alive`: it may lead;
/// `unclean`: the topic allows unclean election (`unclean.leader.election.enable`).
/// `Ok(None)`: nothing to change (the partition already has the target replicas).
pub fn alter(
    topic: &TopicImage,
    partition: i32,
    target: Option<&[i32]>,
    allow_replication_factor_change: bool,
    (registered, alive): (&dyn Fn(i32) -> bool, &dyn Fn(i32) -> bool),
    unclean: bool,
) -> Result<Option<MetadataRecord>, ReassignmentError> {
    let pi = topic.partition(partition).ok_or(ReassignmentError::UnknownPartition)?;
    let Some(target) = target else {
        if !pi.is_reassigning() {
            return Err(ReassignmentError::NoReassignmentInProgress);
        }
        // Back to the original replicas (Kafka's revert). An ISR of adding replicas only
        // needs an unclean election: records only they have may be lost.
        let base = original(pi);
        let mut isr: Vec<i32> = pi.isr.iter().copied().filter(|r| base.contains(r)).collect();
        if isr.is_empty() {
            if !unclean {
                return Err(ReassignmentError::InvalidAssignment(format!(
                    "cannot cancel the reassignment of partition {partition}: no original replica is in sync, \
                     and the topic does not allow unclean leader election"
                )));
            }
            let Some(&first) = base.iter().find(|r| alive(**r)).or(base.first()) else {
                return Err(ReassignmentError::InvalidAssignment("no original replica to go back to".into()));
            };
            isr = vec![first];
        }
        let mut next = Next { isr, replicas: base, leader: pi.leader, adding: vec![], removing: vec![] };
        next.keep_or_elect_leader(alive);
        return Ok(next.record(topic.topic_id, pi));
    };
    validate(target, registered)?;
    // The replica count the partition is heading for (Kafka compares with
    // `replicas + adding − removing`).
    let heading_for = minus(&pi.replicas, &pi.removing_replicas).len();
    if !allow_replication_factor_change && target.len() != heading_for {
        return Err(ReassignmentError::ReplicationFactorChange);
    }
    let current = &pi.replicas;
    let mut replicas = target.to_vec();
    replicas.extend(minus(current, target));
    let mut next = Next {
        replicas,
        isr: pi.isr.clone(),
        leader: pi.leader,
        adding: minus(target, current),
        removing: minus(current, target),
    };
    next.try_complete(alive);
    next.keep_or_elect_leader(alive);
    Ok(next.record(topic.topic_id, pi))
}

/// After an ISR change of a reassigning partition (its new state in `pi`): the record
/// that completes the reassignment, if it can complete now.
pub fn complete_if_caught_up(
    topic_id: uuid::Uuid,
    pi: &PartitionImage,
    alive: &dyn Fn(i32) -> bool,
) -> Option<MetadataRecord> {
    let mut next = Next::of(pi);
    next.try_complete(alive);
    next.record(topic_id, pi)
}

fn validate(target: &[i32], registered: &dyn Fn(i32) -> bool) -> Result<(), ReassignmentError> {
    if target.is_empty() {
        return Err(ReassignmentError::InvalidAssignment("the target replica list is empty".into()));
    }
    let mut seen = HashSet::new();
    if let Some(dup) = target.iter().find(|r| !seen.insert(**r)) {
        return Err(ReassignmentError::InvalidAssignment(format!("broker {dup} appears twice in the target replicas")));
    }
    if let Some(unknown) = target.iter().find(|r| !registered(**r)) {
        return Err(ReassignmentError::InvalidAssignment(format!(
            "the target replicas include broker {unknown}, which is not registered"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use uuid::Uuid;

    use super::*;
    use crate::controller::image::MetadataImage;

    const T: Uuid = Uuid::from_u128(5);

    fn topic(replicas: &[i32], isr: &[i32], leader: i32, adding: &[i32], removing: &[i32]) -> TopicImage {
        TopicImage {
            name: "t".into(),
            topic_id: T,
            partitions: vec![PartitionImage {
                partition: 0,
                replicas: replicas.to_vec(),
                isr: isr.to_vec(),
                leader,
                leader_epoch: 3,
                partition_epoch: 7,
                adding_replicas: adding.to_vec(),
                removing_replicas: removing.to_vec(),
                elr: Vec::new(),
                last_known_elr: Vec::new(),
            }],
            configs: BTreeMap::new(),
        }
    }

    /// (replicas, isr, leader, leader epoch, adding, removing) of a record.
    fn state(r: &MetadataRecord) -> (Vec<i32>, Vec<i32>, i32, i32, Vec<i32>, Vec<i32>) {
        match r {
            MetadataRecord::Partition {
                replicas,
                isr,
                leader,
                leader_epoch,
                adding_replicas,
                removing_replicas,
                ..
            } => (
                replicas.clone(),
                isr.clone(),
                *leader,
                *leader_epoch,
                adding_replicas.clone(),
                removing_replicas.clone(),
            ),
            other => panic!("unexpected {other:?}"),
        }
    }

    fn apply(t: &TopicImage, r: &MetadataRecord) -> TopicImage {
        let mut img = MetadataImage::default();
        img.topic_names_by_id.insert(T, "t".into());
        img.topics.insert("t".into(), std::sync::Arc::new(t.clone()));
        img.apply(r);
        (**img.topic("t").unwrap()).clone()
    }

    const ANY: &dyn Fn(i32) -> bool = &|_| true;

    #[test]
    fn a_move_adds_first_and_removes_once_the_new_replicas_are_in_sync() {
        let t = topic(&[1, 2], &[1, 2], 1, &[], &[]);
        let start = alter(&t, 0, Some(&[2, 3]), true, (ANY, ANY), false).unwrap().unwrap();
        assert_eq!(state(&start), (vec![2, 3, 1], vec![1, 2], 1, 3, vec![3], vec![1]), "leader stays");
        let moving = apply(&t, &start);
        assert_eq!(complete_if_caught_up(T, &moving.partitions[0], ANY), None, "3 is not in sync yet");
        // The leader's AlterPartition lets 3 in: the reassignment completes, leadership
        // moves to the first target replica in the ISR, and 1 is gone.
        let mut caught_up = moving.partitions[0].clone();
        caught_up.isr = vec![1, 2, 3];
        let done = complete_if_caught_up(T, &caught_up, ANY).unwrap();
        assert_eq!(state(&done), (vec![2, 3], vec![2, 3], 2, 4, vec![], vec![]));
    }

    #[test]
    fn a_removal_or_reorder_completes_at_once() {
        let t = topic(&[1, 2, 3], &[1, 2, 3], 1, &[], &[]);
        let shrink = alter(&t, 0, Some(&[2, 3]), true, (ANY, ANY), false).unwrap().unwrap();
        assert_eq!(state(&shrink), (vec![2, 3], vec![2, 3], 2, 4, vec![], vec![]));
        let reorder = alter(&t, 0, Some(&[3, 1, 2]), true, (ANY, ANY), false).unwrap().unwrap();
        assert_eq!(state(&reorder), (vec![3, 1, 2], vec![1, 2, 3], 1, 3, vec![], vec![]), "leader kept");
        assert_eq!(alter(&t, 0, Some(&[1, 2, 3]), true, (ANY, ANY), false), Ok(None));
    }

    /// Kafka's controller bumps the leader epoch when a replica leaves, so that the
    /// removed replica's fetches (it may not have applied its removal yet) are fenced.
    #[test]
    fn a_replica_leaving_moves_the_leader_epoch_though_the_leader_stays() {
        let t = topic(&[1, 2, 3], &[1, 2, 3], 1, &[], &[]);
        let r = alter(&t, 0, Some(&[1, 2]), true, (ANY, ANY), false).unwrap().unwrap();
        assert_eq!(state(&r), (vec![1, 2], vec![1, 2], 1, 4, vec![], vec![]));
        // Adding one keeps the epoch until the move completes and removes nothing.
        let grow = alter(&t, 0, Some(&[1, 2, 3, 4]), true, (ANY, ANY), false).unwrap().unwrap();
        assert_eq!(state(&grow), (vec![1, 2, 3, 4], vec![1, 2, 3], 1, 3, vec![4], vec![]));
    }

    #[test]
    fn cancel_reverts_and_a_new_target_starts_from_the_current_replicas() {
        let moving = topic(&[2, 3, 1], &[1, 2], 1, &[3], &[1]);
        // The original replicas in their merged order, as Kafka's revert keeps them.
        // 3 leaves the replicas: a new leader epoch, though 1 leads on.
        let cancel = alter(&moving, 0, None, true, (ANY, ANY), false).unwrap().unwrap();
        assert_eq!(state(&cancel), (vec![2, 1], vec![1, 2], 1, 4, vec![], vec![]));
        // KRaft's rule: 3, still being added, stays a replica until the new move is done.
        let other = alter(&moving, 0, Some(&[1, 4]), true, (ANY, ANY), false).unwrap().unwrap();
        assert_eq!(state(&other), (vec![1, 4, 2, 3], vec![1, 2], 1, 3, vec![4], vec![2, 3]));
        let idle = topic(&[1, 2], &[1, 2], 1, &[], &[]);
        assert_eq!(alter(&idle, 0, None, true, (ANY, ANY), false), Err(ReassignmentError::NoReassignmentInProgress));
        let only_adding_in_sync = topic(&[2, 3, 1], &[3], 3, &[3], &[1]);
        assert!(matches!(
            alter(&only_adding_in_sync, 0, None, true, (ANY, ANY), false),
            Err(ReassignmentError::InvalidAssignment(_))
        ));
    }

    /// Kafka's revert when only adding replicas are in sync: allowed where the topic
    /// allows unclean election, with the first live original replica as the ISR alone.
    #[test]
    fn a_cancel_that_needs_an_unclean_election_is_allowed_only_where_the_topic_allows_it() {
        let only_adding_in_sync = topic(&[2, 3, 1], &[3], 3, &[3], &[1]);
        let cancel = alter(&only_adding_in_sync, 0, None, true, (ANY, ANY), true).unwrap().unwrap();
        assert_eq!(state(&cancel), (vec![2, 1], vec![2], 2, 4, vec![], vec![]));
        let two_down = alter(&only_adding_in_sync, 0, None, true, (ANY, &|r| r != 2), true).unwrap().unwrap();
        assert_eq!(state(&two_down), (vec![2, 1], vec![1], 1, 4, vec![], vec![]));
        let all_down = alter(&only_adding_in_sync, 0, None, true, (ANY, &|_| false), true).unwrap().unwrap();
        assert_eq!(state(&all_down), (vec![2, 1], vec![2], NO_LEADER, 4, vec![], vec![]));
    }

    /// The case the replication simulation found: an adding replica that became leader
    /// (it was in the ISR when the old leader died), then a new target without it. The
    /// ZooKeeper-style revert-then-apply left it leading a partition it was no longer a
    /// replica of (it deleted its copy), with an ISR that did not name it.
    #[test]
    fn a_new_target_never_leaves_a_leader_outside_the_replicas_or_the_isr() {
        let moving = topic(&[4, 2, 3, 1], &[3, 1], 3, &[4, 3], &[1]);
        let r = alter(&moving, 0, Some(&[4, 1, 2]), true, (ANY, ANY), false).unwrap().unwrap();
        let (replicas, isr, leader, epoch, adding, removing) = state(&r);
        assert!(replicas.contains(&leader) && isr.contains(&leader), "{replicas:?} {isr:?} leader {leader}");
        assert!(isr.iter().all(|m| replicas.contains(m)), "{replicas:?} {isr:?}");
        assert_eq!((replicas, isr, leader, epoch, adding, removing), (vec![4, 1, 2], vec![1], 1, 4, vec![], vec![]));
        // Cancelling instead also moves leadership to an original replica in sync.
        let cancel = alter(&moving, 0, None, true, (ANY, ANY), false).unwrap().unwrap();
        assert_eq!(state(&cancel), (vec![2, 1], vec![1], 1, 4, vec![], vec![]));
    }

    #[test]
    fn bad_targets_are_refused() {
        let t = topic(&[1, 2], &[1, 2], 1, &[], &[]);
        let known = |r: i32| r <= 3;
        assert!(matches!(
            alter(&t, 0, Some(&[]), true, (&known, ANY), false),
            Err(ReassignmentError::InvalidAssignment(_))
        ));
        assert!(matches!(
            alter(&t, 0, Some(&[1, 1]), true, (&known, ANY), false),
            Err(ReassignmentError::InvalidAssignment(_))
        ));
        assert!(matches!(
            alter(&t, 0, Some(&[1, 9]), true, (&known, ANY), false),
            Err(ReassignmentError::InvalidAssignment(_))
        ));
        assert_eq!(
            alter(&t, 0, Some(&[1, 2, 3]), false, (&known, ANY), false),
            Err(ReassignmentError::ReplicationFactorChange)
        );
        assert_eq!(alter(&t, 1, Some(&[1]), true, (&known, ANY), false), Err(ReassignmentError::UnknownPartition));
    }

    #[test]
    fn a_dead_target_replica_does_not_lead() {
        let t = topic(&[1, 2, 3], &[1, 2, 3], 1, &[], &[]);
        let r = alter(&t, 0, Some(&[2, 3]), true, (ANY, &|r| r != 2), false).unwrap().unwrap();
        assert_eq!(state(&r).2, 3);
    }
}
