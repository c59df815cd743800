//! The controller side of offers.
//!
//! - Agent Jobs (labelled `handoff.dev/agent`): while a Job of agent A runs
//!   in project P, every offer still `Offered` to A in P is `Superseded`
//!   (reason `AgentActivated`, `supersededBy: job/<name>`), except the one
//!   the Job names in its `handoff.dev/offer` annotation, which becomes
//!   `Accepted`; when that Job succeeds the offer is `Completed`.
//! - Offers: if a crashed or raced offerer left more than one `Offered` in a
//!   slot, all but the highest-numbered are superseded (reason `NewOffer`).
//! - Retention: a terminal offer (`Completed`, `Rejected`, `Superseded`) is
//!   deleted once the retention has passed since `status.finishedAt` (its
//!   `creationTimestamp` when that is absent), judged by the injected
//!   [`Clock`]; until then it is requeued for that moment.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};

use handoff_core::api::{HandoffOffer, JobResult, OfferPhase, SupersedeReason};
use handoff_core::liveness::LoopProgress;
use handoff_core::names::{
    AGENT_LABEL, CONTROLLER_FIELD_MANAGER, OFFER_ANNOTATION, PROJECT_LABEL, SLOT_LABEL,
};
use handoff_core::offers::{seq_of, slot};
use handoff_core::schedule::jobs::job_result;
use handoff_core::time::{Clock, SystemClock};
use handoff_kube::cluster::NamespaceScope;
use handoff_kube::cluster::scoped;
use handoff_kube::loops::{
    Backoff, LoopMetrics, UNMANAGED_RECHECK, describe, managed, tracked, valid_or_report,
};
use handoff_kube::offers::{OfferError, OfferStore};

/// Default `--offer-retention`: how long terminal offers are kept.
pub(crate) const DEFAULT_OFFER_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// What the loops need.
pub struct Context {
    client: Client,
    active_selector: String,
    recorder: Recorder,
    metrics: Arc<LoopMetrics>,
    backoff: Backoff,
    clock: Arc<dyn Clock>,
    retention: Duration,
    progress: Arc<LoopProgress>,
    scope: NamespaceScope,
}

impl Context {
    /// A context acting with `client`; `active_selector` as for the bridge;
    /// Events reported as `reporter`; failures counted in `metrics`.
    pub fn new(
        client: Client,
        active_selector: &str,
        reporter: Reporter,
        metrics: Arc<LoopMetrics>,
    ) -> Self {
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            active_selector: active_selector.into(),
            metrics,
            backoff: Backoff::default(),
            clock: Arc::new(SystemClock),
            retention: DEFAULT_OFFER_RETENTION,
            progress: LoopProgress::new("offers", std::time::Duration::ZERO),
            scope: NamespaceScope::All,
        }
    }

    /// Terminal offers are kept for `retention`, judged by `clock`.
    pub fn with_retention(mut self, retention: Duration, clock: Arc<dyn Clock>) -> Self {
        self.retention = retention;
        self.clock = clock;
        self
    }

    /// Records progress in `progress` (the controller's, for `/healthz`).
    pub(crate) fn with_progress(mut self, progress: Arc<LoopProgress>) -> Self {
        self.progress = progress;
        self
    }

    /// Manages only the offers and Jobs of `scope`'s namespaces.
    pub(crate) fn with_scope(mut self, scope: NamespaceScope) -> Self {
        self.scope = scope;
        self
    }

    fn store(&self, namespace: &str) -> OfferStore {
        OfferStore::new(
            self.client.clone(),
            self.client.clone(),
            namespace,
            &self.active_selector,
            CONTROLLER_FIELD_MANAGER,
            self.clock.clone(),
        )
    }
}

/// Runs both loops until `shutdown` resolves (in `namespace`, or all).
pub async fn run(
    ctx: Arc<Context>,
    namespace: Option<&str>,
    concurrency: u16,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let jobs: Api<DeserializeGuard<Job>> = scoped(ctx.client.clone(), namespace);
    let offers: Api<DeserializeGuard<HandoffOffer>> = scoped(ctx.client.clone(), namespace);
    let config = kube::runtime::controller::Config::default().concurrency(concurrency);
    let job_loop = Controller::new(jobs, watcher::Config::default().labels(AGENT_LABEL))
        .with_config(config.clone())
        .graceful_shutdown_on(shutdown.clone().cancelled_owned())
        .run(reconcile_job, retry, ctx.clone())
        .for_each(|outcome| {
            ctx.backoff.observe(&outcome, &ctx.progress);
            std::future::ready(())
        });
    let offer_loop = Controller::new(offers, watcher::Config::default())
        .with_config(config)
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile_offer, retry, ctx.clone())
        .for_each(|outcome| {
            ctx.backoff.observe(&outcome, &ctx.progress);
            std::future::ready(())
        });
    futures::join!(job_loop, offer_loop);
}

/// The one backoff policy of [`handoff_kube::loops`].
fn retry<K: Resource<DynamicType = ()>>(
    object: Arc<DeserializeGuard<K>>,
    err: &OfferError,
    ctx: Arc<Context>,
) -> Action {
    ctx.backoff
        .failed_reconcile(object.as_ref(), err, &ctx.metrics)
}

/// Applies an agent Job's start or success to the agent's offers.
pub(crate) async fn reconcile_job(
    guard: Arc<DeserializeGuard<Job>>,
    ctx: Arc<Context>,
) -> Result<Action, OfferError> {
    if !managed(&guard, &ctx.scope) {
        return Ok(Action::requeue(UNMANAGED_RECHECK));
    }
    tracked(&ctx.progress, guard.as_ref(), async {
        let Some(job) = valid_or_report(&guard, &ctx.recorder, &ctx.metrics).await else {
            return Ok(Action::await_change());
        };
        let action = supersede_for_job(job, &ctx).await?;
        ctx.backoff.forget(&describe(job));
        Ok(action)
    })
    .await
}

async fn supersede_for_job(job: &Job, ctx: &Context) -> Result<Action, OfferError> {
    let labels = job.labels();
    let (Some(project), Some(agent)) = (labels.get(PROJECT_LABEL), labels.get(AGENT_LABEL)) else {
        return Ok(Action::await_change());
    };
    let namespace = job.namespace().unwrap_or_default();
    let store = ctx.store(&namespace);
    let named = job.annotations().get(OFFER_ANNOTATION).cloned();
    let job_name = job.name_any();
    let offers = store.slot_offers(&slot(project, agent)).await?;
    match job_result(job) {
        None => {
            for offer in offers.iter().filter(|o| o.phase() == OfferPhase::Offered) {
                if Some(offer.name_any()) == named {
                    store
                        .set_phase(offer, OfferPhase::Accepted, Some(&job_name))
                        .await?;
                } else {
                    store
                        .supersede(
                            offer,
                            &format!("job/{job_name}"),
                            SupersedeReason::AgentActivated,
                        )
                        .await?;
                }
            }
        }
        Some(JobResult::Succeeded) => {
            let accepted = offers.iter().filter(|o| Some(o.name_any()) == named);
            for offer in
                accepted.filter(|o| matches!(o.phase(), OfferPhase::Offered | OfferPhase::Accepted))
            {
                store
                    .set_phase(offer, OfferPhase::Completed, Some(&job_name))
                    .await?;
            }
        }
        Some(JobResult::Failed) => {}
    }
    Ok(Action::await_change())
}

/// Converges a slot to at most one `Offered` (the highest-numbered), and
/// deletes terminal offers past their retention.
pub(crate) async fn reconcile_offer(
    guard: Arc<DeserializeGuard<HandoffOffer>>,
    ctx: Arc<Context>,
) -> Result<Action, OfferError> {
    if !managed(&guard, &ctx.scope) {
        return Ok(Action::requeue(UNMANAGED_RECHECK));
    }
    tracked(&ctx.progress, guard.as_ref(), async {
        let Some(offer) = valid_or_report(&guard, &ctx.recorder, &ctx.metrics).await else {
            return Ok(Action::await_change());
        };
        let action = if offer.phase().is_terminal() {
            retain(offer, &ctx).await?
        } else {
            converge_slot(offer, &ctx).await?
        };
        ctx.backoff.forget(&describe(offer));
        Ok(action)
    })
    .await
}

/// When a terminal offer is due for deletion: `retention` after it became
/// terminal (`finishedAt`, else its creation). `None` for offers still in
/// play, and for those without either time.
pub(crate) fn retention_deadline(
    offer: &HandoffOffer,
    retention: Duration,
) -> Option<jiff::Timestamp> {
    if !offer.phase().is_terminal() {
        return None;
    }
    let finished = offer
        .status
        .as_ref()
        .and_then(|s| s.finished_at.as_ref())
        .or(offer.metadata.creation_timestamp.as_ref())?
        .0;
    let retention = jiff::SignedDuration::try_from(retention).ok()?;
    finished.checked_add(retention).ok()
}

/// Deletes a terminal offer past its retention, or requeues it for then.
async fn retain(offer: &HandoffOffer, ctx: &Context) -> Result<Action, OfferError> {
    let Some(deadline) = retention_deadline(offer, ctx.retention) else {
        return Ok(Action::await_change());
    };
    let now = ctx.clock.now();
    if now < deadline {
        let wait = now.duration_until(deadline).unsigned_abs();
        return Ok(Action::requeue(wait));
    }
    ctx.store(&offer.namespace().unwrap_or_default())
        .delete_finished(offer)
        .await?;
    tracing::info!(offer = %offer.name_any(), namespace = ?offer.namespace(), phase = ?offer.phase(), "deleted a finished offer past its retention");
    Ok(Action::await_change())
}

async fn converge_slot(offer: &HandoffOffer, ctx: &Context) -> Result<Action, OfferError> {
    if offer.phase() != OfferPhase::Offered {
        return Ok(Action::await_change());
    }
    let Some(slot) = offer.labels().get(SLOT_LABEL).cloned() else {
        return Ok(Action::await_change());
    };
    let store = ctx.store(&offer.namespace().unwrap_or_default());
    let pending: Vec<HandoffOffer> = store
        .slot_offers(&slot)
        .await?
        .into_iter()
        .filter(|o| o.phase() == OfferPhase::Offered)
        .collect();
    let Some(newest) = pending
        .iter()
        .max_by_key(|o| seq_of(&o.name_any(), &slot))
        .map(|o| o.name_any())
    else {
        return Ok(Action::await_change());
    };
    for old in pending.iter().filter(|o| o.name_any() != newest) {
        store
            .supersede(old, &newest, SupersedeReason::NewOffer)
            .await?;
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::api::{HandoffOfferSpec, HandoffOfferStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn offer(phase: Option<OfferPhase>, created: &str, finished: Option<&str>) -> HandoffOffer {
        let mut offer = HandoffOffer::new(
            "o-1",
            HandoffOfferSpec {
                project: "shop".into(),
                to: "dev-lead".into(),
                from_key: "k".into(),
                session: None,
                artifact: None,
                body: None,
            },
        );
        let at = |t: &str| Time(t.parse().expect("timestamp"));
        offer.metadata.creation_timestamp = Some(at(created));
        offer.status = Some(HandoffOfferStatus {
            phase,
            finished_at: finished.map(at),
            ..Default::default()
        });
        offer
    }

    #[test]
    fn retention_counts_from_the_end_else_from_the_creation() {
        let day = Duration::from_secs(86_400);
        let t = |s: &str| Some(s.parse::<jiff::Timestamp>().expect("timestamp"));
        // (phase, created, finishedAt) → deadline
        let cases = [
            (
                Some(OfferPhase::Rejected),
                "2026-01-01T00:00:00Z",
                Some("2026-01-03T00:00:00Z"),
                t("2026-01-04T00:00:00Z"),
            ),
            (
                Some(OfferPhase::Superseded),
                "2026-01-01T00:00:00Z",
                None,
                t("2026-01-02T00:00:00Z"),
            ),
            (
                Some(OfferPhase::Completed),
                "2026-01-01T00:00:00Z",
                Some("2026-01-01T12:00:00Z"),
                t("2026-01-02T12:00:00Z"),
            ),
            (
                Some(OfferPhase::Offered),
                "2026-01-01T00:00:00Z",
                None,
                None,
            ),
            (
                Some(OfferPhase::Accepted),
                "2026-01-01T00:00:00Z",
                None,
                None,
            ),
            (None, "2026-01-01T00:00:00Z", None, None),
        ];
        for (phase, created, finished, want) in cases {
            assert_eq!(
                retention_deadline(&offer(phase, created, finished), day),
                want,
                "{phase:?} {created} {finished:?}"
            );
        }
    }
}
