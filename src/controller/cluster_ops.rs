//! The quorum leader's decisions that depend on which brokers are alive: heartbeats
//! (registration of a new incarnation, unfencing, controlled shutdown), session expiry,
//! and AlterPartition. Pure: the image, the leader's [`BrokerLiveness`] and `now` in;
//! records out (Kafka's `ReplicationControlManager` and `ClusterControlManager`).

use uuid::Uuid;

use super::broker_liveness::{BrokerLiveness, HeartbeatOutcome};
use super::image::{BrokerImage, MetadataImage};
use super::operations::{ControllerOp, IsrAlteration};
use super::partition_change::{
    alter_partition, elect_leaderless, elect_requested, election_targets, remove_broker, remove_offline_replicas,
    remove_unclean_shutdown, unclean_allowed, AlterPartitionError, IsrProposal,
};
use super::reassignment;
use super::records::MetadataRecord;
use super::ControllerError;

/// The records `op` commits, given the leader's liveness view (which it updates).
pub fn decide(
    image: &MetadataImage,
    op: &ControllerOp,
    liveness: &mut BrokerLiveness,
    now_ms: i64,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let mut out = Changes { image: image.clone(), records: Vec::new() };
    match op {
        ControllerOp::BrokerHeartbeat {
            node_id,
            incarnation,
            want_shut_down,
            offline_replicas,
            metadata_format,
            clean_shutdown,
        } => {
            if !image.brokers.contains_key(node_id) {
                return Err(ControllerError::Refused(format!("broker {node_id} is not registered")));
            }
            let outcome = liveness.heartbeat(*node_id, *incarnation, *want_shut_down, now_ms);
            out.register_process(*node_id, *incarnation, *metadata_format);
            match outcome {
                HeartbeatOutcome::Registered => {
                    out.fence(*node_id, liveness);
                    if !clean_shutdown {
                        out.push(remove_unclean_shutdown(&out.image, *node_id, &alive(liveness)));
                    }
                }
                HeartbeatOutcome::Unfenced => {
                    out.set_fenced(*node_id, false);
                    out.elect_leaderless(liveness);
                }
                HeartbeatOutcome::ShutdownRequested => {
                    if !out.image.in_controlled_shutdown(*node_id) {
                        out.push(vec![MetadataRecord::BrokerControlledShutdown { node_id: *node_id }]);
                    }
                    out.push(remove_broker(&out.image, *node_id, &alive(liveness)));
                }
                HeartbeatOutcome::Unchanged => {
                    if liveness.is_shutting_down(*node_id) {
                        // Partitions whose other replicas were down at the request.
                        out.push(remove_broker(&out.image, *node_id, &alive(liveness)));
                    } else if liveness.is_alive(*node_id) {
                        // After a controller failover the image may still say fenced, or
                        // in controlled shutdown when the broker no longer is.
                        let stale = out.image.brokers.get(node_id).is_some_and(|b| b.fenced)
                            || out.image.in_controlled_shutdown(*node_id);
                        if stale {
                            out.push(vec![MetadataRecord::BrokerFenced { node_id: *node_id, fenced: false }]);
                        }
                        out.elect_leaderless(liveness);
                    }
                }
            }
            // Replicas in failed dirs this leader did not know of (it took over since
            // they failed, or their report was lost): out of the ISRs and leadership, as
            // for ReplicasOffline, and kept out.
            if let Some(offline) = offline_replicas {
                let new = liveness.offline_replicas_are(*node_id, offline);
                if !new.is_empty() {
                    out.push(remove_offline_replicas(&out.image, *node_id, &new, &alive(liveness)));
                }
            }
        }
        ControllerOp::ExpireBrokers => {
            for node in liveness.expire(now_ms) {
                if liveness.found_gone(node) {
                    tracing::warn!(
                        node_id = node,
                        "broker missed its heartbeat and nothing listens at its address; fencing it"
                    );
                } else {
                    tracing::warn!(node_id = node, "broker session expired; fencing it");
                }
                out.fence(node, liveness);
            }
        }
        ControllerOp::AlterPartition {
            broker,
            topic_id,
            partition,
            leader_epoch,
            partition_epoch,
            incarnation,
            remove,
            add,
            add_broker_epoch,
        } => {
            if incarnation.is_some_and(|i| liveness.is_stale(*broker, i)) {
                return Err(stale_process(*broker));
            }
            let current = image.topic_by_id(topic_id).and_then(|t| t.partition(*partition)).map(|p| p.partition_epoch);
            let change = IsrAlteration {
                topic_id: *topic_id,
                partition: *partition,
                leader_epoch: *leader_epoch,
                // An older release's broker: against the ISR as it is now.
                partition_epoch: partition_epoch.or(current).unwrap_or(0),
                remove: remove.clone(),
                add: *add,
                add_broker_epoch: *add_broker_epoch,
            };
            out.alter_isr(*broker, &change, liveness)?;
        }
        ControllerOp::AlterPartitions { .. } => {
            return Err(ControllerError::Internal("AlterPartitions is decided by decide_alter_partitions".into()))
        }
        ControllerOp::ReplicasOffline { broker, partitions } => {
            liveness.replicas_offline(*broker, partitions);
            out.push(remove_offline_replicas(image, *broker, partitions, &alive(liveness)));
        }
        ControllerOp::ElectLeaders { election, partitions } => {
            for (topic, partition) in election_targets(image, partitions.as_deref()) {
                if let Some(topic) = image.topic(&topic) {
                    if let Ok(r) = elect_requested(image, topic, partition, *election, &alive(liveness)) {
                        out.records.push(r);
                    }
                }
            }
        }
        ControllerOp::AlterReassignments { partitions, allow_replication_factor_change } => {
            let registered = |r: i32| image.brokers.contains_key(&r);
            for (topic, partition, target) in partitions {
                let Some(t) = out.image.topic(topic).cloned() else { continue };
                let decided = reassignment::alter(
                    &t,
                    *partition,
                    target.as_deref(),
                    *allow_replication_factor_change,
                    (&registered, &alive(liveness)),
                    unclean_allowed(&out.image, &t),
                );
                if let Ok(Some(r)) = decided {
                    out.push(vec![r]);
                }
            }
        }
        ControllerOp::UnregisterBroker { node_id } => {
            if !image.brokers.contains_key(node_id) {
                return Err(ControllerError::BrokerIdNotRegistered(format!(
                    "Broker ID {node_id} is not currently registered"
                )));
            }
            // Before anything changes: every broker must read the record.
            image.check_readable(&[MetadataRecord::UnregisterBroker { node_id: *node_id }])?;
            // Forgotten first: it is elected nowhere and let into no ISR from now on.
            liveness.unregister(*node_id);
            out.push(remove_broker(&out.image, *node_id, &alive(liveness)));
            out.push(vec![MetadataRecord::UnregisterBroker { node_id: *node_id }]);
        }
        _ => return Err(ControllerError::Internal("not a liveness operation".into())),
    }
    Ok(out.records)
}

fn alive(liveness: &BrokerLiveness) -> impl Fn(i32) -> bool + '_ {
    move |r| liveness.is_alive(r)
}

fn refused(e: AlterPartitionError) -> ControllerError {
    match e {
        AlterPartitionError::IneligibleReplica => {
            ControllerError::NotAttempted(format!("AlterPartition refused: {e:?}"))
        }
        _ => ControllerError::Refused(format!("AlterPartition refused: {e:?}")),
    }
}

/// The records a [`ControllerOp::AlterPartitions`] from process `incarnation` of
/// `broker` commits, and the changes refused (topic id, partition, why): each change is
/// decided on its own, against the image the ones before it make.
pub fn decide_alter_partitions(
    image: &MetadataImage,
    broker: i32,
    incarnation: Uuid,
    changes: &[IsrAlteration],
    liveness: &BrokerLiveness,
) -> (Vec<MetadataRecord>, Vec<(Uuid, i32, ControllerError)>) {
    if liveness.is_stale(broker, incarnation) {
        let refused = changes.iter().map(|c| (c.topic_id, c.partition, stale_process(broker))).collect();
        return (Vec::new(), refused);
    }
    let mut out = Changes { image: image.clone(), records: Vec::new() };
    let mut refused = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for change in changes {
        if !seen.insert((change.topic_id, change.partition)) {
            // Its answer would be ambiguous (a broker sends a partition once a request).
            let twice = ControllerError::Refused("AlterPartition refused: the partition is named twice".into());
            refused.push((change.topic_id, change.partition, twice));
            continue;
        }
        if let Err(e) = out.alter_isr(broker, change, liveness) {
            refused.push((change.topic_id, change.partition, e));
        }
    }
    (out.records, refused)
}

/// An AlterPartition from a process of `broker` that has been replaced.
fn stale_process(broker: i32) -> ControllerError {
    ControllerError::Refused(format!("AlterPartition refused: StaleBrokerEpoch (broker {broker} restarted since)"))
}

/// Records decided so far, and the image they make (later decisions of the same
/// operation see earlier ones).
struct Changes {
    image: MetadataImage,
    records: Vec<MetadataRecord>,
}

impl Changes {
    /// Leader `broker`'s ISR change of one partition (Kafka's AlterPartition, one
    /// partition of it), and the reassignment it completes, if any.
    fn alter_isr(
        &mut self,
        broker: i32,
        change: &IsrAlteration,
        liveness: &BrokerLiveness,
    ) -> Result<(), ControllerError> {
        let IsrAlteration { topic_id, partition, leader_epoch, partition_epoch, remove, add, add_broker_epoch } =
            change;
        let topic =
            self.image.topic_by_id(topic_id).ok_or_else(|| refused(AlterPartitionError::UnknownTopicOrPartition))?;
        let pi = topic.partition(*partition).ok_or_else(|| refused(AlterPartitionError::UnknownTopicOrPartition))?;
        let mut new_isr: Vec<i32> = pi.isr.iter().copied().filter(|r| !remove.contains(r)).collect();
        if let Some(a) = add {
            if !new_isr.contains(a) {
                new_isr.push(*a);
            }
        }
        let proposal = IsrProposal {
            broker,
            topic_id: *topic_id,
            partition: *partition,
            leader_epoch: *leader_epoch,
            partition_epoch: *partition_epoch,
            new_isr,
        };
        // The joining follower must still be the process whose fetch the leader saw
        // caught up (-1: a leader that does not know which).
        let same_process =
            |r: i32| *add != Some(r) || add_broker_epoch.is_none_or(|e| e < 0 || liveness.broker_epoch(r) == Some(e));
        let may_join = |r: i32| {
            liveness.may_join_isr(r) && !liveness.is_replica_offline(r, *topic_id, *partition) && same_process(r)
        };
        if let Some(r) = alter_partition(&self.image, &proposal, &may_join).map_err(refused)? {
            self.push(vec![r]);
            // A reassignment completes once its new replicas are in sync.
            let done = self.image.topic_by_id(topic_id).and_then(|t| {
                reassignment::complete_if_caught_up(*topic_id, t.partition(*partition)?, &alive(liveness))
            });
            self.push(done.into_iter().collect());
        }
        Ok(())
    }

    fn push(&mut self, records: Vec<MetadataRecord>) {
        for r in records {
            self.image.apply(&r);
            self.records.push(r);
        }
    }

    fn set_fenced(&mut self, node_id: i32, fenced: bool) {
        if self.image.brokers.get(&node_id).is_some_and(|b| b.fenced != fenced) {
            self.push(vec![MetadataRecord::BrokerFenced { node_id, fenced }]);
        }
    }

    /// Out of every ISR (but the last member) and no longer leading anything.
    fn fence(&mut self, node_id: i32, liveness: &BrokerLiveness) {
        self.set_fenced(node_id, true);
        let records = remove_broker(&self.image, node_id, &alive(liveness));
        self.push(records);
    }

    /// The image names `incarnation` as `node_id`'s process from now on, if it named
    /// another or none (a new process, or one a new controller leader adopted), so the
    /// next controller leader knows which process the ISRs were decided with; and the
    /// record format that process reads, if the image said otherwise (its registration
    /// went through a controller leader of an older release, which dropped it).
    fn register_process(&mut self, node_id: i32, incarnation: Uuid, metadata_format: u16) {
        let Some(b) = self
            .image
            .brokers
            .get(&node_id)
            .filter(|b| b.incarnation != Some(incarnation) || b.metadata_format != metadata_format)
        else {
            return;
        };
        let registered = BrokerImage { incarnation: Some(incarnation), metadata_format, ..b.clone() };
        self.push(vec![registered.to_record()]);
    }

    fn elect_leaderless(&mut self, liveness: &BrokerLiveness) {
        let records = elect_leaderless(&self.image, &alive(liveness));
        self.push(records);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use uuid::Uuid;

    use super::*;
    use crate::controller::broker_liveness::broker_epoch_of;
    use crate::controller::image::{BrokerImage, PartitionImage, TopicImage};
    use crate::controller::partition_change::NO_LEADER;
    use crate::controller::records::METADATA_FORMAT;

    const T: Uuid = Uuid::from_u128(9);
    const INC: Uuid = Uuid::from_u128(1);

    fn image() -> MetadataImage {
        let mut img = MetadataImage::default();
        for id in 1..=3 {
            img.brokers.insert(
                id,
                BrokerImage {
                    node_id: id,
                    host: "h".into(),
                    port: 1,
                    rack: None,
                    fenced: false,
                    inter_broker: None,
                    incarnation: None,
                    metadata_format: METADATA_FORMAT,
                },
            );
        }
        let p = |i: i32, replicas: Vec<i32>| PartitionImage {
            partition: i,
            isr: replicas.clone(),
            leader: replicas[0],
            replicas,
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: vec![],
            removing_replicas: vec![],
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        };
        let topic = TopicImage {
            name: "t".into(),
            topic_id: T,
            partitions: vec![p(0, vec![1, 2, 3]), p(1, vec![2, 3, 1])],
            configs: Default::default(),
        };
        img.topic_names_by_id.insert(T, "t".into());
        img.topics.insert("t".into(), Arc::new(topic));
        img
    }

    fn heartbeat(node_id: i32, want_shut_down: bool) -> ControllerOp {
        ControllerOp::BrokerHeartbeat {
            node_id,
            incarnation: INC,
            want_shut_down,
            offline_replicas: None,
            metadata_format: METADATA_FORMAT,
            clean_shutdown: false,
        }
    }

    /// A heartbeat of `node_id`'s process `incarnation` (another process than [`INC`]).
    fn heartbeat_from(node_id: i32, incarnation: Uuid) -> ControllerOp {
        ControllerOp::BrokerHeartbeat {
            node_id,
            incarnation,
            want_shut_down: false,
            offline_replicas: None,
            metadata_format: METADATA_FORMAT,
            clean_shutdown: false,
        }
    }

    fn run(img: &mut MetadataImage, op: &ControllerOp, l: &mut BrokerLiveness, now: i64) -> Vec<MetadataRecord> {
        let records = decide(img, op, l, now).unwrap();
        records.iter().for_each(|r| img.apply(r));
        records
    }

    /// A controller that just became leader of brokers 1–3, all unfenced, at time 0.
    fn new_leader() -> BrokerLiveness {
        let mut l = BrokerLiveness::new(9_000);
        l.became_leader([(1, false), (2, false), (3, false)], 0);
        l
    }

    /// [`new_leader`] after one heartbeat from each broker at time 1.
    fn leader_that_heard_from_all(img: &mut MetadataImage) -> BrokerLiveness {
        let mut l = new_leader();
        for n in [1, 2, 3] {
            run(img, &heartbeat(n, false), &mut l, 1);
        }
        l
    }

    /// Broker 2, leading partition 0 in epoch 1, asks to add broker 1 to its ISR.
    fn expand_p0_with_1() -> ControllerOp {
        ControllerOp::AlterPartition {
            broker: 2,
            topic_id: T,
            partition: 0,
            leader_epoch: 1,
            partition_epoch: None,
            incarnation: None,
            remove: vec![],
            add: Some(1),
            add_broker_epoch: None,
        }
    }

    /// Broker 1, leading partition 0 in leader epoch 0, proposes a change against the
    /// ISR of `partition_epoch`.
    fn alter_p0(partition_epoch: i32, remove: &[i32], add: Option<i32>) -> ControllerOp {
        alter_p0_from(None, partition_epoch, remove, add)
    }

    /// [`alter_p0`] from process `incarnation` of broker 1.
    fn alter_p0_from(
        incarnation: Option<Uuid>,
        partition_epoch: i32,
        remove: &[i32],
        add: Option<i32>,
    ) -> ControllerOp {
        ControllerOp::AlterPartition {
            broker: 1,
            topic_id: T,
            partition: 0,
            leader_epoch: 0,
            partition_epoch: Some(partition_epoch),
            incarnation,
            remove: remove.to_vec(),
            add,
            add_broker_epoch: None,
        }
    }

    /// An AlterPartition from a process of broker 1 that has since restarted (its new
    /// incarnation heartbeated) is refused: the new process knows nothing of what the
    /// old one proposed. Before this controller heard from any, it is taken as sent.
    #[test]
    fn an_alter_partition_from_a_replaced_process_is_refused() {
        let mut img = image();
        let mut l = new_leader();
        let shrink_from = |incarnation: Uuid| alter_p0_from(Some(incarnation), 0, &[3], None);
        let old = Uuid::from_u128(0xa1d);
        assert!(decide(&img, &shrink_from(old), &mut l, 1).is_ok(), "not heard from 1 yet");
        run(&mut img, &heartbeat(1, false), &mut l, 2);
        assert!(
            matches!(decide(&img, &shrink_from(old), &mut l, 3), Err(ControllerError::Refused(m)) if m.contains("Stale"))
        );
        run(&mut img, &shrink_from(INC), &mut l, 4);
        assert_eq!(leaders(&img)[0], (1, vec![1, 2]));
    }

    /// KIP-903: an expansion whose joining follower was seen caught up by a process of it
    /// that has since been replaced (a fetch sent just before a restart, say a power loss
    /// that took the records it had fetched) is not attempted; one that names the
    /// current process joins.
    #[test]
    fn a_follower_seen_caught_up_by_a_replaced_process_does_not_join_the_isr() {
        let mut img = image();
        let mut l = leader_that_heard_from_all(&mut img);
        run(&mut img, &alter_p0(0, &[3], None), &mut l, 2);
        let restarted = Uuid::from_u128(0x3b);
        let beat = heartbeat_from(3, restarted);
        run(&mut img, &beat, &mut l, 3);
        run(&mut img, &beat, &mut l, 4);
        let expand_seen_from = |img: &MetadataImage, process: Uuid| {
            let partition_epoch = img.topic("t").unwrap().partitions[0].partition_epoch;
            let mut op = alter_p0(partition_epoch, &[], Some(3));
            if let ControllerOp::AlterPartition { add_broker_epoch, .. } = &mut op {
                *add_broker_epoch = Some(broker_epoch_of(process));
            }
            op
        };
        assert!(matches!(
            decide(&img, &expand_seen_from(&img, INC), &mut l, 5),
            Err(ControllerError::NotAttempted(m)) if m.contains("IneligibleReplica")
        ));
        assert_eq!(leaders(&img)[0], (1, vec![1, 2]));
        let op = expand_seen_from(&img, restarted);
        run(&mut img, &op, &mut l, 6);
        assert_eq!(leaders(&img)[0], (1, vec![1, 2, 3]));
    }

    /// A proposal made against an older partition epoch (sent again after a lost answer,
    /// say) must not commit: the leader stopped counting on it when the metadata moved
    /// on. One that is already what the ISR is answers as done.
    #[test]
    fn an_alter_partition_made_in_an_older_partition_epoch_commits_nothing() {
        let mut img = image();
        let mut l = leader_that_heard_from_all(&mut img);
        run(&mut img, &alter_p0(0, &[3], None), &mut l, 2);
        assert_eq!(leaders(&img)[0], (1, vec![1, 2]));
        let stale = alter_p0(0, &[], Some(3));
        assert!(
            matches!(decide(&img, &stale, &mut l, 3), Err(ControllerError::Refused(m)) if m.contains("InvalidUpdateVersion"))
        );
        assert!(run(&mut img, &alter_p0(0, &[3], None), &mut l, 4).is_empty(), "the committed shrink, again");
        run(&mut img, &alter_p0(1, &[], Some(3)), &mut l, 5);
        assert_eq!(leaders(&img)[0], (1, vec![1, 2, 3]));
    }

    /// One partition's change in an AlterPartitions from broker 1.
    fn change(partition: i32, partition_epoch: i32, remove: &[i32], add: Option<i32>) -> IsrAlteration {
        IsrAlteration {
            topic_id: T,
            partition,
            leader_epoch: 0,
            partition_epoch,
            remove: remove.to_vec(),
            add,
            add_broker_epoch: add.map(|_| broker_epoch_of(INC)),
        }
    }

    /// One request carries many partitions' changes (a broker whose followers all caught
    /// up at once): each is decided as its own AlterPartition would be; those that pass
    /// commit together, and each refused one comes back with its own reason.
    #[test]
    fn an_alter_partitions_decides_each_change_and_answers_each_refusal() {
        let mut img = image();
        let l = leader_that_heard_from_all(&mut img);
        let changes = vec![
            change(0, 0, &[3], None), // broker 1 leads partition 0: commits
            change(1, 0, &[3], None), // broker 2 leads partition 1
            change(7, 0, &[3], None), // no such partition
        ];
        let (records, refused) = decide_alter_partitions(&img, 1, INC, &changes, &l);
        let one = decide(&img, &alter_p0_from(Some(INC), 0, &[3], None), &mut l.clone(), 2).unwrap();
        assert_eq!(records, one, "the same record as partition 0's change alone");
        let why: Vec<_> = refused.iter().map(|(t, p, e)| (*t, *p, e.to_string())).collect();
        assert_eq!(why.len(), 2, "{why:?}");
        assert!(matches!(&refused[0], (T, 1, ControllerError::Refused(m)) if m.contains("NotLeader")), "{why:?}");
        assert!(matches!(&refused[1], (T, 7, ControllerError::Refused(m)) if m.contains("UnknownTopic")), "{why:?}");
        records.iter().for_each(|r| img.apply(r));
        assert_eq!(leaders(&img), vec![(1, vec![1, 2]), (2, vec![2, 3, 1])]);

        // Broker 3 back in partition 0 as seen by a process of it that was since
        // replaced: not attempted (INELIGIBLE_REPLICA); the other change still commits.
        let mut l = l;
        run(&mut img, &heartbeat_from(3, Uuid::from_u128(0x3b)), &mut l, 3);
        run(&mut img, &heartbeat_from(3, Uuid::from_u128(0x3b)), &mut l, 4);
        // (Broker 1 leads partition 1 too here, so that its second change can commit.)
        let mut img2 = img.clone();
        if let Some(t) = img2.topics.get_mut("t").map(Arc::make_mut) {
            t.partitions[1].leader = 1;
        }
        let epoch = |p: usize| img2.topic("t").unwrap().partitions[p].partition_epoch;
        let changes = vec![change(0, epoch(0), &[], Some(3)), change(1, epoch(1), &[2], None)];
        let (records, refused) = decide_alter_partitions(&img2, 1, INC, &changes, &l);
        assert!(
            matches!(&refused[..], [(T, 0, ControllerError::NotAttempted(m))] if m.contains("IneligibleReplica")),
            "{refused:?}"
        );
        assert_eq!(records.len(), 1, "{records:?}");

        // A partition named twice in one request: the second is refused, unread.
        let (_, refused) = decide_alter_partitions(&img2, 1, INC, &[changes[1].clone(), changes[1].clone()], &l);
        assert!(matches!(&refused[..], [(T, 1, ControllerError::Refused(m))] if m.contains("twice")), "{refused:?}");

        // From a process of broker 1 that has been replaced: every change refused as stale.
        run(&mut img, &heartbeat_from(1, Uuid::from_u128(0x1b)), &mut l, 5);
        let (records, refused) = decide_alter_partitions(&img, 1, INC, &[change(0, 1, &[2], None)], &l);
        assert!(records.is_empty());
        assert!(matches!(&refused[..], [(T, 0, ControllerError::Refused(m))] if m.contains("StaleBrokerEpoch")));
    }

    fn leaders(img: &MetadataImage) -> Vec<(i32, Vec<i32>)> {
        img.topic("t").unwrap().partitions.iter().map(|p| (p.leader, p.isr.clone())).collect()
    }

    #[test]
    fn an_expired_broker_is_fenced_and_loses_leadership_then_returns() {
        let mut img = image();
        let mut l = new_leader();
        for n in 2..=3 {
            run(&mut img, &heartbeat(n, false), &mut l, 8_000);
        }
        run(&mut img, &ControllerOp::ExpireBrokers, &mut l, 10_000);
        assert!(img.brokers[&1].fenced);
        assert_eq!(leaders(&img), vec![(2, vec![2, 3]), (2, vec![2, 3])]);
        // Back: its first heartbeat (an incarnation this leader adopts) unfences it; it
        // rejoins ISRs only through the leaders' AlterPartition, once caught up.
        run(&mut img, &heartbeat(1, false), &mut l, 11_000);
        assert!(!img.brokers[&1].fenced);
        assert_eq!(leaders(&img), vec![(2, vec![2, 3]), (2, vec![2, 3])]);
        let expand = expand_p0_with_1();
        run(&mut img, &expand, &mut l, 11_500);
        assert_eq!(leaders(&img)[0], (2, vec![1, 2, 3]));
    }

    #[test]
    fn a_restarted_broker_is_fenced_at_its_first_heartbeat_and_unfenced_at_the_next() {
        let mut img = image();
        let mut l = new_leader();
        run(&mut img, &heartbeat(1, false), &mut l, 1);
        let restarted = heartbeat_from(1, Uuid::from_u128(2));
        run(&mut img, &restarted, &mut l, 2);
        assert!(img.brokers[&1].fenced);
        assert_eq!(leaders(&img)[0], (2, vec![2, 3]));
        run(&mut img, &restarted, &mut l, 3);
        assert!(!img.brokers[&1].fenced);
    }

    #[test]
    fn a_controlled_shutdown_moves_leadership_off_first() {
        let mut img = image();
        let mut l = new_leader();
        run(&mut img, &heartbeat(2, true), &mut l, 1);
        assert_eq!(leaders(&img), vec![(1, vec![1, 3]), (3, vec![3, 1])]);
        assert!(!img.brokers[&2].fenced, "shutting down, not fenced");
    }

    /// Broker 1's log dir with both partitions failed: it leaves their ISRs and the one it
    /// led moves to the next in-sync replica; it stays registered and unfenced (its other
    /// dirs serve). Reported again, nothing more changes.
    #[test]
    fn offline_replicas_leave_the_isr_and_their_leadership_moves() {
        let mut img = image();
        let mut l = leader_that_heard_from_all(&mut img);
        let offline =
            ControllerOp::ReplicasOffline { broker: 1, partitions: vec![(T, 0), (T, 1), (Uuid::from_u128(77), 0)] };
        let records = run(&mut img, &offline, &mut l, 2);
        assert_eq!(records.len(), 2, "{records:?}");
        assert_eq!(leaders(&img), vec![(2, vec![2, 3]), (2, vec![2, 3])]);
        let p0 = &img.topic("t").unwrap().partitions[0];
        assert_eq!((p0.leader_epoch, p0.partition_epoch), (1, 1));
        assert!(!img.brokers[&1].fenced);
        assert!(run(&mut img, &offline, &mut l, 3).is_empty());
        // Its next heartbeat elects nothing back to it, and a fetch it sent before the
        // failure does not bring it back into the ISR.
        assert!(run(&mut img, &heartbeat(1, false), &mut l, 4).is_empty());
        let expand = expand_p0_with_1();
        assert!(decide(&img, &expand, &mut l, 5).is_err(), "refused: its replica is offline");
        assert_eq!(leaders(&img), vec![(2, vec![2, 3]), (2, vec![2, 3])]);
        // Restarted (a new incarnation, the dir repaired), it may join again.
        let restarted = heartbeat_from(1, Uuid::from_u128(8));
        run(&mut img, &restarted, &mut l, 6);
        run(&mut img, &restarted, &mut l, 7);
        run(&mut img, &expand, &mut l, 8);
        assert_eq!(leaders(&img), vec![(2, vec![1, 2, 3]), (2, vec![2, 3])]);
    }

    /// A controller leader that took over after broker 1 reported its failed dir knows
    /// nothing of it: broker 1's next heartbeat, which names its offline replicas as
    /// every heartbeat does, keeps them out of the ISR again (before, a fetch it sent
    /// before the failure could bring it back in under the new leader), and a replica
    /// that was let back in leaves.
    #[test]
    fn a_new_controller_leader_learns_the_offline_replicas_from_the_next_heartbeat() {
        let mut img = image();
        let mut l = leader_that_heard_from_all(&mut img);
        run(&mut img, &ControllerOp::ReplicasOffline { broker: 1, partitions: vec![(T, 0)] }, &mut l, 2);
        assert_eq!(leaders(&img), vec![(2, vec![2, 3]), (2, vec![2, 3, 1])]);
        let beat = |offline: Vec<(Uuid, i32)>| ControllerOp::BrokerHeartbeat {
            node_id: 1,
            incarnation: INC,
            want_shut_down: false,
            offline_replicas: Some(offline),
            metadata_format: METADATA_FORMAT,
            clean_shutdown: false,
        };
        // The quorum's leadership moves; the new leader hears from everyone.
        let mut l = new_leader();
        l.became_leader_of(&img, 3);
        for n in [2, 3] {
            run(&mut img, &heartbeat(n, false), &mut l, 4);
        }
        // Partition 1's dir fails too, and that report is lost; the heartbeat names both.
        assert!(run(&mut img, &beat(vec![(T, 0), (T, 1)]), &mut l, 5).len() == 1, "partition 1 leaves");
        assert_eq!(leaders(&img), vec![(2, vec![2, 3]), (2, vec![2, 3])]);
        assert!(decide(&img, &expand_p0_with_1(), &mut l, 6).is_err(), "refused: its replica is offline");
        assert!(run(&mut img, &beat(vec![(T, 0), (T, 1)]), &mut l, 7).is_empty(), "nothing new");
    }

    /// The offline replica is the last in sync: no one else may lead, so the partition
    /// keeps it (answering KAFKA_STORAGE_ERROR) rather than going leaderless and being
    /// handed back to it by the next heartbeat.
    #[test]
    fn an_offline_last_in_sync_leader_keeps_the_partition() {
        let mut img = image();
        let mut l = leader_that_heard_from_all(&mut img);
        run(&mut img, &heartbeat(1, false), &mut l, 9_500);
        run(&mut img, &ControllerOp::ExpireBrokers, &mut l, 9_502);
        assert_eq!(leaders(&img), vec![(1, vec![1]), (1, vec![1])]);
        let offline = ControllerOp::ReplicasOffline { broker: 1, partitions: vec![(T, 0)] };
        assert!(run(&mut img, &offline, &mut l, 9_503).is_empty());
        assert_eq!(leaders(&img), vec![(1, vec![1]), (1, vec![1])]);
    }

    /// Broker 3 is the last of partition 0's ISR and asks to shut down: the partition goes
    /// leaderless with 3 in its ELR (3 holds everything acknowledged). The image records the
    /// request, so a new controller leader, which has heard from nobody yet, does not
    /// elect 3 again when another broker's heartbeat looks for leaderless partitions;
    /// 3 leads again only once it is back (fenced, then let in).
    #[test]
    fn a_new_controller_does_not_elect_a_broker_that_asked_the_old_one_to_shut_down() {
        let mut img = image();
        let mut l = leader_that_heard_from_all(&mut img);
        // 1 and 2 expire: partition 0 is left to 3 alone.
        run(&mut img, &heartbeat(3, false), &mut l, 9_500);
        run(&mut img, &ControllerOp::ExpireBrokers, &mut l, 9_502);
        assert_eq!(leaders(&img), vec![(3, vec![3]), (3, vec![3])]);
        let shutdown = run(&mut img, &heartbeat(3, true), &mut l, 9_503);
        assert!(shutdown.contains(&MetadataRecord::BrokerControlledShutdown { node_id: 3 }));
        // The ISR empties: 3 is its eligible leader replica and its last leader.
        assert_eq!(leaders(&img), vec![(NO_LEADER, vec![]), (NO_LEADER, vec![])]);
        assert!(img.topic("t").unwrap().partitions.iter().all(|p| p.elr == [3] && p.last_known_elr == [3]));
        assert!(img.in_controlled_shutdown(3));

        // A new controller leader; broker 1 comes back (a new process: fenced, then let in).
        let mut l = BrokerLiveness::new(9_000);
        l.became_leader_of(&img, 10_000);
        let back = heartbeat_from(1, Uuid::from_u128(5));
        run(&mut img, &back, &mut l, 10_001);
        run(&mut img, &back, &mut l, 10_002);
        assert!(!img.brokers[&1].fenced);
        assert_eq!(leaders(&img), vec![(NO_LEADER, vec![]), (NO_LEADER, vec![])], "3 is not elected");
        // 3 is still stopping and says so: nothing changes.
        run(&mut img, &heartbeat(3, true), &mut l, 10_003);
        assert_eq!(leaders(&img), vec![(NO_LEADER, vec![]), (NO_LEADER, vec![])]);
        // 3 restarts: a new incarnation, fenced first (it says its shutdown was not clean:
        // out of the ELR), then let in and elected as the last leader.
        let restarted = heartbeat_from(3, Uuid::from_u128(6));
        run(&mut img, &restarted, &mut l, 10_004);
        assert!(!img.in_controlled_shutdown(3) && img.brokers[&3].fenced);
        run(&mut img, &restarted, &mut l, 10_005);
        assert_eq!(leaders(&img), vec![(3, vec![3]), (3, vec![3])]);
    }

    /// Partition 0's ISR empties as its brokers expire one after another (3 last, in the
    /// ELR). A new process of 3 that says its predecessor shut down cleanly stays in the
    /// ELR and leads once let in; one that does not leaves it, and leads only as the last
    /// leader, once nothing else is left.
    #[test]
    fn a_process_after_a_clean_shutdown_stays_eligible_and_one_after_a_crash_does_not() {
        for clean in [true, false] {
            let mut img = image();
            let mut l = leader_that_heard_from_all(&mut img);
            run(&mut img, &heartbeat(3, false), &mut l, 9_500);
            run(&mut img, &ControllerOp::ExpireBrokers, &mut l, 9_502);
            // 3 expires too: with 1 and 2 fenced, nobody is left to lead.
            run(&mut img, &ControllerOp::ExpireBrokers, &mut l, 30_000);
            let p0 = img.topic("t").unwrap().partitions[0].clone();
            assert_eq!((p0.leader, p0.isr.clone(), p0.elr.clone()), (NO_LEADER, vec![], vec![3]), "{clean}");
            let restarted = ControllerOp::BrokerHeartbeat {
                node_id: 3,
                incarnation: Uuid::from_u128(6),
                want_shut_down: false,
                offline_replicas: None,
                metadata_format: METADATA_FORMAT,
                clean_shutdown: clean,
            };
            run(&mut img, &restarted, &mut l, 30_001);
            let p0 = img.topic("t").unwrap().partitions[0].clone();
            let elr = if clean { vec![3] } else { vec![] };
            assert_eq!((p0.elr.clone(), p0.last_known_elr.clone()), (elr, vec![3]), "clean: {clean}");
            run(&mut img, &restarted, &mut l, 30_002);
            assert_eq!(leaders(&img)[0], (3, vec![3]), "clean: {clean}");
        }
    }

    /// Every process a leader hears from is named in the image; a broker whose process
    /// changed while the controller leadership moved (it lost power: its log may lack
    /// what it had acknowledged as a follower) is fenced and leaves the ISRs, as under
    /// the old leader, instead of being taken for the process the ISRs were decided with.
    #[test]
    fn a_broker_restarted_during_a_controller_failover_is_fenced_and_leaves_the_isr() {
        let mut img = image();
        // Admitted by a leader that adopted them (as after a failover): recorded anyway.
        let mut l = leader_that_heard_from_all(&mut img);
        assert!((1..=3).all(|n| img.brokers[&n].incarnation == Some(INC)));
        assert_eq!(run(&mut img, &heartbeat(1, false), &mut l, 2), vec![], "recorded once");
        // A snapshot keeps it.
        let back = MetadataImage::from_records(&img.to_records(), img.offset);
        assert_eq!(back.brokers[&2].incarnation, Some(INC));

        let mut l = BrokerLiveness::new(9_000);
        l.became_leader_of(&back, 10_000);
        assert!(run(&mut img, &heartbeat(1, false), &mut l, 10_001).is_empty(), "the same process");
        let restarted = Uuid::from_u128(6);
        let hb = heartbeat_from(2, restarted);
        let records = run(&mut img, &hb, &mut l, 10_002);
        assert!(records.contains(&MetadataRecord::BrokerFenced { node_id: 2, fenced: true }), "{records:?}");
        assert_eq!(img.brokers[&2].incarnation, Some(restarted));
        assert_eq!(leaders(&img), vec![(1, vec![1, 3]), (3, vec![3, 1])]);
    }

    /// The image says broker 2 is in controlled shutdown, but under the new controller
    /// leader its first heartbeat does not ask for it (it changed its mind, or the
    /// request was never acted on): it is let back in, and may lead again.
    #[test]
    fn a_broker_that_no_longer_asks_to_shut_down_is_let_back_in() {
        let mut img = image();
        img.apply(&MetadataRecord::BrokerControlledShutdown { node_id: 2 });
        let mut l = BrokerLiveness::new(9_000);
        l.became_leader_of(&img, 0);
        assert!(!l.is_alive(2));
        let records = run(&mut img, &heartbeat(2, false), &mut l, 1);
        assert!(records.contains(&MetadataRecord::BrokerFenced { node_id: 2, fenced: false }));
        assert!(l.is_alive(2) && img.broker_staying(2));
    }

    /// Broker 1 asked the old controller to shut down and left every ISR. Even a new
    /// controller that does not know of the request (seeded here without it: a broker may
    /// also stop without one) lets 1 back into an ISR only once it has heard from it (it
    /// never will, if 1 has exited).
    #[test]
    fn a_new_controller_admits_into_an_isr_only_brokers_it_has_heard_from() {
        let mut img = image();
        let mut l = leader_that_heard_from_all(&mut img);
        run(&mut img, &heartbeat(1, true), &mut l, 2);
        assert_eq!(leaders(&img), vec![(2, vec![2, 3]), (2, vec![2, 3])]);
        let mut l = BrokerLiveness::new(9_000);
        l.became_leader(img.brokers.values().map(|b| (b.node_id, b.fenced)), 3);
        let rejoin = expand_p0_with_1();
        assert!(
            matches!(decide(&img, &rejoin, &mut l, 4), Err(ControllerError::NotAttempted(_))),
            "INELIGIBLE_REPLICA"
        );
        run(&mut img, &heartbeat(2, false), &mut l, 5);
        assert!(
            matches!(decide(&img, &rejoin, &mut l, 6), Err(ControllerError::NotAttempted(_))),
            "still not heard from 1"
        );
        // A broker 1 that is still there heartbeats within 2 s, and may rejoin then.
        run(&mut img, &heartbeat(1, false), &mut l, 7);
        run(&mut img, &rejoin, &mut l, 8);
        assert_eq!(leaders(&img)[0], (2, vec![1, 2, 3]));
    }

    /// Kafka's UnregisterBroker: out of every ISR and leadership, then the registration
    /// goes; the process (if it still runs) has its heartbeats refused; a process that
    /// starts again registers anew, fenced until its heartbeats let it in.
    #[test]
    fn an_unregistered_broker_leaves_isrs_and_leadership_and_can_register_again() {
        let mut img = image();
        let mut l = leader_that_heard_from_all(&mut img);
        let unregister = ControllerOp::UnregisterBroker { node_id: 2 };
        let records = run(&mut img, &unregister, &mut l, 2);
        assert_eq!(records.last(), Some(&MetadataRecord::UnregisterBroker { node_id: 2 }), "last: {records:?}");
        assert_eq!(leaders(&img), vec![(1, vec![1, 3]), (3, vec![3, 1])]);
        assert!(!img.brokers.contains_key(&2));
        assert_eq!(img.topic("t").unwrap().partitions[1].replicas, vec![2, 3, 1], "replicas still name it");
        assert!(!l.is_alive(2), "elected nowhere");
        assert!(matches!(decide(&img, &heartbeat(2, false), &mut l, 3), Err(ControllerError::Refused(_))));
        let again = decide(&img, &unregister, &mut l, 3);
        assert!(matches!(again, Err(ControllerError::BrokerIdNotRegistered(_))), "{again:?}");

        let register = ControllerOp::RegisterBroker {
            node_id: 2,
            host: "h".into(),
            port: 1,
            rack: None,
            cluster_id: None,
            inter_broker: None,
            fenced: true,
            metadata_format: METADATA_FORMAT,
        };
        for r in crate::controller::operations::decide(&img, &register, 0).unwrap() {
            img.apply(&r);
        }
        let restarted = heartbeat_from(2, Uuid::from_u128(2));
        run(&mut img, &restarted, &mut l, 4);
        assert!(img.brokers[&2].fenced);
        run(&mut img, &restarted, &mut l, 5);
        assert!(!img.brokers[&2].fenced && l.is_alive(2));
    }

    /// The UnregisterBroker record is of a newer format than a broker of an older release
    /// reads. While one is registered, unregistering anyone is refused with nothing
    /// changed (not even the liveness view); a heartbeat that declares the format (the
    /// broker upgraded, or its registration went through an older controller leader)
    /// records it, and then the unregistration goes through.
    #[test]
    fn unregistering_waits_until_every_broker_reads_the_record() {
        let mut img = image();
        let mut l = leader_that_heard_from_all(&mut img);
        let older_release = ControllerOp::BrokerHeartbeat {
            node_id: 1,
            incarnation: Uuid::from_u128(11),
            want_shut_down: false,
            offline_replicas: None,
            metadata_format: 0,
            clean_shutdown: false,
        };
        run(&mut img, &older_release, &mut l, 2);
        assert_eq!(img.brokers[&1].metadata_format, 0, "a process of an older release declares nothing");
        let before = img.clone();
        let unregister = ControllerOp::UnregisterBroker { node_id: 2 };
        let refused = decide(&img, &unregister, &mut l, 3);
        let Err(ControllerError::UnsupportedVersion(message)) = refused else { panic!("{refused:?}") };
        assert!(message.contains("brokers [1]"), "{message}");
        assert_eq!(format!("{img:?}"), format!("{before:?}"), "nothing changed");
        assert!(l.is_alive(2), "still in the liveness view");
        assert!(decide(&img, &heartbeat(2, false), &mut l, 3).is_ok(), "its heartbeats still count");

        // The broker of the older release itself may be unregistered (retired) meanwhile:
        // it does not read the record, but it is leaving.
        let mut retire = img.clone();
        let mut l2 = l.clone();
        let records = run(&mut retire, &ControllerOp::UnregisterBroker { node_id: 1 }, &mut l2, 3);
        assert_eq!(records.last(), Some(&MetadataRecord::UnregisterBroker { node_id: 1 }));

        let upgraded = heartbeat_from(1, Uuid::from_u128(12));
        let records = run(&mut img, &upgraded, &mut l, 4);
        assert!(
            records.iter().any(|r| matches!(r, MetadataRecord::RegisterBroker { node_id: 1, metadata_format, .. }
            if *metadata_format == METADATA_FORMAT)),
            "{records:?}"
        );
        let records = run(&mut img, &unregister, &mut l, 5);
        assert_eq!(records.last(), Some(&MetadataRecord::UnregisterBroker { node_id: 2 }));
    }

    #[test]
    fn unknown_brokers_and_bad_alter_partitions_are_refused() {
        let img = image();
        let mut l = BrokerLiveness::new(9_000);
        assert!(matches!(decide(&img, &heartbeat(7, false), &mut l, 0), Err(ControllerError::Refused(_))));
        let stale = ControllerOp::AlterPartition {
            broker: 1,
            topic_id: T,
            partition: 0,
            leader_epoch: 3,
            partition_epoch: None,
            incarnation: None,
            remove: vec![2],
            add: None,
            add_broker_epoch: None,
        };
        assert!(matches!(decide(&img, &stale, &mut l, 0), Err(ControllerError::Refused(_))));
    }
}
