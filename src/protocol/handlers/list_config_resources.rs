//! ListConfigResources (KIP-1142): the names of the resources that have configs, by type.
//!
//! As Kafka 4.4 answers (checked against the reference broker): v0 is the former
//! ListClientMetricsResources and lists client-metrics resources only; v1 lists the types
//! asked for, every type when none is asked; a type that is not a config resource type
//! gets UNSUPPORTED_VERSION. runnel has topic, broker and client-metrics configs; it has no
//! broker-logger or group configs, so those types list nothing.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ListConfigResourcesRequest, ListConfigResourcesResponse};

use super::configs::{RESOURCE_BROKER, RESOURCE_CLIENT_METRICS, RESOURCE_TOPIC};
use super::str_bytes;
use crate::protocol::Ctx;

const RESOURCE_BROKER_LOGGER: i8 = 8;
const RESOURCE_GROUP: i8 = 32;
/// Kafka's `ConfigResource.Type`s, in the order listed when a request names none.
const KNOWN: [i8; 5] =
    [RESOURCE_GROUP, RESOURCE_CLIENT_METRICS, RESOURCE_BROKER_LOGGER, RESOURCE_BROKER, RESOURCE_TOPIC];

pub fn handle(ctx: &Ctx, req: ListConfigResourcesRequest, version: i16) -> ListConfigResourcesResponse {
    let types: Vec<i8> = match version {
        0 => vec![RESOURCE_CLIENT_METRICS],
        _ if req.resource_types.is_empty() => KNOWN.to_vec(),
        _ => req.resource_types.clone(),
    };
    if types.iter().any(|t| !KNOWN.contains(t)) {
        return ListConfigResourcesResponse::default().with_error_code(ResponseError::UnsupportedVersion.code());
    }
    let image = ctx.image();
    let mut out = Vec::new();
    for t in KNOWN.iter().filter(|t| types.contains(t)) {
        let names: Vec<String> = match *t {
            RESOURCE_TOPIC => image.topics.keys().cloned().collect(),
            RESOURCE_CLIENT_METRICS => image.client_metrics.keys().cloned().collect(),
            RESOURCE_BROKER => image.brokers.values().filter(|b| !b.fenced).map(|b| b.node_id.to_string()).collect(),
            _ => vec![],
        };
        for name in names {
            let resource = ConfigResource::default().with_resource_name(str_bytes(name));
            // The type is in v1 responses only.
            out.push(if version >= 1 { resource.with_resource_type(*t) } else { resource });
        }
    }
    ListConfigResourcesResponse::default().with_config_resources(out)
}
