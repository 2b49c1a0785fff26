//! `runnel topic produce`: stdin's lines as records, in v2 batches of up to
//! [`BATCH_RECORDS`] per partition, one Produce request per leader in flight.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::time::Instant;

use bytes::Bytes;
use clap::Args;
use kafka_protocol::messages::produce_request::{PartitionProduceData, ProduceRequest, TopicProduceData};
use kafka_protocol::messages::TopicName;
use serde_json::json;

use super::admin::{str_bytes, Admin};
use super::output::Output;
use super::records::{encode_batch, Outgoing, BATCH_RECORDS};
use super::topic::topic_partitions;
use super::RETRY_BACKOFF;
use super::{check, retriable, CliError, RETRIES};

#[derive(Args, Debug)]
pub struct ProduceArgs {
    pub topic: String,
    /// Split each line at the first occurrence of this string into key and value.
    #[arg(long)]
    pub key_separator: Option<String>,
    /// Write every record to this partition (default: keyed records by Kafka's murmur2
    /// partitioner, unkeyed ones batch by batch round robin).
    #[arg(long)]
    pub partition: Option<i32>,
    /// 0, 1 or all (-1).
    #[arg(long, default_value = "all", value_parser = parse_acks)]
    pub acks: i16,
}

fn parse_acks(s: &str) -> Result<i16, String> {
    match s {
        "all" | "-1" => Ok(-1),
        "0" => Ok(0),
        "1" => Ok(1),
        _ => Err(format!("{s:?} is not 0, 1 or all")),
    }
}

/// Kafka's default partitioner for a keyed record.
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    ((murmur2::murmur2(key, murmur2::KAFKA_SEED) & 0x7fff_ffff) % partitions.max(1) as u32) as i32
}

/// A progress line on stderr, at most once a second, after the first second.
pub struct Progress {
    verb: &'static str,
    started: Instant,
    last: Instant,
    shown: bool,
}

impl Progress {
    pub fn new(verb: &'static str) -> Progress {
        let now = Instant::now();
        Progress { verb, started: now, last: now, shown: false }
    }

    pub fn tick(&mut self, total: u64) {
        if self.last.elapsed().as_secs() >= 1 {
            self.last = Instant::now();
            self.shown = true;
            let rate = total as f64 / self.started.elapsed().as_secs_f64().max(1e-3);
            eprintln!("runnel: {} {total} records ({rate:.0} records/s)", self.verb);
        }
    }

    pub fn done(&self, total: u64) {
        if self.shown {
            let rate = total as f64 / self.started.elapsed().as_secs_f64().max(1e-3);
            eprintln!("runnel: {} {total} records in total ({rate:.0} records/s)", self.verb);
        }
    }
}

pub async fn run(admin: &mut Admin, args: ProduceArgs) -> Result<Output, CliError> {
    let topic = args.topic.clone();
    let metadata = admin.metadata(Some(std::slice::from_ref(&topic))).await?;
    let partitions = topic_partitions(&metadata, &topic)?;
    let count = partitions.len() as i32;
    if let Some(p) = args.partition {
        if !(0..count).contains(&p) {
            return Err(CliError::Usage(format!("--partition {p}: topic {topic} has partitions 0..{count}")));
        }
    }
    let mut leaders: BTreeMap<i32, i32> = partitions.iter().map(|(p, l, _, _)| (*p, *l)).collect();
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let mut total: u64 = 0;
    let mut round_robin = 0;
    let mut ranges: BTreeMap<i32, (i64, i64)> = BTreeMap::new();
    let mut progress = Progress::new("produced");
    loop {
        // Up to BATCH_RECORDS lines, spread over partitions.
        let mut pending: BTreeMap<i32, Vec<Outgoing>> = BTreeMap::new();
        let mut read = 0;
        let unkeyed_partition = args.partition.unwrap_or(round_robin % count.max(1));
        round_robin += 1;
        while read < BATCH_RECORDS {
            let Some(line) = lines.next() else { break };
            let line = line.map_err(|e| CliError::Io(format!("reading stdin: {e}")))?;
            let (key, value) = match args.key_separator.as_deref().and_then(|s| line.split_once(s)) {
                Some((k, v)) => (Some(Bytes::from(k.to_owned())), Bytes::from(v.to_owned())),
                None => (None, Bytes::from(line)),
            };
            let partition = match (&key, args.partition) {
                (_, Some(p)) => p,
                (Some(k), None) => partition_for_key(k, count),
                (None, None) => unkeyed_partition,
            };
            pending.entry(partition).or_default().push(Outgoing { key, value });
            read += 1;
        }
        if read == 0 {
            break;
        }
        send(admin, &topic, &mut leaders, pending, args.acks, &mut ranges).await?;
        total += read as u64;
        progress.tick(total);
    }
    progress.done(total);
    let docs: Vec<_> = ranges
        .iter()
        .map(|(p, (first, last))| json!({"partition": p, "first_offset": first, "last_offset": last}))
        .collect();
    let doc = json!({"topic": topic, "records": total, "acks": args.acks, "partitions": docs});
    Ok(Output::line(doc, format!("produced {total} records to {topic}")))
}

/// One Produce per leader; records where each partition's batch landed (unless acks=0).
/// Partitions that fail with a retriable error (a leader not ready yet, e.g. just after
/// CreateTopics on Kafka) are sent again to their leader from fresh metadata.
async fn send(
    admin: &mut Admin,
    topic: &str,
    leaders: &mut BTreeMap<i32, i32>,
    pending: BTreeMap<i32, Vec<Outgoing>>,
    acks: i16,
    ranges: &mut BTreeMap<i32, (i64, i64)>,
) -> Result<(), CliError> {
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
    let mut remaining: BTreeMap<i32, (Bytes, usize)> = BTreeMap::new();
    for (p, records) in pending {
        remaining.insert(p, (encode_batch(&records, now)?, records.len()));
    }
    let mut attempt = 0;
    loop {
        let mut last_error = None;
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for p in remaining.keys() {
            by_leader.entry(leaders.get(p).copied().unwrap_or(-1)).or_default().push(*p);
        }
        for (leader, ps) in by_leader {
            if leader < 0 {
                last_error = Some(CliError::kafka(format!("producing to {topic}"), 5));
                continue;
            }
            let data = ps
                .iter()
                .map(|p| PartitionProduceData::default().with_index(*p).with_records(Some(remaining[p].0.clone())))
                .collect();
            let request = ProduceRequest::default().with_acks(acks).with_timeout_ms(30_000).with_topic_data(vec![
                TopicProduceData::default().with_name(TopicName(str_bytes(topic))).with_partition_data(data),
            ]);
            let conn = admin.broker(leader).await?;
            if acks == 0 {
                conn.send_without_response(request).await?;
                for p in ps {
                    remaining.remove(&p);
                }
                continue;
            }
            let (response, _) = conn.send(request).await?;
            for t in response.responses {
                for p in t.partition_responses {
                    let detail = p.error_message.as_ref().map(|m| m.to_string()).or_else(|| {
                        p.record_errors
                            .first()
                            .and_then(|e| e.batch_index_error_message.as_ref())
                            .map(|m| m.to_string())
                    });
                    let result = check(p.error_code, || format!("producing to {topic}-{}", p.index), detail.as_deref());
                    match result {
                        Ok(()) => {
                            let n = remaining.remove(&p.index).map(|(_, n)| n).unwrap_or(1) as i64;
                            let last = p.base_offset + n - 1;
                            let range = ranges.entry(p.index).or_insert((p.base_offset, last));
                            range.1 = last;
                        }
                        Err(e) if retriable(p.error_code) => last_error = Some(e),
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        if remaining.is_empty() {
            return Ok(());
        }
        attempt += 1;
        if attempt > RETRIES {
            return Err(last_error.unwrap_or_else(|| CliError::Protocol(format!("no answer for {topic}"))));
        }
        tokio::time::sleep(RETRY_BACKOFF).await;
        let metadata = admin.metadata(Some(&[topic.to_owned()])).await?;
        if let Ok(partitions) = topic_partitions(&metadata, topic) {
            *leaders = partitions.iter().map(|(p, l, _, _)| (*p, *l)).collect();
        }
    }
}
