//! The group coordinator shell (Kafka's `CoordinatorRuntime` for one `__consumer_offsets`
//! partition): feeds requests and the clock to the [`Shard`], writes the records each
//! decision returns through its [`OffsetsWriter`], and only then makes the decision real
//! and answers: parked JoinGroup/SyncGroup requests through oneshot channels, the rest as
//! return values. A failed write changes nothing and every request the decision would
//! have answered gets the write error.
//!
//! Locks: `state` (a std mutex) guards the shard and the parked requests and is never held
//! across an `.await`; `decisions` (a tokio mutex) is held from a decision through its
//! write to its apply, so decisions apply in the order they were taken and a decision
//! always sees the state its predecessors left. A request future dropped while it holds
//! `decisions` (only at shutdown) abandons its decision; the log is then at most ahead of
//! memory, never behind, and the next start replays it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

use super::error::CoordinatorError;
use super::group::{Effect, Group, GroupError, GroupLimits, JoinOutcome, JoinParams, SyncOutcome, SyncParams, Token};
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
    decisions: tokio::sync::Mutex<()>,
    writer: Arc<dyn OffsetsWriter>,
    next_token: AtomicU64,
}

impl GroupCoordinator {
    pub fn new(limits: GroupLimits, offsets_retention_ms: i64, writer: Arc<dyn OffsetsWriter>) -> GroupCoordinator {
        GroupCoordinator {
            state: Mutex::new(State { shard: Shard::new(limits, offsets_retention_ms), waiters: HashMap::new() }),
            decisions: tokio::sync::Mutex::new(()),
            writer,
            next_token: AtomicU64::new(1),
        }
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
        tracing::info!(groups = st.shard.groups.len(), "group coordinator loaded __consumer_offsets");
    }

    /// Take a decision, write its records, then apply it and answer. `parked` is the
    /// caller's own request when it may wait past this decision.
    async fn decide<T>(
        &self,
        now: i64,
        parked: Option<(Token, Waiter)>,
        decide: impl FnOnce(&Shard) -> CoordinatorResult<T>,
    ) -> Result<T, OffsetsWriteError> {
        let _in_order = self.decisions.lock().await;
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
        let _ =
            self.decide(now, Some((token, Waiter::Join(tx))), |s| s.join(group_id, token, params, now, new_id)).await;
        rx
    }

    /// SyncGroup; answered as [`GroupCoordinator::join`] is.
    pub async fn sync(&self, group_id: &str, params: SyncParams<'_>, now: i64) -> oneshot::Receiver<SyncOutcome> {
        let token = self.token();
        let (tx, rx) = oneshot::channel();
        let _ = self.decide(now, Some((token, Waiter::Sync(tx))), |s| s.sync(group_id, token, params, now)).await;
        rx
    }

    /// Heartbeat. It writes nothing, but waits its turn behind decisions being written
    /// (as Kafka's heartbeat is a write operation), so it never sees uncommitted state.
    pub async fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        generation_id: i32,
        group_instance_id: Option<&str>,
        now: i64,
    ) -> Result<(), GroupError> {
        let _in_order = self.decisions.lock().await;
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
        self.decide(now, None, |s| s.leave(group_id, members, now)).await?
    }

    /// The clock: session expiry, rebalance and sync timeouts, offset expiry. A failed
    /// write leaves everything as it was; the next tick decides again.
    pub async fn tick(&self, now: i64) {
        let _ = self.decide(now, None, |s| s.tick(now)).await;
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
        self.decide(now, None, |s| s.commit_offsets(group_id, member, offsets, now)).await?
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

    /// DeleteGroups of one group: only an empty one.
    pub async fn delete_group(&self, group_id: &str, now: i64) -> Result<(), CoordinatorError> {
        self.decide(now, None, |s| s.delete_group(group_id)).await?
    }

    /// OffsetDelete; see [`Shard::delete_offsets`].
    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
        subscribed: impl Fn(&Group, &str) -> bool,
        now: i64,
    ) -> Result<Vec<Result<(), CoordinatorError>>, CoordinatorError> {
        self.decide(now, None, |s| s.delete_offsets(group_id, partitions, subscribed)).await?
    }

    /// Remove every group's committed offsets for a deleted topic.
    pub async fn delete_topic_offsets(&self, topic: &str, now: i64) -> Result<(), CoordinatorError> {
        Ok(self.decide(now, None, |s| s.delete_topic_offsets(topic)).await?)
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
#[path = "group_coordinator_tests.rs"]
mod tests;
