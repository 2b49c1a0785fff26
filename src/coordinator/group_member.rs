//! A member of a classic group, as its JoinGroup describes it.

use bytes::Bytes;

use super::{JoinParams, Token};

#[derive(Debug, Clone)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// (protocol name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub(super) awaiting_join: Option<Token>,
    pub(super) awaiting_sync: Option<Token>,
    pub(super) last_heartbeat_ms: i64,
}

impl Member {
    /// A member as its JoinGroup describes it, with `assignment` and, if its JoinGroup is
    /// still to be answered, `awaiting_join`.
    pub(super) fn from_join(
        member_id: &str,
        p: JoinParams,
        assignment: Bytes,
        awaiting_join: Option<Token>,
        now: i64,
    ) -> Member {
        Member {
            member_id: member_id.to_owned(),
            group_instance_id: p.group_instance_id,
            client_id: p.client_id,
            client_host: p.client_host,
            session_timeout_ms: p.session_timeout_ms,
            rebalance_timeout_ms: p.rebalance_timeout_ms,
            protocol_type: p.protocol_type,
            protocols: p.protocols,
            assignment,
            awaiting_join,
            awaiting_sync: None,
            last_heartbeat_ms: now,
        }
    }

    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols.iter().find(|(n, _)| n == protocol).map(|(_, m)| m.clone()).unwrap_or_default()
    }
}
