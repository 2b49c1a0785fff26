//! UpdateFeatures (`kafka-features upgrade|downgrade`), against the fixed feature levels
//! of [`crate::protocol::features`]: a request for a level already finalized succeeds and
//! changes nothing; any other is refused, all features together, as Kafka's controller
//! refuses a batch in which one update is invalid (INVALID_UPDATE_VERSION, with Kafka's
//! wording so the tool's message reads the same).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};

use super::str_bytes;
use crate::protocol::features;
use crate::protocol::Ctx;

pub fn handle(ctx: &Ctx, req: UpdateFeaturesRequest, version: i16) -> UpdateFeaturesResponse {
    let node = ctx.controller.node_id();
    let refusal = req.feature_updates.iter().find_map(|u| {
        let (name, level) = (u.feature.as_str(), u.max_version_level);
        match features::supported(name) {
            None => Some(format!(
                "Invalid update version {level} for feature {name}. Local controller {node} does not support this feature."
            )),
            Some(f) if level < f.min || level > f.max => Some(format!(
                "Invalid update version {level} for feature {name}. Local controller {node} only supports versions {}-{}",
                f.min, f.max
            )),
            Some(_) => None,
        }
    });
    let mut resp = UpdateFeaturesResponse::default();
    if let Some(msg) = refusal {
        resp = resp.with_error_code(ResponseError::InvalidUpdateVersion.code()).with_error_message(Some(str_bytes(
            format!("The update failed for all features since the following feature had an error: {msg}"),
        )));
    }
    // v0-1 also answer per feature; the top-level error is the one that counts.
    if version <= 1 {
        resp.results = req
            .feature_updates
            .iter()
            .map(|u| UpdatableFeatureResult::default().with_feature(u.feature.clone()))
            .collect();
    }
    resp
}
