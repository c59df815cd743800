//! The one loop runner: every reconcile loop (Handoff, schedule, offers,
//! agent Jobs) is a [`Reconcile`] run by [`run`], which owns what the loops
//! share (the [`Plumbing`]: Event recorder, backoff, progress, namespace
//! scope, loop metrics) and does, for each object, the guarded shell of
//! [`crate::loops`]:
//!
//! 1. **managed**: an object outside the [`NamespaceScope`] is looked at
//!    again after [`UNMANAGED_RECHECK`], nothing else;
//! 2. **valid**: an object that does not deserialize is reported (Event,
//!    log line, metric) and skipped until it changes;
//! 3. **tracked**: the reconcile is an attempt of the loop's
//!    [`LoopProgress`] (`/healthz`);
//! 4. **forget**: a clean reconcile drops the object's failure count.
//!
//! A failure, which names its step ([`LoopError`]), goes through the one
//! error policy ([`Backoff::failed_reconcile`])
//! and every outcome through [`Backoff::observe`] (an object deleted while a
//! retry was pending is forgotten). A loop supplies only its reconcile and
//! the `Controller` that says what it watches; adding a loop is one module
//! that implements [`Reconcile`] and calls [`run`].

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use kube::core::DeserializeGuard;
use kube::runtime::Controller;
use kube::runtime::controller::{Action, Config};
use kube::runtime::events::{Recorder, Reporter};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::cluster::NamespaceScope;
use crate::loops::{
    Backoff, LoopMetrics, UNMANAGED_RECHECK, describe, managed, tracked, valid_or_report,
};
use handoff_core::liveness::LoopProgress;
use handoff_core::loops::Categorized;

/// What the runner keeps for a loop (two loops may share one: the offer
/// and agent Job loops report as one `offers` loop).
pub struct Plumbing {
    recorder: Recorder,
    backoff: Backoff,
    progress: Arc<LoopProgress>,
    scope: NamespaceScope,
    metrics: Arc<LoopMetrics>,
}

impl Plumbing {
    /// A loop's plumbing: Events reported with `client` as `reporter`,
    /// progress in `progress`, failures and invalid objects counted in
    /// `metrics`, every namespace managed.
    pub fn new(
        client: Client,
        reporter: Reporter,
        progress: Arc<LoopProgress>,
        metrics: Arc<LoopMetrics>,
    ) -> Self {
        Self {
            recorder: Recorder::new(client, reporter),
            backoff: Backoff::default(),
            progress,
            scope: NamespaceScope::All,
            metrics,
        }
    }

    /// Manages only the objects of `scope`'s namespaces.
    pub fn with_scope(mut self, scope: NamespaceScope) -> Self {
        self.scope = scope;
        self
    }

    /// The namespaces managed.
    pub fn scope(&self) -> &NamespaceScope {
        &self.scope
    }

    /// The Event recorder (built once, not per reconcile).
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }
}

/// A reconcile loop: what it reconciles, how, and the [`Plumbing`] it
/// runs with.
pub trait Reconcile: Send + Sync + 'static {
    /// The kind the loop reconciles (watched through a [`DeserializeGuard`]).
    type Object: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static;
    /// Why a reconcile failed.
    type Error: LoopError;

    /// The plumbing of this loop.
    fn plumbing(&self) -> &Plumbing;

    /// Reconciles one valid, managed object.
    fn reconcile(
        &self,
        object: &Self::Object,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;
}

/// A loop's error: its [`Categorized`] category (the backoff, `/healthz`)
/// and the step of the reconcile that failed (the `step` label of
/// `reconcile_errors_total` and a field of the error's log line).
pub trait LoopError: Categorized + std::error::Error + Send + Sync + 'static {
    /// The step that failed, as a metric label value (`get`,
    /// `patch_status`, …): each loop's error has one variant per step.
    fn step(&self) -> &'static str;
}

/// Runs `controller` (the loop's watches) with `reconciler` until
/// `shutdown`: at most `concurrency` reconciles at once (at least one),
/// each through the guarded shell of the module docs.
pub async fn run<R: Reconcile>(
    controller: Controller<DeserializeGuard<R::Object>>,
    reconciler: Arc<R>,
    concurrency: u16,
    shutdown: CancellationToken,
) {
    let observer = reconciler.clone();
    controller
        .with_config(Config::default().concurrency(concurrency.max(1)))
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(guarded::<R>, error_policy::<R>, reconciler)
        .for_each(move |outcome| {
            let plumbing = observer.plumbing();
            plumbing.backoff.observe(&outcome, &plumbing.progress);
            std::future::ready(())
        })
        .await;
}

/// managed → valid → tracked → forget (see the module docs).
async fn guarded<R: Reconcile>(
    guard: Arc<DeserializeGuard<R::Object>>,
    reconciler: Arc<R>,
) -> Result<Action, R::Error> {
    let plumbing = reconciler.plumbing();
    if !managed(&guard, &plumbing.scope) {
        return Ok(Action::requeue(UNMANAGED_RECHECK));
    }
    tracked(&plumbing.progress, guard.as_ref(), async {
        let Some(object) = valid_or_report(&guard, &plumbing.recorder, &plumbing.metrics).await
        else {
            return Ok(Action::await_change());
        };
        let action = reconciler.reconcile(object).await?;
        plumbing.backoff.forget(&describe(object));
        Ok(action)
    })
    .await
}

/// The one error policy: counted, logged (both with the failed step),
/// retried after the backoff's pause.
fn error_policy<R: Reconcile>(
    guard: Arc<DeserializeGuard<R::Object>>,
    err: &R::Error,
    reconciler: Arc<R>,
) -> Action {
    let plumbing = reconciler.plumbing();
    plumbing
        .backoff
        .failed_reconcile(guard.as_ref(), err, err.step(), &plumbing.metrics)
}
