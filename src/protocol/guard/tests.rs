//! Guard tests: exact tables (round trips), prefixes, hostile lengths, mutations.

use super::*;
use crate::storage::test_util::{mutate, XorShift};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

const BRIEF_KEYS: [i16; 51] = [
    0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 28, 32, 33, 34, 35, 36, 37,
    42, 43, 44, 45, 46, 47, 55, 57, 60, 61, 64, 80, 81, 65, 66, 68, 69, 74, 75, 71, 72,
];

fn header_version(key: i16, version: i16) -> i16 {
    ApiKey::try_from(key).unwrap().request_header_version(version)
}

/// Decodes the body of `api_key` at `version` with the crate's own message type and
/// encodes it again; `Err` if the crate refuses the bytes.
fn decode_and_reencode(api_key: i16, body: &mut Bytes, version: i16) -> anyhow::Result<Vec<u8>> {
    fn round_trip<T: Decodable + Encodable>(body: &mut Bytes, version: i16) -> anyhow::Result<Vec<u8>> {
        let message = T::decode(body, version)?;
        let mut out = BytesMut::new();
        message.encode(&mut out, version)?;
        Ok(out.to_vec())
    }
    macro_rules! by_key {
        ($($key:literal => $message:ident,)*) => {
            match api_key {
                $($key => round_trip::<$message>(body, version),)*
                _ => anyhow::bail!("api key {api_key} is not guarded"),
            }
        };
    }
    by_key! {
        0 => ProduceRequest, 1 => FetchRequest, 2 => ListOffsetsRequest, 3 => MetadataRequest,
        8 => OffsetCommitRequest, 9 => OffsetFetchRequest, 10 => FindCoordinatorRequest,
        11 => JoinGroupRequest, 12 => HeartbeatRequest, 13 => LeaveGroupRequest,
        14 => SyncGroupRequest, 15 => DescribeGroupsRequest, 16 => ListGroupsRequest,
        17 => SaslHandshakeRequest, 18 => ApiVersionsRequest, 19 => CreateTopicsRequest,
        20 => DeleteTopicsRequest, 21 => DeleteRecordsRequest, 22 => InitProducerIdRequest,
        23 => OffsetForLeaderEpochRequest, 24 => AddPartitionsToTxnRequest,
        25 => AddOffsetsToTxnRequest, 26 => EndTxnRequest, 28 => TxnOffsetCommitRequest,
        32 => DescribeConfigsRequest, 33 => AlterConfigsRequest, 34 => AlterReplicaLogDirsRequest,
        35 => DescribeLogDirsRequest,
        36 => SaslAuthenticateRequest, 37 => CreatePartitionsRequest, 42 => DeleteGroupsRequest,
        43 => ElectLeadersRequest, 44 => IncrementalAlterConfigsRequest,
        45 => AlterPartitionReassignmentsRequest, 46 => ListPartitionReassignmentsRequest, 47 => OffsetDeleteRequest,
        55 => DescribeQuorumRequest, 57 => UpdateFeaturesRequest, 64 => UnregisterBrokerRequest,
        80 => AddRaftVoterRequest, 81 => RemoveRaftVoterRequest,
        60 => DescribeClusterRequest, 61 => DescribeProducersRequest,
        65 => DescribeTransactionsRequest, 66 => ListTransactionsRequest,
        68 => ConsumerGroupHeartbeatRequest, 69 => ConsumerGroupDescribeRequest,
        74 => ListConfigResourcesRequest, 75 => DescribeTopicPartitionsRequest,
        71 => GetTelemetrySubscriptionsRequest, 72 => PushTelemetryRequest,
    }
}

/// Decodes `frame` the way the broker will once the guard has passed it, and returns
/// the crate's re-encoding of header and body.
fn crate_round_trip(frame: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Bytes::copy_from_slice(frame);
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let header_version = header_version(key, version);
    let header = RequestHeader::decode(&mut bytes, header_version)?;
    let mut out = BytesMut::new();
    header.encode(&mut out, header_version)?;
    out.extend(decode_and_reencode(key, &mut bytes, version)?);
    Ok(out.to_vec())
}

fn all_api_versions() -> impl Iterator<Item = (&'static Api, i16)> {
    APIS.iter().flat_map(|api| (api.min..=api.max).map(move |v| (*api, v)))
}

// --- a request synthesiser driven by the layout tables ---------------------------

fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_len(out: &mut Vec<u8>, flexible: bool, wide: bool, n: usize) {
    if flexible {
        put_uvarint(out, n as u32 + 1);
    } else if wide {
        out.extend((n as i32).to_be_bytes());
    } else {
        out.extend((n as i16).to_be_bytes());
    }
}

/// Writes a value of every field present in `version`: two elements per array,
/// non-null strings and structs, every known tagged field set. Fixed-width fields
/// are 0x7f bytes, so a table that mistakes one for a length trips the decoder.
fn put_layout(out: &mut Vec<u8>, layout: &Layout, version: i16, flexible: bool) {
    for field in layout.fields {
        if (field.min..=field.max).contains(&version) {
            put_value(out, field.ty, version, flexible);
        }
    }
    if flexible {
        let tags: Vec<_> = layout.tags.iter().filter(|k| (k.min..=k.max).contains(&version)).collect();
        put_uvarint(out, tags.len() as u32);
        for k in tags {
            let mut content = Vec::new();
            put_value(&mut content, k.ty, version, true);
            put_uvarint(out, k.tag);
            put_uvarint(out, content.len() as u32);
            out.extend(content);
        }
    }
}

fn put_value(out: &mut Vec<u8>, ty: Ty, version: i16, flexible: bool) {
    match ty {
        Ty::Fixed(width) => out.extend(std::iter::repeat_n(0x7f, width)),
        Ty::Bool => out.push(1),
        Ty::Str | Ty::NStr => {
            put_len(out, flexible, false, 2);
            out.extend(b"ab");
        }
        Ty::Bytes | Ty::Records => {
            put_len(out, flexible, true, 3);
            out.extend([1, 2, 3]);
        }
        Ty::Prims(width) | Ty::NPrims(width) => {
            put_len(out, flexible, true, 2);
            out.extend(std::iter::repeat_n(0x7f, 2 * width));
        }
        Ty::Strs | Ty::NStrs => {
            put_len(out, flexible, true, 2);
            for _ in 0..2 {
                put_value(out, Ty::Str, version, flexible);
            }
        }
        Ty::Array(layout) | Ty::NArray(layout) => {
            put_len(out, flexible, true, 2);
            for _ in 0..2 {
                put_layout(out, layout, version, flexible);
            }
        }
        Ty::One(layout) => put_layout(out, layout, version, flexible),
        Ty::NOne(layout) => {
            out.push(1);
            put_layout(out, layout, version, flexible);
        }
    }
}

fn header_bytes(key: i16, version: i16) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(key)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("runnel-test")));
    let mut out = BytesMut::new();
    header.encode(&mut out, header_version(key, version)).unwrap();
    out.to_vec()
}

/// A fully populated request for `api` at `version`.
fn synth(api: &Api, version: i16) -> Vec<u8> {
    let mut out = header_bytes(api.key, version);
    put_layout(&mut out, api.body, version, version >= api.flexible_from);
    out
}

/// Every API and version, populated, as the crate itself encodes it.
fn valid_frames() -> Vec<Vec<u8>> {
    all_api_versions().map(|(api, v)| synth(api, v)).collect()
}

// --- the tables are exact ----------------------------------------------------------

#[test]
fn covers_the_brokers_apis() {
    let keys: Vec<i16> = APIS.iter().map(|api| api.key).collect();
    assert_eq!(keys, BRIEF_KEYS);
    for api in APIS {
        let valid = ApiKey::try_from(api.key).unwrap().valid_versions();
        assert!(valid.min <= api.min && api.max <= valid.max, "api {}", api.key);
    }
}

/// Synthesise from the table, decode with the crate, re-encode with the crate: the
/// bytes must come back identical, so the crate read exactly the fields (and tagged
/// fields) the table describes; then the guard accepts the crate's own encoding.
#[test]
fn every_api_and_version_round_trips_through_the_crate() {
    let mut checked = 0;
    for (api, version) in all_api_versions() {
        let frame = synth(api, version);
        assert_eq!(check_request(&frame), Ok(()), "api {} v{version}", api.key);
        let encoded =
            crate_round_trip(&frame).unwrap_or_else(|e| panic!("crate rejects api {} v{version}: {e}", api.key));
        assert_eq!(encoded, frame, "api {} v{version} re-encodes differently", api.key);
        checked += 1;
    }
    assert_eq!(checked, 226);
}

/// Requests built with kafka-protocol's builders, tagged fields included.
#[test]
fn builder_made_requests_pass() {
    use kafka_protocol::messages::create_topics_request::*;
    use kafka_protocol::messages::fetch_request::*;
    use kafka_protocol::messages::metadata_request::*;
    use kafka_protocol::messages::produce_request::*;
    use kafka_protocol::messages::*;

    let topic_name = || TopicName(StrBytes::from_static_str("orders"));
    let partition = FetchPartition::default().with_partition(3).with_fetch_offset(42);
    let fetch = FetchRequest::default()
        .with_cluster_id(Some(StrBytes::from_static_str("cluster")))
        .with_replica_state(ReplicaState::default().with_replica_id(BrokerId(1)).with_replica_epoch(9))
        .with_topics(vec![FetchTopic::default().with_partitions(vec![partition.clone(), partition])])
        .with_forgotten_topics_data(vec![ForgottenTopic::default().with_partitions(vec![1, 2])]);
    let metadata = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(topic_name()))]));
    let produce = ProduceRequest::default().with_topic_data(vec![TopicProduceData::default()
        .with_name(topic_name())
        .with_partition_data(vec![PartitionProduceData::default()
            .with_index(0)
            .with_records(Some(Bytes::from_static(b"not a real batch")))])]);
    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(topic_name())
        .with_assignments(vec![CreatableReplicaAssignment::default()
            .with_partition_index(0)
            .with_broker_ids(vec![BrokerId(1), BrokerId(2)])])
        .with_configs(vec![CreatableTopicConfig::default()
            .with_name(StrBytes::from_static_str("retention.ms"))
            .with_value(Some(StrBytes::from_static_str("1000")))])]);

    check_built(1, &fetch.clone(), 15..=18);
    check_built(1, &fetch.with_replica_state(Default::default()), 12..=14);
    check_built(3, &metadata, 4..=13);
    check_built(0, &produce, 3..=12);
    check_built(19, &create, 2..=7);

    use kafka_protocol::messages::describe_topic_partitions_request::*;
    let page = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![TopicRequest::default().with_name(topic_name())])
        .with_response_partition_limit(10);
    let cursor = Cursor::default().with_topic_name(topic_name()).with_partition_index(7);
    check_built(75, &page.clone().with_cursor(Some(cursor)), 0..=0);
    check_built(75, &page, 0..=0);

    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
    let update = |key: FeatureUpdateKey| {
        UpdateFeaturesRequest::default().with_timeout_ms(60_000).with_feature_updates(vec![key
            .with_feature(StrBytes::from_static_str("metadata.version"))
            .with_max_version_level(27)])
    };
    check_built(57, &update(FeatureUpdateKey::default().with_allow_downgrade(true)), 0..=0);
    check_built(57, &update(FeatureUpdateKey::default().with_upgrade_type(2)).with_validate_only(true), 1..=2);
    check_built(74, &ListConfigResourcesRequest::default(), 0..=0);
    check_built(74, &ListConfigResourcesRequest::default().with_resource_types(vec![2, 4, 16]), 1..=1);

    // ElectLeaders for all partitions (a null list) and for named ones.
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    let all = ElectLeadersRequest::default().with_election_type(1).with_timeout_ms(30_000);
    let named = all.clone().with_topic_partitions(Some(vec![TopicPartitions::default()
        .with_topic(topic_name())
        .with_partitions(vec![0, 3])]));
    check_built(43, &all, 1..=2);
    check_built(43, &named, 1..=2);
}

fn check_built<T>(key: i16, body: &T, versions: std::ops::RangeInclusive<i16>)
where
    T: Encodable + Decodable + PartialEq + std::fmt::Debug,
{
    for version in versions {
        let header = RequestHeader::default()
            .with_request_api_key(key)
            .with_request_api_version(version)
            .with_client_id(Some(StrBytes::from_static_str("builder")));
        let mut frame = BytesMut::new();
        header.encode(&mut frame, header_version(key, version)).unwrap();
        body.encode(&mut frame, version).unwrap();
        assert_eq!(check_request(&frame), Ok(()), "api {key} v{version}");
        assert_eq!(crate_round_trip(&frame).unwrap(), frame.to_vec(), "api {key} v{version}");
        let mut bytes = frame.freeze();
        RequestHeader::decode(&mut bytes, header_version(key, version)).unwrap();
        assert_eq!(&T::decode(&mut bytes, version).unwrap(), body, "api {key} v{version}");
    }
}

/// Arrays size their allocation by count; the count bound assumes every element
/// takes at least one byte, which holds if every struct has a field in each version
/// it is used at, or is flexible (its tagged-field count is one byte).
#[test]
fn every_array_element_takes_at_least_one_byte() {
    fn check(layout: &Layout, version: i16, flexible: bool) {
        let present = layout.fields.iter().filter(|f| (f.min..=f.max).contains(&version));
        for field in present {
            if let Ty::Array(inner) | Ty::NArray(inner) = field.ty {
                let element_fields = inner.fields.iter().filter(|f| (f.min..=f.max).contains(&version));
                assert!(flexible || element_fields.count() > 0, "{} v{version}", field.name);
            }
            if let Ty::Array(inner) | Ty::NArray(inner) | Ty::One(inner) | Ty::NOne(inner) = field.ty {
                check(inner, version, flexible);
            }
        }
    }
    for (api, version) in all_api_versions() {
        check(api.body, version, version >= api.flexible_from);
    }
}

// --- hostile frames ----------------------------------------------------------------

#[test]
fn unknown_api_and_version_are_named() {
    assert_eq!(check_request(&[0, 1]), Err(GuardError::TooShort(2)));
    assert_eq!(check_request(&[0x7f, 0, 0, 0, 0, 0, 0, 0]), Err(GuardError::UnknownApi(0x7f00)));
    // WriteTxnMarkers is a real API, but not one this broker serves.
    assert_eq!(check_request(&[0, 27, 0, 1]), Err(GuardError::UnknownApi(27)));
    // A client newer than us: ApiVersions v9 is answered with v0 by the caller.
    let mut frame = synth(&layouts::api_versions::API, 4);
    frame[3] = 9;
    assert_eq!(check_request(&frame), Err(GuardError::UnsupportedVersion { api_key: 18, version: 9 }));
}

#[test]
fn every_strict_prefix_is_rejected_or_decodes() {
    for frame in valid_frames() {
        for len in 0..frame.len() {
            let prefix = &frame[..len];
            if check_request(prefix).is_ok() {
                assert!(crate_round_trip(prefix).is_ok(), "accepted a prefix the crate rejects");
            }
        }
    }
}

/// Header, then the top-level fields up to the first array, then a count of
/// 0x7fffffff (non-flexible) or 0xffffffff as a varint (flexible), then four bytes.
fn huge_array_frame(api: &Api, version: i16) -> Option<Vec<u8>> {
    let flexible = version >= api.flexible_from;
    let mut out = header_bytes(api.key, version);
    for field in api.body.fields.iter().filter(|f| (f.min..=f.max).contains(&version)) {
        if let Ty::Array(_) | Ty::NArray(_) | Ty::Prims(_) | Ty::Strs | Ty::NStrs = field.ty {
            if flexible {
                out.extend([0xff, 0xff, 0xff, 0xff, 0x0f]);
            } else {
                out.extend(0x7fff_ffff_i32.to_be_bytes());
            }
            out.extend([0, 0, 0, 0]);
            return Some(out);
        }
        put_value(&mut out, field.ty, version, flexible);
    }
    None
}

#[test]
fn huge_array_counts_are_rejected() {
    let named = [
        (&layouts::metadata::API, 12),
        (&layouts::metadata::API, 8),
        (&layouts::produce::API, 9),
        (&layouts::produce::API, 8),
        (&layouts::fetch::API, 12),
        (&layouts::fetch::API, 11),
        (&layouts::create_topics::API, 5),
        (&layouts::create_topics::API, 4),
    ];
    for (api, version) in named {
        let frame = huge_array_frame(api, version).unwrap();
        assert!(matches!(check_request(&frame), Err(GuardError::Malformed { .. })));
    }
    let mut attacked = 0;
    for (api, version) in all_api_versions() {
        if let Some(frame) = huge_array_frame(api, version) {
            let err = check_request(&frame).unwrap_err();
            assert!(matches!(err, GuardError::Malformed { .. }), "api {} v{version}: {err}", api.key);
            attacked += 1;
        }
    }
    assert!(attacked > 150, "{attacked}");
}

#[test]
fn huge_lengths_inside_tagged_fields_are_rejected() {
    // Fetch v12 with tag 0 (cluster_id) declaring 1 byte but holding a string that
    // claims 2^32 - 2 bytes.
    let api = &layouts::fetch::API;
    let mut frame = synth(api, 12);
    // The top-level tagged fields: count 1, tag 0, size 3, compact string "ab".
    let tagged_at = frame.len() - 6;
    assert_eq!(frame[tagged_at..], [1, 0, 3, 3, b'a', b'b']);
    frame.truncate(tagged_at);
    let mut lying = frame.clone();
    lying.extend([1, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0]);
    assert!(matches!(check_request(&lying), Err(GuardError::Malformed { .. })));
    // A size that disagrees with the content would desynchronise guard and decoder.
    let mut padded = frame;
    padded.extend([1, 0, 5, 3, b'a', b'b', 0, 0]);
    assert!(matches!(check_request(&padded), Err(GuardError::Malformed { .. })));
}

/// Seeds the cargo-fuzz corpus with one valid frame per API and version:
/// `RUNNEL_FUZZ_CORPUS=fuzz/corpus/decode_request cargo test write_fuzz_seed_corpus`.
/// Does nothing without the variable.
#[test]
fn write_fuzz_seed_corpus() {
    let Some(dir) = std::env::var_os("RUNNEL_FUZZ_CORPUS") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    for (api, version) in all_api_versions() {
        let path = std::path::Path::new(&dir).join(format!("seed-{}-v{version}", api.key));
        std::fs::write(path, synth(api, version)).unwrap();
    }
}

/// The guard's promise on stable: whatever it accepts the crate decodes without
/// aborting (an oversized allocation would abort the test binary).
#[test]
fn random_mutations_never_reach_a_crashing_decode() {
    let frames = valid_frames();
    let mut rng = XorShift(0x5eed_cafe_f00d_d00d);
    let mut accepted = 0;
    for _ in 0..200_000 {
        let mut frame = frames[rng.below(frames.len())].clone();
        mutate(&mut rng, &mut frame);
        if check_request(&frame).is_ok() {
            accepted += 1;
            let _ = crate_round_trip(&frame);
        }
    }
    assert!(accepted > 1000, "only {accepted} mutants accepted; the test exercises little");
}
