//! runnel: a message broker that speaks the Apache Kafka wire protocol.
//!
//! # Layout
//!
//! * [`config`]: broker configuration from defaults, a YAML file, `RUNNEL_*` environment
//!   variables and command-line flags, validated once at start.
//! * [`server`]: the TCP listener, per-connection framing, response writing (vectored
//!   writes, or `sendfile` for record bytes), graceful shutdown, the HTTP listener
//!   (health, metrics, and the HTTP API of `server::http_api`), and [`Broker`],
//!   the handle that ties the layers together; [`EmbeddedBroker`] runs one inside a test
//!   process on a free port with a temporary data dir.
//! * [`protocol`]: request decoding (guarded against hostile lengths), dispatch by API key,
//!   one handler per Kafka API, and the single place where domain errors become Kafka
//!   error codes.
//! * [`coordinator`]: consumer groups (a pure state machine and its shell) and committed
//!   offsets in `__consumer_offsets` (transactions later).
//! * [`controller`]: cluster metadata as an event-sourced log of records applied to an
//!   immutable [`controller::MetadataImage`], replicated by a Raft controller quorum
//!   (openraft; one voter by default) with its own listener between controllers.
//! * [`replication`]: the replica manager, which owns a write from validation until it is
//!   as safe as its acks ask; the purgatory where produce and fetch requests wait, keyed
//!   by partition; per-partition leader or follower state (log, leader epoch, producer
//!   state); the pure ISR/high-watermark state machine (`isr.rs`); the leader's side of a
//!   follower's fetch and the follower fetchers, which reach leaders through a small
//!   trait that `protocol` implements over TCP.
//! * [`storage`]: Kafka's on-disk layout: segments of v2 record batches, sparse offset and
//!   time indexes, recovery, retention; reads planned as file slices under a partition's
//!   lock and carried out after it; the broker's bounded cache of open segment files;
//!   the log directories (`log.dirs`), where each partition lives and how one moves.
//!
//! * [`telemetry`]: KIP-714 client telemetry: the subscriptions clients get, the checks
//!   on their pushes, and the latest pushed values that `/metrics` shows.
//!
//! * [`metrics`]: lock-free latency histograms the layers record into on their hot paths
//!   (a leaf: every layer may use it); the broker renders them at scrape time.
//! * [`log_limit`]: the binary's limit on openraft's repeated log lines (a leaf).
//! * [`traces`]: a span per produce request, queued (bounded, never waited on) for the
//!   OTLP exporter of `server::otlp_traces` when a collector is configured (a leaf too).
//!
//! * [`dev_cluster`]: `runnel dev-cluster`, a local cluster of child processes.
//! * [`cli`]: `runnel topic|group|cluster`, the admin CLI: a Kafka client of any broker
//!   (beside the broker, not a layer of it; it reuses `storage`'s batch parsing).
//!
//! Imports point one way: `server → protocol → {coordinator, replication, controller,
//! telemetry} → storage`.

pub mod cli;
pub mod config;
pub mod controller;
pub mod coordinator;
pub mod dev_cluster;
pub mod log_limit;
pub mod metrics;
pub mod protocol;
pub mod replication;
pub mod server;
pub mod storage;
pub mod telemetry;
pub mod traces;

pub use server::embedded::EmbeddedBroker;
pub use server::Broker;
