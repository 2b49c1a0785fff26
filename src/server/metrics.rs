//! `/metrics`: the broker's state in the Prometheus text format (version 0.0.4).
//!
//! Gauges are computed at scrape time from the state the broker keeps anyway (the
//! metadata image, the local partitions, the group coordinator, the connection table,
//! the data dir's filesystem); counters and histograms are the atomics the layers bump
//! on their paths ([`crate::metrics`], [`crate::protocol::request_metrics`], the
//! partitions' byte counts, [`crate::replication::leadership_counters`]). A scrape takes
//! each partition's lock briefly, one at a time, and the coordinator's lock once.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::connections::ConnectionTable;
use super::http_serve::HttpSlots;
use crate::metrics::{fsync_latency, Histogram};
use crate::protocol::Ctx;

/// The registry of one broker: a single collector that reads everything at scrape time.
pub fn registry(ctx: Arc<Ctx>, connections: Arc<ConnectionTable>, http: Arc<HttpSlots>) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(BrokerCollector { ctx, connections, http }));
    registry
}

/// Renders `registry` as the Prometheus text format.
pub fn render(registry: &Registry) -> Result<String, fmt::Error> {
    let mut out = String::with_capacity(16 * 1024);
    prometheus_client::encoding::prometheus_text::encode(&mut out, registry)?;
    Ok(out)
}

struct BrokerCollector {
    ctx: Arc<Ctx>,
    connections: Arc<ConnectionTable>,
    http: Arc<HttpSlots>,
}

impl fmt::Debug for BrokerCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerCollector").field("node_id", &self.ctx.config.node_id).finish()
    }
}

type Labels = Vec<(&'static str, String)>;

/// A gauge family: one row per label set.
fn gauges<V: EncodeGaugeValue>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (Labels, V)>,
) -> fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, v) in rows {
        m.encode_family(&labels)?.encode_gauge(&v)?;
    }
    Ok(())
}

/// A counter family (the encoder appends `_total` to `name`).
fn counters(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (Labels, u64)>,
) -> fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, v) in rows {
        m.encode_family(&labels)?.encode_counter::<NoLabelSet, u64, f64>(&v, None)?;
    }
    Ok(())
}

fn histograms<'a>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (Labels, &'a Histogram)>,
) -> fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, h) in rows {
        let s = h.snapshot();
        m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(s.sum_seconds, s.count, &s.buckets, None)?;
    }
    Ok(())
}

fn labels<const N: usize>(pairs: [(&'static str, String); N]) -> Labels {
    pairs.into_iter().collect()
}

impl Collector for BrokerCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let ctx = &self.ctx;
        let requests = &ctx.requests;
        histograms(
            &mut enc,
            "produce_latency_seconds",
            "Time from a produce request's decoding to its response being ready, by acks (for acks=all it \
             includes the wait for the in-sync replicas, in fsync mode the fsync)",
            requests.produce().map(|(acks, h)| (labels([("acks", acks.to_owned())]), h)),
        )?;
        let apis: Vec<(String, &Histogram)> = requests.apis().collect();
        counters(
            &mut enc,
            "requests",
            "Kafka requests handled, by API",
            apis.iter().map(|(api, h)| (labels([("api", api.clone())]), h.count())),
        )?;
        histograms(
            &mut enc,
            "request_latency_seconds",
            "Time from a request's frame to its encoded response, by API (a Fetch's includes its long poll)",
            apis.iter().map(|(api, h)| (labels([("api", api.clone())]), *h)),
        )?;
        histograms(
            &mut enc,
            "fsync_latency_seconds",
            "fdatasync of log segments and of group commits (process-wide)",
            [(Labels::new(), fsync_latency())],
        )?;
        counters(
            &mut enc,
            "storage_resource_shortages",
            "Log operations that failed because the process ran short of file descriptors or memory \
             (EMFILE, ENFILE, ENOMEM; process-wide): answered with a retriable error, the log dir stays online",
            [(Labels::new(), crate::metrics::storage_resource_shortages().load(std::sync::atomic::Ordering::Relaxed))],
        )?;
        if let Some(queue) = &ctx.traces {
            counters(
                &mut enc,
                "otlp_spans_exported",
                "Produce spans the OTLP collector accepted",
                [(Labels::new(), queue.exported())],
            )?;
            counters(
                &mut enc,
                "otlp_spans_dropped",
                "Produce spans lost: the export queue was full, or the collector failed or refused them",
                [(Labels::new(), queue.dropped())],
            )?;
        }
        gauges(
            &mut enc,
            "open_connections",
            "Open Kafka client connections",
            [(Labels::new(), self.connections.open_count() as i64)],
        )?;
        gauges(
            &mut enc,
            "open_http_connections",
            "Open connections of the HTTP listener (health, metrics, the HTTP API and the console)",
            [(Labels::new(), self.http.open() as i64)],
        )?;
        gauges(
            &mut enc,
            "http_connections_limit",
            "The HTTP listener's connection bound (512, or an eighth of the open-file limit when lower)",
            [(Labels::new(), self.http.limit() as i64)],
        )?;
        counters(
            &mut enc,
            "http_connection_limit_reached",
            "Times a new HTTP connection had to wait for another to close",
            [(Labels::new(), self.http.limit_reached())],
        )?;
        let sessions = ctx.fetch_sessions.stats();
        gauges(
            &mut enc,
            "fetch_sessions",
            "KIP-227 incremental fetch sessions cached",
            [(Labels::new(), sessions.sessions as i64)],
        )?;
        gauges(
            &mut enc,
            "fetch_session_partitions",
            "Partitions cached by all incremental fetch sessions",
            [(Labels::new(), sessions.partitions as i64)],
        )?;
        counters(
            &mut enc,
            "fetch_session_evictions",
            "Fetch sessions evicted to make room for a new one",
            [(Labels::new(), sessions.evictions)],
        )?;
        counters(
            &mut enc,
            "incremental_fetches",
            "Fetch requests served from a fetch session, naming only what changed",
            [(Labels::new(), sessions.incremental_fetches)],
        )?;
        self.encode_partitions(&mut enc)?;
        self.encode_cluster_health(&mut enc)?;
        self.encode_groups(&mut enc)?;
        self.encode_client_telemetry(&mut enc)?;
        let image = ctx.image();
        let me = ctx.config.node_id;
        let under_replicated = image
            .topics
            .values()
            .flat_map(|t| t.partitions.iter())
            .filter(|p| p.leader == me && p.isr.len() < p.replicas.len())
            .count();
        gauges(
            &mut enc,
            "under_replicated_partitions",
            "Partitions led by this broker whose ISR is smaller than their replica set",
            [(Labels::new(), under_replicated as i64)],
        )?;
        let leadership = ctx.replicas.leadership_counters();
        counters(
            &mut enc,
            "isr_shrinks",
            "ISR shrinks of partitions led by this broker",
            one(leadership.isr_shrinks()),
        )?;
        counters(
            &mut enc,
            "isr_expands",
            "ISR expands of partitions led by this broker",
            one(leadership.isr_expands()),
        )?;
        counters(
            &mut enc,
            "unclean_leader_elections",
            "Elections that made this broker leader from outside the ISR",
            one(leadership.unclean_elections()),
        )?;
        let quotas = ctx.replicas.quotas();
        counters(
            &mut enc,
            "replication_throttled_bytes",
            "Bytes of throttled partitions (leader/follower.replication.throttled.replicas) moved, by the side that counted them; alter_log_dirs: bytes copied moving partitions between log directories",
            [
                (labels([("side", "leader".to_owned())]), quotas.leader.total_bytes()),
                (labels([("side", "follower".to_owned())]), quotas.follower.total_bytes()),
                (labels([("side", "alter_log_dirs".to_owned())]), quotas.alter_log_dirs.total_bytes()),
            ],
        )?;
        if let Some(ratio) = disk_used_ratio(&ctx.config.data_dir) {
            gauges(
                &mut enc,
                "broker_disk_used_ratio",
                "Used fraction of the filesystem that holds the data dir (as df computes it)",
                [(Labels::new(), ratio)],
            )?;
        }
        Ok(())
    }
}

fn one(v: u64) -> [(Labels, u64); 1] {
    [(Labels::new(), v)]
}

impl BrokerCollector {
    /// Per partition: log size and segments; per topic: bytes in and out.
    /// Kafka's controller and log-dir health gauges. The cluster-wide ones are reported
    /// by the active controller only (0 elsewhere), as Kafka's `ActiveControllerCount`,
    /// `OfflinePartitionsCount`, `FencedBrokerCount` and `ActiveBrokerCount` are, so
    /// that a sum over every broker counts each partition and broker once.
    fn encode_cluster_health(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let ctx = &self.ctx;
        let image = ctx.image();
        let active = ctx.controller.leader() == Some(ctx.config.node_id);
        let only_active = |n: usize| if active { n as i64 } else { 0 };
        gauges(
            enc,
            "active_controller",
            "1 on the controller quorum's leader, 0 elsewhere (Kafka's ActiveControllerCount): a cluster has exactly one",
            [(Labels::new(), i64::from(active))],
        )?;
        let offline = image.topics.values().flat_map(|t| t.partitions.iter()).filter(|p| p.leader < 0).count();
        gauges(
            enc,
            "offline_partitions",
            "Partitions with no leader (reported by the active controller; Kafka's OfflinePartitionsCount)",
            [(Labels::new(), only_active(offline))],
        )?;
        let fenced = image.brokers.values().filter(|b| b.fenced).count();
        gauges(
            enc,
            "fenced_brokers",
            "Registered brokers the controller has fenced: not heartbeating, or just started (reported by the active controller)",
            [(Labels::new(), only_active(fenced))],
        )?;
        gauges(
            enc,
            "active_brokers",
            "Registered brokers that are not fenced (reported by the active controller)",
            [(Labels::new(), only_active(image.brokers.len() - fenced))],
        )?;
        let dirs = ctx.replicas.log_dirs();
        let offline_dirs = (0..dirs.dirs().len()).filter(|i| dirs.is_offline(*i)).count();
        gauges(
            enc,
            "offline_log_dirs",
            "This broker's log directories that are offline after an I/O error (Kafka's OfflineLogDirectoryCount)",
            [(Labels::new(), offline_dirs as i64)],
        )
    }

    fn encode_partitions(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let mut partitions = self.ctx.replicas.all_partitions();
        partitions.sort_by(|a, b| (&a.topic, a.index).cmp(&(&b.topic, b.index)));
        let mut sizes = Vec::with_capacity(partitions.len());
        let mut traffic: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for p in &partitions {
            let (size, segments) = p.log_size_and_segments();
            let offsets = (p.log_start_offset(), p.log_end_offset());
            let l = labels([("topic", p.topic.clone()), ("partition", p.index.to_string())]);
            sizes.push((l, size, segments, offsets));
            let (bytes_in, bytes_out) = p.traffic();
            let t = traffic.entry(&p.topic).or_default();
            t.0 += bytes_in;
            t.1 += bytes_out;
        }
        gauges(
            enc,
            "log_size_bytes",
            "Bytes of a local partition's log segments",
            sizes.iter().map(|(l, size, _, _)| (l.clone(), *size as i64)),
        )?;
        gauges(
            enc,
            "log_segments",
            "Segments of a local partition's log",
            sizes.iter().map(|(l, _, segments, _)| (l.clone(), *segments as i64)),
        )?;
        gauges(
            enc,
            "log_start_offset",
            "First offset a local partition's log holds (retention moves it)",
            sizes.iter().map(|(l, _, _, (start, _))| (l.clone(), *start)),
        )?;
        gauges(
            enc,
            "log_end_offset",
            "Offset the next record appended to a local partition's log gets",
            sizes.iter().map(|(l, _, _, (_, end))| (l.clone(), *end)),
        )?;
        counters(
            enc,
            "bytes_in",
            "Record bytes appended by produce requests to the partitions this broker leads, by topic",
            traffic.iter().map(|(t, (i, _))| (labels([("topic", (*t).to_owned())]), *i)),
        )?;
        counters(
            enc,
            "bytes_out",
            "Record bytes served to consumers' fetches (not followers'), by topic",
            traffic.iter().map(|(t, (_, o))| (labels([("topic", (*t).to_owned())]), *o)),
        )
    }

    /// Consumer lag (the high watermark minus the committed offset) of every committed
    /// partition this broker hosts, and each group's rebalances.
    fn encode_groups(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let ctx = &self.ctx;
        let view = ctx.groups.metrics_view();
        let image = ctx.image();
        let lag = view.committed.iter().filter_map(|(group, topic, partition, committed)| {
            let topic_id = image.topic(topic)?.topic_id;
            let p = ctx.replicas.partition(&topic_id, *partition)?;
            let lag = (p.high_watermark() - committed).max(0);
            let l = labels([("group", group.clone()), ("topic", topic.clone()), ("partition", partition.to_string())]);
            Some((l, lag))
        });
        gauges(
            enc,
            "consumer_lag_messages",
            "High watermark minus the group's committed offset, for partitions hosted by this broker",
            lag,
        )?;
        // A group's generation counts its completed rebalances (it survives restarts in
        // __consumer_offsets; a deleted and recreated group starts again, as a counter
        // reset).
        counters(
            enc,
            "rebalances",
            "Completed rebalances of a group (its generation id)",
            view.generations.iter().map(|(g, gen)| (labels([("group", g.clone())]), u64::try_from(*gen).unwrap_or(0))),
        )
    }
}

impl BrokerCollector {
    /// KIP-714: what clients pushed, one family per metric (`client_telemetry_` and the
    /// OTLP name with every character outside `[a-zA-Z0-9_]` made `_`), labelled with the
    /// client instance, its client id, the resource attributes it sent (group id, ...)
    /// and the data point's attributes (topic, partition, ...). Gauges as gauges, sums as
    /// counters; then the bookkeeping of the telemetry itself.
    fn encode_client_telemetry(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        use crate::telemetry::store::{sanitise, Kind};
        let telemetry = &self.ctx.telemetry;
        for family in telemetry.store.families(self.ctx.now_ms()) {
            let name = format!("client_telemetry_{}", sanitise(&family.name));
            let help = if family.help.is_empty() { family.name.clone() } else { family.help.clone() };
            match family.kind {
                Kind::Gauge => {
                    let mut m = enc.encode_descriptor(&name, &help, None, MetricType::Gauge)?;
                    for (labels, v) in &family.rows {
                        m.encode_family(labels)?.encode_gauge(v)?;
                    }
                }
                Kind::Sum => {
                    // The encoder appends `_total`; a Kafka name ending in `.total` keeps one.
                    let name = name.strip_suffix("_total").unwrap_or(&name);
                    let mut m = enc.encode_descriptor(name, &help, None, MetricType::Counter)?;
                    for (labels, v) in &family.rows {
                        m.encode_family(labels)?.encode_counter::<NoLabelSet, f64, f64>(v, None)?;
                    }
                }
            }
        }
        gauges(
            enc,
            "client_telemetry_instances",
            "KIP-714 client instances the broker knows (they asked for a subscription or pushed lately)",
            [(Labels::new(), telemetry.manager.instance_count() as i64)],
        )?;
        gauges(
            enc,
            "client_telemetry_series",
            "Series of pushed client metrics shown here",
            [(Labels::new(), telemetry.store.series_count() as i64)],
        )?;
        counters(
            enc,
            "client_telemetry_dropped_series",
            "Pushed client metric series not shown because the cap on series was reached",
            one(telemetry.store.dropped_series()),
        )
    }
}

/// `used / (used + available to unprivileged users)` of the filesystem holding `dir`,
/// as df's Use% (blocks reserved for root count as neither).
fn disk_used_ratio(dir: &std::path::Path) -> Option<f64> {
    let st = rustix::fs::statvfs(dir).ok()?;
    let used = st.f_blocks.saturating_sub(st.f_bfree);
    let total = used + st.f_bavail;
    (total > 0).then(|| used as f64 / total as f64)
}
