//! Joining the cluster: registering this broker with the quorum (retrying until a leader
//! takes it), a broker-only node joining as a learner, and the base image from a
//! pre-Raft `metadata.log`.

use std::path::Path;
use std::sync::Weak;
use std::time::Duration;

use super::Core;
use crate::controller::image::MetadataImage;
use crate::controller::metadata_log::MetadataLog;
use crate::controller::operations::ControllerOp;
use crate::controller::raft::wire::ForwardError;
use crate::controller::ControllerError;

/// As a broker-only node: ask the voters, in turn, until the leader adds this node as a
/// learner; then register the broker.
pub(super) async fn join_then_register(core: Weak<Core>, join: ControllerOp, register: ControllerOp) {
    let mut failures = 0u32;
    'joined: loop {
        let Some(c) = core.upgrade() else { return };
        for addr in c.voters.values() {
            match c.forwarder.forward(addr, &join, Duration::from_secs(5)).await {
                Ok(Ok(_)) => break 'joined,
                Ok(Err(ForwardError::NotLeader)) | Err(_) => {}
                Ok(Err(e)) => tracing::warn!(error = %e.into_controller_error(), "joining the controller quorum"),
            }
        }
        failures += 1;
        if failures.is_power_of_two() {
            tracing::warn!(failures, "no controller leader took this broker-only node yet; retrying");
        }
        drop(c);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    register_until_done(core, register).await;
}

/// Register this broker with the quorum, retrying until a leader takes it.
pub(super) async fn register_until_done(core: Weak<Core>, op: ControllerOp) {
    let mut failures = 0u32;
    while let Some(c) = core.upgrade() {
        match c.submit(op.clone()).await {
            Ok(_) => {
                tracing::info!(node_id = c.node_id, "broker registered with the controller quorum");
                return;
            }
            Err(e) => {
                failures += 1;
                if failures.is_power_of_two() {
                    tracing::warn!(error = %e, failures, "broker registration not committed yet; retrying");
                }
            }
        }
        drop(c);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The metadata of a pre-Raft runnel (`metadata.log`), for a single voter; empty
/// otherwise.
pub(super) fn base_image(dir: &Path, single: bool) -> Result<MetadataImage, ControllerError> {
    if !dir.join("metadata.log").exists() {
        return Ok(MetadataImage::default());
    }
    if !single {
        tracing::warn!(dir = %dir.display(), "ignoring a single-node metadata.log: this node is one of several voters");
        return Ok(MetadataImage::default());
    }
    let (_, records) = MetadataLog::open(dir)?;
    let mut image = MetadataImage::default();
    records.iter().for_each(|r| image.apply(r));
    Ok(image)
}
