//! The coordinator's state and decisions, without I/O (Kafka's `GroupCoordinatorShard`).
//!
//! Every decision reads the committed state and returns a [`CoordinatorResult`]: the
//! records to write to `__consumer_offsets`, the answers to parked requests, the reply,
//! and the group copies the decision produced. Nothing changes until the shell has
//! written the records and calls [`Shard::apply`], which replays them through
//! [`Shard::replay`], the one path that also rebuilds the state at load.
//!
//! Why decide on copies rather than revert: a group decision changes far more than its
//! record says (parked requests, deadlines, pending member ids), so it runs on a clone
//! that is installed after the write and dropped when the write fails. Kafka keeps such
//! uncommitted state in a snapshot timeline and reverts it on failure; with one decision in
//! flight at a time per group (the shell serializes them per group) the clone is that
//! timeline with one entry. Every decision reads and writes the state of one group only
//! (its group record and its offsets), which is what lets groups decide concurrently.

use std::collections::HashMap;

use super::error::CoordinatorError;
use super::group::{Effect, Group, GroupError, GroupLimits, GroupState, JoinParams, SyncOutcome, SyncParams, Token};
use super::offsets::{validate_commit, CommittedOffsets, MemberRef, OffsetCommit, MAX_METADATA_BYTES};
use super::offsets_codec::{CommittedOffset, OffsetsRecord};

/// What a decision asks of the shell: write `records`, then install `groups`, answer
/// `effects` (parked JoinGroup/SyncGroup requests) and return `reply`; if the write
/// fails, carry out `on_write_error` instead.
#[derive(Debug)]
pub struct CoordinatorResult<T> {
    pub records: Vec<OffsetsRecord>,
    /// Only [`Effect::Join`] and [`Effect::Sync`]; "persist the group" became a record.
    pub effects: Vec<Effect>,
    pub reply: T,
    groups: Vec<Group>,
    on_write_error: Option<OnWriteError>,
}

/// What a failed write still changes. Most decisions leave everything as it was when
/// their records do not reach the log; Kafka reacts to a few (its append futures'
/// error callbacks), and those reactions write nothing themselves.
#[derive(Debug, Clone, PartialEq)]
pub enum OnWriteError {
    /// The leader's assignment was not stored: the group rebalances, if it is still in
    /// the generation the assignment was for (see [`Group::assignment_not_stored`]).
    Rebalance { group: String, generation_id: i32 },
}

impl<T> CoordinatorResult<T> {
    fn reply(reply: T) -> CoordinatorResult<T> {
        CoordinatorResult { records: vec![], effects: vec![], reply, groups: vec![], on_write_error: None }
    }

    /// Split into the state change, the answers to parked requests, and the reply.
    pub fn into_staged(self) -> (Staged, Vec<Effect>, T) {
        let staged = Staged { records: self.records, groups: self.groups, on_write_error: self.on_write_error };
        (staged, self.effects, self.reply)
    }
}

/// The state change of a decision, to apply once its records are written (or its
/// reaction, if they are not).
#[derive(Debug)]
pub struct Staged {
    records: Vec<OffsetsRecord>,
    groups: Vec<Group>,
    on_write_error: Option<OnWriteError>,
}

impl Staged {
    pub fn records(&self) -> &[OffsetsRecord] {
        &self.records
    }
}

#[derive(Debug)]
pub struct Shard {
    limits: GroupLimits,
    offsets_retention_ms: i64,
    pub(super) groups: HashMap<String, Group>,
    pub(super) offsets: CommittedOffsets,
}

impl Shard {
    pub fn new(limits: GroupLimits, offsets_retention_ms: i64) -> Shard {
        Shard { limits, offsets_retention_ms, groups: HashMap::new(), offsets: CommittedOffsets::default() }
    }

    // ---- Replay: the only way records change the state ----

    /// Apply one record of `__consumer_offsets`. A group record brings the group back as
    /// its record describes it, members with fresh sessions as of `now`.
    pub fn replay(&mut self, record: OffsetsRecord, now: i64) {
        match record {
            OffsetsRecord::Offset { group, topic, partition, value } => {
                self.offsets.replay(group, topic, partition, value)
            }
            OffsetsRecord::Group { group, value: None } => {
                self.groups.remove(&group);
            }
            OffsetsRecord::Group { group, value: Some(v) } => {
                let g = Group::restore(
                    &group,
                    self.limits,
                    v.generation,
                    (!v.protocol_type.is_empty()).then_some(v.protocol_type),
                    v.protocol,
                    v.leader,
                    v.members,
                    now,
                );
                self.groups.insert(group, g);
            }
        }
    }

    /// After the last record at load: a group known only by its offsets exists, Empty.
    pub fn finish_load(&mut self, now: i64) {
        let ids: Vec<String> = self.offsets.groups().filter(|g| !self.groups.contains_key(*g)).cloned().collect();
        for id in ids {
            self.groups.insert(id.clone(), Group::new(&id, self.limits, now));
        }
    }

    /// Make a written decision real: its records replay as at load, then the group copies
    /// it decided on replace what a replayed group record restored (they also carry what a
    /// record does not: parked requests, deadlines).
    ///
    /// Heartbeats do not wait for a group's decisions (they write nothing), so one may have
    /// refreshed a member of the live group while the decision's copy was being written;
    /// the installed copy keeps the fresher session time.
    pub fn apply(&mut self, staged: Staged, now: i64) {
        let mut groups = staged.groups;
        for g in &mut groups {
            if let Some(live) = self.groups.get(&g.id) {
                g.keep_fresher_heartbeats(live);
            }
        }
        for r in staged.records {
            self.replay(r, now);
        }
        for g in groups {
            log_transition(self.groups.get(&g.id), &g);
            self.groups.insert(g.id.clone(), g);
        }
    }

    /// A decision's write failed: nothing of it is applied, only its reaction, if it has
    /// one. Returns the answers that reaction gives to parked requests.
    pub fn write_failed(&mut self, staged: Staged, now: i64) -> Vec<Effect> {
        match staged.on_write_error {
            Some(OnWriteError::Rebalance { group, generation_id }) => match self.groups.get_mut(&group) {
                Some(g) => g.assignment_not_stored(now, generation_id),
                None => vec![],
            },
            None => vec![],
        }
    }

    /// See [`Group::forget_parked`]; the tokens may belong to any group.
    pub fn forget_parked(&mut self, tokens: &[Token]) {
        if tokens.is_empty() {
            return;
        }
        for g in self.groups.values_mut() {
            g.forget_parked(tokens);
        }
    }

    // ---- Group decisions ----

    /// The group to decide on: a copy of the live one, or a new group.
    fn working_copy(&self, group_id: &str, now: i64) -> Group {
        match self.groups.get(group_id) {
            Some(g) if g.state != GroupState::Dead => g.clone(),
            _ => Group::new(group_id, self.limits, now),
        }
    }

    /// Turn a group's effects into a result: "persist" becomes the group's record.
    fn group_result<T>(mut results: Vec<(Group, Vec<Effect>)>, reply: T) -> CoordinatorResult<T> {
        let mut records = Vec::new();
        let mut effects = Vec::new();
        let mut groups = Vec::new();
        for (g, fx) in results.drain(..) {
            if fx.contains(&Effect::PersistGroup) {
                records.push(g.record());
            }
            effects.extend(fx.into_iter().filter(|e| !matches!(e, Effect::PersistGroup)));
            groups.push(g);
        }
        CoordinatorResult { records, effects, reply, groups, on_write_error: None }
    }

    pub fn join(
        &self,
        group_id: &str,
        token: Token,
        params: JoinParams,
        now: i64,
        new_member_id: impl FnOnce() -> String,
    ) -> CoordinatorResult<()> {
        let mut g = self.working_copy(group_id, now);
        let fx = g.join(now, token, params, new_member_id);
        Self::group_result(vec![(g, fx)], ())
    }

    pub fn sync(&self, group_id: &str, token: Token, params: SyncParams<'_>, now: i64) -> CoordinatorResult<()> {
        let Some(g) = self.groups.get(group_id) else {
            let mut r = CoordinatorResult::reply(());
            r.effects.push(Effect::Sync(token, SyncOutcome::error(GroupError::UnknownMemberId)));
            return r;
        };
        let mut g = g.clone();
        let fx = g.sync(now, token, params);
        // Only the leader's sync in CompletingRebalance persists the group (its assignment).
        let on_write_error = fx
            .contains(&Effect::PersistGroup)
            .then(|| OnWriteError::Rebalance { group: g.id.clone(), generation_id: g.generation_id });
        let mut result = Self::group_result(vec![(g, fx)], ());
        result.on_write_error = on_write_error;
        result
    }

    /// Heartbeats change only session times, never a record, so they apply in place, on
    /// the committed state, without waiting for the group's decisions in flight (Kafka's
    /// new coordinator runs them against uncommitted state; here a heartbeat that races a
    /// rebalance learns of it on its next beat instead).
    pub fn heartbeat(
        &mut self,
        group_id: &str,
        member_id: &str,
        generation_id: i32,
        group_instance_id: Option<&str>,
        now: i64,
    ) -> Result<(), GroupError> {
        match self.groups.get_mut(group_id) {
            Some(g) => g.heartbeat(now, member_id, generation_id, group_instance_id),
            None => Err(GroupError::UnknownMemberId),
        }
    }

    /// LeaveGroup for several members: per-member results, `Err` when the group does not
    /// exist.
    #[allow(clippy::type_complexity)]
    pub fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
        now: i64,
    ) -> CoordinatorResult<Result<Vec<Result<(), GroupError>>, GroupError>> {
        let Some(g) = self.groups.get(group_id) else {
            return CoordinatorResult::reply(Err(GroupError::UnknownMemberId));
        };
        let mut g = g.clone();
        let mut results = Vec::with_capacity(members.len());
        let mut effects = Vec::new();
        for (member_id, instance) in members {
            let (r, fx) = g.leave(now, member_id, instance.as_deref());
            results.push(r);
            effects.extend(fx);
        }
        Self::group_result(vec![(g, effects)], Ok(results))
    }

    /// The groups the clock has something to do for: members or handed-out member ids to
    /// watch, or offsets past retention.
    pub fn due_for_tick(&self, now: i64) -> Vec<String> {
        let mut due: Vec<String> = self.groups.values().filter(|g| !g.is_idle()).map(|g| g.id.clone()).collect();
        for id in self.offsets.groups_with_expired(&self.groups, now, self.offsets_retention_ms) {
            if self.groups.get(&id).is_none_or(|g| g.is_idle()) {
                due.push(id);
            }
        }
        due
    }

    /// One group's clock: expire sessions, finish a timed-out rebalance, expire old
    /// offsets once the group has been empty long enough.
    pub fn tick(&self, group_id: &str, now: i64) -> CoordinatorResult<()> {
        let live = self.groups.get(group_id);
        let ticked = match live {
            Some(g) if !g.is_idle() => {
                let mut g = g.clone();
                let fx = g.tick(now);
                vec![(g, fx)]
            }
            _ => vec![],
        };
        let mut result = Self::group_result(ticked, ());
        // Expiry looks at the group as it is before this tick; a group that empties now
        // starts its retention clock now and expires on a later tick.
        result.records.extend(self.offsets.expiry_tombstones(group_id, live, now, self.offsets_retention_ms));
        result
    }

    // ---- Offsets ----

    /// OffsetCommit: the member check for the whole request (Kafka fails all partitions
    /// alike), then per partition the metadata size.
    #[allow(clippy::type_complexity)]
    pub fn commit_offsets(
        &self,
        group_id: &str,
        member: MemberRef<'_>,
        offsets: Vec<OffsetCommit>,
        now: i64,
    ) -> CoordinatorResult<Result<Vec<Result<(), CoordinatorError>>, CoordinatorError>> {
        let g = self.working_copy(group_id, now);
        if let Err(e) = validate_commit(&g, member) {
            return CoordinatorResult::reply(Err(e.into()));
        }
        let mut records = Vec::new();
        let results = offsets
            .into_iter()
            .map(|o| {
                if o.metadata.len() > MAX_METADATA_BYTES {
                    return Err(CoordinatorError::OffsetMetadataTooLarge);
                }
                records.push(OffsetsRecord::Offset {
                    group: group_id.to_owned(),
                    topic: o.topic,
                    partition: o.partition,
                    value: Some(CommittedOffset {
                        offset: o.offset,
                        leader_epoch: o.leader_epoch,
                        metadata: o.metadata,
                        commit_timestamp: now,
                    }),
                });
                Ok(())
            })
            .collect();
        // A commit to a group not seen before creates it (Empty), once the commit lands.
        let is_new = !self.groups.get(group_id).is_some_and(|g| g.state != GroupState::Dead);
        let groups = if is_new && !records.is_empty() { vec![g] } else { vec![] };
        CoordinatorResult { records, effects: vec![], reply: Ok(results), groups, on_write_error: None }
    }

    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Vec<(String, i32, Option<CommittedOffset>)> {
        self.offsets.fetch(group_id, partitions)
    }

    /// DeleteGroups: only an empty group; its offsets and metadata get tombstones.
    pub fn delete_group(&self, group_id: &str) -> CoordinatorResult<Result<(), CoordinatorError>> {
        match self.groups.get(group_id) {
            Some(g) if g.state != GroupState::Dead => {
                if !g.is_empty() {
                    return CoordinatorResult::reply(Err(CoordinatorError::NonEmptyGroup));
                }
            }
            _ => return CoordinatorResult::reply(Err(CoordinatorError::GroupIdNotFound)),
        }
        let mut records = self.offsets.group_tombstones(group_id);
        records.push(OffsetsRecord::Group { group: group_id.to_owned(), value: None });
        CoordinatorResult { records, effects: vec![], reply: Ok(()), groups: vec![], on_write_error: None }
    }

    /// OffsetDelete. `subscribed(group, topic)` tells whether a non-empty group still
    /// consumes the topic (decided by the caller, which can read the members' subscriptions).
    #[allow(clippy::type_complexity)]
    pub fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
        subscribed: impl Fn(&Group, &str) -> bool,
    ) -> CoordinatorResult<Result<Vec<Result<(), CoordinatorError>>, CoordinatorError>> {
        let Some(g) = self.groups.get(group_id) else {
            return CoordinatorResult::reply(Err(CoordinatorError::GroupIdNotFound));
        };
        let mut records = Vec::new();
        let results = partitions
            .iter()
            .map(|(t, p)| {
                if !g.is_empty() && subscribed(g, t) {
                    return Err(CoordinatorError::GroupSubscribedToTopic);
                }
                if self.offsets.contains(group_id, t, *p) {
                    records.push(OffsetsRecord::Offset {
                        group: group_id.to_owned(),
                        topic: t.clone(),
                        partition: *p,
                        value: None,
                    });
                }
                Ok(())
            })
            .collect();
        CoordinatorResult { records, effects: vec![], reply: Ok(results), groups: vec![], on_write_error: None }
    }

    /// The groups with committed offsets of `topic`.
    pub fn groups_with_topic(&self, topic: &str) -> Vec<String> {
        self.offsets.groups_with_topic(topic)
    }

    /// Tombstones for `group_id`'s committed offsets of a deleted topic, so a replay does
    /// not bring them back and a re-created topic starts without them.
    pub fn delete_topic_offsets(&self, group_id: &str, topic: &str) -> CoordinatorResult<()> {
        let mut r = CoordinatorResult::reply(());
        r.records = self.offsets.topic_tombstones(group_id, topic);
        r
    }
}

/// Rebalances at info, logged where a decision becomes real (never for a decision whose
/// write failed).
fn log_transition(before: Option<&Group>, after: &Group) {
    let (state, generation) = before.map_or((GroupState::Empty, 0), |g| (g.state, g.generation_id));
    if state == after.state && generation == after.generation_id {
        return;
    }
    let members = after.members.len();
    match after.state {
        GroupState::PreparingRebalance if state != GroupState::PreparingRebalance => {
            tracing::info!(group = %after.id, generation = after.generation_id, members, "group rebalance started");
        }
        GroupState::CompletingRebalance | GroupState::Stable if generation != after.generation_id => {
            tracing::info!(
                group = %after.id,
                generation = after.generation_id,
                members,
                protocol = after.protocol_name.as_deref().unwrap_or(""),
                leader = after.leader_id.as_deref().unwrap_or(""),
                "group rebalance completed"
            );
        }
        GroupState::Empty if state != GroupState::Empty => {
            tracing::info!(group = %after.id, generation = after.generation_id, "group is empty");
        }
        _ => {}
    }
}
