//! A randomised, deterministic simulation of one partition's replication on four brokers
//! (three replicas, until a reassignment moves them), checking the promise that an
//! acknowledged record is never lost: every record a leader ever had below its high
//! watermark (what acks=all answers and consumers read) stays at its offset on every
//! member of the ISR the controller has committed, and no offset is ever committed with
//! two different records.
//!
//! The parts under test are the real ones: each broker's [`Partition`] (its files, the
//! leader's ISR and high-watermark rules, the follower's append and truncation) and the
//! controller's decisions ([`decide`]: heartbeats, fencing, elections, AlterPartition).
//! Only the network is simulated: every message (a follower's fetch, an ISR proposal and
//! its answer, the metadata each broker applies) is delivered in a random order chosen by
//! a seeded generator, brokers crash and come back, answers get lost. A failing seed
//! replays exactly.
//!
//! With `min.insync.replicas=2` a crash is sometimes a power loss: the broker comes back
//! without the tail of its log that was not yet flushed (runnel's default flush mode
//! leaves that to the page cache, as Kafka does), and the fetch it had sent before may
//! still reach its leader afterwards (KIP-903's case). A power loss is modelled only
//! where Kafka promises to keep the records: one broker at a time, while the committed
//! ISR holds another member (the controller's decisions that would leave only brokers
//! that lost power, and have not caught up since, in the ISR are not taken: an election
//! of the last known leader after it lost power loses records in Kafka too). Until it
//! registers again, that broker's files are not checked.
//!
//! Eligible leader replicas (KIP-966) are checked like the ISR: every record committed
//! must be on each of them. A broker's heartbeats say whether its process started after
//! a clean stop (a controlled shutdown); after a crash it leaves the ELR.
//!
//! A broker can also stop cleanly: it asks the controller to shut down (its heartbeats say
//! `want_shut_down` from then on: leadership moves off it and it leaves the ISR, as on
//! SIGTERM), goes on following, and stops later with its log and high watermark flushed.
//!
//! An operator now and then reassigns the partition to other brokers (sometimes changing
//! its replica count) or cancels the reassignment in progress: the new replicas fetch
//! from the leader outside the ISR, the controller completes the move once they are in
//! it, and a broker that is no longer a replica deletes its copy (a broker that was down
//! when it lost its replica keeps its files until it is made a replica again, as the
//! replica manager only deletes partitions it has open).
//!
//! Clients delete records now and then (DeleteRecords, up to the high watermark): the
//! leader's log start offset moves, followers follow it, and one that fell behind it
//! starts over at the leader's log start. Records before a replica's log start offset
//! are not checked on it. A follower applies its leader's answers with the fetcher's own
//! code ([`Partition::apply_fetched`]).
//!
//! The preferred leader is elected now and then (ElectLeaders, or the automatic leader
//! rebalance). The controller's leadership moves now and then: the new leader starts
//! from the committed image, with no broker heard from yet (the Raft election itself is
//! not modelled, and no committed decision is lost).
//!
//! A third run allows unclean election (`unclean.leader.election.enable`, with
//! `min.insync.replicas=1` and no power loss): when the controller elects a leader from
//! outside the ISR, the records committed that it lacks are lost, as Kafka warns. What
//! must hold still: the committed records the new leader has stay at their offsets, the
//! replicas that come back truncate to its log before they rejoin the ISR, and what it
//! commits from then on is never lost (until the next unclean election). There, only
//! the leader the image names, in its epoch, commits: a fenced leader that has not heard
//! yet may count records its ISR of one acknowledged, which an unclean election loses.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use uuid::Uuid;

use super::isr::IsrProposal;
use super::isr_sink::{IsrProposalAt, NotCommitted};
use super::partition::{FollowerFetchState, Partition, PartitionError, PartitionId};
use super::partition_config::PartitionConfig;
use super::replica_fetch::{FetchedData, ReplicaFetchError};
use super::{ProduceLimits, ValidatedRecords};
use crate::config::BrokerConfig;
use crate::controller::broker_liveness::{broker_epoch_of, BrokerLiveness};
use crate::controller::cluster_ops::decide;
use crate::controller::features::{self, FeatureUpdate, UpgradeType, ELIGIBLE_LEADER_REPLICAS_VERSION};

use crate::controller::operations::ControllerOp;
use crate::controller::records::{MetadataRecord, METADATA_FORMAT};
use crate::controller::{ControllerError, ElectionType, MetadataImage, PartitionImage};
use crate::storage::batch::split_batches;
use crate::storage::test_util::{build_records_batch, TestRecord};
use crate::storage::FileCache;

const TOPIC_ID: Uuid = Uuid::from_u128(0x5151);
const BROKERS: [i32; 4] = [1, 2, 3, 4];
/// The partition's replicas before any reassignment.
const REPLICAS: [i32; 3] = [1, 2, 3];

/// The topic's settings for one run.
#[derive(Debug, Clone, Copy)]
struct Mode {
    /// `min.insync.replicas`.
    min_isr: &'static str,
    /// `unclean.leader.election.enable`.
    unclean: bool,
}

const MODES: [Mode; 3] = [
    Mode { min_isr: "1", unclean: false },
    Mode { min_isr: "2", unclean: false },
    Mode { min_isr: "1", unclean: true },
];
const LAG_MS: i64 = 40;
const SESSION_MS: i64 = 60;

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

struct Broker {
    partition: Partition,
    alive: bool,
    incarnation: Uuid,
    /// Whether this process has applied any metadata naming it a replica yet (before
    /// that its partition is a provisional leader of no one and proves nothing). False
    /// again once its replica is reassigned away.
    has_role: bool,
    /// Whether its first heartbeat got through: a process applies metadata only after
    /// (as the server registers before it subscribes the replica manager).
    registered: bool,
    /// The high watermark its last checkpoint recorded, if it crashed just after one.
    checkpoint: Option<i64>,
    /// It lost power: it comes back without its log's unflushed tail.
    lost_power: bool,
    /// It lost power and has not registered since: its log may lack committed records
    /// while the ISR still names it (its registration takes it out).
    forgetful: bool,
    /// It asked the controller to shut down (a controlled shutdown): its heartbeats say so
    /// until it stops.
    shutting_down: bool,
    /// The process before it stopped cleanly (its heartbeats say so): the controller then
    /// keeps it in the ELR.
    clean_start: bool,
    /// It lost power and its leader has not let it into an ISR since: its log may lack
    /// committed records, though it registered (which took it out of the ISR and ELR). It
    /// may still be the last known leader; an election that would make it the ISR's only
    /// member is outside what is modelled (Kafka calls that election unclean too).
    lacks_committed: bool,
    /// This process stopped cleanly (set when it stops).
    stopped_cleanly: bool,
}

impl Broker {
    fn new(partition: Partition) -> Broker {
        Broker {
            partition,
            alive: true,
            incarnation: Uuid::new_v4(),
            has_role: false,
            registered: false,
            checkpoint: None,
            lost_power: false,
            forgetful: false,
            shutting_down: false,
            clean_start: false,
            stopped_cleanly: false,
            lacks_committed: false,
        }
    }
}

/// A fetch a follower's process sent before it crashed, still on its way to the leader.
struct StaleFetch {
    follower: i32,
    broker_epoch: i64,
    state: FollowerFetchState,
}

/// An ISR proposal on its way to the controller, or an error answer on its way back.
struct Proposal {
    leader: i32,
    /// The leader's process.
    incarnation: Uuid,
    at: IsrProposalAt,
}

struct Sim {
    rng: Rng,
    dir: tempfile::TempDir,
    config: PartitionConfig,
    files: Arc<FileCache>,
    brokers: BTreeMap<i32, Broker>,
    image: MetadataImage,
    liveness: BrokerLiveness,
    now: i64,
    to_controller: Vec<Proposal>,
    answers: Vec<(Proposal, NotCommitted)>,
    stale_fetches: Vec<StaleFetch>,
    /// Whether a crash may be a power loss.
    power_loss: bool,
    /// Whether the topic allows unclean election.
    unclean: bool,
    /// Offset → the id of the record committed there (ids are the records' timestamps).
    committed: BTreeMap<i64, i64>,
    /// The leader of the last unclean election (or unclean cancel), until it applies its
    /// leadership: its log may still change while it follows the old leader.
    unclean_pending: Option<i32>,
    /// Committed records that unclean elections lost, and how many elections there were.
    lost_to_unclean: usize,
    unclean_elections: usize,
    /// Times an operator turned ELR off or on.
    elr_toggles: usize,
    next_id: i64,
}

impl Sim {
    fn new(seed: u64, Mode { min_isr, unclean }: Mode) -> Sim {
        let dir = tempfile::tempdir().unwrap();
        let broker = BrokerConfig::build(&[]).unwrap();
        let overrides = BTreeMap::from([("min.insync.replicas".to_string(), min_isr.to_string())]);
        let config = PartitionConfig::resolve(&broker, &Default::default(), &overrides);
        let mut image = MetadataImage::default();
        for node_id in BROKERS {
            image.apply(&MetadataRecord::RegisterBroker {
                node_id,
                host: "h".into(),
                port: 1,
                rack: None,
                inter_broker: None,
                incarnation: None,
                metadata_format: crate::controller::records::METADATA_FORMAT,
            });
        }
        image.apply(&MetadataRecord::Topic { name: "t".into(), topic_id: TOPIC_ID });
        if unclean {
            let name = "unclean.leader.election.enable".to_string();
            image.apply(&MetadataRecord::TopicConfig { topic_id: TOPIC_ID, name, value: Some("true".into()) });
        }
        image.apply(&MetadataRecord::Partition {
            topic_id: TOPIC_ID,
            partition: 0,
            replicas: REPLICAS.to_vec(),
            isr: REPLICAS.to_vec(),
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: vec![],
            removing_replicas: vec![],
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
        });
        let mut liveness = BrokerLiveness::new(SESSION_MS);
        liveness.became_leader(BROKERS.iter().map(|b| (*b, false)), 0);
        let mut sim = Sim {
            rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
            dir,
            config,
            files: FileCache::private(),
            brokers: BTreeMap::new(),
            image,
            liveness,
            now: 0,
            to_controller: Vec::new(),
            answers: Vec::new(),
            stale_fetches: Vec::new(),
            power_loss: min_isr == "2" && !unclean,
            unclean,
            committed: BTreeMap::new(),
            unclean_pending: None,
            lost_to_unclean: 0,
            unclean_elections: 0,
            elr_toggles: 0,
            next_id: 1,
        };
        for b in BROKERS {
            let broker = Broker::new(sim.open(b));
            sim.brokers.insert(b, broker);
            sim.heartbeat(b);
        }
        sim
    }

    fn open(&self, b: i32) -> Partition {
        let id = PartitionId { topic: "t", topic_id: TOPIC_ID, index: 0 };
        let dir = self.dir.path().join(format!("{b}")).join("t-0");
        Partition::open(id, dir, self.config.clone(), 0, self.now, &self.files).unwrap()
    }

    fn pi(&self) -> PartitionImage {
        self.image.topic("t").unwrap().partitions[0].clone()
    }

    fn alive(&self) -> Vec<i32> {
        self.brokers.iter().filter(|(_, b)| b.alive).map(|(id, _)| *id).collect()
    }

    fn pick(&mut self, ids: &[i32]) -> Option<i32> {
        (!ids.is_empty()).then(|| ids[self.rng.below(ids.len())])
    }

    /// The broker that lost power and has not registered since, if any.
    fn forgetful(&self) -> Option<i32> {
        self.brokers.iter().find(|(_, b)| b.forgetful).map(|(id, _)| *id)
    }

    /// The controller decides `op`, unless it would leave only a forgetful broker in the
    /// ISR (outside what is modelled; see the module doc): then it is as if `op` never
    /// reached the controller.
    fn control(&mut self, op: ControllerOp) -> Result<(), ControllerError> {
        let mut liveness = self.liveness.clone();
        let records = decide(&self.image, &op, &mut liveness, self.now)?;
        let joined = match op {
            ControllerOp::AlterPartition { add: Some(joined), .. } => Some(joined),
            _ => None,
        };
        self.commit(records, joined, liveness)
    }

    /// An operator turns eligible leader replicas off, or on again (`kafka-features`).
    fn toggle_eligible_leader_replicas(&mut self) {
        let on = features::finalized_level(&self.image, ELIGIBLE_LEADER_REPLICAS_VERSION) >= 1;
        let update = FeatureUpdate {
            name: ELIGIBLE_LEADER_REPLICAS_VERSION.into(),
            level: if on { 0 } else { 1 },
            upgrade: if on { UpgradeType::SafeDowngrade } else { UpgradeType::Upgrade },
        };
        let records = features::update(&self.image, &[update], 1).expect("every broker reads feature levels");
        if self.commit(records, None, self.liveness.clone()).is_ok() {
            self.elr_toggles += 1;
        }
    }

    /// Commit `records`, unless they would leave only a forgetful broker in the ISR (see
    /// [`Sim::control`]). `joined`: the replica an AlterPartition let into the ISR.
    fn commit(
        &mut self,
        records: Vec<MetadataRecord>,
        joined: Option<i32>,
        liveness: BrokerLiveness,
    ) -> Result<(), ControllerError> {
        let mut image = self.image.clone();
        // Only an AlterPartition from the leader lets a replica into the ISR cleanly (it
        // fetched up to the leader's log end); any other way in is an unclean election
        // (or an unclean cancel of a reassignment).
        let expands = joined.is_some();
        let mut elected_unclean = Vec::new();
        for r in &records {
            // A member of the ELR, or the last known leader (the ISR's last member when it
            // emptied), leads cleanly too.
            let before = image.topic("t").unwrap().partitions[0].clone();
            let clean = |m: &i32| before.isr.contains(m) || before.elr.contains(m) || before.last_known_elr.contains(m);
            image.apply(r);
            let after = &image.topic("t").unwrap().partitions[0].isr;
            if !expands {
                elected_unclean.extend(after.iter().filter(|m| !clean(m)));
            }
        }
        let isr = &image.topic("t").unwrap().partitions[0].isr;
        if !isr.is_empty() && isr.iter().all(|r| self.brokers[r].lacks_committed) {
            return Err(ControllerError::Refused("only a broker that lost power would be in the ISR".into()));
        }
        if let Some(joined) = joined {
            if isr.contains(&joined) {
                self.brokers.get_mut(&joined).unwrap().lacks_committed = false;
            }
        }
        if let Some(f) = self.forgetful() {
            if !isr.is_empty() && isr.iter().all(|r| *r == f) {
                return Err(ControllerError::Refused("only a broker that lost power would stay in the ISR".into()));
            }
        }
        (self.image, self.liveness) = (image, liveness);
        if let Some(leader) = elected_unclean.last() {
            // (It leads, or will as the ISR's only member once it is alive.)
            self.unclean_elections += elected_unclean.len();
            self.unclean_pending = Some(*leader);
            self.lose_what_the_leader_lacks(*leader);
        }
        Ok(())
    }

    /// The controller elected `leader` from outside the ISR: the committed records it
    /// lacks are lost; those it has (and those before its log start offset, deleted)
    /// stay committed. Called at the election and again when `leader` takes over.
    fn lose_what_the_leader_lacks(&mut self, leader: i32) {
        assert!(self.unclean, "leader {leader} elected from outside the ISR with unclean election off");
        let p = &self.brokers[&leader].partition;
        let (log, log_start) = (records(p), p.log_start_offset());
        let before = self.committed.len();
        self.committed.retain(|offset, record| *offset < log_start || log.get(offset) == Some(record));
        self.lost_to_unclean += before - self.committed.len();
    }

    fn heartbeat(&mut self, b: i32) {
        let broker = &self.brokers[&b];
        let op = ControllerOp::BrokerHeartbeat {
            node_id: b,
            incarnation: broker.incarnation,
            want_shut_down: broker.shutting_down,
            offline_replicas: Some(vec![]),
            metadata_format: METADATA_FORMAT,
            clean_shutdown: broker.clean_start,
        };
        if self.control(op).is_ok() {
            let broker = self.brokers.get_mut(&b).unwrap();
            broker.registered = true;
            broker.forgetful = false;
        }
    }

    /// Broker `b` applies the controller's latest metadata, as the replica manager does:
    /// a replica that was reassigned away is deleted (its files gone; the empty partition
    /// left in its place plays no role until it is made a replica again).
    fn apply_metadata(&mut self, b: i32) {
        let pi = self.pi();
        if !self.brokers[&b].registered {
            return;
        }
        if !pi.replicas.contains(&b) {
            if self.brokers[&b].has_role {
                let dir = self.brokers[&b].partition.dir();
                self.brokers[&b].partition.mark_deleted();
                std::fs::remove_dir_all(dir).unwrap();
                let fresh = self.open(b);
                let broker = self.brokers.get_mut(&b).unwrap();
                broker.partition = fresh;
                broker.has_role = false;
            }
            return;
        }
        let broker = self.brokers.get_mut(&b).unwrap();
        if pi.leader == b {
            broker.partition.set_leadership(&pi, LAG_MS, self.now);
        } else {
            broker.partition.become_follower(&pi);
        }
        broker.has_role = true;
        if pi.leader == b && self.unclean_pending == Some(b) {
            // The unclean leader takes over with the log it has now.
            self.unclean_pending = None;
            self.lose_what_the_leader_lacks(b);
        }
    }

    fn produce(&mut self, b: i32) {
        let p = &self.brokers[&b].partition;
        if !self.brokers[&b].has_role || p.produce_config(true).is_err() {
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        let record = [TestRecord { key: None, value: Some(b"v"), timestamp: id }];
        let batch = bytes::BytesMut::from(&build_records_batch(0, &record, -1)[..]);
        let limits = ProduceLimits { max_message_bytes: usize::MAX, timestamps: None, require_keys: false };
        let mut records = ValidatedRecords::validate(batch, &limits).unwrap();
        p.append(&mut records, self.now).unwrap();
    }

    /// Follower `f` fetches once from the leader it follows, and applies the answer as
    /// the fetcher does.
    fn fetch(&mut self, f: i32) {
        let Some(state) = self.brokers[&f].partition.follower_fetch_state() else { return };
        let Some(leader) = self.brokers.get(&state.leader).filter(|l| l.alive && l.has_role) else { return };
        let max_bytes = 1 + self.rng.below(300);
        let read = leader.partition.read_for_follower(
            f,
            broker_epoch_of(self.brokers[&f].incarnation),
            state.leader_epoch,
            state.log_end_offset,
            state.last_fetched_epoch,
            max_bytes,
            self.now,
        );
        if let Some(at) = leader.partition.take_isr_proposal() {
            self.to_controller.push(Proposal { leader: state.leader, incarnation: leader.incarnation, at });
        }
        // The answer as it crosses the wire, applied by the fetcher's own code.
        let answer = match read {
            Ok(read) => Ok(FetchedData {
                records: read.records.read().unwrap(),
                high_watermark: read.high_watermark,
                log_start_offset: read.log_start_offset,
                diverging_epoch: read.diverging_epoch,
            }),
            Err(e) => Err(ReplicaFetchError::of(&e)),
        };
        let applied = self.brokers[&f].partition.apply_fetched(&state, answer.as_ref(), self.now);
        if let Err(e) = applied {
            // Only the errors the fetcher backs off on; the next fetch tries again.
            assert!(matches!(e, PartitionError::Replica(_)), "follower {f}: {e}");
        }
    }

    /// The controller takes one pending proposal; a refusal (or, now and then, a lost
    /// answer) goes back to the leader.
    fn deliver_proposal(&mut self) {
        if self.to_controller.is_empty() {
            return;
        }
        let proposal = self.to_controller.swap_remove(self.rng.below(self.to_controller.len()));
        let (remove, add, add_broker_epoch) = match &proposal.at.proposal {
            IsrProposal::Shrink { remove } => (remove.clone(), None, None),
            IsrProposal::Expand { add, broker_epoch } => (Vec::new(), Some(*add), Some(*broker_epoch)),
        };
        let op = ControllerOp::AlterPartition {
            broker: proposal.leader,
            topic_id: TOPIC_ID,
            partition: 0,
            leader_epoch: proposal.at.leader_epoch,
            partition_epoch: Some(proposal.at.partition_epoch),
            incarnation: Some(proposal.incarnation),
            remove,
            add,
            add_broker_epoch,
        };
        let lost = self.rng.chance(15);
        match self.control(op) {
            Ok(()) if lost => self.answers.push((proposal, NotCommitted::NoAnswer)),
            Ok(()) => {}
            Err(_) if lost => self.answers.push((proposal, NotCommitted::NoAnswer)),
            Err(ControllerError::NotAttempted(_)) => self.answers.push((proposal, NotCommitted::NotAttempted)),
            Err(_) => self.answers.push((proposal, NotCommitted::Stale)),
        }
    }

    fn deliver_answer(&mut self) {
        if self.answers.is_empty() {
            return;
        }
        let (proposal, why) = self.answers.swap_remove(self.rng.below(self.answers.len()));
        let Some(leader) = self.brokers.get(&proposal.leader).filter(|b| b.alive) else { return };
        if leader.incarnation != proposal.incarnation {
            return;
        }
        let p = &leader.partition;
        p.isr_proposal_not_committed(proposal.at.partition_epoch, &proposal.at.proposal, why, self.now);
        if let Some(at) = p.take_isr_proposal() {
            self.to_controller.push(Proposal { leader: proposal.leader, incarnation: leader.incarnation, at });
        }
    }

    /// A fetch that follower `f`'s dead process sent reaches its leader now; the answer
    /// goes nowhere.
    fn deliver_stale_fetch(&mut self) {
        if self.stale_fetches.is_empty() {
            return;
        }
        let StaleFetch { follower, broker_epoch, state } =
            self.stale_fetches.swap_remove(self.rng.below(self.stale_fetches.len()));
        let Some(leader) = self.brokers.get(&state.leader).filter(|l| l.alive && l.has_role) else { return };
        let p = &leader.partition;
        let _ = p.read_for_follower(
            follower,
            broker_epoch,
            state.leader_epoch,
            state.log_end_offset,
            state.last_fetched_epoch,
            1,
            self.now,
        );
        if let Some(at) = p.take_isr_proposal() {
            self.to_controller.push(Proposal { leader: state.leader, incarnation: leader.incarnation, at });
        }
    }

    /// A client deletes the records before a random offset up to the high watermark
    /// (DeleteRecords; retention moves the log start offset the same way) on broker
    /// `b`, which refuses unless it leads.
    fn delete_records(&mut self, b: i32) {
        let p = &self.brokers[&b].partition;
        if !self.brokers[&b].has_role || !p.is_leader() {
            return;
        }
        let (start, hw) = (p.log_start_offset(), p.high_watermark());
        if hw > start {
            let offset = start + 1 + self.rng.below((hw - start) as usize) as i64;
            p.delete_records_before(offset).unwrap();
        }
    }

    /// An operator moves the partition to a random set of brokers (now and then of
    /// another size), or cancels the move in progress. Refused targets change nothing.
    fn reassign(&mut self) {
        let target = if self.pi().is_reassigning() && self.rng.chance(30) {
            None
        } else {
            let size = if self.rng.chance(20) { 2 + self.rng.below(3) } else { REPLICAS.len() };
            let mut pool = BROKERS.to_vec();
            Some((0..size).map(|_| pool.swap_remove(self.rng.below(pool.len()))).collect())
        };
        let partitions = vec![("t".to_string(), 0, target)];
        let _ = self.control(ControllerOp::AlterReassignments { partitions, allow_replication_factor_change: true });
    }

    /// Broker `b` crashes; half the time just after writing its high-watermark
    /// checkpoint, sometimes with a fetch still on its way, sometimes losing power. One
    /// in controlled shutdown stops cleanly instead: checkpointed, flushed.
    fn crash(&mut self, b: i32) {
        let clean = self.brokers[&b].shutting_down;
        let checkpoint =
            (clean || self.rng.chance(50)).then(|| self.brokers[&b].partition.high_watermark_to_checkpoint());
        let fetching = self.brokers[&b].partition.follower_fetch_state();
        if let Some(state) = fetching.filter(|_| self.rng.chance(50)) {
            let broker_epoch = broker_epoch_of(self.brokers[&b].incarnation);
            self.stale_fetches.push(StaleFetch { follower: b, broker_epoch, state });
        }
        let others_remember = self.forgetful().is_none_or(|f| f == b);
        let isr_has_another = self.pi().isr.iter().any(|r| *r != b);
        let lost_power = !clean && self.power_loss && others_remember && isr_has_another && self.rng.chance(50);
        let broker = self.brokers.get_mut(&b).unwrap();
        broker.alive = false;
        broker.checkpoint = checkpoint;
        broker.lost_power = lost_power;
        broker.forgetful |= lost_power;
        broker.lacks_committed |= lost_power;
        broker.stopped_cleanly = clean;
    }

    /// A crashed broker starts again: its partition reopened from its files (and its
    /// checkpointed high watermark, if any), a new incarnation that registers (and is
    /// fenced, then unfenced, by its heartbeats). After a power loss its log file has
    /// lost a random part of what was not flushed, cut at a batch boundary.
    fn restart(&mut self, b: i32) {
        let before = &self.brokers[&b];
        if before.lost_power {
            lose_unflushed_tail(&before.partition, |cuts| self.rng.below(cuts));
        }
        let (checkpoint, forgetful, clean_start) = (before.checkpoint, before.forgetful, before.stopped_cleanly);
        let lacks_committed = before.lacks_committed;
        let partition = self.open(b);
        if let Some(hw) = checkpoint {
            partition.restore_high_watermark(hw);
        }
        let mut broker = Broker::new(partition);
        broker.forgetful = forgetful;
        broker.clean_start = clean_start;
        broker.lacks_committed = lacks_committed;
        self.brokers.insert(b, broker);
    }

    /// One random event; returns what it was (for a replayed seed's trace).
    fn step(&mut self) -> (u8, Option<i32>) {
        self.now += self.rng.below(4) as i64;
        let alive = self.alive();
        let any = self.pick(&alive);
        let event = self.rng.below(100) as u8;
        match event {
            0..=18 => {
                if let Some(b) = any {
                    self.produce(b);
                }
            }
            19 => {
                if let Some(b) = any {
                    self.delete_records(b);
                }
            }
            20..=47 => {
                // One of the followers: a broker that is no replica fetches nothing.
                let following: Vec<i32> = alive
                    .iter()
                    .copied()
                    .filter(|b| self.brokers[b].partition.follower_fetch_state().is_some())
                    .collect();
                if let Some(f) = self.pick(&following) {
                    self.fetch(f);
                }
            }
            48..=49 => self.deliver_stale_fetch(),
            50..=59 => {
                if let Some(b) = any {
                    self.apply_metadata(b);
                }
            }
            60..=69 => self.deliver_proposal(),
            70..=74 => self.deliver_answer(),
            75..=86 => {
                if let Some(b) = any {
                    self.heartbeat(b);
                }
            }
            87..=90 => {
                if let Some(b) = any {
                    let at = self.brokers[&b].partition.check_isr_lag(self.now);
                    if let Some(at) = at {
                        self.to_controller.push(Proposal { leader: b, incarnation: self.brokers[&b].incarnation, at });
                    }
                }
            }
            91..=92 => {
                if event == 92 && self.rng.chance(30) {
                    // Another controller takes over the quorum's leadership: it knows the
                    // committed image, not the brokers' processes or sessions.
                    self.liveness.became_leader_of(&self.image, self.now);
                } else {
                    let _ = self.control(ControllerOp::ExpireBrokers);
                }
            }
            93 if self.rng.chance(30) => {
                // An operator (or the automatic leader rebalance) elects the preferred
                // leader.
                let election = ControllerOp::ElectLeaders { election: ElectionType::Preferred, partitions: None };
                let _ = self.control(election);
            }
            93 if self.rng.chance(15) => self.toggle_eligible_leader_replicas(),
            93 => self.reassign(),
            94..=96 => {
                // Crash one, keeping at least one process up; or a controlled shutdown
                // (SIGTERM) begins, and the next time it ends in a clean stop.
                if alive.len() > 1 && self.rng.chance(50) {
                    let b = any.unwrap();
                    let stopping = alive.iter().copied().find(|b| self.brokers[b].shutting_down);
                    match stopping {
                        Some(s) => self.crash(s),
                        None if self.brokers[&b].registered && self.rng.chance(30) => {
                            self.brokers.get_mut(&b).unwrap().shutting_down = true;
                            self.heartbeat(b);
                        }
                        None => self.crash(b),
                    }
                }
            }
            _ => {
                let dead: Vec<i32> = self.brokers.iter().filter(|(_, b)| !b.alive).map(|(id, _)| *id).collect();
                if let Some(b) = self.pick(&dead) {
                    self.restart(b);
                }
            }
        }
        (event, any)
    }

    /// Each broker's state and the controller's, for a replayed seed's trace.
    fn describe(&self) -> String {
        let brokers: Vec<String> = self
            .brokers
            .iter()
            .map(|(id, b)| {
                let p = &b.partition;
                let role = if !b.alive {
                    "dead"
                } else if !b.has_role {
                    "idle"
                } else if p.is_leader() {
                    "L"
                } else {
                    "f"
                };
                let forgetful = if b.forgetful { " (lost power)" } else { "" };
                let stopping = if b.shutting_down { " (shutting down)" } else { "" };
                format!(
                    "{id}:{role}{forgetful}{stopping} e{} lso {} leo {} hw {}",
                    p.leader_epoch(),
                    p.log_start_offset(),
                    p.log_end_offset(),
                    p.high_watermark()
                )
            })
            .collect();
        let pi = self.pi();
        format!(
            "{} | ctl leader {} e{} pe{} replicas {:?} (+{:?} -{:?}) isr {:?} elr {:?} last {:?}",
            brokers.join(", "),
            pi.leader,
            pi.leader_epoch,
            pi.partition_epoch,
            pi.replicas,
            pi.adding_replicas,
            pi.removing_replicas,
            pi.isr,
            pi.elr,
            pi.last_known_elr
        )
    }

    /// Records every leader has below its high watermark become committed; each must
    /// be the one committed before at its offset, and on every member of the ISR.
    fn check(&mut self, seed: u64, step: usize) -> Result<(), String> {
        let pi = self.pi();
        if self.unclean_pending.is_some_and(|pending| !pi.isr.contains(&pending)) {
            // It left the ISR before it took over.
            self.unclean_pending = None;
        }
        for (id, b) in &self.brokers {
            let p = &b.partition;
            if !b.alive || !b.has_role || !p.is_leader() {
                continue;
            }
            if self.unclean && (*id != pi.leader || p.leader_epoch() != pi.leader_epoch) {
                continue;
            }
            let hw = p.high_watermark();
            for (offset, record) in records(p).into_iter().filter(|(o, _)| *o < hw) {
                let before = *self.committed.entry(offset).or_insert(record);
                if before != record {
                    return Err(format!(
                        "seed {seed} step {step}: offset {offset} committed as {before}, then leader {id} has {record}"
                    ));
                }
            }
        }
        let pending = self.unclean_pending;
        // ELR members hold every committed record too: that is what makes them eligible.
        let members = pi.isr.iter().chain(&pi.elr);
        for member in members.filter(|m| !self.brokers[m].forgetful && pending != Some(**m)) {
            let p = &self.brokers[member].partition;
            let log = records(p);
            // Records before its log start offset were deleted (DeleteRecords), not lost.
            for (offset, record) in self.committed.range(p.log_start_offset()..) {
                if log.get(offset) != Some(record) {
                    return Err(format!(
                        "seed {seed} step {step}: ISR or ELR member {member} (ISR {:?}, ELR {:?}, leader {} in \
                         epoch {}) lacks committed record {record} at offset {offset} (has {:?})",
                        pi.isr,
                        pi.elr,
                        pi.leader,
                        pi.leader_epoch,
                        log.get(offset)
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A power loss: the active segment's file (only it holds unflushed records) is cut at
/// one of the batch boundaries at or above what `p` had flushed, or kept whole;
/// `pick(n)` chooses which of the `n` cuts.
fn lose_unflushed_tail(p: &Partition, pick: impl FnOnce(usize) -> usize) {
    let flushed = p.flushed_through();
    let mut segments: Vec<_> = std::fs::read_dir(p.dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|f| f.extension().is_some_and(|x| x == "log"))
        .collect();
    segments.sort();
    let active = segments.pop().unwrap();
    // The file itself: the log's records may start inside it (after DeleteRecords).
    let bytes = std::fs::read(&active).unwrap();
    let mut cuts = vec![bytes.len() as u64];
    let mut position = 0;
    let batches = if bytes.is_empty() { Vec::new() } else { split_batches(&bytes).unwrap() };
    for h in &batches {
        if h.base_offset >= flushed {
            cuts.push(position);
        }
        position += 12 + h.batch_length as u64;
    }
    let cut = cuts[pick(cuts.len())];
    std::fs::OpenOptions::new().write(true).open(active).unwrap().set_len(cut).unwrap();
}

/// Offset → record id of every record in `p`'s log (one record per batch).
fn records(p: &Partition) -> BTreeMap<i64, i64> {
    let bytes = p.log_bytes();
    if bytes.is_empty() {
        return BTreeMap::new();
    }
    split_batches(&bytes).unwrap().iter().map(|h| (h.base_offset, h.max_timestamp)).collect()
}

/// Events: 0-18 produce, 19 delete records, 20-47 fetch, 48-49 a dead process's fetch
/// arrives, 50-59 apply metadata, 60-69 the controller takes a proposal, 70-74 an answer
/// reaches its leader, 75-86 heartbeat, 87-90 lag check, 91-92 expire sessions (30% of
/// 92: the controller's leadership moves instead), 93 reassign (30% of the time: elect
/// the preferred leader instead; 15% of the rest: turn ELR off or on again), 94-96 crash (half the time; now and then a controlled
/// shutdown begins instead, and the next one stops it cleanly), 97-99 restart.
fn run(seeds: std::ops::Range<u64>, steps: usize, mode: Mode) -> Totals {
    let trace = seeds.end - seeds.start == 1;
    let mut totals = Totals::default();
    for seed in seeds {
        let mut sim = Sim::new(seed, mode);
        for step in 0..steps {
            let replicas_before = sim.pi().replicas;
            let (event, broker) = sim.step();
            if trace {
                eprintln!("{step}: event {event} broker {broker:?} -> {}", sim.describe());
            }
            if let Err(e) = sim.check(seed, step) {
                panic!("{mode:?}: {e}");
            }
            let pi = sim.pi();
            totals.leaders.insert(pi.leader);
            totals.moves += usize::from(pi.replicas != replicas_before && !pi.is_reassigning());
        }
        totals.committed += sim.committed.len();
        totals.lost_to_unclean += sim.lost_to_unclean;
        totals.unclean_elections += sim.unclean_elections;
        totals.elr_toggles += sim.elr_toggles;
    }
    totals
}

/// What the runs of one mode did.
#[derive(Debug, Default)]
struct Totals {
    /// Records committed at the end of each run, summed.
    committed: usize,
    leaders: BTreeSet<i32>,
    /// Times the replicas changed with no reassignment left running.
    moves: usize,
    unclean_elections: usize,
    /// Committed records that unclean elections lost.
    lost_to_unclean: usize,
    /// Times an operator turned ELR off or on.
    elr_toggles: usize,
}

/// 80 seeds of 1,200 steps for each mode (a few seconds); more with
/// `RUNNEL_REPLICATION_SIM_SEEDS=N` for a long run by hand.
#[test]
fn committed_records_stay_on_every_isr_member_through_crashes_and_reordered_messages() {
    let var = |name: &str| std::env::var(name).ok().and_then(|n| n.parse::<u64>().ok());
    let seeds = match var("RUNNEL_REPLICATION_SIM_SEED") {
        Some(seed) => seed..seed + 1,
        None => 0..var("RUNNEL_REPLICATION_SIM_SEEDS").unwrap_or(80),
    };
    for mode in MODES {
        let t = run(seeds.clone(), 1200, mode);
        // The runs must have done something: records committed, leadership and replicas
        // moved; with unclean election allowed, unclean elections that lost records.
        eprintln!("{mode:?}: {t:?}");
        if seeds.end - seeds.start < 80 {
            continue;
        }
        assert!(t.committed > 1_000, "{mode:?}: only {} records committed", t.committed);
        assert!(t.leaders.len() >= 3, "{mode:?}: leaders seen {:?}", t.leaders);
        assert!(t.moves >= 20, "{mode:?}: only {} moves completed", t.moves);
        assert!(t.elr_toggles >= 20, "{mode:?}: ELR turned off or on only {} times", t.elr_toggles);
        if mode.unclean {
            assert!(t.lost_to_unclean > 0, "{mode:?}: no unclean election lost a record: {t:?}");
        } else {
            assert_eq!(t.unclean_elections, 0, "{mode:?}");
        }
    }
}
