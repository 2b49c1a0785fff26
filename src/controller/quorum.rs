//! The controller: a member of the Raft controller quorum that takes metadata changes
//! from this broker's handlers, has the quorum leader validate and commit them, and
//! returns once the commit is applied to this node's image.
//!
//! Every node applies committed entries to its image in log order and tells its
//! [`MetadataListener`]s (see `raft::state_machine`). The leader decides an operation
//! against its latest image under one async lock (`op_lock`: decisions and their
//! commits happen one at a time, as with the single-node log before), runs `prepare` on
//! its local listeners (a partition whose files cannot be opened refuses the change with
//! nothing committed), and proposes the records. A non-leader forwards the operation to
//! the leader over the controller network and waits until its own image has applied
//! the leader's commit. Changes of the voters themselves (`voters.rs`) are Raft
//! membership changes, outside `op_lock`: openraft runs one at a time.
//!
//! The public calls are async. Each runs its operation as a task of its own on the
//! runtime the controller was opened on and awaits it: a caller that stops waiting (a
//! request dropped, a heartbeat loop shutting down) does not stop an operation between
//! its prepare and its commit. Waiting holds no thread: the blocking work of a commit
//! (listeners creating and deleting partition files) runs on tokio's blocking pool.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{Fatal, InitializeError, RaftError};
use openraft::SnapshotPolicy;
use tokio::net::TcpListener;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use uuid::Uuid;

use super::broker_liveness::BrokerLiveness;
use super::delta::MetadataListener;
use super::image::{MetadataImage, TopicImage};
use super::operations::{topic_of, ConfigChange, ControllerOp, NewTopic, PRODUCER_ID_BLOCK};
use super::raft::log_store::LogStore;
use super::raft::network::{Forwarder, Network};
use super::raft::rpc_server;
use super::raft::state_machine::{Published, StateMachine};
use super::raft::{ControllerNode, NodeId, Raft};
use super::records::{Endpoint, MetadataRecord, METADATA_FORMAT};
use super::ControllerError;
pub use admin::{QuorumDescription, QuorumReplica};
use bootstrap::{base_image, join_then_register, register_until_done};
use leader::{forward_handler, wait_applied};

/// How long an operation waits for a leader and its commit before failing
/// (`ControllerError::NotController`: REQUEST_TIMED_OUT to clients, which retry it).
const OP_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a single voter waits for itself to lead at open.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// Raft timings and log compaction.
#[derive(Debug, Clone)]
pub struct RaftTuning {
    pub heartbeat_interval_ms: u64,
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// Take a snapshot every this many log entries.
    pub snapshot_every_entries: u64,
    /// Entries kept in the log below the last snapshot (for followers a little behind).
    pub keep_entries_after_snapshot: u64,
    /// As the quorum leader: fence a broker not heard from for this long
    /// (`broker.session.timeout.ms`).
    pub broker_session_timeout_ms: i64,
    /// How often brokers heartbeat (`broker.heartbeat.interval.ms`): one missed, the
    /// leader checks whether the broker's process still listens.
    pub broker_heartbeat_interval_ms: i64,
}

impl Default for RaftTuning {
    fn default() -> Self {
        RaftTuning {
            heartbeat_interval_ms: 100,
            election_timeout_min_ms: 500,
            election_timeout_max_ms: 1000,
            snapshot_every_entries: 1000,
            keep_entries_after_snapshot: 100,
            broker_session_timeout_ms: crate::controller::broker_liveness::BROKER_SESSION_TIMEOUT_MS,
            broker_heartbeat_interval_ms: crate::controller::broker_liveness::BROKER_HEARTBEAT_INTERVAL_MS,
        }
    }
}

/// What a controller needs to know about itself and the quorum.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    pub node_id: i32,
    /// This broker's client address, registered with the quorum.
    pub advertised: (String, u16),
    /// This broker's inter-broker listener address, registered with the quorum when it
    /// has that listener.
    pub inter_broker_advertised: Option<Endpoint>,
    pub rack: Option<String>,
    /// The cluster id to record when this node is the first to register.
    pub cluster_id: Option<String>,
    pub default_partitions: i32,
    pub default_replication_factor: i16,
    /// Every voter's id and controller address; empty = this node alone. A node not
    /// among them is broker-only: it forwards every operation and follows the log as a
    /// Raft learner.
    pub voters: Vec<(i32, String)>,
    /// The controller address other nodes reach this one at, when it is not among the
    /// voters (broker-only); `None` = the bound listener address.
    pub controller_addr: Option<String>,
    /// The id of the directory that holds this node's metadata log (`meta.properties`),
    /// which names it in the quorum's membership when it joins as a learner (KIP-853's
    /// voter key, with the node id).
    pub directory_id: Option<Uuid>,
    pub tuning: RaftTuning,
    /// Move leadership back to preferred replicas this often (Kafka's
    /// `leader.imbalance.check.interval.seconds`); `None`: never (Kafka's
    /// `auto.leader.rebalance.enable=false`).
    pub leader_rebalance_interval: Option<Duration>,
}

struct Core {
    node_id: i32,
    defaults: (i32, i16),
    raft: Raft,
    published: Arc<Published>,
    /// The voters `--controller-quorum-voters` names: where to find the quorum when
    /// joining it. The membership (Raft's, which AddRaftVoter and RemoveRaftVoter change)
    /// says who the voters are now and where each member listens.
    voters: BTreeMap<NodeId, String>,
    forwarder: Forwarder,
    /// One decision-and-commit at a time on the leader.
    op_lock: tokio::sync::Mutex<()>,
    /// (next, limit) of this node's block of producer ids.
    producer_ids: Mutex<(i64, i64)>,
    /// Not started alone (voters were given): brokers heartbeat and can be fenced.
    clustered: bool,
    /// As the quorum leader: which brokers are alive, for the term it was built in.
    liveness: Mutex<Option<(u64, BrokerLiveness)>>,
    /// As the quorum leader: each member's progress, for DescribeQuorum.
    progress_seen: Mutex<admin::ProgressSeen>,
    /// Replication streams a leader opened to this node's controller listener (`rpc_server`).
    leader_contacts: tokio::sync::watch::Sender<u64>,
    /// (broker session timeout, broker heartbeat interval), in ms.
    broker_timing: (i64, i64),
}

/// The quorum's leadership as this node sees it, for a broker's heartbeat loop: the
/// term and leader, and how many replication streams leaders have opened to this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leadership {
    pub term: u64,
    pub leader: Option<i32>,
    pub contacts: u64,
}

type MetricsWatch = tokio::sync::watch::Receiver<openraft::RaftMetrics<NodeId, ControllerNode>>;

pub struct Controller {
    core: Arc<Core>,
    runtime: Handle,
    controller_addr: Option<SocketAddr>,
    /// The listener and the background loops; taken (and awaited) by `shutdown`.
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Set by `shutdown`, so that the drop does not stop Raft a second time (openraft
    /// warns "Double call to Raft::shutdown()").
    stopped: std::sync::atomic::AtomicBool,
    /// This broker process started after a clean shutdown of the one before it (its
    /// heartbeats say so: see [`ControllerOp::BrokerHeartbeat`]).
    clean_start: std::sync::atomic::AtomicBool,
    /// This broker's registration, submitted again when an UnregisterBroker removed it
    /// while the process runs (see [`Controller::register_again`]).
    registration: ControllerOp,
}

impl Controller {
    /// Open this node's controller: the Raft log under `dir/raft`, the listener for
    /// other controllers (when there are any), and, for the single node (no voters
    /// given), its own leadership and registration before returning; a quorum the flags
    /// name, even of one voter, registers in the background once it has a leader. Must
    /// run inside a tokio runtime, which the controller then uses.
    ///
    /// A `dir/metadata.log` from a pre-Raft runnel (single node) is the state machine's
    /// base: its records are the metadata the Raft log continues from.
    pub async fn open(
        dir: &Path,
        config: ControllerConfig,
        listener: Option<TcpListener>,
    ) -> Result<Controller, ControllerError> {
        let me = config.node_id as NodeId;
        let voters: BTreeMap<NodeId, String> = if config.voters.is_empty() {
            let addr = listener.as_ref().and_then(|l| l.local_addr().ok()).map(|a| a.to_string()).unwrap_or_default();
            BTreeMap::from([(me, addr)])
        } else {
            config.voters.iter().map(|(id, addr)| (*id as NodeId, addr.clone())).collect()
        };
        // A node that is not a voter is broker-only: it follows the log as a learner.
        let observer = !voters.contains_key(&me);
        // Started alone (no voters given): the zero-config single node, which neither
        // heartbeats nor fences. A quorum of one that the flags name (Kafka's
        // `--standalone`) is a cluster: it fences, and voters and brokers can join it.
        let single = config.voters.is_empty();
        let one_voter = voters.len() == 1 && !observer;
        if !single && listener.is_none() {
            return Err(ControllerError::Internal(
                "a multi-node quorum (or a broker-only node) needs a controller listener".into(),
            ));
        }
        let controller_addr = listener.as_ref().and_then(|l| l.local_addr().ok());
        let base = base_image(dir, one_voter)?;
        let raft_dir = dir.join("raft");
        let fold_base = base.offset > 0 && !raft_dir.join("snapshot.json").exists();
        let published = Arc::new(Published::new(MetadataImage::default()));
        let log = LogStore::open(&raft_dir)?;
        let pristine = log.is_pristine();
        let committed = log.committed();
        let sm = StateMachine::open(&raft_dir, base, published.clone())?;
        let names_itself = !single && config.directory_id.is_some();
        let t = &config.tuning;
        let raft_config = openraft::Config {
            cluster_name: "runnel-controller".into(),
            heartbeat_interval: t.heartbeat_interval_ms,
            election_timeout_min: t.election_timeout_min_ms,
            election_timeout_max: t.election_timeout_max_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(t.snapshot_every_entries),
            max_in_snapshot_log_to_keep: t.keep_entries_after_snapshot,
            snapshot_max_chunk_size: 1 << 20,
            // `replaced_log::watch_own_entry` turns elections on once it has looked at how
            // the membership names this node.
            enable_elect: !names_itself,
            ..Default::default()
        }
        .validate()
        .map_err(|e| ControllerError::Internal(e.to_string()))?;
        let raft = Raft::new(me, Arc::new(raft_config), Network { directory_id: config.directory_id }, log, sm)
            .await
            .map_err(internal)?;
        let core = Arc::new(Core {
            node_id: config.node_id,
            defaults: (config.default_partitions, config.default_replication_factor),
            raft: raft.clone(),
            published,
            voters: voters.clone(),
            forwarder: Forwarder,
            op_lock: tokio::sync::Mutex::new(()),
            producer_ids: Mutex::new((0, 0)),
            clustered: !single,
            liveness: Mutex::new(None),
            progress_seen: Mutex::new(admin::ProgressSeen::default()),
            leader_contacts: tokio::sync::watch::channel(0).0,
            broker_timing: (config.tuning.broker_session_timeout_ms, config.tuning.broker_heartbeat_interval_ms),
        });
        let mut tasks = Vec::new();
        if let Some(listener) = listener {
            let contacts = core.leader_contacts.clone();
            let serve =
                rpc_server::serve(listener, raft.clone(), forward_handler(&core), contacts, config.directory_id);
            tasks.push(tokio::spawn(serve));
        }
        // Where other controllers reach this node: a voter where the flags say, a
        // broker-only node where it is told to advertise (or where it listens).
        let own_addr = match voters.get(&me) {
            Some(addr) => addr.clone(),
            None => config.controller_addr.clone().or(controller_addr.map(|a| a.to_string())).unwrap_or_default(),
        };
        if let Some(directory_id) = config.directory_id.filter(|_| names_itself) {
            let watch =
                replaced_log::watch_own_entry(Arc::downgrade(&core), raft.metrics(), directory_id, own_addr.clone());
            tasks.push(tokio::spawn(watch));
        }
        // The lowest voter forms the quorum, once: a node that has a vote or a log was
        // initialized (or joined) before.
        if pristine && voters.keys().next() == Some(&me) {
            let members: BTreeMap<NodeId, ControllerNode> =
                voters.iter().map(|(id, addr)| (*id, ControllerNode::new(addr.clone(), None))).collect();
            match raft.initialize(members).await {
                Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(e) => return Err(internal(e)),
            }
        }
        if one_voter {
            // `initialize` elects at once; on a restart openraft restores a committed
            // leadership itself, and an election of one voter is one local vote.
            if !pristine && raft.current_leader().await != Some(me) {
                raft.trigger().elect().await.map_err(internal)?;
            }
            raft.wait(Some(OPEN_TIMEOUT)).current_leader(me, "a single voter leads").await.map_err(internal)?;
        }
        // Entries committed before a restart are applied again before anyone reads the
        // image.
        if let Some(c) = committed {
            wait_applied(&core.published, c.index, Instant::now() + OPEN_TIMEOUT).await?;
        }
        let register = ControllerOp::RegisterBroker {
            node_id: config.node_id,
            host: config.advertised.0.clone(),
            port: config.advertised.1,
            rack: config.rack.clone(),
            cluster_id: config.cluster_id.clone(),
            inter_broker: config.inter_broker_advertised.clone(),
            fenced: !single,
            metadata_format: METADATA_FORMAT,
        };
        let registration = register.clone();
        if single {
            core.submit(register).await?;
        } else if observer {
            let join = ControllerOp::AddObserver {
                node_id: config.node_id,
                controller_addr: own_addr,
                directory_id: config.directory_id,
                relayed: false,
            };
            tasks.push(tokio::spawn(join_then_register(Arc::downgrade(&core), join, register)));
        } else {
            tasks.push(tokio::spawn(register_until_done(Arc::downgrade(&core), register)));
        }
        if !single {
            tasks.push(tokio::spawn(liveness::expire_loop(Arc::downgrade(&core))));
            tasks.push(tokio::spawn(admin::watch_progress(Arc::downgrade(&core), raft.metrics())));
            if let Some(interval) = config.leader_rebalance_interval {
                tasks.push(tokio::spawn(admin::rebalance_leaders(Arc::downgrade(&core), interval)));
            }
        }
        let controller = Controller {
            core,
            runtime: Handle::current(),
            controller_addr,
            tasks: Mutex::new(tasks),
            stopped: std::sync::atomic::AtomicBool::new(false),
            clean_start: std::sync::atomic::AtomicBool::new(false),
            registration,
        };
        if fold_base {
            // From now on the Raft state holds everything; metadata.log is history.
            controller.snapshot().await?;
        }
        Ok(controller)
    }

    pub fn node_id(&self) -> i32 {
        self.core.node_id
    }

    /// The address the controller listener is bound to, if it has one.
    pub fn controller_addr(&self) -> Option<SocketAddr> {
        self.controller_addr
    }

    /// The current quorum leader, if one is known.
    pub fn leader(&self) -> Option<i32> {
        self.core.raft.metrics().borrow().current_leader.map(|l| l as i32)
    }

    /// The quorum's leadership as this node last saw it.
    pub fn leadership(&self) -> Leadership {
        let m = self.core.raft.metrics();
        let m = m.borrow();
        let contacts = *self.core.leader_contacts.borrow();
        Leadership { term: m.current_term, leader: m.current_leader.map(|l| l as i32), contacts }
    }

    /// Resolves once this node knows of a leader other than `seen` (a new term or a new
    /// node), or a leader has opened a replication stream to it since: a broker
    /// heartbeats that leader at once. A new leader has heard from nobody yet and lets
    /// no broker into an ISR until it has. Neither has a leader restarted before the
    /// others' election timeout: openraft restores it as leader of its term at
    /// startup, so term and leader stay the same, but its replication streams to the
    /// other nodes are new. Never resolves once the quorum is gone.
    pub async fn leadership_changed(&self, seen: Leadership) {
        let mut metrics = self.core.raft.metrics();
        let mut contacts = self.core.leader_contacts.subscribe();
        let new_leader = metrics.wait_for(|m| {
            m.current_leader.is_some()
                && (m.current_term, m.current_leader.map(|l| l as i32)) != (seen.term, seen.leader)
        });
        // The sender lives as long as the core: this wait ends only on a new contact.
        let reconnected = contacts.wait_for(|&n| n != seen.contacts);
        let changed = tokio::select! {
            r = new_leader => r.is_ok(),
            r = reconnected => r.is_ok(),
        };
        if !changed {
            std::future::pending::<()>().await;
        }
    }

    /// Resolves, with the reason, once this node's Raft has stopped on its own: its
    /// metadata log or snapshot could not be written or read (a full disk, an I/O
    /// error). openraft does not restart it, so from then on this node's image is
    /// frozen while the rest of the cluster goes on. Never resolves while Raft runs,
    /// nor after [`Controller::shutdown`].
    pub async fn failed(&self) -> String {
        let mut metrics = self.core.raft.metrics();
        let stopped =
            metrics.wait_for(|m| m.running_state.is_err()).await.ok().and_then(|m| m.running_state.clone().err());
        match stopped {
            Some(Fatal::Stopped) | None => std::future::pending().await,
            Some(e) => e.to_string(),
        }
    }

    /// openraft's view of this node (for tests and diagnostics).
    pub fn raft_metrics(&self) -> openraft::RaftMetrics<NodeId, ControllerNode> {
        self.core.raft.metrics().borrow().clone()
    }

    /// Take a snapshot now (and compact the log behind it), waiting until it is taken.
    pub async fn snapshot(&self) -> Result<(), ControllerError> {
        let (before, applied) = {
            let m = self.core.raft.metrics();
            let m = m.borrow();
            (m.snapshot, m.last_applied)
        };
        if before.is_some() && before == applied {
            return Ok(());
        }
        self.core.raft.trigger().snapshot().await.map_err(internal)?;
        let mut metrics = self.core.raft.metrics();
        let deadline = Instant::now() + OPEN_TIMEOUT;
        tokio::time::timeout_at(deadline, metrics.wait_for(|m| m.snapshot != before && m.snapshot.is_some()))
            .await
            .map_err(|_| ControllerError::Internal("snapshot not taken in time".into()))?
            .map_err(internal)?;
        Ok(())
    }

    /// The latest image applied on this node.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.core.published.image()
    }

    /// From now on `listener` hears of every commit. It is not told of the current image:
    /// the subscriber reads [`Controller::image`] itself (at start, before serving).
    pub fn subscribe(&self, listener: Arc<dyn MetadataListener>) {
        self.core.published.subscribe(listener);
    }

    /// Run `init` on the current image, then subscribe `listener` to every commit after
    /// it: a subscriber that starts while other nodes commit misses nothing and sees
    /// nothing twice out of order.
    pub fn subscribe_from<R>(
        &self,
        listener: Arc<dyn MetadataListener>,
        init: impl FnOnce(&Arc<MetadataImage>) -> R,
    ) -> R {
        self.core.published.subscribe_from(listener, init)
    }

    /// Stop taking part in the quorum: the listener closes (its port is free again when
    /// this returns: the aborted tasks are awaited) and Raft stops.
    pub async fn shutdown(&self) {
        if self.stopped.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        tasks.iter().for_each(JoinHandle::abort);
        for task in tasks {
            let _ = task.await;
        }
        let _ = self.core.raft.shutdown().await;
    }

    /// Run `op` through the quorum and wait for it; see the module doc.
    async fn run<T, F>(&self, f: impl FnOnce(Arc<Core>) -> F) -> Result<T, ControllerError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, ControllerError>> + Send + 'static,
    {
        // A panic (a bug) fails this operation only, as it did when callers waited on a
        // channel: the heartbeat loop and the ISR sender, which call this for as long as
        // the broker runs, go on.
        match self.runtime.spawn(f(self.core.clone())).await {
            Ok(result) => result,
            Err(e) if e.is_panic() => Err(ControllerError::Internal("the controller operation panicked".into())),
            Err(_) => Err(ControllerError::Internal("the controller is shutting down".into())),
        }
    }

    pub async fn create_topic(&self, req: &NewTopic, validate_only: bool) -> Result<Arc<TopicImage>, ControllerError> {
        let req = req.clone();
        self.run(move |core| async move {
            let name = req.name.clone();
            let (default_partitions, default_replication_factor) = core.defaults;
            let op =
                ControllerOp::CreateTopic { topic: req, default_partitions, default_replication_factor, validate_only };
            let reply = core.submit(op).await?;
            match core.published.image().topic(&name) {
                Some(t) if !validate_only => Ok(t.clone()),
                _ => topic_of(&reply.records, &name),
            }
        })
        .await
    }

    pub async fn delete_topic(&self, topic_id: Uuid) -> Result<(), ControllerError> {
        self.run(move |core| async move { core.submit(ControllerOp::DeleteTopic { topic_id }).await.map(drop) }).await
    }

    /// Grow a topic to `total` partitions (Kafka never shrinks), on the replicas
    /// `assignments` names for each partition added, or placed by the controller.
    pub async fn create_partitions(
        &self,
        name: &str,
        total: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        let name = name.to_owned();
        self.run(move |core| async move {
            core.submit(ControllerOp::CreatePartitions { name, total, validate_only, assignments }).await.map(drop)
        })
        .await
    }

    /// Apply config changes to a topic, all or none.
    pub async fn alter_topic_configs(
        &self,
        name: &str,
        changes: &[ConfigChange],
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        let (name, changes) = (name.to_owned(), changes.to_vec());
        self.run(move |core| async move {
            core.submit(ControllerOp::AlterTopicConfigs { name, changes, validate_only }).await.map(drop)
        })
        .await
    }

    /// Change a client-metrics subscription's configs, all or none.
    pub async fn alter_client_metrics(
        &self,
        subscription: &str,
        changes: &[ConfigChange],
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        let (subscription, changes) = (subscription.to_owned(), changes.to_vec());
        self.run(move |core| async move {
            core.submit(ControllerOp::AlterClientMetrics { subscription, changes, validate_only }).await.map(drop)
        })
        .await
    }

    /// Change one broker's dynamic configs (`resource` = its node id) or the cluster
    /// default's (`resource` = ""), all or none.
    pub async fn alter_broker_configs(
        &self,
        resource: &str,
        changes: &[ConfigChange],
        validate_only: bool,
    ) -> Result<(), ControllerError> {
        let (resource, changes) = (resource.to_owned(), changes.to_vec());
        self.run(move |core| async move {
            core.submit(ControllerOp::AlterBrokerConfigs { resource, changes, validate_only }).await.map(drop)
        })
        .await
    }

    /// Hand out a fresh producer id; never reused, also across restarts and nodes: each
    /// node takes blocks of ids from the quorum.
    pub async fn allocate_producer_id(&self) -> Result<i64, ControllerError> {
        let take = |ids: &mut (i64, i64)| {
            (ids.0 < ids.1).then(|| {
                ids.0 += 1;
                ids.0 - 1
            })
        };
        if let Some(id) = take(&mut self.core.producer_ids.lock().unwrap_or_else(|e| e.into_inner())) {
            return Ok(id);
        }
        let reply = self.run(|core| async move { core.submit(ControllerOp::AllocateProducerIds).await }).await?;
        let limit = reply
            .records
            .iter()
            .find_map(|r| match r {
                MetadataRecord::ProducerIds { next_producer_id } => Some(*next_producer_id),
                _ => None,
            })
            .ok_or_else(|| ControllerError::Internal("no producer id block".into()))?;
        let mut ids = self.core.producer_ids.lock().unwrap_or_else(|e| e.into_inner());
        if ids.0 >= ids.1 {
            *ids = (limit - PRODUCER_ID_BLOCK, limit);
        }
        take(&mut ids).ok_or_else(|| ControllerError::Internal("empty producer id block".into()))
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner()).iter().for_each(JoinHandle::abort);
        if self.stopped.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let raft = self.core.raft.clone();
        self.runtime.spawn(async move {
            let _ = raft.shutdown().await;
        });
    }
}

fn internal(e: impl std::fmt::Display) -> ControllerError {
    ControllerError::Internal(e.to_string())
}

mod admin;
mod bootstrap;
mod leader;
mod liveness;
mod replaced_log;
mod voters;

#[cfg(test)]
mod tests;
