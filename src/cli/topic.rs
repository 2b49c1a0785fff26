//! `runnel topic create|list|describe|delete|produce|consume`.

use std::collections::BTreeMap;

use clap::Subcommand;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig, CreateTopicsRequest};
use kafka_protocol::messages::delete_topics_request::{DeleteTopicState, DeleteTopicsRequest};
use kafka_protocol::messages::describe_configs_request::{DescribeConfigsRequest, DescribeConfigsResource};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, MetadataResponse, TopicName};
use serde_json::{json, Value};

use super::admin::{str_bytes, Admin};
use super::output::{table, Output};
use super::{check, consume, produce, CliError, CommonArgs};

/// ListOffsets' special timestamps.
pub const EARLIEST: i64 = -2;
pub const LATEST: i64 = -1;

#[derive(Subcommand, Debug)]
pub enum TopicCommand {
    /// Create a topic.
    Create {
        name: String,
        /// Partitions (default: the broker's num.partitions).
        #[arg(short = 'p', long)]
        partitions: Option<i32>,
        /// Replication factor (default: the broker's default.replication.factor).
        #[arg(short = 'r', long)]
        replication_factor: Option<i16>,
        /// Topic config, key=value (repeatable), e.g. -c cleanup.policy=compact.
        #[arg(short = 'c', long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
    },
    /// List topics (internal ones with --internal).
    List {
        #[arg(long)]
        internal: bool,
    },
    /// Partitions (leader, replicas, ISR, log start offset, high watermark) and configs.
    Describe { name: String },
    /// Delete a topic.
    Delete { name: String },
    /// Produce stdin's lines as record values (a key before --key-separator if given).
    Produce(produce::ProduceArgs),
    /// Print records' values (or JSON records with --format json).
    Consume(consume::ConsumeArgs),
}

pub async fn run(common: &CommonArgs, command: TopicCommand) -> Result<Output, CliError> {
    // Usage errors first, before any connection.
    if let TopicCommand::Create { configs, .. } = &command {
        parse_configs(configs)?;
    }
    let mut admin = Admin::connect(&common.brokers).await?;
    match command {
        TopicCommand::Create { name, partitions, replication_factor, configs } => {
            create(&mut admin, &name, partitions, replication_factor, &parse_configs(&configs)?).await
        }
        TopicCommand::List { internal } => list(&mut admin, internal).await,
        TopicCommand::Describe { name } => describe(&mut admin, &name).await,
        TopicCommand::Delete { name } => delete(&mut admin, &name).await,
        TopicCommand::Produce(args) => produce::run(&mut admin, args).await,
        TopicCommand::Consume(args) => consume::run(&mut admin, common.format, args).await,
    }
}

fn parse_configs(configs: &[String]) -> Result<Vec<(String, String)>, CliError> {
    configs
        .iter()
        .map(|c| match c.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
            _ => Err(CliError::Usage(format!("--config {c:?} is not key=value"))),
        })
        .collect()
}

async fn create(
    admin: &mut Admin,
    name: &str,
    partitions: Option<i32>,
    replication_factor: Option<i16>,
    configs: &[(String, String)],
) -> Result<Output, CliError> {
    let topic = CreatableTopic::default()
        .with_name(TopicName(str_bytes(name)))
        .with_num_partitions(partitions.unwrap_or(-1))
        .with_replication_factor(replication_factor.unwrap_or(-1))
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| CreatableTopicConfig::default().with_name(str_bytes(k)).with_value(Some(str_bytes(v))))
                .collect(),
        );
    let request = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(30_000);
    let (response, version) = admin.bootstrap().send(request).await?;
    let result = response.topics.first().ok_or_else(|| CliError::Protocol("CreateTopics: no result".into()))?;
    check(result.error_code, || format!("cannot create topic {name}"), result.error_message.as_deref())?;
    let mut doc = json!({ "topic": name });
    if version >= 5 {
        doc["partitions"] = json!(result.num_partitions);
        doc["replication_factor"] = json!(result.replication_factor);
        doc["topic_id"] = json!(result.topic_id.to_string());
    }
    Ok(Output::line(doc, format!("created topic {name}")))
}

async fn list(admin: &mut Admin, internal: bool) -> Result<Output, CliError> {
    let metadata = admin.metadata(None).await?;
    let mut topics: Vec<(String, usize, usize, bool)> = metadata
        .topics
        .iter()
        .filter(|t| internal || !t.is_internal)
        .filter_map(|t| {
            let name = t.name.as_ref()?.0.to_string();
            let rf = t.partitions.first().map(|p| p.replica_nodes.len()).unwrap_or(0);
            Some((name, t.partitions.len(), rf, t.is_internal))
        })
        .collect();
    topics.sort();
    let doc = json!({
        "topics": topics.iter().map(|(n, p, r, i)| json!({"name": n, "partitions": p, "replication_factor": r, "internal": i})).collect::<Vec<_>>()
    });
    let rows: Vec<Vec<String>> =
        topics.iter().map(|(n, p, r, _)| vec![n.clone(), p.to_string(), r.to_string()]).collect();
    Ok(Output::new(doc, table(&["NAME", "PARTITIONS", "REPLICAS"], &rows)))
}

/// A partition as Metadata describes it: (partition, leader, replicas, ISR).
pub type PartitionRow = (i32, i32, Vec<i32>, Vec<i32>);

/// The one topic of `metadata`, or its error by Kafka's name.
pub fn topic_partitions(metadata: &MetadataResponse, name: &str) -> Result<Vec<PartitionRow>, CliError> {
    let topic = metadata
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name))
        .ok_or_else(|| CliError::kafka(format!("topic {name}"), 3))?;
    check(topic.error_code, || format!("topic {name}"), None)?;
    let mut out: Vec<_> = topic
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                p.leader_id.0,
                p.replica_nodes.iter().map(|b| b.0).collect(),
                p.isr_nodes.iter().map(|b| b.0).collect(),
            )
        })
        .collect();
    out.sort();
    Ok(out)
}

/// ListOffsets at `timestamp` (EARLIEST, LATEST) for each (partition, leader) of
/// `topic`, asked of each partition's leader. Partition → offset.
pub async fn list_offsets(
    admin: &mut Admin,
    topic: &str,
    partitions: &[(i32, i32)],
    timestamp: i64,
) -> Result<BTreeMap<i32, i64>, CliError> {
    let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for (p, leader) in partitions {
        by_leader.entry(*leader).or_default().push(*p);
    }
    let mut out = BTreeMap::new();
    for (leader, ps) in by_leader {
        if leader < 0 {
            return Err(CliError::kafka(format!("topic {topic}"), 5)); // LEADER_NOT_AVAILABLE
        }
        let conn = admin.broker(leader).await?;
        let version = conn.version(ApiKey::ListOffsets)?;
        let parts = ps
            .iter()
            .map(|p| {
                let part = ListOffsetsPartition::default().with_partition_index(*p).with_timestamp(timestamp);
                if version >= 4 {
                    part.with_current_leader_epoch(-1)
                } else {
                    part
                }
            })
            .collect();
        let mut request =
            ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(str_bytes(topic)))
                .with_partitions(parts)]);
        if version >= 10 {
            request = request.with_timeout_ms(30_000);
        }
        let (response, _) = conn.send(request).await?;
        for t in response.topics {
            for p in t.partitions {
                check(p.error_code, || format!("offsets of {topic}-{}", p.partition_index), None)?;
                out.insert(p.partition_index, p.offset);
            }
        }
    }
    Ok(out)
}

async fn describe(admin: &mut Admin, name: &str) -> Result<Output, CliError> {
    let metadata = admin.metadata(Some(&[name.to_owned()])).await?;
    let partitions = topic_partitions(&metadata, name)?;
    let leaders: Vec<(i32, i32)> = partitions.iter().map(|(p, l, _, _)| (*p, *l)).collect();
    let start = list_offsets(admin, name, &leaders, EARLIEST).await?;
    let end = list_offsets(admin, name, &leaders, LATEST).await?;
    let request = DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(str_bytes(name))
        .with_configuration_keys(None)]);
    let (response, _) = admin.bootstrap().send(request).await?;
    let mut configs = Vec::new();
    for r in response.results {
        check(r.error_code, || format!("configs of topic {name}"), r.error_message.as_deref())?;
        for c in r.configs {
            configs.push((c.name.to_string(), c.value.map(|v| v.to_string()), c.config_source, c.is_sensitive));
        }
    }
    configs.sort();
    let part_docs: Vec<Value> = partitions
        .iter()
        .map(|(p, leader, replicas, isr)| {
            json!({
                "partition": p, "leader": leader, "replicas": replicas, "isr": isr,
                "log_start_offset": start.get(p), "high_watermark": end.get(p),
            })
        })
        .collect();
    let config_docs: Vec<Value> = configs
        .iter()
        .map(|(n, v, source, sensitive)| {
            json!({"name": n, "value": v, "source": source_name(*source), "sensitive": sensitive})
        })
        .collect();
    let doc = json!({ "topic": name, "partitions": part_docs, "configs": config_docs });
    let ids = |v: &Vec<i32>| v.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    let show = |o: Option<&i64>| o.map(i64::to_string).unwrap_or_else(|| "-".into());
    let rows: Vec<Vec<String>> = partitions
        .iter()
        .map(|(p, leader, replicas, isr)| {
            vec![p.to_string(), leader.to_string(), ids(replicas), ids(isr), show(start.get(p)), show(end.get(p))]
        })
        .collect();
    let mut text = format!("TOPIC {name}\n\n");
    text.push_str(&table(&["PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START-OFFSET", "HIGH-WATERMARK"], &rows));
    let config_rows: Vec<Vec<String>> = configs
        .iter()
        .map(|(n, v, s, _)| vec![n.clone(), v.clone().unwrap_or_else(|| "(null)".into()), source_name(*s).into()])
        .collect();
    text.push('\n');
    text.push_str(&table(&["CONFIG", "VALUE", "SOURCE"], &config_rows));
    Ok(Output::new(doc, text))
}

/// DescribeConfigs' config_source, as Kafka's AdminClient names it.
fn source_name(source: i8) -> &'static str {
    match source {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

async fn delete(admin: &mut Admin, name: &str) -> Result<Output, CliError> {
    let conn = admin.bootstrap();
    let version = conn.version(ApiKey::DeleteTopics)?;
    let mut request = DeleteTopicsRequest::default().with_timeout_ms(30_000);
    request = if version >= 6 {
        request.with_topics(vec![DeleteTopicState::default().with_name(Some(TopicName(str_bytes(name))))])
    } else {
        request.with_topic_names(vec![TopicName(str_bytes(name))])
    };
    let (response, _) = conn.send(request).await?;
    let result = response.responses.first().ok_or_else(|| CliError::Protocol("DeleteTopics: no result".into()))?;
    check(result.error_code, || format!("cannot delete topic {name}"), result.error_message.as_deref())?;
    Ok(Output::line(json!({ "topic": name, "deleted": true }), format!("deleted topic {name}")))
}
