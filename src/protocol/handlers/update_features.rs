//! UpdateFeatures (`kafka-features upgrade|downgrade|disable`): the controller leader sets
//! finalized feature levels, all features or none (`controller::features`). A refusal is
//! INVALID_UPDATE_VERSION with Kafka's wording, so the tool's message reads the same.

use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};

use super::str_bytes;
use crate::controller::features::{self, FeatureUpdate, UpgradeType};
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
    // Checked here first against this broker's image, then by the leader against the
    // latest: a refusal does not wait for the quorum, and an update no node of an older
    // release can read (it would not know the operation) is not sent to one that leads.
    let image = ctx.image();
    let node = ctx.controller.node_id();
    let refused = updates.iter().find_map(|u| features::refusal(&image, u, node));
    let outcome = match refused {
        Some(why) => Err(ControllerError::InvalidUpdateVersion(why)),
        None => ctx.controller_op(ctx.controller.update_features(updates, req.validate_only)).await,
    };
    let mut resp = UpdateFeaturesResponse::default();
    if let Err(e) = outcome {
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
