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
    let result = match check_cluster_id(ctx, req.cluster_id.as_ref()) {
        Err(e) => Err(e),
        Ok(()) => ctx.controller_op(ctx.controller.add_raft_voter(node_id, directory_id)).await.map_err(Refusal::from),
    };
    let listeners: Vec<String> =
        req.listeners.iter().map(|l| format!("{}://{}:{}", l.name.as_str(), l.host.as_str(), l.port)).collect();
    match result {
        Ok(()) => {
            tracing::warn!(node_id, directory_id = %encode_uuid(&directory_id), ?listeners, "controller quorum: voter added");
            AddRaftVoterResponse::default()
        }
        Err(r) => {
            tracing::info!(node_id, error = %r.message, "AddRaftVoter refused");
            AddRaftVoterResponse::default()
                .with_error_code(r.code.code())
                .with_error_message(Some(str_bytes(r.message)))
        }
    }
}

pub async fn remove(ctx: &Ctx, req: RemoveRaftVoterRequest, _version: i16) -> RemoveRaftVoterResponse {
    let (node_id, directory_id) = (req.voter_id, req.voter_directory_id);
    let result = match check_cluster_id(ctx, req.cluster_id.as_ref()) {
        Err(e) => Err(e),
        Ok(()) => {
            ctx.controller_op(ctx.controller.remove_raft_voter(node_id, directory_id)).await.map_err(Refusal::from)
        }
    };
    match result {
        Ok(()) => {
            tracing::warn!(node_id, directory_id = %encode_uuid(&directory_id), "controller quorum: voter removed");
            RemoveRaftVoterResponse::default()
        }
        Err(r) => {
            tracing::info!(node_id, error = %r.message, "RemoveRaftVoter refused");
            RemoveRaftVoterResponse::default()
                .with_error_code(r.code.code())
                .with_error_message(Some(str_bytes(r.message)))
        }
    }
}

struct Refusal {
    code: ResponseError,
    message: String,
}

impl From<ControllerError> for Refusal {
    fn from(e: ControllerError) -> Refusal {
        Refusal { code: controller_error(&e), message: e.to_string() }
    }
}

/// A request that names a cluster must name this one (Kafka: INCONSISTENT_CLUSTER_ID).
/// An empty name names none (kafka-protocol's default for the field).
fn check_cluster_id(ctx: &Ctx, requested: Option<&StrBytes>) -> Result<(), Refusal> {
    let ours = ctx.image().cluster_id.clone();
    match requested {
        Some(c) if !c.is_empty() && c.as_str() != ours => Err(Refusal {
            code: ResponseError::InconsistentClusterId,
            message: format!("The request names cluster {}, this is cluster {ours}", c.as_str()),
        }),
        _ => Ok(()),
    }
}
