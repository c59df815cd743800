//! What the Handoff loop holds, and shares with the tasks that work on
//! the same objects (the mirror's deleter, resync, grooming, the Events'
//! refresh): the controller's client and identity, its clock, metrics and
//! TTLs, the mirror and its batched writes, the per-key backlog, the
//! Events' series, the lint budgets, the objects the watch delivered for
//! their reconcile and the loop's [`Plumbing`].
//!
//! Its own module so that those tasks and the loop import it, and it
//! imports none of them: `run` only assembles it.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;

use super::watched::Watched;
use crate::backlog::Backlog;
use crate::events::Events;
use crate::metrics::ControllerMetrics;
use crate::schedule::ttl::TtlPolicy;
use handoff_core::time::Clock;
use handoff_kube::runner::Plumbing;
use handoff_kube::settings::Budgets;
use handoff_mirror::Mirror;
use handoff_mirror::batch::Batcher;

/// The Handoff loop's state (see the module docs).
pub(crate) struct HandoffLoop {
    /// The controller's own client.
    pub(crate) client: Client,
    /// This replica's identity (Events name it as reporting instance).
    pub(crate) identity: String,
    /// Time source.
    pub(crate) clock: Arc<dyn Clock>,
    /// Metrics.
    pub(crate) metrics: Arc<ControllerMetrics>,
    /// The mirror, when enabled (resync, deletes).
    pub(crate) mirror: Option<Arc<Mirror>>,
    /// The mirror's batched writes, when enabled (the Handoff loop's rows
    /// and history appends).
    pub(crate) writes: Option<Batcher>,
    /// The TTL of each project.
    pub(crate) ttl: Arc<dyn TtlPolicy>,
    /// The Handoff loop's recorder, backoff, progress (`/healthz`) and
    /// namespace scope (the scope every loop shares).
    pub(crate) plumbing: Plumbing,
    /// Most time one apiserver request of the Handoff loop or resync takes.
    pub(crate) api_timeout: Duration,
    /// The mirror work owed per key (the Handoff loop's; the metrics report it).
    pub(crate) backlog: Arc<Backlog>,
    /// The Handoff loop's and grooming's Events, reported as the controller
    /// (`reportingInstance` = identity); repeated ones count into a series.
    pub(crate) events: Events,
    /// The namespaces' lint budgets (the `Linted` condition), cached.
    pub(crate) budgets: Budgets,
    /// The objects the watch delivered whose reconcile needs them whole.
    pub(crate) watched: Watched,
}
