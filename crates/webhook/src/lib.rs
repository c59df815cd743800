//! `handoff webhook`: the validating admission webhook that makes the
//! rules the apiserver's schema and CEL cannot express hold for every
//! writer — the MCP bridge, `kubectl create`/`apply`/`replace`, GitOps.
//!
//! Why a webhook: "one current handoff per key" rests on the Handoff's name
//! being a hash of its key ([`handoff_core::api::naming::name_for_key`]),
//! and CEL cannot hash. The bridge always derives the name; without this
//! check a kubectl writer could create a second object for a key (a twin)
//! or take a key's name with another key (a squat).
//!
//! - [`decision`]: what is refused and why, a pure function of the request.
//! - [`server`]: the HTTPS endpoint (`/validate`, `/healthz`, `/readyz`),
//!   kube's admission types over axum, TLS from handoff-kube's reloading
//!   certificate (cert-manager rotates the mounted Secret in place; a new
//!   pair serves new handshakes without a restart).
//! - [`registration`]: config/webhook's ValidatingWebhookConfiguration,
//!   pointed at a URL (`handoff dev`, the test planes).
//!
//! The apiserver calls it for handoff.dev objects only (config/webhook's
//! `matchConditions`), and with `failurePolicy: Fail`: while no replica
//! answers, Handoff and offer writes are refused (reads and deletes work).

mod decision;
pub mod registration;
mod server;

pub use server::{WebhookArgs, run, serve};
