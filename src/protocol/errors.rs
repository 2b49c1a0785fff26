//! The one place where domain errors become Kafka error codes.

use kafka_protocol::error::ResponseError;

use crate::controller::ControllerError;
use crate::coordinator::{CoordinatorError, GroupError, OffsetsWriteError};
use crate::replication::PartitionError;
use crate::storage::{BatchError, StorageError};

pub fn storage_error(e: &StorageError) -> ResponseError {
    match e {
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        StorageError::Batch(b) => batch_error(b),
        _ => ResponseError::KafkaStorageError,
    }
}

pub fn batch_error(e: &BatchError) -> ResponseError {
    match e {
        BatchError::TooLarge { .. } | BatchError::DecompressedTooLarge { .. } => ResponseError::MessageTooLarge,
        BatchError::UnsupportedMagic { .. } => ResponseError::UnsupportedForMessageFormat,
        BatchError::UnsupportedCompression(_) => ResponseError::UnsupportedCompressionType,
        BatchError::InvalidRecord(_)
        | BatchError::MalformedRecord(_)
        | BatchError::RecordsWithoutKey(_)
        | BatchError::CorruptCompression(_) => ResponseError::InvalidRecord,
        BatchError::InvalidTimestamp { .. } => ResponseError::InvalidTimestamp,
        _ => ResponseError::CorruptMessage,
    }
}

pub fn partition_error(e: &PartitionError) -> ResponseError {
    match e {
        PartitionError::Storage(s) => storage_error(s),
        PartitionError::InvalidBatch(b) => batch_error(b),
        PartitionError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        PartitionError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        PartitionError::OffsetBeyondHighWatermark { .. } => ResponseError::OffsetOutOfRange,
        PartitionError::DeleteNotAllowed => ResponseError::PolicyViolation,
        PartitionError::Pool(_) => ResponseError::UnknownServerError,
        PartitionError::NotEnoughReplicas { .. } => ResponseError::NotEnoughReplicas,
        PartitionError::NotEnoughReplicasAfterAppend { .. } => ResponseError::NotEnoughReplicasAfterAppend,
        // Kafka's DelayedProduce answers REQUEST_TIMED_OUT when acks=all is not met in time.
        PartitionError::ReplicationTimedOut(_) => ResponseError::RequestTimedOut,
        PartitionError::FlushFailed(_) | PartitionError::LogDirOffline => ResponseError::KafkaStorageError,
        // Retriable: the producer finds the (new) leader and retries; an idempotent one
        // gets its original offsets back if the write had been kept.
        PartitionError::ShuttingDown => ResponseError::NotLeaderOrFollower,
        PartitionError::NotLeaderOrFollower | PartitionError::NotAReplica(_) => ResponseError::NotLeaderOrFollower,
        PartitionError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
        PartitionError::UnknownLeaderEpoch { .. } => ResponseError::UnknownLeaderEpoch,
        // A follower's own races (its fetch answered after a role change): never sent.
        PartitionError::LeaderEpochChanged { .. }
        | PartitionError::FetchOffsetMoved { .. }
        | PartitionError::Replica(_) => ResponseError::NotLeaderOrFollower,
    }
}

pub fn controller_error(e: &ControllerError) -> ResponseError {
    match e {
        ControllerError::TopicAlreadyExists(_) => ResponseError::TopicAlreadyExists,
        ControllerError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
        ControllerError::InvalidTopic(_) => ResponseError::InvalidTopicException,
        ControllerError::InvalidPartitions(_) => ResponseError::InvalidPartitions,
        ControllerError::InvalidReplicationFactor(_) => ResponseError::InvalidReplicationFactor,
        ControllerError::InvalidReplicaAssignment(_) => ResponseError::InvalidReplicaAssignment,
        ControllerError::InvalidConfig(_) => ResponseError::InvalidConfig,
        ControllerError::InvalidRequest(_) => ResponseError::InvalidRequest,
        // Kafka answers a disk failure under a log with KAFKA_STORAGE_ERROR (56,
        // KafkaStorageException: "disk error when trying to access log file"). Its own
        // controller never learns of a broker's disk when creating a topic, so it has no
        // code for exactly this; the disk's code with the message says what went wrong
        // better than UNKNOWN_SERVER_ERROR, and clients treat it as retriable, as it is
        // once descriptors or the disk are back.
        ControllerError::Storage(_) => ResponseError::KafkaStorageError,
        // No controller leader took it in time, or its answer was lost. A Kafka broker
        // forwards to the active controller and retries NOT_CONTROLLER itself; once the
        // forward's time is up its client gets REQUEST_TIMED_OUT (ForwardingManager's
        // onTimeout), as from a controller whose quorum did not commit in time.
        ControllerError::NotController(_) => ResponseError::RequestTimedOut,
        ControllerError::BrokerIdNotRegistered(_) => ResponseError::BrokerIdNotRegistered,
        ControllerError::UnsupportedVersion(_) => ResponseError::UnsupportedVersion,
        ControllerError::DuplicateVoter(_) => ResponseError::DuplicateVoter,
        ControllerError::VoterNotFound(_) => ResponseError::VoterNotFound,
        ControllerError::InvalidUpdateVersion(_) => ResponseError::InvalidUpdateVersion,
        ControllerError::Io(_)
        | ControllerError::Internal(_)
        | ControllerError::Refused(_)
        | ControllerError::NotAttempted(_) => ResponseError::UnknownServerError,
    }
}

pub fn group_error(e: GroupError) -> ResponseError {
    match e {
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
        GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
        GroupError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        GroupError::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
        GroupError::NotCoordinator => ResponseError::NotCoordinator,
        GroupError::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        GroupError::Write(w) => offsets_write_error(w),
    }
}

/// A coordinator write that failed, as Kafka 4.x answers it, the same for JoinGroup,
/// SyncGroup, LeaveGroup, OffsetCommit (every partition), DeleteGroups and OffsetDelete:
/// `CoordinatorOperationExceptionHelper.handleOperationException` (coordinator-common)
/// and `GroupMetadataManager.appendGroupMetadataErrorToResponseError` map
/// UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS and REQUEST_TIMED_OUT to
/// COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER and KAFKA_STORAGE_ERROR to
/// NOT_COORDINATOR; MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE and INVALID_FETCH_SIZE to
/// UNKNOWN_SERVER_ERROR. Clients retry the first two (after finding the coordinator
/// again).
pub fn offsets_write_error(e: OffsetsWriteError) -> ResponseError {
    match e {
        OffsetsWriteError::Unavailable => ResponseError::CoordinatorNotAvailable,
        OffsetsWriteError::Storage => ResponseError::NotCoordinator,
        OffsetsWriteError::Rejected => ResponseError::UnknownServerError,
        OffsetsWriteError::NotCoordinator => ResponseError::NotCoordinator,
    }
}

pub fn coordinator_error(e: CoordinatorError) -> ResponseError {
    match e {
        CoordinatorError::Group(g) => group_error(g),
        CoordinatorError::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
        CoordinatorError::GroupIdNotFound => ResponseError::GroupIdNotFound,
        CoordinatorError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        CoordinatorError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
    }
}
