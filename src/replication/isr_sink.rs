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
