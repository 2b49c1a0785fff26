//! The leader's side of an operation, and how a node gets one done: as the leader it
//! decides and commits; otherwise it forwards to the leader and waits until its own
//! image has applied the commit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::ChangeMembers;
use tokio::time::Instant;
use uuid::Uuid;

use super::{internal, Core, OP_TIMEOUT};
use crate::controller::delta::{MetadataDelta, MetadataListener};
use crate::controller::features;
use crate::controller::image::MetadataImage;
use crate::controller::operations::{decide, ControllerOp};
use crate::controller::raft::network::CallError;
use crate::controller::raft::rpc_server::{ForwardFuture, ForwardHandler};
use crate::controller::raft::state_machine::Published;
use crate::controller::raft::wire::{ErrorKind, ForwardError, OpReply};
use crate::controller::raft::{Commit, ControllerNode, NodeId};
use crate::controller::records::MetadataRecord;
use crate::controller::ControllerError;
use crate::storage::meta_properties::encode_uuid;

impl Core {
    /// Have the leader decide and commit `op`, then wait until this node applied it.
    pub(super) async fn submit(&self, op: ControllerOp) -> Result<OpReply, ControllerError> {
        let deadline = Instant::now() + OP_TIMEOUT;
        let mut backoff = Duration::from_millis(10);
        loop {
            let leader = self.raft.current_leader().await;
            let attempt = match leader {
                Some(l) if l == self.node_id as NodeId => self.decide_and_commit(op.clone(), deadline).await,
                Some(l) => {
                    let addr = self.address_of(l);
                    let timeout = deadline.saturating_duration_since(Instant::now());
                    let term = self.raft.metrics().borrow().current_term;
                    tokio::select! {
                        forwarded = self.forwarder.forward(&addr, &op, timeout) => match forwarded {
                            Ok(result) => result,
                            // Not sent: safe to try again.
                            Err(CallError::Connect { .. }) => Err(ForwardError::NotLeader),
                            // Maybe done, maybe not: the caller decides (as a Kafka client
                            // retrying after a timeout does).
                            Err(e) => return Err(ControllerError::NotController(e.to_string())),
                        },
                        // A leader that stopped answering but still accepts connections
                        // (paused, hung) held every forward until the deadline: broker
                        // heartbeats among them, so a new leader, which gives each broker
                        // one session from its election, fenced every broker at once.
                        // Send it to the new leader instead, as Kafka's channel to the
                        // controller resends to a new one. (An operation the old leader
                        // had replicated before it stopped is committed by the new one,
                        // so the second try may find it done: a heartbeat does not mind,
                        // CreateTopics answers TOPIC_ALREADY_EXISTS, as after a retried
                        // timeout.)
                        () = self.leader_moved_from(term, l) => Err(ForwardError::NotLeader),
                    }
                }
                None => Err(ForwardError::NotLeader),
            };
            match attempt {
                Ok(reply) => {
                    if let Some(index) = reply.index {
                        wait_applied(&self.published, index, deadline).await?;
                    }
                    return Ok(reply);
                }
                Err(ForwardError::NotLeader) if Instant::now() + backoff < deadline => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_millis(200));
                }
                // Leaders came and went, or none had a quorum (all voters cut from each
                // other): what the caller needs to know is that none took it in time.
                Err(ForwardError::NotLeader) => {
                    return Err(not_in_time("finding a leader with a quorum").into_controller_error())
                }
                Err(e) => return Err(e.into_controller_error()),
            }
        }
    }

    /// Resolves once this node knows of a leader other than `l` in `term` (a new term or
    /// another node); never while `l` is still the one it knows.
    async fn leader_moved_from(&self, term: u64, l: NodeId) {
        let mut metrics = self.raft.metrics();
        let moved =
            metrics.wait_for(|m| m.current_leader.is_some() && (m.current_term, m.current_leader) != (term, Some(l)));
        if moved.await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// As the leader: validate `op` against the latest image, prepare local listeners,
    /// commit. What needs the quorum is bounded in time: waiting for the operation lock
    /// and confirming leadership by `deadline`, the commit by [`OP_TIMEOUT`] of its own
    /// (so a long local prepare, such as opening 10,000 new partitions, does not eat
    /// into it). A leader that lost its quorum waits in Raft for a commit that may never
    /// come, and it holds the operation lock meanwhile: unbounded, every later operation
    /// (heartbeats, controlled shutdown, ISR changes) waited behind it forever. Past a
    /// bound the caller is told the controller is not available, as a Kafka client is
    /// told after its timeout; a write that commits later still applies, as any
    /// committed record does (what the listeners prepared for it is used by that commit
    /// or dropped by the next prepare).
    async fn decide_and_commit(&self, op: ControllerOp, deadline: Instant) -> Result<OpReply, ForwardError> {
        match &op {
            ControllerOp::DescribeQuorum => return self.describe_quorum_here(),
            // Voter changes take seconds (a new voter catching up, two membership commits)
            // and openraft runs one at a time itself: they do not hold up the metadata
            // operations, heartbeats among them, behind the lock below.
            ControllerOp::AddRaftVoter { node_id, directory_id } => {
                return self.add_voter(*node_id as NodeId, *directory_id, deadline).await;
            }
            ControllerOp::RemoveRaftVoter { node_id, directory_id } => {
                return self.remove_voter(*node_id as NodeId, *directory_id, deadline).await;
            }
            _ => {}
        }
        let Ok(_turn) = tokio::time::timeout_at(deadline, self.op_lock.lock()).await else {
            return Err(not_in_time("waiting for the operation before it"));
        };
        if let ControllerOp::AddObserver { node_id, controller_addr, directory_id, .. } = &op {
            let added = self.add_observer(*node_id as NodeId, controller_addr.clone(), *directory_id);
            return tokio::time::timeout_at(deadline, added)
                .await
                .unwrap_or_else(|_| Err(not_in_time("adding a learner")));
        }
        // Everything committed in earlier terms is applied before deciding on it.
        match tokio::time::timeout_at(deadline, self.raft.ensure_linearizable()).await {
            Err(_) => return Err(not_in_time("confirming leadership")),
            Ok(Ok(_)) => {}
            Ok(Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(_))))
            | Ok(Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_)))) => {
                return Err(ForwardError::NotLeader)
            }
            Ok(Err(e)) => return Err((&internal(e)).into()),
        }
        let image = self.published.image();
        let start = Uuid::new_v4().as_u128() as usize;
        let decided = if op.needs_liveness() {
            self.decide_liveness(&image, &op)
        } else if let ControllerOp::UpdateFeatures { updates, .. } = &op {
            features::update(&image, updates, self.node_id).map(|records| (records, Vec::new()))
        } else {
            decide(&image, &op, start).map(|records| (records, Vec::new()))
        };
        let (records, refused) = decided.map_err(|e| ForwardError::from(&e))?;
        // Records some broker's release cannot read are not written (its metadata log
        // would stop at them). An operation that needs them checks before it changes the
        // liveness view; one that did not leaves a view that is dropped, as after a
        // failed commit.
        if let Err(e) = image.check_readable(&records) {
            if op.needs_liveness() {
                self.forget_liveness();
            }
            return Err((&e).into());
        }
        let refused: Vec<_> = refused.into_iter().map(|(t, p, e)| (t, p, ForwardError::from(&e))).collect();
        if op.validate_only() || records.is_empty() {
            return Ok(OpReply { index: None, records, quorum: None, refused });
        }
        let listeners = self.published.listeners();
        let prepared = {
            let (listeners, records) = (listeners.clone(), records.clone());
            tokio::task::spawn_blocking(move || prepare(&listeners, &image, &records)).await
        };
        match prepared {
            Ok(Ok(())) => {}
            Ok(Err(reason)) => return Err((&ControllerError::Storage(reason)).into()),
            Err(e) => return Err((&internal(e)).into()),
        }
        let written =
            tokio::time::timeout(OP_TIMEOUT, self.raft.client_write(Commit { records: records.clone() })).await;
        match written {
            Ok(Ok(resp)) => Ok(OpReply { index: Some(resp.log_id.index), records, quorum: None, refused }),
            Err(_) => {
                if op.needs_liveness() {
                    self.forget_liveness();
                }
                Err(not_in_time("committing"))
            }
            Ok(Err(e)) => {
                if op.needs_liveness() {
                    self.forget_liveness();
                }
                let _ = tokio::task::spawn_blocking(move || listeners.iter().for_each(|l| l.discard())).await;
                match e {
                    RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => Err(ForwardError::NotLeader),
                    e => Err((&internal(e)).into()),
                }
            }
        }
    }
}

/// What the caller of an operation the quorum did not finish in time is told (it may
/// still commit later: "maybe done", as for a Kafka client's timed-out request).
fn not_in_time(step: &str) -> ForwardError {
    tracing::warn!(step, "controller operation not finished in time (no quorum?)");
    ForwardError::Refused {
        kind: ErrorKind::NotController,
        message: format!("the controller quorum did not answer in time ({step})"),
    }
}

impl Core {
    /// As the leader: make `id` a learner, unless it is a member already; name a member
    /// with the directory it follows the log from, where the membership names it with
    /// none yet (a voter `--controller-quorum-voters` named) or, for a learner, with
    /// another one (its data dir was replaced); and give a voter the address it now
    /// listens at (Kafka's UpdateRaftVoter), where its directory is the one it was named
    /// with, or it had none.
    async fn add_observer(
        &self,
        id: NodeId,
        addr: String,
        directory_id: Option<Uuid>,
    ) -> Result<OpReply, ForwardError> {
        let membership = self.raft.metrics().borrow().membership_config.membership().clone();
        let node = ControllerNode::new(addr, directory_id);
        let voter = membership.voter_ids().any(|v| v == id);
        let (written, what) = match membership.get_node(&id) {
            None => {
                (self.raft.add_learner(id, node, false).await, "broker-only node in the controller quorum as a learner")
            }
            // A learner back with another data dir (a new directory id) or address: the
            // membership names it as it is now, so that AddRaftVoter finds it.
            Some(known) if !voter && *known != node && directory_id.is_some() => {
                let change = ChangeMembers::SetNodes(BTreeMap::from([(id, node)]));
                (self.raft.change_membership(change, true).await, "controller learner renamed")
            }
            // A voter named without a directory: from now on it is told apart from a
            // node that lost its log (`replaced_log.rs`). A voter that a single node was
            // started as has no address yet; one restarted with another listener has a
            // new one (the others' replication and vote requests go there from now on).
            Some(known) if voter && known.directory_id.is_none() && directory_id.is_some() => {
                let addr = if node.addr.is_empty() { known.addr.clone() } else { node.addr.clone() };
                let named = ControllerNode::new(addr, directory_id);
                let change = ChangeMembers::SetNodes(BTreeMap::from([(id, named)]));
                (self.raft.change_membership(change, true).await, "controller voter named by its directory id")
            }
            // A voter, under the directory it was named with, at another address.
            Some(known)
                if voter
                    && known.directory_id.is_some()
                    && known.directory_id == directory_id
                    && !node.addr.is_empty()
                    && known.addr != node.addr =>
            {
                let change = ChangeMembers::SetNodes(BTreeMap::from([(id, node)]));
                (self.raft.change_membership(change, true).await, "controller voter's address updated")
            }
            // A voter keeps the directory it was named with.
            Some(known) => {
                if voter && directory_id.is_some_and(|d| known.directory_id.is_some_and(|k| k != d)) {
                    tracing::warn!(
                        node_id = id,
                        "voter {id} is back with another metadata log directory; it neither votes nor stands for \
                         election until it is removed (remove-controller with its old directory id) and added back"
                    );
                }
                return Ok(OpReply { index: None, records: Vec::new(), quorum: None, refused: Vec::new() });
            }
        };
        match written {
            Ok(_) => {
                tracing::info!(node_id = id, directory_id = %directory_id.map(|d| encode_uuid(&d)).unwrap_or_default(), "{what}")
            }
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => return Err(ForwardError::NotLeader),
            Err(e) => return Err((&internal(e)).into()),
        }
        Ok(OpReply { index: None, records: Vec::new(), quorum: None, refused: Vec::new() })
    }
}

/// Ask every listener whether it can act on `records`; if one cannot, those that agreed
/// drop what they readied.
fn prepare(
    listeners: &[Arc<dyn MetadataListener>],
    image: &MetadataImage,
    records: &[MetadataRecord],
) -> Result<(), String> {
    let mut next = image.clone();
    records.iter().for_each(|r| next.apply(r));
    let delta = MetadataDelta::of(records);
    for (i, l) in listeners.iter().enumerate() {
        if let Err(reason) = l.prepare(&next, &delta) {
            listeners[..i].iter().for_each(|l| l.discard());
            return Err(reason);
        }
    }
    Ok(())
}

pub(super) fn forward_handler(core: &Arc<Core>) -> ForwardHandler {
    let core = Arc::downgrade(core);
    Arc::new(move |op| -> ForwardFuture {
        let core = core.clone();
        Box::pin(async move {
            let Some(core) = core.upgrade() else { return Err(ForwardError::NotLeader) };
            match (core.raft.current_leader().await, op) {
                (Some(l), op) if l == core.node_id as NodeId => {
                    core.decide_and_commit(op, Instant::now() + OP_TIMEOUT).await
                }
                // A node joining as a learner knows only the voters its flags name, and
                // the leader may not be one of them (the voters changed): a member passes
                // the request on to the leader it knows, once.
                (Some(l), ControllerOp::AddObserver { node_id, controller_addr, directory_id, relayed: false }) => {
                    let op = ControllerOp::AddObserver { node_id, controller_addr, directory_id, relayed: true };
                    match core.forwarder.forward(&core.address_of(l), &op, Duration::from_secs(5)).await {
                        Ok(result) => result,
                        Err(_) => Err(ForwardError::NotLeader),
                    }
                }
                _ => Err(ForwardError::NotLeader),
            }
        })
    })
}

pub(super) async fn wait_applied(published: &Published, index: u64, deadline: Instant) -> Result<(), ControllerError> {
    let mut applied = published.applied();
    let reached = tokio::time::timeout_at(deadline, async { applied.wait_for(|&a| a >= index).await.is_ok() }).await;
    match reached {
        Ok(true) => Ok(()),
        Ok(false) => Err(ControllerError::Internal("the controller stopped".into())),
        Err(_) => Err(ControllerError::NotController(format!("metadata log index {index} not applied in time"))),
    }
}
