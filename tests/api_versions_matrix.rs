//! Every (API, version) the broker advertises is answered with a response that decodes at
//! that version. kafka-protocol refuses to encode a value in a field the version does not
//! have, and the broker then closes the connection, so a field set unconditionally in a
//! handler shows up here as a closed connection at the old versions.

mod common;
#[path = "api_versions_matrix/groups.rs"]
mod groups;

use anyhow::Context;
use common::batches::{self, Rec};
use common::requests::*;
use common::{ensure, str, Client, TestBroker};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::fetch_request::FetchTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{OffsetForLeaderPartition, OffsetForLeaderTopic};
use kafka_protocol::messages::*;
use runnel::protocol::versions::SUPPORTED;

const TOPIC: &str = "matrix";
/// Create times of the three records in [`TOPIC`].
const T0: i64 = 1_700_000_000_000;

/// The shared topic every read-only request looks at: one partition, three records with
/// timestamps T0, T0+10, T0+20 at offsets 0, 1, 2.
struct Fixture {
    topic_id: uuid::Uuid,
    leader_epoch: i32,
    port: i32,
}

async fn fixture(broker: &TestBroker) -> Fixture {
    let mut c = broker.client().await;
    let topic_id = c.create_topic_ok(TOPIC, 1, &[]).await;
    let recs: Vec<Rec> = (0..3).map(|i| Rec::value(&format!("m-{i}")).at(T0 + 10 * i)).collect();
    assert_eq!(c.produce_ok(TOPIC, 0, batches::batch(&recs)).await, 0);
    c.create_topic_ok("matrix-ac", 1, &[]).await;
    c.create_topic_ok("matrix-iac", 1, &[]).await;
    let md = c.metadata(&[TOPIC]).await;
    let leader_epoch = md.topics[0].partitions[0].leader_epoch;
    Fixture { topic_id, leader_epoch, port: broker.addr().port() as i32 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_supported_api_and_version_answers() {
    let broker = TestBroker::start_with(|c| c.auto_create_topics = false).await;
    let fx = fixture(&broker).await;
    let mut failures = Vec::new();
    let mut checked = 0;
    for &(api, lo, hi) in SUPPORTED {
        for v in lo..=hi {
            // A fresh connection each time: a failed encode closes the previous one.
            let mut c = broker.client().await;
            if let Err(e) = check(&mut c, &broker, &fx, api, v).await {
                failures.push(format!("{api:?} v{v}: {e:#}"));
            }
            checked += 1;
        }
    }
    let expected: i32 = SUPPORTED.iter().map(|(_, lo, hi)| i32::from(hi - lo + 1)).sum();
    assert_eq!(checked, expected);
    assert!(
        failures.is_empty(),
        "{} of {checked} (api, version) pairs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

async fn check(c: &mut Client, broker: &TestBroker, fx: &Fixture, api: ApiKey, v: i16) -> anyhow::Result<()> {
    match api {
        ApiKey::ApiVersions => api_versions(c, v).await,
        ApiKey::Produce => produce(c, v).await,
        ApiKey::Fetch => fetch(c, fx, v).await,
        ApiKey::ListOffsets => list_offsets(c, fx, v).await,
        ApiKey::Metadata => metadata(c, fx, v).await,
        ApiKey::CreateTopics => create_topics(c, broker, v).await,
        ApiKey::DeleteTopics => delete_topics(c, broker, v).await,
        ApiKey::DeleteRecords => delete_records(c, broker, v).await,
        ApiKey::InitProducerId => init_producer_id(c, v).await,
        ApiKey::OffsetForLeaderEpoch => offset_for_leader_epoch(c, fx, v).await,
        ApiKey::DescribeConfigs => describe_configs(c, v).await,
        ApiKey::AlterConfigs => alter_configs(c, broker, v).await,
        ApiKey::CreatePartitions => create_partitions(c, broker, v).await,
        ApiKey::IncrementalAlterConfigs => incremental_alter_configs(c, broker, v).await,
        ApiKey::DescribeCluster => describe_cluster(c, fx, v).await,
        ApiKey::DescribeTopicPartitions => describe_topic_partitions(c, fx, v).await,
        ApiKey::DescribeProducers => describe_producers(c, v).await,
        ApiKey::UpdateFeatures => update_features(c, v).await,
        ApiKey::ListConfigResources => list_config_resources(c, v).await,
        ApiKey::ElectLeaders => elect_leaders(c, v).await,
        ApiKey::DescribeQuorum => describe_quorum(c, v).await,
        ApiKey::UnregisterBroker => unregister_broker(c, v).await,
        ApiKey::AddRaftVoter => add_raft_voter(c, v).await,
        ApiKey::RemoveRaftVoter => remove_raft_voter(c, v).await,
        ApiKey::DescribeLogDirs => describe_log_dirs(c, v).await,
        ApiKey::AlterReplicaLogDirs => alter_replica_log_dirs(c, v).await,
        ApiKey::AlterPartitionReassignments => alter_partition_reassignments(c, v).await,
        ApiKey::ListPartitionReassignments => list_partition_reassignments(c, v).await,
        ApiKey::FindCoordinator => groups::find_coordinator(c, fx.port, v).await,
        ApiKey::JoinGroup => groups::join_group(c, v).await,
        ApiKey::SyncGroup => groups::sync_group(c, v).await,
        ApiKey::Heartbeat => groups::heartbeat(c, v).await,
        ApiKey::LeaveGroup => groups::leave_group(c, v).await,
        ApiKey::OffsetCommit => groups::offset_commit(c, TOPIC, v).await,
        ApiKey::OffsetFetch => groups::offset_fetch(c, TOPIC, v).await,
        ApiKey::DescribeGroups => groups::describe_groups(c, v).await,
        ApiKey::ListGroups => groups::list_groups(c, v).await,
        ApiKey::DeleteGroups => groups::delete_groups(c, TOPIC, v).await,
        ApiKey::OffsetDelete => groups::offset_delete(c, TOPIC, v).await,
        ApiKey::GetTelemetrySubscriptions => get_telemetry_subscriptions(c, v).await.map(drop),
        ApiKey::PushTelemetry => push_telemetry(c, v).await,
        other => anyhow::bail!("no representative request for {other:?}: add one"),
    }
}

fn advertised_matches_supported(resp: &ApiVersionsResponse) -> anyhow::Result<()> {
    let mut got: Vec<(i16, i16, i16)> =
        resp.api_keys.iter().map(|k| (k.api_key, k.min_version, k.max_version)).collect();
    let mut want: Vec<(i16, i16, i16)> = SUPPORTED.iter().map(|(k, lo, hi)| (*k as i16, *lo, *hi)).collect();
    got.sort();
    want.sort();
    ensure(got == want, || format!("advertised {got:?}, serving {want:?}"))
}

async fn api_versions(c: &mut Client, v: i16) -> anyhow::Result<()> {
    let mut req = ApiVersionsRequest::default();
    if v >= 3 {
        req = req.with_client_software_name(str("runnel-it")).with_client_software_version(str("0.1"));
    }
    let resp = c.try_send(v, req).await?;
    ensure(resp.error_code == 0, || format!("error {}", resp.error_code))?;
    advertised_matches_supported(&resp)?;
    if v >= 3 {
        // KIP-584 features: v3 leaves out those with a 0 minimum, as Kafka does.
        let supported: Vec<_> =
            resp.supported_features.iter().map(|f| (f.name.to_string(), f.min_version, f.max_version)).collect();
        // eligible.leader.replicas.version is 0-1, as in Kafka: only v4 lists it.
        let want_supported = if v >= 4 { 7 } else { 2 };
        ensure(
            supported.len() == want_supported
                && supported.contains(&("metadata.version".into(), 27, 27))
                && supported.contains(&("kraft.version".into(), 1, 1))
                && (v < 4 || supported.contains(&("eligible.leader.replicas.version".into(), 0, 1))),
            || format!("supported features {supported:?}"),
        )?;
        let finalized: Vec<_> = resp
            .finalized_features
            .iter()
            .map(|f| (f.name.to_string(), f.min_version_level, f.max_version_level))
            .collect();
        let want = [
            ("metadata.version".to_string(), 27, 27),
            ("kraft.version".to_string(), 1, 1),
            ("eligible.leader.replicas.version".to_string(), 1, 1),
        ];
        ensure(finalized == want, || format!("finalized {finalized:?}"))?;
        ensure(resp.finalized_features_epoch >= 0, || format!("epoch {}", resp.finalized_features_epoch))?;
    }
    Ok(())
}

async fn produce(c: &mut Client, v: i16) -> anyhow::Result<()> {
    // From v13 a request names topics by id (KIP-516), and so does the response.
    let by_id = |mut req: ProduceRequest, id: uuid::Uuid| {
        if v >= 13 {
            req.topic_data[0].name = Default::default();
            req.topic_data[0].topic_id = id;
        }
        req
    };
    // The topic does not exist (auto-create is off): first the error path...
    let missing = by_id(produce_request("matrix-produce", 0, batches::values("p", 2), -1), uuid::Uuid::from_u128(7));
    let resp = c.try_send(v, missing).await?;
    let p = &resp.responses[0].partition_responses[0];
    let want = if v >= 13 { 100 } else { 3 };
    ensure(p.error_code == want, || format!("produce to a missing topic: error {} != {want}", p.error_code))?;
    // ...then the success path, on a topic of its own.
    let topic = format!("matrix-produce-v{v}");
    let id = c.create_topic_ok(&topic, 1, &[]).await;
    for expected_base in [0, 2] {
        let resp = c.try_send(v, by_id(produce_request(&topic, 0, batches::values("p", 2), -1), id)).await?;
        ensure(resp.responses.len() == 1, || "one topic".into())?;
        let t = &resp.responses[0];
        if v >= 13 {
            ensure(t.topic_id == id && t.name.0.is_empty(), || format!("topic {:?} {}", t.name, t.topic_id))?;
        } else {
            ensure(t.name.0.as_str() == topic, || format!("topic {:?}", t.name))?;
        }
        let p = &t.partition_responses[0];
        ensure(p.error_code == 0, || format!("error {} {:?}", p.error_code, p.error_message))?;
        ensure(p.base_offset == expected_base, || format!("base offset {} != {expected_base}", p.base_offset))?;
        if v >= 5 {
            ensure(p.log_start_offset == 0, || format!("log start offset {}", p.log_start_offset))?;
        }
    }
    let end = c.log_end_offset(&topic, 0).await;
    ensure(end == 4, || format!("log end offset {end} after two batches of two"))
}

async fn fetch(c: &mut Client, fx: &Fixture, v: i16) -> anyhow::Result<()> {
    let mut req = fetch_request(TOPIC, 0, 0, 1024 * 1024);
    if v >= 13 {
        req.topics = vec![FetchTopic::default().with_topic_id(fx.topic_id).with_partitions(vec![fetch_partition(
            0,
            0,
            1024 * 1024,
        )])];
    }
    let resp = c.try_send(v, req).await?;
    ensure(resp.error_code == 0, || format!("top-level error {}", resp.error_code))?;
    ensure(resp.responses.len() == 1, || format!("{} topics", resp.responses.len()))?;
    let t = &resp.responses[0];
    if v >= 13 {
        ensure(t.topic_id == fx.topic_id, || format!("topic id {}", t.topic_id))?;
    } else {
        ensure(t.topic.0.as_str() == TOPIC, || format!("topic {:?}", t.topic))?;
    }
    let p = &t.partitions[0];
    ensure(p.error_code == 0, || format!("partition error {}", p.error_code))?;
    ensure(p.high_watermark == 3, || format!("high watermark {}", p.high_watermark))?;
    let values = batches::decode_values(&p.records);
    ensure(values == ["m-0", "m-1", "m-2"], || format!("records {values:?}"))?;
    // And a fetch of a partition that does not exist answers per partition.
    let mut missing = fetch_request(TOPIC, 7, 0, 1024);
    if v >= 13 {
        missing.topics =
            vec![FetchTopic::default().with_topic_id(fx.topic_id).with_partitions(vec![fetch_partition(7, 0, 1024)])];
    }
    let resp = c.try_send(v, missing).await.context("fetch of a missing partition")?;
    let code = resp.responses[0].partitions[0].error_code;
    ensure(code == 3, || format!("missing partition: error {code}"))
}

async fn list_offsets(c: &mut Client, fx: &Fixture, v: i16) -> anyhow::Result<()> {
    let mut cases = vec![(LATEST, 3, -1), (EARLIEST, 0, -1), (T0 + 10, 1, T0 + 10), (T0 + 5, 1, T0 + 10)];
    if v >= 7 {
        cases.push((MAX_TIMESTAMP, 2, T0 + 20));
    }
    for (ts, want_offset, want_ts) in cases {
        let mut req = list_offsets_request(TOPIC, 0, ts);
        if v >= 10 {
            // KIP-1075: the wait for a remote-storage lookup; no topic here has one.
            req = req.with_timeout_ms(30_000);
        }
        let resp = c.try_send(v, req).await.with_context(|| format!("timestamp {ts}"))?;
        let p = &resp.topics[0].partitions[0];
        ensure(p.error_code == 0, || format!("timestamp {ts}: error {}", p.error_code))?;
        ensure(p.offset == want_offset, || format!("timestamp {ts}: offset {} != {want_offset}", p.offset))?;
        if want_ts >= 0 {
            ensure(p.timestamp == want_ts, || format!("timestamp {ts}: found timestamp {}", p.timestamp))?;
        }
        if v >= 4 {
            ensure(p.leader_epoch == fx.leader_epoch, || format!("leader epoch {}", p.leader_epoch))?;
        }
    }
    Ok(())
}

async fn metadata(c: &mut Client, fx: &Fixture, v: i16) -> anyhow::Result<()> {
    let resp = c.try_send(v, metadata_request(&[TOPIC])).await?;
    ensure(resp.brokers.len() == 1, || format!("{} brokers", resp.brokers.len()))?;
    let b = &resp.brokers[0];
    ensure(b.node_id.0 == 1 && b.port == fx.port, || format!("broker {b:?}"))?;
    if v >= 1 {
        ensure(resp.controller_id.0 == 1, || format!("controller {:?}", resp.controller_id))?;
    }
    if v >= 2 {
        ensure(resp.cluster_id.as_ref().is_some_and(|id| !id.is_empty()), || "no cluster id".into())?;
    }
    if v >= 13 {
        // KIP-1102's top-level error (REBOOTSTRAP_REQUIRED when it is not 0).
        ensure(resp.error_code == 0, || format!("top-level error {}", resp.error_code))?;
    }
    ensure(resp.topics.len() == 1, || format!("{} topics", resp.topics.len()))?;
    let t = &resp.topics[0];
    ensure(t.error_code == 0, || format!("topic error {}", t.error_code))?;
    ensure(t.name.as_ref().is_some_and(|n| n.0.as_str() == TOPIC), || format!("name {:?}", t.name))?;
    if v >= 10 {
        ensure(t.topic_id == fx.topic_id, || format!("topic id {}", t.topic_id))?;
    }
    ensure(t.partitions.len() == 1, || format!("{} partitions", t.partitions.len()))?;
    let p = &t.partitions[0];
    ensure(p.error_code == 0 && p.leader_id.0 == 1, || format!("partition {p:?}"))?;
    ensure(p.replica_nodes.len() == 1 && p.isr_nodes.len() == 1, || format!("partition {p:?}"))
}

async fn create_topics(c: &mut Client, broker: &TestBroker, v: i16) -> anyhow::Result<()> {
    let name = format!("matrix-ct-v{v}");
    let resp = c.try_send(v, create_topics_request(&name, 2, 1, &[("retention.ms", "1234")])).await?;
    let t = &resp.topics[0];
    ensure(t.error_code == 0, || format!("error {} {:?}", t.error_code, t.error_message))?;
    if v >= 5 {
        ensure(t.num_partitions == 2 && t.replication_factor == 1, || {
            format!("{} partitions, rf {}", t.num_partitions, t.replication_factor)
        })?;
        let configs = t.configs.as_deref().unwrap_or_default();
        let retention = configs.iter().find(|e| e.name.as_str() == "retention.ms");
        ensure(retention.is_some_and(|e| e.value.as_deref() == Some("1234") && e.config_source == 1), || {
            format!("retention.ms {retention:?}")
        })?;
    }
    if v >= 7 {
        ensure(!t.topic_id.is_nil(), || "nil topic id".into())?;
    }
    // Again: already exists.
    let resp = c.try_send(v, create_topics_request(&name, 2, 1, &[])).await.context("duplicate create")?;
    ensure(resp.topics[0].error_code == 36, || format!("duplicate: error {}", resp.topics[0].error_code))?;
    let md = broker.client().await.metadata(&[&name]).await;
    ensure(md.topics[0].partitions.len() == 2, || {
        format!("metadata shows {} partitions", md.topics[0].partitions.len())
    })
}

async fn delete_topics(c: &mut Client, broker: &TestBroker, v: i16) -> anyhow::Result<()> {
    let name = format!("matrix-dt-v{v}");
    let id = broker.client().await.create_topic_ok(&name, 1, &[]).await;
    let req = if v >= 6 {
        DeleteTopicsRequest::default().with_topics(vec![DeleteTopicState::default().with_name(None).with_topic_id(id)])
    } else {
        DeleteTopicsRequest::default().with_topic_names(vec![topic_name(&name)])
    };
    let resp = c.try_send(v, req.with_timeout_ms(30_000)).await?;
    let r = &resp.responses[0];
    ensure(r.error_code == 0, || format!("error {} {:?}", r.error_code, r.error_message))?;
    if v >= 6 {
        ensure(r.topic_id == id, || format!("topic id {}", r.topic_id))?;
    } else {
        ensure(r.name.as_ref().is_some_and(|n| n.0.as_str() == name), || format!("name {:?}", r.name))?;
    }
    let md = broker.client().await.metadata(&[&name]).await;
    ensure(md.topics[0].error_code == 3, || format!("after delete, metadata error {}", md.topics[0].error_code))?;
    // Deleting it again: unknown.
    let again = if v >= 6 {
        DeleteTopicsRequest::default().with_topics(vec![DeleteTopicState::default().with_name(None).with_topic_id(id)])
    } else {
        DeleteTopicsRequest::default().with_topic_names(vec![topic_name(&name)])
    };
    let resp = c.try_send(v, again).await.context("second delete")?;
    let want = if v >= 6 { 100 } else { 3 };
    ensure(resp.responses[0].error_code == want, || {
        format!("second delete: error {} != {want}", resp.responses[0].error_code)
    })
}

async fn delete_records(c: &mut Client, broker: &TestBroker, v: i16) -> anyhow::Result<()> {
    use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
    let name = format!("matrix-dr-v{v}");
    let mut admin = broker.client().await;
    admin.create_topic_ok(&name, 1, &[]).await;
    admin.produce_ok(&name, 0, batches::values("d", 3)).await;
    let req = DeleteRecordsRequest::default().with_timeout_ms(30_000).with_topics(vec![DeleteRecordsTopic::default()
        .with_name(topic_name(&name))
        .with_partitions(vec![DeleteRecordsPartition::default().with_partition_index(0).with_offset(2)])]);
    let resp = c.try_send(v, req).await?;
    let p = &resp.topics[0].partitions[0];
    ensure(p.error_code == 0, || format!("error {}", p.error_code))?;
    ensure(p.low_watermark == 2, || format!("low watermark {}", p.low_watermark))?;
    let earliest = admin.list_offset(&name, 0, EARLIEST).await;
    ensure(earliest.offset == 2, || format!("earliest after delete {}", earliest.offset))
}

async fn init_producer_id(c: &mut Client, v: i16) -> anyhow::Result<()> {
    let req = InitProducerIdRequest::default().with_transactional_id(None).with_transaction_timeout_ms(60_000);
    let resp = c.try_send(v, req).await?;
    ensure(resp.error_code == 0, || format!("error {}", resp.error_code))?;
    ensure(resp.producer_id.0 >= 0 && resp.producer_epoch == 0, || {
        format!("pid {:?} epoch {}", resp.producer_id, resp.producer_epoch)
    })
}

async fn offset_for_leader_epoch(c: &mut Client, fx: &Fixture, v: i16) -> anyhow::Result<()> {
    let mut req = OffsetForLeaderEpochRequest::default().with_topics(vec![OffsetForLeaderTopic::default()
        .with_topic(topic_name(TOPIC))
        .with_partitions(vec![OffsetForLeaderPartition::default()
            .with_partition(0)
            .with_current_leader_epoch(fx.leader_epoch)
            .with_leader_epoch(fx.leader_epoch)])]);
    if v >= 3 {
        req = req.with_replica_id(BrokerId(-1));
    }
    let resp = c.try_send(v, req).await?;
    let p = &resp.topics[0].partitions[0];
    ensure(p.error_code == 0, || format!("error {}", p.error_code))?;
    ensure(p.leader_epoch == fx.leader_epoch && p.end_offset == 3, || {
        format!("epoch {} end offset {}", p.leader_epoch, p.end_offset)
    })
}

async fn describe_configs(c: &mut Client, v: i16) -> anyhow::Result<()> {
    let mut req = describe_configs_request(RESOURCE_TOPIC, TOPIC).with_include_synonyms(true);
    req.resources.push(
        kafka_protocol::messages::describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_BROKER)
            .with_resource_name(str("1"))
            .with_configuration_keys(None),
    );
    if v >= 3 {
        req = req.with_include_documentation(true);
    }
    let resp = c.try_send(v, req).await?;
    ensure(resp.results.len() == 2, || format!("{} results", resp.results.len()))?;
    let topic = &resp.results[0];
    ensure(topic.error_code == 0, || format!("topic error {} {:?}", topic.error_code, topic.error_message))?;
    let retention = config_entry(topic, "retention.ms");
    ensure(retention.as_ref().is_some_and(|(value, source)| value.is_some() && *source == 5), || {
        format!("retention.ms {retention:?}")
    })?;
    let broker = &resp.results[1];
    ensure(broker.error_code == 0, || format!("broker error {} {:?}", broker.error_code, broker.error_message))?;
    ensure(!broker.configs.is_empty(), || "no broker configs".into())
}

async fn alter_configs(c: &mut Client, broker: &TestBroker, v: i16) -> anyhow::Result<()> {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let value = format!("{}", 100_000 + i64::from(v));
    let req = AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(RESOURCE_TOPIC)
        .with_resource_name(str("matrix-ac"))
        .with_configs(vec![AlterableConfig::default().with_name(str("retention.ms")).with_value(Some(str(&value)))])]);
    let resp = c.try_send(v, req).await?;
    let r = &resp.responses[0];
    ensure(r.error_code == 0, || format!("error {} {:?}", r.error_code, r.error_message))?;
    let described = broker.client().await.describe_topic_configs("matrix-ac").await;
    let got = config_entry(&described, "retention.ms");
    ensure(got == Some((Some(value.clone()), 1)), || format!("after alter: retention.ms {got:?}"))
}

async fn create_partitions(c: &mut Client, broker: &TestBroker, v: i16) -> anyhow::Result<()> {
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
    let name = format!("matrix-cp-v{v}");
    broker.client().await.create_topic_ok(&name, 1, &[]).await;
    let req =
        CreatePartitionsRequest::default().with_timeout_ms(30_000).with_topics(vec![CreatePartitionsTopic::default()
            .with_name(topic_name(&name))
            .with_count(3)
            .with_assignments(None)]);
    let resp = c.try_send(v, req).await?;
    let r = &resp.results[0];
    ensure(r.error_code == 0, || format!("error {} {:?}", r.error_code, r.error_message))?;
    let md = broker.client().await.metadata(&[&name]).await;
    ensure(md.topics[0].partitions.len() == 3, || {
        format!("metadata shows {} partitions", md.topics[0].partitions.len())
    })
}

async fn incremental_alter_configs(c: &mut Client, broker: &TestBroker, v: i16) -> anyhow::Result<()> {
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let value = format!("{}", 200_000 + i64::from(v));
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(RESOURCE_TOPIC)
        .with_resource_name(str("matrix-iac"))
        .with_configs(vec![AlterableConfig::default()
            .with_name(str("retention.ms"))
            .with_config_operation(0)
            .with_value(Some(str(&value)))])]);
    let resp = c.try_send(v, req).await?;
    let r = &resp.responses[0];
    ensure(r.error_code == 0, || format!("error {} {:?}", r.error_code, r.error_message))?;
    let described = broker.client().await.describe_topic_configs("matrix-iac").await;
    let got = config_entry(&described, "retention.ms");
    ensure(got == Some((Some(value.clone()), 1)), || format!("after alter: retention.ms {got:?}"))
}

async fn describe_cluster(c: &mut Client, fx: &Fixture, v: i16) -> anyhow::Result<()> {
    let mut req = DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
    if v >= 2 {
        req = req.with_include_fenced_brokers(true);
    }
    let resp = c.try_send(v, req).await?;
    ensure(resp.brokers.iter().all(|b| !b.is_fenced), || format!("a fenced broker in {:?}", resp.brokers))?;
    ensure(resp.error_code == 0, || format!("error {}", resp.error_code))?;
    ensure(!resp.cluster_id.is_empty(), || "empty cluster id".into())?;
    ensure(resp.controller_id.0 == 1, || format!("controller {:?}", resp.controller_id))?;
    ensure(resp.brokers.len() == 1 && resp.brokers[0].broker_id.0 == 1 && resp.brokers[0].port == fx.port, || {
        format!("brokers {:?}", resp.brokers)
    })
}

async fn describe_topic_partitions(c: &mut Client, fx: &Fixture, v: i16) -> anyhow::Result<()> {
    use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest;
    let req = DescribeTopicPartitionsRequest::default()
        .with_topics(vec![TopicRequest::default().with_name(TopicName(str(TOPIC)))])
        .with_response_partition_limit(10);
    let resp = c.try_send(v, req).await?;
    let t = resp.topics.first().context("no topic")?;
    ensure(t.error_code == 0 && t.topic_id == fx.topic_id, || format!("topic {t:?}"))?;
    ensure(t.partitions.len() == 1 && t.partitions[0].leader_id.0 == 1, || format!("partitions {:?}", t.partitions))?;
    ensure(resp.next_cursor.is_none(), || format!("cursor {:?}", resp.next_cursor))
}

async fn describe_producers(c: &mut Client, v: i16) -> anyhow::Result<()> {
    use kafka_protocol::messages::describe_producers_request::TopicRequest;
    let topic = format!("matrix-dp-v{v}");
    c.create_topic_ok(&topic, 1, &[]).await;
    let producer = batches::Idempotence { producer_id: 4242, producer_epoch: 3, base_sequence: 0 };
    c.produce_ok(&topic, 0, batches::idempotent(producer, "i", 3)).await;
    c.produce_ok(&topic, 0, batches::values("plain", 2)).await;
    let next = batches::Idempotence { base_sequence: 3, ..producer };
    let before = batches::now_ms();
    c.produce_ok(&topic, 0, batches::idempotent(next, "j", 2)).await;
    let req = DescribeProducersRequest::default().with_topics(vec![
        TopicRequest::default().with_name(topic_name(&topic)).with_partition_indexes(vec![0, 5]),
        TopicRequest::default().with_name(topic_name("matrix-dp-missing")).with_partition_indexes(vec![0]),
    ]);
    let resp = c.try_send(v, req).await?;
    ensure(resp.topics.len() == 2, || format!("{} topics", resp.topics.len()))?;
    let parts = &resp.topics[0].partitions;
    ensure(parts[0].error_code == 0, || format!("error {}", parts[0].error_code))?;
    let got: Vec<_> = parts[0]
        .active_producers
        .iter()
        .map(|p| (p.producer_id.0, p.producer_epoch, p.last_sequence, p.coordinator_epoch, p.current_txn_start_offset))
        .collect();
    ensure(got == [(4242, 3, 4, -1, -1)], || format!("producers {got:?}"))?;
    let ts = parts[0].active_producers[0].last_timestamp;
    ensure(ts >= before && ts <= batches::now_ms(), || format!("last timestamp {ts}, sent at {before}"))?;
    ensure(parts[1].partition_index == 5 && parts[1].error_code == 3, || format!("partition 5: {:?}", parts[1]))?;
    let missing = &resp.topics[1].partitions[0];
    ensure(missing.error_code == 3, || format!("missing topic: error {}", missing.error_code))
}

async fn update_features(c: &mut Client, v: i16) -> anyhow::Result<()> {
    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
    let request = |updates: &[(&str, i16)]| {
        let keys = updates
            .iter()
            .map(|(name, level)| {
                let key = FeatureUpdateKey::default().with_feature(str(name)).with_max_version_level(*level);
                if v >= 1 {
                    key.with_upgrade_type(1)
                } else {
                    key
                }
            })
            .collect();
        UpdateFeaturesRequest::default().with_timeout_ms(30_000).with_feature_updates(keys)
    };
    // The finalized level again: nothing to do, success.
    let resp = c.try_send(v, request(&[("metadata.version", 27), ("group.version", 0)])).await?;
    ensure(resp.error_code == 0, || format!("error {} {:?}", resp.error_code, resp.error_message))?;
    let want_results = if v <= 1 { 2 } else { 0 };
    ensure(resp.results.len() == want_results && resp.results.iter().all(|r| r.error_code == 0), || {
        format!("results {:?}", resp.results)
    })?;
    // A level runnel does not support fails the whole batch.
    let resp = c.try_send(v, request(&[("metadata.version", 27), ("group.version", 1)])).await?;
    let msg = resp.error_message.as_deref().unwrap_or_default().to_string();
    ensure(
        resp.error_code == 95 && msg.contains("group.version. Local controller 1 does not support this feature."),
        || format!("unsupported level: {} {msg:?}", resp.error_code),
    )?;
    let resp = c.try_send(v, request(&[("no.such.version", 1)])).await?;
    let msg = resp.error_message.as_deref().unwrap_or_default().to_string();
    ensure(resp.error_code == 95 && msg.contains("does not support this feature"), || {
        format!("unknown feature: {} {msg:?}", resp.error_code)
    })?;
    // A lower level asked as an upgrade (v0: without allowing a downgrade) is refused;
    // Kafka's tool refuses to send it.
    let resp = c.try_send(v, request(&[("eligible.leader.replicas.version", 0)])).await?;
    let msg = resp.error_message.as_deref().unwrap_or_default().to_string();
    ensure(
        resp.error_code == 95 && msg.ends_with("without setting the upgrade type to either safe or unsafe downgrade."),
        || format!("downgrade as an upgrade: {} {msg:?}", resp.error_code),
    )
}

/// No subscription: a fresh instance id, no metrics (the client does not push), Kafka's
/// default interval, limits and codecs.
async fn get_telemetry_subscriptions(c: &mut Client, v: i16) -> anyhow::Result<GetTelemetrySubscriptionsResponse> {
    let resp = c.try_send(v, GetTelemetrySubscriptionsRequest::default()).await?;
    ensure(
        resp.error_code == 0
            && !resp.client_instance_id.is_nil()
            && resp.requested_metrics.is_empty()
            && resp.push_interval_ms == 300_000
            && resp.telemetry_max_bytes == 1024 * 1024
            && resp.accepted_compression_types == [4, 3, 1, 2]
            && resp.delta_temporality,
        || format!("{resp:?}"),
    )?;
    Ok(resp)
}

/// Kafka's checks (`ClientMetricsManager`), each on a fresh client instance: a wrong
/// subscription id, after which the client may ask again at once but not push before
/// the interval; an unknown codec; an empty push on time, then one and a
/// GetTelemetrySubscriptions before the interval is up; a zero instance id.
async fn push_telemetry(c: &mut Client, v: i16) -> anyhow::Result<()> {
    let push = |sub: &GetTelemetrySubscriptionsResponse, subscription_id: i32, compression_type: i8| {
        PushTelemetryRequest::default()
            .with_client_instance_id(sub.client_instance_id)
            .with_subscription_id(subscription_id)
            .with_compression_type(compression_type)
    };
    let get = |sub: &GetTelemetrySubscriptionsResponse| {
        GetTelemetrySubscriptionsRequest::default().with_client_instance_id(sub.client_instance_id)
    };
    let mut codes = Vec::new();
    let a = get_telemetry_subscriptions(c, v).await?;
    codes.push(c.try_send(v, push(&a, a.subscription_id ^ 1, 0)).await?.error_code);
    codes.push(c.try_send(v, get(&a)).await?.error_code);
    codes.push(c.try_send(v, push(&a, a.subscription_id, 0)).await?.error_code);
    let b = get_telemetry_subscriptions(c, v).await?;
    codes.push(c.try_send(v, push(&b, b.subscription_id, 9)).await?.error_code);
    codes.push(c.try_send(v, get(&b)).await?.error_code);
    let d = get_telemetry_subscriptions(c, v).await?;
    codes.push(c.try_send(v, push(&d, d.subscription_id, 0)).await?.error_code);
    codes.push(c.try_send(v, push(&d, d.subscription_id, 0)).await?.error_code);
    codes.push(c.try_send(v, get(&d)).await?.error_code);
    codes.push(c.try_send(v, PushTelemetryRequest::default()).await?.error_code);
    // 117 UNKNOWN_SUBSCRIPTION_ID, 89 THROTTLING_QUOTA_EXCEEDED, 76 UNSUPPORTED_COMPRESSION_TYPE,
    // 42 INVALID_REQUEST
    ensure(codes == [117, 0, 89, 76, 0, 0, 89, 89, 42], || format!("{codes:?}"))
}

async fn list_config_resources(c: &mut Client, v: i16) -> anyhow::Result<()> {
    let listed = |resp: &ListConfigResourcesResponse| -> Vec<(String, i8)> {
        resp.config_resources.iter().map(|r| (r.resource_name.to_string(), r.resource_type)).collect()
    };
    if v == 0 {
        // The former ListClientMetricsResources: client-metrics resources only, none here.
        let resp = c.try_send(v, ListConfigResourcesRequest::default()).await?;
        return ensure(resp.error_code == 0 && resp.config_resources.is_empty(), || format!("{resp:?}"));
    }
    let resp = c.try_send(v, ListConfigResourcesRequest::default()).await?;
    let all = listed(&resp);
    ensure(resp.error_code == 0 && all.contains(&(TOPIC.into(), 2)) && all.contains(&("1".into(), 4)), || {
        format!("every type: {} {all:?}", resp.error_code)
    })?;
    let resp = c.try_send(v, ListConfigResourcesRequest::default().with_resource_types(vec![2])).await?;
    let topics = listed(&resp);
    ensure(topics.contains(&(TOPIC.into(), 2)) && topics.iter().all(|(_, t)| *t == 2), || format!("{topics:?}"))?;
    let resp = c.try_send(v, ListConfigResourcesRequest::default().with_resource_types(vec![2, 3])).await?;
    ensure(resp.error_code == 35 && resp.config_resources.is_empty(), || format!("type 3: {resp:?}"))
}

/// A client newer than the broker asks for ApiVersions v99: Kafka answers with a v0
/// response carrying UNSUPPORTED_VERSION and the API list, so the client can retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_versions_too_new_gets_a_v0_answer() {
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let body = common::encode_body(
        &ApiVersionsRequest::default().with_client_software_name(str("future")).with_client_software_version(str("99")),
        4,
    );
    // Flexible request header (v2), as a v3+ ApiVersions client sends.
    let frame = common::raw_request(ApiKey::ApiVersions as i16, 99, 2, &body);
    let mut reply = match c.send_raw(&frame).await {
        common::RawReply::Frame(f) => f,
        common::RawReply::Closed => panic!("broker closed the connection on ApiVersions v99"),
    };
    use kafka_protocol::protocol::Decodable;
    let header = ResponseHeader::decode(&mut reply, 0).unwrap();
    assert_eq!(header.correlation_id, 99);
    let resp = ApiVersionsResponse::decode(&mut reply, 0).unwrap();
    assert_eq!(resp.error_code, 35);
    advertised_matches_supported(&resp).unwrap();
    // The connection stays usable: the client retries at a version we serve.
    let resp = c
        .send(
            3,
            ApiVersionsRequest::default().with_client_software_name(str("x")).with_client_software_version(str("1")),
        )
        .await;
    assert_eq!(resp.error_code, 0);
}

/// The advertised ranges stay within what the codec can encode.
#[test]
fn supported_versions_are_within_the_codec() {
    for (key, lo, hi) in SUPPORTED {
        let valid = key.valid_versions();
        assert!(valid.min <= *lo && *hi <= valid.max, "{key:?} {lo}..={hi} outside {valid:?}");
    }
}

/// One node: the preferred replica leads every partition already.
async fn elect_leaders(c: &mut Client, v: i16) -> anyhow::Result<()> {
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    let req = ElectLeadersRequest::default().with_timeout_ms(5_000).with_topic_partitions(Some(vec![
        TopicPartitions::default().with_topic(TopicName(str(TOPIC))).with_partitions(vec![0]),
    ]));
    let resp = c.try_send(v, req).await?;
    ensure(resp.error_code == 0, || format!("error {}", resp.error_code))?;
    let r = resp.replica_election_results.first().context("no result")?;
    let p = r.partition_result.first().context("no partition result")?;
    ensure(r.topic.0.as_str() == TOPIC && p.partition_id == 0 && p.error_code == 84, || {
        format!("expected ELECTION_NOT_NEEDED: {resp:?}")
    })
}

/// One node: a quorum of one voter that leads.
async fn describe_quorum(c: &mut Client, v: i16) -> anyhow::Result<()> {
    use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
    let req = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(str("__cluster_metadata")))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let resp = c.try_send(v, req).await?;
    ensure(resp.error_code == 0, || format!("error {}", resp.error_code))?;
    let p = resp.topics.first().and_then(|t| t.partitions.first()).context("no partition")?;
    ensure(p.error_code == 0 && p.leader_id.0 == 1 && p.high_watermark > 0, || format!("partition {p:?}"))?;
    ensure(p.current_voters.len() == 1 && p.current_voters[0].replica_id.0 == 1 && p.observers.is_empty(), || {
        format!("voters {:?} observers {:?}", p.current_voters, p.observers)
    })?;
    // A single node opens no controller listener: there is no endpoint to name.
    ensure(resp.nodes.is_empty(), || format!("nodes {:?}", resp.nodes))
}

/// A broker that never registered: BROKER_ID_NOT_REGISTERED, as Kafka's controller
/// answers (the single broker itself stays registered).
async fn unregister_broker(c: &mut Client, v: i16) -> anyhow::Result<()> {
    let resp = c.try_send(v, UnregisterBrokerRequest::default().with_broker_id(BrokerId(42))).await?;
    ensure(resp.error_code == 102, || format!("{resp:?}"))?;
    let message = resp.error_message.as_deref().unwrap_or_default();
    ensure(message.contains("42"), || format!("message {message:?}"))
}

/// A single node (started without voters) cannot change its quorum: UNSUPPORTED_VERSION,
/// as Kafka's controller answers a quorum whose voters cannot change; a request for another
/// cluster: INCONSISTENT_CLUSTER_ID.
async fn add_raft_voter(c: &mut Client, v: i16) -> anyhow::Result<()> {
    use kafka_protocol::messages::add_raft_voter_request::Listener;
    let listener = Listener::default().with_name(str("CONTROLLER")).with_host(str("127.0.0.1")).with_port(9093);
    let req = AddRaftVoterRequest::default().with_voter_id(2).with_timeout_ms(1000).with_listeners(vec![listener]);
    let resp = c.try_send(v, req.clone()).await?;
    ensure(resp.error_code == 35, || format!("{resp:?}"))?;
    let resp = c.try_send(v, req.with_cluster_id(Some(str("another-cluster")))).await?;
    ensure(resp.error_code == 104, || format!("{resp:?}"))
}

async fn remove_raft_voter(c: &mut Client, v: i16) -> anyhow::Result<()> {
    let resp = c.try_send(v, RemoveRaftVoterRequest::default().with_voter_id(1)).await?;
    ensure(resp.error_code == 35, || format!("{resp:?}"))?;
    let message = resp.error_message.as_deref().unwrap_or_default();
    ensure(message.contains("single node"), || format!("message {message:?}"))
}

/// One log directory holding the topic's partition.
async fn describe_log_dirs(c: &mut Client, v: i16) -> anyhow::Result<()> {
    use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
    let req = DescribeLogDirsRequest::default().with_topics(Some(vec![DescribableLogDirTopic::default()
        .with_topic(TopicName(str(TOPIC)))
        .with_partitions(vec![0])]));
    let resp = c.try_send(v, req).await?;
    ensure(resp.error_code == 0 && resp.results.len() == 1, || format!("{resp:?}"))?;
    let dir = &resp.results[0];
    ensure(dir.error_code == 0 && !dir.log_dir.is_empty(), || format!("{dir:?}"))?;
    ensure(v < 4 || (dir.total_bytes > 0 && (0..=dir.total_bytes).contains(&dir.usable_bytes)), || {
        format!("volume sizes {dir:?}")
    })?;
    let t = dir.topics.first().context("no topic")?;
    ensure(t.name.0.as_str() == TOPIC && t.partitions.len() == 1 && t.partitions[0].partition_index == 0, || {
        format!("{t:?}")
    })
}

/// The partition's own log dir (nothing to move) answers NONE; a path that is no log dir
/// LOG_DIR_NOT_FOUND.
async fn alter_replica_log_dirs(c: &mut Client, v: i16) -> anyhow::Result<()> {
    use kafka_protocol::messages::alter_replica_log_dirs_request::{AlterReplicaLogDir, AlterReplicaLogDirTopic};
    let described = c.try_send(4, DescribeLogDirsRequest::default().with_topics(None)).await?;
    let own = described.results.first().context("no log dir")?.log_dir.clone();
    for (path, expected) in [(own, 0), (str("/not/a/log/dir"), 57)] {
        let req = AlterReplicaLogDirsRequest::default().with_dirs(vec![AlterReplicaLogDir::default()
            .with_path(path)
            .with_topics(vec![AlterReplicaLogDirTopic::default()
                .with_name(TopicName(str(TOPIC)))
                .with_partitions(vec![0])])]);
        let resp = c.try_send(v, req).await?;
        let code = resp.results.first().and_then(|t| t.partitions.first()).map(|p| p.error_code);
        ensure(code == Some(expected), || format!("expected {expected}: {resp:?}"))?;
    }
    Ok(())
}

/// One node: the replicas it has already (nothing to do), and a cancellation with
/// nothing to cancel.
async fn alter_partition_reassignments(c: &mut Client, v: i16) -> anyhow::Result<()> {
    use kafka_protocol::messages::alter_partition_reassignments_request::{ReassignablePartition, ReassignableTopic};
    let req = |replicas: Option<Vec<BrokerId>>| {
        AlterPartitionReassignmentsRequest::default().with_timeout_ms(5_000).with_topics(vec![
            ReassignableTopic::default().with_name(TopicName(str(TOPIC))).with_partitions(vec![
                ReassignablePartition::default().with_partition_index(0).with_replicas(replicas),
            ]),
        ])
    };
    let resp = c.try_send(v, req(Some(vec![BrokerId(1)]))).await?;
    let code = |r: &AlterPartitionReassignmentsResponse| {
        r.responses.first().and_then(|t| t.partitions.first()).map(|p| p.error_code)
    };
    ensure(resp.error_code == 0 && code(&resp) == Some(0), || format!("{resp:?}"))?;
    let resp = c.try_send(v, req(None)).await?;
    ensure(code(&resp) == Some(85), || format!("expected NO_REASSIGNMENT_IN_PROGRESS: {resp:?}"))
}

async fn list_partition_reassignments(c: &mut Client, v: i16) -> anyhow::Result<()> {
    let resp = c.try_send(v, ListPartitionReassignmentsRequest::default().with_timeout_ms(5_000)).await?;
    ensure(resp.error_code == 0 && resp.topics.is_empty(), || format!("{resp:?}"))
}
