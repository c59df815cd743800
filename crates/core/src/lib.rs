//! `handoff-core`: what every layer of handoff shares and nothing in it does
//! I/O — the CRD types and the key → name mapping, validation, every label
//! and field-manager name, the clock, goal texts, the handoff lint, the
//! credential detector, text shown as what it is (escapes, fences), each loop's progress and the wedged decision, and
//! the pure decisions: of one Handoff (which object is its key's, what it
//! shows, what an apply did) and of the Handoff loop ([`handoff`]), of
//! every loop's failures and notes ([`loops`]), of a namespace's settings
//! ([`settings`]), of the schedule barrier, of offers, of TTL grooming
//! ([`grooming`]), of the controller's Event series ([`events`]), of
//! leader election ([`leader`]), of the webhook's self-managed
//! certificate ([`certs`]) and of a team's quota refusing a write
//! ([`quota`]).
//!
//! This crate depends on `kube` for its derive only (no client, no
//! runtime): a module here cannot talk to the apiserver, by construction.

pub mod api;
pub mod certs;
pub mod events;
pub mod fairness;
pub mod goals;
pub mod grooming;
pub mod handoff;
pub mod leader;
pub mod lint;
pub mod liveness;
pub mod loops;
pub mod names;
pub mod offers;
pub mod quota;
pub mod schedule;
pub mod secrets;
pub mod settings;
pub mod text;
pub mod time;
