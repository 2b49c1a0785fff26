//! UnregisterBroker: drop a broker's registration, decided by the controller
//! (`kafka-cluster unregister --id N`, for a broker taken out of the cluster for good).

use kafka_protocol::messages::{UnregisterBrokerRequest, UnregisterBrokerResponse};

use super::str_bytes;
use crate::protocol::errors::controller_error;
use crate::protocol::Ctx;

pub async fn handle(ctx: &Ctx, req: UnregisterBrokerRequest, _version: i16) -> UnregisterBrokerResponse {
    let node_id = req.broker_id.0;
    match ctx.controller_op(ctx.controller.unregister_broker(node_id)).await {
        Ok(()) => {
            tracing::warn!(node_id, "broker unregistered: it leads nothing and is in no ISR until it registers again");
            UnregisterBrokerResponse::default()
        }
        Err(e) => {
            tracing::info!(node_id, error = %e, "UnregisterBroker refused");
            UnregisterBrokerResponse::default()
                .with_error_code(controller_error(&e).code())
                .with_error_message(Some(str_bytes(e.to_string())))
        }
    }
}
