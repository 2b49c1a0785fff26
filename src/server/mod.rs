//! The network side: listener, connections, shutdown, and [`Broker`], the handle that
//! starts and stops a whole broker (used by `main` and embeddable in tests).

mod alter_partition;
pub mod cluster;
pub mod connection;
pub mod connections;
pub mod descriptor_budget;
pub mod embedded;
pub mod http;
pub mod http_api;
pub mod http_serve;
pub mod metrics;
pub mod otlp_traces;
mod response_writer;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, mpsc, Semaphore};
use tokio::task::JoinHandle;

use connection::ConnectionLimits;
use connections::ConnectionTable;

use crate::config::BrokerConfig;
use crate::controller::{Controller, ControllerConfig, ControllerError, Endpoint, Listener, RaftTuning};
use crate::coordinator::{GroupCoordinator, GroupLimits, OffsetsWriter};
use crate::protocol::context::system_clock;
use crate::protocol::offsets_topic;
use crate::protocol::replica_client::TcpLeaderEndpoints;
use crate::protocol::Ctx;
use crate::replication::replica_manager::METADATA_DIR;
use crate::replication::{FetcherManager, Partition, PartitionError, ReplicaManager};
use crate::storage::meta_properties::{MetaProperties, MetaPropertiesError};

#[derive(Debug, Error)]
pub enum StartError {
    #[error("cannot create data dir {path}: {source}")]
    DataDir { path: String, source: std::io::Error },
    #[error("data dir {path} is in use by another runnel process")]
    DataDirLocked { path: String },
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: String, source: std::io::Error },
    #[error("cannot open cluster metadata: {0}")]
    Metadata(#[from] ControllerError),
    #[error("cannot open partitions: {0}")]
    Partitions(#[from] PartitionError),
    #[error("{0}")]
    LogDirs(#[from] crate::storage::log_dirs::LogDirsError),
    #[error("{0}")]
    MetaProperties(#[from] MetaPropertiesError),
}

/// A running broker. Dropping it stops accepting and closes connections; call
/// [`Broker::shutdown`] to also wait for that and flush every partition.
pub struct Broker {
    local_addr: SocketAddr,
    /// The inter-broker listener's bound address, when there is one.
    inter_broker_addr: Option<SocketAddr>,
    /// The HTTP listener's bound address, when it is on.
    http_addr: Option<SocketAddr>,
    /// Read by `/ready`: set once serving, cleared when shutdown begins.
    serving: Arc<AtomicBool>,
    /// Set when the controlled shutdown begins: from then on every heartbeat asks to shut
    /// down (see [`cluster::heartbeat_loop`]).
    wants_shut_down: Arc<AtomicBool>,
    /// Set when this node's metadata log failed and it stopped serving
    /// ([`stop_serving_when_metadata_fails`]).
    metadata_failed: Arc<AtomicBool>,
    ctx: Arc<Ctx>,
    shutdown: broadcast::Sender<()>,
    /// Every connection task holds a sender; `recv` returns `None` once the last one
    /// has finished (mini-redis's `shutdown_complete`).
    connections_done: mpsc::Receiver<()>,
    /// The accept loops of the client and inter-broker listeners.
    accept: Vec<JoinHandle<()>>,
    tasks: Vec<JoinHandle<()>>,
    /// The OTLP span exporter and its stop signal, when a collector is configured.
    traces_export: Option<(broadcast::Sender<()>, JoinHandle<()>)>,
    /// The follower fetchers of the partitions this broker follows.
    fetchers: Option<FetcherManager>,
    /// The HTTP listener's task, when it is on.
    http: Option<JoinHandle<()>>,
    /// This process's identity in the cluster's liveness (a restart is a new one).
    incarnation: uuid::Uuid,
    /// Held for the broker's lifetime: one process per data dir.
    _lock: std::fs::File,
    /// The same for every other log dir.
    _log_dir_locks: Vec<std::fs::File>,
}

impl Broker {
    /// Start a broker: bind, recover metadata and partitions, serve.
    pub async fn start(config: BrokerConfig) -> Result<Broker, StartError> {
        Self::start_inner(config, None).await
    }

    /// Start a broker whose group coordinator writes its records through `writer`
    /// instead of the `__consumer_offsets` partition (tests inject a writer that fails or
    /// holds appends; loading still reads the partition).
    pub async fn start_with_offsets_writer(
        config: BrokerConfig,
        writer: Arc<dyn OffsetsWriter>,
    ) -> Result<Broker, StartError> {
        Self::start_inner(config, Some(writer)).await
    }

    async fn start_inner(config: BrokerConfig, writer: Option<Arc<dyn OffsetsWriter>>) -> Result<Broker, StartError> {
        std::fs::create_dir_all(&config.data_dir)
            .map_err(|source| StartError::DataDir { path: config.data_dir.display().to_string(), source })?;
        let lock = lock_data_dir(&config.data_dir)?;
        // Every other log dir is locked too: two brokers must not share one.
        let mut log_dir_locks = Vec::new();
        for dir in &other_log_dirs(&config) {
            std::fs::create_dir_all(dir)
                .map_err(|source| StartError::DataDir { path: dir.display().to_string(), source })?;
            log_dir_locks.push(lock_data_dir(dir)?);
        }
        // Taken before any log opens: a crash from here on is an unclean shutdown.
        let clean_start = crate::storage::clean_shutdown::take(&marker_dirs(&config))
            .map_err(|(dir, source)| StartError::DataDir { path: dir.display().to_string(), source })?;
        let listener = TcpListener::bind(&config.listen)
            .await
            .map_err(|source| StartError::Bind { addr: config.listen.clone(), source })?;
        let local_addr =
            listener.local_addr().map_err(|source| StartError::Bind { addr: config.listen.clone(), source })?;
        let (host, port) = advertised(config.advertised_listener.as_deref(), local_addr);
        let inter_broker_listener = match &config.inter_broker_listen {
            Some(addr) => {
                Some(TcpListener::bind(addr).await.map_err(|source| StartError::Bind { addr: addr.clone(), source })?)
            }
            None => None,
        };
        let inter_broker_addr = match &inter_broker_listener {
            Some(l) => Some(l.local_addr().map_err(|source| StartError::Bind { addr: "inter-broker".into(), source })?),
            None => None,
        };
        let inter_broker_advertised = inter_broker_addr.map(|bound| {
            let (host, port) = advertised(config.inter_broker_advertised_listener.as_deref(), bound);
            Endpoint { host, port }
        });
        let inter_broker =
            inter_broker_advertised.as_ref().map_or_else(|| "off".into(), |e| format!("{}:{}", e.host, e.port));
        let http_listener = match &config.http_listen {
            Some(addr) => {
                Some(TcpListener::bind(addr).await.map_err(|source| StartError::Bind { addr: addr.clone(), source })?)
            }
            None => None,
        };
        let http_addr = match &http_listener {
            Some(l) => Some(http::bound(l).map_err(|source| StartError::Bind { addr: "http".into(), source })?),
            None => None,
        };
        let controller_listener = match config.controller_listen_addr() {
            Some(addr) => {
                Some(TcpListener::bind(&addr).await.map_err(|source| StartError::Bind { addr: addr.clone(), source })?)
            }
            None => None,
        };
        let mut meta = MetaProperties::load_or_create(&config.data_dir, config.node_id)?;
        let controller_config = ControllerConfig {
            node_id: config.node_id,
            advertised: (host.clone(), port),
            inter_broker_advertised,
            rack: config.rack.clone(),
            cluster_id: config.cluster_id.clone(),
            default_partitions: config.num_partitions,
            default_replication_factor: config.default_replication_factor,
            voters: config.controller_quorum_voters.clone(),
            controller_addr: None,
            directory_id: Some(meta.directory_id),
            tuning: RaftTuning {
                broker_session_timeout_ms: i64::try_from(config.broker_session_timeout_ms).unwrap_or(i64::MAX),
                broker_heartbeat_interval_ms: i64::try_from(config.broker_heartbeat_interval_ms).unwrap_or(i64::MAX),
                ..RaftTuning::default()
            },
            leader_rebalance_interval: config
                .auto_leader_rebalance_enable
                .then(|| std::time::Duration::from_secs(config.leader_imbalance_check_interval_seconds)),
        };
        let controller = Arc::new(
            Controller::open(&config.data_dir.join(METADATA_DIR), controller_config, controller_listener).await?,
        );
        let clock = system_clock();
        let replicas = Arc::new(ReplicaManager::new(&config, clock.clone())?);
        let incarnation = uuid::Uuid::new_v4();
        replicas.set_broker_epoch(crate::controller::broker_liveness::broker_epoch_of(incarnation));
        let serve_deadline = tokio::time::Instant::now() + UNFENCE_TIMEOUT;
        if controller.is_clustered() && !clean_start {
            tracing::info!(
                "no clean shutdown recorded in the data dir (a crash, or a new data dir): this broker's replicas \
                 leave the eligible leader replicas they were in"
            );
        }
        controller.set_started_after_clean_shutdown(clean_start);
        cluster::register(&controller, incarnation, serve_deadline).await;
        // Registered, this node knows its cluster (a node that joined one learned it from
        // the metadata log); a node that was not let in before the deadline records it
        // at a later start.
        meta.record_cluster_id(&config.data_dir, &controller.image().cluster_id)?;
        // From here on metadata is pushed: each commit reaches the partitions before the
        // request that made it is answered. Other nodes may commit while this one starts:
        // the partitions open from the current image and every commit after it, in order.
        controller.subscribe_from(replicas.clone(), |image| {
            replicas.remove_orphans(image);
            replicas.apply_image(image, clock())
        })?;
        replicas.resume_log_dir_moves();
        let limits = GroupLimits {
            min_session_timeout_ms: config.group_min_session_timeout_ms,
            max_session_timeout_ms: config.group_max_session_timeout_ms,
            initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
            max_size: usize::MAX,
        };
        let retention_ms = config.offsets_retention_minutes.saturating_mul(60_000);
        let ctx = Arc::new_cyclic(|me| {
            let writer = writer.unwrap_or_else(|| Arc::new(offsets_topic::ConsumerOffsetsWriter::new(me.clone())));
            // Group ids hash over the topic's partition count once it exists; until then
            // over the configured one, which is what the topic will be created with.
            let partitions = controller
                .image()
                .topic(offsets_topic::OFFSETS_TOPIC)
                .map_or(config.offsets_topic_num_partitions, |t| t.partitions.len() as i32);
            let groups = Arc::new(GroupCoordinator::new(limits, retention_ms, partitions, writer));
            let telemetry_max_bytes = config.telemetry_max_bytes;
            let session_slots = config.max_incremental_fetch_session_cache_slots;
            let traces = config.otlp_traces_endpoint.is_some().then(|| Arc::new(crate::traces::SpanQueue::new()));
            Ctx {
                config,
                controller,
                replicas,
                groups,
                clock,
                refusals: Default::default(),
                coordinator_switch: Default::default(),
                requests: Default::default(),
                telemetry: crate::telemetry::Telemetry::new(telemetry_max_bytes),
                traces,
                controller_ops: tokio::sync::Semaphore::new(crate::protocol::context::MAX_CONTROLLER_OPS_IN_FLIGHT),
                fetch_sessions: crate::protocol::fetch_sessions::FetchSessions::new(session_slots),
            }
        });
        // A group is served by the broker that leads its partition of `__consumer_offsets`,
        // loaded from that partition.
        offsets_topic::load_coordinator(&ctx);
        let (shutdown, _) = broadcast::channel(1);
        let (done, connections_done) = mpsc::channel(1);
        let c = &ctx.config;
        let budget =
            descriptor_budget::DescriptorBudget::of_process(ctx.replicas.files().capacity(), c.max_connections);
        let connections = ConnectionTable::new(budget.kafka_connections, c.max_connections_per_ip);
        let serving = Arc::new(AtomicBool::new(false));
        let http = http_listener.map(|l| {
            let slots = http_serve::HttpSlots::new(budget.http_connections);
            let state = Arc::new(http::HttpState::new(ctx.clone(), connections.clone(), serving.clone(), slots));
            http::spawn(l, state, shutdown.subscribe())
        });
        // Subscribed here, not in the task: a shutdown sent before the task first runs
        // must still reach it (it did not, and a start at once followed by a shutdown hung).
        let stop = shutdown.subscribe();
        let wants_shut_down = Arc::new(AtomicBool::new(false));
        let metadata_failed = Arc::new(AtomicBool::new(false));
        if ctx.controller.is_clustered() {
            ctx.replicas.set_isr_sink(Arc::new(alter_partition::ControllerIsrSink::new(
                &ctx.controller,
                &ctx.replicas,
                incarnation,
            )));
        }
        let tasks = vec![
            tokio::spawn(retention_loop(ctx.clone(), shutdown.subscribe())),
            tokio::spawn(cleaner_loop(ctx.clone(), shutdown.subscribe())),
            tokio::spawn(group_clock(ctx.clone(), shutdown.subscribe())),
            tokio::spawn(cluster::heartbeat_loop(
                ctx.clone(),
                incarnation,
                wants_shut_down.clone(),
                shutdown.subscribe(),
            )),
            tokio::spawn(cluster::high_watermark_checkpoint_loop(ctx.clone(), shutdown.subscribe())),
            tokio::spawn(cluster::offline_replicas_loop(ctx.clone(), shutdown.subscribe())),
            tokio::spawn(log_dir_recovery_loop(ctx.clone(), shutdown.subscribe())),
            tokio::spawn(stop_serving_when_metadata_fails(
                ctx.clone(),
                (shutdown.clone(), shutdown.subscribe()),
                serving.clone(),
                metadata_failed.clone(),
            )),
        ];
        // Its own stop signal: it is stopped after the connections drained, so the spans
        // of every request answered are sent too.
        let traces_export = match (&ctx.traces, &ctx.config.otlp_traces_endpoint) {
            (Some(queue), Some(url)) => {
                let endpoint = crate::traces::OtlpEndpoint::parse(url).expect("validated with the config");
                let (stop, stopped) = broadcast::channel(1);
                Some((stop, tokio::spawn(otlp_traces::run(queue.clone(), endpoint, ctx.config.node_id, stopped))))
            }
            _ => None,
        };
        cluster::wait_unfenced(&ctx, serve_deadline).await;
        // Clients are served only now, as Kafka's brokers enable request processing once
        // unfenced: before, the image may not hold even the brokers and the cluster id, and
        // librdkafka took the empty Metadata answer for a broken one and backed off for
        // seconds. The port is bound from the start, so connections wait in the backlog.
        let mut accept = Vec::new();
        if let Some(l) = inter_broker_listener {
            let (ctx, table, stop, done) = (ctx.clone(), connections.clone(), shutdown.subscribe(), done.clone());
            accept.push(tokio::spawn(accept_loop(ctx, l, Listener::InterBroker, table, shutdown.clone(), stop, done)));
        }
        let client = accept_loop(ctx.clone(), listener, Listener::Client, connections, shutdown.clone(), stop, done);
        accept.push(tokio::spawn(client));
        // Replica fetchers reach a leader on its inter-broker listener when it has one.
        let image_of = ctx.controller.clone();
        let resolve = Arc::new(move |id: i32| {
            let image = image_of.image();
            let (host, port) = image.brokers.get(&id)?.endpoint(Listener::InterBroker);
            Some((host.to_owned(), port))
        });
        let endpoints = Arc::new(TcpLeaderEndpoints::new(ctx.config.node_id, resolve));
        let fetchers = Some(FetcherManager::start(ctx.replicas.clone(), endpoints));
        serving.store(true, Ordering::Release);
        let http_shown = http_addr.map_or_else(|| "off".to_owned(), |a| a.to_string());
        tracing::info!(%local_addr, advertised = %format!("{host}:{port}"), %inter_broker, http = %http_shown, "runnel broker started");
        Ok(Broker {
            local_addr,
            inter_broker_addr,
            http_addr,
            serving,
            wants_shut_down,
            metadata_failed,
            ctx,
            shutdown,
            connections_done,
            accept,
            tasks,
            traces_export,
            fetchers,
            http,
            incarnation,
            _lock: lock,
            _log_dir_locks: log_dir_locks,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Where the inter-broker listener is bound, if `inter_broker_listen` is set.
    pub fn inter_broker_addr(&self) -> Option<SocketAddr> {
        self.inter_broker_addr
    }

    /// Where `/health`, `/ready` and `/metrics` are served, unless `http_listen` is off.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// `host:port` for a client's bootstrap.servers.
    pub fn bootstrap(&self) -> String {
        self.local_addr.to_string()
    }

    pub fn context(&self) -> &Arc<Ctx> {
        &self.ctx
    }

    /// Resolves, with the reason, if this broker can no longer follow the cluster's
    /// metadata: its controller's Raft log failed (a full disk, an I/O error). It would
    /// go on serving a frozen view of the cluster (leaders that moved, ISRs that
    /// changed) to clients, and heartbeating as if healthy, so nobody would fence it.
    /// The binary exits then, as Kafka stops a broker whose metadata log dir failed
    /// (KIP-858); its partitions' leadership moves to the other replicas, and a restart
    /// once the disk has room recovers it.
    pub async fn failed(&self) -> String {
        self.ctx.controller.failed().await
    }

    /// Stop accepting, let in-flight requests finish and be answered (at most
    /// [`DRAIN_TIMEOUT`]), then flush every partition. Connections close after the
    /// request they are serving; requests parked in the purgatory (long-poll fetches)
    /// are answered at once with what they have. So nothing is appended after the final
    /// flush, and every acknowledged record is in it.
    pub async fn shutdown(mut self) {
        self.serving.store(false, Ordering::Release);
        self.wants_shut_down.store(true, Ordering::Release);
        // In a cluster, leadership moves to other replicas while this broker still
        // answers (clients are told NOT_LEADER_OR_FOLLOWER and follow the new leaders).
        // Not once the metadata log failed: this node would wait its whole timeout for a
        // change its image can no longer show.
        let metadata_failed = self.metadata_failed.load(Ordering::Acquire);
        if !metadata_failed && cluster::controlled_shutdown(&self.ctx, self.incarnation).await {
            tracing::info!(
                grace_ms = cluster::MOVED_LEADERSHIP_GRACE.as_millis() as u64,
                "still answering (clients with stale metadata are sent to the new leaders)"
            );
            tokio::time::sleep(cluster::MOVED_LEADERSHIP_GRACE).await;
        }
        let _ = self.shutdown.send(());
        self.ctx.replicas.purgatory().close();
        for accept in self.accept.drain(..) {
            bounded_join(accept, "a listener's accept loop").await;
        }
        if tokio::time::timeout(DRAIN_TIMEOUT, self.connections_done.recv()).await.is_err() {
            tracing::warn!(
                timeout_ms = DRAIN_TIMEOUT.as_millis() as u64,
                "connections still busy at shutdown; flushing without them"
            );
        }
        for t in self.tasks.drain(..) {
            bounded_join(t, "a background loop").await;
        }
        if let Some((stop, export)) = self.traces_export.take() {
            let _ = stop.send(());
            bounded_join(export, "the OTLP trace exporter").await;
        }
        if let Some(mut http) = self.http.take() {
            // Graceful: a scrape in flight is answered. A client that holds a request
            // half sent would hold it forever: it gets HTTP_DRAIN_TIMEOUT.
            if tokio::time::timeout(HTTP_DRAIN_TIMEOUT, &mut http).await.is_err() {
                http.abort();
            }
        }
        // A fetcher that did not stop may still append after the final flush: then the
        // next start must not be told the shutdown was clean.
        let mut fetchers_stopped = true;
        if let Some(fetchers) = self.fetchers.take() {
            if tokio::time::timeout(STOP_WAIT_TIMEOUT, fetchers.shutdown()).await.is_err() {
                fetchers_stopped = false;
                tracing::warn!(
                    timeout_ms = STOP_WAIT_TIMEOUT.as_millis() as u64,
                    "replica fetchers did not stop in time; going on, and the shutdown is not recorded as clean"
                );
            }
        }
        let partitions = self.ctx.replicas.all_partitions();
        let count = partitions.len();
        let started = std::time::Instant::now();
        let (flushed, all_flushed) =
            tokio::task::spawn_blocking(move || flush_all(&partitions)).await.unwrap_or((0, false));
        if self.ctx.controller.is_clustered() {
            // After the final flush: a clean restart starts from exactly these.
            let replicas = self.ctx.replicas.clone();
            let _ = tokio::task::spawn_blocking(move || replicas.checkpoint_high_watermarks()).await;
        }
        // Every log holds what it acknowledged: the next process may say its start is
        // clean (and stay an eligible leader replica). Not with a log dir offline or a
        // failed flush.
        if all_flushed && fetchers_stopped && self.ctx.replicas.offline_partitions().is_empty() {
            if let Err(e) = crate::storage::clean_shutdown::mark(&marker_dirs(&self.ctx.config)) {
                tracing::warn!(error = %e, "could not record the clean shutdown");
            }
        }
        if tokio::time::timeout(STOP_WAIT_TIMEOUT, self.ctx.controller.shutdown()).await.is_err() {
            tracing::warn!(
                timeout_ms = STOP_WAIT_TIMEOUT.as_millis() as u64,
                "the controller did not stop in time; going on"
            );
        }
        tracing::info!(
            partitions = count,
            flushed,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "partitions flushed; runnel broker stopped"
        );
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.shutdown.send(());
        let export = self.traces_export.as_ref().map(|(_, t)| t);
        for t in self.tasks.iter().chain(&self.accept).chain(&self.http).chain(export) {
            t.abort();
        }
    }
}

fn lock_data_dir(dir: &std::path::Path) -> Result<std::fs::File, StartError> {
    let path = dir.join(".lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| StartError::DataDir { path: path.display().to_string(), source })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(StartError::DataDirLocked { path: dir.display().to_string() }),
        Err(std::fs::TryLockError::Error(source)) => {
            Err(StartError::DataDir { path: path.display().to_string(), source })
        }
    }
}

/// The address a listener bound at `bound` is advertised at: `configured` (port 0 = the
/// bound port), or the bound address (an unspecified IP as 127.0.0.1).
fn advertised(configured: Option<&str>, bound: SocketAddr) -> (String, u16) {
    if let Some(adv) = configured {
        if let Some((h, p)) = adv.rsplit_once(':') {
            if let Ok(p) = p.parse::<u16>() {
                // Port 0 in the advertised address means "the port we bound".
                return (h.to_owned(), if p == 0 { bound.port() } else { p });
            }
        }
    }
    let host = if bound.ip().is_unspecified() { "127.0.0.1".to_owned() } else { bound.ip().to_string() };
    (host, bound.port())
}

/// Once this node's metadata log fails ([`Broker::failed`]), it stops serving: the
/// listeners close (connections after the request they are serving) and the heartbeats
/// stop, so the controller fences it and clients go to the brokers that follow the
/// cluster. An embedded broker does what the binary does by exiting; its owner still
/// calls [`Broker::shutdown`] to flush and release the data dir.
///
/// (`stop` is subscribed before the task is spawned, so a shutdown sent before it first
/// runs still ends it: `Broker::shutdown` waits for it.)
async fn stop_serving_when_metadata_fails(
    ctx: Arc<Ctx>,
    (shutdown, mut stop): (broadcast::Sender<()>, broadcast::Receiver<()>),
    serving: Arc<AtomicBool>,
    metadata_failed: Arc<AtomicBool>,
) {
    let reason = tokio::select! {
        reason = ctx.controller.failed() => reason,
        _ = stop.recv() => return,
    };
    tracing::error!(%reason, "the metadata log failed: this broker stops serving (its listeners close)");
    metadata_failed.store(true, Ordering::Release);
    serving.store(false, Ordering::Release);
    let _ = shutdown.send(());
}

/// fsyncs at once at shutdown: the disk merges concurrent syncs into fewer journal
/// commits, so 10,000 dirty partitions take seconds instead of tens of seconds serially.
const SHUTDOWN_FLUSH_THREADS: usize = 16;

/// Where the clean-shutdown marker goes: the data dir and every log dir.
fn marker_dirs(config: &BrokerConfig) -> Vec<std::path::PathBuf> {
    let mut dirs = vec![config.data_dir.clone()];
    dirs.extend(other_log_dirs(config));
    dirs
}

/// The log dirs besides the data dir (which may be one of them).
fn other_log_dirs(config: &BrokerConfig) -> Vec<std::path::PathBuf> {
    config.log_dirs().into_iter().filter(|d| *d != config.data_dir).collect()
}

/// Flushes every partition with unflushed records, on up to [`SHUTDOWN_FLUSH_THREADS`]
/// threads (clean partitions cost nothing): how many, and whether all succeeded.
fn flush_all(partitions: &[Arc<Partition>]) -> (usize, bool) {
    let dirty: Vec<&Arc<Partition>> = partitions.iter().filter(|p| p.needs_flush()).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..SHUTDOWN_FLUSH_THREADS.min(dirty.len()) {
            scope.spawn(|| {
                while let Some(p) = dirty.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                    if let Err(e) = p.flush() {
                        tracing::error!(topic = %p.topic, partition = p.index, error = %e, "flush at shutdown failed");
                        failed.store(true, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    (dirty.len(), !failed.load(Ordering::Relaxed))
}

/// How long a starting broker of a cluster waits to register with the controller quorum
/// and be let in before it serves anyway (a quorum that cannot form yet).
const UNFENCE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long [`Broker::shutdown`] waits for in-flight requests.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// How long [`Broker::shutdown`] waits for each part it stops (a listener, a background
/// loop, the replica fetchers, the controller) before it goes on without it: a loop in
/// the middle of long work (a cleaner pass) or a peer that does not answer must not
/// keep the process from stopping. Logs are flushed after, whatever was left.
const STOP_WAIT_TIMEOUT: Duration = Duration::from_secs(5);

/// Waits for `task` to end, at most [`STOP_WAIT_TIMEOUT`]; then aborts it (it stops at
/// its next await) with a log line naming `what`.
async fn bounded_join(mut task: tokio::task::JoinHandle<()>, what: &str) {
    if tokio::time::timeout(STOP_WAIT_TIMEOUT, &mut task).await.is_err() {
        tracing::warn!(timeout_ms = STOP_WAIT_TIMEOUT.as_millis() as u64, "{what} did not stop in time; aborted");
        task.abort();
    }
}

/// How long [`Broker::shutdown`] waits for HTTP requests in flight (a scrape takes
/// milliseconds; only a stalled client takes this long).
const HTTP_DRAIN_TIMEOUT: Duration = Duration::from_secs(1);

async fn accept_loop(
    ctx: Arc<Ctx>,
    listener: TcpListener,
    name: Listener,
    table: Arc<ConnectionTable>,
    shutdown: broadcast::Sender<()>,
    mut stop: broadcast::Receiver<()>,
    done: mpsc::Sender<()>,
) {
    let c = &ctx.config;
    let limits = ConnectionLimits {
        idle: Duration::from_millis(c.connections_max_idle_ms),
        read_timeout: Duration::from_millis(c.request_read_timeout_ms),
        budget: usize::try_from(c.queued_max_request_bytes)
            .ok()
            .map(|b| Arc::new(Semaphore::new(b.min(Semaphore::MAX_PERMITS)))),
    };
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.recv() => return,
        };
        match accepted {
            Ok((stream, peer)) => match table.admit(peer) {
                Ok((reg, evicted)) => {
                    if let Some(old) = evicted {
                        tracing::info!(%peer, evicted = %old, "max_connections reached: closing the least recently active connection");
                    }
                    let (ctx, limits, rx, done) = (ctx.clone(), limits.clone(), shutdown.subscribe(), done.clone());
                    tokio::spawn(async move {
                        connection::serve(ctx, stream, name, reg, limits, rx).await;
                        drop(done);
                    });
                }
                Err(refused) => {
                    if let Some(n) = ctx.refusals.should_warn(Some(peer.ip()), "", ctx.now_ms()) {
                        tracing::warn!(%peer, reason = %refused, refused_since_last_warning = n, "connection refused");
                    }
                    drop(stream);
                }
            },
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::error!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Every `LOG_DIR_PROBE_INTERVAL`: offline log dirs whose failure can clear (a full
/// disk) are probed and come back once they take writes (see
/// `replica_manager/dir_recovery.rs`). While every dir is online this costs a flag load
/// per dir.
async fn log_dir_recovery_loop(ctx: Arc<Ctx>, mut stop: broadcast::Receiver<()>) {
    use crate::replication::replica_manager::LOG_DIR_PROBE_INTERVAL;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(LOG_DIR_PROBE_INTERVAL) => {}
            _ = stop.recv() => return,
        }
        let dirs = ctx.replicas.log_dirs();
        if !(0..dirs.dirs().len()).any(|i| dirs.is_offline(i)) {
            continue;
        }
        let replicas = ctx.replicas.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || replicas.recover_offline_log_dirs()).await {
            tracing::error!(error = %e, "log dir probe failed");
        }
    }
}

/// Time and size retention, every `log.retention.check.interval.ms`.
async fn retention_loop(ctx: Arc<Ctx>, stop: broadcast::Receiver<()>) {
    let period = Duration::from_millis(ctx.config.log_retention_check_interval_ms.max(100));
    every_partition(ctx, stop, period, "retention", |ctx, p| match p.enforce_retention(ctx.now_ms()) {
        Ok(0) => {}
        Ok(n) => tracing::info!(topic = %p.topic, partition = p.index, segments = n, "retention deleted segments"),
        Err(e) => tracing::error!(topic = %p.topic, partition = p.index, error = %e, "retention failed"),
    })
    .await
}

/// The log cleaner: compacts `cleanup.policy=compact` partitions.
async fn cleaner_loop(ctx: Arc<Ctx>, stop: broadcast::Receiver<()>) {
    let period = Duration::from_millis(ctx.config.log_cleaner_backoff_ms.max(10));
    every_partition(ctx, stop, period, "log cleaning", |ctx, p| {
        if let Err(e) = p.clean(ctx.now_ms()) {
            tracing::error!(topic = %p.topic, partition = p.index, error = %e, "log cleaning failed");
        }
    })
    .await
}

/// Every `period` until stopped, runs `work` on each partition, off the async workers
/// (it deletes or rewrites files). One partition's failure, even a panic, does not stop
/// the others'.
async fn every_partition(
    ctx: Arc<Ctx>,
    mut stop: broadcast::Receiver<()>,
    period: Duration,
    what: &'static str,
    work: fn(&Ctx, &Partition),
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = stop.recv() => return,
        }
        let ctx = ctx.clone();
        let pass = tokio::task::spawn_blocking(move || {
            for p in ctx.replicas.all_partitions() {
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&ctx, &p))).is_err() {
                    tracing::error!(topic = %p.topic, partition = p.index, what, "partition task panicked");
                }
            }
        });
        if let Err(e) = pass.await {
            tracing::error!(error = %e, what, "partition pass failed");
        }
    }
}

/// Drives the group coordinator's clock: session expiry, rebalance and sync timeouts,
/// offset expiry.
async fn group_clock(ctx: Arc<Ctx>, mut stop: broadcast::Receiver<()>) {
    let mut interval = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = stop.recv() => return,
        }
        offsets_topic::refresh_coordinator(&ctx);
        ctx.groups.tick(ctx.now_ms()).await;
    }
}
