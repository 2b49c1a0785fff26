//! The classic consumer-group protocol as a pure state machine.
//!
//! Requests and the clock go in (`join`, `sync`, `heartbeat`, `leave`, `tick`, each with
//! `now`); effects come out: responses to parked JoinGroup/SyncGroup requests (identified
//! by a [`Token`] the shell chose) and "persist the group" when the group's durable state
//! changed. Nothing here does I/O or reads a clock, so tests drive it event by event.
//!
//! States follow Kafka: Empty → PreparingRebalance → CompletingRebalance → Stable, back to
//! PreparingRebalance on any membership or protocol change, Dead once deleted.
//! Invariants: `leader_id` is a member whenever the group has members; in
//! CompletingRebalance and Stable every member joined the current generation; a member
//! has at most one parked join and one parked sync.

use std::collections::HashMap;

use bytes::Bytes;
use indexmap::IndexMap;
use thiserror::Error;

use super::writer::OffsetsWriteError;

/// Identifies a parked request in the shell.
pub type Token = u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name Kafka reports in DescribeGroups and ListGroups.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum GroupError {
    #[error("unknown member id")]
    UnknownMemberId,
    #[error("illegal generation")]
    IllegalGeneration,
    #[error("rebalance in progress")]
    RebalanceInProgress,
    #[error("a member id is required to join")]
    MemberIdRequired,
    #[error("no protocol in common with the group")]
    InconsistentGroupProtocol,
    #[error("session timeout outside the broker's bounds")]
    InvalidSessionTimeout,
    #[error("the static member was replaced by a newer instance")]
    FencedInstanceId,
    #[error("the group is being deleted")]
    CoordinatorNotAvailable,
    #[error("the group is full")]
    GroupMaxSizeReached,
    /// The decision's records did not reach `__consumer_offsets`; the group is as before.
    #[error(transparent)]
    Write(#[from] OffsetsWriteError),
}

#[derive(Debug, Clone)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// (protocol name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    awaiting_join: Option<Token>,
    awaiting_sync: Option<Token>,
    last_heartbeat_ms: i64,
}

impl Member {
    /// A member as its JoinGroup describes it, with `assignment` and, if its JoinGroup is
    /// still to be answered, `awaiting_join`.
    fn from_join(member_id: &str, p: JoinParams, assignment: Bytes, awaiting_join: Option<Token>, now: i64) -> Member {
        Member {
            member_id: member_id.to_owned(),
            group_instance_id: p.group_instance_id,
            client_id: p.client_id,
            client_host: p.client_host,
            session_timeout_ms: p.session_timeout_ms,
            rebalance_timeout_ms: p.rebalance_timeout_ms,
            protocol_type: p.protocol_type,
            protocols: p.protocols,
            assignment,
            awaiting_join,
            awaiting_sync: None,
            last_heartbeat_ms: now,
        }
    }

    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols.iter().find(|(n, _)| n == protocol).map(|(_, m)| m.clone()).unwrap_or_default()
    }
}

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

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Join(Token, JoinOutcome),
    Sync(Token, SyncOutcome),
    /// The group's durable state (generation, members, assignments) changed: write it.
    PersistGroup,
}

/// Timeouts and limits, from the broker config.
#[derive(Debug, Clone, Copy)]
pub struct GroupLimits {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: i32,
    pub max_size: usize,
}

impl Default for GroupLimits {
    fn default() -> Self {
        GroupLimits {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 0,
            max_size: usize::MAX,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Group {
    pub id: String,
    pub state: GroupState,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader_id: Option<String>,
    pub members: IndexMap<String, Member>,
    /// group.instance.id → current member id.
    static_members: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with the time they expire.
    pending_members: HashMap<String, i64>,
    rebalance_deadline_ms: i64,
    /// The first join of an empty group, waiting for its timer (see `prepare_rebalance`).
    initial_join: bool,
    /// During the first join: a member joined since the timer was last set, and how much
    /// of the rebalance timeout is left to extend it by (Kafka's initial delayed join).
    new_member_added: bool,
    initial_remaining_ms: i64,
    sync_deadline_ms: i64,
    /// When the group last changed state (Empty since when, for offset expiry).
    pub state_timestamp_ms: i64,
    limits: GroupLimits,
}

impl Group {
    pub fn new(id: &str, limits: GroupLimits, now: i64) -> Group {
        Group {
            id: id.to_owned(),
            state: GroupState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: IndexMap::new(),
            static_members: HashMap::new(),
            pending_members: HashMap::new(),
            rebalance_deadline_ms: 0,
            initial_join: false,
            new_member_added: false,
            initial_remaining_ms: 0,
            sync_deadline_ms: 0,
            state_timestamp_ms: now,
            limits,
        }
    }

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

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Nothing for the clock to do: no members and no member ids handed out.
    pub fn is_idle(&self) -> bool {
        self.state == GroupState::Empty && self.members.is_empty() && self.pending_members.is_empty()
    }

    /// The shell answered these parked requests itself (their decision's write failed):
    /// members no longer count as waiting in JoinGroup or SyncGroup for them.
    pub fn forget_parked(&mut self, tokens: &[Token]) {
        for m in self.members.values_mut() {
            if m.awaiting_join.is_some_and(|t| tokens.contains(&t)) {
                m.awaiting_join = None;
            }
            if m.awaiting_sync.is_some_and(|t| tokens.contains(&t)) {
                m.awaiting_sync = None;
            }
        }
    }

    /// Keep the later session time of each member that `live` also has (see
    /// `Shard::apply`).
    pub fn keep_fresher_heartbeats(&mut self, live: &Group) {
        for (id, m) in self.members.iter_mut() {
            if let Some(l) = live.members.get(id) {
                m.last_heartbeat_ms = m.last_heartbeat_ms.max(l.last_heartbeat_ms);
            }
        }
    }

    fn set_state(&mut self, state: GroupState, now: i64) {
        self.state = state;
        self.state_timestamp_ms = now;
    }

    /// Protocols every member supports, in the order of the first member's preference.
    fn common_protocols(&self) -> Vec<String> {
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
    fn select_protocol(&self) -> Option<String> {
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

    fn protocols_compatible(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
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

    // ---- JoinGroup ----

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
                    self.prepare_rebalance(now, fx);
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
        self.members.insert(member_id.clone(), Member::from_join(&member_id, p, Bytes::new(), Some(token), now));
        if self.leader_id.is_none() {
            self.leader_id = Some(member_id);
        }
        if self.initial_join {
            self.new_member_added = true;
        }
        match self.state {
            GroupState::PreparingRebalance => self.maybe_complete_join(now, fx),
            _ => self.prepare_rebalance(now, fx),
        }
    }

    fn prepare_rebalance(&mut self, now: i64, fx: &mut Vec<Effect>) {
        if self.state == GroupState::CompletingRebalance {
            for m in self.members.values_mut() {
                if let Some(t) = m.awaiting_sync.take() {
                    fx.push(Effect::Sync(t, SyncOutcome::error(GroupError::RebalanceInProgress)));
                }
            }
        }
        let was_empty = self.state == GroupState::Empty;
        let timeout = self.members.values().map(|m| i64::from(m.rebalance_timeout_ms)).max().unwrap_or(0);
        self.set_state(GroupState::PreparingRebalance, now);
        if was_empty {
            // A new group's first join completes on a clock tick, never inside the join
            // itself, so members starting together land in one generation (Kafka's
            // initial delayed join; with a delay of 0 it still waits for its timer).
            // While members keep arriving the timer is extended by the same delay, up to
            // the rebalance timeout in all (see `tick`).
            let delay = i64::from(self.limits.initial_rebalance_delay_ms);
            self.initial_join = true;
            self.new_member_added = false;
            self.initial_remaining_ms = (timeout - delay).max(0);
            self.rebalance_deadline_ms = now + delay.min(timeout);
        } else {
            self.rebalance_deadline_ms = now + timeout;
            self.maybe_complete_join(now, fx);
        }
    }

    fn all_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    fn maybe_complete_join(&mut self, now: i64, fx: &mut Vec<Effect>) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        if self.initial_join {
            return; // completed by `tick`
        }
        if self.all_joined() || now >= self.rebalance_deadline_ms {
            self.complete_join(now, fx);
        }
    }

    fn complete_join(&mut self, now: i64, fx: &mut Vec<Effect>) {
        self.initial_join = false;
        self.new_member_added = false;
        // Members that did not rejoin in time are out.
        let gone: Vec<String> =
            self.members.values().filter(|m| m.awaiting_join.is_none()).map(|m| m.member_id.clone()).collect();
        for id in gone {
            self.remove_member(&id);
        }
        self.pending_members.clear();
        self.generation_id += 1;
        if self.members.is_empty() {
            self.protocol_name = None;
            self.protocol_type = None;
            self.leader_id = None;
            self.set_state(GroupState::Empty, now);
            fx.push(Effect::PersistGroup);
            return;
        }
        self.protocol_name = self.select_protocol();
        if !self.leader_id.as_ref().is_some_and(|l| self.members.contains_key(l)) {
            self.leader_id = self.members.keys().next().cloned();
        }
        self.set_state(GroupState::CompletingRebalance, now);
        let timeout = self.members.values().map(|m| i64::from(m.rebalance_timeout_ms)).max().unwrap_or(0);
        self.sync_deadline_ms = now + timeout;
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let outcome = self.join_outcome_for(&id);
            if let Some(m) = self.members.get_mut(&id) {
                m.last_heartbeat_ms = now;
                m.assignment = Bytes::new();
                if let Some(t) = m.awaiting_join.take() {
                    fx.push(Effect::Join(t, outcome));
                }
            }
        }
    }

    fn join_outcome_for(&self, member_id: &str) -> JoinOutcome {
        let leader = self.leader_id.clone().unwrap_or_default();
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let members = if leader == member_id {
            self.members
                .values()
                .map(|m| JoinMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    metadata: m.metadata_for(&protocol),
                })
                .collect()
        } else {
            vec![]
        };
        JoinOutcome {
            error: None,
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader,
            member_id: member_id.to_owned(),
            members,
            skip_assignment: false,
        }
    }

    fn remove_member(&mut self, member_id: &str) -> Option<Member> {
        let m = self.members.shift_remove(member_id)?;
        if let Some(iid) = &m.group_instance_id {
            if self.static_members.get(iid).is_some_and(|id| id == member_id) {
                self.static_members.remove(iid);
            }
        }
        if self.leader_id.as_deref() == Some(member_id) {
            self.leader_id = self.members.keys().next().cloned();
        }
        Some(m)
    }

    // ---- SyncGroup ----

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

    fn sync_outcome(&self, assignment: Bytes) -> SyncOutcome {
        SyncOutcome {
            error: None,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment,
        }
    }

    fn check_member(&self, member_id: &str, group_instance_id: Option<&str>) -> Result<(), GroupError> {
        if let Some(iid) = group_instance_id {
            if let Some(current) = self.static_members.get(iid) {
                if current != member_id {
                    return Err(GroupError::FencedInstanceId);
                }
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(GroupError::UnknownMemberId);
        }
        Ok(())
    }

    // ---- Heartbeat, LeaveGroup ----

    pub fn heartbeat(
        &mut self,
        now: i64,
        member_id: &str,
        generation_id: i32,
        group_instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if matches!(self.state, GroupState::Empty | GroupState::Dead) {
            return Err(GroupError::UnknownMemberId);
        }
        self.check_member(member_id, group_instance_id)?;
        if generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        if let Some(m) = self.members.get_mut(member_id) {
            m.last_heartbeat_ms = now;
        }
        match self.state {
            GroupState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    /// Remove a member that leaves; per-member result.
    pub fn leave(
        &mut self,
        now: i64,
        member_id: &str,
        group_instance_id: Option<&str>,
    ) -> (Result<(), GroupError>, Vec<Effect>) {
        let mut fx = Vec::new();
        if self.state == GroupState::Dead {
            return (Err(GroupError::CoordinatorNotAvailable), fx);
        }
        // A static member may leave by instance id alone (member id empty).
        let resolved = match (member_id.is_empty(), group_instance_id) {
            (true, Some(iid)) => match self.static_members.get(iid) {
                Some(id) => id.clone(),
                None => return (Err(GroupError::UnknownMemberId), fx),
            },
            _ => member_id.to_owned(),
        };
        if self.pending_members.remove(&resolved).is_some() {
            self.maybe_complete_join(now, &mut fx);
            return (Ok(()), fx);
        }
        if let Err(e) = self.check_member(&resolved, group_instance_id) {
            return (Err(e), fx);
        }
        if let Some(mut m) = self.remove_member(&resolved) {
            if let Some(t) = m.awaiting_join.take() {
                fx.push(Effect::Join(t, JoinOutcome::error(GroupError::UnknownMemberId, &resolved)));
            }
            if let Some(t) = m.awaiting_sync.take() {
                fx.push(Effect::Sync(t, SyncOutcome::error(GroupError::UnknownMemberId)));
            }
        }
        self.membership_changed(now, &mut fx);
        (Ok(()), fx)
    }

    fn membership_changed(&mut self, now: i64, fx: &mut Vec<Effect>) {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                if self.members.is_empty() {
                    self.generation_id += 1;
                    self.protocol_name = None;
                    self.protocol_type = None;
                    self.leader_id = None;
                    self.set_state(GroupState::Empty, now);
                    fx.push(Effect::PersistGroup);
                } else {
                    self.prepare_rebalance(now, fx);
                }
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now, fx),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    // ---- Time ----

    /// Expire sessions and finish rebalances whose time is up.
    pub fn tick(&mut self, now: i64) -> Vec<Effect> {
        let mut fx = Vec::new();
        let expired_pending: Vec<String> =
            self.pending_members.iter().filter(|(_, d)| **d <= now).map(|(id, _)| id.clone()).collect();
        for id in expired_pending {
            self.pending_members.remove(&id);
        }
        // Members parked in JoinGroup or SyncGroup are waiting on us, not silent.
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.awaiting_sync.is_none())
            .filter(|m| m.last_heartbeat_ms + i64::from(m.session_timeout_ms) <= now)
            .map(|m| m.member_id.clone())
            .collect();
        for id in &expired {
            tracing::info!(group = %self.id, member = %id, "member session expired");
            self.remove_member(id);
        }
        if !expired.is_empty() {
            self.membership_changed(now, &mut fx);
        }
        match self.state {
            GroupState::PreparingRebalance if self.initial_join && now >= self.rebalance_deadline_ms => {
                let delay = i64::from(self.limits.initial_rebalance_delay_ms);
                if self.new_member_added && self.initial_remaining_ms > 0 && delay > 0 {
                    self.new_member_added = false;
                    self.rebalance_deadline_ms = now + delay.min(self.initial_remaining_ms);
                    self.initial_remaining_ms = (self.initial_remaining_ms - delay).max(0);
                } else {
                    self.complete_join(now, &mut fx);
                }
            }
            GroupState::PreparingRebalance if self.initial_join => {}
            GroupState::PreparingRebalance => self.maybe_complete_join(now, &mut fx),
            GroupState::CompletingRebalance if now >= self.sync_deadline_ms => {
                // The leader never sent the assignment: members still waiting stay, the
                // others are removed, and the group rebalances.
                let silent: Vec<String> =
                    self.members.values().filter(|m| m.awaiting_sync.is_none()).map(|m| m.member_id.clone()).collect();
                for id in &silent {
                    self.remove_member(id);
                }
                self.membership_changed(now, &mut fx);
            }
            _ => {}
        }
        fx
    }

    /// Mark the group deleted (DeleteGroups on an empty group).
    pub fn mark_dead(&mut self, now: i64) {
        self.set_state(GroupState::Dead, now);
    }
}

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

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;
