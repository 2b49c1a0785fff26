//! The group coordinator shell (Kafka's `CoordinatorRuntime`): one [`Shard`] per
//! `__consumer_offsets` partition this broker leads ([`Partitions`]); feeds requests and the
//! clock to the shard of the group's partition, writes the records each decision returns
//! to that partition through its [`OffsetsWriter`], and only then makes the decision real
//! and answers: parked JoinGroup/SyncGroup requests through oneshot channels, the rest as
//! return values. A failed write changes nothing and every request the decision would
//! have answered gets the write error; the one exception is Kafka's own reaction to a
//! failed assignment write, which makes the group rebalance ([`super::shard::OnWriteError`]).
//!
//! Partitions are loaded and unloaded one by one as their leadership moves
//! ([`GroupCoordinator::on_election`], [`GroupCoordinator::complete_load`],
//! [`GroupCoordinator::on_resignation`]; Kafka's `onElection`/`onResignation`): a load
//! replays that partition's records only, and a resignation answers that partition's
//! parked requests NOT_COORDINATOR.
//!
//! Locks: `state` (a std mutex) guards the shards and the parked requests and is never held
//! across an `.await`; a group's turn in `turns` ([`GroupLocks`]) is held from a decision
//! through its write to its apply, so a group's decisions apply in the order they were
//! taken and each sees the state its predecessors left, while other groups decide and
//! write meanwhile. Every decision touches one group's state only (its group record and
//! its offsets; the clock and topic deletion decide group by group), so records of
//! different groups may reach the log in any order without changing what a replay
//! builds. Heartbeats write nothing and take no turn. A request future dropped while it
//! holds a turn (only at shutdown) abandons its decision; the log is then at most ahead
//! of memory, never behind, and the next start replays it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

use super::error::CoordinatorError;
use super::group::{Effect, Group, GroupError, GroupLimits, JoinOutcome, JoinParams, SyncOutcome, SyncParams, Token};
use super::group_locks::GroupLocks;
use super::loaded::{Load, Partitions, Route};
use super::offsets::{MemberRef, OffsetCommit};
use super::offsets_codec::{CommittedOffset, OffsetsRecord};
use super::shard::{CoordinatorResult, Shard};
use super::views::{self, GroupDescription, GroupListing};
use super::writer::OffsetsWriter;

enum Waiter {
    Join(oneshot::Sender<JoinOutcome>),
    Sync(oneshot::Sender<SyncOutcome>),
}

struct State {
    partitions: Partitions,
    /// Parked JoinGroup/SyncGroup requests, with the partition of their group.
    waiters: HashMap<Token, (i32, Waiter)>,
}

fn reject(waiter: Waiter, e: GroupError) {
    match waiter {
        Waiter::Join(tx) => {
            let _ = tx.send(JoinOutcome::error(e, ""));
        }
        Waiter::Sync(tx) => {
            let _ = tx.send(SyncOutcome::error(e));
        }
    }
}

impl State {
    fn answer(&mut self, effects: Vec<Effect>) {
        for e in effects {
            match e {
                Effect::Join(t, outcome) => {
                    if let Some((_, Waiter::Join(tx))) = self.waiters.remove(&t) {
                        let _ = tx.send(outcome);
                    }
                }
                Effect::Sync(t, outcome) => {
                    if let Some((_, Waiter::Sync(tx))) = self.waiters.remove(&t) {
                        let _ = tx.send(outcome);
                    }
                }
                Effect::PersistGroup => {}
            }
        }
    }

    /// A decision's write failed: every request it answered or parked gets the error
    /// instead, and the live group forgets those requests (it never saw the decision).
    fn fail(&mut self, route: Route, mut tokens: Vec<Token>, e: GroupError) {
        tokens.sort_unstable();
        tokens.dedup();
        if let Some(shard) = self.partitions.shard_mut(route) {
            shard.forget_parked(&tokens);
        }
        for t in tokens {
            if let Some((_, w)) = self.waiters.remove(&t) {
                reject(w, e);
            }
        }
    }

    /// Every parked request of `partition`'s groups gets `e` (the partition is unloaded).
    fn fail_partition(&mut self, partition: i32, e: GroupError) {
        let tokens: Vec<Token> = self.waiters.iter().filter(|(_, (p, _))| *p == partition).map(|(t, _)| *t).collect();
        for t in tokens {
            if let Some((_, w)) = self.waiters.remove(&t) {
                reject(w, e);
            }
        }
    }
}

pub struct GroupCoordinator {
    state: Mutex<State>,
    turns: GroupLocks,
    writer: Arc<dyn OffsetsWriter>,
    next_token: AtomicU64,
    limits: GroupLimits,
    offsets_retention_ms: i64,
}

impl GroupCoordinator {
    /// A coordinator of a `__consumer_offsets` of `partitions` partitions that owns none of
    /// them yet: every group answers NOT_COORDINATOR until its partition is elected.
    pub fn new(
        limits: GroupLimits,
        offsets_retention_ms: i64,
        partitions: i32,
        writer: Arc<dyn OffsetsWriter>,
    ) -> GroupCoordinator {
        GroupCoordinator {
            state: Mutex::new(State { partitions: Partitions::new(partitions), waiters: HashMap::new() }),
            turns: GroupLocks::default(),
            writer,
            next_token: AtomicU64::new(1),
            limits,
            offsets_retention_ms,
        }
    }

    /// The partition count group ids hash over.
    pub fn partition_count(&self) -> i32 {
        self.lock().partitions.count()
    }

    /// The `__consumer_offsets` partition of `group_id`.
    pub fn partition_for(&self, group_id: &str) -> i32 {
        self.lock().partitions.partition_for(group_id)
    }

    /// `__consumer_offsets` has `count` partitions (the topic's own count wins over the
    /// configured one). A change unloads every partition: their groups hash elsewhere now.
    pub fn set_partition_count(&self, count: i32) {
        let mut st = self.lock();
        for p in st.partitions.set_count(count) {
            st.fail_partition(p, GroupError::NotCoordinator);
        }
    }

    /// `(partition, leader epoch)` of each partition loaded or loading.
    pub fn owned_partitions(&self) -> Vec<(i32, i32)> {
        self.lock().partitions.owned()
    }

    /// This broker became the leader of `partition` in `leader_epoch` (Kafka's
    /// `onElection`): its groups answer COORDINATOR_LOAD_IN_PROGRESS until
    /// [`GroupCoordinator::complete_load`] hands in the partition's records. `None` when it
    /// is loaded or loading in that epoch already.
    pub fn on_election(&self, partition: i32, leader_epoch: i32) -> Option<Load> {
        let mut st = self.lock();
        let load = st.partitions.elect(partition, leader_epoch)?;
        // Loaded again in a new epoch: what was parked belongs to the load it replaces.
        st.fail_partition(partition, GroupError::NotCoordinator);
        Some(load)
    }

    /// Rebuild the groups and offsets of `load`'s partition from its records, oldest
    /// first, through the same replay that applies every written decision. Dropped if the
    /// partition was resigned or elected again meanwhile.
    pub fn complete_load(&self, load: Load, records: impl IntoIterator<Item = OffsetsRecord>, now: i64) {
        let mut shard = Shard::new(self.limits, self.offsets_retention_ms);
        let mut replayed = 0usize;
        for r in records {
            shard.replay(r, now);
            replayed += 1;
        }
        shard.finish_load(now);
        let groups = shard.groups.len();
        if self.lock().partitions.loaded(load, shard) {
            // A new topic's 50 empty partitions are not worth 50 lines.
            if replayed > 0 {
                tracing::info!(
                    partition = load.partition,
                    groups,
                    records = replayed,
                    "group coordinator loaded __consumer_offsets partition"
                );
            } else {
                tracing::debug!(
                    partition = load.partition,
                    "group coordinator loaded empty __consumer_offsets partition"
                );
            }
        } else {
            tracing::debug!(partition = load.partition, "dropping a stale load of __consumer_offsets");
        }
    }

    /// Elect and load `partition` in one step (its records at hand).
    pub fn load_partition(
        &self,
        partition: i32,
        leader_epoch: i32,
        records: impl IntoIterator<Item = OffsetsRecord>,
        now: i64,
    ) {
        if let Some(load) = self.on_election(partition, leader_epoch) {
            self.complete_load(load, records, now);
        }
    }

    /// This broker stopped leading `partition` (Kafka's `onResignation`): its groups are
    /// another broker's now. Its parked requests get NOT_COORDINATOR and find the new one.
    pub fn on_resignation(&self, partition: i32) {
        let mut st = self.lock();
        if st.partitions.resign(partition) {
            st.fail_partition(partition, GroupError::NotCoordinator);
            tracing::info!(partition, "group coordinator unloaded __consumer_offsets partition");
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn token(&self) -> Token {
        self.next_token.fetch_add(1, Ordering::Relaxed)
    }

    /// In `group_id`'s turn: take a decision about that group on its partition's shard,
    /// write its records to that partition, then apply it and answer. `parked` is the
    /// caller's own request when it may wait past this decision.
    async fn decide<T>(
        &self,
        group_id: &str,
        now: i64,
        parked: Option<(Token, Waiter)>,
        decide: impl FnOnce(&Shard) -> CoordinatorResult<T>,
    ) -> Result<T, GroupError> {
        let _turn = self.turns.lock(group_id).await;
        let own = parked.as_ref().map(|(t, _)| *t);
        let (route, result) = {
            let mut st = self.lock();
            let (route, shard) = match st.partitions.route(group_id) {
                Ok(routed) => routed,
                Err(e) => {
                    if let Some((_, w)) = parked {
                        reject(w, e);
                    }
                    return Err(e);
                }
            };
            let result = decide(shard);
            if let Some((t, w)) = parked {
                st.waiters.insert(t, (route.partition, w));
            }
            (route, result)
        };
        let (staged, effects, reply) = result.into_staged();
        let written = match staged.records() {
            [] => Ok(()),
            records => self.writer.append(route.partition, records).await,
        };
        let mut st = self.lock();
        let mut tokens: Vec<Token> = effects
            .iter()
            .filter_map(|e| match e {
                Effect::Join(t, _) | Effect::Sync(t, _) => Some(*t),
                Effect::PersistGroup => None,
            })
            .collect();
        tokens.extend(own);
        if st.partitions.shard_mut(route).is_none() {
            // The partition was unloaded (or reloaded) during the write: the records are in
            // the log for whoever loads it next; this broker answers for it no more.
            st.fail(route, tokens, GroupError::NotCoordinator);
            return Err(GroupError::NotCoordinator);
        }
        match written {
            Ok(()) => {
                if let Some(shard) = st.partitions.shard_mut(route) {
                    shard.apply(staged, now);
                }
                st.answer(effects);
                Ok(reply)
            }
            Err(e) => {
                tracing::error!(error = %e, "coordinator write failed; its requests get the error");
                st.fail(route, tokens, GroupError::Write(e));
                let reaction = st.partitions.shard_mut(route).map(|s| s.write_failed(staged, now)).unwrap_or_default();
                st.answer(reaction);
                Err(GroupError::Write(e))
            }
        }
    }

    /// JoinGroup. The receiver resolves when the group answers, which may be a later
    /// decision's (the rebalance completing); never before that decision is written.
    pub async fn join(&self, group_id: &str, params: JoinParams, now: i64) -> oneshot::Receiver<JoinOutcome> {
        let token = self.token();
        let (tx, rx) = oneshot::channel();
        // Kafka prefixes new member ids with the static instance id, else the client id.
        let prefix = params.group_instance_id.clone().unwrap_or_else(|| params.client_id.clone());
        let new_id = || format!("{prefix}-{}", uuid::Uuid::new_v4());
        // A failed write has answered the request already.
        let _ = self
            .decide(group_id, now, Some((token, Waiter::Join(tx))), |s| s.join(group_id, token, params, now, new_id))
            .await;
        rx
    }

    /// SyncGroup; answered as [`GroupCoordinator::join`] is.
    pub async fn sync(&self, group_id: &str, params: SyncParams<'_>, now: i64) -> oneshot::Receiver<SyncOutcome> {
        let token = self.token();
        let (tx, rx) = oneshot::channel();
        let _ =
            self.decide(group_id, now, Some((token, Waiter::Sync(tx))), |s| s.sync(group_id, token, params, now)).await;
        rx
    }

    /// Heartbeat. It writes nothing, so it waits for no write: it reads and refreshes the
    /// committed state at once, also while a decision of its group is being written
    /// (`Shard::apply` keeps the refreshed session time).
    pub async fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        generation_id: i32,
        group_instance_id: Option<&str>,
        now: i64,
    ) -> Result<(), GroupError> {
        self.lock().partitions.route_mut(group_id)?.heartbeat(
            group_id,
            member_id,
            generation_id,
            group_instance_id,
            now,
        )
    }

    /// LeaveGroup for several members; `Err` when the group does not exist or the write
    /// failed.
    pub async fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
        now: i64,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        self.decide(group_id, now, None, |s| s.leave(group_id, members, now)).await?
    }

    /// The clock: session expiry, rebalance and sync timeouts, offset expiry, decided
    /// group by group in each group's turn, all groups at once (a group whose write is
    /// slow delays only its own timers). A failed write leaves that group as it was; the
    /// next tick decides again.
    pub async fn tick(&self, now: i64) {
        let due: Vec<String> = self.lock().partitions.active().flat_map(|(_, s)| s.due_for_tick(now)).collect();
        join_all(due.iter().map(|id| async move {
            let _ = self.decide(id, now, None, |s| s.tick(id, now)).await;
        }))
        .await;
    }

    /// One group's clock, now: what a JoinGroup runs after its decision, so that a new
    /// group's initial delayed join whose delay has already passed (0 ms, the default)
    /// completes at once, as Kafka's fires on its 1 ms timer, instead of waiting up to a
    /// period of the broker's shared clock. A longer delay is left to that clock.
    pub async fn tick_group(&self, group_id: &str, now: i64) {
        let _ = self.decide(group_id, now, None, |s| s.tick(group_id, now)).await;
    }

    /// OffsetCommit: `Err` for the whole request (member checks, a failed write), else a
    /// result per partition in the order given.
    pub async fn commit_offsets(
        &self,
        group_id: &str,
        member: MemberRef<'_>,
        offsets: Vec<OffsetCommit>,
        now: i64,
    ) -> Result<Vec<Result<(), CoordinatorError>>, CoordinatorError> {
        self.decide(group_id, now, None, |s| s.commit_offsets(group_id, member, offsets, now)).await?
    }

    /// Committed offsets of a group: for the given partitions, or all it has; `Err` when
    /// this broker does not serve the group's partition (yet).
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<Vec<(String, i32, Option<CommittedOffset>)>, GroupError> {
        Ok(self.lock().partitions.route(group_id)?.1.fetch_offsets(group_id, partitions))
    }

    /// `Ok(None)`: no such group on its partition, which this broker serves.
    pub fn describe(&self, group_id: &str) -> Result<Option<GroupDescription>, GroupError> {
        Ok(self.lock().partitions.route(group_id)?.1.groups.get(group_id).map(views::describe))
    }

    /// The groups of every partition this broker serves; Kafka's answer while any of its
    /// partitions still loads is COORDINATOR_LOAD_IN_PROGRESS.
    pub fn list(&self) -> Result<Vec<GroupListing>, GroupError> {
        let st = self.lock();
        if st.partitions.is_loading() {
            return Err(GroupError::CoordinatorLoadInProgress);
        }
        Ok(views::list(st.partitions.active().flat_map(|(_, s)| s.groups.values())))
    }

    /// Generations and committed offsets of every group of every partition served here,
    /// for `/metrics`.
    pub fn metrics_view(&self) -> views::GroupsMetricsView {
        let st = self.lock();
        let mut view = views::GroupsMetricsView::default();
        for (_, s) in st.partitions.active() {
            let v = views::metrics_view(s.groups.values(), &s.offsets);
            view.generations.extend(v.generations);
            view.committed.extend(v.committed);
        }
        view.generations.sort();
        view.committed.sort();
        view
    }

    /// DeleteGroups of one group: only an empty one.
    pub async fn delete_group(&self, group_id: &str, now: i64) -> Result<(), CoordinatorError> {
        self.decide(group_id, now, None, |s| s.delete_group(group_id)).await?
    }

    /// OffsetDelete; see [`Shard::delete_offsets`].
    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
        subscribed: impl Fn(&Group, &str) -> bool,
        now: i64,
    ) -> Result<Vec<Result<(), CoordinatorError>>, CoordinatorError> {
        self.decide(group_id, now, None, |s| s.delete_offsets(group_id, partitions, subscribed)).await?
    }

    /// Remove every group's committed offsets for a deleted topic, group by group in
    /// each group's turn; `Err` if any group's write failed (the others are done).
    pub async fn delete_topic_offsets(&self, topic: &str, now: i64) -> Result<(), CoordinatorError> {
        let groups: Vec<String> =
            self.lock().partitions.active().flat_map(|(_, s)| s.groups_with_topic(topic)).collect();
        let results =
            join_all(groups.iter().map(|id| self.decide(id, now, None, |s| s.delete_topic_offsets(id, topic)))).await;
        Ok(results.into_iter().collect::<Result<Vec<()>, _>>().map(drop)?)
    }
}

/// Run the futures concurrently on this task and collect their outputs in order.
async fn join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut pending: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut done: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut all = true;
        for (f, out) in pending.iter_mut().zip(done.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *out = Some(v),
                    std::task::Poll::Pending => all = false,
                }
            }
        }
        if all {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    done.into_iter().map(|o| o.expect("every future completed")).collect()
}

/// Await a parked response, or the given fallback if the coordinator dropped it.
pub async fn wait<T>(rx: oneshot::Receiver<T>, timeout: std::time::Duration, fallback: T) -> T {
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(v)) => v,
        _ => fallback,
    }
}

#[cfg(test)]
#[path = "group_coordinator_tests.rs"]
mod tests;
