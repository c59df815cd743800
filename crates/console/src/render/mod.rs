//! Every page of the console as HTML, drawn from the plain [`crate::model`]
//! structs. Pure: no I/O, so each page is tested from a literal.
//!
//! maud escapes every value placed in a page; the only pre-escaped HTML is
//! a handoff's body, and that comes from [`markdown::to_safe_html`]. Pages
//! carry no inline script or style (the Content-Security-Policy forbids
//! both): the look is [`STYLESHEET`], the one script [`SCRIPT`] only shows
//! times in the viewer's zone and refreshes live pages, and every page
//! works without it. Actions are links to confirmation pages whose forms
//! carry the person's CSRF token.

mod common;
mod confirm;
mod handoff;
mod layout;
pub(crate) mod markdown;
mod namespace;
mod project;
mod sign_in;

pub(crate) use confirm::{confirm_delete, confirm_reject};
pub(crate) use handoff::{diff, handoff};
pub(crate) use layout::error;
pub(crate) use namespace::{offers, problems, schedules};
pub(crate) use project::{overview, project, search};
pub(crate) use sign_in::{SignIn, sign_in};

/// The console's stylesheet, served at [`crate::routes::STYLESHEET`].
pub(crate) const STYLESHEET: &str = include_str!("../../assets/console.css");
/// The console's one script, served at [`crate::routes::SCRIPT`].
pub(crate) const SCRIPT: &str = include_str!("../../assets/console.js");

#[cfg(test)]
mod tests;
