//! `handoff controller`: the reconcile loops, leader-elected.
//!
//! Every replica runs the leader election ([`leader`]); only the lease
//! holder runs the loops, and therefore only it writes — status, labels,
//! Events, finalizers, mirror rows, grooming deletes. Replicas that do not
//! hold the lease only wait for it (the bridge, not the controller, serves
//! reads to agents). Losing the lease stops the loops before another
//! replica may take over (see [`leader`]); a graceful shutdown (SIGTERM,
//! Ctrl-C) lets in-flight reconciles finish (for at most
//! [`run::SHUTDOWN_GRACE`]), then releases the lease.
//!
//! This crate is the only one that assembles loops ([`run`]): each loop
//! is run by [`handoff_kube::runner`] (guarded objects, error categories,
//! one backoff policy, progress for `/healthz`) and reports events.k8s.io
//! Events as `handoff-controller`.
//!
//! - [`options`]: the flags, and what dev and the tests run with.
//! - [`run`]: `handoff controller`, leader election, the loops' assembly.
//! - [`metrics`]: the controller's metrics.
//! - [`handoff`]: the Handoff loop (status, labels, Events, mirror row);
//!   its state, shared with the tasks below, is [`handoff::state`].
//! - [`events`]: the Handoff loop's Events, one series per object and reason
//!   (the decisions are [`handoff_core::events`]).
//! - [`grooming`]: TTL grooming (the decision is [`handoff_core::grooming`]).
//! - [`leader`]: Lease-based leader election (the decision is
//!   [`handoff_core::leader`]).
//! - [`mirror_resync`]: the mirror's periodic repair (the plan is [`handoff_mirror::resync`]).
//! - [`offer_loops`]: the offer and agent Job loops (the plan is
//!   [`handoff_core::offers::plan`]).
//! - [`schedule`]: the `BrainstormSchedule` loop and the TTLs it feeds grooming.
//!
//! Operator notes: `/healthz` (every loop makes progress: 503 naming the
//! loop once one with pending work made none for `--wedged-after`, see
//! [`handoff_core::liveness`]), `/readyz` (started, not shutting down) and
//! `/metrics` (OpenMetrics, prefix
//! `handoff_controller_`) are served on `--metrics-listen`. Logs are JSON on
//! stderr. The rights the loops use are exactly those of
//! `config/rbac/controller.yaml` (each rule says which loop needs it).

pub(crate) mod backlog;
pub(crate) mod events;
pub(crate) mod grooming;
pub mod handoff;
pub(crate) mod leader;
pub mod metrics;
pub(crate) mod mirror_resync;
pub mod offer_loops;
pub mod options;
pub mod run;
pub mod schedule;
#[cfg(test)]
mod test_support;

pub use metrics::ControllerMetrics;
pub use options::ControllerOptions;
pub use run::{run, run_cli};
