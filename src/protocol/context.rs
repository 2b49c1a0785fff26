//! What every handler can reach: configuration, the controller, the local partitions.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::BrokerConfig;
use crate::controller::{Controller, MetadataImage};
use crate::coordinator::GroupCoordinator;
use crate::replication::ReplicaManager;

/// Wall-clock milliseconds; injectable so tests can move time.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

pub fn system_clock() -> Clock {
    Arc::new(|| SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0))
}

pub struct Ctx {
    pub config: BrokerConfig,
    pub controller: Controller,
    pub replicas: ReplicaManager,
    pub groups: GroupCoordinator,
    pub clock: Clock,
    /// Rate limits the warn lines about refused client input.
    pub refusals: super::refusal_log::RefusalLog,
}

impl Ctx {
    pub fn now_ms(&self) -> i64 {
        (self.clock)()
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.controller.image()
    }

    /// Bring local partitions in line with the latest metadata (after a controller write).
    pub fn sync_partitions(&self) {
        let image = self.controller.image();
        if let Err(e) = self.replicas.apply_image(&image, self.now_ms()) {
            tracing::error!(error = %e, "failed to apply metadata to local partitions");
        }
    }
}
