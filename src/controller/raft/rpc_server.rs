//! The controller listener: answers Raft RPCs from the leader and candidates, and
//! operations forwarded by other controllers.
//!
//! One task per connection, one request at a time. A malformed or oversized frame, or a
//! frame that stalls half-sent, closes its connection with a log line.
//!
//! A connection on which this node accepts a second AppendEntries is a leader's
//! replication stream: a leader opens one to each node when it starts leading (also
//! when it resumes its term after a restart) and again after a network fault. Each
//! bumps a counter that brokers watch to heartbeat that leader at once (see
//! `Controller::leadership_changed`). The first AppendEntries alone does not count:
//! openraft checks its leadership (before every controller operation) with one empty
//! AppendEntries on a connection of its own, and a heartbeat woken by those would
//! cause more of them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use openraft::raft::AppendEntriesResponse;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::wire::{read_frame, write_frame, ForwardError, OpReply, Request, Response};
use super::Raft;
use crate::controller::operations::ControllerOp;

/// A started frame must arrive whole within this long.
const FRAME_TIMEOUT: Duration = Duration::from_secs(30);

pub type ForwardFuture = Pin<Box<dyn Future<Output = Result<OpReply, ForwardError>> + Send>>;

/// Where forwarded operations go (the controller, when it leads).
pub type ForwardHandler = Arc<dyn Fn(ControllerOp) -> ForwardFuture + Send + Sync>;

/// Serve until the task is aborted; aborting it also ends every connection task.
/// `leader_contacts` counts the replication streams leaders opened (see the module doc).
pub async fn serve(listener: TcpListener, raft: Raft, forward: ForwardHandler, leader_contacts: watch::Sender<u64>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let contacts = leader_contacts.clone();
                    connections.spawn(serve_connection(stream, peer, raft.clone(), forward.clone(), contacts));
                }
                Err(e) => {
                    tracing::error!(error = %e, "controller listener accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve_connection(
    mut stream: TcpStream,
    peer: std::net::SocketAddr,
    raft: Raft,
    forward: ForwardHandler,
    leader_contacts: watch::Sender<u64>,
) {
    let mut accepted_appends = 0u32;
    loop {
        // Idle between requests is fine (heartbeats come every heartbeat interval);
        // a frame that started must finish.
        let readable = stream.readable().await;
        if readable.is_err() {
            return;
        }
        let req = match tokio::time::timeout(FRAME_TIMEOUT, read_frame::<_, Request>(&mut stream)).await {
            Ok(Ok(Some(req))) => req,
            Ok(Ok(None)) => return,
            Ok(Err(e)) => {
                if e.kind() == std::io::ErrorKind::InvalidData {
                    tracing::warn!(%peer, error = %e, "malformed controller frame; closing the connection");
                }
                return;
            }
            Err(_) => {
                tracing::warn!(%peer, "controller frame stalled; closing the connection");
                return;
            }
        };
        let resp = match req {
            Request::AppendEntries(r) => {
                let resp = raft.append_entries(r).await;
                if accepted_appends < 2
                    && resp.as_ref().is_ok_and(|r| !matches!(r, AppendEntriesResponse::HigherVote(_)))
                {
                    accepted_appends += 1;
                    if accepted_appends == 2 {
                        leader_contacts.send_modify(|n| *n += 1);
                    }
                }
                Response::AppendEntries(resp)
            }
            Request::Vote(r) => Response::Vote(raft.vote(r).await),
            Request::InstallSnapshot(r) => Response::InstallSnapshot(raft.install_snapshot(r).await),
            Request::Forward(op) => Response::Forward(forward(op).await),
        };
        if let Err(e) = write_frame(&mut stream, &resp).await {
            tracing::debug!(%peer, error = %e, "controller response not sent");
            return;
        }
    }
}
