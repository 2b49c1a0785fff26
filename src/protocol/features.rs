//! Kafka's feature flags (KIP-584) as runnel answers them: what this broker supports, and
//! the cluster-wide finalized level of each.
//!
//! Every feature runnel knows is supported at exactly one level, so the finalized levels
//! are fixed by the code: there is nothing for UpdateFeatures to change, and a cluster of
//! runnel brokers of one build always agrees. A feature at level 0 is not finalized (as
//! in Kafka, whose ApiVersions lists only levels above 0): `transaction.version` 0 means
//! no KIP-890 transactions, `group.version` 0 no KIP-848 consumer groups, and so on;
//! `eligible.leader.replicas.version` 1 is KIP-966 (`controller::eligible_leaders`).
//! `metadata.version` is the level of the schemas runnel speaks: Kafka 4.1's
//! (kafka-protocol 0.18), whose production level is 4.1-IV1.

/// A feature: its name and the range of levels this broker supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feature {
    pub name: &'static str,
    pub min: i16,
    pub max: i16,
}

/// `metadata.version` 4.1-IV1 (Kafka's `MetadataVersion.IBP_4_1_IV1`).
pub const METADATA_VERSION_4_1_IV1: i16 = 27;

/// The features Kafka 4.x brokers advertise, at the levels runnel supports.
pub const SUPPORTED: &[Feature] = &[
    Feature { name: "metadata.version", min: METADATA_VERSION_4_1_IV1, max: METADATA_VERSION_4_1_IV1 },
    // The voters are in the metadata log (openraft's membership entries) and change with
    // AddRaftVoter/RemoveRaftVoter: Kafka's kraft.version 1 (KIP-853).
    Feature { name: "kraft.version", min: 1, max: 1 },
    Feature { name: "transaction.version", min: 0, max: 0 },
    Feature { name: "group.version", min: 0, max: 0 },
    // Eligible leader replicas (KIP-966), on as in a new Kafka 4.1+ cluster. (The
    // controller keeps them once every broker reads their records: the record format
    // gate, not this level, holds them back in a cluster upgrading from an older release.)
    Feature { name: "eligible.leader.replicas.version", min: 1, max: 1 },
    Feature { name: "share.version", min: 0, max: 0 },
    Feature { name: "streams.version", min: 0, max: 0 },
];

pub fn supported(name: &str) -> Option<&'static Feature> {
    SUPPORTED.iter().find(|f| f.name == name)
}

/// The finalized level of each feature above level 0: the only level supported.
pub fn finalized() -> impl Iterator<Item = (&'static str, i16)> {
    SUPPORTED.iter().filter(|f| f.max > 0).map(|f| (f.name, f.max))
}

/// The finalized level of `name` (0 when not finalized, as Kafka treats a missing one).
pub fn finalized_level(name: &str) -> i16 {
    finalized().find(|(n, _)| *n == name).map_or(0, |(_, level)| level)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_level_per_feature_and_only_those_runnel_has_finalized() {
        assert!(SUPPORTED.iter().all(|f| f.min == f.max));
        assert_eq!(
            finalized().collect::<Vec<_>>(),
            [("metadata.version", 27), ("kraft.version", 1), ("eligible.leader.replicas.version", 1)]
        );
        assert_eq!(finalized_level("transaction.version"), 0);
        assert_eq!(finalized_level("no.such.feature"), 0);
    }
}
