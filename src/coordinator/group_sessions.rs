//! Sessions and time: heartbeats keep a member's session alive, LeaveGroup ends it, and
//! the clock expires silent members, member ids handed out but never used, and
//! rebalances whose join or sync phase ran out of time.

use super::{Effect, Group, GroupError, GroupState, JoinOutcome, SyncOutcome};

impl Group {
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
        self.membership_changed(now, &format!("member {resolved} left the group"), &mut fx);
        (Ok(()), fx)
    }

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
            let reason = format!("session expired for {}", expired.join(", "));
            self.membership_changed(now, &reason, &mut fx);
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
                let reason = format!("no SyncGroup in time from {}", silent.join(", "));
                self.membership_changed(now, &reason, &mut fx);
            }
            _ => {}
        }
        fx
    }
}
