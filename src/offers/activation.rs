//! The controller side of offers.
//!
//! - Agent Jobs (labelled `handoff.dev/agent`): while a Job of agent A runs
//!   in project P, every offer still `Offered` to A in P is `Superseded`
//!   (reason `AgentActivated`, `supersededBy: job/<name>`), except the one
//!   the Job names in its `handoff.dev/offer` annotation, which becomes
//!   `Accepted`; when that Job succeeds the offer is `Completed`.
//! - Offers: if a crashed or raced offerer left more than one `Offered` in a
//!   slot, all but the highest-numbered are superseded (reason `NewOffer`).

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};

use super::decision::{seq_of, slot};
use super::store::{OfferError, OfferStore};
use crate::api::{HandoffOffer, JobResult, OfferPhase, SupersedeReason};
use crate::cluster::scoped;
use crate::liveness::LoopProgress;
use crate::loops::{Backoff, LoopMetrics, describe, tracked, valid_or_report};
use crate::names::{
    AGENT_LABEL, CONTROLLER_FIELD_MANAGER, OFFER_ANNOTATION, PROJECT_LABEL, SLOT_LABEL,
};
use crate::schedule::jobs::job_result;

/// What the loops need.
pub struct Context {
    client: Client,
    active_selector: String,
    recorder: Recorder,
    metrics: Arc<LoopMetrics>,
    backoff: Backoff,
    progress: Arc<LoopProgress>,
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
            progress: LoopProgress::new("offers", std::time::Duration::ZERO),
        }
    }

    /// Records progress in `progress` (the controller's, for `/healthz`).
    pub fn with_progress(mut self, progress: Arc<LoopProgress>) -> Self {
        self.progress = progress;
        self
    }

    fn store(&self, namespace: &str) -> OfferStore {
        OfferStore::new(
            self.client.clone(),
            self.client.clone(),
            namespace,
            &self.active_selector,
            CONTROLLER_FIELD_MANAGER,
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

/// The one backoff policy of [`crate::loops`].
fn retry<K: Resource<DynamicType = ()>>(
    object: Arc<DeserializeGuard<K>>,
    err: &OfferError,
    ctx: Arc<Context>,
) -> Action {
    ctx.backoff
        .failed_reconcile(object.as_ref(), err, &ctx.metrics)
}

/// Applies an agent Job's start or success to the agent's offers.
pub async fn reconcile_job(
    guard: Arc<DeserializeGuard<Job>>,
    ctx: Arc<Context>,
) -> Result<Action, OfferError> {
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

/// Converges a slot to at most one `Offered`: the highest-numbered.
pub async fn reconcile_offer(
    guard: Arc<DeserializeGuard<HandoffOffer>>,
    ctx: Arc<Context>,
) -> Result<Action, OfferError> {
    tracked(&ctx.progress, guard.as_ref(), async {
        let Some(offer) = valid_or_report(&guard, &ctx.recorder, &ctx.metrics).await else {
            return Ok(Action::await_change());
        };
        let action = converge_slot(offer, &ctx).await?;
        ctx.backoff.forget(&describe(offer));
        Ok(action)
    })
    .await
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
