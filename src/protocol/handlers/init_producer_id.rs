//! InitProducerId for idempotent producers. Transactions are not served yet.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::protocol::Ctx;

pub async fn handle(ctx: &Ctx, req: InitProducerIdRequest, _version: i16) -> InitProducerIdResponse {
    let fail = |e: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(e.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    if req.transactional_id.is_some() {
        tracing::warn!("InitProducerId with a transactional id: transactions are not supported yet");
        return fail(ResponseError::TransactionalIdAuthorizationFailed);
    }
    // Producer id and epoch come together or not at all.
    if (req.producer_id.0 == -1) != (req.producer_epoch == -1) {
        return fail(ResponseError::InvalidRequest);
    }
    // Without a transactional id Kafka always hands out a fresh producer id (an existing
    // id is never bumped for the asker: that would let any client fence any producer).
    // Mostly no I/O (ids are persisted a block at a time), but a new block is a commit.
    match ctx.controller_op(ctx.controller.allocate_producer_id()).await {
        Ok(id) => InitProducerIdResponse::default().with_producer_id(ProducerId(id)).with_producer_epoch(0),
        Err(e) => {
            tracing::error!(error = %e, "could not allocate a producer id");
            fail(ResponseError::CoordinatorNotAvailable)
        }
    }
}
