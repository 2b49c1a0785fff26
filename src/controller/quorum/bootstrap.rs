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
use crate::controller::raft::NodeId;
use crate::controller::ControllerError;

/// As a broker-only node: ask the voters, in turn, until the leader adds this node as a
/// learner; then register the broker.
pub(super) async fn join_then_register(core: Weak<Core>, join: ControllerOp, register: ControllerOp) {
    let mut failures = 0u32;
    loop {
        let Some(c) = core.upgrade() else { return };
        if ask_voters(&c, &join, "joining the controller quorum").await {
            break;
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

/// Ask the other voters the flags name, in turn, until one has the leader take `op` (a
/// member that is not the leader passes an AddObserver on to the one it knows): for a
/// node the leader cannot reach yet, which so does not know who leads. Whether one took
/// it.
pub(super) async fn ask_voters(c: &Core, op: &ControllerOp, what: &str) -> bool {
    let me = c.node_id as NodeId;
    for (_, addr) in c.voters.iter().filter(|(&id, _)| id != me) {
        match c.forwarder.forward(addr, op, Duration::from_secs(5)).await {
            Ok(Ok(_)) => return true,
            Ok(Err(ForwardError::NotLeader)) | Err(_) => {}
            Ok(Err(e)) => tracing::warn!(error = %e.into_controller_error(), "{what}"),
        }
    }
    false
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
