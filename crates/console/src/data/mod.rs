//! Every read and action of the console, as the person looking at it.
//!
//! Nothing here holds a credential of its own: custom resources are read
//! with the person's client ([`Caller::client`]), so what RBAC does not let
//! them see is not shown, and a refusal becomes [`ReadError::Forbidden`].
//! What lives in the PostgreSQL mirror (revisions, diffs, search) and the
//! two actions (delete a handoff, reject an offer) go through the bridge's
//! one dispatch ([`handoff_bridge::call::Services::dispatch`]) with the
//! tools agents call, so the bridge's access review, bounds, fair shares
//! and timeouts apply to people exactly as to agents.
//!
//! Each page is a thin I/O shell around pure functions from objects to the
//! [`crate::model`] structs: [`rows`] (one handoff, offer or schedule as a
//! row), and per page [`overview`], [`list`] (a project's handoffs),
//! [`handoff`] (one handoff and its row), [`history`] (revisions, diff,
//! search), [`offers`], [`schedules`], [`problems`], [`export`] and
//! [`actions`]. [`errors`] turns every failure into a sentence for people
//! and [`tool`] is the one way a tool is called.

mod actions;
mod errors;
mod export;
mod handoff;
mod history;
mod list;
mod offers;
mod overview;
mod problems;
mod reads;
mod rows;
mod schedules;
mod tool;

pub use self::actions::{delete_handoff, reject_offer};
pub use self::errors::ReadError;
pub use self::export::{Export, ExportFormat, MAX_EXPORT, export};
pub use self::handoff::{handoff, handoff_row};
pub use self::history::{diff, search};
pub use self::list::project;
pub use self::offers::{offer_row, offers};
pub use self::overview::{MAX_COUNTED, overview};
pub use self::problems::problems;
pub use self::schedules::schedules;

/// The profile the console calls the bridge's tools with: `refine`, the
/// one profile that sees every tool it calls (the reads, `reject_offer`
/// and the groomer's `delete_handoff`). The profile only decides which
/// tools are shown to an agent; what the person may really do is RBAC's
/// answer, asked with their own credentials on every call.
pub const PROFILE: &str = "refine";
