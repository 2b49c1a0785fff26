//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest, AlterConfigsResponse,
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};

use super::str_bytes;
use crate::controller::broker_config::{self, DynamicSource, DYNAMIC_BROKER_CONFIGS};
use crate::controller::client_metrics;
use crate::controller::topic_config::{self, ConfigType, TOPIC_CONFIGS};
use crate::controller::{ConfigChange, ControllerError, MetadataImage, TopicImage};
use crate::protocol::errors::controller_error;
use crate::protocol::Ctx;

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_CLIENT_METRICS: i8 = 16;

pub const SOURCE_TOPIC: i8 = 1;
pub const SOURCE_DYNAMIC_BROKER: i8 = 2;
pub const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
pub const SOURCE_STATIC_BROKER: i8 = 4;
pub const SOURCE_DEFAULT: i8 = 5;
pub const SOURCE_CLIENT_METRICS: i8 = 7;

pub struct ConfigEntry {
    pub name: String,
    pub value: String,
    pub source: i8,
    pub config_type: i8,
    pub doc: &'static str,
    /// (synonym name, value, source), most specific first.
    pub synonyms: Vec<(String, String, i8)>,
}

/// Every config of a topic with its effective value and where that value comes from:
/// the topic's own, else the broker-wide default set at runtime (this broker's, else the
/// cluster's), else the static default.
pub fn topic_config_entries(ctx: &Ctx, topic: &TopicImage) -> Vec<ConfigEntry> {
    let image = ctx.image();
    TOPIC_CONFIGS
        .iter()
        .map(|def| {
            let default = def.default_value(&ctx.config);
            let mut synonyms = Vec::new();
            if let Some(v) = topic.configs.get(def.name) {
                synonyms.push((def.name.to_owned(), v.clone(), SOURCE_TOPIC));
            }
            if let Some(server) = def.server_default() {
                synonyms.extend(dynamic_levels(&image, Some(ctx.config.node_id), server));
            }
            let (value, source) = match synonyms.first() {
                Some((_, v, source)) => (v.clone(), *source),
                // A broker setting that differs from Kafka's default is a static broker config.
                None if default != def.default_value(&crate::config::BrokerConfig::default()) => {
                    (default.clone(), SOURCE_STATIC_BROKER)
                }
                None => (default.clone(), SOURCE_DEFAULT),
            };
            if let Some(syn) = def.broker_synonym {
                synonyms.push((syn.to_owned(), default, SOURCE_DEFAULT));
            }
            ConfigEntry { name: def.name.to_owned(), value, source, config_type: def.ty.code(), doc: def.doc, synonyms }
        })
        .collect()
}

/// The values dynamic broker config `name` is set to for broker `node` (`None`: only
/// the cluster default's), most specific first, as DescribeConfigs synonyms.
fn dynamic_levels(image: &MetadataImage, node: Option<i32>, name: &str) -> Vec<(String, String, i8)> {
    broker_config::set_values(image, node, name)
        .into_iter()
        .map(|(source, v)| {
            let source = match source {
                DynamicSource::Broker => SOURCE_DYNAMIC_BROKER,
                _ => SOURCE_DYNAMIC_DEFAULT_BROKER,
            };
            (name.to_owned(), v.clone(), source)
        })
        .collect()
}

/// A BROKER resource's name: "" is the cluster-wide default (`None`), else it must be
/// this broker's node id (an admin client sends each broker's own resource to it).
/// Kafka's messages differ between describing and altering.
fn broker_resource(ctx: &Ctx, name: &str, describing: bool) -> Result<Option<i32>, (ResponseError, String)> {
    let node_id = ctx.config.node_id;
    let refuse = |message: String| Err((ResponseError::InvalidRequest, message));
    match name {
        "" => Ok(None),
        n if n == broker_config::resource_of(node_id) => Ok(Some(node_id)),
        n if describing => {
            refuse(format!("Unexpected broker id, expected {node_id} or empty string, but received {n}"))
        }
        n if n.parse::<i32>().is_err() => refuse(format!("Node id must be an integer, but it is: {n}")),
        n => refuse(format!("Unexpected broker id, expected {node_id}, but received {n}")),
    }
}

/// The configs set on a resource, which AlterConfigs replaces and IncrementalAlterConfigs
/// changes.
fn current_configs(ctx: &Ctx, resource_type: i8, name: &str) -> Option<BTreeMap<String, String>> {
    let image = ctx.image();
    match resource_type {
        RESOURCE_CLIENT_METRICS => image.client_metrics.get(name).cloned(),
        RESOURCE_BROKER => image.broker_configs.get(name).cloned(),
        _ => image.topic(name).map(|t| t.configs.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
    }
}

/// The name DescribeConfigs gives the inter-broker listener in `listeners` and
/// `advertised.listeners`.
const INTER_BROKER_LISTENER: &str = "BROKER";

fn broker_config_entries(ctx: &Ctx) -> Vec<ConfigEntry> {
    let c = &ctx.config;
    let image = ctx.image();
    let mut adv =
        image.brokers.get(&c.node_id).map(|b| format!("PLAINTEXT://{}:{}", b.host, b.port)).unwrap_or_default();
    let mut listeners = format!("PLAINTEXT://{}", c.listen);
    // The inter-broker listener is named BROKER (as Kafka's test containers name theirs).
    if let Some(inter_broker) = &c.inter_broker_listen {
        listeners.push_str(&format!(",{INTER_BROKER_LISTENER}://{inter_broker}"));
        if let Some(e) = image.brokers.get(&c.node_id).and_then(|b| b.inter_broker.as_ref()) {
            adv.push_str(&format!(",{INTER_BROKER_LISTENER}://{}:{}", e.host, e.port));
        }
    }
    let mut entries: Vec<(&str, String, ConfigType)> = vec![
        ("advertised.listeners", adv, ConfigType::String),
        ("auto.create.topics.enable", c.auto_create_topics.to_string(), ConfigType::Boolean),
        ("broker.heartbeat.interval.ms", c.broker_heartbeat_interval_ms.to_string(), ConfigType::Int),
        ("broker.id", c.node_id.to_string(), ConfigType::Int),
        ("broker.session.timeout.ms", c.broker_session_timeout_ms.to_string(), ConfigType::Int),
        ("default.replication.factor", c.default_replication_factor.to_string(), ConfigType::Int),
        ("listeners", listeners, ConfigType::String),
        (
            "log.dirs",
            c.log_dirs().iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(","),
            ConfigType::String,
        ),
        ("log.flush.interval.messages", c.flush_interval_messages.to_string(), ConfigType::Long),
        ("log.flush.interval.ms", c.flush_interval_ms.to_string(), ConfigType::Long),
        ("log.retention.bytes", c.log_retention_bytes.to_string(), ConfigType::Long),
        ("log.retention.check.interval.ms", c.log_retention_check_interval_ms.to_string(), ConfigType::Long),
        ("log.retention.ms", c.log_retention_ms.to_string(), ConfigType::Long),
        ("log.roll.ms", c.log_segment_ms.to_string(), ConfigType::Long),
        ("log.segment.bytes", c.log_segment_bytes.to_string(), ConfigType::Int),
        (
            "max.incremental.fetch.session.cache.slots",
            c.max_incremental_fetch_session_cache_slots.to_string(),
            ConfigType::Int,
        ),
        ("message.max.bytes", c.message_max_bytes.to_string(), ConfigType::Int),
        ("min.insync.replicas", c.min_insync_replicas.to_string(), ConfigType::Int),
        ("node.id", c.node_id.to_string(), ConfigType::Int),
        ("num.partitions", c.num_partitions.to_string(), ConfigType::Int),
        ("replica.lag.time.max.ms", c.replica_lag_time_max_ms.to_string(), ConfigType::Long),
        ("socket.request.max.bytes", c.socket_request_max_bytes.to_string(), ConfigType::Int),
        ("telemetry.max.bytes", c.telemetry_max_bytes.to_string(), ConfigType::Int),
    ];
    // Set only when configured (Kafka lists them with no value otherwise).
    if let Some(rack) = &c.rack {
        entries.push(("broker.rack", rack.clone(), ConfigType::String));
    }
    if c.inter_broker_listen.is_some() {
        entries.push(("inter.broker.listener.name", INTER_BROKER_LISTENER.to_owned(), ConfigType::String));
    }
    if c.rack_aware_replica_selector {
        let class = crate::config::RACK_AWARE_REPLICA_SELECTOR.to_owned();
        entries.push(("replica.selector.class", class, ConfigType::Class));
    }
    let mut entries: Vec<ConfigEntry> = entries
        .into_iter()
        .map(|(name, value, ty)| ConfigEntry {
            name: name.to_owned(),
            synonyms: vec![(name.to_owned(), value.clone(), SOURCE_STATIC_BROKER)],
            value,
            source: SOURCE_STATIC_BROKER,
            config_type: ty.code(),
            doc: "",
        })
        .collect();
    // A value set at runtime wins over the static one, which stays as its last synonym.
    for dynamic in dynamic_broker_entries(ctx, Some(c.node_id)) {
        match entries.iter_mut().find(|e| e.name == dynamic.name) {
            Some(e) => {
                let statics = std::mem::replace(&mut e.synonyms, dynamic.synonyms);
                e.synonyms.extend(statics);
                (e.value, e.source) = (dynamic.value, dynamic.source);
            }
            None => entries.push(dynamic),
        }
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries
}

/// The dynamic broker configs set for broker `node` or as the cluster default (`None`:
/// the cluster default resource, which lists only its own), with the levels under each
/// value as synonyms: the throttle rates, then the broker-wide defaults of topic configs.
/// As in Kafka, a throttle rate that is not set is not listed.
fn dynamic_broker_entries(ctx: &Ctx, node: Option<i32>) -> Vec<ConfigEntry> {
    let image = ctx.image();
    let rates = DYNAMIC_BROKER_CONFIGS.iter().map(|def| (def.name, ConfigType::Long, def.doc));
    let topic_defaults =
        TOPIC_CONFIGS.iter().filter_map(|def| def.server_default().map(|name| (name, def.ty, def.doc)));
    rates
        .chain(topic_defaults)
        .filter_map(|(name, ty, doc)| {
            let synonyms = dynamic_levels(&image, node, name);
            let (_, value, source) = synonyms.first()?.clone();
            Some(ConfigEntry { name: name.to_owned(), value, source, config_type: ty.code(), doc, synonyms })
        })
        .collect()
}

/// A client-metrics subscription's configs: those set (none for an unknown name, which
/// is not an error, as in Kafka).
fn client_metrics_entries(ctx: &Ctx, name: &str) -> Vec<ConfigEntry> {
    let image = ctx.image();
    let Some(configs) = image.client_metrics.get(name) else { return vec![] };
    configs
        .iter()
        .map(|(k, v)| {
            let (config_type, doc) = client_metrics_def(k).unwrap_or((ConfigType::String, ""));
            ConfigEntry {
                name: k.clone(),
                value: v.clone(),
                source: SOURCE_CLIENT_METRICS,
                config_type: config_type.code(),
                doc,
                synonyms: vec![(k.clone(), v.clone(), SOURCE_CLIENT_METRICS)],
            }
        })
        .collect()
}

/// The type and documentation of a client-metrics config.
fn client_metrics_def(name: &str) -> Option<(ConfigType, &'static str)> {
    let (_, doc) = client_metrics::CONFIGS.iter().find(|(n, _)| *n == name)?;
    let ty = if name == client_metrics::INTERVAL_MS { ConfigType::Int } else { ConfigType::List };
    Some((ty, doc))
}

pub fn describe(ctx: &Ctx, req: DescribeConfigsRequest, version: i16) -> DescribeConfigsResponse {
    let results = req
        .resources
        .into_iter()
        .map(|r| {
            let base = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let entries = match r.resource_type {
                RESOURCE_TOPIC => match ctx.image().topic(r.resource_name.as_str()) {
                    Some(t) => topic_config_entries(ctx, t),
                    None => {
                        return base.with_error_code(ResponseError::UnknownTopicOrPartition.code()).with_error_message(
                            Some(str_bytes(format!("Topic {} does not exist", r.resource_name.as_str()))),
                        )
                    }
                },
                RESOURCE_BROKER => match broker_resource(ctx, r.resource_name.as_str(), true) {
                    Ok(None) => dynamic_broker_entries(ctx, None),
                    Ok(Some(_)) => broker_config_entries(ctx),
                    Err((code, message)) => {
                        return base.with_error_code(code.code()).with_error_message(Some(str_bytes(message)))
                    }
                },
                RESOURCE_CLIENT_METRICS => client_metrics_entries(ctx, r.resource_name.as_str()),
                other => {
                    return base
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(str_bytes(format!("Unsupported resource type {other}"))))
                }
            };
            let keys = r.configuration_keys.map(|ks| ks.into_iter().map(|k| k.to_string()).collect::<Vec<_>>());
            let configs = entries
                .into_iter()
                .filter(|e| keys.as_ref().is_none_or(|ks| ks.contains(&e.name)))
                .map(|e| {
                    let synonyms = if req.include_synonyms {
                        e.synonyms
                            .iter()
                            .map(|(n, v, s)| {
                                DescribeConfigsSynonym::default()
                                    .with_name(str_bytes(n.clone()))
                                    .with_value(Some(str_bytes(v.clone())))
                                    .with_source(*s)
                            })
                            .collect()
                    } else {
                        vec![]
                    };
                    DescribeConfigsResourceResult::default()
                        .with_name(str_bytes(e.name))
                        .with_value(Some(str_bytes(e.value)))
                        // Kafka reports the replication throttle rates read-only too.
                        .with_read_only(r.resource_type == RESOURCE_BROKER)
                        .with_config_source(e.source)
                        .with_is_sensitive(false)
                        .with_synonyms(synonyms)
                        .with_config_type(if version >= 3 { e.config_type } else { 0 })
                        .with_documentation(if req.include_documentation { Some(str_bytes(e.doc)) } else { None })
                })
                .collect();
            base.with_configs(configs)
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// Applies one resource's changes (or reports why they were refused): the error code and
/// message its response carries.
async fn alter_resource(
    ctx: &Ctx,
    resource_type: i8,
    name: &str,
    changes: Result<Vec<ConfigChange>, (ResponseError, String)>,
    validate_only: bool,
) -> (i16, Option<kafka_protocol::protocol::StrBytes>) {
    let applied = match changes {
        Ok(c) => apply_changes(ctx, resource_type, name, c, validate_only).await,
        Err(e) => Err(e),
    };
    match applied {
        Ok(()) => (0, None),
        Err((code, msg)) => (code.code(), Some(str_bytes(msg))),
    }
}

async fn apply_changes(
    ctx: &Ctx,
    resource_type: i8,
    name: &str,
    changes: Vec<ConfigChange>,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    match resource_type {
        RESOURCE_TOPIC => {
            let topic = name.to_owned();
            match ctx.controller_op(ctx.controller.alter_topic_configs(&topic, &changes, validate_only)).await {
                Ok(()) => Ok(()),
                Err(e @ ControllerError::UnknownTopic(_)) => {
                    Err((controller_error(&e), format!("Topic {name} does not exist")))
                }
                Err(e) => Err((controller_error(&e), e.to_string())),
            }
        }
        RESOURCE_BROKER => {
            broker_resource(ctx, name, false)?;
            let resource = name.to_owned();
            ctx.controller_op(ctx.controller.alter_broker_configs(&resource, &changes, validate_only))
                .await
                .map_err(|e| (controller_error(&e), e.to_string()))
        }
        RESOURCE_CLIENT_METRICS => {
            let subscription = name.to_owned();
            ctx.controller_op(ctx.controller.alter_client_metrics(&subscription, &changes, validate_only))
                .await
                .map_err(|e| (controller_error(&e), e.to_string()))
        }
        other => Err((ResponseError::InvalidRequest, format!("Unsupported resource type {other}"))),
    }
}

pub async fn alter(ctx: &Ctx, req: AlterConfigsRequest, _version: i16) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in req.resources {
        let name = r.resource_name.to_string();
        // AlterConfigs replaces the whole set: overrides not named are removed.
        let changes = (|| {
            let mut changes = Vec::new();
            for c in &r.configs {
                let value = c
                    .value
                    .as_ref()
                    .ok_or_else(|| (ResponseError::InvalidConfig, format!("Null value for {}", c.name.as_str())))?;
                changes.push(ConfigChange::Set(c.name.to_string(), value.to_string()));
            }
            for k in current_configs(ctx, r.resource_type, &name).unwrap_or_default().into_keys() {
                if !r.configs.iter().any(|c| c.name.as_str() == k) {
                    changes.push(ConfigChange::Delete(k));
                }
            }
            Ok(changes)
        })();
        let (code, msg) = alter_resource(ctx, r.resource_type, &name, changes, req.validate_only).await;
        responses.push(
            alter_configs_response::AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name)
                .with_error_code(code)
                .with_error_message(msg),
        );
    }
    AlterConfigsResponse::default().with_responses(responses)
}

const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

pub async fn incremental_alter(
    ctx: &Ctx,
    req: IncrementalAlterConfigsRequest,
    _version: i16,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in req.resources {
        {
            let name = r.resource_name.to_string();
            let current = current_configs(ctx, r.resource_type, &name);
            let changes = (|| {
                let mut changes = Vec::new();
                let mut seen = std::collections::HashSet::new();
                for c in &r.configs {
                    let key = c.name.to_string();
                    if !seen.insert(key.clone()) {
                        return Err((
                            ResponseError::InvalidRequest,
                            format!("Error due to duplicate config keys: {key}"),
                        ));
                    }
                    let value = c.value.as_ref().map(|v| v.to_string());
                    match c.config_operation {
                        OP_SET => {
                            let v = value.ok_or_else(|| {
                                (ResponseError::InvalidRequest, format!("Null value not supported for : {key}"))
                            })?;
                            changes.push(ConfigChange::Set(key, v));
                        }
                        OP_DELETE => changes.push(ConfigChange::Delete(key)),
                        OP_APPEND | OP_SUBTRACT => {
                            let (ty, default) = if r.resource_type == RESOURCE_CLIENT_METRICS {
                                let (ty, _) = client_metrics_def(&key).ok_or_else(|| {
                                    (
                                        ResponseError::InvalidRequest,
                                        format!("Unknown client metrics configuration: {key}"),
                                    )
                                })?;
                                (ty, String::new())
                            } else if r.resource_type == RESOURCE_BROKER {
                                // A topic config's broker-wide default is typed as that topic
                                // config; the rest (the rates) are LONGs.
                                match topic_config::by_server_default(&key) {
                                    Some(def) => (def.ty, def.default_value(&ctx.config)),
                                    None => (ConfigType::Long, String::new()),
                                }
                            } else {
                                let def = topic_config::find(&key).ok_or_else(|| {
                                    (ResponseError::InvalidConfig, format!("Unknown topic config name: {key}"))
                                })?;
                                (def.ty, def.default_value(&ctx.config))
                            };
                            if ty != ConfigType::List {
                                return Err((
                                    ResponseError::InvalidConfig,
                                    format!("Config value append is not allowed for config key: {key}"),
                                ));
                            }
                            let existing = current.as_ref().and_then(|c| c.get(&key).cloned()).unwrap_or(default);
                            let mut items: Vec<String> =
                                existing.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect();
                            for v in value.unwrap_or_default().split(',').map(str::trim).filter(|s| !s.is_empty()) {
                                if c.config_operation == OP_APPEND {
                                    if !items.iter().any(|i| i == v) {
                                        items.push(v.to_owned());
                                    }
                                } else {
                                    items.retain(|i| i != v);
                                }
                            }
                            changes.push(ConfigChange::Set(key, items.join(",")));
                        }
                        other => {
                            return Err((ResponseError::InvalidRequest, format!("Unknown config operation {other}")))
                        }
                    }
                }
                Ok(changes)
            })();
            let (code, msg) = alter_resource(ctx, r.resource_type, &name, changes, req.validate_only).await;
            responses.push(
                incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                    .with_resource_type(r.resource_type)
                    .with_resource_name(r.resource_name)
                    .with_error_code(code)
                    .with_error_message(msg),
            );
        }
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}
