//! `group-coordinator`: Kafka's classic consumer group protocol with no I/O and no clock of its own (issue 55).
//! Requests come in as values with the caller's time (`now_ms`), answers go out as values — at once, or through a
//! receiver when a JoinGroup or SyncGroup must wait for the rebalance — and what must be stored — a group's
//! membership ([`membership::Membership::take_unstored`]), the offset log's records ([`offsets::OffsetRecord`]) —
//! is handed out for the caller to write. `node` drives it: it stores
//! the groups in its offset log, restores them at open, and ticks it on its clock.
//!
//! - [`membership`] — groups, members, generations and rebalances ([`membership::Membership`]).
//! - [`offsets`] — the offset store's state and rules ([`offsets::OffsetState`]): commits, transactional
//!   offsets, expiry, stored groups, snapshots, as records the caller writes.

pub mod membership;
pub mod offsets;
