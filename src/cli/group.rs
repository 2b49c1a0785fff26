//! `runnel group list|describe|seek|delete`, as `kafka-consumer-groups` does them.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Buf;
use clap::Subcommand;
use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequest;
use kafka_protocol::messages::{ApiKey, ConsumerProtocolAssignment, GroupId, TopicName};
use kafka_protocol::protocol::Decodable;
use serde_json::json;

use super::admin::{str_bytes, Admin};
use super::consume::{parse_offset, StartAt};
use super::output::{table, Output};
use super::topic::{list_offsets, topic_partitions, EARLIEST, LATEST};
use super::{check, CliError, CommonArgs};

#[derive(Subcommand, Debug)]
pub enum GroupCommand {
    /// Every group of every broker, with protocol type and state.
    List,
    /// Members (client id, host, assigned partitions) and, per partition, the committed
    /// offset, log end offset and lag.
    Describe { group: String },
    /// Commit new offsets for an empty group (refused while it has members).
    Seek {
        group: String,
        /// `start`, `end` or an offset.
        #[arg(long, value_parser = parse_offset)]
        to: StartAt,
        #[arg(long)]
        topic: String,
    },
    /// Delete an empty group and its committed offsets.
    Delete { group: String },
}

pub async fn run(common: &CommonArgs, command: GroupCommand) -> Result<Output, CliError> {
    let mut admin = Admin::connect(&common.brokers).await?;
    match command {
        GroupCommand::List => list(&mut admin).await,
        GroupCommand::Describe { group } => describe(&mut admin, &group).await,
        GroupCommand::Seek { group, to, topic } => seek(&mut admin, &group, to, &topic).await,
        GroupCommand::Delete { group } => delete(&mut admin, &group).await,
    }
}

async fn list(admin: &mut Admin) -> Result<Output, CliError> {
    let metadata = admin.metadata(Some(&[])).await?;
    let mut groups = BTreeMap::new();
    for b in &metadata.brokers {
        let (response, _) = admin.broker(b.node_id.0).await?.send(ListGroupsRequest::default()).await?;
        check(response.error_code, || format!("listing groups of broker {}", b.node_id.0), None)?;
        for g in response.groups {
            groups.insert(g.group_id.0.to_string(), (g.protocol_type.to_string(), g.group_state.to_string()));
        }
    }
    let docs: Vec<_> = groups.iter().map(|(g, (t, s))| json!({"group": g, "protocol_type": t, "state": s})).collect();
    let rows: Vec<Vec<String>> = groups.iter().map(|(g, (t, s))| vec![g.clone(), t.clone(), s.clone()]).collect();
    Ok(Output::new(json!({ "groups": docs }), table(&["GROUP", "PROTOCOL-TYPE", "STATE"], &rows)))
}

async fn describe_group(admin: &mut Admin, group: &str) -> Result<DescribedGroup, CliError> {
    let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(str_bytes(group))]);
    let (response, _) = admin.coordinator(group).await?.send(request).await?;
    let described =
        response.groups.into_iter().next().ok_or_else(|| CliError::Protocol("DescribeGroups: no group".into()))?;
    check(described.error_code, || format!("group {group}"), described.error_message.as_deref())?;
    Ok(described)
}

/// A member's assigned partitions, from its consumer protocol assignment (empty when
/// the bytes are not one).
fn assignment(bytes: &bytes::Bytes) -> Vec<(String, i32)> {
    let mut buf = bytes.clone();
    if buf.remaining() < 2 {
        return Vec::new();
    }
    let version = buf.get_i16();
    let Ok(a) = ConsumerProtocolAssignment::decode(&mut buf, version.clamp(0, 3)) else { return Vec::new() };
    a.assigned_partitions.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.topic.0.to_string(), *p))).collect()
}

/// The group's committed offsets: (topic, partition) → offset.
pub async fn committed_offsets(admin: &mut Admin, group: &str) -> Result<BTreeMap<(String, i32), i64>, CliError> {
    let request = OffsetFetchRequest::default().with_group_id(GroupId(str_bytes(group))).with_topics(None);
    let (response, _) = admin.coordinator(group).await?.send(request).await?;
    check(response.error_code, || format!("committed offsets of group {group}"), None)?;
    let mut out = BTreeMap::new();
    for t in response.topics {
        for p in t.partitions {
            check(p.error_code, || format!("committed offset of {}-{}", t.name.0, p.partition_index), None)?;
            if p.committed_offset >= 0 {
                out.insert((t.name.0.to_string(), p.partition_index), p.committed_offset);
            }
        }
    }
    Ok(out)
}

/// Commits `offsets` (partition, offset) of `topic` for `group` as a client outside
/// the group (generation -1, no member id), as admin tools do.
pub async fn commit_offsets(
    admin: &mut Admin,
    group: &str,
    topic: &str,
    offsets: &[(i32, i64)],
) -> Result<(), CliError> {
    let conn = admin.coordinator(group).await?;
    let version = conn.version(ApiKey::OffsetCommit)?;
    let partitions = offsets
        .iter()
        .map(|(p, o)| {
            let part = OffsetCommitRequestPartition::default().with_partition_index(*p).with_committed_offset(*o);
            if version >= 6 {
                part.with_committed_leader_epoch(-1)
            } else {
                part
            }
        })
        .collect();
    let mut request = OffsetCommitRequest::default()
        .with_group_id(GroupId(str_bytes(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(str_bytes(topic)))
            .with_partitions(partitions)]);
    if (2..=4).contains(&version) {
        request = request.with_retention_time_ms(-1);
    }
    let (response, _) = conn.send(request).await?;
    for t in response.topics {
        for p in t.partitions {
            check(p.error_code, || format!("committing {topic}-{} for group {group}", p.partition_index), None)?;
        }
    }
    Ok(())
}

async fn describe(admin: &mut Admin, group: &str) -> Result<Output, CliError> {
    let described = describe_group(admin, group).await?;
    let committed = committed_offsets(admin, group).await?;
    let mut owner: BTreeMap<(String, i32), (String, String, String)> = BTreeMap::new();
    let mut members = Vec::new();
    for m in &described.members {
        let assigned = assignment(&m.member_assignment);
        for tp in &assigned {
            owner.insert(tp.clone(), (m.member_id.to_string(), m.client_host.to_string(), m.client_id.to_string()));
        }
        members.push(json!({
            "member_id": m.member_id.to_string(), "client_id": m.client_id.to_string(),
            "host": m.client_host.to_string(),
            "assignment": assigned.iter().map(|(t, p)| json!({"topic": t, "partition": p})).collect::<Vec<_>>(),
        }));
    }
    let keys: BTreeSet<(String, i32)> = committed.keys().chain(owner.keys()).cloned().collect();
    let topics: BTreeSet<String> = keys.iter().map(|(t, _)| t.clone()).collect();
    let mut log_end: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for t in &topics {
        let metadata = admin.metadata(Some(std::slice::from_ref(t))).await?;
        let Ok(partitions) = topic_partitions(&metadata, t) else { continue };
        let leaders: Vec<(i32, i32)> = partitions.iter().map(|(p, l, ..)| (*p, *l)).collect();
        for (p, o) in list_offsets(admin, t, &leaders, LATEST).await? {
            log_end.insert((t.clone(), p), o);
        }
    }
    let mut rows = Vec::new();
    let mut docs = Vec::new();
    let dash = || "-".to_owned();
    for key in &keys {
        let current = committed.get(key).copied();
        let end = log_end.get(key).copied();
        let lag = match (current, end) {
            (Some(c), Some(e)) => Some((e - c).max(0)),
            _ => None,
        };
        let (member, host, client) = owner.get(key).cloned().unwrap_or_else(|| (dash(), dash(), dash()));
        docs.push(json!({
            "topic": key.0, "partition": key.1, "committed_offset": current, "log_end_offset": end, "lag": lag,
            "member_id": owner.get(key).map(|o| o.0.clone()), "host": owner.get(key).map(|o| o.1.clone()),
            "client_id": owner.get(key).map(|o| o.2.clone()),
        }));
        let show = |o: Option<i64>| o.map(|v| v.to_string()).unwrap_or_else(dash);
        rows.push(vec![
            group.to_owned(),
            key.0.clone(),
            key.1.to_string(),
            show(current),
            show(end),
            show(lag),
            member,
            host,
            client,
        ]);
    }
    let doc = json!({
        "group": group, "state": described.group_state.to_string(), "protocol_type": described.protocol_type.to_string(),
        "members": members, "offsets": docs,
    });
    let mut text = format!("GROUP {group}  STATE {}  MEMBERS {}\n\n", described.group_state, described.members.len());
    text.push_str(&table(
        &["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"],
        &rows,
    ));
    Ok(Output::new(doc, text))
}

async fn seek(admin: &mut Admin, group: &str, to: StartAt, topic: &str) -> Result<Output, CliError> {
    let described = describe_group(admin, group).await?;
    if !described.members.is_empty() {
        return Err(CliError::Refused(format!(
            "group {group} has {} active member(s) (state {}): offsets can only be reset while the group is \
             inactive; stop its consumers first",
            described.members.len(),
            described.group_state
        )));
    }
    let metadata = admin.metadata(Some(&[topic.to_owned()])).await?;
    let partitions = topic_partitions(&metadata, topic)?;
    let leaders: Vec<(i32, i32)> = partitions.iter().map(|(p, l, ..)| (*p, *l)).collect();
    let targets: BTreeMap<i32, i64> = match to {
        StartAt::Start => list_offsets(admin, topic, &leaders, EARLIEST).await?,
        StartAt::End => list_offsets(admin, topic, &leaders, LATEST).await?,
        StartAt::Offset(n) => {
            // Clamped into [log start, log end], as kafka-consumer-groups --to-offset does.
            let start = list_offsets(admin, topic, &leaders, EARLIEST).await?;
            let end = list_offsets(admin, topic, &leaders, LATEST).await?;
            start.iter().map(|(p, s)| (*p, n.max(*s).min(end.get(p).copied().unwrap_or(n)))).collect()
        }
    };
    let offsets: Vec<(i32, i64)> = targets.iter().map(|(p, o)| (*p, *o)).collect();
    commit_offsets(admin, group, topic, &offsets).await?;
    let docs: Vec<_> = offsets.iter().map(|(p, o)| json!({"topic": topic, "partition": p, "offset": o})).collect();
    let rows: Vec<Vec<String>> =
        offsets.iter().map(|(p, o)| vec![group.to_owned(), topic.to_owned(), p.to_string(), o.to_string()]).collect();
    Ok(Output::new(
        json!({"group": group, "offsets": docs}),
        table(&["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], &rows),
    ))
}

async fn delete(admin: &mut Admin, group: &str) -> Result<Output, CliError> {
    let request = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(str_bytes(group))]);
    let (response, _) = admin.coordinator(group).await?.send(request).await?;
    let result = response.results.first().ok_or_else(|| CliError::Protocol("DeleteGroups: no result".into()))?;
    check(result.error_code, || format!("cannot delete group {group}"), None)?;
    Ok(Output::line(json!({"group": group, "deleted": true}), format!("deleted group {group}")))
}
