//! Kafka's `ClientMetricsManager`: client instances, the subscription each one gets, and
//! the checks on GetTelemetrySubscriptions and PushTelemetry. Time comes in as `now_ms`.
//!
//! An instance's subscription is the union of the subscriptions that match it: their
//! metric prefixes (just `*` when one subscribes to everything) and the shortest push
//! interval (5 minutes when none matches, with no metrics, so the client does not push).
//! When the subscriptions a client matches change, its instance is re-created, so its
//! next request gets the new subscription id without waiting for the push interval
//! (Kafka re-creates on any subscription change; the effect for the client is the same).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use uuid::Uuid;

use super::TelemetryError;
use crate::controller::client_metrics::{Subscription, ALL_METRICS, INTERVAL_MS_DEFAULT};

/// Kafka's `ClientMetricsManager.CACHE_MAX_SIZE`: instances kept at most; beyond it the
/// least recently seen is dropped.
pub const MAX_INSTANCES: usize = 16_384;
/// An instance that sends nothing for this long, or three push intervals if longer, is
/// forgotten (Kafka's `cacheExpiryMs` floor).
pub const EXPIRY_FLOOR_MS: i64 = 60_000;

/// Kafka's `ClientTelemetryUtils.SUPPORTED_COMPRESSION_TYPES`, preferred first: zstd,
/// lz4, gzip, snappy.
pub const ACCEPTED_COMPRESSION_TYPES: [i8; 4] = [4, 3, 1, 2];

/// What identifies a client to `match` patterns.
#[derive(Debug, Clone, Default)]
pub struct ClientMetadata {
    pub client_id: String,
    pub source_address: String,
    pub source_port: String,
    /// KIP-511 client software name and version, when the connection's ApiVersions
    /// named them.
    pub software_name: String,
    pub software_version: String,
}

/// What GetTelemetrySubscriptions answers.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionAnswer {
    pub client_instance_id: Uuid,
    pub subscription_id: i32,
    pub push_interval_ms: i32,
    pub requested_metrics: Vec<String>,
}

/// A push that passed the checks: the caller decodes and stores `metrics`.
#[derive(Debug, Clone, PartialEq)]
pub struct AcceptedPush {
    pub push_interval_ms: i32,
}

#[derive(Debug)]
struct Instance {
    metadata: ClientMetadata,
    subscription_id: i32,
    metrics: Vec<String>,
    push_interval_ms: i32,
    last_get_ms: i64,
    last_push_ms: i64,
    last_seen_ms: i64,
    terminating: bool,
    /// The error of the last request (Kafka's `lastKnownError`): after
    /// UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE the client may ask for its
    /// subscription again at once.
    last_error: Option<TelemetryError>,
}

impl Instance {
    fn new(id: Uuid, metadata: ClientMetadata, metrics: Vec<String>, push_interval_ms: i32, now_ms: i64) -> Self {
        let subscription_id = subscription_id(&metrics, push_interval_ms, id);
        Instance {
            metadata,
            subscription_id,
            metrics,
            push_interval_ms,
            last_get_ms: 0,
            last_push_ms: 0,
            last_seen_ms: now_ms,
            terminating: false,
            last_error: None,
        }
    }

    fn expired(&self, now_ms: i64) -> bool {
        now_ms - self.last_seen_ms > expiry_ms(self.push_interval_ms)
    }
}

/// How long a client's instance and pushed series live without a request.
pub fn expiry_ms(push_interval_ms: i32) -> i64 {
    EXPIRY_FLOOR_MS.max(3 * i64::from(push_interval_ms))
}

/// Kafka's subscription id: CRC-32C of the metric list and the interval, XOR the
/// instance id's hash (Kafka's `Uuid.hashCode`).
fn subscription_id(metrics: &[String], push_interval_ms: i32, id: Uuid) -> i32 {
    let text = format!("[{}]{push_interval_ms}", metrics.join(", "));
    let crc = crc32c::crc32c(text.as_bytes()) as i32;
    let (hi, lo) = id.as_u64_pair();
    let hilo = hi ^ lo;
    crc ^ (((hilo >> 32) as i32) ^ (hilo as i32))
}

/// The metrics and push interval the subscriptions that match `metadata` give a client.
fn evaluate(subscriptions: &[Subscription], id: Uuid, metadata: &ClientMetadata) -> (Vec<String>, i32) {
    let id = id.to_string();
    let port = metadata.source_port.clone();
    let fields = [
        ("client_instance_id", id.as_str()),
        ("client_id", metadata.client_id.as_str()),
        ("client_source_address", metadata.source_address.as_str()),
        ("client_source_port", port.as_str()),
        ("client_software_name", metadata.software_name.as_str()),
        ("client_software_version", metadata.software_version.as_str()),
    ];
    // A connection whose ApiVersions named no software matches no pattern on it (Kafka:
    // a null attribute never matches).
    let fields: Vec<(&str, &str)> =
        fields.into_iter().filter(|(k, v)| !(k.starts_with("client_software_") && v.is_empty())).collect();
    let mut metrics = BTreeSet::new();
    let mut interval = INTERVAL_MS_DEFAULT;
    for s in subscriptions.iter().filter(|s| s.matches(&fields)) {
        metrics.extend(s.metrics.iter().cloned());
        interval = interval.min(s.interval_ms);
    }
    if metrics.contains(ALL_METRICS) {
        return (vec![ALL_METRICS.to_owned()], interval);
    }
    (metrics.into_iter().collect(), interval)
}

#[derive(Debug, Default)]
pub struct ClientMetricsManager {
    instances: Mutex<HashMap<Uuid, Instance>>,
}

impl ClientMetricsManager {
    /// The instance `id` (created, or re-created when its subscription changed), with
    /// its expiry pushed back; expired instances are dropped on the way.
    fn with_instance<T>(
        &self,
        id: Uuid,
        subscriptions: &[Subscription],
        metadata: ClientMetadata,
        now_ms: i64,
        f: impl FnOnce(&mut Instance) -> T,
    ) -> T {
        let (metrics, interval) = evaluate(subscriptions, id, &metadata);
        let mut instances = self.instances.lock().unwrap_or_else(|e| e.into_inner());
        instances.retain(|_, i| !i.expired(now_ms));
        let current = instances.get(&id).is_some_and(|i| i.metrics == metrics && i.push_interval_ms == interval);
        if !current {
            if instances.len() >= MAX_INSTANCES && !instances.contains_key(&id) {
                let oldest = instances.iter().min_by_key(|(_, i)| i.last_seen_ms).map(|(k, _)| *k);
                if let Some(k) = oldest {
                    instances.remove(&k);
                }
            }
            let metadata = instances.get(&id).map(|i| i.metadata.clone()).unwrap_or(metadata);
            instances.insert(id, Instance::new(id, metadata, metrics, interval, now_ms));
        }
        let instance = instances.get_mut(&id).expect("inserted above");
        instance.last_seen_ms = now_ms;
        f(instance)
    }

    /// GetTelemetrySubscriptions: a zero `client_instance_id` gets a fresh one.
    pub fn get_subscription(
        &self,
        client_instance_id: Uuid,
        subscriptions: &[Subscription],
        metadata: ClientMetadata,
        now_ms: i64,
    ) -> Result<SubscriptionAnswer, TelemetryError> {
        let id = if client_instance_id.is_nil() { self.new_instance_id() } else { client_instance_id };
        self.with_instance(id, subscriptions, metadata, now_ms, |i| {
            let since = now_ms - i.last_get_ms.max(i.last_push_ms);
            let may_retry_now = matches!(
                i.last_error,
                Some(TelemetryError::UnknownSubscriptionId | TelemetryError::UnsupportedCompression)
            );
            if since >= i64::from(i.push_interval_ms) {
                i.last_get_ms = now_ms;
            } else if !may_retry_now {
                return Err(TelemetryError::Throttled);
            }
            i.last_error = None;
            Ok(SubscriptionAnswer {
                client_instance_id: id,
                subscription_id: i.subscription_id,
                push_interval_ms: i.push_interval_ms,
                requested_metrics: i.metrics.clone(),
            })
        })
    }

    /// PushTelemetry's checks, in Kafka's order; `payload_len` is the compressed size.
    #[allow(clippy::too_many_arguments)]
    pub fn check_push(
        &self,
        client_instance_id: Uuid,
        subscription_id: i32,
        terminating: bool,
        compression_type: i8,
        payload_len: usize,
        max_bytes: usize,
        subscriptions: &[Subscription],
        metadata: ClientMetadata,
        now_ms: i64,
    ) -> Result<AcceptedPush, TelemetryError> {
        // Kafka's `Uuid.RESERVED`: the zero id and the metadata topic's id (0, 1).
        if client_instance_id.is_nil() || client_instance_id.as_u64_pair() == (0, 1) {
            return Err(TelemetryError::InvalidRequest(format!(
                "Invalid request from the client [{client_instance_id}], invalid client instance id"
            )));
        }
        self.with_instance(client_instance_id, subscriptions, metadata, now_ms, |i| {
            let result = (|| {
                if i.terminating {
                    return Err(TelemetryError::InvalidRequest(format!(
                        "Client [{client_instance_id}] sent the previous request with state terminating to TRUE, \
                         can not accept any requests after that"
                    )));
                }
                // A push right after a GetTelemetrySubscriptions is accepted: the client
                // jitters its first push.
                let on_time =
                    i.last_get_ms > i.last_push_ms || now_ms - i.last_push_ms >= i64::from(i.push_interval_ms);
                if on_time {
                    i.last_push_ms = now_ms;
                } else if !terminating {
                    return Err(TelemetryError::Throttled);
                }
                if subscription_id != i.subscription_id {
                    return Err(TelemetryError::UnknownSubscriptionId);
                }
                if !(0..=4).contains(&compression_type) {
                    return Err(TelemetryError::UnsupportedCompression);
                }
                if payload_len > max_bytes {
                    return Err(TelemetryError::TooLarge);
                }
                Ok(AcceptedPush { push_interval_ms: i.push_interval_ms })
            })();
            i.terminating = terminating;
            i.last_error = result.as_ref().err().cloned();
            result
        })
    }

    /// Records the outcome of handling an accepted push's payload.
    pub fn push_outcome(&self, client_instance_id: Uuid, error: Option<TelemetryError>) {
        let mut instances = self.instances.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = instances.get_mut(&client_instance_id) {
            i.last_error = error;
        }
    }

    pub fn instance_count(&self) -> usize {
        self.instances.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn new_instance_id(&self) -> Uuid {
        let instances = self.instances.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let id = Uuid::new_v4();
            if !instances.contains_key(&id) {
                return id;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn sub(metrics: &str, interval: &str, matching: Option<&str>) -> Subscription {
        let mut c = BTreeMap::from([
            ("metrics".to_owned(), metrics.to_owned()),
            ("interval.ms".to_owned(), interval.to_owned()),
        ]);
        if let Some(m) = matching {
            c.insert("match".to_owned(), m.to_owned());
        }
        Subscription::parse("s", &c).unwrap()
    }

    fn meta(client_id: &str) -> ClientMetadata {
        ClientMetadata { client_id: client_id.into(), ..Default::default() }
    }

    #[test]
    fn no_subscription_means_no_metrics_and_the_default_interval() {
        let m = ClientMetricsManager::default();
        let a = m.get_subscription(Uuid::nil(), &[], meta("c"), 1_000_000).unwrap();
        assert!(!a.client_instance_id.is_nil());
        assert!(a.requested_metrics.is_empty());
        assert_eq!(a.push_interval_ms, INTERVAL_MS_DEFAULT);
    }

    #[test]
    fn matching_subscriptions_are_merged_and_star_wins() {
        let m = ClientMetricsManager::default();
        let subs = [
            sub("a.,b.", "2000", None),
            sub("c.", "1000", Some("client_id=app.*")),
            sub("d.", "100", Some("client_id=other")),
        ];
        let a = m.get_subscription(Uuid::nil(), &subs, meta("app-1"), 1_000_000).unwrap();
        assert_eq!(a.requested_metrics, vec!["a.", "b.", "c."]);
        assert_eq!(a.push_interval_ms, 1000);
        let subs = [sub("a.", "2000", None), sub("*", "1000", None)];
        let b = m.get_subscription(Uuid::nil(), &subs, meta("x"), 1_000_000).unwrap();
        assert_eq!(b.requested_metrics, vec!["*"]);
    }

    #[test]
    fn software_patterns_match_what_api_versions_named() {
        let m = ClientMetricsManager::default();
        let subs =
            [sub("java.", "1000", Some("client_software_name=apache-kafka-java,client_software_version=4\\..*"))];
        let java =
            ClientMetadata { software_name: "apache-kafka-java".into(), software_version: "4.4.0".into(), ..meta("c") };
        let a = m.get_subscription(Uuid::nil(), &subs, java, 1_000_000).unwrap();
        assert_eq!(a.requested_metrics, vec!["java."]);
        let unnamed = m.get_subscription(
            Uuid::nil(),
            &[sub("any.", "1000", Some("client_software_name=.*"))],
            meta("c"),
            1_000_000,
        );
        assert!(unnamed.unwrap().requested_metrics.is_empty());
    }

    #[test]
    fn push_checks_in_kafkas_order() {
        let m = ClientMetricsManager::default();
        let subs = [sub("org.apache.kafka.", "1000", None)];
        let t0 = 1_000_000;
        let a = m.get_subscription(Uuid::nil(), &subs, meta("c"), t0).unwrap();
        let id = a.client_instance_id;
        let push = |sid: i32, term: bool, codec: i8, len: usize, now: i64| {
            m.check_push(id, sid, term, codec, len, 100, &subs, meta("c"), now)
        };
        // Right after the get: accepted even before the interval.
        assert!(push(a.subscription_id, false, 0, 10, t0 + 1).is_ok());
        // Too early.
        assert_eq!(push(a.subscription_id, false, 0, 10, t0 + 500), Err(TelemetryError::Throttled));
        assert_eq!(push(a.subscription_id ^ 1, false, 0, 10, t0 + 1001), Err(TelemetryError::UnknownSubscriptionId));
        assert_eq!(push(a.subscription_id, false, 5, 10, t0 + 2002), Err(TelemetryError::UnsupportedCompression));
        assert_eq!(push(a.subscription_id, false, 4, 101, t0 + 3003), Err(TelemetryError::TooLarge));
        // A terminating push is accepted early, and nothing after it.
        assert!(push(a.subscription_id, true, 4, 10, t0 + 3004).is_ok());
        assert!(matches!(push(a.subscription_id, false, 4, 10, t0 + 9000), Err(TelemetryError::InvalidRequest(_))));
        let zero = m.check_push(Uuid::nil(), 0, false, 0, 0, 100, &subs, meta("c"), t0);
        assert!(matches!(zero, Err(TelemetryError::InvalidRequest(_))));
    }

    #[test]
    fn an_unknown_instance_gets_unknown_subscription_id_then_may_ask_at_once() {
        let m = ClientMetricsManager::default();
        let subs = [sub("org.", "60000", None)];
        let id = Uuid::new_v4();
        let t0 = 5_000_000;
        assert_eq!(
            m.check_push(id, 42, false, 0, 1, 100, &subs, meta("c"), t0),
            Err(TelemetryError::UnknownSubscriptionId)
        );
        let a = m.get_subscription(id, &subs, meta("c"), t0 + 1).unwrap();
        assert_eq!(a.client_instance_id, id);
        // A second get within the interval, after a success, is throttled.
        assert_eq!(m.get_subscription(id, &subs, meta("c"), t0 + 2), Err(TelemetryError::Throttled));
    }

    #[test]
    fn a_changed_subscription_is_served_at_once() {
        let m = ClientMetricsManager::default();
        let t0 = 1_000_000;
        let a = m.get_subscription(Uuid::nil(), &[sub("a.", "60000", None)], meta("c"), t0).unwrap();
        let id = a.client_instance_id;
        let b = m.get_subscription(id, &[sub("b.", "60000", None)], meta("c"), t0 + 1).unwrap();
        assert_ne!(a.subscription_id, b.subscription_id);
        assert_eq!(b.requested_metrics, vec!["b."]);
    }

    #[test]
    fn silent_instances_expire() {
        let m = ClientMetricsManager::default();
        let t0 = 1_000_000;
        m.get_subscription(Uuid::nil(), &[], meta("c"), t0).unwrap();
        m.get_subscription(Uuid::nil(), &[], meta("d"), t0).unwrap();
        assert_eq!(m.instance_count(), 2);
        m.get_subscription(Uuid::nil(), &[], meta("e"), t0 + expiry_ms(INTERVAL_MS_DEFAULT) + 1).unwrap();
        assert_eq!(m.instance_count(), 1);
    }
}
