//! Every API kafka-protocol defines, sorted into what runnel serves ([`versions::SUPPORTED`],
//! with a note each), client-facing APIs it does not serve (why, and what is planned), and
//! APIs no client sends (controller and inter-broker traffic). The README's "What is
//! served" table is [`render_readme_table`]'s output; `tests/api_table.rs` fails when the
//! README is stale or when kafka-protocol defines an API that is in none of the lists
//! (regenerate with `RUNNEL_UPDATE_README=1 cargo test --test api_table`).

use kafka_protocol::messages::ApiKey;

use super::versions;

/// What the README says about a served API beyond its versions.
pub const SERVED_NOTES: &[(ApiKey, &str)] = &[
    (ApiKey::Produce, "acks 0/1/all, idempotent producers, min.insync.replicas; topic ids v13+"),
    (
        ApiKey::Fetch,
        "long poll woken per partition, max_bytes/partition max_bytes, topic ids v13+, incremental fetch \
         sessions v7+ (KIP-227, consumers' and followers'); record bytes read outside the partition lock, copied \
         from the page cache or, with `fetch_sendfile`, sent with `sendfile`",
    ),
    (ApiKey::ListOffsets, "earliest, latest, by timestamp, max timestamp"),
    (ApiKey::Metadata, "auto-create (the creating request is answered UNKNOWN_TOPIC_OR_PARTITION, as Kafka 4; the next shows every partition)"),
    (ApiKey::ApiVersions, "finalized features v3+ (metadata.version 4.1-IV1, kraft.version 1, eligible.leader.replicas.version 1 unless set to 0)"),
    (ApiKey::DescribeCluster, "fenced brokers on request v2+"),
    (ApiKey::DescribeTopicPartitions, "cursor pagination (`kafka-topics --describe`)"),
    (ApiKey::InitProducerId, "idempotence; transactions not yet"),
    (ApiKey::FindCoordinator, "batched keys v4+"),
    (ApiKey::JoinGroup, "classic protocol, static membership"),
    (ApiKey::OffsetCommit, "v10 (topic ids) not yet: kafka-protocol 0.18 decodes requests to v9"),
    (ApiKey::OffsetFetch, "multi-group v8+; v10 not yet: kafka-protocol 0.18 decodes requests to v9"),
    (ApiKey::DeleteGroups, "v3 not yet: kafka-protocol 0.18 decodes requests to v2"),
    (ApiKey::DescribeProducers, "idempotent producers' state (`kafka-transactions describe-producers`)"),
    (ApiKey::UpdateFeatures, "eligible.leader.replicas.version 0 or 1; every other feature has one level"),
    (ApiKey::ListConfigResources, "topics, brokers and client-metrics subscriptions"),
    (
        ApiKey::GetTelemetrySubscriptions,
        "KIP-714: subscriptions from client-metrics config resources; zstd, lz4, gzip, snappy accepted",
    ),
    (ApiKey::PushTelemetry, "KIP-714: OTLP metrics decoded, latest values on `/metrics` (`client_telemetry_*`)"),
    (ApiKey::ElectLeaders, "preferred and unclean (`kafka-leader-election`)"),
    (ApiKey::DescribeQuorum, "the controller quorum (`kafka-metadata-quorum`)"),
    (ApiKey::UnregisterBroker, "drop a broker's registration (`kafka-cluster unregister`)"),
    (
        ApiKey::AddRaftVoter,
        "make a learner that caught up a controller quorum voter (`kafka-metadata-quorum add-controller`)",
    ),
    (ApiKey::RemoveRaftVoter, "a voter becomes a learner (`kafka-metadata-quorum remove-controller`)"),
    (
        ApiKey::AlterPartitionReassignments,
        "move replicas; new ones catch up before old ones leave (`kafka-reassign-partitions`)",
    ),
    (ApiKey::ListPartitionReassignments, "reassignments in progress"),
    (
        ApiKey::DescribeLogDirs,
        "every log directory (`log_dirs`), partition sizes, moves as future replicas, the volume's total and usable bytes",
    ),
    (
        ApiKey::AlterReplicaLogDirs,
        "move a partition to another log directory while it serves (`kafka-reassign-partitions` with `log_dirs`)",
    ),
];

const TRANSACTIONS: &str = "transactions: a feature of its own, later";
const KIP_848: &str = "KIP-848 consumer groups: a feature of its own, later";
const SECURITY: &str = "SASL/ACLs/SCRAM/quotas: security features of their own, later";
const SHARE_GROUPS: &str = "KIP-932 share groups: not planned yet";

/// Client-facing APIs kafka-protocol defines that runnel does not serve: (API, plan).
/// They are not advertised; a request for one closes the connection (`protocol::handle_frame`).
pub const NOT_SERVED: &[(ApiKey, &str)] = &[
    (ApiKey::AddPartitionsToTxn, TRANSACTIONS),
    (ApiKey::AddOffsetsToTxn, TRANSACTIONS),
    (ApiKey::EndTxn, TRANSACTIONS),
    (ApiKey::TxnOffsetCommit, TRANSACTIONS),
    (ApiKey::DescribeTransactions, TRANSACTIONS),
    (ApiKey::ListTransactions, TRANSACTIONS),
    (ApiKey::ConsumerGroupHeartbeat, KIP_848),
    (ApiKey::ConsumerGroupDescribe, KIP_848),
    (ApiKey::SaslHandshake, SECURITY),
    (ApiKey::SaslAuthenticate, SECURITY),
    (ApiKey::DescribeAcls, SECURITY),
    (ApiKey::CreateAcls, SECURITY),
    (ApiKey::DeleteAcls, SECURITY),
    (ApiKey::DescribeUserScramCredentials, SECURITY),
    (ApiKey::AlterUserScramCredentials, SECURITY),
    (ApiKey::DescribeClientQuotas, SECURITY),
    (ApiKey::AlterClientQuotas, SECURITY),
    (ApiKey::CreateDelegationToken, SECURITY),
    (ApiKey::RenewDelegationToken, SECURITY),
    (ApiKey::ExpireDelegationToken, SECURITY),
    (ApiKey::DescribeDelegationToken, SECURITY),
    (ApiKey::ShareGroupHeartbeat, SHARE_GROUPS),
    (ApiKey::ShareGroupDescribe, SHARE_GROUPS),
    (ApiKey::ShareFetch, SHARE_GROUPS),
    (ApiKey::ShareAcknowledge, SHARE_GROUPS),
    (ApiKey::DescribeShareGroupOffsets, SHARE_GROUPS),
    (ApiKey::AlterShareGroupOffsets, SHARE_GROUPS),
    (ApiKey::DeleteShareGroupOffsets, SHARE_GROUPS),
];

/// APIs only brokers and controllers send each other (Kafka's controller listener or
/// inter-broker traffic); runnel's own cluster traffic does not use the Kafka protocol for
/// them, and no client sends them.
pub const NOT_CLIENT_FACING: &[ApiKey] = &[
    ApiKey::Vote,
    ApiKey::BeginQuorumEpoch,
    ApiKey::EndQuorumEpoch,
    ApiKey::FetchSnapshot,
    ApiKey::UpdateRaftVoter,
    ApiKey::AlterPartition,
    ApiKey::Envelope,
    ApiKey::BrokerRegistration,
    ApiKey::BrokerHeartbeat,
    ApiKey::ControllerRegistration,
    ApiKey::AllocateProducerIds,
    ApiKey::AssignReplicasToDirs,
    ApiKey::WriteTxnMarkers,
    ApiKey::InitializeShareGroupState,
    ApiKey::ReadShareGroupState,
    ApiKey::WriteShareGroupState,
    ApiKey::DeleteShareGroupState,
    ApiKey::ReadShareGroupStateSummary,
];

/// How `key` is classified: served, not served (with its plan), or not client-facing.
/// `None` for an API in no list, which `tests/api_table.rs` refuses.
pub fn classification(key: ApiKey) -> Option<&'static str> {
    if versions::supported(key).is_some() {
        Some("served")
    } else if NOT_SERVED.iter().any(|(k, _)| *k == key) {
        Some("not served")
    } else if NOT_CLIENT_FACING.contains(&key) {
        Some("not client-facing")
    } else {
        None
    }
}

fn note(key: ApiKey) -> Option<&'static str> {
    SERVED_NOTES.iter().find(|(k, _)| *k == key).map(|(_, n)| *n)
}

/// The README section: the served APIs in api-key order, then the client-facing ones not
/// served, in [`NOT_SERVED`]'s order (grouped by plan).
pub fn render_readme_table() -> String {
    let mut out = String::from("| API | key | versions | notes |\n|---|---|---|---|\n");
    let mut served: Vec<_> = versions::SUPPORTED.to_vec();
    served.sort_by_key(|(k, _, _)| *k as i16);
    for (key, lo, hi) in served {
        let versions = if lo == hi { format!("{lo}") } else { format!("{lo}–{hi}") };
        out += &format!("| {key:?} | {} | {versions} | {} |\n", key as i16, note(key).unwrap_or(""));
    }
    out += "\nClient-facing APIs not served (not advertised in ApiVersions; a request for one closes \
            the connection):\n\n| API | key | why, and what is planned |\n|---|---|---|\n";
    for &(key, plan) in NOT_SERVED {
        out += &format!("| {key:?} | {} | {plan} |\n", key as i16);
    }
    out
}
