//! The controller listener: answers Raft RPCs from the leader and candidates, and
//! operations forwarded by other controllers.
//!
//! One task per connection, one request at a time. A malformed or oversized frame, or a
//! frame that stalls half-sent, closes its connection with a log line.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
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
pub async fn serve(listener: TcpListener, raft: Raft, forward: ForwardHandler) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    connections.spawn(serve_connection(stream, peer, raft.clone(), forward.clone()));
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

async fn serve_connection(mut stream: TcpStream, peer: std::net::SocketAddr, raft: Raft, forward: ForwardHandler) {
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
            Request::AppendEntries(r) => Response::AppendEntries(raft.append_entries(r).await),
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
