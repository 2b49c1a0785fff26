//! SyncGroup: followers wait for the leader's assignment; the leader's sync makes the
//! group Stable, persists it, and answers every waiting member with its assignment.

use bytes::Bytes;

use super::{Effect, Group, GroupError, GroupState, Token};

/// A SyncGroup request; the leader's carries the assignments.
#[derive(Debug, Clone)]
pub struct SyncParams<'a> {
    pub member_id: &'a str,
    pub generation_id: i32,
    pub group_instance_id: Option<&'a str>,
    pub protocol_type: Option<&'a str>,
    pub protocol_name: Option<&'a str>,
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SyncOutcome {
    pub error: Option<GroupError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncOutcome {
    pub fn error(e: GroupError) -> SyncOutcome {
        SyncOutcome { error: Some(e), protocol_type: None, protocol_name: None, assignment: Bytes::new() }
    }
}

impl Group {
    pub fn sync(&mut self, now: i64, token: Token, req: SyncParams<'_>) -> Vec<Effect> {
        let SyncParams { member_id, generation_id, group_instance_id, protocol_type, protocol_name, assignments } = req;
        let mut fx = Vec::new();
        let reply_err = |e| vec![Effect::Sync(token, SyncOutcome::error(e))];
        if let Err(e) = self.check_member(member_id, group_instance_id) {
            return reply_err(e);
        }
        if generation_id != self.generation_id {
            return reply_err(GroupError::IllegalGeneration);
        }
        if protocol_type.is_some_and(|t| Some(t) != self.protocol_type.as_deref())
            || protocol_name.is_some_and(|n| Some(n) != self.protocol_name.as_deref())
        {
            return reply_err(GroupError::InconsistentGroupProtocol);
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => reply_err(GroupError::UnknownMemberId),
            GroupState::PreparingRebalance => reply_err(GroupError::RebalanceInProgress),
            GroupState::Stable => {
                let mut assignment = Bytes::new();
                if let Some(m) = self.members.get_mut(member_id) {
                    m.last_heartbeat_ms = now;
                    assignment = m.assignment.clone();
                }
                vec![Effect::Sync(token, self.sync_outcome(assignment))]
            }
            GroupState::CompletingRebalance => {
                if let Some(m) = self.members.get_mut(member_id) {
                    m.last_heartbeat_ms = now;
                    if let Some(old) = m.awaiting_sync.replace(token) {
                        fx.push(Effect::Sync(old, SyncOutcome::error(GroupError::RebalanceInProgress)));
                    }
                }
                if self.leader_id.as_deref() == Some(member_id) {
                    for m in self.members.values_mut() {
                        m.assignment = assignments
                            .iter()
                            .find(|(id, _)| *id == m.member_id)
                            .map(|(_, a)| a.clone())
                            .unwrap_or_default();
                    }
                    self.set_state(GroupState::Stable, now);
                    fx.push(Effect::PersistGroup);
                    let outcomes: Vec<(Token, Bytes)> = self
                        .members
                        .values_mut()
                        .filter_map(|m| m.awaiting_sync.take().map(|t| (t, m.assignment.clone())))
                        .collect();
                    for (t, a) in outcomes {
                        fx.push(Effect::Sync(t, self.sync_outcome(a)));
                    }
                }
                fx
            }
        }
    }

    /// The leader's assignment did not reach `__consumer_offsets` (Kafka's
    /// `classicGroupSyncToLeader` when its append fails): if the group is still in the
    /// generation the assignment was for, every member's assignment is reset and the group
    /// prepares a rebalance (`resetAndPropagateAssignmentWithError`, then
    /// `maybePrepareRebalanceOrCompleteJoin`), so the members rejoin rather than wait for
    /// an assignment that will not come. The members waiting in SyncGroup have been
    /// answered with the write error already (by the shell, which owns those requests).
    pub fn assignment_not_stored(&mut self, now: i64, generation_id: i32) -> Vec<Effect> {
        let mut fx = Vec::new();
        if self.state != GroupState::CompletingRebalance || self.generation_id != generation_id {
            return fx;
        }
        for m in self.members.values_mut() {
            m.assignment = Bytes::new();
        }
        self.prepare_rebalance(now, "the leader's assignment could not be stored", &mut fx);
        fx
    }

    fn sync_outcome(&self, assignment: Bytes) -> SyncOutcome {
        SyncOutcome {
            error: None,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment,
        }
    }
}
