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
//!
//! The group's behaviour is split by concern: `join` (JoinGroup and protocol selection),
//! `rebalance` (a generation's join phase completing, and membership changes that start
//! one), `sync` (SyncGroup and the assignment), `sessions` (heartbeats, LeaveGroup and the
//! clock), `record` (the group as its `__consumer_offsets` record stores it), and
//! `member`; each is a `group_<concern>.rs` file.

use std::collections::HashMap;

use indexmap::IndexMap;
use thiserror::Error;

use super::writer::OffsetsWriteError;

#[path = "group_join.rs"]
mod join;
#[path = "group_member.rs"]
mod member;
#[path = "group_rebalance.rs"]
mod rebalance;
#[path = "group_record.rs"]
mod record;
#[path = "group_sessions.rs"]
mod sessions;
#[path = "group_sync.rs"]
mod sync;

pub use join::{JoinMember, JoinOutcome, JoinParams};
pub use member::Member;
pub use record::RestoredMember;
pub use sync::{SyncOutcome, SyncParams};

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
    /// This broker does not lead the group's `__consumer_offsets` partition.
    #[error("this broker is not the group's coordinator")]
    NotCoordinator,
    /// This broker leads the group's partition but is still replaying it.
    #[error("the group's coordinator is loading its partition")]
    CoordinatorLoadInProgress,
    /// The decision's records did not reach `__consumer_offsets`; the group is as before.
    #[error(transparent)]
    Write(#[from] OffsetsWriteError),
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

    /// Mark the group deleted (DeleteGroups on an empty group).
    pub fn mark_dead(&mut self, now: i64) {
        self.set_state(GroupState::Dead, now);
    }
}

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;
