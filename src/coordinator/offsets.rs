//! Committed offsets: the per-group maps that `__consumer_offsets` offset records build,
//! and the decisions about them (who may commit, what expires, what a delete removes).
//!
//! Invariant: the maps change only by [`CommittedOffsets::replay`] of a record, at load
//! and after the record was written, so they never hold an offset the log does not.

use std::collections::{BTreeMap, HashMap};

use super::group::{Group, GroupError, GroupState};
use super::offsets_codec::{CommittedOffset, OffsetsRecord};

/// Kafka's `offset.metadata.max.bytes` default.
pub const MAX_METADATA_BYTES: usize = 4096;

/// Who commits: member id, generation and static instance id, as the request gives them.
#[derive(Debug, Clone, Copy)]
pub struct MemberRef<'a> {
    pub member_id: &'a str,
    pub generation_id: i32,
    pub group_instance_id: Option<&'a str>,
}

impl MemberRef<'_> {
    /// A commit from outside any generation (manual assignment).
    pub fn simple() -> MemberRef<'static> {
        MemberRef { member_id: "", generation_id: -1, group_instance_id: None }
    }

    fn is_simple(&self) -> bool {
        self.generation_id < 0 && self.member_id.is_empty()
    }
}

/// One partition of an OffsetCommit, as the request gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct OffsetCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

/// Kafka's classic-group commit check (`ClassicGroup.validateOffsetCommit`): a simple
/// commit only while the group has no members; otherwise a current member of the current
/// generation, not while the group waits for its assignment.
pub fn validate_commit(group: &Group, member: MemberRef<'_>) -> Result<(), GroupError> {
    if member.is_simple() {
        return if group.is_empty() { Ok(()) } else { Err(GroupError::IllegalGeneration) };
    }
    if let Some(iid) = member.group_instance_id {
        let fenced = group.members.get(member.member_id).is_some_and(|m| m.group_instance_id.as_deref() != Some(iid));
        if fenced {
            return Err(GroupError::FencedInstanceId);
        }
    }
    if !group.members.contains_key(member.member_id) {
        return Err(GroupError::UnknownMemberId);
    }
    if member.generation_id != group.generation_id {
        return Err(GroupError::IllegalGeneration);
    }
    if group.state == GroupState::CompletingRebalance {
        return Err(GroupError::RebalanceInProgress);
    }
    Ok(())
}

type PartitionOffsets = BTreeMap<(String, i32), CommittedOffset>;

#[derive(Debug, Default)]
pub struct CommittedOffsets {
    by_group: HashMap<String, PartitionOffsets>,
}

fn tombstone(group: &str, topic: &str, partition: i32) -> OffsetsRecord {
    OffsetsRecord::Offset { group: group.to_owned(), topic: topic.to_owned(), partition, value: None }
}

impl CommittedOffsets {
    /// Apply one offset record (a `None` value deletes).
    pub fn replay(&mut self, group: String, topic: String, partition: i32, value: Option<CommittedOffset>) {
        match value {
            Some(v) => {
                self.by_group.entry(group).or_default().insert((topic, partition), v);
            }
            None => {
                if let Some(o) = self.by_group.get_mut(&group) {
                    o.remove(&(topic, partition));
                    if o.is_empty() {
                        self.by_group.remove(&group);
                    }
                }
            }
        }
    }

    pub fn has_group(&self, group: &str) -> bool {
        self.by_group.contains_key(group)
    }

    pub fn groups(&self) -> impl Iterator<Item = &String> {
        self.by_group.keys()
    }

    pub fn contains(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.by_group.get(group).is_some_and(|o| o.contains_key(&(topic.to_owned(), partition)))
    }

    /// Committed offsets of a group: for the given partitions, or all it has.
    pub fn fetch(
        &self,
        group: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Vec<(String, i32, Option<CommittedOffset>)> {
        let offsets = self.by_group.get(group);
        match partitions {
            Some(ps) => ps
                .iter()
                .map(|(t, p)| (t.clone(), *p, offsets.and_then(|o| o.get(&(t.clone(), *p)).cloned())))
                .collect(),
            None => offsets
                .map(|o| o.iter().map(|((t, p), v)| (t.clone(), *p, Some(v.clone()))).collect())
                .unwrap_or_default(),
        }
    }

    /// Tombstones for every offset of `group` (DeleteGroups).
    pub fn group_tombstones(&self, group: &str) -> Vec<OffsetsRecord> {
        self.by_group.get(group).map(|o| o.keys().map(|(t, p)| tombstone(group, t, *p)).collect()).unwrap_or_default()
    }

    /// The groups with a committed offset of `topic`.
    pub fn groups_with_topic(&self, topic: &str) -> Vec<String> {
        self.by_group.iter().filter(|(_, o)| o.keys().any(|(t, _)| t == topic)).map(|(g, _)| g.clone()).collect()
    }

    /// Tombstones for `group`'s offsets of `topic` (the topic was deleted).
    pub fn topic_tombstones(&self, group: &str, topic: &str) -> Vec<OffsetsRecord> {
        let Some(offsets) = self.by_group.get(group) else { return vec![] };
        offsets.keys().filter(|(t, _)| t == topic).map(|(t, p)| tombstone(group, t, *p)).collect()
    }

    /// The groups with an offset past retention (see [`CommittedOffsets::expiry_tombstones`]).
    pub fn groups_with_expired(&self, groups: &HashMap<String, Group>, now: i64, retention_ms: i64) -> Vec<String> {
        self.by_group
            .keys()
            .filter(|gid| self.expired(gid, groups.get(*gid), now, retention_ms).next().is_some())
            .cloned()
            .collect()
    }

    /// Tombstones for `group_id`'s offsets past retention, as Kafka expires them: only
    /// when the group has been Empty for the retention period (or has no group at all),
    /// and only offsets committed longer ago than the retention.
    pub fn expiry_tombstones(
        &self,
        group_id: &str,
        group: Option<&Group>,
        now: i64,
        retention_ms: i64,
    ) -> Vec<OffsetsRecord> {
        self.expired(group_id, group, now, retention_ms).map(|(t, p)| tombstone(group_id, t, *p)).collect()
    }

    fn expired<'a>(
        &'a self,
        group_id: &str,
        group: Option<&Group>,
        now: i64,
        retention_ms: i64,
    ) -> impl Iterator<Item = &'a (String, i32)> + 'a {
        let empty_since = match group {
            Some(g) if g.state == GroupState::Empty => Some(g.state_timestamp_ms),
            Some(_) => None,
            None => Some(0),
        };
        let offsets = match empty_since {
            Some(since) if since + retention_ms <= now => self.by_group.get(group_id),
            _ => None,
        };
        offsets
            .into_iter()
            .flat_map(move |o| o.iter().filter(move |(_, c)| c.commit_timestamp + retention_ms <= now).map(|(k, _)| k))
    }
}
