//! Broker liveness on the quorum leader: heartbeats, session expiry and AlterPartition
//! go through the same decide-and-commit path as every operation, decided by
//! `cluster_ops` against the leader's [`BrokerLiveness`] (kept in memory only: a new
//! leader starts it from the image and gives every broker a full session). The leader
//! also checks brokers that missed a heartbeat for a live process (see
//! [`BrokerLiveness::suspects`]).

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::{Controller, Core};
use crate::controller::broker_liveness::BrokerLiveness;
use crate::controller::image::MetadataImage;
use crate::controller::operations::{ControllerOp, IsrAlteration};
use crate::controller::raft::NodeId;
use crate::controller::records::{MetadataRecord, METADATA_FORMAT};
use crate::controller::{cluster_ops, ControllerError};

/// The records an operation commits, and the changes of an AlterPartitions refused
/// (topic id, partition, why).
pub(super) type Decided = (Vec<MetadataRecord>, Vec<(Uuid, i32, ControllerError)>);

/// How often the leader looks for expired broker sessions: a broker is fenced at most
/// this long after its session ran out. (Kafka schedules the check for the next
/// expiry; a look at the in-memory view costs as little.)
const EXPIRE_CHECK_INTERVAL: Duration = Duration::from_millis(50);

/// A check of a suspect broker gives up after this long: nothing listening is refused
/// at once; a connection that neither opens nor is refused (a host that is down, a
/// dropped route) is left to the session.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// A suspect broker is checked at most this often.
const PROBE_INTERVAL: Duration = Duration::from_millis(500);

pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl ControllerOp {
    /// Decided against the leader's broker liveness rather than the image alone.
    pub(super) fn needs_liveness(&self) -> bool {
        matches!(
            self,
            ControllerOp::BrokerHeartbeat { .. }
                | ControllerOp::ExpireBrokers
                | ControllerOp::AlterPartition { .. }
                | ControllerOp::AlterPartitions { .. }
                | ControllerOp::ReplicasOffline { .. }
                | ControllerOp::ElectLeaders { .. }
                | ControllerOp::AlterReassignments { .. }
                | ControllerOp::UnregisterBroker { .. }
        )
    }
}

impl Core {
    /// As the leader (under the operation lock): decide a liveness operation. The view
    /// belongs to a term; a new term (this node became leader again, or for the first
    /// time) starts a new one from the image.
    /// Returns the records to commit and, for an AlterPartitions, the changes refused.
    pub(super) fn decide_liveness(&self, image: &MetadataImage, op: &ControllerOp) -> Result<Decided, ControllerError> {
        let term = self.raft.metrics().borrow().current_term;
        let now = now_ms();
        let mut guard = self.liveness.lock().unwrap_or_else(|e| e.into_inner());
        if guard.as_ref().is_none_or(|(t, _)| *t != term) {
            let (session, interval) = self.broker_timing;
            let mut view = BrokerLiveness::new(session).with_heartbeat_interval(interval);
            view.became_leader_of(image, now);
            *guard = Some((term, view));
        }
        let (_, view) = guard.as_mut().ok_or_else(|| ControllerError::Internal("no liveness view".into()))?;
        match op {
            ControllerOp::AlterPartitions { broker, incarnation, changes } => {
                Ok(cluster_ops::decide_alter_partitions(image, *broker, *incarnation, changes, view))
            }
            _ => cluster_ops::decide(image, op, view, now).map(|records| (records, Vec::new())),
        }
    }

    /// Whether a session check would fence anyone: true when this term has no view yet
    /// (deciding one starts it).
    fn sessions_expired(&self) -> bool {
        let term = self.raft.metrics().borrow().current_term;
        let guard = self.liveness.lock().unwrap_or_else(|e| e.into_inner());
        guard.as_ref().is_none_or(|(t, view)| *t != term || view.any_expired(now_ms()))
    }

    /// As the leader: brokers of this term's view to check for a live process.
    fn suspects(&self) -> (u64, Vec<i32>) {
        let term = self.raft.metrics().borrow().current_term;
        let guard = self.liveness.lock().unwrap_or_else(|e| e.into_inner());
        let suspects = guard.as_ref().filter(|(t, _)| *t == term).map(|(_, v)| v.suspects(now_ms()));
        (term, suspects.unwrap_or_default())
    }

    /// A check of `node` begun at `began_ms` in `term` found nothing listening.
    fn nothing_listening(&self, term: u64, node: i32, began_ms: i64) {
        let mut guard = self.liveness.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, view)) = guard.as_mut().filter(|(t, _)| *t == term) {
            view.nothing_listening(node, began_ms);
        }
    }

    /// Where broker `node`'s process listens, to check that it still runs: its controller
    /// listener (every node of the quorum has one, voter or broker-only), else the client
    /// listener it advertised.
    fn probe_address(&self, node: i32) -> Option<String> {
        let controller = self
            .raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .get_node(&(node as NodeId))
            .map(|n| n.addr.clone());
        controller.or_else(|| self.published.image().brokers.get(&node).map(|b| format!("{}:{}", b.host, b.port)))
    }

    /// A liveness decision was not committed: its view may be ahead of the image, so the
    /// next decision starts a fresh one (every broker gets a full session again).
    pub(super) fn forget_liveness(&self) {
        *self.liveness.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// On every node of a cluster: while this node leads the quorum, check brokers that
/// missed a heartbeat for a live process, and fence brokers whose session expired or
/// whose process is gone.
pub(super) async fn expire_loop(core: Weak<Core>) {
    let mut tick = tokio::time::interval(EXPIRE_CHECK_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut checked: HashMap<i32, Instant> = HashMap::new();
    loop {
        tick.tick().await;
        let Some(c) = core.upgrade() else { return };
        let leads = c.raft.metrics().borrow().current_leader == Some(c.node_id as NodeId);
        if !leads {
            continue;
        }
        let (term, suspects) = c.suspects();
        for node in suspects {
            if checked.get(&node).is_some_and(|at| at.elapsed() < PROBE_INTERVAL) {
                continue;
            }
            let Some(addr) = c.probe_address(node) else { continue };
            checked.insert(node, Instant::now());
            tokio::spawn(check_listening(Arc::downgrade(&c), term, node, addr));
        }
        if c.sessions_expired() {
            if let Err(e) = c.submit(ControllerOp::ExpireBrokers).await {
                tracing::debug!(error = %e, "broker session check");
            }
        }
    }
}

/// Whether anything listens at broker `node`'s `addr`: a refused connection means its
/// process is gone. A process that is alive but slow or paused still has its listening
/// socket (the kernel completes the handshake), so it is never taken for gone.
async fn check_listening(core: Weak<Core>, term: u64, node: i32, addr: String) {
    let began = now_ms();
    let connected = tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(&addr)).await;
    if let Ok(Err(e)) = connected {
        if e.kind() == std::io::ErrorKind::ConnectionRefused {
            if let Some(c) = core.upgrade() {
                tracing::info!(node_id = node, %addr, "a broker missed its heartbeat and nothing listens at its address");
                c.nothing_listening(term, node, began);
            }
        }
    }
}

impl Controller {
    /// This broker process started after the one before it on this data dir shut down
    /// cleanly (every log flushed): its heartbeats say so, and the controller keeps it in
    /// the ELRs it is in (otherwise its logs may lack what they held, and it leaves them).
    pub fn set_started_after_clean_shutdown(&self, clean: bool) {
        self.clean_start.store(clean, std::sync::atomic::Ordering::Release);
    }

    /// Part of a cluster (more than one voter, or a broker-only node): brokers heartbeat
    /// and can be fenced. A single node never is.
    pub fn is_clustered(&self) -> bool {
        self.core.clustered
    }

    /// This broker process (`incarnation`) is alive, with these replicas in log dirs that
    /// failed; with `want_shut_down` it asks for its leadership to move off. Returns once
    /// the leader's decision is applied here.
    pub async fn heartbeat(
        &self,
        incarnation: Uuid,
        want_shut_down: bool,
        offline: Vec<(Uuid, i32)>,
    ) -> Result<(), ControllerError> {
        let node_id = self.core.node_id;
        let offline_replicas = Some(offline);
        let clean_shutdown = self.clean_start.load(std::sync::atomic::Ordering::Acquire);
        self.run(move |core| async move {
            let op = ControllerOp::BrokerHeartbeat {
                node_id,
                incarnation,
                want_shut_down,
                offline_replicas,
                metadata_format: METADATA_FORMAT,
                clean_shutdown,
            };
            core.submit(op).await.map(drop)
        })
        .await
    }

    /// This broker's replicas of `partitions` are in a log directory that went offline:
    /// take them out of the ISRs and leadership (see [`ControllerOp::ReplicasOffline`]).
    pub async fn replicas_offline(&self, partitions: Vec<(Uuid, i32)>) -> Result<(), ControllerError> {
        let broker = self.core.node_id;
        self.run(move |core| async move {
            core.submit(ControllerOp::ReplicasOffline { broker, partitions }).await.map(drop)
        })
        .await
    }

    /// As the leader of these partitions, in this broker process (`incarnation`, as its
    /// heartbeats name it): ISR changes, each proposed against the ISR of its partition
    /// epoch, in one request. Returns those refused (topic id, partition, why); the
    /// others are committed and applied here.
    pub async fn alter_partitions(
        &self,
        incarnation: Uuid,
        changes: Vec<IsrAlteration>,
    ) -> Result<Vec<(Uuid, i32, ControllerError)>, ControllerError> {
        let broker = self.core.node_id;
        self.run(move |core| async move {
            let reply = core.submit(ControllerOp::AlterPartitions { broker, incarnation, changes }).await?;
            Ok(reply.refused.into_iter().map(|(t, p, e)| (t, p, e.into_controller_error())).collect())
        })
        .await
    }

    /// As the leader of a partition, in this broker process (`incarnation`, as its
    /// heartbeats name it): take `remove` out of its ISR, or `add` into it, as proposed
    /// against the ISR of `partition_epoch`.
    pub async fn alter_partition(
        &self,
        incarnation: Uuid,
        (topic_id, partition): (Uuid, i32),
        (leader_epoch, partition_epoch): (i32, i32),
        remove: Vec<i32>,
        add: Option<(i32, i64)>,
    ) -> Result<(), ControllerError> {
        let broker = self.core.node_id;
        self.run(move |core| async move {
            let op = ControllerOp::AlterPartition {
                broker,
                topic_id,
                partition,
                leader_epoch,
                partition_epoch: Some(partition_epoch),
                incarnation: Some(incarnation),
                remove,
                add: add.map(|(node, _)| node),
                add_broker_epoch: add.map(|(_, epoch)| epoch),
            };
            core.submit(op).await.map(drop)
        })
        .await
    }
}
