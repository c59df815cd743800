//! The web console: a read-mostly view of handoffs for people, served by
//! `handoff console` (on a laptop, as the person's kubeconfig) or as a
//! Deployment behind an authenticating proxy (as the bearer of the token the
//! proxy forwards). Every read is the person's own: the console holds no
//! credential of its own for data, so what RBAC hides it cannot show.
//!
//! The seams, so each part can be read and tested alone:
//! - [`model`]: what a page shows, as plain data (no I/O, no HTML);
//! - [`routes`]: every URL the console serves, built in one place;
//! - `server`: `handoff console` — the front doors, the guards, the
//!   handlers that read (`data`) and draw (`render`), live updates.

pub mod data;
pub mod model;
pub(crate) mod render;
pub mod routes;
mod server;

pub use server::{ConsoleArgs, run};
