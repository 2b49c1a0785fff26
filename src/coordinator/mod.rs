//! Coordinators: consumer groups, committed offsets and transactions will live here.
//! Producer ids are handed out by the controller (they must never repeat, also across
//! restarts, so they are metadata).
