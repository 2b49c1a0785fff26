//! The group coordinator shell (Kafka's `CoordinatorRuntime` for one `__consumer_offsets`
//! partition): feeds requests and the clock to the [`Shard`], writes the records each
//! decision returns through its [`OffsetsWriter`], and only then makes the decision real
//! and answers: parked JoinGroup/SyncGroup requests through oneshot channels, the rest as
//! return values. A failed write changes nothing and every request the decision would
//! have answered gets the write error; the one exception is Kafka's own reaction to a
//! failed assignment write, which makes the group rebalance ([`super::shard::OnWriteError`]).
//!
//! Locks: `state` (a std mutex) guards the shard and the parked requests and is never held
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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

use super::error::CoordinatorError;
use super::group::{Effect, Group, GroupError, GroupLimits, JoinOutcome, JoinParams, SyncOutcome, SyncParams, Token};
use super::group_locks::GroupLocks;
use super::offsets::{MemberRef, OffsetCommit};
use super::offsets_codec::{CommittedOffset, OffsetsRecord};
use super::shard::{CoordinatorResult, Shard};
use super::views::{self, GroupDescription, GroupListing};
use super::writer::{OffsetsWriteError, OffsetsWriter};

enum Waiter {
    Join(oneshot::Sender<JoinOutcome>),
    Sync(oneshot::Sender<SyncOutcome>),
}

struct State {
    shard: Shard,
    waiters: HashMap<Token, Waiter>,
}

impl State {
    fn answer(&mut self, effects: Vec<Effect>) {
        for e in effects {
            match e {
                Effect::Join(t, outcome) => {
                    if let Some(Waiter::Join(tx)) = self.waiters.remove(&t) {
                        let _ = tx.send(outcome);
                    }
                }
                Effect::Sync(t, outcome) => {
                    if let Some(Waiter::Sync(tx)) = self.waiters.remove(&t) {
                        let _ = tx.send(outcome);
                    }
                }
                Effect::PersistGroup => {}
            }
        }
    }

    /// A decision's write failed: every request it answered or parked gets the error
    /// instead, and the live group forgets those requests (it never saw the decision).
    fn fail(&mut self, mut tokens: Vec<Token>, e: OffsetsWriteError) {
        tokens.sort_unstable();
        tokens.dedup();
        self.shard.forget_parked(&tokens);
        for t in tokens {
            match self.waiters.remove(&t) {
                Some(Waiter::Join(tx)) => {
                    let _ = tx.send(JoinOutcome::error(GroupError::Write(e), ""));
                }
                Some(Waiter::Sync(tx)) => {
                    let _ = tx.send(SyncOutcome::error(GroupError::Write(e)));
                }
                None => {}
            }
        }
    }
}

pub struct GroupCoordinator {
    state: Mutex<State>,
    turns: GroupLocks,
    writer: Arc<dyn OffsetsWriter>,
    next_token: AtomicU64,
    /// Serving groups: this broker leads `__consumer_offsets` and loaded it. Inactive,
    /// every group request is answered NOT_COORDINATOR.
    active: AtomicBool,
    limits: GroupLimits,
    offsets_retention_ms: i64,
}

impl GroupCoordinator {
    pub fn new(limits: GroupLimits, offsets_retention_ms: i64, writer: Arc<dyn OffsetsWriter>) -> GroupCoordinator {
        GroupCoordinator {
            state: Mutex::new(State { shard: Shard::new(limits, offsets_retention_ms), waiters: HashMap::new() }),
            turns: GroupLocks::default(),
            writer,
            next_token: AtomicU64::new(1),
            active: AtomicBool::new(true),
            limits,
            offsets_retention_ms,
        }
    }

    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// This broker became the coordinator: forget whatever it held and rebuild groups
    /// and offsets from `__consumer_offsets` as it is now (the new leader's log).
    pub fn activate(&self, records: impl IntoIterator<Item = OffsetsRecord>, now: i64) {
        {
            let mut st = self.lock();
            let parked: Vec<Token> = st.waiters.keys().copied().collect();
            st.fail(parked, OffsetsWriteError::Unavailable);
            st.shard = Shard::new(self.limits, self.offsets_retention_ms);
        }
        self.load(records, now);
    }

    /// This broker stopped leading `__consumer_offsets`: its groups are another
    /// broker's now. Parked requests get COORDINATOR_NOT_AVAILABLE and find the new one.
    pub fn deactivate(&self) {
        let mut st = self.lock();
        self.active.store(false, Ordering::Release);
        let parked: Vec<Token> = st.waiters.keys().copied().collect();
        st.fail(parked, OffsetsWriteError::Unavailable);
        st.shard = Shard::new(self.limits, self.offsets_retention_ms);
        tracing::info!("group coordinator inactive: this broker does not lead __consumer_offsets");
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn token(&self) -> Token {
        self.next_token.fetch_add(1, Ordering::Relaxed)
    }

    /// Rebuild groups and offsets from `__consumer_offsets`, oldest record first, through
    /// the same replay that applies every written decision.
    pub fn load(&self, records: impl IntoIterator<Item = OffsetsRecord>, now: i64) {
        let mut st = self.lock();
        for r in records {
            st.shard.replay(r, now);
        }
        st.shard.finish_load(now);
        self.active.store(true, Ordering::Release);
        tracing::info!(groups = st.shard.groups.len(), "group coordinator loaded __consumer_offsets");
    }

    /// In `group_id`'s turn: take a decision about that group, write its records, then
    /// apply it and answer. `parked` is the caller's own request when it may wait past
    /// this decision.
    async fn decide<T>(
        &self,
        group_id: &str,
        now: i64,
        parked: Option<(Token, Waiter)>,
        decide: impl FnOnce(&Shard) -> CoordinatorResult<T>,
    ) -> Result<T, OffsetsWriteError> {
        let _turn = self.turns.lock(group_id).await;
        if !self.is_active() {
            let mut st = self.lock();
            if let Some((t, w)) = parked {
                st.waiters.insert(t, w);
                st.fail(vec![t], OffsetsWriteError::NotCoordinator);
            }
            return Err(OffsetsWriteError::NotCoordinator);
        }
        let own = parked.as_ref().map(|(t, _)| *t);
        let result = {
            let mut st = self.lock();
            if let Some((t, w)) = parked {
                st.waiters.insert(t, w);
            }
            decide(&st.shard)
        };
        let (staged, effects, reply) = result.into_staged();
        let written = match staged.records() {
            [] => Ok(()),
            records => self.writer.append(records).await,
        };
        let mut st = self.lock();
        match written {
            Ok(()) => {
                st.shard.apply(staged, now);
                st.answer(effects);
                Ok(reply)
            }
            Err(e) => {
                tracing::error!(error = %e, "coordinator write failed; its requests get the error");
                let mut tokens: Vec<Token> = effects
                    .iter()
                    .filter_map(|e| match e {
                        Effect::Join(t, _) | Effect::Sync(t, _) => Some(*t),
                        Effect::PersistGroup => None,
                    })
                    .collect();
                tokens.extend(own);
                st.fail(tokens, e);
                let reaction = st.shard.write_failed(staged, now);
                st.answer(reaction);
                Err(e)
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
        if !self.is_active() {
            return Err(GroupError::Write(OffsetsWriteError::NotCoordinator));
        }
        self.lock().shard.heartbeat(group_id, member_id, generation_id, group_instance_id, now)
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
        let due = self.lock().shard.due_for_tick(now);
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

    /// Committed offsets of a group: for the given partitions, or all it has.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Vec<(String, i32, Option<CommittedOffset>)> {
        self.lock().shard.fetch_offsets(group_id, partitions)
    }

    pub fn describe(&self, group_id: &str) -> Option<GroupDescription> {
        self.lock().shard.groups.get(group_id).map(views::describe)
    }

    pub fn list(&self) -> Vec<GroupListing> {
        views::list(self.lock().shard.groups.values())
    }

    /// Generations and committed offsets of every group, for `/metrics`.
    pub fn metrics_view(&self) -> views::GroupsMetricsView {
        let st = self.lock();
        views::metrics_view(st.shard.groups.values(), &st.shard.offsets)
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
        let groups = self.lock().shard.groups_with_topic(topic);
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
