//! `runnel topic consume`: Fetch from each partition's leader, from the start, the end,
//! an offset or a group's committed offsets, printing each record as it arrives.

use std::collections::BTreeMap;
use std::io::Write;

use clap::Args;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, TopicName};
use serde_json::{json, Value};

use super::admin::{str_bytes, Admin};
use super::group::{commit_offsets, committed_offsets};
use super::output::{Format, Output};
use super::produce::Progress;
use super::records::{decode_fetched, Incoming, FETCH_MAX_BYTES};
use super::topic::{list_offsets, topic_partitions, EARLIEST, LATEST};
use super::{check, CliError};

#[derive(Args, Debug)]
pub struct ConsumeArgs {
    pub topic: String,
    /// Where to start: `start`, `end` or an offset (default: the group's committed
    /// offsets with --group, else start).
    #[arg(long, value_parser = parse_offset)]
    pub offset: Option<StartAt>,
    /// Stop after this many records (default: follow until interrupted).
    #[arg(long)]
    pub num: Option<u64>,
    /// Read only this partition.
    #[arg(long)]
    pub partition: Option<i32>,
    /// Start from this group's committed offsets and commit what was read (as a
    /// consumer without group membership; refused by the broker while the group has
    /// members).
    #[arg(long)]
    pub group: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartAt {
    Start,
    End,
    Offset(i64),
}

pub fn parse_offset(s: &str) -> Result<StartAt, String> {
    match s {
        "start" | "beginning" | "earliest" => Ok(StartAt::Start),
        "end" | "latest" => Ok(StartAt::End),
        n => n
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .map(StartAt::Offset)
            .ok_or_else(|| format!("{s:?} is not start, end or an offset >= 0")),
    }
}

/// One record as `--format json` prints it (one object per line).
pub fn record_json(topic: &str, partition: i32, r: &Incoming) -> Value {
    let text = |b: &Option<Vec<u8>>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
    json!({
        "topic": topic, "partition": partition, "offset": r.offset, "timestamp": r.timestamp,
        "key": text(&r.key), "value": text(&r.value),
    })
}

pub async fn run(admin: &mut Admin, format: Format, args: ConsumeArgs) -> Result<Output, CliError> {
    let topic = args.topic.clone();
    let metadata = admin.metadata(Some(std::slice::from_ref(&topic))).await?;
    let all = topic_partitions(&metadata, &topic)?;
    let partitions: Vec<(i32, i32)> =
        all.iter().filter(|(p, ..)| args.partition.is_none_or(|want| *p == want)).map(|(p, l, ..)| (*p, *l)).collect();
    if partitions.is_empty() {
        return Err(CliError::Usage(format!("topic {topic} has no partition {:?}", args.partition)));
    }
    let mut positions: BTreeMap<i32, i64> = match args.offset {
        Some(StartAt::Start) => list_offsets(admin, &topic, &partitions, EARLIEST).await?,
        Some(StartAt::End) => list_offsets(admin, &topic, &partitions, LATEST).await?,
        Some(StartAt::Offset(n)) => partitions.iter().map(|(p, _)| (*p, n)).collect(),
        None => {
            let mut start = list_offsets(admin, &topic, &partitions, EARLIEST).await?;
            if let Some(group) = &args.group {
                for ((t, p), offset) in committed_offsets(admin, group).await? {
                    if t == topic && start.contains_key(&p) && offset >= 0 {
                        start.insert(p, offset);
                    }
                }
            }
            start
        }
    };
    let leaders: BTreeMap<i32, i32> = partitions.iter().copied().collect();
    let mut committed: BTreeMap<i32, i64> = BTreeMap::new();
    let mut printed: u64 = 0;
    let mut progress = Progress::new("consumed");
    let limit = args.num.unwrap_or(u64::MAX);
    let stdout = std::io::stdout();
    while printed < limit {
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for (p, l) in &leaders {
            by_leader.entry(*l).or_default().push(*p);
        }
        for (leader, ps) in by_leader {
            let fetched = fetch(admin, &topic, leader, &ps, &positions).await?;
            let mut out = stdout.lock();
            for (p, records, next) in fetched {
                for r in records {
                    if printed >= limit {
                        break;
                    }
                    let line = match format {
                        Format::Json => record_json(&topic, p, &r).to_string(),
                        Format::Table => String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned(),
                    };
                    if writeln!(out, "{line}").is_err() {
                        return Ok(Output::new(Value::Null, String::new()));
                    }
                    printed += 1;
                    positions.insert(p, r.offset + 1);
                }
                if printed < limit {
                    positions.insert(p, next.max(positions.get(&p).copied().unwrap_or(next)));
                }
            }
            let _ = out.flush();
        }
        if let Some(group) = &args.group {
            // Only what moved since the last commit (an idle follow commits nothing).
            let commit: Vec<(i32, i64)> =
                positions.iter().filter(|(p, o)| committed.get(p) != Some(o)).map(|(p, o)| (*p, *o)).collect();
            if !commit.is_empty() {
                commit_offsets(admin, group, &topic, &commit).await?;
                committed.extend(commit);
            }
        }
        progress.tick(printed);
    }
    progress.done(printed);
    Ok(Output::new(Value::Null, String::new()))
}

/// One Fetch to `leader` for `partitions` at `positions`: (partition, records, next).
async fn fetch(
    admin: &mut Admin,
    topic: &str,
    leader: i32,
    partitions: &[i32],
    positions: &BTreeMap<i32, i64>,
) -> Result<Vec<(i32, Vec<Incoming>, i64)>, CliError> {
    if leader < 0 {
        return Err(CliError::kafka(format!("consuming {topic}"), 5));
    }
    let conn = admin.broker(leader).await?;
    let version = conn.version(ApiKey::Fetch)?;
    let parts = partitions
        .iter()
        .map(|p| {
            let part = FetchPartition::default()
                .with_partition(*p)
                .with_fetch_offset(positions.get(p).copied().unwrap_or(0))
                .with_partition_max_bytes(FETCH_MAX_BYTES);
            if version >= 9 {
                part.with_current_leader_epoch(-1)
            } else {
                part
            }
        })
        .collect();
    let mut request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_topics(vec![FetchTopic::default().with_topic(TopicName(str_bytes(topic))).with_partitions(parts)]);
    if version >= 3 {
        request = request.with_max_bytes(FETCH_MAX_BYTES);
    }
    if version >= 7 {
        request = request.with_session_id(0).with_session_epoch(-1);
    }
    let (response, _) = conn.send(request).await?;
    check(response.error_code, || format!("fetching {topic}"), None)?;
    let mut out = Vec::new();
    for t in response.responses {
        for p in t.partitions {
            let index = p.partition_index;
            check(p.error_code, || format!("fetching {topic}-{index}"), None)?;
            let from = positions.get(&index).copied().unwrap_or(0);
            let (records, next) = match &p.records {
                Some(bytes) => decode_fetched(bytes, from)?,
                None => (Vec::new(), from),
            };
            out.push((index, records, next));
        }
    }
    Ok(out)
}
