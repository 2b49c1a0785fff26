//! Instruments the layers update on their hot paths: lock-free latency histograms and
//! the process-wide fsync histogram. A leaf module (it imports nothing from the crate),
//! so every layer, storage included, can record into it; `server::metrics` reads them
//! at scrape time and renders the Prometheus text format.
//!
//! Recording is a few relaxed atomic adds and never takes a lock. A scrape may see an
//! observation's bucket without its sum (they are separate atomics); the count it
//! reports is the sum of the buckets it read, so the `+Inf` bucket always equals `_count`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds, in seconds, of the latency buckets: 50 µs (a page-cache append) to 10 s
/// (a long-poll fetch's `max.wait.ms` or a stalled disk).
pub const LATENCY_BOUNDS: [f64; 17] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A latency histogram over [`LATENCY_BOUNDS`] plus an overflow bucket.
#[derive(Debug)]
pub struct Histogram {
    /// Non-cumulative: `buckets[i]` counts observations in `(bound[i-1], bound[i]]`; the
    /// last one counts those above every bound.
    buckets: [AtomicU64; LATENCY_BOUNDS.len() + 1],
    sum_nanos: AtomicU64,
}

/// What a scrape read from a [`Histogram`].
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    pub sum_seconds: f64,
    pub count: u64,
    /// `(upper bound, observations in this bucket only)`, ending with `+Inf`: not
    /// cumulative (prometheus-client's encoder sums them into `le` buckets).
    pub buckets: Vec<(f64, u64)>,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    pub const fn new() -> Histogram {
        Histogram { buckets: [const { AtomicU64::new(0) }; LATENCY_BOUNDS.len() + 1], sum_nanos: AtomicU64::new(0) }
    }

    pub fn observe(&self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let i = LATENCY_BOUNDS.iter().position(|b| secs <= *b).unwrap_or(LATENCY_BOUNDS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let buckets: Vec<(f64, u64)> = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, b)| (LATENCY_BOUNDS.get(i).copied().unwrap_or(f64::INFINITY), b.load(Ordering::Relaxed)))
            .collect();
        HistogramSnapshot {
            sum_seconds: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
            count: buckets.iter().map(|(_, n)| n).sum(),
            buckets,
        }
    }
}

/// fdatasync latency of log data: a segment's flush (its log and indexes) and a
/// partition's group-commit fsync. Process-wide, not per broker: the disk is the
/// process's, and storage has no broker handle to record into (in a test process that
/// runs several embedded brokers, their fsyncs are counted together).
pub fn fsync_latency() -> &'static Histogram {
    static FSYNC: Histogram = Histogram::new();
    &FSYNC
}

/// Runs `sync` (an fsync) and records how long it took in [`fsync_latency`].
pub fn timed_fsync<T>(sync: impl FnOnce() -> T) -> T {
    let started = std::time::Instant::now();
    let out = sync();
    fsync_latency().observe(started.elapsed());
    out
}

/// Storage operations that failed because the process ran short of descriptors or
/// memory (EMFILE, ENFILE, ENOMEM), process-wide like [`fsync_latency`]. The log
/// directory stays online for those (see `storage::is_resource_shortage`); this count
/// and a log line are how an operator sees them.
pub fn storage_resource_shortages() -> &'static AtomicU64 {
    static SHORTAGES: AtomicU64 = AtomicU64::new(0);
    &SHORTAGES
}

/// Counts one storage operation that hit a resource shortage; returns the count so far.
pub fn storage_resource_shortage() -> u64 {
    storage_resource_shortages().fetch_add(1, Ordering::Relaxed) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        let h = Histogram::new();
        h.observe(Duration::from_micros(50)); // on the first bound: first bucket
        h.observe(Duration::from_micros(700)); // (0.5 ms, 1 ms]
        h.observe(Duration::from_secs(60)); // above every bound
        let s = h.snapshot();
        assert_eq!(s.count, 3);
        assert_eq!(s.buckets[0], (0.000_05, 1));
        assert_eq!(s.buckets[3], (0.000_5, 0));
        assert_eq!(s.buckets[4], (0.001, 1));
        assert_eq!(s.buckets[LATENCY_BOUNDS.len() - 1], (10.0, 0));
        assert_eq!(*s.buckets.last().unwrap(), (f64::INFINITY, 1));
        assert!((s.sum_seconds - 60.00075).abs() < 1e-9, "{}", s.sum_seconds);
    }

    #[test]
    fn the_buckets_add_up_to_the_count() {
        let h = Histogram::new();
        for us in [1, 90, 300, 2_000, 40_000, 900_000] {
            h.observe(Duration::from_micros(us));
        }
        let s = h.snapshot();
        assert!(s.buckets.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(s.buckets.iter().map(|b| b.1).sum::<u64>(), s.count);
        assert_eq!(h.count(), 6);
    }
}
