//! Changing the set of voters (KIP-853: AddRaftVoter, RemoveRaftVoter), as the quorum
//! leader does it: a Raft membership change (openraft's joint consensus, then the new
//! uniform configuration), refused with Kafka's error codes where Kafka's leader refuses.
//!
//! A voter to add must already follow the log as a learner (a broker-only node with a
//! controller listener joins as one when it starts) and have caught up with the leader;
//! a removed voter stays a learner, so its broker keeps serving. A leader that removes
//! itself leads until the change is committed, then steps down.

use std::collections::BTreeSet;
use std::time::Duration;

use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::ChangeMembers;
use tokio::time::Instant;
use uuid::Uuid;

use super::{internal, Core};
use crate::controller::image::MetadataImage;
use crate::controller::raft::wire::{ErrorKind, ForwardError, OpReply};
use crate::controller::raft::{ControllerNode, NodeId};
use crate::controller::records::VOTERS_IN_MEMBERSHIP;
use crate::storage::meta_properties::encode_uuid;

/// How long a voter to add may take to catch up with the leader's log (within the
/// operation's own deadline).
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long to wait before trying a voter change again while another one commits.
const IN_PROGRESS_RETRY: Duration = Duration::from_millis(50);

impl Core {
    /// Where member `id` listens for other controllers: the membership's address, or the
    /// one `--controller-quorum-voters` gave (empty when neither knows it).
    pub(super) fn address_of(&self, id: NodeId) -> String {
        let m = self.raft.metrics().borrow().membership_config.clone();
        match m.membership().get_node(&id) {
            Some(node) => node.addr.clone(),
            None => self.voters.get(&id).cloned().unwrap_or_default(),
        }
    }

    /// As the leader: make learner `id` a voter (AddRaftVoter).
    pub(super) async fn add_voter(
        &self,
        id: NodeId,
        directory_id: Uuid,
        deadline: Instant,
    ) -> Result<OpReply, ForwardError> {
        self.check_reconfigurable("adding")?;
        every_broker_finds_new_voters(&self.published.image())?;
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership().clone();
        if membership.voter_ids().any(|v| v == id) {
            let voters: Vec<NodeId> = membership.voter_ids().collect();
            return Err(refused(
                ErrorKind::DuplicateVoter,
                format!("The voter id for {id} is already part of the set of voters {voters:?}."),
            ));
        }
        let Some(node) = membership.get_node(&id) else {
            return Err(refused(
                ErrorKind::NotController,
                format!(
                    "node {id} does not follow the metadata log: start it first (a broker-only node with a \
                     controller listener joins the quorum as a learner)"
                ),
            ));
        };
        // The directory the node itself reported (`replaced_log.rs`), as Kafka's leader
        // checks the one its observer fetches with: a wrong id would make a voter that
        // refuses every vote.
        match node.directory_id {
            Some(known) if known == directory_id => {}
            Some(known) => {
                return Err(refused(
                    ErrorKind::NotController,
                    format!(
                        "node {id} follows the metadata log from directory {}, not {}",
                        encode_uuid(&known),
                        encode_uuid(&directory_id)
                    ),
                ))
            }
            None => {
                return Err(refused(
                    ErrorKind::NotController,
                    format!(
                        "node {id} has not reported the directory it follows the metadata log from (it is \
                         starting, or runs an older release); try again"
                    ),
                ))
            }
        }
        self.wait_caught_up(id, m.last_log_index.unwrap_or(0), deadline.min(Instant::now() + CATCH_UP_TIMEOUT)).await?;
        self.change_voters(ChangeMembers::AddVoterIds(BTreeSet::from([id])), deadline).await?;
        tracing::info!(node_id = id, directory_id = %encode_uuid(&directory_id), "controller quorum: voter added");
        Ok(OpReply { index: None, records: Vec::new(), quorum: None, refused: Vec::new() })
    }

    /// As the leader: make voter `id` a learner (RemoveRaftVoter). `directory_id` must be
    /// the voter's (the nil uuid for one that has none), so that a request about a disk
    /// that was replaced does not remove its successor.
    pub(super) async fn remove_voter(
        &self,
        id: NodeId,
        directory_id: Uuid,
        deadline: Instant,
    ) -> Result<OpReply, ForwardError> {
        self.check_reconfigurable("removing")?;
        let membership = self.raft.metrics().borrow().membership_config.membership().clone();
        let voters: Vec<(NodeId, Uuid)> = membership
            .voter_ids()
            .map(|v| (v, membership.get_node(&v).and_then(|n| n.directory_id).unwrap_or_default()))
            .collect();
        if !voters.contains(&(id, directory_id)) || voters.len() == 1 {
            let keys: Vec<String> = voters.iter().map(|(v, d)| format!("{v}:{}", encode_uuid(d))).collect();
            return Err(refused(
                ErrorKind::VoterNotFound,
                format!("Cannot remove voter {id}:{} from the set of voters {keys:?}", encode_uuid(&directory_id)),
            ));
        }
        self.change_voters(ChangeMembers::RemoveVoters(BTreeSet::from([id])), deadline).await?;
        tracing::info!(node_id = id, "controller quorum: voter removed (it stays a learner)");
        Ok(OpReply { index: None, records: Vec::new(), quorum: None, refused: Vec::new() })
    }

    /// A quorum formed from one voter by a node started alone cannot change: such a node
    /// runs as a single node (no heartbeats, no fencing), which a second voter would break.
    /// And one change at a time, as Kafka's leader allows.
    fn check_reconfigurable(&self, what: &str) -> Result<(), ForwardError> {
        if !self.clustered {
            return Err(refused(
                ErrorKind::UnsupportedVersion,
                format!(
                    "Cluster doesn't support {what} voters: this node was started as a single node (no \
                     --controller-quorum-voters)"
                ),
            ));
        }
        let m = self.raft.metrics().borrow().membership_config.clone();
        if m.membership().get_joint_config().len() > 1 {
            return Err(refused(
                ErrorKind::NotController,
                "Request timed out waiting for voters to commit the latest voter change".into(),
            ));
        }
        Ok(())
    }

    /// Until learner `id` has the leader's log up to `index`, or REQUEST_TIMED_OUT at
    /// `until` (Kafka's leader refuses a lagging voter the same way).
    async fn wait_caught_up(&self, id: NodeId, index: u64, until: Instant) -> Result<(), ForwardError> {
        let mut metrics = self.raft.metrics();
        loop {
            let matched =
                metrics.borrow().replication.as_ref().and_then(|r| r.get(&id).cloned().flatten()).map(|l| l.index);
            if matched.is_some_and(|m| m >= index) {
                return Ok(());
            }
            // Timed out, or Raft stopped (its metrics will not change again).
            if !matches!(tokio::time::timeout_at(until, metrics.changed()).await, Ok(Ok(()))) {
                return Err(refused(
                    ErrorKind::NotController,
                    format!(
                        "Aborted add voter operation for {id} since it is lagging behind (at {matched:?} of {index})"
                    ),
                ));
            }
        }
    }

    /// Commit `change`. Another membership change still committing (a member being named
    /// by its directory, `replaced_log.rs`, takes one commit) is waited for within the
    /// deadline.
    async fn change_voters(
        &self,
        change: ChangeMembers<NodeId, ControllerNode>,
        deadline: Instant,
    ) -> Result<(), ForwardError> {
        loop {
            let result = tokio::time::timeout_at(deadline, self.raft.change_membership(change.clone(), true)).await;
            return match result {
                Err(_) => Err(refused(
                    ErrorKind::NotController,
                    "Request timed out waiting for the voter change to commit (it may still commit)".into(),
                )),
                Ok(Ok(_)) => Ok(()),
                Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => Err(ForwardError::NotLeader),
                Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e)))) => match e {
                    ChangeMembershipError::InProgress(_) if Instant::now() + IN_PROGRESS_RETRY < deadline => {
                        tokio::time::sleep(IN_PROGRESS_RETRY).await;
                        continue;
                    }
                    ChangeMembershipError::InProgress(_) => Err(refused(
                        ErrorKind::NotController,
                        "Request timed out waiting for voters to commit the latest voter change".into(),
                    )),
                    e => Err(refused(ErrorKind::InvalidRequest, e.to_string())),
                },
                Ok(Err(e)) => Err((&internal(e)).into()),
            };
        }
    }
}

/// A voter AddRaftVoter adds is not among the voters the nodes' flags name: every
/// registered broker must find the leader through the membership, or one that cannot
/// would lose the controller (and be fenced) once that voter leads.
fn every_broker_finds_new_voters(image: &MetadataImage) -> Result<(), ForwardError> {
    let behind = image.brokers_behind(VOTERS_IN_MEMBERSHIP);
    if behind.is_empty() {
        return Ok(());
    }
    Err(refused(
        ErrorKind::UnsupportedVersion,
        format!(
            "brokers {behind:?} run a release that finds the controller leader only among \
             --controller-quorum-voters: upgrade them before adding voters"
        ),
    ))
}

fn refused(kind: ErrorKind, message: String) -> ForwardError {
    ForwardError::Refused { kind, message }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::records::{MetadataRecord, METADATA_FORMAT};

    fn register(image: &mut MetadataImage, node_id: i32, metadata_format: u16) {
        image.apply(&MetadataRecord::test_registration(node_id, metadata_format));
    }

    #[test]
    fn voters_are_added_only_once_every_broker_finds_them() {
        let mut image = MetadataImage::default();
        register(&mut image, 1, METADATA_FORMAT);
        register(&mut image, 2, VOTERS_IN_MEMBERSHIP - 1);
        let refused = every_broker_finds_new_voters(&image);
        assert!(
            matches!(&refused, Err(ForwardError::Refused { kind: ErrorKind::UnsupportedVersion, message })
                if message.contains("[2]")),
            "{refused:?}"
        );
        register(&mut image, 2, METADATA_FORMAT);
        assert!(every_broker_finds_new_voters(&image).is_ok());
    }
}
