//! Delayed operations keyed by partition (Kafka's purgatory): a request that cannot be
//! answered yet (a fetch waiting for bytes, a produce waiting for the high watermark or
//! the disk) parks here on the partitions its answer depends on, and is woken when one
//! of *those* partitions moves, or when its deadline passes. An append to partition B
//! never wakes a fetch parked on partition A.
//!
//! The table only knows keys and waiters; the condition stays with the caller, which
//! re-checks it after each wake-up ([`DelayedOperations::wait_until`]). A waiter is
//! registered *before* its condition is checked and woken through a stored permit, so a
//! wake-up that lands between the check and the sleep is not lost.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

/// Which partition an operation waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartitionKey {
    pub topic_id: Uuid,
    pub index: i32,
}

#[derive(Default)]
struct Watchers {
    /// key → (waiter id, its wake-up).
    by_key: HashMap<PartitionKey, Vec<(u64, Arc<Notify>)>>,
}

#[derive(Default)]
pub struct DelayedOperations {
    watchers: Mutex<Watchers>,
    next_id: AtomicU64,
    /// Waiters woken by a partition event (not by their deadline); tests count these.
    wakeups: AtomicU64,
    /// Set at shutdown: every wait completes at once so in-flight requests can drain.
    closed: AtomicBool,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The condition holds.
    Satisfied,
    /// The deadline passed first.
    TimedOut,
    /// The broker is shutting down.
    Closed,
}

impl DelayedOperations {
    fn lock(&self) -> MutexGuard<'_, Watchers> {
        self.watchers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `condition()` holds, re-checking it each time one of `keys` is woken,
    /// or until `deadline` (or shutdown). The condition is checked at least once.
    pub async fn wait_until(
        &self,
        keys: &[PartitionKey],
        deadline: Instant,
        mut condition: impl FnMut() -> bool,
    ) -> WaitOutcome {
        if condition() {
            return WaitOutcome::Satisfied;
        }
        let waiter = self.register(keys);
        loop {
            if condition() {
                return WaitOutcome::Satisfied;
            }
            if self.closed.load(Ordering::Acquire) {
                return WaitOutcome::Closed;
            }
            if tokio::time::timeout_at(deadline, waiter.notify.notified()).await.is_err() {
                return if condition() { WaitOutcome::Satisfied } else { WaitOutcome::TimedOut };
            }
        }
    }

    fn register(&self, keys: &[PartitionKey]) -> Waiter<'_> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let notify = Arc::new(Notify::new());
        let mut w = self.lock();
        for k in keys {
            w.by_key.entry(*k).or_default().push((id, notify.clone()));
        }
        Waiter { table: self, id, keys: keys.to_vec(), notify }
    }

    /// Something changed on `key` (its high watermark, what is flushed, or it is gone):
    /// every operation parked on it re-checks its condition.
    pub fn wake(&self, key: PartitionKey) {
        let w = self.lock();
        if let Some(list) = w.by_key.get(&key) {
            self.wakeups.fetch_add(list.len() as u64, Ordering::Relaxed);
            for (_, n) in list {
                n.notify_one();
            }
        }
    }

    /// Completes every parked and future wait with [`WaitOutcome::Closed`].
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for list in self.lock().by_key.values() {
            for (_, n) in list {
                n.notify_one();
            }
        }
    }

    /// Whether [`Self::close`] was called (the broker is stopping).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// How many times a parked operation was woken by an event on one of its keys.
    pub fn wakeups(&self) -> u64 {
        self.wakeups.load(Ordering::Relaxed)
    }

    /// Operations parked right now (each counted once per key it watches).
    pub fn parked(&self) -> usize {
        self.lock().by_key.values().map(Vec::len).sum()
    }
}

/// A registration; dropping it (the wait ended or its request was cancelled) removes it.
struct Waiter<'a> {
    table: &'a DelayedOperations,
    id: u64,
    keys: Vec<PartitionKey>,
    notify: Arc<Notify>,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let mut w = self.table.lock();
        for k in &self.keys {
            if let Some(list) = w.by_key.get_mut(k) {
                list.retain(|(id, _)| *id != self.id);
                if list.is_empty() {
                    w.by_key.remove(k);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicI64;
    use std::time::Duration;

    use super::*;

    fn key(index: i32) -> PartitionKey {
        PartitionKey { topic_id: Uuid::nil(), index }
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_on_a_is_not_woken_by_b() {
        let ops = Arc::new(DelayedOperations::default());
        let hw_a = Arc::new(AtomicI64::new(0));
        let waiting = {
            let (ops, hw_a) = (ops.clone(), hw_a.clone());
            tokio::spawn(async move {
                let deadline = Instant::now() + Duration::from_secs(10);
                ops.wait_until(&[key(0)], deadline, || hw_a.load(Ordering::SeqCst) > 0).await
            })
        };
        tokio::task::yield_now().await;
        assert_eq!(ops.parked(), 1);
        for _ in 0..10 {
            ops.wake(key(1));
        }
        tokio::task::yield_now().await;
        assert_eq!(ops.wakeups(), 0);
        assert!(!waiting.is_finished());
        hw_a.store(5, Ordering::SeqCst);
        ops.wake(key(0));
        assert_eq!(waiting.await.unwrap(), WaitOutcome::Satisfied);
        assert_eq!(ops.wakeups(), 1);
        assert_eq!(ops.parked(), 0, "a finished wait leaves nothing behind");
    }

    #[tokio::test(start_paused = true)]
    async fn a_wake_that_does_not_satisfy_parks_again_until_the_deadline() {
        let ops = Arc::new(DelayedOperations::default());
        let waiting = {
            let ops = ops.clone();
            tokio::spawn(async move {
                let deadline = Instant::now() + Duration::from_millis(500);
                ops.wait_until(&[key(0), key(1)], deadline, || false).await
            })
        };
        tokio::task::yield_now().await;
        ops.wake(key(1));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        tokio::time::advance(Duration::from_millis(501)).await;
        assert_eq!(waiting.await.unwrap(), WaitOutcome::TimedOut);
        assert_eq!(ops.parked(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn close_releases_every_wait() {
        let ops = Arc::new(DelayedOperations::default());
        let waiting = {
            let ops = ops.clone();
            tokio::spawn(
                async move { ops.wait_until(&[key(3)], Instant::now() + Duration::from_secs(30), || false).await },
            )
        };
        tokio::task::yield_now().await;
        ops.close();
        assert_eq!(waiting.await.unwrap(), WaitOutcome::Closed);
        let after = ops.wait_until(&[key(3)], Instant::now() + Duration::from_secs(30), || false).await;
        assert_eq!(after, WaitOutcome::Closed);
    }

    #[tokio::test(start_paused = true)]
    async fn a_condition_already_true_does_not_park() {
        let ops = DelayedOperations::default();
        let out = ops.wait_until(&[key(0)], Instant::now(), || true).await;
        assert_eq!(out, WaitOutcome::Satisfied);
        assert_eq!(ops.parked(), 0);
    }
}
