//! What every handler can reach: configuration, the controller, the local partitions.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::BrokerConfig;
use crate::controller::{Controller, ControllerError, MetadataImage};
use crate::coordinator::GroupCoordinator;
use crate::replication::ReplicaManager;

/// Wall-clock milliseconds; injectable so tests can move time.
pub use crate::replication::replica_manager::Clock;

pub fn system_clock() -> Clock {
    Arc::new(|| SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0))
}

pub struct Ctx {
    pub config: BrokerConfig,
    pub controller: Arc<Controller>,
    /// Shared with the controller, which pushes every metadata commit to it.
    pub replicas: Arc<ReplicaManager>,
    pub groups: Arc<GroupCoordinator>,
    pub clock: Clock,
    /// Rate limits the warn lines about refused client input.
    pub refusals: super::refusal_log::RefusalLog,
    /// Serializes loading and unloading the group coordinator's partitions
    /// (`offsets_topic::refresh_coordinator`).
    pub coordinator_switch: std::sync::Mutex<()>,
    /// Request counts and latencies, for `/metrics`.
    pub requests: super::request_metrics::RequestMetrics,
    /// KIP-714 client instances and their pushed metrics.
    pub telemetry: crate::telemetry::Telemetry,
    /// Produce spans waiting for the OTLP exporter; `None` when no collector is set.
    pub traces: Option<Arc<crate::traces::SpanQueue>>,
    /// Bounds the controller operations of requests in flight (see [`Ctx::controller_op`]).
    pub controller_ops: tokio::sync::Semaphore,
    /// KIP-227: consumers' incremental fetch sessions.
    pub fetch_sessions: super::fetch_sessions::FetchSessions,
}

/// At most this many requests' controller operations are in flight at once; more wait
/// for a turn. Commits happen one at a time at the quorum leader, so more in flight would
/// only queue there, each forwarded one holding a connection to the leader. (Before the
/// controller's calls were async, each also held one of tokio's 512 blocking threads,
/// which the commits' own steps need: hundreds of clients creating topics at once
/// stalled every commit until requests timed out.)
pub const MAX_CONTROLLER_OPS_IN_FLIGHT: usize = 64;

impl Ctx {
    pub fn now_ms(&self) -> i64 {
        (self.clock)()
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.controller.image()
    }

    /// Runs a controller operation (a call on [`Ctx::controller`]) when its turn comes
    /// (see [`MAX_CONTROLLER_OPS_IN_FLIGHT`]). The operation itself runs as a task of its
    /// own: a request dropped while it waits does not stop a commit half-way.
    pub async fn controller_op<T>(
        &self,
        op: impl std::future::Future<Output = Result<T, ControllerError>>,
    ) -> Result<T, ControllerError> {
        let Ok(_turn) = self.controller_ops.acquire().await else {
            return Err(ControllerError::Internal("the broker is shutting down".into()));
        };
        op.await
    }
}
