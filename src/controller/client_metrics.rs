//! KIP-714 client-metrics subscriptions: the CLIENT_METRICS config resources
//! (`kafka-client-metrics.sh`, `kafka-configs --entity-type client-metrics`), their three
//! configs and Kafka's validation of them (`ClientMetricsConfigs`).
//!
//! A subscription is a named set of configs stored in the metadata log like a topic's
//! (one [`MetadataRecord::ClientMetricsConfig`](super::MetadataRecord) per change); a
//! subscription whose configs are all deleted is gone.

use std::collections::BTreeMap;

/// Metric name prefixes the matching clients push; `*` subscribes to every metric.
pub const METRICS: &str = "metrics";
/// How often the matching clients push, in milliseconds.
pub const INTERVAL_MS: &str = "interval.ms";
/// `key=regex` patterns on the client's metadata, all of which must match.
pub const MATCH: &str = "match";

/// Kafka's `ClientMetricsConfigs.INTERVAL_MS_DEFAULT`: 5 minutes.
pub const INTERVAL_MS_DEFAULT: i32 = 300_000;
const INTERVAL_MS_MIN: i32 = 100;
const INTERVAL_MS_MAX: i32 = 3_600_000;
/// Subscribes to every metric.
pub const ALL_METRICS: &str = "*";

/// The client metadata a `match` pattern can name (Kafka's `ALLOWED_MATCH_PARAMS`).
pub const MATCH_KEYS: [&str; 6] = [
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
];

/// The configs of a CLIENT_METRICS resource, with Kafka's documentation.
pub const CONFIGS: [(&str, &str); 3] = [
    (METRICS, "Telemetry metric name prefixes the matching clients push ('*' for all)."),
    (INTERVAL_MS, "The push interval of the matching clients, in milliseconds (100..3600000)."),
    (MATCH, "Client matching patterns: key=regex, for the keys client_instance_id, client_id, client_software_name, client_software_version, client_source_address, client_source_port."),
];

/// Why a subscription's configs were refused, and which Kafka error says so.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientMetricsConfigError {
    /// Kafka's InvalidRequestException (INVALID_REQUEST).
    #[error("{0}")]
    InvalidRequest(String),
    /// Kafka's InvalidConfigurationException (INVALID_CONFIG).
    #[error("{0}")]
    InvalidConfig(String),
}

/// A comma-separated list as Kafka's `ConfigDef.Type.LIST` reads it.
pub fn list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// One subscription, parsed.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub name: String,
    pub metrics: Vec<String>,
    pub interval_ms: i32,
    /// (client metadata key, anchored pattern); empty matches every client.
    pub patterns: Vec<(String, regex::Regex)>,
}

impl Subscription {
    /// Parses a stored subscription; `None` when it does not validate (it did when it
    /// was written, so only a hand-edited log gets here).
    pub fn parse(name: &str, configs: &BTreeMap<String, String>) -> Option<Subscription> {
        validate(name, configs).ok()?;
        let interval_ms = configs.get(INTERVAL_MS).map_or(Some(INTERVAL_MS_DEFAULT), |v| v.trim().parse().ok())?;
        let patterns = parse_patterns(&configs.get(MATCH).map(|m| list(m)).unwrap_or_default()).ok()?;
        Some(Subscription {
            name: name.to_owned(),
            metrics: configs.get(METRICS).map(|m| list(m)).unwrap_or_default(),
            interval_ms,
            patterns,
        })
    }

    /// Whether a client with `metadata` ((key, value) pairs) matches every pattern; a
    /// pattern on a key the client has no value for does not match.
    pub fn matches(&self, metadata: &[(&str, &str)]) -> bool {
        self.patterns.iter().all(|(key, re)| metadata.iter().any(|(k, v)| k == key && re.is_match(v)))
    }
}

/// Kafka's `ClientMetricsConfigs.validate` of a subscription's resulting configs.
pub fn validate(name: &str, configs: &BTreeMap<String, String>) -> Result<(), ClientMetricsConfigError> {
    use ClientMetricsConfigError::*;
    if name.is_empty() {
        return Err(InvalidRequest("Subscription name can't be empty".into()));
    }
    let unknown: Vec<&str> =
        configs.keys().map(String::as_str).filter(|k| !CONFIGS.iter().any(|(n, _)| n == k)).collect();
    if !unknown.is_empty() {
        return Err(InvalidRequest(format!("Unknown client metrics configuration: {unknown:?}")));
    }
    if let Some(v) = configs.get(INTERVAL_MS) {
        let interval: i32 = v.trim().parse().map_err(|_| {
            InvalidConfig(format!("Invalid value {v} for configuration {INTERVAL_MS}: Not a number of type INT"))
        })?;
        if !(INTERVAL_MS_MIN..=INTERVAL_MS_MAX).contains(&interval) {
            return Err(InvalidRequest(format!(
                "Invalid value {interval} for {INTERVAL_MS}, interval must be between 100 and 3600000 (1 hour)"
            )));
        }
    }
    if let Some(m) = configs.get(MATCH) {
        parse_patterns(&list(m))?;
    }
    Ok(())
}

/// Kafka's `parseMatchingPatterns`: `key=regex` each, on a known key, the regex valid;
/// a pattern must match the whole value (Java's `Matcher.matches`).
fn parse_patterns(patterns: &[String]) -> Result<Vec<(String, regex::Regex)>, ClientMetricsConfigError> {
    patterns
        .iter()
        .map(|p| {
            let illegal = || ClientMetricsConfigError::InvalidConfig(format!("Illegal client matching pattern: {p}"));
            let (key, value) = p.split_once('=').ok_or_else(illegal)?;
            let (key, value) = (key.trim(), value.trim());
            if !MATCH_KEYS.contains(&key) || value.is_empty() {
                return Err(illegal());
            }
            let re = regex::RegexBuilder::new(&format!("^(?:{value})$"))
                .size_limit(1 << 20)
                .build()
                .map_err(|_| ClientMetricsConfigError::InvalidConfig(format!("Illegal regex pattern: {value}")))?;
            Ok((key.to_owned(), re))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn kafka_validation_errors() {
        use ClientMetricsConfigError::*;
        assert!(matches!(validate("", &configs(&[])), Err(InvalidRequest(_))));
        assert!(matches!(validate("s", &configs(&[("nope", "1")])), Err(InvalidRequest(_))));
        assert!(matches!(validate("s", &configs(&[(INTERVAL_MS, "99")])), Err(InvalidRequest(_))));
        assert!(matches!(validate("s", &configs(&[(INTERVAL_MS, "3600001")])), Err(InvalidRequest(_))));
        assert!(matches!(validate("s", &configs(&[(INTERVAL_MS, "x")])), Err(InvalidConfig(_))));
        assert!(matches!(validate("s", &configs(&[(MATCH, "client_id")])), Err(InvalidConfig(_))));
        assert!(matches!(validate("s", &configs(&[(MATCH, "group_id=a")])), Err(InvalidConfig(_))));
        assert!(matches!(validate("s", &configs(&[(MATCH, "client_id=(")])), Err(InvalidConfig(_))));
        let ok = configs(&[
            (METRICS, "org.apache.kafka.consumer., org.apache"),
            (INTERVAL_MS, "100"),
            (MATCH, "client_id=app-.*"),
        ]);
        assert_eq!(validate("s", &ok), Ok(()));
    }

    #[test]
    fn patterns_match_whole_values_and_all_must_hold() {
        let c = configs(&[(MATCH, "client_id=app-.*,client_software_name=apache-kafka-java")]);
        let s = Subscription::parse("s", &c).unwrap();
        assert_eq!(s.interval_ms, INTERVAL_MS_DEFAULT);
        assert!(s.matches(&[("client_id", "app-1"), ("client_software_name", "apache-kafka-java")]));
        assert!(!s.matches(&[("client_id", "my-app-1"), ("client_software_name", "apache-kafka-java")]));
        assert!(!s.matches(&[("client_id", "app-1")]));
        let all = Subscription::parse("all", &configs(&[(METRICS, "*")])).unwrap();
        assert!(all.matches(&[]));
        assert_eq!(all.metrics, vec!["*"]);
    }
}
