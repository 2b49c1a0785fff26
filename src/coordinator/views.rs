//! Read-only views of groups for DescribeGroups and ListGroups, and for `/metrics`.

use bytes::Bytes;

use super::group::{Group, GroupState};
use super::offsets::CommittedOffsets;

#[derive(Debug, Clone)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone)]
pub struct GroupDescription {
    pub group_id: String,
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol_name: String,
    pub members: Vec<MemberDescription>,
}

#[derive(Debug, Clone)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: GroupState,
}

/// As Kafka describes a group: the protocol and assignments only once it is Stable.
pub fn describe(g: &Group) -> GroupDescription {
    let protocol = g.protocol_name.clone().unwrap_or_default();
    let stable = g.state == GroupState::Stable;
    GroupDescription {
        group_id: g.id.clone(),
        state: g.state,
        protocol_type: g.protocol_type.clone().unwrap_or_default(),
        protocol_name: if stable { protocol.clone() } else { String::new() },
        members: g
            .members
            .values()
            .map(|m| MemberDescription {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: m.metadata_for(&protocol),
                assignment: if stable { m.assignment.clone() } else { Bytes::new() },
            })
            .collect(),
    }
}

/// Every live group, sorted by id.
pub fn list<'a>(groups: impl Iterator<Item = &'a Group>) -> Vec<GroupListing> {
    let mut v: Vec<GroupListing> = groups
        .filter(|g| g.state != GroupState::Dead)
        .map(|g| GroupListing {
            group_id: g.id.clone(),
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            state: g.state,
        })
        .collect();
    v.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    v
}

/// What `/metrics` shows of the groups: each live group's generation (its completed
/// rebalances) and every committed offset.
#[derive(Debug, Clone, Default)]
pub struct GroupsMetricsView {
    /// `(group, generation id)`, sorted by group.
    pub generations: Vec<(String, i32)>,
    /// `(group, topic, partition, committed offset)`, sorted.
    pub committed: Vec<(String, String, i32, i64)>,
}

pub fn metrics_view<'a>(groups: impl Iterator<Item = &'a Group>, offsets: &CommittedOffsets) -> GroupsMetricsView {
    let mut generations: Vec<(String, i32)> =
        groups.filter(|g| g.state != GroupState::Dead).map(|g| (g.id.clone(), g.generation_id)).collect();
    generations.sort();
    let mut committed: Vec<(String, String, i32, i64)> = offsets
        .groups()
        .flat_map(|g| offsets.fetch(g, None).into_iter().map(move |(t, p, o)| (g, t, p, o)))
        .filter_map(|(g, t, p, o)| Some((g.clone(), t, p, o?.offset)))
        .collect();
    committed.sort();
    GroupsMetricsView { generations, committed }
}
