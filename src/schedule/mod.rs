//! The refine → brainstorm barrier of `BrainstormSchedule`s.
//!
//! - [`tick`]: when a cycle is due (pure).
//! - [`jobs`]: Job names, Jobs built from the templates, Job results (pure).
//! - [`plan`]: what one reconcile does — new status, Jobs to create, Events,
//!   when to look again — from the schedule, its running Job and the clock (pure).
//! - [`reconcile`]: the loop: gather, plan, apply, with an injectable clock.
//! - [`ttl`]: per-project handoff TTLs for grooming, from `spec.handoffTTL`.
pub mod jobs;
pub mod plan;
pub mod reconcile;
pub mod tick;
pub mod ttl;
