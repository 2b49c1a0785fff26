//! Coordinators: consumer groups and their committed offsets (transactions later).
//!
//! * [`group`]: the classic group protocol as a pure state machine (events and `now` in,
//!   effects out).
//! * [`offsets_codec`]: the `__consumer_offsets` record formats (Kafka's), one record and a v2 batch of them.
//! * [`group_coordinator`]: the shell that parks JoinGroup/SyncGroup requests, runs the
//!   clock, and persists group metadata and committed offsets.
//!
//! Producer ids are handed out by the controller (they must never repeat, also across
//! restarts, so they are metadata).

pub mod group;
pub mod group_coordinator;
pub mod offsets_codec;

pub use group::{GroupError, GroupLimits, GroupState};
pub use group_coordinator::{CoordinatorError, GroupCoordinator, OffsetsLog};
