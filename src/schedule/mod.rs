//! The refine → brainstorm barrier of `BrainstormSchedule`s.
//!
//! - [`tick`]: when a cycle is due (pure).
//! - [`jobs`]: Job names, Jobs built from the templates, Job results (pure).
pub mod jobs;
pub mod tick;
