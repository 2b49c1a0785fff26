//! A member whose metadata log was lost or replaced (a wiped disk, a new data dir) comes
//! back with a new directory id (`meta.properties`), an empty log and no memory of the
//! votes it gave. As a voter it could then vote twice in a term, or help elect a
//! candidate that lacks entries it had acknowledged: committed metadata lost. KIP-853
//! names each voter by node id *and* directory id for this reason, and so does runnel's
//! membership, as a Kafka quorum whose voters were formatted with directory ids: a
//! member the membership names without one (a voter `--controller-quorum-voters` named
//! when the quorum formed, or a member from an older release) sends its directory id to
//! the leader, which records it. Only the first directory a voter is named with counts;
//! a node that lost its log before it was named is not told apart.
//!
//! Two guards, as Kafka's:
//! * votes: a vote request carries both directory ids, and a node refuses a vote that
//!   does not match (`raft::rpc_server`);
//! * elections: this task watches how the membership names this node. Named as a voter
//!   under another directory, the node stands for no election until the operator
//!   removes that voter (`remove-controller` with the old directory id). Named as a
//!   learner under another directory, it asks the leader to name it with its directory
//!   now (AddObserver), so that `add-controller` can make it a voter again.
//!
//! The same task has a voter's address follow its listener, as Kafka's voters send
//! UpdateRaftVoter: a voter named under its own directory (or none) at another address
//! than the one it is started with asks the leader to name it at the new one. A single
//! node grown into a quorum is such a voter: started alone, it was named at no address.
//!
//! What is not guarded: the leader still counts such a node's acknowledgements of
//! entries it replicates to it. Those entries are on its disk, so that is sound for the
//! leader of the current term; only a stale leader that the node hears from before the
//! current one could count it once more.

use std::sync::Weak;
use std::time::Duration;

use openraft::Membership;
use tokio::time::Instant;
use uuid::Uuid;

use super::bootstrap::ask_voters;
use super::{Core, MetricsWatch};
use crate::controller::operations::ControllerOp;
use crate::controller::raft::{ControllerNode, NodeId};
use crate::storage::meta_properties::encode_uuid;

/// How often a member to be named with its directory asks the leader again.
const NAME_RETRY: Duration = Duration::from_secs(1);

/// How the membership names this node.
#[derive(Debug, Clone, PartialEq, Eq)]
enum OwnEntry {
    /// Not at all, or with this node's directory.
    Current,
    /// As a voter, with the directory its lost log was in.
    StaleVoter(Uuid),
    /// As a learner with another directory, or as any member with none: the leader is
    /// asked to name it with this node's directory.
    Unnamed { was: Option<Uuid> },
    /// As a voter with this node's directory (or none), at another address than `addr`:
    /// the leader is asked to name it at `addr` (and with this node's directory).
    Moved { was: String },
}

fn own_entry(membership: &Membership<NodeId, ControllerNode>, me: NodeId, mine: Uuid, addr: &str) -> OwnEntry {
    let Some(node) = membership.get_node(&me) else { return OwnEntry::Current };
    let voter = membership.voter_ids().any(|v| v == me);
    match node.directory_id {
        Some(old) if voter && old != mine => OwnEntry::StaleVoter(old),
        _ if voter && !addr.is_empty() && node.addr != addr => OwnEntry::Moved { was: node.addr.clone() },
        Some(d) if d == mine => OwnEntry::Current,
        was => OwnEntry::Unnamed { was },
    }
}

/// Until the controller stops: keep this node out of elections while the membership
/// names it as a voter under another directory, and have it named with its directory
/// where it can be. The controller opens Raft with elections off when it runs this, and
/// the first look turns them on (so a voter named under a lost log's directory never
/// stands between its start and that look). `addr` is where other controllers reach this
/// node (a learner renamed is named with it; a voter keeps its address).
pub(super) async fn watch_own_entry(core: Weak<Core>, mut metrics: MetricsWatch, mine: Uuid, addr: String) {
    let mut seen: Option<OwnEntry> = None;
    let mut last_ask: Option<Instant> = None;
    let mut refusals = 0u32;
    loop {
        let Some(c) = core.upgrade() else { return };
        let me = c.node_id as NodeId;
        let now = own_entry(metrics.borrow_and_update().membership_config.membership(), me, mine, &addr);
        if seen.as_ref() != Some(&now) {
            let stale = matches!(now, OwnEntry::StaleVoter(_));
            c.raft.runtime_config().elect(!stale);
            match &now {
                OwnEntry::StaleVoter(old) => tracing::error!(
                    node_id = me,
                    "this node is a controller voter whose metadata log was in directory {}, and its log is now \
                     in {}: the log it had, and the votes it gave, were lost. It neither votes nor stands for \
                     election until that voter is removed (kafka-metadata-quorum remove-controller \
                     --controller-id {me} --controller-directory-id {}) and this node added back \
                     (add-controller)",
                    encode_uuid(old),
                    encode_uuid(&mine),
                    encode_uuid(old),
                ),
                OwnEntry::Unnamed { was: Some(old) } => tracing::info!(
                    node_id = me,
                    "this node is a controller learner under directory {}; asking the leader to name it with {}",
                    encode_uuid(old),
                    encode_uuid(&mine),
                ),
                OwnEntry::Moved { was } => tracing::info!(
                    node_id = me,
                    "this node is a controller voter named at {was:?}; asking the leader to name it at {addr}",
                ),
                OwnEntry::Unnamed { was: None } | OwnEntry::Current => {}
            }
            if matches!(seen, Some(OwnEntry::StaleVoter(_))) && !stale {
                tracing::info!(node_id = me, "no longer a voter under a lost log's directory: elections resume");
            }
            seen = Some(now.clone());
        }
        let asked_lately = last_ask.is_some_and(|t| t.elapsed() < NAME_RETRY);
        if matches!(now, OwnEntry::Unnamed { .. } | OwnEntry::Moved { .. }) && !asked_lately {
            last_ask = Some(Instant::now());
            let op = ControllerOp::AddObserver {
                node_id: c.node_id,
                controller_addr: addr.clone(),
                directory_id: Some(mine),
                relayed: false,
            };
            // A voter at a new address hears from no leader (the leader sends to the old
            // one), so what it knows of the leadership is stale: even a leadership it
            // restored at start, in a term the others have left (an operation it took as
            // that leader would wait out its timeout). It asks the other voters it was
            // started with, as a joining learner does.
            let others = c.voters.keys().any(|&v| v != me);
            let asked = if matches!(now, OwnEntry::Moved { .. }) && others {
                match ask_voters(&c, &op, "having this voter named at its address").await {
                    true => Ok(()),
                    false => Err("no other voter it was started with passed it on to a leader".to_owned()),
                }
            } else {
                c.submit(op).await.map(|_| ()).map_err(|e| e.to_string())
            };
            if let Err(e) = asked {
                refusals += 1;
                if refusals.is_power_of_two() {
                    tracing::warn!(error = %e, refusals, "this node is not named as it is yet; retrying");
                }
            }
        }
        drop(c);
        // A member waiting to be named looks again on its own (a refused request
        // changes nothing that wakes the watch).
        let _ = tokio::time::timeout(NAME_RETRY, metrics.changed()).await;
        if metrics.has_changed().is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    #[test]
    fn the_membership_names_this_node_as_it_is_or_as_it_was() {
        let (mine, old) = (Uuid::from_u128(7), Uuid::from_u128(3));
        let at = "10.0.0.4:9093";
        let node = |d: Option<Uuid>| ControllerNode::new(at, d);
        let with = |voter: bool, d: Option<Uuid>| {
            let voters = if voter { BTreeSet::from([1, 4]) } else { BTreeSet::from([1]) };
            Membership::new(vec![voters], BTreeMap::from([(1, node(None)), (4, node(d))]))
        };
        let unnamed = |was| OwnEntry::Unnamed { was };
        assert_eq!(own_entry(&with(true, Some(mine)), 4, mine, at), OwnEntry::Current);
        assert_eq!(own_entry(&with(true, None), 4, mine, at), unnamed(None));
        assert_eq!(own_entry(&with(true, Some(old)), 4, mine, at), OwnEntry::StaleVoter(old));
        assert_eq!(own_entry(&with(false, Some(old)), 4, mine, at), unnamed(Some(old)));
        assert_eq!(own_entry(&with(false, None), 4, mine, at), unnamed(None));
        assert_eq!(own_entry(&with(false, Some(mine)), 4, mine, at), OwnEntry::Current);
        assert_eq!(own_entry(&with(true, Some(old)), 5, mine, at), OwnEntry::Current);
        // A voter started at another address (or a single node grown into a quorum,
        // named at none) asks to be named where it listens; a learner's start does that.
        let moved = "10.0.0.9:9093";
        let was = |a: &str| OwnEntry::Moved { was: a.to_owned() };
        assert_eq!(own_entry(&with(true, Some(mine)), 4, mine, moved), was(at));
        assert_eq!(own_entry(&with(false, Some(mine)), 4, mine, moved), OwnEntry::Current);
        assert_eq!(own_entry(&with(true, None), 4, mine, moved), was(at));
        assert_eq!(own_entry(&with(true, Some(old)), 4, mine, moved), OwnEntry::StaleVoter(old));
        assert_eq!(own_entry(&with(true, Some(mine)), 4, mine, ""), OwnEntry::Current);
        let unaddressed =
            |d| Membership::new(vec![BTreeSet::from([4])], BTreeMap::from([(4, ControllerNode::new("", d))]));
        assert_eq!(own_entry(&unaddressed(Some(mine)), 4, mine, moved), was(""));
        assert_eq!(own_entry(&unaddressed(None), 4, mine, moved), was(""));
    }
}
