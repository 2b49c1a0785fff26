//! What every handler can reach: configuration, the controller, the local partitions.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::BrokerConfig;
use crate::controller::{Controller, MetadataImage};
use crate::coordinator::GroupCoordinator;
use crate::replication::ReplicaManager;

/// Wall-clock milliseconds; injectable so tests can move time.
pub use crate::replication::replica_manager::Clock;

pub fn system_clock() -> Clock {
    Arc::new(|| SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0))
}

pub struct Ctx {
    pub config: BrokerConfig,
    pub controller: Controller,
    /// Shared with the controller, which pushes every metadata commit to it.
    pub replicas: Arc<ReplicaManager>,
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
}
