//! JoinGroup: new, known and static members joining, and the choice of the group's
//! protocol. A join that changes membership or protocols starts a rebalance (see
//! `group_rebalance.rs`); the answer is an [`Effect::Join`], now or when the join phase
//! completes.

use bytes::Bytes;

use super::{Effect, Group, GroupError, GroupState, Member, SyncOutcome, Token};

#[derive(Debug, Clone)]
pub struct JoinParams {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED and its id.
    pub require_known_member_id: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JoinMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JoinOutcome {
    pub error: Option<GroupError>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Only the leader gets the member list.
    pub members: Vec<JoinMember>,
    /// JoinGroup v9+: a static leader that rejoined without a rebalance must not compute
    /// a new assignment.
    pub skip_assignment: bool,
}

impl JoinOutcome {
    pub fn error(e: GroupError, member_id: &str) -> JoinOutcome {
        JoinOutcome {
            error: Some(e),
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.to_owned(),
            members: vec![],
            skip_assignment: false,
        }
    }
}

impl Group {
    /// Protocols every member supports, in the order of the first member's preference.
    pub(super) fn common_protocols(&self) -> Vec<String> {
        let mut iter = self.members.values();
        let Some(first) = iter.next() else { return vec![] };
        let mut common: Vec<String> = first.protocols.iter().map(|(n, _)| n.clone()).collect();
        for m in iter {
            common.retain(|p| m.protocols.iter().any(|(n, _)| n == p));
        }
        common
    }

    /// Kafka's choice: each member votes for its most preferred protocol among the
    /// common ones; most votes wins (ties: the earlier in the first member's order).
    pub(super) fn select_protocol(&self) -> Option<String> {
        let common = self.common_protocols();
        let mut votes: Vec<(String, usize)> = common.iter().map(|p| (p.clone(), 0)).collect();
        for m in self.members.values() {
            if let Some((name, _)) = m.protocols.iter().find(|(n, _)| common.contains(n)) {
                if let Some(v) = votes.iter_mut().find(|(p, _)| p == name) {
                    v.1 += 1;
                }
            }
        }
        let max = votes.iter().map(|(_, c)| *c).max()?;
        votes.into_iter().find(|(_, c)| *c == max).map(|(p, _)| p)
    }

    pub(super) fn protocols_compatible(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if protocol_type.is_empty() || protocols.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref().is_some_and(|t| t != protocol_type) {
            return false;
        }
        let common = self.common_protocols();
        protocols.iter().any(|(n, _)| common.contains(n))
    }

    /// Handle a JoinGroup. The response is an [`Effect::Join`] for `token`, now or later.
    pub fn join(
        &mut self,
        now: i64,
        token: Token,
        p: JoinParams,
        new_member_id: impl FnOnce() -> String,
    ) -> Vec<Effect> {
        let mut fx = Vec::new();
        if self.state == GroupState::Dead {
            fx.push(Effect::Join(token, JoinOutcome::error(GroupError::CoordinatorNotAvailable, &p.member_id)));
            return fx;
        }
        if p.session_timeout_ms < self.limits.min_session_timeout_ms
            || p.session_timeout_ms > self.limits.max_session_timeout_ms
        {
            fx.push(Effect::Join(token, JoinOutcome::error(GroupError::InvalidSessionTimeout, &p.member_id)));
            return fx;
        }
        if !self.protocols_compatible(&p.protocol_type, &p.protocols) {
            // A member replacing itself may change protocols only if it is the sole member.
            let sole_self = self.members.len() == 1 && self.members.contains_key(&p.member_id);
            if !sole_self || p.protocols.is_empty() || p.protocol_type.is_empty() {
                fx.push(Effect::Join(token, JoinOutcome::error(GroupError::InconsistentGroupProtocol, &p.member_id)));
                return fx;
            }
        }
        if p.member_id.is_empty() {
            self.join_unknown_member(now, token, p, new_member_id, &mut fx);
        } else {
            self.join_known_member(now, token, p, &mut fx);
        }
        fx
    }

    fn join_unknown_member(
        &mut self,
        now: i64,
        token: Token,
        p: JoinParams,
        new_member_id: impl FnOnce() -> String,
        fx: &mut Vec<Effect>,
    ) {
        let member_id = new_member_id();
        if let Some(iid) = p.group_instance_id.clone() {
            // Static member (re)joining: the new member id replaces the old one, which is
            // fenced from now on.
            if let Some(old_id) = self.static_members.get(&iid).cloned() {
                if let Some(mut old) = self.members.shift_remove(&old_id) {
                    if let Some(t) = old.awaiting_join.take() {
                        fx.push(Effect::Join(t, JoinOutcome::error(GroupError::FencedInstanceId, &old_id)));
                    }
                    if let Some(t) = old.awaiting_sync.take() {
                        fx.push(Effect::Sync(t, SyncOutcome::error(GroupError::FencedInstanceId)));
                    }
                    if self.leader_id.as_deref() == Some(old_id.as_str()) {
                        self.leader_id = Some(member_id.clone());
                    }
                    // KIP-345: a static member restarting with unchanged protocols takes
                    // its old place without a rebalance; it gets its old assignment from
                    // SyncGroup, and a returning leader is told to skip the assignment.
                    if self.state == GroupState::Stable && old.protocols == p.protocols {
                        self.static_members.insert(iid, member_id.clone());
                        let member = Member::from_join(&member_id, p, old.assignment, None, now);
                        self.members.insert(member_id.clone(), member);
                        fx.push(Effect::PersistGroup);
                        let mut outcome = self.join_outcome_for(&member_id);
                        outcome.skip_assignment = self.leader_id.as_deref() == Some(member_id.as_str());
                        fx.push(Effect::Join(token, outcome));
                        return;
                    }
                }
            }
            self.static_members.insert(iid, member_id.clone());
            self.add_member_and_rebalance(now, token, member_id, p, fx);
            return;
        }
        if p.require_known_member_id {
            if self.members.len() + self.pending_members.len() >= self.limits.max_size {
                fx.push(Effect::Join(token, JoinOutcome::error(GroupError::GroupMaxSizeReached, "")));
                return;
            }
            self.pending_members.insert(member_id.clone(), now + i64::from(p.session_timeout_ms));
            fx.push(Effect::Join(token, JoinOutcome::error(GroupError::MemberIdRequired, &member_id)));
            return;
        }
        self.add_member_and_rebalance(now, token, member_id, p, fx);
    }

    fn join_known_member(&mut self, now: i64, token: Token, p: JoinParams, fx: &mut Vec<Effect>) {
        let member_id = p.member_id.clone();
        if self.pending_members.remove(&member_id).is_some() {
            self.add_member_and_rebalance(now, token, member_id, p, fx);
            return;
        }
        if let Some(iid) = &p.group_instance_id {
            if self.static_members.get(iid).is_some_and(|m| *m != member_id) {
                fx.push(Effect::Join(token, JoinOutcome::error(GroupError::FencedInstanceId, &member_id)));
                return;
            }
        }
        let Some(member) = self.members.get_mut(&member_id) else {
            fx.push(Effect::Join(token, JoinOutcome::error(GroupError::UnknownMemberId, &member_id)));
            return;
        };
        let protocols_changed = member.protocols != p.protocols;
        member.protocols = p.protocols;
        member.protocol_type = p.protocol_type;
        member.session_timeout_ms = p.session_timeout_ms;
        member.rebalance_timeout_ms = p.rebalance_timeout_ms;
        member.client_id = p.client_id;
        member.client_host = p.client_host;
        member.last_heartbeat_ms = now;
        match self.state {
            GroupState::PreparingRebalance => {
                if let Some(old) = member.awaiting_join.replace(token) {
                    fx.push(Effect::Join(old, JoinOutcome::error(GroupError::RebalanceInProgress, &member_id)));
                }
                self.maybe_complete_join(now, fx);
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                let is_leader = self.leader_id.as_deref() == Some(member_id.as_str());
                let must_rebalance = protocols_changed || (self.state == GroupState::Stable && is_leader);
                if must_rebalance {
                    if let Some(m) = self.members.get_mut(&member_id) {
                        m.awaiting_join = Some(token);
                    }
                    let reason = if protocols_changed {
                        format!("member {member_id} rejoined with changed metadata")
                    } else {
                        format!("leader {member_id} rejoined the stable group")
                    };
                    self.prepare_rebalance(now, &reason, fx);
                } else {
                    // The member missed its join response (or is a follower re-joining
                    // without changes): answer with the current generation.
                    fx.push(Effect::Join(token, self.join_outcome_for(&member_id)));
                }
            }
            GroupState::Empty | GroupState::Dead => {
                fx.push(Effect::Join(token, JoinOutcome::error(GroupError::UnknownMemberId, &member_id)));
            }
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        now: i64,
        token: Token,
        member_id: String,
        p: JoinParams,
        fx: &mut Vec<Effect>,
    ) {
        if self.members.len() >= self.limits.max_size {
            fx.push(Effect::Join(token, JoinOutcome::error(GroupError::GroupMaxSizeReached, &member_id)));
            return;
        }
        if self.members.is_empty() {
            self.protocol_type = Some(p.protocol_type.clone());
        }
        let reason = format!("new member {member_id} joined");
        self.members.insert(member_id.clone(), Member::from_join(&member_id, p, Bytes::new(), Some(token), now));
        if self.leader_id.is_none() {
            self.leader_id = Some(member_id);
        }
        if self.initial_join {
            self.new_member_added = true;
        }
        match self.state {
            GroupState::PreparingRebalance => self.maybe_complete_join(now, fx),
            _ => self.prepare_rebalance(now, &reason, fx),
        }
    }
}
