//! A member whose metadata log was lost or replaced (a wiped disk, a new data dir) comes
//! back with a new directory id (`meta.properties`), an empty log and no memory of the
//! votes it gave. As a voter it could then vote twice in a term, or help elect a
//! candidate that lacks entries it had acknowledged: committed metadata lost. KIP-853
//! names each voter by node id *and* directory id for this reason, and so does runnel's
//! membership for the voters that joined as learners (voters named by
//! `--controller-quorum-voters` when the quorum formed have no directory id, as Kafka's
//! static voters have none, and are not checked).
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
//! What is not guarded: the leader still counts such a node's acknowledgements of
//! entries it replicates to it. Those entries are on its disk, so that is sound for the
//! leader of the current term; only a stale leader that the node hears from before the
//! current one could count it once more.

use std::sync::Weak;
use std::time::Duration;

use openraft::Membership;
use tokio::time::Instant;
use uuid::Uuid;

use super::{Core, MetricsWatch};
use crate::controller::operations::ControllerOp;
use crate::controller::raft::{ControllerNode, NodeId};
use crate::storage::meta_properties::encode_uuid;

/// How often a learner named with another directory asks the leader again.
const REJOIN_INTERVAL: Duration = Duration::from_secs(1);

/// How the membership names this node.
#[derive(Debug, Clone, PartialEq, Eq)]
enum OwnEntry {
    /// Not at all, or with this node's directory, or with none (a static voter).
    Current,
    /// As a voter, with the directory its lost log was in.
    StaleVoter(Uuid),
    /// As a learner, with that directory, at this address.
    StaleLearner(Uuid, String),
}

fn own_entry(membership: &Membership<NodeId, ControllerNode>, me: NodeId, mine: Uuid) -> OwnEntry {
    let Some(node) = membership.get_node(&me) else { return OwnEntry::Current };
    match node.directory_id {
        Some(old) if old != mine => {
            if membership.voter_ids().any(|v| v == me) {
                OwnEntry::StaleVoter(old)
            } else {
                OwnEntry::StaleLearner(old, node.addr.clone())
            }
        }
        _ => OwnEntry::Current,
    }
}

/// Until the controller stops: keep this node out of elections while the membership
/// names it as a voter under another directory, and have a learner renamed.
pub(super) async fn watch_own_entry(core: Weak<Core>, mut metrics: MetricsWatch, mine: Uuid) {
    let mut was = OwnEntry::Current;
    let mut last_rejoin: Option<Instant> = None;
    loop {
        let Some(c) = core.upgrade() else { return };
        let me = c.node_id as NodeId;
        let now = own_entry(metrics.borrow_and_update().membership_config.membership(), me, mine);
        if now != was {
            match &now {
                OwnEntry::StaleVoter(old) => {
                    c.raft.runtime_config().elect(false);
                    tracing::error!(
                        node_id = me,
                        "this node is a controller voter whose metadata log was in directory {}, and its log is \
                         now in {}: the log it had, and the votes it gave, were lost. It neither votes nor stands \
                         for election until that voter is removed (kafka-metadata-quorum remove-controller \
                         --controller-id {me} --controller-directory-id {}) and this node added back \
                         (add-controller)",
                        encode_uuid(old),
                        encode_uuid(&mine),
                        encode_uuid(old),
                    );
                }
                OwnEntry::StaleLearner(old, _) => tracing::info!(
                    node_id = me,
                    "this node is a controller learner under directory {}; asking the leader to name it with \
                     {}",
                    encode_uuid(old),
                    encode_uuid(&mine),
                ),
                OwnEntry::Current => {}
            }
            if matches!(was, OwnEntry::StaleVoter(_)) {
                c.raft.runtime_config().elect(true);
                tracing::info!(node_id = me, "no longer a voter under a lost log's directory: elections resume");
            }
            was = now.clone();
        }
        if let OwnEntry::StaleLearner(_, addr) = &now {
            if last_rejoin.is_none_or(|t| t.elapsed() >= REJOIN_INTERVAL) {
                last_rejoin = Some(Instant::now());
                let op = ControllerOp::AddObserver {
                    node_id: c.node_id,
                    controller_addr: addr.clone(),
                    directory_id: Some(mine),
                    relayed: false,
                };
                if let Err(e) = c.submit(op).await {
                    tracing::debug!(error = %e, "asking to be named with this node's directory; will retry");
                }
            }
        }
        drop(c);
        // A learner waiting to be renamed looks again on its own (a refused request
        // changes nothing that wakes the watch).
        let _ = tokio::time::timeout(REJOIN_INTERVAL, metrics.changed()).await;
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
        let node = |d: Option<Uuid>| ControllerNode::new("10.0.0.4:9093", d);
        let with = |voter: bool, d: Option<Uuid>| {
            let voters = if voter { BTreeSet::from([1, 4]) } else { BTreeSet::from([1]) };
            Membership::new(vec![voters], BTreeMap::from([(1, node(None)), (4, node(d))]))
        };
        assert_eq!(own_entry(&with(true, Some(mine)), 4, mine), OwnEntry::Current);
        assert_eq!(own_entry(&with(true, None), 4, mine), OwnEntry::Current);
        assert_eq!(own_entry(&with(true, Some(old)), 4, mine), OwnEntry::StaleVoter(old));
        assert_eq!(own_entry(&with(false, Some(old)), 4, mine), OwnEntry::StaleLearner(old, "10.0.0.4:9093".into()));
        assert_eq!(own_entry(&with(false, Some(mine)), 4, mine), OwnEntry::Current);
        assert_eq!(own_entry(&with(true, Some(old)), 5, mine), OwnEntry::Current);
    }
}
