//! Takes the ISR changes a broker's partition leaders propose to the controller (Kafka's
//! `AlterPartitionManager`): changes queue, and one request at a time carries every
//! change pending, so a broker whose followers all catch up at once (a restart with
//! thousands of partitions) sends a few requests, not one per partition.
//!
//! One request per change, each waiting on a blocking thread, was what this replaced:
//! 2,000 partitions filled tokio's blocking pool with waiting proposals, the metadata
//! apply that would have answered them queued behind them in the same pool, and every
//! change and heartbeat waited out its timeout, again and again.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use uuid::Uuid;

use crate::controller::operations::IsrAlteration;
use crate::controller::{Controller, ControllerError};
use crate::replication::isr::IsrProposal;
use crate::replication::isr_sink::{IsrChange, IsrChangeSink, NotCommitted};
use crate::replication::ReplicaManager;

/// After an ISR change the controller did not commit, this long passes before the
/// partition acts on the answer (see [`NotCommitted`]): proposes again once the
/// controller said a removal was not attempted, or sends the same again when no answer
/// came. A refused addition is answered at once: the partition itself waits before it
/// proposes the same follower process again, and not for a newer one
/// ([`crate::replication::isr::EXPANSION_RETRY_MS`]).
pub(super) const ISR_RETRY_BACKOFF: Duration = Duration::from_millis(500);

/// At most this many changes go in one request (a metadata log entry of a few hundred
/// KiB); the rest follow in the next.
const MAX_CHANGES_PER_REQUEST: usize = 500;

/// Takes a leader's ISR proposals to the controller. A partition has one proposal in
/// flight until the metadata moves to a new partition epoch, or until the controller
/// said it was not attempted; a newer proposal of a partition whose last one has not
/// been sent yet takes its place.
pub struct ControllerIsrSink {
    queue: Arc<Queue>,
}

#[derive(Default)]
struct Queue {
    pending: Mutex<BTreeMap<(Uuid, i32), IsrChange>>,
    wake: Notify,
    /// The sink is gone: the sender stops.
    closed: AtomicBool,
}

impl Queue {
    fn take(&self) -> Vec<IsrChange> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let keys: Vec<_> = pending.keys().take(MAX_CHANGES_PER_REQUEST).copied().collect();
        keys.iter().filter_map(|k| pending.remove(k)).collect()
    }
}

impl ControllerIsrSink {
    /// Starts the sender on the current runtime; it stops with the controller or the
    /// replica manager.
    pub fn new(controller: &Arc<Controller>, replicas: &Arc<ReplicaManager>, incarnation: Uuid) -> ControllerIsrSink {
        let queue = Arc::new(Queue::default());
        let sender = Sender {
            queue: queue.clone(),
            controller: Arc::downgrade(controller),
            replicas: Arc::downgrade(replicas),
            incarnation,
        };
        tokio::spawn(sender.run());
        ControllerIsrSink { queue }
    }
}

impl Drop for ControllerIsrSink {
    fn drop(&mut self) {
        self.queue.closed.store(true, Ordering::Release);
        self.queue.wake.notify_one();
    }
}

impl IsrChangeSink for ControllerIsrSink {
    fn propose(&self, change: IsrChange) {
        let key = (change.topic_id, change.partition);
        self.queue.pending.lock().unwrap_or_else(|e| e.into_inner()).insert(key, change);
        self.queue.wake.notify_one();
    }
}

struct Sender {
    queue: Arc<Queue>,
    controller: Weak<Controller>,
    replicas: Weak<ReplicaManager>,
    /// This broker process, as its heartbeats name it.
    incarnation: Uuid,
}

impl Sender {
    async fn run(self) {
        while !self.queue.closed.load(Ordering::Acquire) {
            let batch = self.queue.take();
            if batch.is_empty() {
                // A proposal made since `take` left a permit: this returns at once.
                self.queue.wake.notified().await;
                continue;
            }
            let Some(controller) = self.controller.upgrade() else { return };
            let changes = batch.iter().map(alteration).collect();
            let incarnation = self.incarnation;
            let sent = tokio::task::spawn_blocking(move || controller.alter_partitions(incarnation, changes)).await;
            let answered = sent.unwrap_or_else(|e| Err(ControllerError::Internal(e.to_string())));
            self.answer(batch, answered);
        }
    }

    /// Tells each partition what became of its change.
    fn answer(&self, batch: Vec<IsrChange>, answered: Result<Vec<(Uuid, i32, ControllerError)>, ControllerError>) {
        let mut refused: BTreeMap<(Uuid, i32), ControllerError> = BTreeMap::new();
        let all_failed = match answered {
            Ok(r) => {
                refused.extend(r.into_iter().map(|(t, p, e)| ((t, p), e)));
                None
            }
            Err(e) => Some(e),
        };
        for change in batch {
            let error = match &all_failed {
                Some(e) => Some(clone_error(e)),
                None => refused.remove(&(change.topic_id, change.partition)),
            };
            match error {
                None => tracing::info!(
                    topic = %change.topic, partition = change.partition, proposal = ?change.proposal,
                    "ISR change committed"
                ),
                Some(e) => self.not_committed(change, e),
            }
        }
    }

    fn not_committed(&self, change: IsrChange, e: ControllerError) {
        let why = match e {
            ControllerError::NotAttempted(_) => NotCommitted::NotAttempted,
            ControllerError::Refused(_) => NotCommitted::Stale,
            _ => NotCommitted::NoAnswer,
        };
        tracing::warn!(
            topic = %change.topic, partition = change.partition, proposal = ?change.proposal, error = %e,
            ?why, "ISR change not committed"
        );
        let refused_addition =
            why == NotCommitted::NotAttempted && matches!(change.proposal, IsrProposal::Expand { .. });
        let replicas = self.replicas.clone();
        tokio::spawn(async move {
            if !refused_addition {
                tokio::time::sleep(ISR_RETRY_BACKOFF).await;
            }
            if let Some(replicas) = replicas.upgrade() {
                replicas.isr_change_not_committed(&change, why);
            }
        });
    }
}

fn alteration(change: &IsrChange) -> IsrAlteration {
    let (remove, add, add_broker_epoch) = match &change.proposal {
        IsrProposal::Shrink { remove } => (remove.clone(), None, None),
        IsrProposal::Expand { add, broker_epoch } => (Vec::new(), Some(*add), Some(*broker_epoch)),
    };
    IsrAlteration {
        topic_id: change.topic_id,
        partition: change.partition,
        leader_epoch: change.leader_epoch,
        partition_epoch: change.partition_epoch,
        remove,
        add,
        add_broker_epoch,
    }
}

/// A request that failed as a whole fails each of its changes the same way.
fn clone_error(e: &ControllerError) -> ControllerError {
    crate::controller::raft::wire::ForwardError::from(e).into_controller_error()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(partition: i32, partition_epoch: i32) -> IsrChange {
        IsrChange {
            topic: "t".into(),
            topic_id: Uuid::from_u128(7),
            partition,
            leader_epoch: 0,
            partition_epoch,
            proposal: IsrProposal::Shrink { remove: vec![3] },
        }
    }

    /// A partition's newer proposal replaces its unsent one; a request carries at most
    /// [`MAX_CHANGES_PER_REQUEST`] changes, the rest wait for the next.
    #[test]
    fn the_queue_keeps_each_partitions_newest_change_and_bounds_a_request() {
        let queue = Queue::default();
        let put = |c: IsrChange| {
            queue.pending.lock().unwrap().insert((c.topic_id, c.partition), c);
        };
        for p in 0..MAX_CHANGES_PER_REQUEST as i32 + 10 {
            put(change(p, 0));
        }
        put(change(3, 1));
        let first = queue.take();
        assert_eq!(first.len(), MAX_CHANGES_PER_REQUEST);
        assert_eq!(first[3], change(3, 1));
        assert_eq!(queue.take().len(), 10);
        assert!(queue.take().is_empty());
    }
}
