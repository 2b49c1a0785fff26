//! The join phase of a rebalance: PreparingRebalance until every member has rejoined (or
//! the rebalance timeout passes, or, for a new group, the initial delay), then a new
//! generation in CompletingRebalance with a leader and a protocol; and the membership
//! changes that start one or empty the group.

use bytes::Bytes;

use super::{Effect, Group, GroupError, GroupState, JoinMember, JoinOutcome, SyncOutcome};

impl Group {
    /// `reason` is logged, as Kafka logs "Preparing to rebalance group ... (reason: ...)":
    /// an unexpected rebalance is the first thing an operator asks about.
    pub(super) fn prepare_rebalance(&mut self, now: i64, reason: &str, fx: &mut Vec<Effect>) {
        tracing::info!(
            group = %self.id,
            state = ?self.state,
            generation = self.generation_id,
            members = self.members.len(),
            "preparing to rebalance: {reason}"
        );
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

    pub(super) fn all_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    pub(super) fn maybe_complete_join(&mut self, now: i64, fx: &mut Vec<Effect>) {
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

    pub(super) fn complete_join(&mut self, now: i64, fx: &mut Vec<Effect>) {
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

    pub(super) fn join_outcome_for(&self, member_id: &str) -> JoinOutcome {
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

    pub(super) fn membership_changed(&mut self, now: i64, reason: &str, fx: &mut Vec<Effect>) {
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
                    self.prepare_rebalance(now, reason, fx);
                }
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now, fx),
            GroupState::Empty | GroupState::Dead => {}
        }
    }
}
