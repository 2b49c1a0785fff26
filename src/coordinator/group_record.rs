//! The group as `__consumer_offsets` stores it: the group metadata record's members, and
//! the group rebuilt from that record at load and after every written decision.

use bytes::Bytes;

use super::{Group, GroupLimits, GroupState, Member};
use crate::coordinator::offsets_codec::{GroupValue, OffsetsRecord};

/// A member as stored in the group metadata record.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoredMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

impl Group {
    /// Rebuild a group from its persisted record: members are back as of `now`, so each
    /// has a full session timeout to heartbeat again before it is expired.
    #[allow(clippy::too_many_arguments)]
    pub fn restore(
        id: &str,
        limits: GroupLimits,
        generation_id: i32,
        protocol_type: Option<String>,
        protocol_name: Option<String>,
        leader_id: Option<String>,
        members: Vec<RestoredMember>,
        now: i64,
    ) -> Group {
        let mut g = Group::new(id, limits, now);
        g.generation_id = generation_id;
        g.protocol_type = protocol_type;
        g.protocol_name = protocol_name.clone();
        for m in members {
            if let Some(iid) = &m.group_instance_id {
                g.static_members.insert(iid.clone(), m.member_id.clone());
            }
            let protocols = match &protocol_name {
                Some(p) => vec![(p.clone(), m.subscription)],
                None => vec![],
            };
            g.members.insert(
                m.member_id.clone(),
                Member {
                    member_id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    protocols,
                    assignment: m.assignment,
                    awaiting_join: None,
                    awaiting_sync: None,
                    last_heartbeat_ms: now,
                },
            );
        }
        if g.members.is_empty() {
            g.state = GroupState::Empty;
        } else {
            g.state = GroupState::Stable;
            g.leader_id = leader_id.filter(|l| g.members.contains_key(l)).or_else(|| g.members.keys().next().cloned());
        }
        g
    }

    /// The group metadata record of the group as it is now.
    pub fn record(&self) -> OffsetsRecord {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        OffsetsRecord::Group {
            group: self.id.clone(),
            value: Some(GroupValue {
                protocol_type: self.protocol_type.clone().unwrap_or_default(),
                generation: self.generation_id,
                protocol: self.protocol_name.clone(),
                leader: self.leader_id.clone(),
                state_timestamp: self.state_timestamp_ms,
                members: self
                    .members
                    .values()
                    .map(|m| RestoredMember {
                        member_id: m.member_id.clone(),
                        group_instance_id: m.group_instance_id.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        rebalance_timeout_ms: m.rebalance_timeout_ms,
                        session_timeout_ms: m.session_timeout_ms,
                        subscription: m.metadata_for(&protocol),
                        assignment: m.assignment.clone(),
                    })
                    .collect(),
            }),
        }
    }
}
