//! AddRaftVoter and RemoveRaftVoter (KIP-853): change the controller quorum's voters
//! (`kafka-metadata-quorum add-controller` / `remove-controller`). Kafka's brokers forward
//! these to the active controller; so does runnel ([`crate::controller::Controller`]
//! carries the change out as a Raft membership change on the quorum leader).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, RemoveRaftVoterRequest, RemoveRaftVoterResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::str_bytes;
use crate::controller::ControllerError;
use crate::protocol::errors::controller_error;
use crate::protocol::Ctx;
use crate::storage::meta_properties::encode_uuid;

pub async fn add(ctx: &Ctx, req: AddRaftVoterRequest, _version: i16) -> AddRaftVoterResponse {
    let (node_id, directory_id) = (req.voter_id, req.voter_directory_id);
    let listeners: Vec<String> =
        req.listeners.iter().map(|l| format!("{}://{}:{}", l.name.as_str(), l.host.as_str(), l.port)).collect();
    tracing::info!(node_id, directory_id = %encode_uuid(&directory_id), ?listeners, "AddRaftVoter asked");
    let change = ctx.controller.add_raft_voter(node_id, directory_id);
    match change_voters(ctx, req.cluster_id.as_ref(), change, "AddRaftVoter").await {
        Ok(()) => AddRaftVoterResponse::default(),
        Err(r) => AddRaftVoterResponse::default().with_error_code(r.code.code()).with_error_message(Some(r.message)),
    }
}

pub async fn remove(ctx: &Ctx, req: RemoveRaftVoterRequest, _version: i16) -> RemoveRaftVoterResponse {
    let (node_id, directory_id) = (req.voter_id, req.voter_directory_id);
    tracing::info!(node_id, directory_id = %encode_uuid(&directory_id), "RemoveRaftVoter asked");
    let change = ctx.controller.remove_raft_voter(node_id, directory_id);
    match change_voters(ctx, req.cluster_id.as_ref(), change, "RemoveRaftVoter").await {
        Ok(()) => RemoveRaftVoterResponse::default(),
        Err(r) => RemoveRaftVoterResponse::default().with_error_code(r.code.code()).with_error_message(Some(r.message)),
    }
}

/// Run a voter change for a request that names `cluster_id`, and log how it ended.
async fn change_voters(
    ctx: &Ctx,
    cluster_id: Option<&StrBytes>,
    change: impl std::future::Future<Output = Result<(), ControllerError>>,
    api: &str,
) -> Result<(), Refusal> {
    let result = match check_cluster_id(ctx, cluster_id) {
        Err(r) => Err(r),
        Ok(()) => ctx.controller_op(change).await.map_err(Refusal::from),
    };
    match &result {
        Ok(()) => tracing::warn!("{api}: the controller quorum's voters changed"),
        Err(r) => tracing::info!(error = %r.message.as_str(), "{api} refused"),
    }
    result
}

struct Refusal {
    code: ResponseError,
    message: StrBytes,
}

impl From<ControllerError> for Refusal {
    fn from(e: ControllerError) -> Refusal {
        Refusal { code: controller_error(&e), message: str_bytes(e.to_string()) }
    }
}

/// A request that names a cluster must name this one (Kafka: INCONSISTENT_CLUSTER_ID).
/// An empty name names none (kafka-protocol's default for the field).
fn check_cluster_id(ctx: &Ctx, requested: Option<&StrBytes>) -> Result<(), Refusal> {
    let ours = ctx.image().cluster_id.clone();
    match requested {
        Some(c) if !c.is_empty() && c.as_str() != ours => Err(Refusal {
            code: ResponseError::InconsistentClusterId,
            message: str_bytes(format!("The request names cluster {}, this is cluster {ours}", c.as_str())),
        }),
        _ => Ok(()),
    }
}
