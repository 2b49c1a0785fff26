//! Takes the ISR changes a broker's partition leaders propose to the controller (Kafka's
//! `AlterPartitionManager`): changes queue, and one request at a time carries every
//! change pending, so a broker whose followers all catch up at once (a restart with
//! thousands of partitions) sends a few requests, not one per partition.
//!
//! One request per change, each waiting on a blocking thread, was what this replaced:
//! 2,000 partitions filled tokio's blocking pool with waiting proposals, the metadata
//! apply that would have answered them queued behind them in the same pool, and every
//! change and heartbeat waited out its timeout, again and again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

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

/// A controller leader of an older release cannot read a request of many changes, and
/// gets them one by one (see [`send`]); that is logged at most this often.
const ONE_BY_ONE_LOG_EVERY: Duration = Duration::from_secs(60);

/// Takes a leader's ISR proposals to the controller. A partition has one proposal in
/// flight until the metadata moves to a new partition epoch, or until the controller
/// said it was not attempted; a newer proposal of a partition whose last one has not
/// been sent yet takes its place (the older one can no longer commit).
pub struct ControllerIsrSink {
    queue: Arc<Queue>,
}

#[derive(Default)]
struct Queue {
    pending: Mutex<Pending>,
    wake: Notify,
    /// The sink is gone: the sender stops.
    closed: AtomicBool,
}

/// Each partition's unsent change, numbered in the order it was proposed.
#[derive(Default)]
struct Pending {
    proposed: u64,
    changes: HashMap<(Uuid, i32), (u64, IsrChange)>,
}

impl Queue {
    fn put(&self, change: IsrChange) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.proposed += 1;
        let n = pending.proposed;
        pending.changes.insert((change.topic_id, change.partition), (n, change));
    }

    /// The oldest changes, at most a request's worth.
    fn take(&self) -> Vec<IsrChange> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let mut oldest: Vec<_> = pending.changes.iter().map(|(k, (n, _))| (*n, *k)).collect();
        oldest.sort_unstable();
        let take = oldest.iter().take(MAX_CHANGES_PER_REQUEST);
        take.filter_map(|(_, k)| pending.changes.remove(k)).map(|(_, c)| c).collect()
    }
}

impl ControllerIsrSink {
    /// Starts the sender on the current runtime; it stops once the sink is dropped or the
    /// controller is gone.
    pub fn new(controller: &Arc<Controller>, replicas: &Arc<ReplicaManager>, incarnation: Uuid) -> ControllerIsrSink {
        let queue = Arc::new(Queue::default());
        let sender = Sender {
            queue: queue.clone(),
            controller: Arc::downgrade(controller),
            replicas: Arc::downgrade(replicas),
            incarnation,
            one_by_one_logged: None,
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
        self.queue.put(change);
        self.queue.wake.notify_one();
    }
}

struct Sender {
    queue: Arc<Queue>,
    controller: Weak<Controller>,
    replicas: Weak<ReplicaManager>,
    /// This broker process, as its heartbeats name it.
    incarnation: Uuid,
    /// When the last request went one change at a time was logged.
    one_by_one_logged: Option<Instant>,
}

impl Sender {
    async fn run(mut self) {
        while !self.queue.closed.load(Ordering::Acquire) {
            let batch = self.queue.take();
            if batch.is_empty() {
                // A proposal made since `take` left a permit: this returns at once.
                self.queue.wake.notified().await;
                continue;
            }
            let Some(controller) = self.controller.upgrade() else { return };
            let client = ControllerClient { controller, incarnation: self.incarnation };
            let changes: Vec<_> = batch.iter().map(alteration).collect();
            let (errors, how) = send(&client, &changes).await;
            if how == Sent::OneByOne && self.one_by_one_logged.is_none_or(|t| t.elapsed() >= ONE_BY_ONE_LOG_EVERY) {
                tracing::warn!(
                    "the controller leader did not read a request of many ISR changes but answered one \
                     (a leader of an older release?): sent them one by one"
                );
                self.one_by_one_logged = Some(Instant::now());
            }
            for (change, error) in batch.into_iter().zip(errors) {
                match error {
                    None => tracing::info!(
                        topic = %change.topic, partition = change.partition, proposal = ?change.proposal,
                        "ISR change committed"
                    ),
                    Some(e) => self.not_committed(change, e),
                }
            }
        }
    }

    fn not_committed(&self, change: IsrChange, e: ControllerError) {
        let why = why_not_committed(&e);
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

/// How the sender reaches the controller quorum's leader.
trait AlterPartitionClient {
    /// Many changes in one request: those refused (topic id, partition, why).
    async fn alter_partitions(
        &self,
        changes: Vec<IsrAlteration>,
    ) -> Result<Vec<(Uuid, i32, ControllerError)>, ControllerError>;
    /// One change, as a leader of an older release takes it.
    async fn alter_partition(&self, change: &IsrAlteration) -> Result<(), ControllerError>;
}

struct ControllerClient {
    controller: Arc<Controller>,
    incarnation: Uuid,
}

impl AlterPartitionClient for ControllerClient {
    async fn alter_partitions(
        &self,
        changes: Vec<IsrAlteration>,
    ) -> Result<Vec<(Uuid, i32, ControllerError)>, ControllerError> {
        self.controller.alter_partitions(self.incarnation, changes).await
    }

    async fn alter_partition(&self, c: &IsrAlteration) -> Result<(), ControllerError> {
        let add = c.add.map(|a| (a, c.add_broker_epoch.unwrap_or(-1)));
        let (partition, epochs) = ((c.topic_id, c.partition), (c.leader_epoch, c.partition_epoch));
        self.controller.alter_partition(self.incarnation, partition, epochs, c.remove.clone(), add).await
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    Together,
    OneByOne,
}

/// What the partition makes of `e`: the controller decided (said the change was not
/// attempted, or refused it as stale), or no answer came (no leader, no quorum, a closed
/// connection).
fn why_not_committed(e: &ControllerError) -> NotCommitted {
    match e {
        ControllerError::NotAttempted(_) => NotCommitted::NotAttempted,
        ControllerError::Refused(_) => NotCommitted::Stale,
        _ => NotCommitted::NoAnswer,
    }
}

fn decided(e: &ControllerError) -> bool {
    why_not_committed(e) != NotCommitted::NoAnswer
}

/// Sends `changes` in one request and returns what became of each, in order (`None`:
/// committed), and how they went. A request that gets no answer is tried once as a
/// single change: a leader of an older release, which cannot read a request of many
/// (it closes the connection), answers that, and the rest go one by one too. (Tried
/// again with each request: a leader that could not answer one request, in a failover
/// say, is not taken for an old one for longer than that.)
async fn send(client: &impl AlterPartitionClient, changes: &[IsrAlteration]) -> (Vec<Option<ControllerError>>, Sent) {
    let first = match client.alter_partitions(changes.to_vec()).await {
        Ok(refused) => {
            let mut refused: HashMap<(Uuid, i32), ControllerError> =
                refused.into_iter().map(|(t, p, e)| ((t, p), e)).collect();
            let errors = changes.iter().map(|c| refused.remove(&(c.topic_id, c.partition))).collect();
            return (errors, Sent::Together);
        }
        Err(e) if decided(&e) => return (changes.iter().map(|_| Some(clone_error(&e))).collect(), Sent::Together),
        Err(e) => {
            let Some(c) = changes.first() else { return (Vec::new(), Sent::Together) };
            match client.alter_partition(c).await {
                Err(one) if !decided(&one) => {
                    return (changes.iter().map(|_| Some(clone_error(&e))).collect(), Sent::Together)
                }
                first => first.err(),
            }
        }
    };
    let mut errors = vec![first];
    for c in &changes[1..] {
        match client.alter_partition(c).await {
            Err(e) if !decided(&e) => {
                // No answer: the rest would wait as long; they are sent again later.
                errors.resize_with(changes.len(), || Some(clone_error(&e)));
                break;
            }
            result => errors.push(result.err()),
        }
    }
    (errors, Sent::OneByOne)
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
    use std::cell::RefCell;

    use super::*;

    const T: Uuid = Uuid::from_u128(7);

    fn change(partition: i32, partition_epoch: i32) -> IsrChange {
        IsrChange {
            topic: "t".into(),
            topic_id: T,
            partition,
            leader_epoch: 0,
            partition_epoch,
            proposal: IsrProposal::Shrink { remove: vec![3] },
        }
    }

    /// A partition's newer proposal replaces its unsent one; a request carries at most
    /// [`MAX_CHANGES_PER_REQUEST`] changes, the oldest first, the rest wait for the next.
    #[test]
    fn the_queue_keeps_each_partitions_newest_change_and_sends_the_oldest_first() {
        let queue = Queue::default();
        for p in (0..MAX_CHANGES_PER_REQUEST as i32 + 10).rev() {
            queue.put(change(p, 0));
        }
        queue.put(change(509, 1));
        let first = queue.take();
        assert_eq!(first.len(), MAX_CHANGES_PER_REQUEST);
        assert_eq!(first[0], change(508, 0), "proposed first, sent first");
        assert!(!first.contains(&change(509, 0)) && !first.contains(&change(509, 1)), "proposed again: last");
        let rest = queue.take();
        assert_eq!(rest.len(), 10);
        assert_eq!(rest.last(), Some(&change(509, 1)));
        assert!(queue.take().is_empty());
    }

    /// A controller leader that takes requests of many changes (`batches`) or not, and
    /// answers single changes of partitions below `singles`; it refuses partition 1's
    /// change.
    struct Fake {
        batches: bool,
        singles: i32,
        calls: RefCell<Vec<String>>,
    }

    fn no_answer() -> ControllerError {
        ControllerError::NotController("no answer".into())
    }

    impl AlterPartitionClient for Fake {
        async fn alter_partitions(
            &self,
            changes: Vec<IsrAlteration>,
        ) -> Result<Vec<(Uuid, i32, ControllerError)>, ControllerError> {
            self.calls.borrow_mut().push(format!("many {}", changes.len()));
            if !self.batches {
                return Err(no_answer());
            }
            let refused = changes.iter().filter(|c| c.partition == 1);
            Ok(refused.map(|c| (c.topic_id, c.partition, ControllerError::Refused("stale".into()))).collect())
        }

        async fn alter_partition(&self, c: &IsrAlteration) -> Result<(), ControllerError> {
            self.calls.borrow_mut().push(format!("one {}", c.partition));
            match c.partition {
                p if p >= self.singles => Err(no_answer()),
                1 => Err(ControllerError::Refused("stale".into())),
                _ => Ok(()),
            }
        }
    }

    fn fake(batches: bool, singles: i32) -> Fake {
        Fake { batches, singles, calls: RefCell::new(Vec::new()) }
    }

    fn outcomes(errors: &[Option<ControllerError>]) -> Vec<&'static str> {
        let name = |e: &Option<ControllerError>| match e {
            None => "committed",
            Some(ControllerError::Refused(_)) => "refused",
            Some(ControllerError::NotController(_)) => "no answer",
            Some(_) => "other",
        };
        errors.iter().map(name).collect()
    }

    fn three() -> Vec<IsrAlteration> {
        (0..3).map(|p| alteration(&change(p, 0))).collect()
    }

    #[tokio::test]
    async fn each_change_of_a_request_is_answered_on_its_own() {
        let client = fake(true, 3);
        let (errors, how) = send(&client, &three()).await;
        assert_eq!((outcomes(&errors), how), (vec!["committed", "refused", "committed"], Sent::Together));
        assert_eq!(*client.calls.borrow(), ["many 3"]);
    }

    /// A leader of an older release cannot read a request of many (no answer) but
    /// answers one change: the changes go one by one, until one gets no answer. With no
    /// leader at all the single try gets no answer either, and every change is answered
    /// so (sent again later).
    #[tokio::test]
    async fn a_leader_that_cannot_read_a_request_of_many_gets_the_changes_one_by_one() {
        let old_leader = fake(false, 3);
        let (errors, how) = send(&old_leader, &three()).await;
        assert_eq!((outcomes(&errors), how), (vec!["committed", "refused", "committed"], Sent::OneByOne));
        assert_eq!(*old_leader.calls.borrow(), ["many 3", "one 0", "one 1", "one 2"]);

        let gone_midway = fake(false, 2);
        let (errors, how) = send(&gone_midway, &(0..4).map(|p| alteration(&change(p, 0))).collect::<Vec<_>>()).await;
        assert_eq!((outcomes(&errors), how), (vec!["committed", "refused", "no answer", "no answer"], Sent::OneByOne));
        assert_eq!(*gone_midway.calls.borrow(), ["many 4", "one 0", "one 1", "one 2"]);

        let none = fake(false, 0);
        let (errors, how) = send(&none, &three()).await;
        assert_eq!((outcomes(&errors), how), (vec!["no answer"; 3], Sent::Together));
        assert_eq!(*none.calls.borrow(), ["many 3", "one 0"]);
    }
}
