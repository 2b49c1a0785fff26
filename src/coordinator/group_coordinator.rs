//! The group coordinator shell: owns every group's state machine, parks JoinGroup and
//! SyncGroup requests until their state machine answers, applies committed offsets, and
//! writes group metadata and offsets to `__consumer_offsets` through an [`OffsetsLog`]
//! before anything is acknowledged.
//!
//! One lock guards all groups and offsets; it is never held across an `.await` (parked
//! requests wait on oneshot channels outside it).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::group::{
    Effect, Group, GroupError, GroupLimits, GroupState, JoinOutcome, JoinParams, RestoredMember, SyncOutcome,
    SyncParams, Token,
};
use super::offsets_codec::{CommittedOffset, GroupValue, OffsetsRecord};

/// Where coordinator records go: the `__consumer_offsets` topic. Appends are durable
/// (per the broker's flush policy) when `append` returns.
pub trait OffsetsLog {
    fn append(&self, records: &[OffsetsRecord]) -> Result<(), String>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordinatorError {
    Group(GroupError),
    /// The offsets log could not be written.
    Storage,
    GroupIdNotFound,
    NonEmptyGroup,
    /// OffsetDelete of a topic the (non-empty) group still consumes.
    GroupSubscribedToTopic,
}

impl From<GroupError> for CoordinatorError {
    fn from(e: GroupError) -> Self {
        CoordinatorError::Group(e)
    }
}

enum Waiter {
    Join(oneshot::Sender<JoinOutcome>),
    Sync(oneshot::Sender<SyncOutcome>),
}

type PartitionOffsets = BTreeMap<(String, i32), CommittedOffset>;

#[derive(Default)]
struct State {
    groups: HashMap<String, Group>,
    offsets: HashMap<String, PartitionOffsets>,
    waiters: HashMap<Token, Waiter>,
}

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
}

pub struct GroupCoordinator {
    limits: GroupLimits,
    offsets_retention_ms: i64,
    state: Mutex<State>,
    next_token: AtomicU64,
}

pub enum Pending<T> {
    Ready(T),
    Wait(oneshot::Receiver<T>),
}

impl GroupCoordinator {
    pub fn new(limits: GroupLimits, offsets_retention_ms: i64) -> GroupCoordinator {
        GroupCoordinator {
            limits,
            offsets_retention_ms,
            state: Mutex::new(State::default()),
            next_token: AtomicU64::new(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Rebuild groups and offsets by replaying `__consumer_offsets`, oldest first.
    pub fn load(&self, records: impl IntoIterator<Item = OffsetsRecord>, now: i64) {
        let mut st = self.lock();
        let mut groups: HashMap<String, Option<GroupValue>> = HashMap::new();
        for r in records {
            match r {
                OffsetsRecord::Offset { group, topic, partition, value } => {
                    let offsets = st.offsets.entry(group).or_default();
                    match value {
                        Some(v) => offsets.insert((topic, partition), v),
                        None => offsets.remove(&(topic, partition)),
                    };
                }
                OffsetsRecord::Group { group, value } => {
                    groups.insert(group, value);
                }
            }
        }
        st.offsets.retain(|_, o| !o.is_empty());
        for (id, value) in groups {
            let Some(v) = value else { continue };
            let g = Group::restore(
                &id,
                self.limits,
                v.generation,
                (!v.protocol_type.is_empty()).then_some(v.protocol_type),
                v.protocol,
                v.leader,
                v.members,
                now,
            );
            st.groups.insert(id, g);
        }
        let ids: Vec<String> = st.offsets.keys().filter(|g| !st.groups.contains_key(*g)).cloned().collect();
        for id in ids {
            st.groups.insert(id.clone(), Group::new(&id, self.limits, now));
        }
        tracing::info!(groups = st.groups.len(), "group coordinator loaded __consumer_offsets");
    }

    fn token(&self) -> Token {
        self.next_token.fetch_add(1, Ordering::Relaxed)
    }

    /// Carry out a state machine's effects. Persist first: responses go out only after
    /// the group's new state is in the log.
    fn apply(&self, st: &mut State, group_id: &str, effects: Vec<Effect>, log: &dyn OffsetsLog) {
        if effects.iter().any(|e| matches!(e, Effect::PersistGroup)) {
            if let Some(g) = st.groups.get(group_id) {
                if let Err(e) = log.append(&[group_record(g)]) {
                    tracing::error!(group = group_id, error = %e, "failed to persist group metadata");
                }
            }
        }
        for e in effects {
            match e {
                Effect::Join(t, outcome) => {
                    if let Some(Waiter::Join(tx)) = st.waiters.remove(&t) {
                        let _ = tx.send(outcome);
                    }
                }
                Effect::Sync(t, outcome) => {
                    if let Some(Waiter::Sync(tx)) = st.waiters.remove(&t) {
                        let _ = tx.send(outcome);
                    }
                }
                Effect::PersistGroup => {}
            }
        }
    }

    pub fn join(
        &self,
        group_id: &str,
        params: JoinParams,
        now: i64,
        log: &dyn OffsetsLog,
    ) -> oneshot::Receiver<JoinOutcome> {
        let token = self.token();
        let (tx, rx) = oneshot::channel();
        let mut st = self.lock();
        st.waiters.insert(token, Waiter::Join(tx));
        // Kafka prefixes new member ids with the static instance id, else the client id.
        let prefix = params.group_instance_id.clone().unwrap_or_else(|| params.client_id.clone());
        let limits = self.limits;
        let g = st.groups.entry(group_id.to_owned()).or_insert_with(|| Group::new(group_id, limits, now));
        if g.state == GroupState::Dead {
            *g = Group::new(group_id, limits, now);
        }
        let fx = g.join(now, token, params, || format!("{prefix}-{}", uuid::Uuid::new_v4()));
        self.apply(&mut st, group_id, fx, log);
        rx
    }

    pub fn sync(
        &self,
        group_id: &str,
        req: SyncParams<'_>,
        now: i64,
        log: &dyn OffsetsLog,
    ) -> oneshot::Receiver<SyncOutcome> {
        let token = self.token();
        let (tx, rx) = oneshot::channel();
        let mut st = self.lock();
        let Some(g) = st.groups.get_mut(group_id) else {
            let _ = tx.send(SyncOutcome {
                error: Some(GroupError::UnknownMemberId),
                protocol_type: None,
                protocol_name: None,
                assignment: Bytes::new(),
            });
            return rx;
        };
        let fx = g.sync(now, token, req);
        st.waiters.insert(token, Waiter::Sync(tx));
        self.apply(&mut st, group_id, fx, log);
        rx
    }

    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        generation_id: i32,
        group_instance_id: Option<&str>,
        now: i64,
    ) -> Result<(), GroupError> {
        let mut st = self.lock();
        match st.groups.get_mut(group_id) {
            Some(g) => g.heartbeat(now, member_id, generation_id, group_instance_id),
            None => Err(GroupError::UnknownMemberId),
        }
    }

    /// LeaveGroup for several members; `Err` when the group does not exist.
    pub fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
        now: i64,
        log: &dyn OffsetsLog,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let mut st = self.lock();
        let Some(g) = st.groups.get_mut(group_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        let mut results = Vec::with_capacity(members.len());
        let mut effects = Vec::new();
        for (member_id, instance) in members {
            let (r, fx) = g.leave(now, member_id, instance.as_deref());
            results.push(r);
            effects.extend(fx);
        }
        self.apply(&mut st, group_id, effects, log);
        Ok(results)
    }

    /// Expire sessions, finish timed-out rebalances, expire old offsets of empty groups.
    pub fn tick(&self, now: i64, log: &dyn OffsetsLog) {
        let mut st = self.lock();
        let ids: Vec<String> = st.groups.keys().cloned().collect();
        for id in ids {
            let fx = match st.groups.get_mut(&id) {
                Some(g) => g.tick(now),
                None => continue,
            };
            if !fx.is_empty() {
                self.apply(&mut st, &id, fx, log);
            }
        }
        self.expire_offsets(&mut st, now, log);
    }

    fn expire_offsets(&self, st: &mut State, now: i64, log: &dyn OffsetsLog) {
        let retention = self.offsets_retention_ms;
        let mut tombstones = Vec::new();
        for (gid, offsets) in st.offsets.iter_mut() {
            let empty_since = match st.groups.get(gid) {
                Some(g) if g.state == GroupState::Empty => g.state_timestamp_ms,
                Some(_) => continue,
                None => 0,
            };
            if empty_since + retention > now {
                continue;
            }
            let expired: Vec<(String, i32)> =
                offsets.iter().filter(|(_, o)| o.commit_timestamp + retention <= now).map(|(k, _)| k.clone()).collect();
            for (topic, partition) in expired {
                offsets.remove(&(topic.clone(), partition));
                tombstones.push(OffsetsRecord::Offset { group: gid.clone(), topic, partition, value: None });
            }
        }
        if tombstones.is_empty() {
            return;
        }
        tracing::info!(count = tombstones.len(), "expiring committed offsets of empty groups");
        if let Err(e) = log.append(&tombstones) {
            tracing::error!(error = %e, "failed to write offset expiry tombstones");
        }
        st.offsets.retain(|_, o| !o.is_empty());
    }

    /// OffsetCommit. `generation_id < 0` with an empty member id is a "simple" commit,
    /// allowed only while the group has no members.
    pub fn commit_offsets(
        &self,
        group_id: &str,
        member: MemberRef<'_>,
        offsets: Vec<(String, i32, CommittedOffset)>,
        now: i64,
        log: &dyn OffsetsLog,
    ) -> Result<(), CoordinatorError> {
        let MemberRef { member_id, generation_id, group_instance_id } = member;
        let mut st = self.lock();
        let limits = self.limits;
        let g = st.groups.entry(group_id.to_owned()).or_insert_with(|| Group::new(group_id, limits, now));
        if g.state == GroupState::Dead {
            *g = Group::new(group_id, limits, now);
        }
        if generation_id < 0 && member_id.is_empty() {
            if !g.is_empty() {
                return Err(GroupError::IllegalGeneration.into());
            }
        } else {
            if let Some(iid) = group_instance_id {
                let fenced = g.members.get(member_id).is_some_and(|m| m.group_instance_id.as_deref() != Some(iid));
                if fenced {
                    return Err(GroupError::FencedInstanceId.into());
                }
            }
            if !g.members.contains_key(member_id) {
                return Err(GroupError::UnknownMemberId.into());
            }
            if generation_id != g.generation_id {
                return Err(GroupError::IllegalGeneration.into());
            }
            if g.state == GroupState::CompletingRebalance {
                return Err(GroupError::RebalanceInProgress.into());
            }
        }
        let records: Vec<OffsetsRecord> = offsets
            .iter()
            .map(|(t, p, o)| OffsetsRecord::Offset {
                group: group_id.to_owned(),
                topic: t.clone(),
                partition: *p,
                value: Some(o.clone()),
            })
            .collect();
        if let Err(e) = log.append(&records) {
            tracing::error!(group = group_id, error = %e, "failed to persist committed offsets");
            return Err(CoordinatorError::Storage);
        }
        let map = st.offsets.entry(group_id.to_owned()).or_default();
        for (t, p, o) in offsets {
            map.insert((t, p), o);
        }
        Ok(())
    }

    /// Committed offsets of a group: for the given partitions, or all it has.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Vec<(String, i32, Option<CommittedOffset>)> {
        let st = self.lock();
        let offsets = st.offsets.get(group_id);
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

    pub fn describe(&self, group_id: &str) -> Option<GroupDescription> {
        let st = self.lock();
        let g = st.groups.get(group_id)?;
        let protocol = g.protocol_name.clone().unwrap_or_default();
        Some(GroupDescription {
            group_id: g.id.clone(),
            state: g.state,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol_name: if g.state == GroupState::Stable { protocol.clone() } else { String::new() },
            members: g
                .members
                .values()
                .map(|m| MemberDescription {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: m.metadata_for(&protocol),
                    assignment: if g.state == GroupState::Stable { m.assignment.clone() } else { Bytes::new() },
                })
                .collect(),
        })
    }

    pub fn list(&self) -> Vec<GroupListing> {
        let st = self.lock();
        let mut v: Vec<GroupListing> = st
            .groups
            .values()
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

    /// DeleteGroups: only an empty group; its offsets and metadata get tombstones.
    pub fn delete_group(&self, group_id: &str, now: i64, log: &dyn OffsetsLog) -> Result<(), CoordinatorError> {
        let mut st = self.lock();
        let exists = st.groups.get(group_id).is_some_and(|g| g.state != GroupState::Dead);
        if !exists {
            return Err(CoordinatorError::GroupIdNotFound);
        }
        if st.groups.get(group_id).is_some_and(|g| !g.is_empty()) {
            return Err(CoordinatorError::NonEmptyGroup);
        }
        let mut records: Vec<OffsetsRecord> = st
            .offsets
            .get(group_id)
            .map(|o| {
                o.keys()
                    .map(|(t, p)| OffsetsRecord::Offset {
                        group: group_id.to_owned(),
                        topic: t.clone(),
                        partition: *p,
                        value: None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        records.push(OffsetsRecord::Group { group: group_id.to_owned(), value: None });
        log.append(&records).map_err(|e| {
            tracing::error!(group = group_id, error = %e, "failed to delete group");
            CoordinatorError::Storage
        })?;
        st.offsets.remove(group_id);
        if let Some(g) = st.groups.get_mut(group_id) {
            g.mark_dead(now);
        }
        st.groups.remove(group_id);
        Ok(())
    }

    /// OffsetDelete. `subscribed(topic)` tells whether a non-empty group still consumes
    /// the topic (decided by the caller, which can read the members' subscriptions).
    pub fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
        subscribed: impl Fn(&Group, &str) -> bool,
        log: &dyn OffsetsLog,
    ) -> Result<Vec<Result<(), CoordinatorError>>, CoordinatorError> {
        let mut st = self.lock();
        let Some(g) = st.groups.get(group_id) else {
            return Err(CoordinatorError::GroupIdNotFound);
        };
        let results: Vec<Result<(), CoordinatorError>> =
            partitions
                .iter()
                .map(|(t, _)| {
                    if !g.is_empty() && subscribed(g, t) {
                        Err(CoordinatorError::GroupSubscribedToTopic)
                    } else {
                        Ok(())
                    }
                })
                .collect();
        let records: Vec<OffsetsRecord> = partitions
            .iter()
            .zip(&results)
            .filter(|(_, r)| r.is_ok())
            .filter(|((t, p), _)| st.offsets.get(group_id).is_some_and(|o| o.contains_key(&(t.clone(), *p))))
            .map(|((t, p), _)| OffsetsRecord::Offset {
                group: group_id.to_owned(),
                topic: t.clone(),
                partition: *p,
                value: None,
            })
            .collect();
        if !records.is_empty() {
            log.append(&records).map_err(|_| CoordinatorError::Storage)?;
            if let Some(o) = st.offsets.get_mut(group_id) {
                for r in &records {
                    if let OffsetsRecord::Offset { topic, partition, .. } = r {
                        o.remove(&(topic.clone(), *partition));
                    }
                }
            }
        }
        Ok(results)
    }

    /// Remove every group's committed offsets for a deleted topic (with tombstones, so a
    /// replay does not bring them back and a re-created topic starts without them).
    pub fn delete_topic_offsets(&self, topic: &str, log: &dyn OffsetsLog) {
        let mut st = self.lock();
        let mut tombstones = Vec::new();
        for (group, offsets) in st.offsets.iter_mut() {
            offsets.retain(|(t, p), _| {
                if t == topic {
                    tombstones.push(OffsetsRecord::Offset {
                        group: group.clone(),
                        topic: t.clone(),
                        partition: *p,
                        value: None,
                    });
                    false
                } else {
                    true
                }
            });
        }
        st.offsets.retain(|_, o| !o.is_empty());
        if let Err(e) = log.append(&tombstones) {
            tracing::error!(topic, error = %e, "failed to write offset tombstones for a deleted topic");
        }
    }
}

fn group_record(g: &Group) -> OffsetsRecord {
    let protocol = g.protocol_name.clone().unwrap_or_default();
    OffsetsRecord::Group {
        group: g.id.clone(),
        value: Some(GroupValue {
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            generation: g.generation_id,
            protocol: g.protocol_name.clone(),
            leader: g.leader_id.clone(),
            state_timestamp: g.state_timestamp_ms,
            members: g
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

/// Await a parked response, or the given fallback if the coordinator dropped it.
pub async fn wait<T>(rx: oneshot::Receiver<T>, timeout: std::time::Duration, fallback: T) -> T {
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(v)) => v,
        _ => fallback,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[derive(Default)]
    struct MemLog(RefCell<Vec<OffsetsRecord>>);
    impl OffsetsLog for MemLog {
        fn append(&self, records: &[OffsetsRecord]) -> Result<(), String> {
            self.0.borrow_mut().extend_from_slice(records);
            Ok(())
        }
    }

    fn co(offset: i64, ts: i64) -> CommittedOffset {
        CommittedOffset { offset, leader_epoch: -1, metadata: String::new(), commit_timestamp: ts }
    }

    #[test]
    fn commits_survive_a_replay_and_deletes_leave_tombstones() {
        let log = MemLog::default();
        let c = GroupCoordinator::new(GroupLimits::default(), 1000);
        c.commit_offsets(
            "g",
            MemberRef::simple(),
            vec![("t".into(), 0, co(5, 10)), ("t".into(), 1, co(7, 10))],
            10,
            &log,
        )
        .unwrap();
        assert_eq!(
            c.fetch_offsets("g", Some(&[("t".into(), 1), ("t".into(), 9)])),
            vec![("t".into(), 1, Some(co(7, 10))), ("t".into(), 9, None)]
        );
        let replayed = GroupCoordinator::new(GroupLimits::default(), 1000);
        replayed.load(log.0.borrow().clone(), 20);
        assert_eq!(replayed.fetch_offsets("g", None).len(), 2);
        assert_eq!(replayed.list().len(), 1);
        replayed.delete_group("g", 30, &log).unwrap();
        assert_eq!(replayed.delete_group("g", 30, &log), Err(CoordinatorError::GroupIdNotFound));
        let again = GroupCoordinator::new(GroupLimits::default(), 1000);
        again.load(log.0.borrow().clone(), 40);
        assert!(again.fetch_offsets("g", None).is_empty());
        assert!(again.list().is_empty());
    }

    #[test]
    fn deleting_a_topic_removes_its_offsets_durably() {
        let log = MemLog::default();
        let c = GroupCoordinator::new(GroupLimits::default(), 1000);
        c.commit_offsets(
            "g",
            MemberRef::simple(),
            vec![("gone".into(), 0, co(5, 10)), ("kept".into(), 0, co(6, 10))],
            10,
            &log,
        )
        .unwrap();
        c.delete_topic_offsets("gone", &log);
        assert_eq!(c.fetch_offsets("g", None), vec![("kept".into(), 0, Some(co(6, 10)))]);
        let replayed = GroupCoordinator::new(GroupLimits::default(), 1000);
        replayed.load(log.0.borrow().clone(), 20);
        assert_eq!(replayed.fetch_offsets("g", None), vec![("kept".into(), 0, Some(co(6, 10)))]);
    }

    #[test]
    fn offsets_of_empty_groups_expire_after_retention() {
        let log = MemLog::default();
        let c = GroupCoordinator::new(GroupLimits::default(), 1000);
        c.commit_offsets("g", MemberRef::simple(), vec![("t".into(), 0, co(5, 10))], 10, &log).unwrap();
        c.tick(500, &log);
        assert_eq!(c.fetch_offsets("g", None).len(), 1);
        c.tick(1011, &log);
        assert!(c.fetch_offsets("g", None).is_empty());
        assert!(matches!(log.0.borrow().last(), Some(OffsetsRecord::Offset { value: None, .. })));
    }

    #[test]
    fn simple_commits_are_refused_while_the_group_has_members() {
        let log = MemLog::default();
        let c = GroupCoordinator::new(GroupLimits::default(), 1000);
        let params = JoinParams {
            member_id: String::new(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::new())],
            require_known_member_id: false,
        };
        let mut rx = c.join("g", params, 0, &log);
        assert!(rx.try_recv().is_err(), "the first join completes on a clock tick");
        c.tick(0, &log);
        let joined = rx.try_recv().unwrap();
        assert_eq!(joined.generation_id, 1);
        assert_eq!(
            c.commit_offsets("g", MemberRef::simple(), vec![("t".into(), 0, co(1, 1))], 1, &log),
            Err(CoordinatorError::Group(GroupError::IllegalGeneration))
        );
        assert_eq!(
            c.commit_offsets(
                "g",
                MemberRef { member_id: &joined.member_id, generation_id: 1, group_instance_id: None },
                vec![("t".into(), 0, co(1, 1))],
                1,
                &log
            ),
            Err(CoordinatorError::Group(GroupError::RebalanceInProgress))
        );
        let sync = SyncParams {
            member_id: &joined.member_id,
            generation_id: 1,
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![],
        };
        let mut rx = c.sync("g", sync, 2, &log);
        assert!(rx.try_recv().unwrap().error.is_none());
        c.commit_offsets(
            "g",
            MemberRef { member_id: &joined.member_id, generation_id: 1, group_instance_id: None },
            vec![("t".into(), 0, co(1, 1))],
            3,
            &log,
        )
        .unwrap();
        assert_eq!(c.delete_group("g", 4, &log), Err(CoordinatorError::NonEmptyGroup));
    }
}
