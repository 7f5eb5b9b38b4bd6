//! Test harnesses for storage backends and the layers above them; a dev-dependency only, never a dependency of
//! a library crate.
//!
//! - [`conformance`]: the checks every backend passes (`conformance_suite!` expands them into named tests).
//! - [`executor_guard`]: a runtime whose worker threads are known, and a backend wrapper that records every sync or
//!   database write made on one of them.
//! - [`crash`]: the SIGKILL harness (a child process appends and syncs until killed; the parent verifies).
//! - [`faulty_store`]: [`FaultyStore`], a backend wrapper *below* the contract's checks whose syncs fail or
//!   stall on command (poisoning, a slow fsync that must not stall other partitions).
//! - [`read_only`]: inspecting a store (a read-only open, listing, reading every partition) leaves its directory
//!   byte for byte as it was.
//! - [`fault`]: [`FaultyPartition`], a wrapper *above* storage whose writes fail on command (a crash at the
//!   N-th write, failing index writes) for the partition log and the mirror machine.
//!
//! Harness code panics on failure, as tests do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod conformance;
pub mod crash;
pub mod executor_guard;
pub mod fault;
pub mod faulty_store;
pub mod read_only;

pub use fault::{Faults, FaultyPartition};
pub use faulty_store::{FaultyStore, StoreFaults};
