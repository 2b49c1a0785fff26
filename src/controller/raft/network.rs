//! The client side of the controller network: openraft's `RaftNetworkFactory` (one
//! [`Peer`] per replication stream) and [`Forwarder`], which sends an operation to the
//! leader.
//!
//! A [`Peer`] owns one connection, opened on first use and dropped after any error; the
//! next call reconnects. openraft backs off between calls to an unreachable peer
//! (`RaftNetwork::backoff`); every call has a deadline (openraft's `hard_ttl`, or the
//! forwarder's own).

use std::time::Duration;

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use tokio::net::TcpStream;
use uuid::Uuid;

use super::wire::{read_frame, write_frame, ForwardError, OpReply, Request, Response, VoteCall};
use super::{ControllerNode, NodeId, TypeConfig};
use crate::controller::operations::ControllerOp;

const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("cannot connect to controller {addr}: {source}")]
    Connect { addr: String, source: std::io::Error },
    #[error("controller {addr} did not answer within {timeout:?}")]
    Timeout { addr: String, timeout: Duration },
    #[error("controller connection to {addr} failed: {source}")]
    Io { addr: String, source: std::io::Error },
    #[error("controller {addr} answered {what} with another kind of response")]
    Mismatch { addr: String, what: &'static str },
}

/// One connection to one controller.
pub struct Peer {
    addr: String,
    conn: Option<TcpStream>,
}

impl Peer {
    pub fn new(addr: String) -> Peer {
        Peer { addr, conn: None }
    }

    /// Send `req` and read its response within `timeout`; on any failure the connection
    /// is dropped so the next call starts afresh.
    pub async fn call(&mut self, req: &Request, timeout: Duration) -> Result<Response, CallError> {
        let addr = self.addr.clone();
        let result = tokio::time::timeout(timeout, self.call_inner(req)).await;
        match result {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(e)) => {
                self.conn = None;
                Err(e)
            }
            Err(_) => {
                self.conn = None;
                Err(CallError::Timeout { addr, timeout })
            }
        }
    }

    async fn call_inner(&mut self, req: &Request) -> Result<Response, CallError> {
        let io = |source| CallError::Io { addr: self.addr.clone(), source };
        if self.conn.is_none() {
            let connect = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&self.addr)).await;
            let stream = match connect {
                Ok(Ok(s)) => s,
                Ok(Err(source)) => return Err(CallError::Connect { addr: self.addr.clone(), source }),
                Err(_) => {
                    let source = std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out");
                    return Err(CallError::Connect { addr: self.addr.clone(), source });
                }
            };
            let _ = stream.set_nodelay(true);
            self.conn = Some(stream);
        }
        let Some(conn) = self.conn.as_mut() else { unreachable!("connected above") };
        write_frame(conn, req).await.map_err(io)?;
        match read_frame(conn).await {
            Ok(Some(resp)) => Ok(resp),
            Ok(None) => Err(io(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed"))),
            Err(e) => Err(io(e)),
        }
    }
}

/// openraft's view of one target: a [`Peer`], the target's id for error reports, and
/// the directory ids a vote request carries (see [`VoteCall`]).
pub struct RaftPeer {
    target: NodeId,
    peer: Peer,
    /// This node's.
    own_directory_id: Option<Uuid>,
    /// The target's, as the membership names it.
    target_directory_id: Option<Uuid>,
}

fn rpc_error<E: std::error::Error>(e: CallError) -> RPCError<NodeId, ControllerNode, E> {
    match e {
        CallError::Connect { .. } => RPCError::Unreachable(Unreachable::new(&e)),
        _ => RPCError::Network(NetworkError::new(&e)),
    }
}

impl RaftPeer {
    async fn call<E: std::error::Error>(
        &mut self,
        req: Request,
        option: &RPCOption,
    ) -> Result<Response, RPCError<NodeId, ControllerNode, RaftError<NodeId, E>>> {
        self.peer.call(&req, option.hard_ttl()).await.map_err(rpc_error)
    }

    fn mismatch<E: std::error::Error>(
        &self,
        what: &'static str,
    ) -> RPCError<NodeId, ControllerNode, RaftError<NodeId, E>> {
        rpc_error(CallError::Mismatch { addr: self.peer.addr.clone(), what })
    }
}

impl RaftNetwork<TypeConfig> for RaftPeer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, ControllerNode, RaftError<NodeId>>> {
        match self.call(Request::AppendEntries(rpc), &option).await? {
            Response::AppendEntries(r) => r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e))),
            _ => Err(self.mismatch("AppendEntries")),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, ControllerNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        match self.call(Request::InstallSnapshot(rpc), &option).await? {
            Response::InstallSnapshot(r) => r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e))),
            _ => Err(self.mismatch("InstallSnapshot")),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, ControllerNode, RaftError<NodeId>>> {
        let call = VoteCall {
            request: rpc,
            candidate_directory_id: self.own_directory_id,
            voter_directory_id: self.target_directory_id,
        };
        match self.call(Request::Vote(call), &option).await? {
            Response::Vote(r) => r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e))),
            _ => Err(self.mismatch("Vote")),
        }
    }
}

/// Makes a [`RaftPeer`] per target, addressed by the node's controller address.
/// openraft makes new ones for every election and whenever the membership changes, so a
/// peer carries the target's directory id as the membership names it now.
pub struct Network {
    /// The id of the directory that holds this node's metadata log.
    pub directory_id: Option<Uuid>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = RaftPeer;

    async fn new_client(&mut self, target: NodeId, node: &ControllerNode) -> RaftPeer {
        RaftPeer {
            target,
            peer: Peer::new(node.addr.clone()),
            own_directory_id: self.directory_id,
            target_directory_id: node.directory_id,
        }
    }
}

/// Sends operations to the leader, each on a fresh connection: forwards are rare (admin
/// operations, registrations, producer id blocks), and a fresh connection makes "not
/// sent" (connect failed, safe to retry) distinguishable from "maybe done".
pub struct Forwarder;

impl Forwarder {
    pub async fn forward(
        &self,
        addr: &str,
        op: &ControllerOp,
        timeout: Duration,
    ) -> Result<Result<OpReply, ForwardError>, CallError> {
        let mut peer = Peer::new(addr.to_owned());
        match peer.call(&Request::Forward(op.clone()), timeout).await? {
            Response::Forward(r) => Ok(r),
            _ => Err(CallError::Mismatch { addr: addr.to_owned(), what: "Forward" }),
        }
    }
}
