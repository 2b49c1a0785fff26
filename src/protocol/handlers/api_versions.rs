//! ApiVersions: the API version ranges runnel serves.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use crate::protocol::versions::SUPPORTED;
use crate::protocol::Ctx;

fn api_keys() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .map(|(k, lo, hi)| ApiVersion::default().with_api_key(*k as i16).with_min_version(*lo).with_max_version(*hi))
        .collect()
}

pub fn handle(_ctx: &Ctx, _req: ApiVersionsRequest, _version: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(api_keys()).with_finalized_features_epoch(-1)
}

/// Sent (as v0) when a client asks for an ApiVersions version we do not know.
pub fn unsupported_version_response() -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_error_code(ResponseError::UnsupportedVersion.code()).with_api_keys(api_keys())
}
