//! The leader's side of an operation, and how a node gets one done: as the leader it
//! decides and commits; otherwise it forwards to the leader and waits until its own
//! image has applied the commit.

use std::sync::Arc;
use std::time::Duration;

use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::BasicNode;
use tokio::time::Instant;
use uuid::Uuid;

use super::{internal, Core, OP_TIMEOUT};
use crate::controller::delta::{MetadataDelta, MetadataListener};
use crate::controller::image::MetadataImage;
use crate::controller::operations::{decide, ControllerOp};
use crate::controller::raft::network::CallError;
use crate::controller::raft::rpc_server::{ForwardFuture, ForwardHandler};
use crate::controller::raft::state_machine::Published;
use crate::controller::raft::wire::{ErrorKind, ForwardError, OpReply};
use crate::controller::raft::{Commit, NodeId};
use crate::controller::records::MetadataRecord;
use crate::controller::ControllerError;

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
                    let addr = self.voters.get(&l).cloned().unwrap_or_default();
                    let timeout = deadline.saturating_duration_since(Instant::now());
                    match self.forwarder.forward(&addr, &op, timeout).await {
                        Ok(result) => result,
                        // Not sent: safe to try again.
                        Err(CallError::Connect { .. }) => Err(ForwardError::NotLeader),
                        // Maybe done, maybe not: the caller decides (as a Kafka client
                        // retrying after a timeout does).
                        Err(e) => return Err(ControllerError::NotController(e.to_string())),
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
                Err(e) => return Err(e.into_controller_error()),
            }
        }
    }

    /// As the leader: validate `op` against the latest image, prepare local listeners,
    /// commit; given up at `deadline`. A leader that lost its quorum waits in Raft for a
    /// commit that may never come (and holds the operation lock meanwhile, so every later
    /// operation would wait behind it): past the deadline the caller is told the
    /// controller is not available, as a Kafka client is told after its timeout. The
    /// write may still commit later; its records then apply as any committed ones do.
    async fn decide_and_commit(&self, op: ControllerOp, deadline: Instant) -> Result<OpReply, ForwardError> {
        let needs_liveness = op.needs_liveness();
        match tokio::time::timeout_at(deadline, self.decide_and_commit_now(op)).await {
            Ok(result) => result,
            Err(_) => {
                if needs_liveness {
                    self.forget_liveness();
                }
                tracing::warn!("controller operation not committed in time (no quorum?)");
                Err(ForwardError::Refused {
                    kind: ErrorKind::NotController,
                    message: "the controller quorum did not commit the operation in time".into(),
                })
            }
        }
    }

    async fn decide_and_commit_now(&self, op: ControllerOp) -> Result<OpReply, ForwardError> {
        if let ControllerOp::DescribeQuorum = op {
            return self.describe_quorum_here();
        }
        let _turn = self.op_lock.lock().await;
        if let ControllerOp::AddObserver { node_id, controller_addr } = &op {
            return self.add_observer(*node_id as NodeId, controller_addr.clone()).await;
        }
        // Everything committed in earlier terms is applied before deciding on it.
        match self.raft.ensure_linearizable().await {
            Ok(_) => {}
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(_)))
            | Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_))) => return Err(ForwardError::NotLeader),
            Err(e) => return Err((&internal(e)).into()),
        }
        let image = self.published.image();
        let start = Uuid::new_v4().as_u128() as usize;
        let decided = if op.needs_liveness() { self.decide_liveness(&image, &op) } else { decide(&image, &op, start) };
        let records = decided.map_err(|e| ForwardError::from(&e))?;
        if op.validate_only() || records.is_empty() {
            return Ok(OpReply { index: None, records, quorum: None });
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
        match self.raft.client_write(Commit { records: records.clone() }).await {
            Ok(resp) => Ok(OpReply { index: Some(resp.log_id.index), records, quorum: None }),
            Err(e) => {
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

impl Core {
    /// As the leader: make `id` a learner, unless it is a member already.
    async fn add_observer(&self, id: NodeId, addr: String) -> Result<OpReply, ForwardError> {
        let member = self.raft.metrics().borrow().membership_config.membership().get_node(&id).is_some();
        if !member {
            match self.raft.add_learner(id, BasicNode { addr }, false).await {
                Ok(_) => tracing::info!(node_id = id, "broker-only node added to the controller quorum as a learner"),
                Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => return Err(ForwardError::NotLeader),
                Err(e) => return Err((&internal(e)).into()),
            }
        }
        Ok(OpReply { index: None, records: Vec::new(), quorum: None })
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
            match core.upgrade() {
                Some(core) if core.raft.current_leader().await == Some(core.node_id as NodeId) => {
                    core.decide_and_commit(op, Instant::now() + OP_TIMEOUT).await
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
