//! What controllers say to each other over their own TCP listener.
//!
//! Framing: `length: u32 BE | payload`, the payload a JSON [`Request`] or [`Response`].
//! One request at a time per connection, each answered before the next is read. A
//! length above [`MAX_FRAME`] or a payload that does not parse is a protocol error: the
//! reader closes the connection. The payload's buffer grows with the bytes that arrive,
//! never to the length a peer claims.

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

use super::{NodeId, TypeConfig};
use crate::controller::operations::ControllerOp;
use crate::controller::quorum::QuorumDescription;
use crate::controller::records::MetadataRecord;
use crate::controller::ControllerError;

/// Snapshot chunks are at most openraft's `snapshot_max_chunk_size` (set to 1 MiB), a
/// few MiB as JSON; entries batches are bounded by `max_payload_entries`.
pub const MAX_FRAME: usize = 64 << 20;

#[derive(Debug, Serialize, Deserialize)]
pub enum Request {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteCall),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// A controller operation for the leader to decide and commit.
    Forward(ControllerOp),
}

#[derive(Debug, Serialize, Deserialize)]
pub enum Response {
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    InstallSnapshot(Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>),
    Forward(Result<OpReply, ForwardError>),
}

/// A vote request as sent to one voter: openraft's, with the two directory ids of Kafka's
/// VoteRequest (KIP-853). A node whose metadata log was lost comes back with a new
/// directory id, an empty log and no memory of its votes: it could vote twice in a term,
/// or for a candidate that lacks entries it had acknowledged. The ids let the voter
/// tell that the candidate does not mean it (`voter_directory_id`), and let the voter
/// tell that the candidate is not the voter it knows (`candidate_directory_id`).
///
/// The ids sit beside the request's own fields (flattened), and are left out when
/// unknown: a node of an older release reads this as the bare request, and a bare
/// request from one reads as this with no ids, which nothing checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoteCall {
    #[serde(flatten)]
    pub request: VoteRequest<NodeId>,
    /// The candidate's own directory id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_directory_id: Option<Uuid>,
    /// The directory id the candidate's membership names this voter with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voter_directory_id: Option<Uuid>,
}

/// What the leader did with an operation: the records it decided and, unless nothing
/// was committed (validate-only, or no change), the log index they were committed at.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpReply {
    pub index: Option<u64>,
    pub records: Vec<MetadataRecord>,
    /// The answer to a DescribeQuorum.
    #[serde(default)]
    pub quorum: Option<QuorumDescription>,
    /// The changes of an AlterPartitions that were refused (topic id, partition, why);
    /// the others are what `records` commits (or were already so).
    #[serde(default)]
    pub refused: Vec<(Uuid, i32, ForwardError)>,
}

/// Why a forwarded operation was not done.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ForwardError {
    /// The node asked is not (or no longer) the leader: ask again.
    NotLeader,
    /// The leader refused it; the caller gets this error.
    Refused { kind: ErrorKind, message: String },
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub enum ErrorKind {
    TopicAlreadyExists,
    UnknownTopic,
    InvalidTopic,
    InvalidPartitions,
    InvalidReplicationFactor,
    InvalidReplicaAssignment,
    InvalidConfig,
    InvalidRequest,
    Storage,
    NotController,
    Refused,
    Internal,
    NotAttempted,
    BrokerIdNotRegistered,
    UnsupportedVersion,
    DuplicateVoter,
    VoterNotFound,
    InvalidUpdateVersion,
}

impl From<&ControllerError> for ForwardError {
    fn from(e: &ControllerError) -> ForwardError {
        use ControllerError as E;
        let (kind, message) = match e {
            E::TopicAlreadyExists(m) => (ErrorKind::TopicAlreadyExists, m.clone()),
            E::UnknownTopic(m) => (ErrorKind::UnknownTopic, m.clone()),
            E::InvalidTopic(m) => (ErrorKind::InvalidTopic, m.clone()),
            E::InvalidPartitions(m) => (ErrorKind::InvalidPartitions, m.clone()),
            E::InvalidReplicationFactor(m) => (ErrorKind::InvalidReplicationFactor, m.clone()),
            E::InvalidReplicaAssignment(m) => (ErrorKind::InvalidReplicaAssignment, m.clone()),
            E::InvalidConfig(m) => (ErrorKind::InvalidConfig, m.clone()),
            E::InvalidRequest(m) => (ErrorKind::InvalidRequest, m.clone()),
            E::Storage(m) => (ErrorKind::Storage, m.clone()),
            E::NotController(m) => (ErrorKind::NotController, m.clone()),
            E::Refused(m) => (ErrorKind::Refused, m.clone()),
            E::NotAttempted(m) => (ErrorKind::NotAttempted, m.clone()),
            E::BrokerIdNotRegistered(m) => (ErrorKind::BrokerIdNotRegistered, m.clone()),
            E::UnsupportedVersion(m) => (ErrorKind::UnsupportedVersion, m.clone()),
            E::DuplicateVoter(m) => (ErrorKind::DuplicateVoter, m.clone()),
            E::VoterNotFound(m) => (ErrorKind::VoterNotFound, m.clone()),
            E::InvalidUpdateVersion(m) => (ErrorKind::InvalidUpdateVersion, m.clone()),
            E::Io(_) | E::Internal(_) => (ErrorKind::Internal, e.to_string()),
        };
        ForwardError::Refused { kind, message }
    }
}

impl ForwardError {
    pub fn into_controller_error(self) -> ControllerError {
        use ControllerError as E;
        match self {
            ForwardError::NotLeader => E::NotController("the controller leader changed".into()),
            ForwardError::Refused { kind, message: m } => match kind {
                ErrorKind::TopicAlreadyExists => E::TopicAlreadyExists(m),
                ErrorKind::UnknownTopic => E::UnknownTopic(m),
                ErrorKind::InvalidTopic => E::InvalidTopic(m),
                ErrorKind::InvalidPartitions => E::InvalidPartitions(m),
                ErrorKind::InvalidReplicationFactor => E::InvalidReplicationFactor(m),
                ErrorKind::InvalidReplicaAssignment => E::InvalidReplicaAssignment(m),
                ErrorKind::InvalidConfig => E::InvalidConfig(m),
                ErrorKind::InvalidRequest => E::InvalidRequest(m),
                ErrorKind::Storage => E::Storage(m),
                ErrorKind::NotController => E::NotController(m),
                ErrorKind::Refused => E::Refused(m),
                ErrorKind::NotAttempted => E::NotAttempted(m),
                ErrorKind::Internal => E::Internal(m),
                ErrorKind::BrokerIdNotRegistered => E::BrokerIdNotRegistered(m),
                ErrorKind::UnsupportedVersion => E::UnsupportedVersion(m),
                ErrorKind::DuplicateVoter => E::DuplicateVoter(m),
                ErrorKind::VoterNotFound => E::VoterNotFound(m),
                ErrorKind::InvalidUpdateVersion => E::InvalidUpdateVersion(m),
            },
        }
    }
}

pub async fn write_frame<W: AsyncWriteExt + Unpin, T: Serialize>(w: &mut W, msg: &T) -> std::io::Result<()> {
    let payload = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    if payload.len() > MAX_FRAME {
        return Err(std::io::Error::other(format!("frame of {} bytes exceeds {MAX_FRAME}", payload.len())));
    }
    let mut buf = Vec::with_capacity(4 + payload.len());
    buf.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    buf.extend_from_slice(&payload);
    w.write_all(&buf).await?;
    w.flush().await
}

/// The next frame; `Ok(None)` at a clean end of stream (before a frame's first byte).
pub async fn read_frame<R: AsyncReadExt + Unpin, T: DeserializeOwned>(r: &mut R) -> std::io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len[..1]).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    r.read_exact(&mut len[1..]).await?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame length {len} exceeds {MAX_FRAME}"),
        ));
    }
    // Most frames (heartbeats, votes, forwarded operations) are small; a peer's claim
    // reserves at most 64 KiB, and a larger frame grows as its bytes arrive.
    let mut payload = Vec::with_capacity(len.min(64 << 10));
    (&mut *r).take(len as u64).read_to_end(&mut payload).await?;
    if payload.len() < len {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "frame cut short"));
    }
    serde_json::from_slice(&payload).map(Some).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_oversized_or_garbage_frames_are_refused() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &Request::Forward(ControllerOp::AllocateProducerIds)).await.unwrap();
        let mut r = &buf[..];
        let got: Option<Request> = read_frame(&mut r).await.unwrap();
        assert!(matches!(got, Some(Request::Forward(ControllerOp::AllocateProducerIds))));
        assert!(read_frame::<_, Request>(&mut r).await.unwrap().is_none());
        let huge = (u32::MAX).to_be_bytes();
        let err = read_frame::<_, Request>(&mut &huge[..]).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        let mut garbage = 3u32.to_be_bytes().to_vec();
        garbage.extend_from_slice(b"{x}");
        let err = read_frame::<_, Request>(&mut &garbage[..]).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        // A length at the cap with a few bytes behind it: the stream ends inside the frame.
        let mut cut = (MAX_FRAME as u32).to_be_bytes().to_vec();
        cut.extend_from_slice(b"{\"Forward\"");
        let err = read_frame::<_, Request>(&mut &cut[..]).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
