//! Where a leader's ISR-change proposals go. The controller will take them as Kafka's
//! AlterPartition requests and answer with committed metadata (the ISR a leader uses
//! changes only then); until it does, proposals are logged.

use uuid::Uuid;

use super::isr::IsrProposal;

/// A leader's proposal with the epochs it was made in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrProposalAt {
    pub proposal: IsrProposal,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
}

/// One proposal of the leader of `topic`-`partition` in `leader_epoch`, against the ISR
/// of `partition_epoch` (the controller commits it only in that partition epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    pub topic: String,
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub proposal: IsrProposal,
}

/// Why the controller did not commit an ISR change, as the leader acts on it (Kafka's
/// `Partition.handleAlterPartitionError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotCommitted {
    /// Not applied, said against the partition epoch the proposal named (INELIGIBLE_REPLICA:
    /// the follower to add is fenced, say): forgotten, so the next lag check proposes
    /// again, or a fetch of the follower (of the same process only after
    /// [`super::isr::EXPANSION_RETRY_MS`]), and the high watermark stops waiting for a
    /// follower it would have added.
    NotAttempted,
    /// Turned down because this leader's view is behind (a newer leader or partition
    /// epoch, the topic gone, this process replaced): it stays in flight, holding the
    /// high watermark, until the metadata that says so arrives. Forgetting it would let a
    /// leader that has already been replaced move its high watermark on its own.
    Stale,
    /// No answer (no controller leader, a lost reply): it may yet commit, so it is sent
    /// again.
    NoAnswer,
}

/// Takes ISR changes to the controller. Called outside every partition lock; must not
/// block (queue the change and return).
pub trait IsrChangeSink: Send + Sync {
    fn propose(&self, change: IsrChange);
}

/// Until the controller takes AlterPartition: says what would be asked for.
#[derive(Debug, Default)]
pub struct LoggingIsrChangeSink;

impl IsrChangeSink for LoggingIsrChangeSink {
    fn propose(&self, change: IsrChange) {
        tracing::info!(
            topic = %change.topic,
            partition = change.partition,
            leader_epoch = change.leader_epoch,
            proposal = ?change.proposal,
            "ISR change proposed (no controller takes AlterPartition yet)"
        );
    }
}
