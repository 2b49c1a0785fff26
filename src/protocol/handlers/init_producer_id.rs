//! InitProducerId for idempotent producers. Transactions are not served yet.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::protocol::Ctx;

pub fn handle(ctx: &Ctx, req: InitProducerIdRequest, _version: i16) -> InitProducerIdResponse {
    let fail = |e: ResponseError| {
        InitProducerIdResponse::default().with_error_code(e.code()).with_producer_id(ProducerId(-1)).with_producer_epoch(-1)
    };
    if req.transactional_id.is_some() {
        tracing::warn!("InitProducerId with a transactional id: transactions are not supported yet");
        return fail(ResponseError::TransactionalIdAuthorizationFailed);
    }
    // An existing idempotent producer asking for an epoch bump (KIP-360) keeps its id.
    if req.producer_id.0 >= 0 && req.producer_epoch >= 0 && req.producer_epoch < i16::MAX - 1 {
        return InitProducerIdResponse::default().with_producer_id(req.producer_id).with_producer_epoch(req.producer_epoch + 1);
    }
    match ctx.controller.allocate_producer_id() {
        Ok(id) => InitProducerIdResponse::default().with_producer_id(ProducerId(id)).with_producer_epoch(0),
        Err(e) => {
            tracing::error!(error = %e, "could not allocate a producer id");
            fail(ResponseError::CoordinatorNotAvailable)
        }
    }
}
