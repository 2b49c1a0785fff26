//! `runnel cluster info`: cluster id, controller and brokers, from Metadata.

use serde_json::json;

use super::admin::Admin;
use super::output::{table, Output};
use super::CliError;

pub async fn info(admin: &mut Admin) -> Result<Output, CliError> {
    let metadata = admin.metadata(Some(&[])).await?;
    let cluster_id = metadata.cluster_id.as_ref().map(|c| c.to_string());
    let controller = metadata.controller_id.0;
    let mut brokers: Vec<_> = metadata
        .brokers
        .iter()
        .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port), b.rack.as_ref().map(|r| r.to_string())))
        .collect();
    brokers.sort();
    let docs: Vec<_> = brokers
        .iter()
        .map(|(id, addr, rack)| json!({"node_id": id, "address": addr, "rack": rack, "controller": *id == controller}))
        .collect();
    let doc = json!({"cluster_id": cluster_id, "controller_id": controller, "brokers": docs});
    let rows: Vec<Vec<String>> = brokers
        .iter()
        .map(|(id, addr, rack)| {
            let id = if *id == controller { format!("{id}*") } else { id.to_string() };
            vec![id, addr.clone(), rack.clone().unwrap_or_else(|| "-".into())]
        })
        .collect();
    let mut text = format!("CLUSTER {}\n\n", cluster_id.as_deref().unwrap_or("-"));
    text.push_str(&table(&["BROKER", "ADDRESS", "RACK"], &rows));
    Ok(Output::new(doc, text))
}
