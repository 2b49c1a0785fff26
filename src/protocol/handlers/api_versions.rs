//! ApiVersions: the API version ranges runnel serves.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use super::str_bytes;
use crate::controller::features;
use crate::protocol::versions::SUPPORTED;
use crate::protocol::Ctx;

fn api_keys() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .map(|(k, lo, hi)| ApiVersion::default().with_api_key(*k as i16).with_min_version(*lo).with_max_version(*hi))
        .collect()
}

/// From v3 the answer carries the features (KIP-584): every supported one in v4, those
/// whose minimum level is above 0 in v3 (older clients refuse a 0 minimum; Kafka omits
/// them the same way), and the finalized levels with the metadata offset as their epoch.
pub fn handle(ctx: &Ctx, _req: ApiVersionsRequest, version: i16) -> ApiVersionsResponse {
    let resp = ApiVersionsResponse::default().with_api_keys(api_keys()).with_finalized_features_epoch(-1);
    if version < 3 {
        return resp;
    }
    let supported = features::SUPPORTED
        .iter()
        .filter(|f| version >= 4 || f.min > 0)
        .map(|f| {
            SupportedFeatureKey::default().with_name(str_bytes(f.name)).with_min_version(f.min).with_max_version(f.max)
        })
        .collect();
    let image = ctx.image();
    let finalized = features::finalized(&image)
        .map(|(name, level)| {
            FinalizedFeatureKey::default()
                .with_name(str_bytes(name))
                .with_min_version_level(level)
                .with_max_version_level(level)
        })
        .collect();
    let epoch = i64::try_from(image.offset).unwrap_or(i64::MAX);
    resp.with_supported_features(supported).with_finalized_features(finalized).with_finalized_features_epoch(epoch)
}

/// Sent (as v0) when a client asks for an ApiVersions version we do not know.
pub fn unsupported_version_response() -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_error_code(ResponseError::UnsupportedVersion.code()).with_api_keys(api_keys())
}
