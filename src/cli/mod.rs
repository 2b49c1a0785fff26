//! The admin CLI: `runnel topic|group|cluster …`, a Kafka client of any broker (runnel or
//! Apache Kafka), as `rpk` is for Redpanda. It sits beside `main`, not inside the broker:
//! it talks to brokers only over the wire, through kafka-protocol's messages, and reuses
//! the storage layer's batch parsing and bounded decompression to read what it fetches.
//!
//! * `client.rs`: one connection with ApiVersions negotiation, deadlines, bounded frames.
//! * `admin.rs`: the cluster view: bootstrap, metadata, connections by node id, group
//!   coordinators.
//! * `topic.rs`, `produce.rs`, `consume.rs`, `group.rs`, `cluster.rs`: the commands.
//! * `records.rs`: record batch v2 encoding for produce and decoding for consume.
//! * `output.rs`: tables for people and one JSON document per command for scripts.
//!
//! Errors are one line on stderr with the Kafka error name and exit code 1; usage errors
//! (clap's, and those found before any request) exit 2.

pub mod admin;
pub mod client;
pub mod cluster;
pub mod consume;
pub mod group;
pub mod output;
pub mod produce;
pub mod records;
pub mod topic;

use clap::{Args, Subcommand};
use kafka_protocol::error::ResponseError;

pub use admin::Admin;
pub use output::{Format, Output};

/// Flags every admin command takes.
#[derive(Args, Clone, Debug)]
pub struct CommonArgs {
    /// Bootstrap brokers, host:port[,host:port…]; runnel or any Kafka broker.
    #[arg(long, env = "RUNNEL_BROKERS", default_value = "127.0.0.1:9092", global = true)]
    pub brokers: String,
    /// `table` for people, `json` for scripts (one JSON document per command).
    #[arg(long, value_enum, default_value_t = Format::Table, global = true)]
    pub format: Format,
}

/// `runnel topic …`
#[derive(Args, Debug)]
pub struct TopicArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(subcommand)]
    pub command: topic::TopicCommand,
}

/// `runnel group …`
#[derive(Args, Debug)]
pub struct GroupArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(subcommand)]
    pub command: group::GroupCommand,
}

/// `runnel cluster …`
#[derive(Args, Debug)]
pub struct ClusterArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(subcommand)]
    pub command: ClusterCommand,
}

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Cluster id, controller, and every broker with host:port and rack.
    Info,
}

/// What went wrong in an admin command.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Found before any request: exit code 2, like clap's.
    #[error("{0}")]
    Usage(String),
    #[error("cannot reach {0}: {1}")]
    Connect(String, String),
    #[error("timed out: {0}")]
    Timeout(String),
    #[error("{0}: {1}")]
    Kafka(String, String),
    #[error("the broker at {1} does not support {0} at a version this client speaks")]
    Unsupported(String, String),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Io(String),
}

impl CliError {
    /// A Kafka error code, by Kafka's name (`TOPIC_ALREADY_EXISTS`).
    pub fn kafka(context: impl Into<String>, code: i16) -> CliError {
        CliError::Kafka(context.into(), error_name(code))
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => 2,
            _ => 1,
        }
    }
}

/// Kafka's name of an error code: `TopicAlreadyExists` → `TOPIC_ALREADY_EXISTS`.
pub fn error_name(code: i16) -> String {
    let Some(e) = ResponseError::try_from_code(code) else {
        return format!("ERROR_{code}");
    };
    let camel = format!("{e:?}");
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// Ok for code 0, else the Kafka error with `context` (and the broker's message if any).
pub fn check(code: i16, context: impl FnOnce() -> String, message: Option<&str>) -> Result<(), CliError> {
    if code == 0 {
        return Ok(());
    }
    let mut name = error_name(code);
    if let Some(m) = message.filter(|m| !m.is_empty()) {
        name.push_str(&format!(" ({m})"));
    }
    Err(CliError::Kafka(context(), name))
}

/// Errors a Kafka client retries after refreshing metadata (a leader or coordinator that
/// is moving or not ready yet, e.g. just after CreateTopics).
pub fn retriable(code: i16) -> bool {
    // UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
    // REQUEST_TIMED_OUT, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
    // NOT_COORDINATOR, NOT_ENOUGH_REPLICAS.
    matches!(code, 3 | 5 | 6 | 7 | 14 | 15 | 16 | 19)
}

/// How often and how long a retriable error is retried.
pub const RETRIES: u32 = 40;
pub const RETRY_BACKOFF: std::time::Duration = std::time::Duration::from_millis(250);

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| CliError::Io(e.to_string()))
}

/// Runs a command to its output (printed on stdout) or error (one line on stderr); the
/// process exit code.
fn finish(common: &CommonArgs, result: Result<Output, CliError>) -> i32 {
    match result {
        Ok(out) => {
            out.print(common.format);
            0
        }
        Err(e) => {
            eprintln!("runnel: {e}");
            e.exit_code()
        }
    }
}

pub fn run_topic(args: TopicArgs) -> i32 {
    let result = runtime().and_then(|rt| rt.block_on(topic::run(&args.common, args.command)));
    finish(&args.common, result)
}

pub fn run_group(args: GroupArgs) -> i32 {
    let result = runtime().and_then(|rt| rt.block_on(group::run(&args.common, args.command)));
    finish(&args.common, result)
}

pub fn run_cluster(args: ClusterArgs) -> i32 {
    let result = runtime().and_then(|rt| {
        rt.block_on(async {
            let mut admin = Admin::connect(&args.common.brokers).await?;
            match args.command {
                ClusterCommand::Info => cluster::info(&mut admin).await,
            }
        })
    });
    finish(&args.common, result)
}
