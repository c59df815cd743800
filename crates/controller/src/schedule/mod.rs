//! The refine → brainstorm barrier of `BrainstormSchedule`s: the loop and
//! the TTLs it feeds grooming. The decisions are pure and live in
//! [`handoff_core::schedule`].
//!
//! - [`reconcile`]: the loop: gather, plan, apply, with an injectable clock.
//! - [`ttl`]: per-project handoff TTLs for grooming, from `spec.handoffTTL`.
pub mod reconcile;
pub mod ttl;
