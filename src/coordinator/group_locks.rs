//! One decision at a time per group, any number of groups at once: the unit of
//! serialization is the group id, as in Kafka's classic coordinator (`group.inLock`) and
//! its new runtime (events queued per key). A group's turn is held from its decision
//! through the write of its records to their apply, so that group's decisions apply in
//! the order they were taken and each sees every earlier one applied; a slow write of one
//! group holds up no other group.
//!
//! Entries live only while someone holds or waits for a turn, so the table stays as small
//! as the number of groups with a decision in flight. (A waiter dropped before its turn
//! leaves its entry behind until the next turn of that group ends; it is one entry per
//! group at most.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{Mutex as TurnMutex, OwnedMutexGuard};

#[derive(Debug, Default)]
pub struct GroupLocks {
    turns: Mutex<HashMap<String, Arc<TurnMutex<()>>>>,
}

impl GroupLocks {
    /// Wait for `group_id`'s turn; it lasts until the returned guard is dropped.
    pub async fn lock(&self, group_id: &str) -> GroupTurn<'_> {
        let turn = self.table().entry(group_id.to_owned()).or_default().clone();
        let guard = turn.clone().lock_owned().await;
        GroupTurn { locks: self, group_id: group_id.to_owned(), turn, guard: Some(guard) }
    }

    /// How many groups have a turn held or awaited (for tests).
    pub fn len(&self) -> usize {
        self.table().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<TurnMutex<()>>>> {
        self.turns.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A group's turn; dropping it lets the group's next decision in.
#[derive(Debug)]
pub struct GroupTurn<'a> {
    locks: &'a GroupLocks,
    group_id: String,
    turn: Arc<TurnMutex<()>>,
    guard: Option<OwnedMutexGuard<()>>,
}

impl Drop for GroupTurn<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut table = self.locks.table();
        // Clones are taken under the table lock, so two (the table's and ours) means no
        // one else holds or waits for this group's turn.
        if Arc::strong_count(&self.turn) == 2 {
            table.remove(&self.group_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    use super::*;

    #[tokio::test]
    async fn turns_of_one_group_queue_and_other_groups_pass() {
        let locks = GroupLocks::default();
        let a = locks.lock("a").await;
        let mut second_a = Box::pin(locks.lock("a"));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(second_a.as_mut().poll(&mut cx).is_pending(), "a's second turn waits for the first");
        let b = locks.lock("b").await;
        drop(b);
        assert_eq!(locks.len(), 1, "b's entry goes with its turn");
        drop(a);
        let second = match second_a.as_mut().poll(&mut cx) {
            Poll::Ready(t) => t,
            Poll::Pending => panic!("a's second turn comes once the first ends"),
        };
        drop(second);
        assert!(locks.is_empty());
    }
}
