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
//!   kube's admission types over axum, TLS from handoff-kube's swappable
//!   certificate (a new pair serves new handshakes without a restart).
//! - [`metrics`]: what it counts (reviews by resource and outcome,
//!   decisions by reason, latency), served on `--metrics-listen`.
//! - [`options`]: the flags, and the mode they choose: the certificate from
//!   files (cert-manager's mounted Secret) or self-managed.
//! - [`certs`]: the self-managed certificate: a private CA and a serving
//!   certificate in a Secret every replica keeps valid and serves from, the
//!   CA injected into the configuration's caBundle, rotated in two phases
//!   (the plan is [`handoff_core::certs`]).
//! - [`registration`]: config/webhook's ValidatingWebhookConfiguration,
//!   pointed at a URL (`handoff dev`, the test planes).
//!
//! The apiserver calls it for handoff.dev objects only (config/webhook's
//! `matchConditions`), and with `failurePolicy: Fail`: while no replica
//! answers, Handoff and offer writes are refused (reads and deletes work).

mod certs;
mod decision;
mod metrics;
mod options;
pub mod registration;
mod server;

pub use metrics::WebhookMetrics;
pub use options::{ManagedArgs, WebhookArgs};
pub use server::{run, serve};
