//! `runnel`: with no arguments, a single-node Kafka-compatible broker on 127.0.0.1:9092
//! with its data in `./runnel-data`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use runnel::config::{BrokerConfig, ConfigOverrides, FlushMode};
use runnel::log_limit::LogLimit;
use runnel::Broker;

/// mimalloc keeps freed memory for reuse: Fetch responses are MiB-sized buffers, and with
/// the system allocator each one was a fresh mmap, zero-filled page by page (page faults
/// were the largest item in the consume profile).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "runnel", version, about = "A message broker that speaks the Apache Kafka protocol")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker (the default).
    Serve(Box<ServeArgs>),
    /// Start a local cluster of N brokers as child processes (consecutive loopback
    /// ports from --base-port, controllers 100 and HTTP 200 ports above, data and logs under
    /// --data-root/node-N), print the bootstrap servers, stop them all on Ctrl-C.
    DevCluster(DevClusterArgs),
    /// Topics: create, list, describe, delete, produce, consume (on any Kafka broker).
    Topic(runnel::cli::TopicArgs),
    /// Consumer groups: list, describe (offsets and lag), seek, delete.
    Group(runnel::cli::GroupArgs),
    /// The cluster: id, controller, brokers.
    Cluster(runnel::cli::ClusterArgs),
}

#[derive(Args, Clone)]
struct DevClusterArgs {
    /// Number of brokers (each also a controller quorum voter).
    #[arg(long, default_value_t = 3)]
    nodes: u16,
    /// Client port of node 1; node N listens on base-port + N - 1.
    #[arg(long, default_value_t = 9092)]
    base_port: u16,
    /// Where node N keeps its data (`node-N`) and log (`node-N.log`).
    #[arg(long, default_value = "runnel-data")]
    data_root: PathBuf,
    /// Further flags for every broker, after `--` (e.g. `-- --num-partitions 3`); `{node}`
    /// in one becomes the node's id (e.g. `-- --rack 'rack-{node}'`).
    #[arg(last = true)]
    broker_args: Vec<String>,
}

/// Every flag also reads a `RUNNEL_*` environment variable; flags win over the
/// environment, which wins over the YAML file, which wins over built-in defaults.
#[derive(Args, Clone, Default)]
struct ServeArgs {
    /// YAML config file (see config/runnel.yaml).
    #[arg(long, env = "RUNNEL_CONFIG")]
    config: Option<PathBuf>,
    /// Log lines on stderr as `text` (colored only when stderr is a terminal) or `json`
    /// (one object per line). Levels and filters: RUNNEL_LOG (e.g. `info`,
    /// `runnel::replication=debug`); unset, openraft's repeated lines are limited.
    #[arg(long, env = "RUNNEL_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Address to listen on, ip:port (port 0 = any free port).
    #[arg(long, env = "RUNNEL_LISTEN")]
    listen: Option<String>,
    /// host:port that clients are told to connect to.
    #[arg(long, env = "RUNNEL_ADVERTISED_LISTENER")]
    advertised_listener: Option<String>,
    /// A second Kafka listener for the other brokers, ip:port (Kafka: the listener of
    /// inter.broker.listener.name): replica fetchers connect to it.
    #[arg(long, env = "RUNNEL_INTER_BROKER_LISTEN")]
    inter_broker_listen: Option<String>,
    /// host:port that other brokers are told to connect to on the inter-broker listener.
    #[arg(long, env = "RUNNEL_INTER_BROKER_ADVERTISED_LISTENER")]
    inter_broker_advertised_listener: Option<String>,
    /// HTTP listener for /health, /ready and /metrics, ip:port (port 0 = any free port;
    /// `off` = none).
    #[arg(long, env = "RUNNEL_HTTP_LISTEN")]
    http_listen: Option<String>,
    /// Send a span per produce request (and, for acks=all, one for the wait for the
    /// in-sync replicas) to this OpenTelemetry collector, over OTLP/HTTP:
    /// http://host[:port][/path] (port 4318 and path /v1/traces by default; no TLS).
    #[arg(long, env = "RUNNEL_OTLP_TRACES_ENDPOINT")]
    otlp_traces_endpoint: Option<String>,
    /// Where the metadata log lives, and partition logs unless --log-dirs spreads them
    /// (then it is one of the log dirs, by default the first).
    #[arg(long, env = "RUNNEL_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Comma-separated directories to spread partition logs over, e.g. one per disk
    /// (Kafka: log.dirs); a new partition goes to the one with the fewest.
    #[arg(long, env = "RUNNEL_LOG_DIRS")]
    log_dirs: Option<String>,
    /// This broker's id in the cluster (Kafka: node.id), >= 0.
    #[arg(long, env = "RUNNEL_NODE_ID")]
    node_id: Option<i32>,
    /// Cluster id written on first start; later starts keep the stored one.
    #[arg(long, env = "RUNNEL_CLUSTER_ID")]
    cluster_id: Option<String>,
    /// Partitions of auto-created topics and of CreateTopics without a count.
    #[arg(long, env = "RUNNEL_NUM_PARTITIONS")]
    num_partitions: Option<i32>,
    /// Create unknown topics on Metadata and Produce requests (Kafka:
    /// auto.create.topics.enable).
    #[arg(long, env = "RUNNEL_AUTO_CREATE_TOPICS")]
    auto_create_topics: Option<bool>,
    /// Delete sealed segments older than this; -1 keeps them forever (Kafka:
    /// log.retention.ms).
    #[arg(long, env = "RUNNEL_LOG_RETENTION_MS")]
    log_retention_ms: Option<i64>,
    /// Delete the oldest sealed segments while a partition is larger than this; -1 = no
    /// limit (Kafka: log.retention.bytes).
    #[arg(long, env = "RUNNEL_LOG_RETENTION_BYTES")]
    log_retention_bytes: Option<i64>,
    /// Roll a new segment file at this size (Kafka: log.segment.bytes).
    #[arg(long, env = "RUNNEL_LOG_SEGMENT_BYTES")]
    log_segment_bytes: Option<u64>,
    /// Roll a new segment after this long even if not full (Kafka: log.roll.ms).
    #[arg(long, env = "RUNNEL_LOG_SEGMENT_MS")]
    log_segment_ms: Option<i64>,
    /// How often retention runs (Kafka: log.retention.check.interval.ms).
    #[arg(long, env = "RUNNEL_LOG_RETENTION_CHECK_INTERVAL_MS")]
    log_retention_check_interval_ms: Option<u64>,
    /// How often the log cleaner looks for compacted topics to clean (Kafka:
    /// log.cleaner.backoff.ms).
    #[arg(long, env = "RUNNEL_LOG_CLEANER_BACKOFF_MS")]
    log_cleaner_backoff_ms: Option<u64>,
    /// `interval` (Kafka's page-cache acks) or `fsync` (fsync before ack, group commit).
    #[arg(long, env = "RUNNEL_FLUSH_MODE")]
    flush_mode: Option<FlushMode>,
    /// In `interval` flush mode, fsync after this many messages (Kafka:
    /// log.flush.interval.messages).
    #[arg(long, env = "RUNNEL_FLUSH_INTERVAL_MESSAGES")]
    flush_interval_messages: Option<i64>,
    /// In `interval` flush mode, fsync after this long (Kafka: log.flush.interval.ms).
    #[arg(long, env = "RUNNEL_FLUSH_INTERVAL_MS")]
    flush_interval_ms: Option<i64>,
    /// Largest record batch accepted (Kafka: message.max.bytes).
    #[arg(long, env = "RUNNEL_MESSAGE_MAX_BYTES")]
    message_max_bytes: Option<usize>,
    /// Largest request frame; a larger size prefix closes the connection (Kafka:
    /// socket.request.max.bytes).
    #[arg(long, env = "RUNNEL_SOCKET_REQUEST_MAX_BYTES")]
    socket_request_max_bytes: Option<usize>,
    /// Open client connections; at the limit the least recently active idle (or stalled)
    /// connection is closed for a new one.
    #[arg(long, env = "RUNNEL_MAX_CONNECTIONS")]
    max_connections: Option<usize>,
    /// Connections from one IP address (Kafka: max.connections.per.ip).
    #[arg(long, env = "RUNNEL_MAX_CONNECTIONS_PER_IP")]
    max_connections_per_ip: Option<usize>,
    /// Close a connection that sent nothing for this long (Kafka: connections.max.idle.ms).
    #[arg(long, env = "RUNNEL_CONNECTIONS_MAX_IDLE_MS")]
    connections_max_idle_ms: Option<u64>,
    /// Close a connection whose request has not arrived whole this long after its first
    /// byte.
    #[arg(long, env = "RUNNEL_REQUEST_READ_TIMEOUT_MS")]
    request_read_timeout_ms: Option<u64>,
    /// Bytes of partially received requests held across all connections; -1 = unbounded
    /// (Kafka: queued.max.request.bytes).
    #[arg(long, env = "RUNNEL_QUEUED_MAX_REQUEST_BYTES", allow_hyphen_values = true)]
    queued_max_request_bytes: Option<i64>,
    /// Segment files held open at once by all partitions together; 0 = half the
    /// open-file soft limit.
    #[arg(long, env = "RUNNEL_MAX_OPEN_LOG_FILES")]
    max_open_log_files: Option<usize>,
    /// Send Fetch record bytes with sendfile(2) instead of copying them from the page
    /// cache first (off by default: slower on loopback in our measurements).
    #[arg(long, env = "RUNNEL_FETCH_SENDFILE")]
    fetch_sendfile: Option<bool>,
    /// KIP-714: the largest client telemetry push accepted, compressed or not (Kafka:
    /// telemetry.max.bytes).
    #[arg(long, env = "RUNNEL_TELEMETRY_MAX_BYTES")]
    telemetry_max_bytes: Option<i32>,
    /// KIP-227: incremental fetch sessions cached at once; 0 = none (Kafka:
    /// max.incremental.fetch.session.cache.slots).
    #[arg(long, env = "RUNNEL_MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS")]
    max_incremental_fetch_session_cache_slots: Option<usize>,
    /// Default min.insync.replicas: acks=all produce is refused while the ISR is smaller.
    #[arg(long, env = "RUNNEL_MIN_INSYNC_REPLICAS")]
    min_insync_replicas: Option<i32>,
    /// Smallest session timeout a group member may ask for (Kafka:
    /// group.min.session.timeout.ms).
    #[arg(long, env = "RUNNEL_GROUP_MIN_SESSION_TIMEOUT_MS")]
    group_min_session_timeout_ms: Option<i32>,
    /// Largest session timeout a group member may ask for (Kafka:
    /// group.max.session.timeout.ms).
    #[arg(long, env = "RUNNEL_GROUP_MAX_SESSION_TIMEOUT_MS")]
    group_max_session_timeout_ms: Option<i32>,
    /// Delay of a new group's first rebalance, so that members starting together join one
    /// generation (Kafka's default is 3000; runnel's dev default is 0).
    #[arg(long, env = "RUNNEL_GROUP_INITIAL_REBALANCE_DELAY_MS")]
    group_initial_rebalance_delay_ms: Option<i32>,
    /// Committed offsets of a group empty this long are removed (Kafka:
    /// offsets.retention.minutes).
    #[arg(long, env = "RUNNEL_OFFSETS_RETENTION_MINUTES")]
    offsets_retention_minutes: Option<i64>,
    /// Segment size of `__consumer_offsets` when it is created (Kafka:
    /// offsets.topic.segment.bytes).
    #[arg(long, env = "RUNNEL_OFFSETS_TOPIC_SEGMENT_BYTES")]
    offsets_topic_segment_bytes: Option<u64>,
    /// Partitions of `__consumer_offsets` when it is created; an existing topic keeps its
    /// own (Kafka: offsets.topic.num.partitions).
    #[arg(long, env = "RUNNEL_OFFSETS_TOPIC_NUM_PARTITIONS")]
    offsets_topic_num_partitions: Option<i32>,
    /// Replication factor of `__consumer_offsets` when it is created, capped at the live
    /// brokers (Kafka: offsets.topic.replication.factor).
    #[arg(long, env = "RUNNEL_OFFSETS_TOPIC_REPLICATION_FACTOR")]
    offsets_topic_replication_factor: Option<i16>,
    /// Replication factor of topics created without one (Kafka: default.replication.factor).
    #[arg(long, env = "RUNNEL_DEFAULT_REPLICATION_FACTOR")]
    default_replication_factor: Option<i16>,
    /// In a cluster, move leadership back to the preferred (first) replicas that can take
    /// it, periodically (Kafka: auto.leader.rebalance.enable).
    #[arg(long, env = "RUNNEL_AUTO_LEADER_REBALANCE_ENABLE")]
    auto_leader_rebalance_enable: Option<bool>,
    /// How often the automatic leader rebalance runs (Kafka:
    /// leader.imbalance.check.interval.seconds).
    #[arg(long, env = "RUNNEL_LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS")]
    leader_imbalance_check_interval_seconds: Option<u64>,
    /// In a cluster, the controller fences a broker that sent no heartbeat for this long
    /// (Kafka: broker.session.timeout.ms).
    #[arg(long, env = "RUNNEL_BROKER_SESSION_TIMEOUT_MS")]
    broker_session_timeout_ms: Option<u64>,
    /// In a cluster, how often a broker heartbeats the controller (Kafka:
    /// broker.heartbeat.interval.ms).
    #[arg(long, env = "RUNNEL_BROKER_HEARTBEAT_INTERVAL_MS")]
    broker_heartbeat_interval_ms: Option<u64>,
    /// A follower that has not caught up with its leader for this long leaves the ISR
    /// (Kafka: replica.lag.time.max.ms).
    #[arg(long, env = "RUNNEL_REPLICA_LAG_TIME_MAX_MS")]
    replica_lag_time_max_ms: Option<u64>,
    /// host:port of this node's controller listener (default: its entry in the voters).
    #[arg(long, env = "RUNNEL_CONTROLLER_LISTEN")]
    controller_listen: Option<String>,
    /// The controller quorum: 1@host:port,2@host:port,3@host:port (default: this node
    /// alone).
    #[arg(long, env = "RUNNEL_CONTROLLER_QUORUM_VOTERS")]
    controller_quorum_voters: Option<String>,
    /// Kafka's process.roles: `broker,controller` (a quorum voter) or `broker` (follows
    /// the metadata log as a Raft learner; needs --controller-listen).
    #[arg(long, env = "RUNNEL_PROCESS_ROLES")]
    process_roles: Option<String>,
    /// This broker's rack (Kafka: broker.rack), for rack-aware replica placement.
    #[arg(long, env = "RUNNEL_RACK")]
    rack: Option<String>,
    /// Follower fetching (KIP-392, Kafka: replica.selector.class): set to
    /// org.apache.kafka.common.replica.RackAwareReplicaSelector to send consumers that set
    /// client.rack to an in-sync follower in their rack.
    #[arg(long, env = "RUNNEL_REPLICA_SELECTOR_CLASS")]
    replica_selector_class: Option<String>,
}

impl ServeArgs {
    fn overrides(&self) -> ConfigOverrides {
        ConfigOverrides {
            node_id: self.node_id,
            listen: self.listen.clone(),
            advertised_listener: self.advertised_listener.clone(),
            inter_broker_listen: self.inter_broker_listen.clone(),
            inter_broker_advertised_listener: self.inter_broker_advertised_listener.clone(),
            http_listen: self.http_listen.clone(),
            otlp_traces_endpoint: self.otlp_traces_endpoint.clone(),
            data_dir: self.data_dir.clone(),
            log_dirs: self.log_dirs.clone(),
            cluster_id: self.cluster_id.clone(),
            num_partitions: self.num_partitions,
            default_replication_factor: self.default_replication_factor,
            auto_leader_rebalance_enable: self.auto_leader_rebalance_enable,
            leader_imbalance_check_interval_seconds: self.leader_imbalance_check_interval_seconds,
            broker_session_timeout_ms: self.broker_session_timeout_ms,
            broker_heartbeat_interval_ms: self.broker_heartbeat_interval_ms,
            replica_lag_time_max_ms: self.replica_lag_time_max_ms,
            auto_create_topics: self.auto_create_topics,
            log_retention_ms: self.log_retention_ms,
            log_retention_bytes: self.log_retention_bytes,
            log_segment_bytes: self.log_segment_bytes,
            log_segment_ms: self.log_segment_ms,
            log_retention_check_interval_ms: self.log_retention_check_interval_ms,
            log_cleaner_backoff_ms: self.log_cleaner_backoff_ms,
            flush_mode: self.flush_mode,
            flush_interval_messages: self.flush_interval_messages,
            flush_interval_ms: self.flush_interval_ms,
            message_max_bytes: self.message_max_bytes,
            socket_request_max_bytes: self.socket_request_max_bytes,
            max_connections: self.max_connections,
            max_connections_per_ip: self.max_connections_per_ip,
            connections_max_idle_ms: self.connections_max_idle_ms,
            request_read_timeout_ms: self.request_read_timeout_ms,
            queued_max_request_bytes: self.queued_max_request_bytes,
            max_open_log_files: self.max_open_log_files,
            telemetry_max_bytes: self.telemetry_max_bytes,
            max_incremental_fetch_session_cache_slots: self.max_incremental_fetch_session_cache_slots,
            fetch_sendfile: self.fetch_sendfile,
            min_insync_replicas: self.min_insync_replicas,
            group_min_session_timeout_ms: self.group_min_session_timeout_ms,
            group_max_session_timeout_ms: self.group_max_session_timeout_ms,
            group_initial_rebalance_delay_ms: self.group_initial_rebalance_delay_ms,
            offsets_retention_minutes: self.offsets_retention_minutes,
            offsets_topic_segment_bytes: self.offsets_topic_segment_bytes,
            offsets_topic_num_partitions: self.offsets_topic_num_partitions,
            offsets_topic_replication_factor: self.offsets_topic_replication_factor,
            controller_listen: self.controller_listen.clone(),
            controller_quorum_voters: self.controller_quorum_voters.clone(),
            process_roles: self.process_roles.clone(),
            rack: self.rack.clone(),
            replica_selector_class: self.replica_selector_class.clone(),
        }
    }
}

#[derive(Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    #[default]
    Text,
    Json,
}

fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    use tracing_subscriber::layer::{Layer, SubscriberExt};
    use tracing_subscriber::util::SubscriberInitExt;
    let chosen = tracing_subscriber::EnvFilter::try_from_env("RUNNEL_LOG").ok();
    // The default filter limits openraft's repeated lines; a filter the operator chose
    // does not (see `runnel::log_limit`).
    let limit: Option<&'static LogLimit> = chosen.is_none().then(|| &*Box::leak(Box::default()));
    let filter = chosen.unwrap_or_else(|| "info,openraft=warn".into());
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    // Escape codes only for a person at a terminal, never into files or `docker logs`.
    let fmt = match format {
        LogFormat::Text => fmt.with_ansi(std::io::stderr().is_terminal()).boxed(),
        LogFormat::Json => fmt.json().with_current_span(false).boxed(),
    };
    // `None` filters nothing.
    tracing_subscriber::registry().with(filter).with(fmt.with_filter(limit)).init();
    if let Some(limit) = limit {
        LogLimit::report_every_window(limit);
    }
}

/// The built-in default of each optional serve flag, for `--help`. The flags have no
/// clap default (an absent flag leaves the YAML file's or the environment's value), so
/// clap cannot show one; these come from [`BrokerConfig::default`], so they cannot drift.
fn flag_defaults() -> Vec<(&'static str, String)> {
    let d = BrokerConfig::default();
    let never = |v: i64| if v == i64::MAX { format!("{v} (never)") } else { v.to_string() };
    let flush_mode = match d.flush_mode {
        FlushMode::Interval => "interval",
        FlushMode::Fsync => "fsync",
    };
    vec![
        ("config", "none".to_owned()),
        ("listen", d.listen.clone()),
        ("advertised_listener", "the bound listener address".to_owned()),
        ("inter_broker_listen", "none: brokers use the client listener".to_owned()),
        ("inter_broker_advertised_listener", "the bound inter-broker listener address".to_owned()),
        ("http_listen", d.http_listen.clone().unwrap_or_else(|| "off".to_owned())),
        ("otlp_traces_endpoint", "none: spans are not exported".to_owned()),
        ("data_dir", d.data_dir.display().to_string()),
        ("log_dirs", "the data dir alone".to_owned()),
        ("node_id", d.node_id.to_string()),
        ("cluster_id", "random on first start".to_owned()),
        ("num_partitions", d.num_partitions.to_string()),
        ("auto_create_topics", d.auto_create_topics.to_string()),
        ("log_retention_ms", d.log_retention_ms.to_string()),
        ("log_retention_bytes", d.log_retention_bytes.to_string()),
        ("log_segment_bytes", d.log_segment_bytes.to_string()),
        ("log_segment_ms", d.log_segment_ms.to_string()),
        ("log_retention_check_interval_ms", d.log_retention_check_interval_ms.to_string()),
        ("log_cleaner_backoff_ms", d.log_cleaner_backoff_ms.to_string()),
        ("flush_mode", flush_mode.to_owned()),
        ("flush_interval_messages", never(d.flush_interval_messages)),
        ("flush_interval_ms", never(d.flush_interval_ms)),
        ("message_max_bytes", d.message_max_bytes.to_string()),
        ("socket_request_max_bytes", d.socket_request_max_bytes.to_string()),
        ("max_connections", d.max_connections.to_string()),
        ("max_connections_per_ip", d.max_connections_per_ip.to_string()),
        ("connections_max_idle_ms", d.connections_max_idle_ms.to_string()),
        ("request_read_timeout_ms", d.request_read_timeout_ms.to_string()),
        ("queued_max_request_bytes", d.queued_max_request_bytes.to_string()),
        ("max_open_log_files", d.max_open_log_files.to_string()),
        ("fetch_sendfile", d.fetch_sendfile.to_string()),
        ("telemetry_max_bytes", d.telemetry_max_bytes.to_string()),
        ("max_incremental_fetch_session_cache_slots", d.max_incremental_fetch_session_cache_slots.to_string()),
        ("min_insync_replicas", d.min_insync_replicas.to_string()),
        ("group_min_session_timeout_ms", d.group_min_session_timeout_ms.to_string()),
        ("group_max_session_timeout_ms", d.group_max_session_timeout_ms.to_string()),
        ("group_initial_rebalance_delay_ms", d.group_initial_rebalance_delay_ms.to_string()),
        ("offsets_retention_minutes", d.offsets_retention_minutes.to_string()),
        ("offsets_topic_segment_bytes", d.offsets_topic_segment_bytes.to_string()),
        ("offsets_topic_num_partitions", d.offsets_topic_num_partitions.to_string()),
        ("offsets_topic_replication_factor", d.offsets_topic_replication_factor.to_string()),
        ("default_replication_factor", d.default_replication_factor.to_string()),
        ("auto_leader_rebalance_enable", d.auto_leader_rebalance_enable.to_string()),
        ("leader_imbalance_check_interval_seconds", d.leader_imbalance_check_interval_seconds.to_string()),
        ("broker_session_timeout_ms", d.broker_session_timeout_ms.to_string()),
        ("broker_heartbeat_interval_ms", d.broker_heartbeat_interval_ms.to_string()),
        ("replica_lag_time_max_ms", d.replica_lag_time_max_ms.to_string()),
        ("controller_listen", "this node's entry in the voters".to_owned()),
        ("controller_quorum_voters", "this node alone".to_owned()),
        ("process_roles", d.process_roles.clone()),
        ("rack", "none".to_owned()),
        ("replica_selector_class", "none: the leader serves every consumer".to_owned()),
    ]
}

/// Appends `[default: …]` to the help of each serve flag, on the top level and on `serve`.
fn with_flag_defaults(cmd: clap::Command) -> clap::Command {
    fn annotate(mut cmd: clap::Command) -> clap::Command {
        for (id, default) in flag_defaults() {
            cmd = cmd.mut_arg(id, |a| {
                let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                let long = a.get_long_help().map(|h| h.to_string());
                let a = a.help(format!("{help} [default: {default}]"));
                match long {
                    Some(long) => a.long_help(format!("{long} [default: {default}]")),
                    None => a,
                }
            });
        }
        cmd
    }
    annotate(cmd).mut_subcommand("serve", annotate)
}

fn cli_command() -> clap::Command {
    with_flag_defaults(Cli::command())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::from_arg_matches(&cli_command().get_matches()).unwrap_or_else(|e| e.exit());
    let args = match cli.command {
        Some(Command::Serve(a)) => *a,
        Some(Command::DevCluster(d)) => return dev_cluster(d),
        Some(Command::Topic(a)) => std::process::exit(runnel::cli::run_topic(a)),
        Some(Command::Group(a)) => std::process::exit(runnel::cli::run_group(a)),
        Some(Command::Cluster(a)) => std::process::exit(runnel::cli::run_cluster(a)),
        None => cli.serve,
    };
    init_logging(args.log_format);
    let config = match load_config(&args) {
        Ok(c) => c,
        Err(message) => {
            // Every configuration error, like clap's usage errors: one line, exit 2.
            eprintln!("runnel: {message}");
            std::process::exit(2);
        }
    };
    // Each client holds a socket and the log file cache up to half the soft limit: use
    // all the descriptors the hard limit allows.
    let before = rlimit::getrlimit(rlimit::Resource::NOFILE).map(|(soft, _)| soft).unwrap_or(0);
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(after) => tracing::info!(before, after, "open file soft limit raised to the hard limit"),
        Err(e) => tracing::warn!(error = %e, before, "cannot raise the open file limit"),
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let broker = match Broker::start(config).await {
            Ok(b) => b,
            Err(e) => {
                // A start failure (a busy port, a locked data dir) is one clear line, with
                // no backtrace, whatever RUST_BACKTRACE says.
                eprintln!("runnel: cannot start: {e}");
                std::process::exit(1);
            }
        };
        // The ready line: harnesses wait for it and read the bound address from it. The
        // HTTP line, then the inter-broker one, follow it without its words (harnesses
        // match "listening on"). All go out in one write, and a failed write is ignored:
        // a harness that reads the ready line and closes the pipe must not make a later
        // print fail (println! panics on a closed stdout, and the broker would exit with
        // an error).
        let mut lines = format!("runnel ready: listening on {}\n", broker.local_addr());
        if let Some(http) = broker.http_addr() {
            lines.push_str(&format!("runnel http: serving on {http}\n"));
        }
        if let Some(inter_broker) = broker.inter_broker_addr() {
            lines.push_str(&format!("runnel inter-broker: serving on {inter_broker}\n"));
        }
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(lines.as_bytes()).and_then(|()| stdout.flush());
        drop(stdout);
        tokio::select! {
            () = wait_for_signal() => {}
            reason = broker.failed() => {
                // No controlled shutdown: it needs the metadata this node no longer
                // follows. What was acknowledged is in the logs (or on the replicas);
                // the next start recovers them.
                tracing::error!(
                    %reason,
                    "the metadata log failed: this node no longer follows the cluster's metadata; exiting \
                     (restart it once the disk has room or is repaired)"
                );
                std::process::exit(1);
            }
        }
        tracing::info!("shutting down");
        broker.shutdown().await;
        Ok(())
    })
}

/// The config file (if any), then the environment and flags, validated. An invalid
/// value that the file alone already has names the file.
fn load_config(args: &ServeArgs) -> Result<BrokerConfig, String> {
    let file = match &args.config {
        Some(path) => Some((path, ConfigOverrides::from_yaml_file(path).map_err(|e| e.to_string())?)),
        None => None,
    };
    let mut layers: Vec<ConfigOverrides> = file.iter().map(|(_, o)| o.clone()).collect();
    layers.push(args.overrides());
    BrokerConfig::build(&layers).map_err(|e| match &file {
        Some((path, from_file)) => {
            let file_alone = BrokerConfig::build(std::slice::from_ref(from_file)).err();
            if file_alone.is_some_and(|f| f.field() == e.field()) {
                format!("config file {}: {e}", path.display())
            } else {
                format!("{e} (set by RUNNEL_* environment or a flag, over config file {})", path.display())
            }
        }
        None => e.to_string(),
    })
}

fn dev_cluster(args: DevClusterArgs) -> anyhow::Result<()> {
    init_logging(LogFormat::Text);
    let spec = runnel::dev_cluster::DevCluster {
        nodes: args.nodes,
        base_port: args.base_port,
        data_root: args.data_root,
        binary: std::env::current_exe().context("locating the runnel binary")?,
        extra_args: args.broker_args,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    if let Err(e) = runtime.block_on(spec.run()) {
        eprintln!("runnel dev-cluster: {e}");
        std::process::exit(1);
    }
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every flag of the broker (top level and `serve`) says what it does, its default
    /// and its environment variable in `--help`.
    #[test]
    fn every_flag_is_described_with_its_default_and_environment_variable() {
        let mut cmd = cli_command();
        cmd.build();
        let serve = cmd.find_subcommand("serve").expect("serve subcommand").clone();
        for command in [&cmd, &serve] {
            let flags: Vec<&clap::Arg> = command
                .get_arguments()
                .filter(|a| a.get_long().is_some_and(|l| l != "help" && l != "version"))
                .collect();
            assert!(flags.len() > 30, "{}", flags.len());
            for a in flags {
                let id = a.get_id().as_str();
                let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                let text = help.split(" [default:").next().unwrap_or_default();
                assert!(text.trim().len() > 10, "--{id} has no description: {help:?}");
                let has_default = help.contains("[default: ") || !a.get_default_values().is_empty();
                assert!(has_default, "--{id} shows no default: {help:?}");
                let env = a.get_env().map(|e| e.to_string_lossy().into_owned());
                assert_eq!(env, Some(format!("RUNNEL_{}", id.to_uppercase())), "--{id}");
            }
        }
        let rendered = cmd.render_long_help().to_string();
        assert!(rendered.contains("[default: 127.0.0.1:9644]"), "{rendered}");
        assert!(rendered.contains("[env: RUNNEL_HTTP_LISTEN="), "{rendered}");
    }

    #[test]
    fn every_default_names_a_flag() {
        let cmd = Cli::command();
        for (id, _) in flag_defaults() {
            assert!(cmd.get_arguments().any(|a| a.get_id().as_str() == id), "no flag {id}");
        }
    }
}
