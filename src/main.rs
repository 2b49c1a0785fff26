//! `runnel`: with no arguments, a single-node Kafka-compatible broker on 127.0.0.1:9092
//! with its data in `./runnel-data`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use runnel::config::{BrokerConfig, ConfigOverrides, FlushMode};
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
    /// Further flags for every broker, after `--` (e.g. `-- --num-partitions 3`).
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
    /// `runnel::replication=debug`).
    #[arg(long, env = "RUNNEL_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Address to listen on, ip:port (port 0 = any free port).
    #[arg(long, env = "RUNNEL_LISTEN")]
    listen: Option<String>,
    /// host:port that clients are told to connect to.
    #[arg(long, env = "RUNNEL_ADVERTISED_LISTENER")]
    advertised_listener: Option<String>,
    /// HTTP listener for /health, /ready and /metrics, ip:port (port 0 = any free port;
    /// `off` = none) [default: 127.0.0.1:9644].
    #[arg(long, env = "RUNNEL_HTTP_LISTEN")]
    http_listen: Option<String>,
    #[arg(long, env = "RUNNEL_DATA_DIR")]
    data_dir: Option<PathBuf>,
    #[arg(long, env = "RUNNEL_NODE_ID")]
    node_id: Option<i32>,
    #[arg(long, env = "RUNNEL_CLUSTER_ID")]
    cluster_id: Option<String>,
    /// Partitions of auto-created topics and of CreateTopics without a count.
    #[arg(long, env = "RUNNEL_NUM_PARTITIONS")]
    num_partitions: Option<i32>,
    #[arg(long, env = "RUNNEL_AUTO_CREATE_TOPICS")]
    auto_create_topics: Option<bool>,
    #[arg(long, env = "RUNNEL_LOG_RETENTION_MS")]
    log_retention_ms: Option<i64>,
    #[arg(long, env = "RUNNEL_LOG_RETENTION_BYTES")]
    log_retention_bytes: Option<i64>,
    #[arg(long, env = "RUNNEL_LOG_SEGMENT_BYTES")]
    log_segment_bytes: Option<u64>,
    #[arg(long, env = "RUNNEL_LOG_SEGMENT_MS")]
    log_segment_ms: Option<i64>,
    #[arg(long, env = "RUNNEL_LOG_RETENTION_CHECK_INTERVAL_MS")]
    log_retention_check_interval_ms: Option<u64>,
    /// How often the log cleaner looks for compacted topics to clean (Kafka:
    /// log.cleaner.backoff.ms).
    #[arg(long, env = "RUNNEL_LOG_CLEANER_BACKOFF_MS")]
    log_cleaner_backoff_ms: Option<u64>,
    /// `interval` (Kafka's page-cache acks) or `fsync` (fsync before ack, group commit).
    #[arg(long, env = "RUNNEL_FLUSH_MODE")]
    flush_mode: Option<FlushMode>,
    #[arg(long, env = "RUNNEL_FLUSH_INTERVAL_MESSAGES")]
    flush_interval_messages: Option<i64>,
    #[arg(long, env = "RUNNEL_FLUSH_INTERVAL_MS")]
    flush_interval_ms: Option<i64>,
    #[arg(long, env = "RUNNEL_MESSAGE_MAX_BYTES")]
    message_max_bytes: Option<usize>,
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
    #[arg(long, env = "RUNNEL_MIN_INSYNC_REPLICAS")]
    min_insync_replicas: Option<i32>,
    #[arg(long, env = "RUNNEL_GROUP_MIN_SESSION_TIMEOUT_MS")]
    group_min_session_timeout_ms: Option<i32>,
    #[arg(long, env = "RUNNEL_GROUP_MAX_SESSION_TIMEOUT_MS")]
    group_max_session_timeout_ms: Option<i32>,
    /// Delay of a new group's first rebalance, so that members starting together join one
    /// generation (Kafka's default is 3000; runnel's dev default is 0).
    #[arg(long, env = "RUNNEL_GROUP_INITIAL_REBALANCE_DELAY_MS")]
    group_initial_rebalance_delay_ms: Option<i32>,
    #[arg(long, env = "RUNNEL_OFFSETS_RETENTION_MINUTES")]
    offsets_retention_minutes: Option<i64>,
    /// Segment size of `__consumer_offsets` when it is created (Kafka:
    /// offsets.topic.segment.bytes).
    #[arg(long, env = "RUNNEL_OFFSETS_TOPIC_SEGMENT_BYTES")]
    offsets_topic_segment_bytes: Option<u64>,
    /// Replication factor of topics created without one (Kafka: default.replication.factor).
    #[arg(long, env = "RUNNEL_DEFAULT_REPLICATION_FACTOR")]
    default_replication_factor: Option<i16>,
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
}

impl ServeArgs {
    fn overrides(&self) -> ConfigOverrides {
        ConfigOverrides {
            node_id: self.node_id,
            listen: self.listen.clone(),
            advertised_listener: self.advertised_listener.clone(),
            http_listen: self.http_listen.clone(),
            data_dir: self.data_dir.clone(),
            cluster_id: self.cluster_id.clone(),
            num_partitions: self.num_partitions,
            default_replication_factor: self.default_replication_factor,
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
            fetch_sendfile: self.fetch_sendfile,
            min_insync_replicas: self.min_insync_replicas,
            group_min_session_timeout_ms: self.group_min_session_timeout_ms,
            group_max_session_timeout_ms: self.group_max_session_timeout_ms,
            group_initial_rebalance_delay_ms: self.group_initial_rebalance_delay_ms,
            offsets_retention_minutes: self.offsets_retention_minutes,
            offsets_topic_segment_bytes: self.offsets_topic_segment_bytes,
            controller_listen: self.controller_listen.clone(),
            controller_quorum_voters: self.controller_quorum_voters.clone(),
            process_roles: self.process_roles.clone(),
            rack: self.rack.clone(),
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
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("RUNNEL_LOG").unwrap_or_else(|_| "info,openraft=warn".into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        // Escape codes only for a person at a terminal, never into files or `docker logs`.
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().with_current_span(false).init(),
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Serve(a)) => *a,
        Some(Command::DevCluster(d)) => return dev_cluster(d),
        None => cli.serve,
    };
    init_logging(args.log_format);
    let mut layers = Vec::new();
    if let Some(path) = &args.config {
        layers.push(ConfigOverrides::from_yaml_file(path)?);
    }
    layers.push(args.overrides());
    let config = match BrokerConfig::build(&layers) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("runnel: {e}");
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
        let broker = Broker::start(config).await.context("starting runnel")?;
        // The ready line: harnesses wait for it and read the bound address from it.
        println!("runnel ready: listening on {}", broker.local_addr());
        if let Some(http) = broker.http_addr() {
            // After the ready line, and without its words: harnesses match "listening on".
            println!("runnel http: serving on {http}");
        }
        std::io::stdout().flush().ok();
        wait_for_signal().await;
        tracing::info!("shutting down");
        broker.shutdown().await;
        Ok(())
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
