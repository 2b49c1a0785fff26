//! Per-API request counts and latencies, and produce latency by acks: recorded by
//! [`super::handle_frame`] for every request it answers (or, for acks=0, completes).

use std::time::Duration;

use kafka_protocol::messages::ApiKey;

use crate::metrics::Histogram;

/// API keys below this are tracked (Kafka's keys are dense and below 100).
const TRACKED_KEYS: usize = 128;

#[derive(Debug)]
pub struct RequestMetrics {
    /// Indexed by API key; a request's latency from its decoded frame to its encoded
    /// response. The count of each is that API's request count.
    by_api: Box<[Histogram]>,
    /// acks=0, acks=1, acks=all (-1).
    produce_by_acks: [Histogram; 3],
}

impl Default for RequestMetrics {
    fn default() -> Self {
        RequestMetrics {
            by_api: (0..TRACKED_KEYS).map(|_| Histogram::new()).collect(),
            produce_by_acks: [Histogram::new(), Histogram::new(), Histogram::new()],
        }
    }
}

impl RequestMetrics {
    pub fn observe_request(&self, api: ApiKey, elapsed: Duration) {
        if let Some(h) = usize::try_from(api as i16).ok().and_then(|i| self.by_api.get(i)) {
            h.observe(elapsed);
        }
    }

    /// A produce request's handling time (validation, append, and the wait for what its
    /// acks ask: the high watermark for acks=all, the fsync in fsync mode).
    pub fn observe_produce(&self, acks: i16, elapsed: Duration) {
        let i = match acks {
            0 => 0,
            1 => 1,
            -1 => 2,
            _ => return, // refused as INVALID_REQUIRED_ACKS; not a produce that happened
        };
        self.produce_by_acks[i].observe(elapsed);
    }

    /// `(API name, histogram)` of every API that has had a request.
    pub fn apis(&self) -> impl Iterator<Item = (String, &Histogram)> {
        self.by_api.iter().enumerate().filter(|(_, h)| h.count() > 0).filter_map(|(key, h)| {
            let api = ApiKey::try_from(i16::try_from(key).ok()?).ok()?;
            Some((format!("{api:?}"), h))
        })
    }

    /// `(acks label, histogram)`: "0", "1", "all".
    pub fn produce(&self) -> impl Iterator<Item = (&'static str, &Histogram)> {
        ["0", "1", "all"].into_iter().zip(self.produce_by_acks.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_per_api_and_produce_per_acks() {
        let m = RequestMetrics::default();
        m.observe_request(ApiKey::Produce, Duration::from_millis(1));
        m.observe_request(ApiKey::Produce, Duration::from_millis(2));
        m.observe_request(ApiKey::Metadata, Duration::from_millis(1));
        let apis: Vec<(String, u64)> = m.apis().map(|(n, h)| (n, h.count())).collect();
        assert_eq!(apis, [("Produce".to_owned(), 2), ("Metadata".to_owned(), 1)]);
        m.observe_produce(-1, Duration::from_millis(3));
        m.observe_produce(7, Duration::from_millis(3));
        let acks: Vec<(&str, u64)> = m.produce().map(|(a, h)| (a, h.count())).collect();
        assert_eq!(acks, [("0", 0), ("1", 0), ("all", 1)]);
    }
}
