//! The API versions runnel serves: the intersection of what kafka-protocol 0.18 can
//! decode (its request types, not `ApiKey::valid_versions`, which overstates some), what
//! Kafka 4.x clients use, and what the handlers implement.

use kafka_protocol::messages::ApiKey;

/// (api key, min version, max version)
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 13),
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::AlterReplicaLogDirs, 1, 2),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::UpdateFeatures, 0, 2),
    (ApiKey::ListConfigResources, 0, 1),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::DescribeQuorum, 0, 2),
    (ApiKey::UnregisterBroker, 0, 0),
    (ApiKey::AddRaftVoter, 0, 0),
    (ApiKey::RemoveRaftVoter, 0, 0),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::GetTelemetrySubscriptions, 0, 0),
    (ApiKey::PushTelemetry, 0, 0),
];

pub fn supported(key: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED.iter().find(|(k, _, _)| *k == key).map(|(_, lo, hi)| (*lo, *hi))
}

pub fn is_supported(key: ApiKey, version: i16) -> bool {
    supported(key).is_some_and(|(lo, hi)| version >= lo && version <= hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_what_the_codec_supports() {
        for (key, lo, hi) in SUPPORTED {
            let v = key.valid_versions();
            assert!(*lo >= v.min && *hi <= v.max, "{key:?} {lo}..{hi} outside {v:?}");
        }
    }

    /// `ApiKey::valid_versions` is not what the crate decodes: for OffsetCommit and
    /// OffsetFetch it says v10 and for InitProducerId v6, while their request types decode
    /// only to v9 and v5. Check each served range against the request type itself.
    #[test]
    fn within_what_the_request_types_decode() {
        use kafka_protocol::messages::*;
        use kafka_protocol::protocol::Message;
        macro_rules! decodable {
            ($key:expr, $($api:ident => $req:ty),* $(,)?) => {
                match $key {
                    $(ApiKey::$api => <$req as Message>::VERSIONS,)*
                    other => panic!("{other:?} is served: add its request type here"),
                }
            };
        }
        for (key, lo, hi) in SUPPORTED {
            let v = decodable!(*key,
                Produce => ProduceRequest, Fetch => FetchRequest, ListOffsets => ListOffsetsRequest,
                Metadata => MetadataRequest, ApiVersions => ApiVersionsRequest,
                CreateTopics => CreateTopicsRequest, DeleteTopics => DeleteTopicsRequest,
                DeleteRecords => DeleteRecordsRequest, InitProducerId => InitProducerIdRequest,
                OffsetForLeaderEpoch => OffsetForLeaderEpochRequest, DescribeConfigs => DescribeConfigsRequest,
                AlterConfigs => AlterConfigsRequest, CreatePartitions => CreatePartitionsRequest,
                IncrementalAlterConfigs => IncrementalAlterConfigsRequest,
                DescribeCluster => DescribeClusterRequest, DescribeTopicPartitions => DescribeTopicPartitionsRequest,
                FindCoordinator => FindCoordinatorRequest, JoinGroup => JoinGroupRequest,
                SyncGroup => SyncGroupRequest, Heartbeat => HeartbeatRequest, LeaveGroup => LeaveGroupRequest,
                OffsetCommit => OffsetCommitRequest, OffsetFetch => OffsetFetchRequest,
                DescribeGroups => DescribeGroupsRequest, ListGroups => ListGroupsRequest,
                DeleteGroups => DeleteGroupsRequest, OffsetDelete => OffsetDeleteRequest,
                DescribeProducers => DescribeProducersRequest, UpdateFeatures => UpdateFeaturesRequest,
                ListConfigResources => ListConfigResourcesRequest,
                ElectLeaders => ElectLeadersRequest, DescribeQuorum => DescribeQuorumRequest,
                UnregisterBroker => UnregisterBrokerRequest,
                AddRaftVoter => AddRaftVoterRequest, RemoveRaftVoter => RemoveRaftVoterRequest,
                DescribeLogDirs => DescribeLogDirsRequest,
                AlterReplicaLogDirs => AlterReplicaLogDirsRequest,
                AlterPartitionReassignments => AlterPartitionReassignmentsRequest,
                ListPartitionReassignments => ListPartitionReassignmentsRequest,
                GetTelemetrySubscriptions => GetTelemetrySubscriptionsRequest,
                PushTelemetry => PushTelemetryRequest,
            );
            assert!(*lo >= v.min && *hi <= v.max, "{key:?} {lo}..{hi} outside the request type's {v:?}");
        }
    }

    /// Every version served is one the request guard knows the layout of.
    #[test]
    fn within_what_the_guard_checks() {
        let guarded: Vec<_> = crate::protocol::guard::supported_apis().collect();
        for (key, lo, hi) in SUPPORTED {
            let (_, range) = guarded
                .iter()
                .find(|(k, _)| *k == *key as i16)
                .unwrap_or_else(|| panic!("{key:?} is served but not guarded"));
            assert!(range.contains(lo) && range.contains(hi), "{key:?} {lo}..{hi} outside guard {range:?}");
        }
    }
}
