//! The cluster as the CLI sees it: a bootstrap connection, the brokers named by
//! Metadata, a connection per broker opened on first use, and group coordinators.

use std::collections::HashMap;

use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::{ApiKey, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::client::Connection;
use super::{check, CliError, RETRIES, RETRY_BACKOFF};

pub fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

pub struct Admin {
    bootstrap: Connection,
    /// node id → host:port, from the last Metadata response.
    brokers: HashMap<i32, String>,
    connections: HashMap<i32, Connection>,
}

impl Admin {
    /// Connects to the first reachable of `brokers` (host:port, comma-separated).
    pub async fn connect(brokers: &str) -> Result<Admin, CliError> {
        let mut last = CliError::Usage("--brokers names no broker".to_owned());
        for addr in brokers.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            if !addr.contains(':') {
                return Err(CliError::Usage(format!("--brokers: {addr:?} is not host:port")));
            }
            match Connection::connect(addr).await {
                Ok(bootstrap) => {
                    return Ok(Admin { bootstrap, brokers: HashMap::new(), connections: HashMap::new() });
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    pub fn bootstrap(&mut self) -> &mut Connection {
        &mut self.bootstrap
    }

    /// Metadata for `topics` (all topics for `None`); remembers the brokers.
    pub async fn metadata(&mut self, topics: Option<&[String]>) -> Result<MetadataResponse, CliError> {
        let version = self.bootstrap.version(ApiKey::Metadata)?;
        let topics = topics.map(|ts| {
            ts.iter().map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(str_bytes(t))))).collect()
        });
        let mut request = MetadataRequest::default().with_topics(topics);
        if version >= 4 {
            request = request.with_allow_auto_topic_creation(false);
        }
        let (response, _) = self.bootstrap.send(request).await?;
        for b in &response.brokers {
            self.brokers.insert(b.node_id.0, format!("{}:{}", b.host, b.port));
        }
        Ok(response)
    }

    /// The connection to broker `node_id` (its address from the last metadata).
    pub async fn broker(&mut self, node_id: i32) -> Result<&mut Connection, CliError> {
        if !self.brokers.contains_key(&node_id) {
            self.metadata(Some(&[])).await?;
        }
        let addr = self
            .brokers
            .get(&node_id)
            .cloned()
            .ok_or_else(|| CliError::Protocol(format!("broker {node_id} is not in the metadata")))?;
        if let std::collections::hash_map::Entry::Vacant(slot) = self.connections.entry(node_id) {
            slot.insert(Connection::connect(&addr).await?);
        }
        Ok(self.connections.get_mut(&node_id).expect("inserted above"))
    }

    /// The coordinator of consumer group `group`, retrying while it is not available
    /// (Kafka creates `__consumer_offsets` on the first FindCoordinator).
    pub async fn coordinator(&mut self, group: &str) -> Result<&mut Connection, CliError> {
        let mut attempt = 0;
        let node = loop {
            match self.find_coordinator(group).await {
                Err(CliError::Kafka(_, name))
                    if attempt < RETRIES
                        && (name.starts_with("COORDINATOR_") || name.starts_with("NOT_COORDINATOR")) =>
                {
                    attempt += 1;
                    tokio::time::sleep(RETRY_BACKOFF).await;
                }
                other => break other?,
            }
        };
        self.broker(node).await
    }

    async fn find_coordinator(&mut self, group: &str) -> Result<i32, CliError> {
        let version = self.bootstrap.version(ApiKey::FindCoordinator)?;
        let mut request = FindCoordinatorRequest::default().with_key_type(0);
        request = if version >= 4 {
            request.with_coordinator_keys(vec![str_bytes(group)])
        } else {
            request.with_key(str_bytes(group))
        };
        let (response, _) = self.bootstrap.send(request).await?;
        let context = || format!("finding the coordinator of group {group}");
        let node = if version >= 4 {
            let c = response.coordinators.first().ok_or_else(|| CliError::Protocol(context()))?;
            check(c.error_code, context, c.error_message.as_deref())?;
            self.brokers.insert(c.node_id.0, format!("{}:{}", c.host, c.port));
            c.node_id.0
        } else {
            check(response.error_code, context, response.error_message.as_deref())?;
            self.brokers.insert(response.node_id.0, format!("{}:{}", response.host, response.port));
            response.node_id.0
        };
        Ok(node)
    }
}
