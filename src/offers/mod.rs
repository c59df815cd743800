//! Offers: the lifecycle of a handoff addressed to a destination agent.
//!
//! - [`decision`]: the decision table and the slot/sequence names (pure).
//! - [`store`]: offer, list, reject, supersede against the apiserver.
//! - [`activation`]: the controller loop — a Job of an agent starting
//!   supersedes its pending offers (except the one it names, which is
//!   accepted, then completed), and leftovers of crashed offerers converge.

pub mod activation;
pub mod decision;
pub mod store;
