//! Broker configuration.
//!
//! Precedence, lowest first: built-in defaults (a working single-node dev broker), a YAML
//! file (`--config`), `RUNNEL_*` environment variables, command-line flags. The merged
//! result is validated once at start; an invalid value is refused with a message that
//! names the field. `config/runnel.yaml` documents every option.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid value for `{field}`: {reason}")]
    Invalid { field: &'static str, reason: String },
}

impl ConfigError {
    /// The option an `Invalid` error is about.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            ConfigError::Invalid { field, .. } => Some(field),
            _ => None,
        }
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { field, reason: reason.into() }
}

/// How appended data reaches the disk before a produce is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlushMode {
    /// Kafka's model: acknowledge once the data is in the page cache; fsync every
    /// `flush_interval_messages` / `flush_interval_ms`. Survives a process crash, not a
    /// power loss of unflushed data.
    Interval,
    /// fsync (fdatasync) before acknowledging acks=1/all; concurrent producers share one
    /// fsync (group commit). Survives power loss.
    Fsync,
}

impl std::str::FromStr for FlushMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "interval" => Ok(FlushMode::Interval),
            "fsync" => Ok(FlushMode::Fsync),
            other => Err(format!("expected `interval` or `fsync`, got `{other}`")),
        }
    }
}

/// Where the HTTP listener binds unless told otherwise.
pub const DEFAULT_HTTP_LISTEN: &str = "127.0.0.1:9644";

/// The one `replica.selector.class` there is besides none (Kafka's class name).
pub const RACK_AWARE_REPLICA_SELECTOR: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";

/// Values of `http_listen` that turn the HTTP listener off.
const HTTP_OFF: [&str; 2] = ["off", ""];

/// The validated broker configuration.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub listen: String,
    /// `host:port` clients are told to connect to; `None` = the bound listener address.
    pub advertised_listener: Option<String>,
    /// `ip:port` of a second Kafka listener for the other brokers (Kafka: the listener
    /// named by `inter.broker.listener.name`); `None` = brokers use the client listener.
    pub inter_broker_listen: Option<String>,
    /// `host:port` other brokers are told to connect to on the inter-broker listener;
    /// `None` = its bound address.
    pub inter_broker_advertised_listener: Option<String>,
    /// `ip:port` of the HTTP listener (`/health`, `/ready`, `/metrics`); `None` = off.
    pub http_listen: Option<String>,
    /// An OpenTelemetry collector's OTLP/HTTP endpoint (`http://host[:port][/path]`) that
    /// produce spans are sent to; `None` = no tracing export.
    pub otlp_traces_endpoint: Option<String>,
    /// Where the metadata log (and the data dir lock) lives; also a log directory. With
    /// `log_dirs` unset it is the only log directory, as before `log_dirs` existed.
    pub data_dir: PathBuf,
    /// Kafka's `log.dirs`: the directories partition logs are spread over (a new
    /// partition goes to the one holding the fewest). Empty = `data_dir` alone. When set
    /// it includes `data_dir`, which defaults to its first entry (as Kafka's
    /// `metadata.log.dir` defaults to the first of `log.dirs`).
    pub log_dirs: Vec<PathBuf>,
    pub cluster_id: Option<String>,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    /// Move leadership back to preferred replicas every
    /// `leader_imbalance_check_interval_seconds` (Kafka: auto.leader.rebalance.enable).
    pub auto_leader_rebalance_enable: bool,
    pub leader_imbalance_check_interval_seconds: u64,
    /// A broker that sent no heartbeat for this long is fenced by the controller
    /// (Kafka: broker.session.timeout.ms).
    pub broker_session_timeout_ms: u64,
    /// How often a broker heartbeats the controller (Kafka: broker.heartbeat.interval.ms).
    pub broker_heartbeat_interval_ms: u64,
    /// A follower that has not caught up with the leader for this long leaves the ISR
    /// (Kafka: replica.lag.time.max.ms).
    pub replica_lag_time_max_ms: u64,
    pub auto_create_topics: bool,
    pub log_retention_ms: i64,
    pub log_retention_bytes: i64,
    pub log_segment_bytes: u64,
    pub log_segment_ms: i64,
    pub log_retention_check_interval_ms: u64,
    pub log_cleaner_backoff_ms: u64,
    pub flush_mode: FlushMode,
    pub flush_interval_messages: i64,
    pub flush_interval_ms: i64,
    pub message_max_bytes: usize,
    pub socket_request_max_bytes: usize,
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    pub connections_max_idle_ms: u64,
    pub request_read_timeout_ms: u64,
    pub queued_max_request_bytes: i64,
    /// Segment `.log` descriptors held open at once, by all partitions together; 0 =
    /// half the open-file soft limit at start.
    pub max_open_log_files: usize,
    /// Send Fetch record bytes with `sendfile(2)` instead of copying them from the page
    /// cache into the response first (both read them outside the partition's lock).
    pub fetch_sendfile: bool,
    /// KIP-714: the largest client telemetry push accepted, compressed or not (Kafka:
    /// telemetry.max.bytes).
    pub telemetry_max_bytes: i32,
    /// KIP-227: incremental fetch sessions cached at once (Kafka:
    /// max.incremental.fetch.session.cache.slots); 0 = every Fetch is a full one.
    pub max_incremental_fetch_session_cache_slots: usize,
    pub min_insync_replicas: i32,
    pub group_min_session_timeout_ms: i32,
    pub group_max_session_timeout_ms: i32,
    pub group_initial_rebalance_delay_ms: i32,
    pub offsets_retention_minutes: i64,
    pub offsets_topic_segment_bytes: u64,
    /// Partitions of `__consumer_offsets` when it is created (Kafka:
    /// offsets.topic.num.partitions); an existing topic keeps its own count.
    pub offsets_topic_num_partitions: i32,
    /// Replicas of each `__consumer_offsets` partition when it is created, capped at the
    /// live brokers (Kafka: offsets.topic.replication.factor).
    pub offsets_topic_replication_factor: i16,
    /// `host:port` of this node's controller listener (Kafka: the CONTROLLER listener);
    /// `None` = its address in `controller_quorum_voters`, or no listener for a single
    /// voter.
    pub controller_listen: Option<String>,
    /// Every voter of the controller quorum, `(node id, host:port)` (Kafka:
    /// controller.quorum.voters); empty = this node alone.
    pub controller_quorum_voters: Vec<(i32, String)>,
    /// Kafka's process.roles: `broker,controller` (a voter of the controller quorum) or
    /// `broker` (follows the metadata log as a Raft learner, forwards every change).
    pub process_roles: String,
    /// Rack of this broker (Kafka: broker.rack), for rack-aware replica placement.
    pub rack: Option<String>,
    /// KIP-392 (Kafka: replica.selector.class): whether a leader sends consumers that name
    /// their rack to an in-sync follower in that rack. Off by default, as in Kafka.
    pub rack_aware_replica_selector: bool,
}

impl BrokerConfig {
    /// Where this node's controller listener binds, if it has one.
    /// The log directories, the data dir's first when `log_dirs` is unset.
    pub fn log_dirs(&self) -> Vec<PathBuf> {
        if self.log_dirs.is_empty() {
            vec![self.data_dir.clone()]
        } else {
            self.log_dirs.clone()
        }
    }

    pub fn controller_listen_addr(&self) -> Option<String> {
        self.controller_listen.clone().or_else(|| {
            if self.controller_quorum_voters.len() > 1 {
                self.controller_quorum_voters.iter().find(|(id, _)| *id == self.node_id).map(|(_, a)| a.clone())
            } else {
                None
            }
        })
    }
}

/// Parse Kafka's `log.dirs` form: `/a,/b,/c`. Empty entries and repeats are refused.
pub fn parse_log_dirs(s: &str) -> Result<Vec<PathBuf>, String> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(format!("`{s}` has an empty entry"));
        }
        let dir = PathBuf::from(part);
        if dirs.contains(&dir) {
            return Err(format!("`{part}` is listed twice"));
        }
        dirs.push(dir);
    }
    Ok(dirs)
}

/// Parse Kafka's `controller.quorum.voters` form: `1@host:port,2@host:port`.
pub fn parse_voters(s: &str) -> Result<Vec<(i32, String)>, String> {
    let mut voters: Vec<(i32, String)> = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, addr) = part.split_once('@').ok_or_else(|| format!("`{part}` is not id@host:port"))?;
        let id: i32 = id.parse().map_err(|_| format!("`{id}` in `{part}` is not a node id"))?;
        let port_ok =
            addr.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p != 0));
        if id < 0 || !port_ok {
            return Err(format!("`{part}` is not id@host:port with id >= 0 and a port > 0"));
        }
        if voters.iter().any(|(v, _)| *v == id) {
            return Err(format!("node id {id} is listed twice"));
        }
        voters.push((id, addr.to_owned()));
    }
    Ok(voters)
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            node_id: 1,
            listen: "127.0.0.1:9092".into(),
            advertised_listener: None,
            inter_broker_listen: None,
            inter_broker_advertised_listener: None,
            http_listen: Some(DEFAULT_HTTP_LISTEN.into()),
            otlp_traces_endpoint: None,
            data_dir: PathBuf::from("./runnel-data"),
            log_dirs: Vec::new(),
            cluster_id: None,
            num_partitions: 1,
            default_replication_factor: 1,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_seconds: 300,
            broker_session_timeout_ms: 9_000,
            broker_heartbeat_interval_ms: 2_000,
            replica_lag_time_max_ms: 30_000,
            auto_create_topics: true,
            log_retention_ms: 7 * 24 * 3600 * 1000,
            log_retention_bytes: -1,
            log_segment_bytes: 1 << 30,
            log_segment_ms: 7 * 24 * 3600 * 1000,
            log_retention_check_interval_ms: 300_000,
            log_cleaner_backoff_ms: 15_000,
            flush_mode: FlushMode::Interval,
            flush_interval_messages: i64::MAX,
            flush_interval_ms: i64::MAX,
            message_max_bytes: 1_048_588,
            socket_request_max_bytes: 104_857_600,
            max_connections: 1024,
            max_connections_per_ip: i32::MAX as usize,
            connections_max_idle_ms: 600_000,
            request_read_timeout_ms: 30_000,
            queued_max_request_bytes: 512 * 1024 * 1024,
            max_open_log_files: 0,
            telemetry_max_bytes: 1_048_576,
            max_incremental_fetch_session_cache_slots: 1000,
            fetch_sendfile: false,
            min_insync_replicas: 1,
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
            group_initial_rebalance_delay_ms: 0,
            offsets_retention_minutes: 10_080,
            offsets_topic_segment_bytes: 100 * 1024 * 1024,
            offsets_topic_num_partitions: 50,
            offsets_topic_replication_factor: 3,
            controller_listen: None,
            controller_quorum_voters: Vec::new(),
            process_roles: "broker,controller".into(),
            rack: None,
            rack_aware_replica_selector: false,
        }
    }
}

/// Every option, each optional: the shape of both the YAML file and the overrides that
/// come from the environment and flags.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigOverrides {
    pub node_id: Option<i32>,
    pub listen: Option<String>,
    pub advertised_listener: Option<String>,
    pub inter_broker_listen: Option<String>,
    pub inter_broker_advertised_listener: Option<String>,
    /// `ip:port`, or `off` / empty for no HTTP listener.
    pub http_listen: Option<String>,
    /// `http://host[:port][/path]`, or empty for none.
    pub otlp_traces_endpoint: Option<String>,
    pub data_dir: Option<PathBuf>,
    /// Comma-separated directories (Kafka's `log.dirs`).
    pub log_dirs: Option<String>,
    pub cluster_id: Option<String>,
    pub num_partitions: Option<i32>,
    pub default_replication_factor: Option<i16>,
    pub auto_leader_rebalance_enable: Option<bool>,
    pub leader_imbalance_check_interval_seconds: Option<u64>,
    pub broker_session_timeout_ms: Option<u64>,
    pub broker_heartbeat_interval_ms: Option<u64>,
    pub replica_lag_time_max_ms: Option<u64>,
    pub auto_create_topics: Option<bool>,
    pub log_retention_ms: Option<i64>,
    pub log_retention_bytes: Option<i64>,
    pub log_segment_bytes: Option<u64>,
    pub log_segment_ms: Option<i64>,
    pub log_retention_check_interval_ms: Option<u64>,
    pub log_cleaner_backoff_ms: Option<u64>,
    pub flush_mode: Option<FlushMode>,
    pub flush_interval_messages: Option<i64>,
    pub flush_interval_ms: Option<i64>,
    pub message_max_bytes: Option<usize>,
    pub socket_request_max_bytes: Option<usize>,
    pub max_connections: Option<usize>,
    pub max_connections_per_ip: Option<usize>,
    pub connections_max_idle_ms: Option<u64>,
    pub request_read_timeout_ms: Option<u64>,
    pub queued_max_request_bytes: Option<i64>,
    pub max_open_log_files: Option<usize>,
    pub fetch_sendfile: Option<bool>,
    pub telemetry_max_bytes: Option<i32>,
    pub max_incremental_fetch_session_cache_slots: Option<usize>,
    pub min_insync_replicas: Option<i32>,
    pub group_min_session_timeout_ms: Option<i32>,
    pub group_max_session_timeout_ms: Option<i32>,
    pub group_initial_rebalance_delay_ms: Option<i32>,
    pub offsets_retention_minutes: Option<i64>,
    pub offsets_topic_segment_bytes: Option<u64>,
    pub offsets_topic_num_partitions: Option<i32>,
    pub offsets_topic_replication_factor: Option<i16>,
    pub controller_listen: Option<String>,
    /// `1@host:port,2@host:port,...`
    pub controller_quorum_voters: Option<String>,
    pub process_roles: Option<String>,
    pub rack: Option<String>,
    /// Kafka's `replica.selector.class`: empty (the leader serves every consumer) or
    /// `org.apache.kafka.common.replica.RackAwareReplicaSelector`.
    pub replica_selector_class: Option<String>,
}

macro_rules! apply_overrides {
    ($cfg:expr, $o:expr, [$($field:ident),*]) => {
        $( if let Some(v) = $o.$field.clone() { $cfg.$field = v; } )*
    };
}

impl ConfigOverrides {
    pub fn from_yaml_file(path: &Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        Self::from_yaml_str(&text).map_err(|message| ConfigError::Parse { path: path.to_owned(), message })
    }

    pub fn from_yaml_str(text: &str) -> Result<Self, String> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        serde_saphyr::from_str(text).map_err(|e| e.to_string())
    }
}

impl BrokerConfig {
    /// Layer `overrides` (applied in order) over the defaults and validate the result.
    pub fn build(layers: &[ConfigOverrides]) -> Result<Self, ConfigError> {
        let mut cfg = BrokerConfig::default();
        let data_dir_given = layers.iter().any(|o| o.data_dir.is_some());
        for o in layers {
            if let Some(v) = &o.log_dirs {
                cfg.log_dirs = parse_log_dirs(v).map_err(|reason| invalid("log_dirs", reason))?;
                if !data_dir_given {
                    if let Some(first) = cfg.log_dirs.first() {
                        cfg.data_dir = first.clone();
                    }
                }
            }
            apply_overrides!(
                cfg,
                o,
                [
                    node_id,
                    listen,
                    data_dir,
                    num_partitions,
                    default_replication_factor,
                    auto_leader_rebalance_enable,
                    leader_imbalance_check_interval_seconds,
                    broker_session_timeout_ms,
                    broker_heartbeat_interval_ms,
                    replica_lag_time_max_ms,
                    auto_create_topics,
                    log_retention_ms,
                    log_retention_bytes,
                    log_segment_bytes,
                    log_segment_ms,
                    log_retention_check_interval_ms,
                    log_cleaner_backoff_ms,
                    flush_mode,
                    flush_interval_messages,
                    flush_interval_ms,
                    message_max_bytes,
                    socket_request_max_bytes,
                    max_connections,
                    max_connections_per_ip,
                    connections_max_idle_ms,
                    request_read_timeout_ms,
                    queued_max_request_bytes,
                    max_open_log_files,
                    fetch_sendfile,
                    telemetry_max_bytes,
                    max_incremental_fetch_session_cache_slots,
                    min_insync_replicas,
                    group_min_session_timeout_ms,
                    group_max_session_timeout_ms,
                    group_initial_rebalance_delay_ms,
                    offsets_retention_minutes,
                    offsets_topic_segment_bytes,
                    offsets_topic_num_partitions,
                    offsets_topic_replication_factor,
                    process_roles
                ]
            );
            if o.controller_listen.is_some() {
                cfg.controller_listen = o.controller_listen.clone();
            }
            if o.rack.is_some() {
                cfg.rack = o.rack.clone();
            }
            if let Some(v) = &o.replica_selector_class {
                cfg.rack_aware_replica_selector = match v.trim() {
                    "" => false,
                    RACK_AWARE_REPLICA_SELECTOR => true,
                    other => {
                        return Err(invalid(
                            "replica_selector_class",
                            format!("`{other}` is not empty or `{RACK_AWARE_REPLICA_SELECTOR}`"),
                        ))
                    }
                };
            }
            if let Some(v) = &o.controller_quorum_voters {
                cfg.controller_quorum_voters =
                    parse_voters(v).map_err(|reason| invalid("controller_quorum_voters", reason))?;
            }
            if o.advertised_listener.is_some() {
                cfg.advertised_listener = o.advertised_listener.clone();
            }
            if o.inter_broker_listen.is_some() {
                cfg.inter_broker_listen = o.inter_broker_listen.clone();
            }
            if o.inter_broker_advertised_listener.is_some() {
                cfg.inter_broker_advertised_listener = o.inter_broker_advertised_listener.clone();
            }
            if let Some(v) = &o.http_listen {
                cfg.http_listen = (!HTTP_OFF.contains(&v.trim())).then(|| v.trim().to_owned());
            }
            if let Some(v) = &o.otlp_traces_endpoint {
                cfg.otlp_traces_endpoint = (!v.trim().is_empty()).then(|| v.trim().to_owned());
            }
            if o.cluster_id.is_some() {
                cfg.cluster_id = o.cluster_id.clone();
            }
        }
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.node_id < 0 {
            return Err(invalid("node_id", "must be >= 0"));
        }
        self.listen
            .parse::<SocketAddr>()
            .map_err(|e| invalid("listen", format!("`{}` is not ip:port ({e})", self.listen)))?;
        if let Some(http) = &self.http_listen {
            http.parse::<SocketAddr>()
                .map_err(|e| invalid("http_listen", format!("`{http}` is not ip:port or `off` ({e})")))?;
        }
        if let Some(url) = &self.otlp_traces_endpoint {
            crate::traces::OtlpEndpoint::parse(url).map_err(|reason| invalid("otlp_traces_endpoint", reason))?;
        }
        if let Some(adv) = &self.advertised_listener {
            let ok = adv.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if !ok {
                return Err(invalid("advertised_listener", format!("`{adv}` is not host:port")));
            }
        }
        if let Some(addr) = &self.inter_broker_listen {
            addr.parse::<SocketAddr>()
                .map_err(|e| invalid("inter_broker_listen", format!("`{addr}` is not ip:port ({e})")))?;
        }
        if let Some(adv) = &self.inter_broker_advertised_listener {
            let ok = adv.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if !ok {
                return Err(invalid("inter_broker_advertised_listener", format!("`{adv}` is not host:port")));
            }
            if self.inter_broker_listen.is_none() {
                return Err(invalid(
                    "inter_broker_advertised_listener",
                    "needs inter_broker_listen: it is the address of that listener",
                ));
            }
        }
        if self.data_dir.as_os_str().is_empty() {
            return Err(invalid("data_dir", "must not be empty"));
        }
        if !self.log_dirs.is_empty() && !self.log_dirs.contains(&self.data_dir) {
            let reason = format!(
                "must include data_dir `{}` (it holds the metadata log; leave data_dir unset to use the first log dir)",
                self.data_dir.display()
            );
            return Err(invalid("log_dirs", reason));
        }
        if self.num_partitions < 1 {
            return Err(invalid("num_partitions", "must be >= 1"));
        }
        if self.leader_imbalance_check_interval_seconds < 1 {
            return Err(invalid("leader_imbalance_check_interval_seconds", "must be >= 1"));
        }
        if self.broker_heartbeat_interval_ms < 1 {
            return Err(invalid("broker_heartbeat_interval_ms", "must be >= 1"));
        }
        if self.broker_session_timeout_ms <= self.broker_heartbeat_interval_ms {
            return Err(invalid(
                "broker_session_timeout_ms",
                "must be longer than broker_heartbeat_interval_ms (a broker would be fenced between two heartbeats)",
            ));
        }
        if self.replica_lag_time_max_ms < 1 {
            return Err(invalid("replica_lag_time_max_ms", "must be >= 1"));
        }
        if self.default_replication_factor < 1 {
            return Err(invalid("default_replication_factor", "must be >= 1"));
        }
        let mut roles: Vec<&str> = self.process_roles.split(',').map(str::trim).collect();
        roles.sort_unstable();
        let is_voter = self.controller_quorum_voters.is_empty()
            || self.controller_quorum_voters.iter().any(|(id, _)| *id == self.node_id);
        match roles.as_slice() {
            ["broker", "controller"] if !is_voter => {
                let reason = format!(
                    "node_id {} is not among the voters; a node that is not a voter has process_roles `broker`",
                    self.node_id
                );
                return Err(invalid("controller_quorum_voters", reason));
            }
            ["broker", "controller"] => {}
            ["broker"] if is_voter => {
                return Err(invalid(
                    "process_roles",
                    "`broker` alone needs controller_quorum_voters that do not include this node_id",
                ))
            }
            ["broker"] if self.controller_listen.is_none() => {
                return Err(invalid(
                    "controller_listen",
                    "a broker-only node needs a controller listener (the quorum replicates metadata to it)",
                ))
            }
            ["broker"] => {}
            ["controller"] => {
                return Err(invalid(
                    "process_roles",
                    "`controller` alone is not supported yet: a controller node is also a broker (`broker,controller`)",
                ))
            }
            _ => {
                return Err(invalid(
                    "process_roles",
                    format!("`{}` is not `broker`, `controller` or `broker,controller`", self.process_roles),
                ))
            }
        }
        if let Some(addr) = &self.controller_listen {
            let ok = addr.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if !ok {
                return Err(invalid("controller_listen", format!("`{addr}` is not host:port")));
            }
        }
        if let Some(rack) = &self.rack {
            if rack.is_empty() {
                return Err(invalid("rack", "must not be empty when set"));
            }
        }
        if self.log_retention_ms < -1 {
            return Err(invalid("log_retention_ms", "must be >= -1 (-1 = keep forever)"));
        }
        if self.log_retention_bytes < -1 {
            return Err(invalid("log_retention_bytes", "must be >= -1 (-1 = unlimited)"));
        }
        if self.log_segment_bytes < 14 {
            return Err(invalid("log_segment_bytes", "must be >= 14"));
        }
        if self.log_segment_ms < 1 {
            return Err(invalid("log_segment_ms", "must be >= 1"));
        }
        if self.flush_interval_messages < 1 {
            return Err(invalid("flush_interval_messages", "must be >= 1"));
        }
        if self.flush_interval_ms < 0 {
            return Err(invalid("flush_interval_ms", "must be >= 0"));
        }
        if self.message_max_bytes < 64 {
            return Err(invalid("message_max_bytes", "must be >= 64"));
        }
        if self.socket_request_max_bytes < 1024 || self.socket_request_max_bytes > i32::MAX as usize {
            return Err(invalid("socket_request_max_bytes", "must be between 1024 and 2147483647"));
        }
        if self.max_connections < 1 {
            return Err(invalid("max_connections", "must be >= 1"));
        }
        if self.max_connections_per_ip < 1 {
            return Err(invalid("max_connections_per_ip", "must be >= 1"));
        }
        if self.connections_max_idle_ms < 1 {
            return Err(invalid("connections_max_idle_ms", "must be >= 1"));
        }
        if self.telemetry_max_bytes < 1 {
            return Err(invalid("telemetry_max_bytes", "must be >= 1"));
        }
        if self.request_read_timeout_ms < 1 {
            return Err(invalid("request_read_timeout_ms", "must be >= 1"));
        }
        if self.queued_max_request_bytes != -1 && self.queued_max_request_bytes < self.socket_request_max_bytes as i64 {
            return Err(invalid(
                "queued_max_request_bytes",
                "must be -1 (unbounded) or at least socket_request_max_bytes, so that any request fits",
            ));
        }
        if self.min_insync_replicas < 1 {
            return Err(invalid("min_insync_replicas", "must be >= 1"));
        }
        if self.group_min_session_timeout_ms < 1 {
            return Err(invalid("group_min_session_timeout_ms", "must be >= 1"));
        }
        if self.group_max_session_timeout_ms < self.group_min_session_timeout_ms {
            return Err(invalid("group_max_session_timeout_ms", "must be >= group_min_session_timeout_ms"));
        }
        if self.group_initial_rebalance_delay_ms < 0 {
            return Err(invalid("group_initial_rebalance_delay_ms", "must be >= 0"));
        }
        if self.offsets_retention_minutes < 1 {
            return Err(invalid("offsets_retention_minutes", "must be >= 1"));
        }
        if !(14..=i32::MAX as u64).contains(&self.offsets_topic_segment_bytes) {
            return Err(invalid("offsets_topic_segment_bytes", "must be between 14 and 2147483647"));
        }
        if self.offsets_topic_num_partitions < 1 {
            return Err(invalid("offsets_topic_num_partitions", "must be >= 1"));
        }
        if self.offsets_topic_replication_factor < 1 {
            return Err(invalid("offsets_topic_replication_factor", "must be >= 1"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        let cfg = BrokerConfig::build(&[]).unwrap();
        assert_eq!(cfg.listen, "127.0.0.1:9092");
        assert_eq!(cfg.data_dir, PathBuf::from("./runnel-data"));
    }

    #[test]
    fn later_layers_win() {
        let file = ConfigOverrides::from_yaml_str("num_partitions: 3\nlisten: 127.0.0.1:1234\n").unwrap();
        let flags = ConfigOverrides { num_partitions: Some(5), ..Default::default() };
        let cfg = BrokerConfig::build(&[file, flags]).unwrap();
        assert_eq!(cfg.num_partitions, 5);
        assert_eq!(cfg.listen, "127.0.0.1:1234");
    }

    #[test]
    fn invalid_values_name_the_field() {
        let o = ConfigOverrides { num_partitions: Some(0), ..Default::default() };
        let err = BrokerConfig::build(&[o]).unwrap_err().to_string();
        assert!(err.contains("num_partitions"), "{err}");
        let o = ConfigOverrides { listen: Some("nonsense".into()), ..Default::default() };
        let err = BrokerConfig::build(&[o]).unwrap_err().to_string();
        assert!(err.contains("listen"), "{err}");
        // A session no longer than the heartbeat interval would fence between heartbeats.
        let o = ConfigOverrides {
            broker_session_timeout_ms: Some(2_000),
            broker_heartbeat_interval_ms: Some(2_000),
            ..Default::default()
        };
        let err = BrokerConfig::build(&[o]).unwrap_err().to_string();
        assert!(err.contains("broker_session_timeout_ms"), "{err}");
        let o = ConfigOverrides { replica_lag_time_max_ms: Some(0), ..Default::default() };
        let err = BrokerConfig::build(&[o]).unwrap_err().to_string();
        assert!(err.contains("replica_lag_time_max_ms"), "{err}");
        let o = ConfigOverrides {
            broker_session_timeout_ms: Some(1_500),
            broker_heartbeat_interval_ms: Some(200),
            replica_lag_time_max_ms: Some(5_000),
            ..Default::default()
        };
        let c = BrokerConfig::build(&[o]).unwrap();
        assert_eq!(
            (c.broker_session_timeout_ms, c.broker_heartbeat_interval_ms, c.replica_lag_time_max_ms),
            (1_500, 200, 5_000)
        );
    }

    #[test]
    fn the_otlp_endpoint_is_off_by_default_and_validated() {
        assert_eq!(BrokerConfig::build(&[]).unwrap().otlp_traces_endpoint, None);
        let o = ConfigOverrides::from_yaml_str("otlp_traces_endpoint: http://127.0.0.1:4318\n").unwrap();
        assert_eq!(BrokerConfig::build(&[o]).unwrap().otlp_traces_endpoint.as_deref(), Some("http://127.0.0.1:4318"));
        let cleared = ConfigOverrides { otlp_traces_endpoint: Some(" ".into()), ..Default::default() };
        let o = ConfigOverrides::from_yaml_str("otlp_traces_endpoint: http://c\n").unwrap();
        assert_eq!(BrokerConfig::build(&[o, cleared]).unwrap().otlp_traces_endpoint, None);
        let o = ConfigOverrides { otlp_traces_endpoint: Some("https://c:4318".into()), ..Default::default() };
        let err = BrokerConfig::build(&[o]).unwrap_err().to_string();
        assert!(err.contains("otlp_traces_endpoint") && err.contains("https"), "{err}");
    }

    #[test]
    fn the_replica_selector_is_kafkas_rack_aware_one_or_none() {
        assert!(!BrokerConfig::default().rack_aware_replica_selector);
        let yaml = format!("replica_selector_class: {RACK_AWARE_REPLICA_SELECTOR}\n");
        let cfg = BrokerConfig::build(&[ConfigOverrides::from_yaml_str(&yaml).unwrap()]).unwrap();
        assert!(cfg.rack_aware_replica_selector);
        let off = ConfigOverrides { replica_selector_class: Some(String::new()), ..Default::default() };
        assert!(
            !BrokerConfig::build(&[ConfigOverrides::from_yaml_str(&yaml).unwrap(), off])
                .unwrap()
                .rack_aware_replica_selector
        );
        let o = ConfigOverrides { replica_selector_class: Some("com.example.Nearest".into()), ..Default::default() };
        let err = BrokerConfig::build(&[o]).unwrap_err().to_string();
        assert!(err.contains("replica_selector_class") && err.contains("com.example.Nearest"), "{err}");
    }

    #[test]
    fn offsets_topic_settings_default_to_kafkas_and_refuse_zero() {
        let cfg = BrokerConfig::build(&[]).unwrap();
        assert_eq!((cfg.offsets_topic_num_partitions, cfg.offsets_topic_replication_factor), (50, 3));
        let file = ConfigOverrides::from_yaml_str("offsets_topic_num_partitions: 1\n").unwrap();
        assert_eq!(BrokerConfig::build(&[file]).unwrap().offsets_topic_num_partitions, 1);
        for o in [
            ConfigOverrides { offsets_topic_num_partitions: Some(0), ..Default::default() },
            ConfigOverrides { offsets_topic_replication_factor: Some(0), ..Default::default() },
        ] {
            let err = BrokerConfig::build(&[o]).unwrap_err();
            assert!(err.field().is_some_and(|f| f.starts_with("offsets_topic_")), "{err}");
        }
    }

    #[test]
    fn unknown_yaml_keys_are_refused() {
        let err = ConfigOverrides::from_yaml_str("num_partitons: 3\n").unwrap_err();
        assert!(err.contains("num_partitons"), "{err}");
    }

    #[test]
    fn quorum_settings_parse_and_validate() {
        let o = ConfigOverrides::from_yaml_str(
            "node_id: 2\ncontroller_quorum_voters: \"1@a:9093,2@b:9093,3@c:9093\"\nrack: r1\n",
        )
        .unwrap();
        let cfg = BrokerConfig::build(&[o]).unwrap();
        assert_eq!(cfg.controller_quorum_voters.len(), 3);
        assert_eq!(cfg.controller_listen_addr().as_deref(), Some("b:9093"));
        assert_eq!(cfg.rack.as_deref(), Some("r1"));
        let bad = |o: ConfigOverrides, field: &str| {
            let err = BrokerConfig::build(&[o]).unwrap_err().to_string();
            assert!(err.contains(field), "{err}");
        };
        bad(
            ConfigOverrides { controller_quorum_voters: Some("1@a".into()), ..Default::default() },
            "controller_quorum_voters",
        );
        bad(
            ConfigOverrides { controller_quorum_voters: Some("1@a:1,1@b:2".into()), ..Default::default() },
            "controller_quorum_voters",
        );
        bad(
            ConfigOverrides { controller_quorum_voters: Some("2@a:1,3@b:2".into()), ..Default::default() },
            "controller_quorum_voters",
        );
        bad(ConfigOverrides { process_roles: Some("broker".into()), ..Default::default() }, "process_roles");
        bad(ConfigOverrides { process_roles: Some("chef".into()), ..Default::default() }, "process_roles");
        let ok = ConfigOverrides { process_roles: Some("controller,broker".into()), ..Default::default() };
        assert!(BrokerConfig::build(&[ok]).is_ok());
    }

    #[test]
    fn http_listener_is_on_by_default_and_can_be_turned_off() {
        assert_eq!(BrokerConfig::build(&[]).unwrap().http_listen.as_deref(), Some("127.0.0.1:9644"));
        for off in ["off", "", " off "] {
            let o = ConfigOverrides { http_listen: Some(off.into()), ..Default::default() };
            assert_eq!(BrokerConfig::build(&[o]).unwrap().http_listen, None, "{off:?}");
        }
        let o = ConfigOverrides::from_yaml_str("http_listen: 0.0.0.0:8080\n").unwrap();
        assert_eq!(BrokerConfig::build(&[o]).unwrap().http_listen.as_deref(), Some("0.0.0.0:8080"));
        let o = ConfigOverrides { http_listen: Some("localhost".into()), ..Default::default() };
        let err = BrokerConfig::build(&[o]).unwrap_err().to_string();
        assert!(err.contains("http_listen"), "{err}");
    }

    #[test]
    fn the_inter_broker_listener_is_off_by_default_and_validated() {
        let cfg = BrokerConfig::build(&[]).unwrap();
        assert_eq!((cfg.inter_broker_listen, cfg.inter_broker_advertised_listener), (None, None));
        let o = ConfigOverrides::from_yaml_str(
            "inter_broker_listen: 0.0.0.0:9094\ninter_broker_advertised_listener: runnel-1:9094\n",
        )
        .unwrap();
        let cfg = BrokerConfig::build(&[o]).unwrap();
        assert_eq!(cfg.inter_broker_listen.as_deref(), Some("0.0.0.0:9094"));
        assert_eq!(cfg.inter_broker_advertised_listener.as_deref(), Some("runnel-1:9094"));
        let bad = |o: ConfigOverrides, field: &str| {
            let err = BrokerConfig::build(&[o]).unwrap_err().to_string();
            assert!(err.contains(field), "{err}");
        };
        bad(
            ConfigOverrides { inter_broker_listen: Some("runnel-1:9094".into()), ..Default::default() },
            "inter_broker_listen",
        );
        let adv = |a: &str| ConfigOverrides {
            inter_broker_listen: Some("127.0.0.1:0".into()),
            inter_broker_advertised_listener: Some(a.into()),
            ..Default::default()
        };
        bad(adv("runnel-1"), "inter_broker_advertised_listener");
        assert!(BrokerConfig::build(&[adv("runnel-1:0")]).is_ok());
        let without_listener =
            ConfigOverrides { inter_broker_advertised_listener: Some("runnel-1:9094".into()), ..Default::default() };
        bad(without_listener, "inter_broker_advertised_listener");
    }

    #[test]
    fn log_dirs_default_to_the_data_dir_and_include_it_when_set() {
        let cfg = BrokerConfig::build(&[]).unwrap();
        assert_eq!(cfg.log_dirs(), vec![PathBuf::from("./runnel-data")]);
        let o = ConfigOverrides::from_yaml_str("log_dirs: /a, /b\n").unwrap();
        let cfg = BrokerConfig::build(&[o]).unwrap();
        assert_eq!(cfg.log_dirs(), vec![PathBuf::from("/a"), PathBuf::from("/b")]);
        assert_eq!(cfg.data_dir, PathBuf::from("/a"), "the metadata goes to the first log dir");
        let o = ConfigOverrides { data_dir: Some("/b".into()), log_dirs: Some("/a,/b".into()), ..Default::default() };
        assert_eq!(BrokerConfig::build(&[o]).unwrap().data_dir, PathBuf::from("/b"));
        let bad = |o: ConfigOverrides| {
            let err = BrokerConfig::build(&[o]).unwrap_err();
            assert_eq!(err.field(), Some("log_dirs"), "{err}");
        };
        bad(ConfigOverrides { data_dir: Some("/c".into()), log_dirs: Some("/a,/b".into()), ..Default::default() });
        bad(ConfigOverrides { log_dirs: Some("/a,,/b".into()), ..Default::default() });
        bad(ConfigOverrides { log_dirs: Some("/a,/a".into()), ..Default::default() });
        bad(ConfigOverrides { log_dirs: Some("".into()), ..Default::default() });
    }

    #[test]
    fn flush_mode_parses() {
        let o = ConfigOverrides::from_yaml_str("flush_mode: fsync\n").unwrap();
        assert_eq!(o.flush_mode, Some(FlushMode::Fsync));
        assert!(ConfigOverrides::from_yaml_str("flush_mode: sometimes\n").is_err());
    }
}

#[cfg(test)]
mod documented_file_tests {
    use super::*;

    /// config/runnel.yaml documents every option with its default: it must parse, and
    /// parse to exactly the defaults.
    #[test]
    fn documented_config_file_is_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/runnel.yaml");
        let o = ConfigOverrides::from_yaml_file(&path).unwrap();
        let from_file = BrokerConfig::build(&[o]).unwrap();
        let defaults = BrokerConfig::default();
        assert_eq!(format!("{from_file:?}"), format!("{defaults:?}"));
    }
}
