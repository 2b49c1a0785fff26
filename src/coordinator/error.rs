//! What a coordinator request can fail with, in the coordinator's words; `protocol::errors`
//! turns these into Kafka error codes.

use thiserror::Error;

use super::group::GroupError;
use super::offsets::MAX_METADATA_BYTES;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum CoordinatorError {
    #[error(transparent)]
    Group(#[from] GroupError),
    #[error("no such group")]
    GroupIdNotFound,
    #[error("the group still has members")]
    NonEmptyGroup,
    /// OffsetDelete of a topic the (non-empty) group still consumes.
    #[error("the group still consumes the topic")]
    GroupSubscribedToTopic,
    #[error("offset metadata longer than {MAX_METADATA_BYTES} bytes")]
    OffsetMetadataTooLarge,
}
