//! Admin requests about the quorum and its partitions: ElectLeaders and
//! AlterPartitionReassignments (decided by the leader with its view of which brokers are
//! alive) and DescribeQuorum (the leader's view of its voters and observers, as
//! `kafka-metadata-quorum describe` shows it).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{Controller, Core};
use crate::controller::features::FeatureUpdate;
use crate::controller::operations::ControllerOp;
use crate::controller::partition_change::{self, election_outcomes, ElectionError, ElectionType};
use crate::controller::raft::wire::{ForwardError, OpReply};
use crate::controller::raft::NodeId;
use crate::controller::reassignment::{self, ReassignmentError};
use crate::controller::ControllerError;

/// One member of the quorum as the leader sees it (Kafka's `ReplicaState`). Offsets are
/// Raft log positions: the next index to write, so the leader's log end offset is its
/// last index + 1, as a Kafka log end offset is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumReplica {
    pub replica_id: i32,
    pub log_end_offset: i64,
    /// When the leader last heard from it (ms since the epoch; -1 unknown).
    pub last_fetch_ms: i64,
    /// When it last had everything the leader had (ms since the epoch; -1 never).
    pub last_caught_up_ms: i64,
    /// The directory of its metadata log, when the membership names one.
    #[serde(default)]
    pub directory_id: Option<Uuid>,
}

/// The quorum leader's answer to DescribeQuorum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumDescription {
    pub leader_id: i32,
    /// The Raft term: Kafka's leader epoch of the metadata log.
    pub leader_epoch: i32,
    pub high_watermark: i64,
    pub voters: Vec<QuorumReplica>,
    pub observers: Vec<QuorumReplica>,
    /// Each voter's controller listener address (the membership's).
    pub endpoints: Vec<(i32, String)>,
}

/// What the leader has seen of each member's progress since it became leader: the
/// matched log index, when it moved, and when the member last had the whole log.
#[derive(Debug, Default)]
pub(super) struct ProgressSeen {
    term: u64,
    members: BTreeMap<NodeId, Seen>,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    matched: Option<u64>,
    fetch_ms: i64,
    caught_up_ms: i64,
}

impl ProgressSeen {
    /// Fold in the leader's replication progress at `now_ms` (`last_log_index`: the
    /// leader's own last index).
    pub(super) fn observe(
        &mut self,
        term: u64,
        last_log_index: Option<u64>,
        matched: &BTreeMap<NodeId, Option<u64>>,
        now_ms: i64,
    ) {
        if term != self.term {
            *self = ProgressSeen { term, members: BTreeMap::new() };
        }
        for (id, m) in matched {
            let seen = self.members.entry(*id).or_insert(Seen { matched: None, fetch_ms: -1, caught_up_ms: -1 });
            if *m != seen.matched {
                seen.matched = *m;
                seen.fetch_ms = now_ms;
            }
            if *m >= last_log_index {
                seen.fetch_ms = now_ms;
                seen.caught_up_ms = now_ms;
            }
        }
    }

    fn replica(&self, id: NodeId, matched: Option<u64>, directory_id: Option<Uuid>) -> QuorumReplica {
        let seen = self.members.get(&id);
        QuorumReplica {
            replica_id: id as i32,
            log_end_offset: matched.map_or(0, |i| i as i64 + 1),
            last_fetch_ms: seen.map_or(-1, |s| s.fetch_ms),
            last_caught_up_ms: seen.map_or(-1, |s| s.caught_up_ms),
            directory_id,
        }
    }
}

impl Core {
    /// As the leader: the quorum as it stands, or NotLeader.
    pub(super) fn describe_quorum_here(&self) -> Result<OpReply, ForwardError> {
        let m = self.raft.metrics().borrow().clone();
        let (Some(matched), true) = (m.replication.as_ref(), m.current_leader == Some(self.node_id as NodeId)) else {
            return Err(ForwardError::NotLeader);
        };
        let matched: BTreeMap<NodeId, Option<u64>> = matched.iter().map(|(id, l)| (*id, l.map(|l| l.index))).collect();
        let mut seen = self.progress_seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.observe(m.current_term, m.last_log_index, &matched, super::liveness::now_ms());
        let membership = m.membership_config.membership();
        let directory = |id: NodeId| membership.get_node(&id).and_then(|n| n.directory_id);
        let describe = |ids: &mut dyn Iterator<Item = NodeId>| -> Vec<QuorumReplica> {
            ids.map(|id| seen.replica(id, matched.get(&id).copied().flatten(), directory(id))).collect()
        };
        let quorum = QuorumDescription {
            leader_id: self.node_id,
            leader_epoch: i32::try_from(m.current_term).unwrap_or(i32::MAX),
            high_watermark: m.last_applied.map_or(0, |l| l.index as i64 + 1),
            voters: describe(&mut membership.voter_ids()),
            observers: describe(&mut membership.learner_ids()),
            endpoints: membership
                .voter_ids()
                .filter_map(|id| Some((id as i32, membership.get_node(&id)?.addr.clone())))
                .collect(),
        };
        Ok(OpReply { index: None, records: Vec::new(), quorum: Some(quorum), refused: Vec::new() })
    }
}

/// While this node leads, keep [`ProgressSeen`] current with every change openraft
/// reports (a follower's progress between two DescribeQuorum requests).
pub(super) async fn watch_progress(core: std::sync::Weak<Core>, mut metrics: super::MetricsWatch) {
    while metrics.changed().await.is_ok() {
        let Some(core) = core.upgrade() else { return };
        let m = metrics.borrow_and_update().clone();
        if let Some(replication) = &m.replication {
            let matched = replication.iter().map(|(id, l)| (*id, l.map(|l| l.index))).collect();
            let mut seen = core.progress_seen.lock().unwrap_or_else(|e| e.into_inner());
            seen.observe(m.current_term, m.last_log_index, &matched, super::liveness::now_ms());
        }
    }
}

/// While this node leads the quorum: every `interval`, move leadership back to the
/// preferred replicas that can take it (Kafka's `auto.leader.rebalance.enable`, checked
/// every `leader.imbalance.check.interval.seconds`), so a restarted broker leads its
/// share again.
pub(super) async fn rebalance_leaders(core: std::sync::Weak<Core>, interval: std::time::Duration) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(c) = core.upgrade() else { return };
        if c.raft.metrics().borrow().current_leader != Some(c.node_id as NodeId) {
            continue;
        }
        let image = c.published.image();
        let imbalanced = partition_change::imbalanced(&image, &|r| image.broker_alive(r));
        if imbalanced.is_empty() {
            continue;
        }
        let op = ControllerOp::ElectLeaders { election: ElectionType::Preferred, partitions: Some(imbalanced.clone()) };
        match c.submit(op).await {
            Ok(reply) => tracing::info!(
                imbalanced = imbalanced.len(),
                elected = reply.records.len(),
                "automatic leader rebalance: preferred replicas lead again"
            ),
            Err(e) => tracing::debug!(error = %e, "automatic leader rebalance"),
        }
    }
}

impl Controller {
    /// ElectLeaders: each requested partition (or every partition, for `None`) with its
    /// outcome, as Kafka's controller answers.
    #[allow(clippy::type_complexity)]
    pub async fn elect_leaders(
        &self,
        election: ElectionType,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<Vec<(String, i32, Result<(), ElectionError>)>, ControllerError> {
        let before = self.image();
        let op = ControllerOp::ElectLeaders { election, partitions: partitions.clone() };
        let reply = self.run(move |core| async move { core.submit(op).await }).await?;
        Ok(election_outcomes(&before, election, partitions.as_deref(), &reply.records))
    }

    /// AlterPartitionReassignments: each partition's outcome. Requests are checked
    /// against this node's image (bad targets, unknown partitions, nothing to cancel);
    /// the valid ones go to the quorum leader, which decides them against its own.
    #[allow(clippy::type_complexity)]
    pub async fn alter_reassignments(
        &self,
        partitions: Vec<(String, i32, Option<Vec<i32>>)>,
        allow_replication_factor_change: bool,
    ) -> Result<Vec<(String, i32, Result<(), ReassignmentError>)>, ControllerError> {
        let image = self.image();
        let registered = |r: i32| image.brokers.contains_key(&r);
        let mut outcomes = Vec::with_capacity(partitions.len());
        let mut valid = Vec::new();
        for (topic, partition, target) in partitions {
            let checked = match image.topic(&topic) {
                Some(t) => reassignment::alter(
                    t,
                    partition,
                    target.as_deref(),
                    allow_replication_factor_change,
                    (&registered, &|_| true),
                    partition_change::unclean_allowed(&image, t),
                )
                .map(drop),
                None => Err(ReassignmentError::UnknownPartition),
            };
            if checked.is_ok() {
                valid.push((topic.clone(), partition, target));
            }
            outcomes.push((topic, partition, checked));
        }
        if !valid.is_empty() {
            let op = ControllerOp::AlterReassignments { partitions: valid, allow_replication_factor_change };
            self.run(move |core| async move { core.submit(op).await }).await?;
        }
        Ok(outcomes)
    }

    /// UnregisterBroker: drop broker `node_id`'s registration (see
    /// [`ControllerOp::UnregisterBroker`]). A single node that unregistered itself
    /// registers again at once: it is the only broker, and running; without that one
    /// request from any client left every partition leaderless for good. (A broker of a
    /// cluster registers again from its heartbeat loop.)
    pub async fn unregister_broker(&self, node_id: i32) -> Result<(), ControllerError> {
        self.run(move |core| async move { core.submit(ControllerOp::UnregisterBroker { node_id }).await.map(drop) })
            .await?;
        if !self.is_clustered() && node_id == self.node_id() {
            tracing::warn!(node_id, "this single node was unregistered; registering it again");
            self.register_again().await?;
        }
        Ok(())
    }

    /// This broker's registration is gone from the committed image while its process
    /// runs (an UnregisterBroker named it: `kafka-cluster unregister` from any client):
    /// register it again, as a restart would. In a cluster it comes back fenced and the
    /// next heartbeats let it in; a single node comes back unfenced and leads again.
    /// Its process did not stop, so its log lost nothing: its heartbeats say it started
    /// clean from now on (an unclean start was already accounted for at its first
    /// registration), so it keeps the eligibility its log has earned.
    pub async fn register_again(&self) -> Result<(), ControllerError> {
        self.set_started_after_clean_shutdown(true);
        let op = self.registration.clone();
        self.run(move |core| async move { core.submit(op).await.map(drop) }).await
    }

    /// UpdateFeatures: set finalized feature levels, all or none (see
    /// [`ControllerOp::UpdateFeatures`]).
    pub async fn update_features(
        &self,
        updates: Vec<FeatureUpdate>,
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        let op = ControllerOp::UpdateFeatures { updates, validate_only };
        self.run(move |core| async move { core.submit(op).await.map(drop) }).await
    }

    /// AddRaftVoter: make learner `node_id` (its metadata log in `directory_id`) a voter
    /// (see [`ControllerOp::AddRaftVoter`]).
    pub async fn add_raft_voter(&self, node_id: i32, directory_id: Uuid) -> Result<(), ControllerError> {
        let op = ControllerOp::AddRaftVoter { node_id, directory_id };
        self.run(move |core| async move { core.submit(op).await.map(drop) }).await
    }

    /// RemoveRaftVoter: voter `node_id` becomes a learner (see
    /// [`ControllerOp::RemoveRaftVoter`]).
    pub async fn remove_raft_voter(&self, node_id: i32, directory_id: Uuid) -> Result<(), ControllerError> {
        let op = ControllerOp::RemoveRaftVoter { node_id, directory_id };
        self.run(move |core| async move { core.submit(op).await.map(drop) }).await
    }

    /// DescribeQuorum, answered by the quorum leader.
    pub async fn describe_quorum(&self) -> Result<QuorumDescription, ControllerError> {
        let reply = self.run(|core| async move { core.submit(ControllerOp::DescribeQuorum).await }).await?;
        reply.quorum.ok_or_else(|| ControllerError::Internal("the leader sent no quorum description".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_records_when_members_moved_and_last_had_the_whole_log() {
        let mut seen = ProgressSeen::default();
        let at = |pairs: &[(NodeId, Option<u64>)]| pairs.iter().copied().collect::<BTreeMap<_, _>>();
        seen.observe(3, Some(10), &at(&[(1, Some(10)), (2, Some(10)), (3, None)]), 1_000);
        seen.observe(3, Some(12), &at(&[(1, Some(12)), (2, Some(11)), (3, None)]), 2_000);
        seen.observe(3, Some(12), &at(&[(1, Some(12)), (2, Some(11)), (3, None)]), 3_000);
        let r2 = seen.replica(2, Some(11), None);
        assert_eq!((r2.log_end_offset, r2.last_fetch_ms, r2.last_caught_up_ms), (12, 2_000, 1_000));
        let r1 = seen.replica(1, Some(12), None);
        assert_eq!((r1.last_fetch_ms, r1.last_caught_up_ms), (3_000, 3_000));
        let r3 = seen.replica(3, None, None);
        assert_eq!((r3.log_end_offset, r3.last_fetch_ms, r3.last_caught_up_ms), (0, -1, -1));
        // A new term starts over.
        seen.observe(4, Some(12), &at(&[(1, Some(12))]), 4_000);
        assert_eq!(seen.replica(2, Some(11), None).last_fetch_ms, -1);
    }
}
