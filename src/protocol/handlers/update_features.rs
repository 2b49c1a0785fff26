//! UpdateFeatures (`kafka-features upgrade|downgrade|disable`): the controller leader sets
//! finalized feature levels, all features or none (`controller::features`). A refusal is
//! INVALID_UPDATE_VERSION with Kafka's wording, so the tool's message reads the same.

use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};

use super::str_bytes;
use crate::controller::features::{FeatureUpdate, UpgradeType};
use crate::controller::ControllerError;
use crate::protocol::errors::controller_error;
use crate::protocol::Ctx;

pub async fn handle(ctx: &Ctx, req: UpdateFeaturesRequest, version: i16) -> UpdateFeaturesResponse {
    let updates: Vec<FeatureUpdate> = req
        .feature_updates
        .iter()
        .map(|u| FeatureUpdate {
            name: u.feature.to_string(),
            level: u.max_version_level,
            // v0 has a flag that allows a downgrade (Kafka reads it as a safe one).
            upgrade: match (version, u.allow_downgrade) {
                (0, true) => UpgradeType::SafeDowngrade,
                (0, false) => UpgradeType::Upgrade,
                _ => UpgradeType::from_wire(u.upgrade_type),
            },
        })
        .collect();
    let mut resp = UpdateFeaturesResponse::default();
    if let Err(e) = ctx.controller_op(ctx.controller.update_features(updates, req.validate_only)).await {
        tracing::info!(error = %e, "UpdateFeatures refused");
        let message = match &e {
            ControllerError::InvalidUpdateVersion(m) => {
                format!("The update failed for all features since the following feature had an error: {m}")
            }
            other => other.to_string(),
        };
        resp = resp.with_error_code(controller_error(&e).code()).with_error_message(Some(str_bytes(message)));
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
