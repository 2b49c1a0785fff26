//! GetTelemetrySubscriptions and PushTelemetry (KIP-714): the requests to and from
//! [`crate::telemetry`], and its refusals as Kafka's error codes.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse, PushTelemetryRequest, PushTelemetryResponse,
};

use super::str_bytes;
use crate::protocol::{Ctx, RequestInfo};
use crate::telemetry::{ClientMetadata, Push, TelemetryError, ACCEPTED_COMPRESSION_TYPES};

pub fn error_code(e: &TelemetryError) -> ResponseError {
    match e {
        TelemetryError::InvalidRequest(_) => ResponseError::InvalidRequest,
        TelemetryError::Throttled => ResponseError::ThrottlingQuotaExceeded,
        TelemetryError::UnknownSubscriptionId => ResponseError::UnknownSubscriptionId,
        TelemetryError::UnsupportedCompression => ResponseError::UnsupportedCompressionType,
        TelemetryError::TooLarge => ResponseError::TelemetryTooLarge,
        TelemetryError::InvalidRecord(_) => ResponseError::InvalidRecord,
    }
}

fn metadata(info: &RequestInfo) -> ClientMetadata {
    ClientMetadata {
        client_id: info.client_id.clone(),
        source_address: info.peer.map(|p| p.ip().to_string()).unwrap_or_default(),
        source_port: info.peer.map(|p| p.port().to_string()).unwrap_or_default(),
        software_name: info.client_software.as_ref().map(|s| s.name.clone()).unwrap_or_default(),
        software_version: info.client_software.as_ref().map(|s| s.version.clone()).unwrap_or_default(),
    }
}

pub fn get_subscriptions(
    ctx: &Ctx,
    info: &RequestInfo,
    req: GetTelemetrySubscriptionsRequest,
    _version: i16,
) -> GetTelemetrySubscriptionsResponse {
    let id = req.client_instance_id;
    match ctx.telemetry.get_subscription(id, &ctx.image(), metadata(info), ctx.now_ms()) {
        Ok(a) => GetTelemetrySubscriptionsResponse::default()
            .with_client_instance_id(a.client_instance_id)
            .with_subscription_id(a.subscription_id)
            .with_accepted_compression_types(ACCEPTED_COMPRESSION_TYPES.to_vec())
            .with_push_interval_ms(a.push_interval_ms)
            .with_telemetry_max_bytes(ctx.telemetry.max_bytes)
            .with_delta_temporality(true)
            .with_requested_metrics(a.requested_metrics.into_iter().map(str_bytes).collect()),
        Err(e) => {
            tracing::debug!(client_id = info.client_id, error = %e, "GetTelemetrySubscriptions refused");
            GetTelemetrySubscriptionsResponse::default().with_error_code(error_code(&e).code())
        }
    }
}

pub fn push(ctx: &Ctx, info: &RequestInfo, req: PushTelemetryRequest, _version: i16) -> PushTelemetryResponse {
    let push = Push {
        client_instance_id: req.client_instance_id,
        subscription_id: req.subscription_id,
        terminating: req.terminating,
        compression_type: req.compression_type,
        metrics: &req.metrics,
    };
    let client_instance_id = push.client_instance_id;
    match ctx.telemetry.push(push, &ctx.image(), metadata(info), ctx.now_ms()) {
        Ok(()) => PushTelemetryResponse::default(),
        Err(e) => {
            let bad_payload = matches!(e, TelemetryError::InvalidRecord(_) | TelemetryError::TooLarge);
            if bad_payload {
                if let Some(suppressed) =
                    ctx.refusals.should_warn(info.peer.map(|p| p.ip()), &info.client_id, ctx.now_ms())
                {
                    tracing::warn!(client_id = info.client_id, %client_instance_id, error = %e, suppressed,
                        "PushTelemetry refused");
                }
            } else {
                tracing::debug!(client_id = info.client_id, %client_instance_id, error = %e, "PushTelemetry refused");
            }
            PushTelemetryResponse::default().with_error_code(error_code(&e).code())
        }
    }
}
