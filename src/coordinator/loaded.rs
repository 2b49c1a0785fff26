//! The partitions of `__consumer_offsets` this broker coordinates, each loading or serving
//! the groups that hash to it (Kafka's `CoordinatorRuntime` keeps one context per
//! partition, LOADING then ACTIVE). A partition is owned from its election (this broker
//! became its leader) until its resignation; its groups answer COORDINATOR_LOAD_IN_PROGRESS
//! until its log has been replayed, and NOT_COORDINATOR when it is not owned.
//!
//! Every load gets an id: a load that completes after its partition was resigned (or
//! elected again, in a later leader epoch) is dropped, and so is a decision whose records
//! were written under a load that is gone.

use std::collections::HashMap;

use super::group::GroupError;
use super::group_partition::partition_for;
use super::shard::Shard;

#[derive(Debug)]
enum Owned {
    Loading { load: u64, leader_epoch: i32 },
    Active { load: u64, leader_epoch: i32, shard: Shard },
}

impl Owned {
    fn leader_epoch(&self) -> i32 {
        match self {
            Owned::Loading { leader_epoch, .. } | Owned::Active { leader_epoch, .. } => *leader_epoch,
        }
    }
}

/// A load in progress: hand it back with the replayed shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    pub partition: i32,
    id: u64,
}

/// Where a group's decisions go: its partition, in the load that serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub partition: i32,
    load: u64,
}

#[derive(Debug)]
pub struct Partitions {
    /// Partitions of `__consumer_offsets`: what group ids hash over.
    count: i32,
    owned: HashMap<i32, Owned>,
    next_load: u64,
}

impl Partitions {
    pub fn new(count: i32) -> Partitions {
        Partitions { count: count.max(1), owned: HashMap::new(), next_load: 1 }
    }

    pub fn count(&self) -> i32 {
        self.count
    }

    pub fn partition_for(&self, group_id: &str) -> i32 {
        partition_for(group_id, self.count)
    }

    /// A different partition count moves groups between partitions: nothing owned under
    /// the old count stays. Returns the partitions that were owned.
    pub fn set_count(&mut self, count: i32) -> Vec<i32> {
        let count = count.max(1);
        if count == self.count {
            return vec![];
        }
        self.count = count;
        self.owned.drain().map(|(p, _)| p).collect()
    }

    /// This broker leads `partition` in `leader_epoch`: load it, unless it is loaded or
    /// loading in that epoch already. A new epoch starts over (the log may have changed
    /// under another leader meanwhile).
    pub fn elect(&mut self, partition: i32, leader_epoch: i32) -> Option<Load> {
        if self.owned.get(&partition).is_some_and(|o| o.leader_epoch() == leader_epoch) {
            return None;
        }
        let id = self.next_load;
        self.next_load += 1;
        self.owned.insert(partition, Owned::Loading { load: id, leader_epoch });
        Some(Load { partition, id })
    }

    /// The replay of `load` finished: its partition serves, if that load is still current.
    pub fn loaded(&mut self, load: Load, shard: Shard) -> bool {
        match self.owned.get(&load.partition) {
            Some(Owned::Loading { load: id, leader_epoch }) if *id == load.id => {
                let leader_epoch = *leader_epoch;
                self.owned.insert(load.partition, Owned::Active { load: load.id, leader_epoch, shard });
                true
            }
            _ => false,
        }
    }

    /// This broker no longer leads `partition`. Returns whether it owned it.
    pub fn resign(&mut self, partition: i32) -> bool {
        self.owned.remove(&partition).is_some()
    }

    /// `(partition, leader epoch)` of every partition loaded or loading.
    pub fn owned(&self) -> Vec<(i32, i32)> {
        let mut v: Vec<(i32, i32)> = self.owned.iter().map(|(p, o)| (*p, o.leader_epoch())).collect();
        v.sort_unstable();
        v
    }

    pub fn is_loading(&self) -> bool {
        self.owned.values().any(|o| matches!(o, Owned::Loading { .. }))
    }

    /// The shard serving `group_id`, or why there is none here.
    pub fn route(&self, group_id: &str) -> Result<(Route, &Shard), GroupError> {
        let partition = self.partition_for(group_id);
        match self.owned.get(&partition) {
            Some(Owned::Active { load, shard, .. }) => Ok((Route { partition, load: *load }, shard)),
            Some(Owned::Loading { .. }) => Err(GroupError::CoordinatorLoadInProgress),
            None => Err(GroupError::NotCoordinator),
        }
    }

    pub fn route_mut(&mut self, group_id: &str) -> Result<&mut Shard, GroupError> {
        let partition = self.partition_for(group_id);
        match self.owned.get_mut(&partition) {
            Some(Owned::Active { shard, .. }) => Ok(shard),
            Some(Owned::Loading { .. }) => Err(GroupError::CoordinatorLoadInProgress),
            None => Err(GroupError::NotCoordinator),
        }
    }

    /// The shard a decision was routed to, if that load still serves.
    pub fn shard_mut(&mut self, route: Route) -> Option<&mut Shard> {
        match self.owned.get_mut(&route.partition) {
            Some(Owned::Active { load, shard, .. }) if *load == route.load => Some(shard),
            _ => None,
        }
    }

    /// Every serving shard, by partition.
    pub fn active(&self) -> impl Iterator<Item = (i32, &Shard)> {
        self.owned.iter().filter_map(|(p, o)| match o {
            Owned::Active { shard, .. } => Some((*p, shard)),
            Owned::Loading { .. } => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::group::GroupLimits;

    fn shard() -> Shard {
        Shard::new(GroupLimits::default(), 1000)
    }

    #[test]
    fn a_partition_loads_then_serves_its_groups_only() {
        let mut ps = Partitions::new(50);
        // "g" hashes to 3, "g1" to 42.
        assert_eq!(ps.route("g").err(), Some(GroupError::NotCoordinator));
        let load = ps.elect(3, 7).unwrap();
        assert_eq!(ps.elect(3, 7), None, "already loading in this epoch");
        assert_eq!(ps.route("g").err(), Some(GroupError::CoordinatorLoadInProgress));
        assert!(ps.is_loading());
        assert!(ps.loaded(load, shard()));
        assert_eq!(ps.route("g").unwrap().0.partition, 3);
        assert_eq!(ps.route("g1").err(), Some(GroupError::NotCoordinator));
        assert_eq!(ps.owned(), vec![(3, 7)]);
    }

    #[test]
    fn a_load_overtaken_by_resignation_or_a_new_epoch_is_dropped() {
        let mut ps = Partitions::new(50);
        let first = ps.elect(3, 1).unwrap();
        let second = ps.elect(3, 2).unwrap();
        assert!(!ps.loaded(first, shard()), "epoch 1's load is stale");
        assert!(ps.loaded(second, shard()));
        let (route, _) = ps.route("g").unwrap();
        assert!(ps.resign(3));
        let third = ps.elect(3, 3).unwrap();
        assert!(ps.loaded(third, shard()));
        assert!(ps.shard_mut(route).is_none(), "a decision routed before the resignation lands nowhere");
    }

    #[test]
    fn a_new_partition_count_drops_everything_owned() {
        let mut ps = Partitions::new(50);
        let load = ps.elect(3, 0).unwrap();
        ps.loaded(load, shard());
        assert!(ps.set_count(50).is_empty());
        assert_eq!(ps.set_count(1), vec![3]);
        assert!(ps.owned().is_empty());
        assert_eq!(ps.partition_for("g"), 0);
    }
}
