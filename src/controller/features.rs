//! Kafka's feature flags (KIP-584): the levels this build supports, the cluster-wide
//! finalized level of each, and UpdateFeatures (`kafka-features upgrade|downgrade|disable`).
//!
//! A finalized level is what a `FeatureLevel` record last set, else the highest level
//! supported: what a new cluster starts with, and what every runnel cluster ran before
//! feature levels were records. A feature at level 0 is not finalized (as in Kafka, whose
//! ApiVersions lists only levels above 0): `transaction.version` 0 means no KIP-890
//! transactions, `group.version` 0 no KIP-848 consumer groups, and so on.
//!
//! One feature can change: `eligible.leader.replicas.version` (KIP-966,
//! `eligible_leaders`), 1 by default as in a new Kafka 4.1+ cluster, 0 to go back to the
//! rule before it (an ISR keeps its last member). Every other feature has one level.
//! `metadata.version` is the level of the schemas runnel speaks: Kafka 4.1's
//! (kafka-protocol 0.18), whose production level is 4.1-IV1.

use serde::{Deserialize, Serialize};

use super::image::MetadataImage;
use super::records::{MetadataRecord, FEATURE_LEVELS};
use super::{eligible_leaders, ControllerError};

/// A feature: its name and the range of levels this broker supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feature {
    pub name: &'static str,
    pub min: i16,
    pub max: i16,
}

/// `metadata.version` 4.1-IV1 (Kafka's `MetadataVersion.IBP_4_1_IV1`).
pub const METADATA_VERSION_4_1_IV1: i16 = 27;

/// KIP-966's feature: 1 keeps eligible leader replicas, 0 does not.
pub const ELIGIBLE_LEADER_REPLICAS_VERSION: &str = "eligible.leader.replicas.version";

/// The features Kafka 4.x brokers advertise, at the levels runnel supports.
pub const SUPPORTED: &[Feature] = &[
    Feature { name: "metadata.version", min: METADATA_VERSION_4_1_IV1, max: METADATA_VERSION_4_1_IV1 },
    // The voters are in the metadata log (openraft's membership entries) and change with
    // AddRaftVoter/RemoveRaftVoter: Kafka's kraft.version 1 (KIP-853).
    Feature { name: "kraft.version", min: 1, max: 1 },
    Feature { name: "transaction.version", min: 0, max: 0 },
    Feature { name: "group.version", min: 0, max: 0 },
    // Kafka's range too. (The controller keeps ELR only once every broker reads their
    // records: the record format gate, not this level, holds them back in a cluster
    // upgrading from an older release.)
    Feature { name: ELIGIBLE_LEADER_REPLICAS_VERSION, min: 0, max: 1 },
    Feature { name: "share.version", min: 0, max: 0 },
    Feature { name: "streams.version", min: 0, max: 0 },
];

pub fn supported(name: &str) -> Option<&'static Feature> {
    SUPPORTED.iter().find(|f| f.name == name)
}

/// The finalized level of `name` in `image` (0 for a feature runnel does not know, as
/// Kafka treats a missing one).
pub fn finalized_level(image: &MetadataImage, name: &str) -> i16 {
    match image.features.get(name) {
        Some(level) => *level,
        None => supported(name).map_or(0, |f| f.max),
    }
}

/// The finalized level of each feature above level 0.
pub fn finalized(image: &MetadataImage) -> impl Iterator<Item = (&'static str, i16)> + '_ {
    SUPPORTED.iter().map(|f| (f.name, finalized_level(image, f.name))).filter(|(_, level)| *level > 0)
}

/// How UpdateFeatures may move a level (Kafka's `FeatureUpdate.UpgradeType`; v0 of the
/// request has a flag that allows a downgrade instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpgradeType {
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
    /// A type this build does not know (the request's byte).
    Unknown(i8),
}

impl UpgradeType {
    pub fn from_wire(value: i8) -> UpgradeType {
        match value {
            1 => UpgradeType::Upgrade,
            2 => UpgradeType::SafeDowngrade,
            3 => UpgradeType::UnsafeDowngrade,
            other => UpgradeType::Unknown(other),
        }
    }
}

/// One feature of an UpdateFeatures request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureUpdate {
    pub name: String,
    pub level: i16,
    pub upgrade: UpgradeType,
}

/// Why `update` may not be made, in Kafka's words (`FeatureControlManager.updateFeature`),
/// checked in Kafka's order; `controller` names the node deciding.
pub fn refusal(image: &MetadataImage, update: &FeatureUpdate, controller: i32) -> Option<String> {
    let FeatureUpdate { name, level, upgrade } = update;
    let why = |reason: String| Some(format!("Invalid update version {level} for feature {name}. {reason}"));
    if let UpgradeType::Unknown(_) = upgrade {
        return why("The controller does not support the given upgrade type.".into());
    }
    if *level < 0 {
        return why("A feature version cannot be less than 0.".into());
    }
    // Level 0 is always supported: a feature a node lacks is at 0 there.
    match supported(name) {
        _ if *level == 0 => {}
        None | Some(Feature { max: 0, .. }) => {
            return why(format!("Local controller {controller} does not support this feature."))
        }
        Some(f) if *level < f.min || *level > f.max => {
            return why(format!("Local controller {controller} only supports versions {}-{}", f.min, f.max))
        }
        Some(_) => {}
    }
    let current = finalized_level(image, name);
    if *level != current {
        // The level is a record: a broker whose release cannot read it would stop at it.
        if let Some(broker) = image.brokers_behind(FEATURE_LEVELS).first() {
            return why(format!("Broker {broker} does not support this feature."));
        }
    }
    match upgrade {
        UpgradeType::Upgrade if *level < current => {
            why("Can't downgrade the version of this feature without setting the upgrade type to either safe or \
             unsafe downgrade."
                .into())
        }
        UpgradeType::SafeDowngrade | UpgradeType::UnsafeDowngrade if *level > current => {
            why("Can't downgrade to a newer version.".into())
        }
        _ => None,
    }
}

/// The records that make `updates`, all or none (Kafka refuses the whole request when one
/// update is refused). A level the cluster already has writes nothing.
pub fn update(
    image: &MetadataImage,
    updates: &[FeatureUpdate],
    controller: i32,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    if let Some(why) = updates.iter().find_map(|u| refusal(image, u, controller)) {
        return Err(ControllerError::InvalidUpdateVersion(why));
    }
    let mut records = Vec::new();
    for u in updates {
        if u.level == finalized_level(image, &u.name) {
            continue;
        }
        if u.name == ELIGIBLE_LEADER_REPLICAS_VERSION && u.level == 0 {
            // Before the level: no image has the new level with partitions kept by ELR.
            // (Turned on, ELR starts with the next ISR change; nothing to write before.)
            records.extend(eligible_leaders::records_to_disable(image));
        }
        records.push(MetadataRecord::FeatureLevel { name: u.name.clone(), level: u.level });
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::records::METADATA_FORMAT;

    fn elr(level: i16, upgrade: UpgradeType) -> FeatureUpdate {
        FeatureUpdate { name: ELIGIBLE_LEADER_REPLICAS_VERSION.into(), level, upgrade }
    }

    fn image_with_broker(format: u16) -> MetadataImage {
        let mut image = MetadataImage::default();
        image.apply(&MetadataRecord::test_registration(2, format));
        image
    }

    #[test]
    fn the_finalized_levels_are_the_highest_supported_until_a_record_sets_one() {
        let mut image = MetadataImage::default();
        assert!(SUPPORTED.iter().all(|f| f.min == f.max || f.name == ELIGIBLE_LEADER_REPLICAS_VERSION));
        assert_eq!(
            finalized(&image).collect::<Vec<_>>(),
            [("metadata.version", 27), ("kraft.version", 1), (ELIGIBLE_LEADER_REPLICAS_VERSION, 1)]
        );
        assert_eq!(finalized_level(&image, "transaction.version"), 0);
        assert_eq!(finalized_level(&image, "no.such.feature"), 0);
        image.apply(&MetadataRecord::FeatureLevel { name: ELIGIBLE_LEADER_REPLICAS_VERSION.into(), level: 0 });
        assert_eq!(finalized_level(&image, ELIGIBLE_LEADER_REPLICAS_VERSION), 0);
        assert_eq!(finalized(&image).count(), 2);
        // A snapshot carries it.
        let again = MetadataImage::from_records(&image.to_records(), image.offset);
        assert_eq!(finalized_level(&again, ELIGIBLE_LEADER_REPLICAS_VERSION), 0);
    }

    #[test]
    fn eligible_leader_replicas_go_off_and_on_with_kafkas_upgrade_types() {
        let mut image = image_with_broker(METADATA_FORMAT);
        let refused = |image: &MetadataImage, u: FeatureUpdate| match update(image, &[u], 1) {
            Err(ControllerError::InvalidUpdateVersion(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(refused(&image, elr(0, UpgradeType::Upgrade)).contains("without setting the upgrade type"));
        assert!(
            refused(&image, elr(2, UpgradeType::Upgrade)).ends_with("Local controller 1 only supports versions 0-1")
        );
        assert!(refused(&image, elr(-1, UpgradeType::Upgrade)).contains("cannot be less than 0"));
        assert!(refused(&image, elr(0, UpgradeType::Unknown(9))).contains("does not support the given upgrade type"));
        // The level it has: nothing to write.
        assert_eq!(update(&image, &[elr(1, UpgradeType::Upgrade)], 1).unwrap(), vec![]);
        let off = update(&image, &[elr(0, UpgradeType::SafeDowngrade)], 1).unwrap();
        assert_eq!(
            off.last(),
            Some(&MetadataRecord::FeatureLevel { name: ELIGIBLE_LEADER_REPLICAS_VERSION.into(), level: 0 })
        );
        off.iter().for_each(|r| image.apply(r));
        assert!(!eligible_leaders::enabled(&image));
        assert!(refused(&image, elr(1, UpgradeType::SafeDowngrade)).contains("Can't downgrade to a newer version."));
        let on = update(&image, &[elr(1, UpgradeType::Upgrade)], 1).unwrap();
        on.iter().for_each(|r| image.apply(r));
        assert!(eligible_leaders::enabled(&image));
    }

    #[test]
    fn one_refused_update_refuses_all_and_other_features_keep_their_one_level() {
        let image = image_with_broker(METADATA_FORMAT);
        let group = FeatureUpdate { name: "group.version".into(), level: 1, upgrade: UpgradeType::Upgrade };
        match update(&image, &[elr(0, UpgradeType::UnsafeDowngrade), group], 3) {
            Err(ControllerError::InvalidUpdateVersion(m)) => assert_eq!(
                m,
                "Invalid update version 1 for feature group.version. Local controller 3 does not support this feature."
            ),
            other => panic!("{other:?}"),
        }
        // Level 0 of a feature at 0, or of one unknown, is no change.
        let zero = |name: &str| FeatureUpdate { name: name.into(), level: 0, upgrade: UpgradeType::SafeDowngrade };
        assert_eq!(update(&image, &[zero("group.version"), zero("no.such.feature")], 1).unwrap(), vec![]);
    }

    #[test]
    fn a_level_waits_for_every_broker_to_read_feature_level_records() {
        let image = image_with_broker(FEATURE_LEVELS - 1);
        match update(&image, &[elr(0, UpgradeType::SafeDowngrade)], 1) {
            Err(ControllerError::InvalidUpdateVersion(m)) => {
                assert!(m.ends_with("Broker 2 does not support this feature."))
            }
            other => panic!("{other:?}"),
        }
        // Asking for the level it has needs no record, so it needs no broker to read one.
        assert_eq!(update(&image, &[elr(1, UpgradeType::Upgrade)], 1).unwrap(), vec![]);
    }
}
