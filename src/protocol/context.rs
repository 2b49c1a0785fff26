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
}

/// At most this many requests' controller operations hold a blocking thread at once;
/// more wait for a turn without one. Each holds its thread until its commit is applied
/// here, and the commit's own steps (preparing the listeners, applying to the image) need
/// blocking threads too: with tokio's 512 all held by waiting requests (hundreds of
/// clients creating topics at once), nothing would be applied until requests timed out.
/// Commits happen one at a time anyway.
pub const MAX_CONTROLLER_OPS_IN_FLIGHT: usize = 64;

impl Ctx {
    pub fn now_ms(&self) -> i64 {
        (self.clock)()
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.controller.image()
    }

    /// Runs a controller operation off the async workers. A commit appends to the
    /// metadata log with an fsync and its listeners create or delete partitions' files
    /// (CreateTopics of thousands of partitions takes seconds), so it runs on a blocking
    /// thread while the workers go on serving other clients. Commits still happen one at
    /// a time, under the controller's lock.
    pub async fn controller_op<T, F>(&self, op: F) -> Result<T, ControllerError>
    where
        T: Send + 'static,
        F: FnOnce(&Controller) -> Result<T, ControllerError> + Send + 'static,
    {
        let Ok(_turn) = self.controller_ops.acquire().await else {
            return Err(ControllerError::Internal("the broker is shutting down".into()));
        };
        let controller = Arc::clone(&self.controller);
        match tokio::task::spawn_blocking(move || op(&controller)).await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(ControllerError::Internal("the broker is shutting down".into())),
        }
    }
}
