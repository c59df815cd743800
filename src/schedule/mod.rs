//! The refine → brainstorm barrier of `BrainstormSchedule`s.
//!
//! - [`tick`]: when a cycle is due (pure).
//! - [`jobs`]: Job names, Jobs built from the templates, Job results (pure).
//! - [`reconcile`]: the reconcile loop (the barrier), with an injectable clock.
//! - [`ttl`]: per-project handoff TTLs for grooming, from `spec.handoffTTL`.
pub mod jobs;
pub mod reconcile;
pub mod tick;
pub mod ttl;
