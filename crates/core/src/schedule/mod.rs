//! The pure decisions of the refine → brainstorm barrier of
//! `BrainstormSchedule`s; the loop around them is `handoff_controller::schedule`.
//!
//! - [`tick`]: when a cycle is due.
//! - [`jobs`]: Job names, Jobs built from the templates, Job results.
//! - [`plan`]: what one reconcile does — new status, Jobs to create, Events,
//!   when to look again — from the schedule, its running Job and the clock.
pub mod jobs;
pub mod plan;
pub mod tick;
