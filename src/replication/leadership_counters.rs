//! Counts of what the metadata did to the partitions this broker leads: ISR shrinks and
//! expands, and unclean leader elections that made this broker a leader. Read from the
//! metadata as it is applied (the ISR a partition had in the last applied metadata
//! against the new one), so a change counts once it is committed, on its leader only:
//! summed over the brokers, each change counts once in the cluster.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::controller::PartitionImage;

#[derive(Debug, Default)]
pub struct LeadershipCounters {
    isr_shrinks: AtomicU64,
    isr_expands: AtomicU64,
    unclean_elections: AtomicU64,
}

/// What this broker knew of a partition before a metadata change.
#[derive(Debug, Clone)]
pub struct Before {
    pub leading: bool,
    pub leader_epoch: i32,
    /// Empty when no metadata was applied to the partition yet (and, with KIP-966's
    /// eligible leader replicas, while it had no leader).
    pub isr: Vec<i32>,
    /// The replicas, as the same metadata gave them: empty when none was applied yet.
    pub replicas: Vec<i32>,
    /// The replicas the same metadata let lead cleanly from outside the ISR: its ELR and
    /// last known leader.
    pub eligible: Vec<i32>,
}

impl LeadershipCounters {
    /// A metadata change that names `me` the leader of `after`.
    pub fn on_leadership(&self, me: i32, before: &Before, after: &PartitionImage) {
        if before.replicas.is_empty() || after.leader != me {
            return;
        }
        if before.leading && before.leader_epoch == after.leader_epoch {
            // The same leadership with a new ISR: an AlterPartition (or the controller
            // fencing a follower) committed.
            if before.isr.iter().any(|r| !after.isr.contains(r)) {
                self.isr_shrinks.fetch_add(1, Ordering::Relaxed);
            }
            if after.isr.iter().any(|r| !before.isr.contains(r)) {
                self.isr_expands.fetch_add(1, Ordering::Relaxed);
            }
        } else if after.leader_epoch > before.leader_epoch
            && !before.isr.contains(&me)
            && !before.eligible.contains(&me)
            && before.replicas == after.replicas
        {
            // Elected from outside the ISR and the eligible leaders: only
            // `unclean.leader.election.enable` (or an UNCLEAN ElectLeaders) does that.
            // (Not when the replicas changed too: a reassignment that completes as its
            // last new replica joins the ISR may make that one leader in the same commit,
            // and an unclean election never changes the replicas.)
            self.unclean_elections.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn isr_shrinks(&self) -> u64 {
        self.isr_shrinks.load(Ordering::Relaxed)
    }

    pub fn isr_expands(&self) -> u64 {
        self.isr_expands.load(Ordering::Relaxed)
    }

    pub fn unclean_elections(&self) -> u64 {
        self.unclean_elections.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(leader: i32, leader_epoch: i32, isr: &[i32]) -> PartitionImage {
        PartitionImage {
            partition: 0,
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
            leader,
            leader_epoch,
            partition_epoch: 0,
            adding_replicas: vec![],
            removing_replicas: vec![],
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        }
    }

    fn before(leading: bool, leader_epoch: i32, isr: &[i32]) -> Before {
        let replicas = if leader_epoch < 0 { vec![] } else { vec![1, 2, 3] };
        Before { leading, leader_epoch, isr: isr.to_vec(), replicas, eligible: vec![] }
    }

    #[test]
    fn shrinks_and_expands_count_on_the_leader_in_the_same_epoch() {
        let c = LeadershipCounters::default();
        c.on_leadership(1, &before(true, 4, &[1, 2, 3]), &image(1, 4, &[1, 3]));
        c.on_leadership(1, &before(true, 4, &[1, 3]), &image(1, 4, &[1, 2, 3]));
        c.on_leadership(1, &before(true, 4, &[1, 2, 3]), &image(1, 4, &[1, 2, 3]));
        // Another broker's leadership, or a partition seen for the first time: nothing.
        c.on_leadership(1, &before(false, 4, &[2, 3]), &image(2, 4, &[2]));
        c.on_leadership(1, &before(false, -1, &[]), &image(1, 0, &[1]));
        assert_eq!((c.isr_shrinks(), c.isr_expands(), c.unclean_elections()), (1, 1, 0));
    }

    #[test]
    fn a_leader_from_outside_the_isr_is_an_unclean_election() {
        let c = LeadershipCounters::default();
        // Clean: 2 was in the ISR.
        c.on_leadership(2, &before(false, 4, &[1, 2]), &image(2, 5, &[2]));
        assert_eq!(c.unclean_elections(), 0);
        // Unclean: 3 was not.
        c.on_leadership(3, &before(false, 5, &[2]), &image(3, 6, &[3]));
        assert_eq!(c.unclean_elections(), 1);
        assert_eq!((c.isr_shrinks(), c.isr_expands()), (0, 0));
        // With the ISR empty: from the eligible leaders (ELR or last leader) is clean, from
        // anywhere else is not.
        let empty = Before { eligible: vec![2], ..before(false, 6, &[]) };
        c.on_leadership(2, &empty, &image(2, 7, &[2]));
        assert_eq!(c.unclean_elections(), 1);
        c.on_leadership(1, &empty, &image(1, 7, &[1]));
        assert_eq!(c.unclean_elections(), 2);
    }

    /// A move from [1, 2, 3] to [4, 2, 3] completes in the commit that lets 4 into the
    /// ISR, and makes 4, the first target replica, the leader: 4 last saw an ISR without
    /// itself, but the election was clean.
    #[test]
    fn a_reassignment_completing_with_its_new_replica_as_leader_is_no_unclean_election() {
        let c = LeadershipCounters::default();
        let moving = Before {
            leading: false,
            leader_epoch: 4,
            isr: vec![1, 2, 3],
            replicas: vec![4, 2, 3, 1],
            eligible: vec![],
        };
        let done = PartitionImage { replicas: vec![4, 2, 3], ..image(4, 5, &[2, 3, 4]) };
        c.on_leadership(4, &moving, &done);
        assert_eq!(c.unclean_elections(), 0);
    }
}
