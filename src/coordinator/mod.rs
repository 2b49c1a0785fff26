//! Coordinators: consumer groups and their committed offsets (transactions later).
//!
//! * [`group`]: the classic group protocol as a pure state machine per group (events and
//!   `now` in, effects out).
//! * [`offsets`]: committed offsets and the decisions about them (who may commit, what
//!   expires).
//! * [`shard`]: the groups and offsets of one `__consumer_offsets` partition; every decision returns the
//!   records to write plus the reply ([`shard::CoordinatorResult`]) and changes nothing
//!   until applied; one replay path for load and for written decisions.
//! * [`group_coordinator`]: the shell: parks JoinGroup/SyncGroup requests, takes decisions
//!   one at a time per group ([`group_locks`]), writes their records through an
//!   [`OffsetsWriter`] and answers only after the write.
//! * [`loaded`]: the `__consumer_offsets` partitions this broker coordinates, loading or
//!   serving; [`group_partition`]: which partition holds a group (Kafka's hash).
//! * [`writer`]: the [`OffsetsWriter`] trait (`protocol::offsets_topic` implements it on
//!   the `__consumer_offsets` partitions).
//! * [`offsets_codec`]: the `__consumer_offsets` record formats (Kafka's), one record and a
//!   v2 batch of them.
//! * [`views`]: DescribeGroups and ListGroups views; [`error`]: [`CoordinatorError`].
//!
//! Producer ids are handed out by the controller (they must never repeat, also across
//! restarts, so they are metadata).

pub mod error;
pub mod group;
pub mod group_coordinator;
pub mod group_locks;
pub mod group_partition;
pub mod loaded;
pub mod offsets;
pub mod offsets_codec;
pub mod shard;
pub mod views;
pub mod writer;

pub use error::CoordinatorError;
pub use group::{GroupError, GroupLimits, GroupState};
pub use group_coordinator::GroupCoordinator;
pub use writer::{OffsetsWriteError, OffsetsWriter};
