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
//!
//! A vote is refused here, before Raft sees it, when the directory ids do not match
//! (KIP-853, see [`VoteCall`]): the candidate knows this node as a voter whose metadata
//! log was in another directory (this node's log was lost or replaced, and with it the
//! votes it gave), or this node knows the candidate as such a voter.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use openraft::raft::{AppendEntriesResponse, VoteResponse};
use openraft::Membership;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use uuid::Uuid;

use super::wire::{read_frame, write_frame, ForwardError, OpReply, Request, Response, VoteCall};
use super::{ControllerNode, NodeId, Raft};
use crate::controller::operations::ControllerOp;
use crate::storage::meta_properties::encode_uuid;

/// A started frame must arrive whole within this long.
const FRAME_TIMEOUT: Duration = Duration::from_secs(30);

pub type ForwardFuture = Pin<Box<dyn Future<Output = Result<OpReply, ForwardError>> + Send>>;

/// Where forwarded operations go (the controller, when it leads).
pub type ForwardHandler = Arc<dyn Fn(ControllerOp) -> ForwardFuture + Send + Sync>;

/// Serve until the task is aborted; aborting it also ends every connection task.
/// `leader_contacts` counts the replication streams leaders opened (see the module doc);
/// `directory_id` is this node's (`meta.properties`), for votes.
pub async fn serve(
    listener: TcpListener,
    raft: Raft,
    forward: ForwardHandler,
    leader_contacts: watch::Sender<u64>,
    directory_id: Option<Uuid>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let contacts = leader_contacts.clone();
                    let raft = raft.clone();
                    connections.spawn(serve_connection(stream, peer, raft, forward.clone(), contacts, directory_id));
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
    directory_id: Option<Uuid>,
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
            Request::Vote(call) => {
                let membership = raft.metrics().borrow().membership_config.membership().clone();
                match vote_refusal(&call, directory_id, &membership) {
                    Some(why) => {
                        tracing::warn!(%peer, candidate = ?call.request.vote.leader_id().voted_for(), "vote refused: {why}");
                        Response::Vote(Ok(VoteResponse {
                            vote: call.request.vote,
                            vote_granted: false,
                            last_log_id: None,
                        }))
                    }
                    None => Response::Vote(raft.vote(call.request).await),
                }
            }
            Request::InstallSnapshot(r) => Response::InstallSnapshot(raft.install_snapshot(r).await),
            Request::Forward(op) => Response::Forward(forward(op).await),
        };
        if let Err(e) = write_frame(&mut stream, &resp).await {
            tracing::debug!(%peer, error = %e, "controller response not sent");
            return;
        }
    }
}

/// Why this node, whose metadata log is in directory `mine`, must not vote as `call`
/// asks, if it must not (KIP-853). Ids not known on either side (a member not named
/// by its directory yet, a node of an older release) are not checked.
fn vote_refusal(
    call: &VoteCall,
    mine: Option<Uuid>,
    membership: &Membership<NodeId, ControllerNode>,
) -> Option<String> {
    let candidate = call.request.vote.leader_id().voted_for()?;
    if let (Some(meant), Some(mine)) = (call.voter_directory_id, mine) {
        if meant != mine {
            return Some(format!(
                "the candidate knows this node as the voter whose metadata log was in directory {}, and this \
                 node's is {}: its log and the votes it gave were lost. It votes again once it is removed \
                 (remove-controller with the old directory id) and added back (add-controller)",
                encode_uuid(&meant),
                encode_uuid(&mine)
            ));
        }
    }
    // Only a voter of this node's membership: a learner (or a member this node's view,
    // which may lag, does not yet name as a voter) is not checked, or a view behind the
    // leader's could refuse a legitimate candidate.
    if !membership.voter_ids().any(|v| v == candidate) {
        return None;
    }
    let known = membership.get_node(&candidate).and_then(|n| n.directory_id);
    if let (Some(known), Some(theirs)) = (known, call.candidate_directory_id) {
        if known != theirs {
            return Some(format!(
                "candidate {candidate} is the voter whose metadata log was in directory {}, and it asks from \
                 directory {}: its log was lost",
                encode_uuid(&known),
                encode_uuid(&theirs)
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use openraft::raft::VoteRequest;
    use openraft::Vote;

    use super::*;

    fn call(candidate_directory_id: Option<u128>, voter_directory_id: Option<u128>) -> VoteCall {
        VoteCall {
            request: VoteRequest { vote: Vote::new(7, 2), last_log_id: None },
            candidate_directory_id: candidate_directory_id.map(Uuid::from_u128),
            voter_directory_id: voter_directory_id.map(Uuid::from_u128),
        }
    }

    #[test]
    fn a_vote_is_refused_only_when_known_directory_ids_differ() {
        let node = |d: Option<u128>| ControllerNode::new("x", d.map(Uuid::from_u128));
        let nodes = BTreeMap::from([(1, node(Some(1))), (2, node(Some(2))), (3, node(None))]);
        let membership = Membership::new(vec![BTreeSet::from([1, 2, 3])], nodes);
        let me = Some(Uuid::from_u128(1));
        assert_eq!(vote_refusal(&call(Some(2), Some(1)), me, &membership), None);
        // Ids not known on one side or the other: nothing to check.
        assert_eq!(vote_refusal(&call(None, None), me, &membership), None);
        assert_eq!(vote_refusal(&call(Some(2), Some(1)), None, &membership), None);
        // The candidate means this node's old log.
        let why = vote_refusal(&call(Some(2), Some(9)), me, &membership).unwrap();
        assert!(why.contains("AAAAAAAAAAAAAAAAAAAACQ") && why.contains("lost"), "{why}");
        // The candidate is node 2 under a new directory.
        let why = vote_refusal(&call(Some(8), Some(1)), me, &membership).unwrap();
        assert!(why.contains("candidate 2"), "{why}");
        // A static voter (no directory id in the membership) is not checked, nor is a
        // candidate this node knows only as a learner.
        let mut from_3 = call(Some(8), Some(1));
        from_3.request.vote = Vote::new(7, 3);
        assert_eq!(vote_refusal(&from_3, me, &membership), None);
        let nodes = BTreeMap::from([(1, node(Some(1))), (2, node(Some(2)))]);
        let learner_2 = Membership::new(vec![BTreeSet::from([1])], nodes);
        assert_eq!(vote_refusal(&call(Some(8), Some(1)), me, &learner_2), None);
    }

    #[test]
    fn a_vote_call_reads_as_the_bare_request_and_back() {
        let full = call(Some(1), Some(2));
        let json = serde_json::to_string(&Request::Vote(full.clone())).unwrap();
        // An older release reads the bare request (serde skips the unknown ids).
        let old: serde_json::Value = serde_json::from_str(&json).unwrap();
        let bare: VoteRequest<NodeId> = serde_json::from_value(old["Vote"].clone()).unwrap();
        assert_eq!(bare, full.request);
        let back: VoteCall = serde_json::from_value(old["Vote"].clone()).unwrap();
        assert_eq!(back, full);
        // And an older release's request reads as one without ids.
        let from_old: VoteCall = serde_json::from_str(&serde_json::to_string(&full.request).unwrap()).unwrap();
        assert_eq!(from_old, call(None, None));
        assert!(!serde_json::to_string(&call(None, None)).unwrap().contains("directory"));
    }
}
