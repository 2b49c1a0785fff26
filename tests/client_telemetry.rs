//! KIP-714 over the wire: a client-metrics subscription made, refused, described and
//! listed through the config APIs; GetTelemetrySubscriptions and PushTelemetry with a
//! compressed OTLP payload; the pushed values on `/metrics`; a payload that inflates past
//! `telemetry_max_bytes` and one that is not OTLP.

mod common;

use common::{str, TestBroker};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::*;
use prost::Message;
use runnel::storage::batch::Compression;
use runnel::storage::codec;
use runnel::telemetry::otlp;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CLIENT_METRICS: i8 = 16;
const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;
const INVALID_RECORD: i16 = 87;
const TELEMETRY_TOO_LARGE: i16 = 118;

fn alter(name: &str, configs: &[(&str, &str)]) -> IncrementalAlterConfigsRequest {
    let configs = configs
        .iter()
        .map(|(k, v)| AlterableConfig::default().with_name(str(k)).with_config_operation(0).with_value(Some(str(v))))
        .collect();
    IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(CLIENT_METRICS)
        .with_resource_name(str(name))
        .with_configs(configs)])
}

fn payload(lag: f64) -> Vec<u8> {
    let kv = |k: &str, v: &str| otlp::KeyValue {
        key: k.into(),
        value: Some(otlp::AnyValue { value: Some(otlp::Value::String(v.into())) }),
    };
    let point = otlp::NumberDataPoint {
        attributes: vec![kv("topic", "orders"), kv("partition", "0")],
        start_time_unix_nano: 0,
        time_unix_nano: 1,
        value: Some(otlp::Number::AsDouble(lag)),
    };
    otlp::MetricsData {
        resource_metrics: vec![otlp::ResourceMetrics {
            resource: Some(otlp::Resource { attributes: vec![kv("group_id", "billing")] }),
            scope_metrics: vec![otlp::ScopeMetrics {
                metrics: vec![otlp::Metric {
                    name: "org.apache.kafka.consumer.fetch.manager.records.lag.max".into(),
                    description: "The maximum lag".into(),
                    unit: String::new(),
                    data: Some(otlp::Data::Gauge(otlp::Gauge { data_points: vec![point] })),
                }],
            }],
        }],
    }
    .encode_to_vec()
}

/// Sends `req` until it is not refused as too early (THROTTLING_QUOTA_EXCEEDED, for at
/// most 10 s); its code.
async fn on_time(c: &mut common::Client, req: PushTelemetryRequest) -> i16 {
    let mut code = 89;
    for _ in 0..500 {
        code = c.send(0, req.clone()).await.error_code;
        if code != 89 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    code
}

async fn scrape(broker: &TestBroker) -> String {
    let addr = broker.broker().http_addr().expect("the HTTP listener is on");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: runnel\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut reply = String::new();
    tokio::time::timeout(common::REPLY_TIMEOUT, s.read_to_string(&mut reply)).await.unwrap().unwrap();
    reply
}

#[tokio::test]
async fn a_subscription_a_push_and_metrics() {
    let broker = TestBroker::start_with(|c| c.telemetry_max_bytes = 4096).await;
    let mut c = broker.client().await;

    // Kafka's validation of the resulting configs.
    for (configs, code) in [
        (&[("interval.ms", "50")][..], INVALID_REQUEST),
        (&[("no.such.config", "1")][..], INVALID_REQUEST),
        (&[("match", "group_id=x")][..], INVALID_CONFIG),
        (&[("match", "client_id=(")][..], INVALID_CONFIG),
    ] {
        let resp = c.send(1, alter("bad", configs)).await;
        assert_eq!(resp.responses[0].error_code, code, "{configs:?}: {resp:?}");
    }
    let configs = [("metrics", "org.apache.kafka.consumer."), ("interval.ms", "100"), ("match", "client_id=runnel-.*")];
    let resp = c.send(1, alter("lag", &configs)).await;
    assert_eq!(resp.responses[0].error_code, 0, "{resp:?}");

    let described = c
        .send(
            4,
            DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
                .with_resource_type(CLIENT_METRICS)
                .with_resource_name(str("lag"))
                .with_configuration_keys(None)]),
        )
        .await;
    let got: Vec<(String, String, i8)> = described.results[0]
        .configs
        .iter()
        .map(|e| (e.name.to_string(), e.value.as_ref().unwrap().to_string(), e.config_source))
        .collect();
    let want: Vec<(String, String, i8)> =
        [("interval.ms", "100"), ("match", "client_id=runnel-.*"), ("metrics", "org.apache.kafka.consumer.")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string(), 7))
            .collect();
    assert_eq!(got, want);
    let listed = c.send(1, ListConfigResourcesRequest::default().with_resource_types(vec![CLIENT_METRICS])).await;
    let names: Vec<String> = listed.config_resources.iter().map(|r| r.resource_name.to_string()).collect();
    assert_eq!(names, ["lag"]);

    let sub = c.send(0, GetTelemetrySubscriptionsRequest::default()).await;
    assert_eq!(sub.error_code, 0);
    assert_eq!(sub.requested_metrics.iter().map(|m| m.to_string()).collect::<Vec<_>>(), ["org.apache.kafka.consumer."]);
    assert_eq!((sub.push_interval_ms, sub.telemetry_max_bytes), (100, 4096));
    let push = |metrics: Vec<u8>, compression_type: i8| {
        PushTelemetryRequest::default()
            .with_client_instance_id(sub.client_instance_id)
            .with_subscription_id(sub.subscription_id)
            .with_compression_type(compression_type)
            .with_metrics(metrics.into())
    };
    let zstd = codec::compress(Compression::Zstd, &payload(1234.0)).unwrap();
    assert_eq!(c.send(0, push(zstd, 4)).await.error_code, 0);

    let text = scrape(&broker).await;
    let line = format!(
        "client_telemetry_org_apache_kafka_consumer_fetch_manager_records_lag_max{{client_instance_id=\"{}\",\
         client_id=\"runnel-it\",group_id=\"billing\",partition=\"0\",topic=\"orders\"}} 1234.0",
        sub.client_instance_id
    );
    assert!(text.lines().any(|l| l == line), "no {line} in\n{text}");
    assert!(text.contains("# TYPE client_telemetry_org_apache_kafka_consumer_fetch_manager_records_lag_max gauge"));

    // Pushes a push interval apart (the broker's clock, not a sleep in an assertion: the
    // push is refused as throttled until the interval has passed, so wait for that).
    // Small compressed, over the limit decompressed.
    let big = vec![0u8; 64 * 1024];
    let gzip = codec::compress(Compression::Gzip, &big).unwrap();
    assert!(gzip.len() < 4096);
    assert_eq!(on_time(&mut c, push(gzip, 1)).await, TELEMETRY_TOO_LARGE);
    assert_eq!(on_time(&mut c, push(b"\x0a\xff\xff\xff\xff\x0f".to_vec(), 0)).await, INVALID_RECORD);
    // The refusals kept the last good values.
    assert!(scrape(&broker).await.lines().any(|l| l == line));
}

/// AlterConfigs (not incremental) replaces a subscription's whole set of configs.
#[tokio::test]
async fn alter_configs_replaces_a_subscription() {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let broker = TestBroker::start().await;
    let mut c = broker.client().await;
    let alter_all = |configs: &[(&str, &str)]| {
        let configs = configs
            .iter()
            .map(|(k, v)| AlterableConfig::default().with_name(str(k)).with_value(Some(str(v))))
            .collect();
        AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(CLIENT_METRICS)
            .with_resource_name(str("legacy"))
            .with_configs(configs)])
    };
    let resp = c.send(1, alter_all(&[("metrics", "a."), ("interval.ms", "1000")])).await;
    assert_eq!(resp.responses[0].error_code, 0, "{resp:?}");
    let resp = c.send(1, alter_all(&[("metrics", "b.")])).await;
    assert_eq!(resp.responses[0].error_code, 0, "{resp:?}");
    let described = c
        .send(
            4,
            DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
                .with_resource_type(CLIENT_METRICS)
                .with_resource_name(str("legacy"))
                .with_configuration_keys(None)]),
        )
        .await;
    let got: Vec<(String, String)> = described.results[0]
        .configs
        .iter()
        .map(|e| (e.name.to_string(), e.value.as_ref().unwrap().to_string()))
        .collect();
    assert_eq!(got, [("metrics".to_string(), "b.".to_string())]);
}
