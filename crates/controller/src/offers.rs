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

use std::future::Future;

use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::Reporter;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

use handoff_core::api::{HandoffOffer, JobResult, OfferPhase, SupersedeReason};
use handoff_core::liveness::LoopProgress;
use handoff_core::names::{
    AGENT_LABEL, CONTROLLER_FIELD_MANAGER, OFFER_ANNOTATION, PROJECT_LABEL, SLOT_LABEL,
};
use handoff_core::offers::{seq_of, slot};
use handoff_core::schedule::jobs::job_result;
use handoff_core::time::{Clock, SystemClock};
use handoff_kube::cluster::scoped;
use handoff_kube::loops::LoopMetrics;
use handoff_kube::offers::{OfferError, OfferStore};
use handoff_kube::runner::{self, Plumbing, Reconcile};

/// Default `--offer-retention`: how long terminal offers are kept.
pub(crate) const DEFAULT_OFFER_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// What the loops need besides the runner's [`Plumbing`] (one for both:
/// they report as one `offers` loop).
pub struct Context {
    client: Client,
    active_selector: String,
    clock: Arc<dyn Clock>,
    retention: Duration,
    plumbing: Plumbing,
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
            plumbing: Plumbing::new(
                client.clone(),
                reporter,
                LoopProgress::new("offers", Duration::ZERO),
                metrics,
            ),
            client,
            active_selector: active_selector.into(),
            clock: Arc::new(SystemClock),
            retention: DEFAULT_OFFER_RETENTION,
        }
    }

    /// Terminal offers are kept for `retention`, judged by `clock`.
    pub fn with_retention(mut self, retention: Duration, clock: Arc<dyn Clock>) -> Self {
        self.retention = retention;
        self.clock = clock;
        self
    }

    /// Runs with `plumbing` (the controller's progress, metrics and scope).
    pub(crate) fn with_plumbing(mut self, plumbing: Plumbing) -> Self {
        self.plumbing = plumbing;
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

/// The agent Job loop.
struct Jobs(Arc<Context>);

/// The offer loop.
struct Offers(Arc<Context>);

impl Reconcile for Jobs {
    type Object = Job;
    type Error = OfferError;

    fn plumbing(&self) -> &Plumbing {
        &self.0.plumbing
    }

    /// Applies an agent Job's start or success to the agent's offers.
    fn reconcile(&self, job: &Job) -> impl Future<Output = Result<Action, OfferError>> + Send {
        supersede_for_job(job, &self.0)
    }
}

impl Reconcile for Offers {
    type Object = HandoffOffer;
    type Error = OfferError;

    fn plumbing(&self) -> &Plumbing {
        &self.0.plumbing
    }

    /// Converges a slot to at most one `Offered` (the highest-numbered),
    /// and deletes terminal offers past their retention.
    async fn reconcile(&self, offer: &HandoffOffer) -> Result<Action, OfferError> {
        if offer.phase().is_terminal() {
            retain(offer, &self.0).await
        } else {
            converge_slot(offer, &self.0).await
        }
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
    let job_loop = runner::run(
        Controller::new(jobs, watcher::Config::default().labels(AGENT_LABEL)),
        Arc::new(Jobs(ctx.clone())),
        concurrency,
        shutdown.clone(),
    );
    let offer_loop = runner::run(
        Controller::new(offers, watcher::Config::default()),
        Arc::new(Offers(ctx)),
        concurrency,
        shutdown,
    );
    futures::join!(job_loop, offer_loop);
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
